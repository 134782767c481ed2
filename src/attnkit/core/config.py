"""Run configuration: YAML recipes -> typed, validated dataclasses.

A recipe has four sections, ``data``, ``tokenizer``, ``model`` and ``training``, plus the
``task`` name (a key of the task registry, ``attnkit.tasks``: ``classify``, ``translate``,
``chat``, ``mlm``). The ``model`` section is read by the config dataclass of the task's model
family and the chosen ``arch`` (``attnkit.models``): each family declares its own settings,
defaults and checks. Every key is checked: a typo is an error that names the key and suggests
the closest valid one. ``--set training.lr=3e-4`` style overrides are applied before
validation.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import reprlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from attnkit.core.errors import ConfigError
from attnkit.data.tokenization import TRUNCATION

__all__ = [
    "ConfigError",
    "DataConfig",
    "RunConfig",
    "TokenizerConfig",
    "TrainingConfig",
    "apply_overrides",
    "build_dataclass",
    "check",
    "load_config",
    "require",
    "short_repr",
]

# data.label_unit of task tag: what one label sits on (attnkit.tasks.tag.word_unit)
LABEL_UNITS = ("word", "piece", "char")


@dataclass
class DataConfig:
    name: str = "nsmc"  # catalogue name ("nsmc", "imdb", "multi30k", "chatbot-ko") or "file"
    train: str | None = None  # name "file": CSV/TSV/JSONL; translate: TSV or PREFIX
    validation: str | None = None
    test: str | None = None
    text_column: str = "text"
    pair_column: str | None = None  # classify, name file: a second sentence (pair tasks)
    label_column: str = "label"
    val_fraction: float = 0.05  # held out from train when there is no validation file
    val_split: str = "random"  # random | last: the last val_fraction of each class, in file order
    max_len: int = 128  # tokens per example (longer ones are truncated)
    truncation: str = "head"  # which part of a longer text is kept: head | tail | head+tail
    limit: int | None = None  # a seeded random subset of N training examples (quick runs)
    extra_train: str | None = None  # classify: more labelled texts (e.g. pseudo-labels) for
    # training only, added after the validation split; texts of the dataset's splits dropped
    data_dir: str | None = None
    mask_prob: float = 0.15  # mlm: share of tokens the model must predict (BERT: 15%)
    whole_word_mask: bool = False  # bert-pretrain: mask every piece of a chosen word
    doc_stride: int = 128  # qa: tokens between the starts of consecutive context windows
    max_question_len: int = 64  # qa: question tokens kept (longer questions are cut)
    max_answer_len: int = 30  # qa: longest answer span (tokens) decoding considers
    label_unit: str | None = None  # tag: word (CoNLL, file) | piece or char (klue-ner; piece)
    src_lang: str = "de"  # translate: multi30k direction; suffixes of aligned user files
    tgt_lang: str = "en"


@dataclass
class TokenizerConfig:
    kind: str = "wordpiece"  # wordpiece | bpe | char
    vocab_size: int = 16000
    min_frequency: int = 2
    lowercase: bool = False
    path: str | None = None  # an existing tokenizer.json instead of training one


@dataclass
class TrainingConfig:
    epochs: int = 3
    max_steps: int | None = None  # stop after this many optimizer steps (overrides epochs)
    batch_size: int = 64
    max_tokens: int | None = None  # token-budget batching instead of batch_size
    lr: float = 5e-4
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.98)
    schedule: str = "linear"  # constant | linear | cosine | noam
    warmup_steps: int | None = None
    warmup_ratio: float = 0.05
    clip_grad_norm: float | None = 1.0
    grad_accum: int = 1
    label_smoothing: float = 0.0
    teacher_forcing_ratio: float = 1.0  # seq2seq LSTM: probability of feeding the gold token
    device: str = (
        "auto"  # auto | cpu | cuda | cuda:N | mps (auto: CUDA if present, else MPS, else CPU)
    )
    # bf16 autocast: auto = on where the device computes bf16 natively (CUDA >= 8.0, a CPU
    # with avx512_bf16/amx_bf16), off elsewhere; true where it is emulated is ~20x slower
    bf16: bool | str = "auto"
    fp16: bool = False  # fp16 autocast with a GradScaler (CUDA only)
    compile: bool = False  # torch.compile the model (the first steps are slow while it compiles)
    eval_every: int | None = None  # optimizer steps between evaluations (None: every epoch)
    save_every: int | None = None  # steps between resumable checkpoints (None: at each eval)
    patience: int | None = None  # early stopping: evaluations without improvement
    log_every: int = 50
    seed: int = 0
    num_threads: int | None = None
    progress: bool = True


# The settings of the single, flat model section of the first run format (before each
# model family had its own config): keys of other families are ignored in such runs.
FIRST_FORMAT_MODEL_KEYS = frozenset(
    [
        "arch",
        "d_model",
        "num_heads",
        "d_ff",
        "num_layers",
        "dropout",
        "attention_dropout",
        "pooling",
        "positional",
        "norm_first",
        "activation",
        "objective",
        "generator_d_model",
        "rtd_weight",
        "init_from",
        "hidden_size",
        "bidirectional",
        "ngram_max",
        "num_buckets",
        "nb_weighting",
        "preset",
        "num_decoder_layers",
        "share_embeddings",
        "tie_output",
        "attention",
        "emb_dim",
    ]
)


@dataclass
class RunConfig:
    """A whole recipe. ``model`` is the config dataclass of the model family the task trains
    and of the recipe's ``model.arch`` (``attnkit.models.config_class``)."""

    task: str = "classify"
    data: DataConfig = field(default_factory=DataConfig)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    model: Any = None  # a ModelConfig subclass instance; the task's default arch if None
    training: TrainingConfig = field(default_factory=TrainingConfig)

    def __post_init__(self) -> None:
        if self.model is None:
            self.model = _model_section(self.task, {}, "recipe")

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "data": dataclasses.asdict(self.data),
            "tokenizer": dataclasses.asdict(self.tokenizer),
            "model": self.model.to_dict(),
            "training": dataclasses.asdict(self.training),
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any], source: str = "recipe") -> RunConfig:
        """Build and validate a run config. ``source``: "recipe" (what a user writes: the
        sizes a task derives from the data, like ``model.vocab_size``, are refused), "run"
        (a run's config.json) or "first-format run" (one written before per-model configs:
        settings of other model families in its flat model section are ignored)."""
        if not isinstance(raw, dict):
            raise ConfigError(f"config must be a mapping, got {type(raw).__name__}")
        sections = {k: v for k, v in raw.items() if k in _SECTIONS}
        unknown = [k for k in raw if k not in _SECTIONS]
        if unknown:
            key = str(unknown[0])
            raise ConfigError(
                f"unknown config key {short_repr(key)}{suggest(key, list(_SECTIONS))}"
            )
        task = sections.get("task", "classify")
        if not isinstance(task, str):
            raise ConfigError(f"task must be str, got {short_repr(task)}")
        if len(task) > 100:
            raise ConfigError(f"unknown task {short_repr(task)}")
        from attnkit.tasks import get_task

        spec = get_task(task)
        cfg = cls(
            task=task,
            data=build_dataclass(DataConfig, sections.get("data", {}), "data."),
            tokenizer=build_dataclass(TokenizerConfig, sections.get("tokenizer", {}), "tokenizer."),
            model=_model_section(task, sections.get("model", {}), source),
            training=build_dataclass(TrainingConfig, sections.get("training", {}), "training."),
        )
        _validate(cfg)
        cfg.model.validate()
        if source == "recipe":  # a saved run passed these when it started; code may be stricter now
            spec.validate(cfg)
        return cfg


_SECTIONS = ("task", "data", "tokenizer", "model", "training")


def _model_section(task: str, raw: Any, source: str) -> Any:
    """The ``model:`` section as the config class of the task's family and the chosen arch."""
    from attnkit.models import config_class
    from attnkit.tasks import get_task

    if not isinstance(raw, dict):
        raise ConfigError(f"model must be a mapping, got {type(raw).__name__}")
    spec = get_task(task)
    arch = raw.get("arch", spec.default_arch)
    if not isinstance(arch, str):
        raise ConfigError(f"model.arch must be str, got {short_repr(arch)}")
    if arch not in spec.archs():
        raise ConfigError(spec.arch_error(arch))
    cls = config_class(spec.model_family, arch)
    if source == "recipe":
        _refuse_sibling_keys(raw, cls, spec.archs(), spec.model_family, arch)
    return cls.from_dict(
        raw,
        allow_derived=source != "recipe",
        ignore=FIRST_FORMAT_MODEL_KEYS if source == "first-format run" else frozenset(),
    )


def _refuse_sibling_keys(
    raw: dict[str, Any], cls: type, archs: list[str], family: str, arch: str
) -> None:
    """A key that another arch of the same family has (``num_heads`` in a gru classifier's
    section, say, after ``--set model.arch=gru`` on a Transformer recipe) is named as such,
    rather than suggesting a look-alike key of this arch."""
    from attnkit.models import config_class

    own = {f.name for f in dataclasses.fields(cls)}
    for key in raw:
        if key in own or key in getattr(cls, "KEY_HINTS", {}):
            continue
        owners = [
            a
            for a in archs
            if a != arch and key in {f.name for f in dataclasses.fields(config_class(family, a))}
        ]
        if owners:
            raise ConfigError(
                f"model.{key} is a setting of arch {' / '.join(owners)}, not "
                f"{arch}: remove it (or choose model.arch {owners[0]})"
            )


def suggest(key: str, valid: list[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest valid key, else the list of valid keys."""
    close = difflib.get_close_matches(key, valid, n=1) if len(key) <= 100 else []
    return f" (did you mean {close[0]!r}?)" if close else f" (valid: {', '.join(valid)})"


_REPR = reprlib.Repr()
_REPR.maxlevel = 2
_REPR.maxlist = _REPR.maxtuple = _REPR.maxset = _REPR.maxdict = 4
_REPR.maxstring = _REPR.maxother = _REPR.maxlong = 60


def short_repr(value: Any, limit: int = 60) -> str:
    """``repr(value)`` for an error message, at most ``limit`` characters (cut with "…").
    Bounded work: a huge or deeply nested value (a YAML alias bomb) is never repr'd in
    full."""
    try:
        text = _REPR.repr(value).replace("\n", "\\n")
    except Exception:  # e.g. an int too long to convert to text
        text = f"<{type(value).__name__}>"
    return _cut(text, limit)


def _cut(text: str, limit: int = 60) -> str:
    """``text`` cut to ``limit`` characters (with "…")."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def positive(where: str, value: Any, optional: bool = False) -> tuple[bool, str]:
    """``(ok, message)`` for ``check``: ``value > 0`` (or None when ``optional``)."""
    ok = (optional and value is None) or (value is not None and value > 0)
    return ok, f"{where} must be > 0, got {short_repr(value)}"


def at_least(where: str, value: Any, low: float, optional: bool = False) -> tuple[bool, str]:
    """``(ok, message)`` for ``check``: ``value >= low`` (or None when ``optional``)."""
    ok = (optional and value is None) or (value is not None and value >= low)
    when = " (or null)" if optional else ""
    return ok, f"{where} must be >= {low}{when}, got {short_repr(value)}"


def coerce(value: Any, annotation: str, where: str) -> Any:
    """Check/convert a YAML value against a dataclass field's annotation string. Floats
    must be finite (YAML's ``.nan`` and ``.inf`` are refused)."""
    optional = "None" in annotation
    if value is None:
        if optional:
            return None
        raise ConfigError(f"{where} must not be null")
    base = annotation.replace(" | None", "").strip()
    try:
        if base == "bool":
            if not isinstance(value, bool):
                raise TypeError
            return value
        if base == "bool | str":  # a switch that also takes "auto"
            if isinstance(value, str) and value.strip().lower() == "auto":
                return "auto"
            if not isinstance(value, bool):
                raise ConfigError(f"{where} must be true, false or auto, got {short_repr(value)}")
            return value
        if base == "int":
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise TypeError
            if isinstance(value, str) and len(value) > 100:
                raise TypeError
            return int(value)
        if base == "float":
            if isinstance(value, bool) or (isinstance(value, str) and len(value) > 100):
                raise TypeError
            number = float(value)
            if not math.isfinite(number):
                raise ConfigError(f"{where} must be a finite number, got {short_repr(value)}")
            return number
        if base == "str":
            if not isinstance(value, str):
                raise TypeError
            return value
        if base.startswith("tuple"):
            if not isinstance(value, (list, tuple)) or len(value) > 100:
                raise TypeError
            return tuple(coerce(v, "float", f"{where}[{i}]") for i, v in enumerate(value))
    except (TypeError, ValueError, OverflowError) as exc:
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(f"{where} must be {base}, got {short_repr(value)}") from None
    return value


def build_dataclass(
    cls: type,
    raw: Any,
    prefix: str,
    hints: dict[str, str] | None = None,
    ignore: frozenset[str] = frozenset(),
) -> Any:
    """``cls(**raw)`` with every key checked (unknown -> the closest valid one, or ``hints``'
    message for a key that belongs elsewhere; keys in ``ignore`` are skipped) and every
    value coerced to its field's type. Raises ``ConfigError`` with a one-line message."""
    if not isinstance(raw, dict):
        raise ConfigError(
            f"{prefix.rstrip('.') or 'config'} must be a mapping, got {type(raw).__name__}"
        )
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    kwargs = {}
    for key, value in raw.items():
        where = f"{prefix}{key}"
        if key not in fields:
            if key in ignore:
                continue
            if hints and key in hints:
                raise ConfigError(hints[key])
            raise ConfigError(
                f"unknown config key {short_repr(where)}{suggest(str(key), list(fields))}"
            )
        kwargs[key] = coerce(value, str(fields[key].type), where)
    return cls(**kwargs)


def _validate(cfg: RunConfig) -> None:
    """Checks of the data, tokenizer and training sections (the model's own config and the
    task check the rest): one message per key, naming it and the value."""
    from attnkit.models.sizes import MAX_LEN  # (the model's positions bound data.max_len)

    t, d, tok = cfg.training, cfg.data, cfg.tokenizer
    betas = t.betas
    check(
        (
            t.schedule in ("constant", "linear", "cosine", "noam"),
            "training.schedule must be constant|linear|cosine|noam",
        ),
        (tok.kind in ("wordpiece", "bpe", "char"), "tokenizer.kind must be wordpiece|bpe|char"),
        positive("tokenizer.vocab_size", tok.vocab_size),
        positive("tokenizer.min_frequency", tok.min_frequency),
        positive("training.lr", t.lr),
        positive("training.batch_size", t.batch_size),
        positive("training.grad_accum", t.grad_accum),
        positive("training.max_tokens", t.max_tokens, optional=True),
        at_least("training.epochs", t.epochs, 1),
        at_least("training.max_steps", t.max_steps, 1, optional=True),
        at_least("training.warmup_steps", t.warmup_steps, 0, optional=True),
        (
            0.0 <= t.warmup_ratio < 1.0,
            f"training.warmup_ratio must be in [0, 1), got {short_repr(t.warmup_ratio)}",
        ),
        at_least("training.weight_decay", t.weight_decay, 0),
        at_least("training.clip_grad_norm", t.clip_grad_norm, 0, optional=True),
        (
            len(betas) == 2 and all(0.0 <= b < 1.0 for b in betas),
            f"training.betas must be two numbers in [0, 1), got {short_repr(list(betas))}",
        ),
        at_least("training.eval_every", t.eval_every, 1, optional=True),
        at_least("training.save_every", t.save_every, 1, optional=True),
        at_least("training.patience", t.patience, 1, optional=True),
        at_least("training.log_every", t.log_every, 1),
        at_least("training.num_threads", t.num_threads, 1, optional=True),
        (not (t.bf16 is True and t.fp16), "training.bf16 and training.fp16 exclude each other"),
        (d.max_len > 1, f"data.max_len must be > 1, got {short_repr(d.max_len)}"),
        (d.max_len <= MAX_LEN, f"data.max_len must be <= {MAX_LEN}, got {short_repr(d.max_len)}"),
        (d.truncation in TRUNCATION, f"data.truncation must be {'|'.join(TRUNCATION)}"),
        (
            0.0 <= d.val_fraction < 1.0,
            f"data.val_fraction must be in [0, 1), got {short_repr(d.val_fraction)}",
        ),
        (d.val_split in ("random", "last"), "data.val_split must be random|last"),
        at_least("data.limit", d.limit, 1, optional=True),
        at_least("data.doc_stride", d.doc_stride, 1),
        at_least("data.max_question_len", d.max_question_len, 1),
        at_least("data.max_answer_len", d.max_answer_len, 1),
        (
            d.label_unit in (None, *LABEL_UNITS),
            f"data.label_unit must be {'|'.join(LABEL_UNITS)}, got {short_repr(d.label_unit)}",
        ),
        (
            d.limit is None or d.limit >= 2 or d.val_fraction == 0 or d.validation is not None,
            f"data.limit: {d.limit} leaves no example to hold out for validation "
            f"(data.val_fraction {d.val_fraction}); set data.limit >= 2 or data.val_fraction: 0",
        ),
        (
            0.0 < d.mask_prob < 1.0,
            f"data.mask_prob must be in (0, 1), got {short_repr(d.mask_prob)}",
        ),
        (
            0.0 <= t.label_smoothing < 1.0,
            f"training.label_smoothing must be in [0, 1), got {short_repr(t.label_smoothing)}",
        ),
    )


def require(ok: bool, message: str) -> None:
    """Raise ``ConfigError(message)`` unless ``ok``."""
    if not ok:
        raise ConfigError(message)


def check(*conditions: tuple[bool, str]) -> None:
    """``require`` each ``(ok, message)`` in turn: the first that fails raises."""
    for ok, message in conditions:
        require(ok, message)


class _RecipeLoader(yaml.SafeLoader):
    """YAML's safe loading, except that a key given twice in one mapping is an error (plain
    YAML keeps the last value silently). Merge keys (``<<: *base``) may still be overridden."""

    def __init__(self, stream: str, source: str) -> None:
        super().__init__(stream)
        self.source = source
        self.sections: dict[int, str] = {}  # id(mapping node) -> its dotted section name

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            section = self.sections.get(id(node), "")
            seen: set[Any] = set()
            for key_node, value_node in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    duplicate = key in seen
                    seen.add(key)
                except TypeError:  # unhashable: the base class reports it
                    continue
                if duplicate:
                    where = f"section {section} of {self.source}" if section else self.source
                    raise ConfigError(
                        f"duplicate key {short_repr(key)} in {where}, "
                        f"line {key_node.start_mark.line + 1}"
                    )
                if isinstance(value_node, yaml.MappingNode):
                    name = f"{section}.{key}" if section else str(key)
                    self.sections.setdefault(id(value_node), _cut(name))
        return super().construct_mapping(node, deep=deep)


def parse_yaml(text: str, source: str) -> Any:
    """``yaml.safe_load(text)``, refusing duplicate keys (``ConfigError`` naming ``source``,
    the section and the line)."""
    loader = _RecipeLoader(text, source)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


# what a malformed document can raise while it is read (besides yaml.YAMLError): a
# timestamp or integer PyYAML cannot convert, nesting deeper than the recursion limit
_PARSE_ERRORS = (yaml.YAMLError, UnicodeDecodeError, ValueError, RecursionError)


def apply_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``section.key=value`` strings (values parsed as YAML) to a raw config dict."""
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"--set expects key=value, got {short_repr(item)}")
        dotted, text = item.split("=", 1)
        try:
            value = parse_yaml(text, f"--set {_cut(dotted)}")
        except ConfigError:
            raise
        except _PARSE_ERRORS:
            value = text
        node = raw
        parts = dotted.strip().split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"--set {_cut(dotted)}: {short_repr(part)} is not a section")
        node[parts[-1]] = value
    return raw


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> RunConfig:
    """Read a YAML (or JSON) recipe, apply overrides, validate."""
    raw: dict[str, Any] = {}
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"config file not found: {path}")
        try:
            raw = parse_yaml(path.read_text(encoding="utf-8"), str(path)) or {}
        except ConfigError:
            raise
        except _PARSE_ERRORS as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ConfigError(f"cannot parse {path}: {_cut(first, 200)}") from None
        if not isinstance(raw, dict):
            raise ConfigError(f"{path} must contain a mapping of sections")
    return RunConfig.from_dict(apply_overrides(raw, overrides or []))

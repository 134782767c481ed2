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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from attnkit.errors import ConfigError
from attnkit.tokenization import TRUNCATION

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
]


@dataclass
class DataConfig:
    name: str = "nsmc"  # catalogue name ("nsmc", "imdb", "multi30k", "chatbot-ko") or "file"
    train: str | None = None  # name "file": CSV/TSV/JSONL; translate: TSV or PREFIX
    validation: str | None = None
    test: str | None = None
    text_column: str = "text"
    label_column: str = "label"
    val_fraction: float = 0.05  # held out from train when there is no validation file
    val_split: str = "random"  # random | last: the last val_fraction of each class, in file order
    max_len: int = 128  # tokens per example (longer ones are truncated)
    truncation: str = "head"  # which part of a longer text is kept: head | tail | head+tail
    limit: int | None = None  # a seeded random subset of N training examples (quick runs)
    data_dir: str | None = None
    mask_prob: float = 0.15  # mlm: share of tokens the model must predict (BERT: 15%)
    src_lang: str = "de"  # translate: multi30k direction; suffixes of aligned user files
    tgt_lang: str = "en"


@dataclass
class TokenizerConfig:
    kind: str = "wordpiece"  # wordpiece | bpe
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
    bf16: bool = False  # bf16 autocast on CPU and CUDA (a CPU needs hardware bf16 to be faster)
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
            raise ConfigError(f"unknown config key {key!r}{suggest(key, list(_SECTIONS))}")
        task = sections.get("task", "classify")
        if not isinstance(task, str):
            raise ConfigError(f"task must be str, got {task!r}")
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
    if arch not in spec.archs():
        raise ConfigError(spec.arch_error(arch))
    cls = config_class(spec.model_family, arch)
    return cls.from_dict(
        raw,
        allow_derived=source != "recipe",
        ignore=FIRST_FORMAT_MODEL_KEYS if source == "first-format run" else frozenset(),
    )


def suggest(key: str, valid: list[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest valid key, else the list of valid keys."""
    close = difflib.get_close_matches(key, valid, n=1)
    return f" (did you mean {close[0]!r}?)" if close else f" (valid: {', '.join(valid)})"


def coerce(value: Any, annotation: str, where: str) -> Any:
    """Check/convert a YAML value against a dataclass field's annotation string."""
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
        if base == "int":
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise TypeError
            return int(value)
        if base == "float":
            if isinstance(value, bool):
                raise TypeError
            return float(value)
        if base == "str":
            if not isinstance(value, str):
                raise TypeError
            return value
        if base.startswith("tuple"):
            return tuple(float(v) for v in value)
    except (TypeError, ValueError):
        raise ConfigError(f"{where} must be {base}, got {value!r}") from None
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
            raise ConfigError(f"unknown config key {where!r}{suggest(str(key), list(fields))}")
        kwargs[key] = coerce(value, str(fields[key].type), where)
    return cls(**kwargs)


def _validate(cfg: RunConfig) -> None:
    """Checks of the data, tokenizer and training sections (the model's own config and the
    task check the rest)."""
    t, d = cfg.training, cfg.data
    checks = [
        (
            t.schedule in ("constant", "linear", "cosine", "noam"),
            "training.schedule must be constant|linear|cosine|noam",
        ),
        (cfg.tokenizer.kind in ("wordpiece", "bpe"), "tokenizer.kind must be wordpiece|bpe"),
        (t.lr > 0, "training.lr must be > 0"),
        (
            t.batch_size > 0 and t.grad_accum > 0 and t.epochs > 0,
            "training.batch_size, grad_accum and epochs must be > 0",
        ),
        (not (t.bf16 and t.fp16), "training.bf16 and training.fp16 exclude each other"),
        (d.max_len > 1, "data.max_len must be > 1"),
        (d.truncation in TRUNCATION, f"data.truncation must be {'|'.join(TRUNCATION)}"),
        (0.0 <= d.val_fraction < 1.0, "data.val_fraction must be in [0, 1)"),
        (d.val_split in ("random", "last"), "data.val_split must be random|last"),
        (0.0 <= t.label_smoothing < 1.0, "training.label_smoothing must be in [0, 1)"),
    ]
    check(*checks)


def require(ok: bool, message: str) -> None:
    """Raise ``ConfigError(message)`` unless ``ok``."""
    if not ok:
        raise ConfigError(message)


def check(*conditions: tuple[bool, str]) -> None:
    """``require`` each ``(ok, message)`` in turn: the first that fails raises."""
    for ok, message in conditions:
        require(ok, message)


def apply_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``section.key=value`` strings (values parsed as YAML) to a raw config dict."""
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"--set expects key=value, got {item!r}")
        dotted, text = item.split("=", 1)
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError:
            value = text
        node = raw
        parts = dotted.strip().split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"--set {dotted}: {part!r} is not a section")
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
            raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ConfigError(f"cannot parse {path}: {first}") from None
        if not isinstance(raw, dict):
            raise ConfigError(f"{path} must contain a mapping of sections")
    return RunConfig.from_dict(apply_overrides(raw, overrides or []))

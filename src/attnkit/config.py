"""Run configuration: YAML recipes -> typed, validated dataclasses.

A recipe has four sections, ``data``, ``tokenizer``, ``model`` and ``training``, plus the
``task`` name (``classify``, ``translate``, ``chat`` or ``mlm``). Every key is checked: a
typo is an error that names the key and suggests the closest valid one. ``--set
training.lr=3e-4`` style overrides are applied before validation.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from attnkit.tokenization import TRUNCATION

__all__ = [
    "ConfigError",
    "DataConfig",
    "ModelConfig",
    "RunConfig",
    "TokenizerConfig",
    "TrainingConfig",
    "apply_overrides",
    "load_config",
]


class ConfigError(ValueError):
    """A bad recipe: unknown key, wrong type, impossible value (one-line message)."""


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
    limit: int | None = None  # use a seeded random subset of N training examples (quick runs)
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
class ModelConfig:
    arch: str = "transformer"  # transformer | rnn | lstm | gru | ngram (bag of n-grams, NBSVM)
    d_model: int = 256
    num_heads: int = 4
    d_ff: int = 1024
    num_layers: int = 2
    dropout: float = 0.1
    attention_dropout: float | None = None  # on the attention weights; None: dropout
    pooling: str = "mean"  # mean | max | cls (| last for recurrent models)
    positional: str = "sinusoidal"  # sinusoidal | learned
    norm_first: bool = False
    activation: str = "gelu"
    objective: str = "mlm"  # task mlm: mlm (BERT's masked LM) | electra (replaced-token detection)
    generator_d_model: int | None = None  # electra: the generator's width (None: d_model // 4)
    rtd_weight: float = 50.0  # electra: weight of the discriminator's loss (the paper's lambda)
    init_from: str | None = None  # classify: a task-mlm run whose encoder (and tokenizer)
    # the classifier starts from; its sizes replace d_model / num_heads / d_ff / num_layers
    # (recurrent models: only the token embedding and d_model are taken)
    hidden_size: int = 256  # recurrent models
    bidirectional: bool = True  # recurrent models
    ngram_max: int = 2  # ngram: longest token n-gram (1: bag of tokens)
    num_buckets: int = 4194304  # ngram: hash buckets for the n-grams of 2+ tokens (2**22)
    nb_weighting: bool = True  # ngram: Naive Bayes feature scaling (NBSVM); false: logistic
    # sequence to sequence (task: translate | chat)
    preset: str | None = None  # small | base: d_model/num_heads/d_ff/num_layers (Transformer)
    num_decoder_layers: int | None = None  # None: same as num_layers
    share_embeddings: bool = False  # one embedding for source and target (joint vocabulary)
    tie_output: bool = True  # output projection = target embedding (Transformer)
    attention: str | None = None  # LSTM: None | dot | scaled_dot | general | concat | location
    emb_dim: int = 256  # LSTM embedding size


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
    bf16: bool = False  # bf16 autocast (CPU: needs hardware bf16 to be faster)
    eval_every: int | None = None  # optimizer steps between evaluations (None: every epoch)
    save_every: int | None = None  # steps between resumable checkpoints (None: at each eval)
    patience: int | None = None  # early stopping: evaluations without improvement
    log_every: int = 50
    seed: int = 0
    num_threads: int | None = None
    progress: bool = True


@dataclass
class RunConfig:
    task: str = "classify"
    data: DataConfig = field(default_factory=DataConfig)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    training: TrainingConfig = field(default_factory=TrainingConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> RunConfig:
        return _build(cls, raw, "")

    def save(self, path: str | Path, extra: dict[str, Any] | None = None) -> None:
        from attnkit.checkpoint import atomic_write_text

        payload = {**self.to_dict(), **(extra or {})}
        atomic_write_text(path, json.dumps(payload, indent=2, ensure_ascii=False) + "\n")


TASKS = ("classify", "translate", "chat", "mlm")
OBJECTIVES = ("mlm", "electra")  # task mlm's pretraining objectives
SEQ2SEQ_TASKS = ("translate", "chat")
SEQ2SEQ_DATA = ("multi30k", "chatbot-ko", "file")
PRESET_NAMES = ("small", "base")
# attnkit.attention.SCORE_NAMES, repeated here so that reading a config never imports torch
ATTENTION_SCORES = ("dot", "scaled_dot", "general", "concat", "location")


def _suggest(key: str, valid: list[str]) -> str:
    close = difflib.get_close_matches(key, valid, n=1)
    return f" (did you mean {close[0]!r}?)" if close else f" (valid: {', '.join(valid)})"


def _coerce(value: Any, annotation: str, where: str) -> Any:
    """Check/convert a YAML value against the dataclass field's annotation string."""
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


def _build(cls: type, raw: Any, prefix: str) -> Any:
    if not isinstance(raw, dict):
        raise ConfigError(
            f"{prefix.rstrip('.') or 'config'} must be a mapping, got {type(raw).__name__}"
        )
    fields = {f.name: f for f in dataclasses.fields(cls)}
    kwargs = {}
    for key, value in raw.items():
        where = f"{prefix}{key}"
        if key not in fields:
            raise ConfigError(f"unknown config key {where!r}{_suggest(str(key), list(fields))}")
        f = fields[key]
        factory = f.default_factory
        if factory is not dataclasses.MISSING and dataclasses.is_dataclass(factory):
            kwargs[key] = _build(factory, value, f"{where}.")
        else:
            kwargs[key] = _coerce(value, str(f.type), where)
    if cls is ModelConfig and kwargs.get("preset") is not None:
        _fill_preset(kwargs)
    cfg = cls(**kwargs)
    if cls is RunConfig:
        _validate(cfg)
    return cfg


def _fill_preset(kwargs: dict[str, Any]) -> None:
    """``model.preset``: the preset's sizes for every size key the recipe does not set
    (an explicit ``d_model`` etc. wins). The saved config holds the filled values."""
    name = kwargs["preset"]
    if name not in PRESET_NAMES:
        raise ConfigError(f"model.preset must be null or one of {', '.join(PRESET_NAMES)}")
    from attnkit.models.transformer import PRESETS

    preset = PRESETS[name]
    sizes = {
        "d_model": preset["d_model"],
        "num_heads": preset["num_heads"],
        "d_ff": preset["d_ff"],
        "num_layers": preset["num_encoder_layers"],
        "num_decoder_layers": preset["num_decoder_layers"],
    }
    for key, value in sizes.items():
        kwargs.setdefault(key, value)


def _validate(cfg: RunConfig) -> None:
    if cfg.task not in TASKS:
        raise ConfigError(f"unknown task {cfg.task!r} (valid: {', '.join(TASKS)})")
    t, m, d = cfg.training, cfg.model, cfg.data
    checks = [
        (
            t.schedule in ("constant", "linear", "cosine", "noam"),
            "training.schedule must be constant|linear|cosine|noam",
        ),
        (
            m.arch in ("transformer", "rnn", "lstm", "gru", "ngram"),
            "model.arch must be transformer|rnn|lstm|gru|ngram",
        ),
        (
            m.ngram_max >= 1 and m.num_buckets >= 1,
            "model.ngram_max and model.num_buckets must be >= 1",
        ),
        (m.pooling in ("mean", "max", "cls", "last"), "model.pooling must be mean|max|cls|last"),
        (cfg.tokenizer.kind in ("wordpiece", "bpe"), "tokenizer.kind must be wordpiece|bpe"),
        (t.lr > 0, "training.lr must be > 0"),
        (
            t.batch_size > 0 and t.grad_accum > 0 and t.epochs > 0,
            "training.batch_size, grad_accum and epochs must be > 0",
        ),
        (d.max_len > 1, "data.max_len must be > 1"),
        (d.truncation in TRUNCATION, f"data.truncation must be {'|'.join(TRUNCATION)}"),
        (0.0 <= d.val_fraction < 1.0, "data.val_fraction must be in [0, 1)"),
        (d.val_split in ("random", "last"), "data.val_split must be random|last"),
        (
            m.arch != "transformer" or m.d_model % m.num_heads == 0,
            "model.d_model must be divisible by model.num_heads",
        ),
        (0.0 <= m.dropout < 1.0, "model.dropout must be in [0, 1)"),
        (
            m.attention_dropout is None or 0.0 <= m.attention_dropout < 1.0,
            "model.attention_dropout must be in [0, 1)",
        ),
    ]
    if cfg.task in SEQ2SEQ_TASKS:
        checks += _seq2seq_checks(cfg)
    if cfg.task == "mlm":
        checks += [
            (m.arch == "transformer", f"task mlm pretrains a transformer, got {m.arch!r}"),
            (
                d.name in ("nsmc", "imdb", "file"),
                f"task mlm reads data.name nsmc | imdb | file, got {d.name!r}",
            ),
            (d.name != "file" or bool(d.train), "data.name: file needs data.train (a text file)"),
            (0.0 < d.mask_prob < 1.0, "data.mask_prob must be in (0, 1)"),
            (
                m.objective in OBJECTIVES,
                f"model.objective must be one of {', '.join(OBJECTIVES)}, got {m.objective!r}",
            ),
            (m.rtd_weight > 0, "model.rtd_weight must be > 0"),
            (
                m.generator_d_model is None
                or (
                    m.generator_d_model > 0
                    and m.generator_d_model % max(m.generator_d_model // 64, 1) == 0
                ),
                "model.generator_d_model must be > 0 and divisible by its heads (width // 64)",
            ),
        ]
    elif m.objective != "mlm":
        checks.append((False, "model.objective is for task mlm (pretraining)"))
    if m.init_from is not None:
        checks += [
            (cfg.task == "classify", "model.init_from is for task classify"),
            (m.arch != "ngram", "model.init_from does not apply to arch ngram (no embedding)"),
            (
                cfg.tokenizer.path is None,
                "model.init_from brings its run's tokenizer; remove tokenizer.path",
            ),
        ]
    for ok, message in checks:
        if not ok:
            raise ConfigError(message)


def _seq2seq_checks(cfg: RunConfig) -> list[tuple[bool, str]]:
    t, m, d = cfg.training, cfg.model, cfg.data
    return [
        (
            m.arch in ("transformer", "lstm"),
            f"task {cfg.task} needs model.arch transformer or lstm, got {m.arch!r}",
        ),
        (
            d.name in SEQ2SEQ_DATA,
            f"task {cfg.task} reads data.name {' | '.join(SEQ2SEQ_DATA)}, got {d.name!r}",
        ),
        (d.name != "file" or bool(d.train), "data.name: file needs data.train (a TSV file)"),
        (
            d.name != "multi30k" or {d.src_lang, d.tgt_lang} == {"de", "en"},
            "multi30k has de and en: data.src_lang / tgt_lang must be de->en or en->de",
        ),
        (
            m.attention is None or m.attention in ATTENTION_SCORES,
            f"model.attention must be null or one of {', '.join(ATTENTION_SCORES)}",
        ),
        (
            m.attention is None or m.arch == "lstm",
            "model.attention selects the LSTM's attention score (the Transformer always attends)",
        ),
        (
            m.preset is None or m.arch == "transformer",
            "model.preset sizes a Transformer; set emb_dim / hidden_size for an LSTM",
        ),
        (
            m.num_decoder_layers is None or m.num_decoder_layers > 0,
            "model.num_decoder_layers must be > 0",
        ),
        (
            m.num_layers > 0 and m.emb_dim > 0 and m.hidden_size > 0,
            "model sizes must be > 0",
        ),
        (
            m.arch != "lstm" or not m.bidirectional or m.hidden_size % 2 == 0,
            "model.hidden_size must be even for a bidirectional LSTM encoder",
        ),
        (0.0 <= t.teacher_forcing_ratio <= 1.0, "training.teacher_forcing_ratio must be in [0, 1]"),
        (0.0 <= t.label_smoothing < 1.0, "training.label_smoothing must be in [0, 1)"),
        (d.max_len > 2, "data.max_len must be > 2 for a sequence-to-sequence task"),
    ]


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

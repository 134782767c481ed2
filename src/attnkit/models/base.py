"""What every attnkit model shares: a config dataclass that is saved beside its weights.

Each model family declares a ``<Name>Config(ModelConfig)`` with its hyperparameters (the
paper's names), their defaults, one line of documentation each (``param(default, doc)``)
and its own checks (``validate``). A recipe's ``model:`` section is read by the class of its
``arch``; the sizes that come from the data (``vocab_size``, ``pad_id``, ``max_len``, and a
classifier's ``num_classes``) are filled in by the task before the model is built.

    config = TransformerClassifierConfig(vocab_size=8000, num_classes=2, d_model=128)
    model = config.build()                      # or TransformerClassifier(config)
    model.save_pretrained("out/")               # out/config.json + out/model.safetensors
    same = TransformerClassifier.from_pretrained("out/")   # also reads a run directory

``AttnkitModel`` is the ``nn.Module`` base with that config (``model.config``) and the
capabilities tasks ask about instead of checking classes (``needs_cls``,
``returns_attention``, ``export_formats``, ...).

Pretrained weights (``model.init_from``) are the model's business too: a config that has an
``init_from`` field says what it may start from and what it takes over
(``ModelConfig.adopt``: sizes, ids, the tokenizer) and its model copies the weights
(``AttnkitModel.load_pretrained``); ``attnkit.models.pretrained`` reads the source (what a
config and its model may ask of it: the ``PretrainedSource`` protocol, here, so that no
config depends on the reader, which finds config classes through the registry). A task
asks, whatever the arch:

    source = open_pretrained(cfg.model.pretrained)          # a run or a Hugging Face folder
    model_config, tokenizer = cfg.model.adopt(source, data_max_len, log)   # before the data
    model.load_pretrained(source, log)                       # once the model is built
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol, TypeVar, runtime_checkable

import torch
from torch import Tensor, nn

from attnkit.core.checkpoint import atomic_write_text, load_model_weights, save_model_weights
from attnkit.core.config import (
    FIRST_FORMAT_MODEL_KEYS,
    ConfigError,
    build_dataclass,
    check,
    positive,
    short_repr,
)
from attnkit.core.errors import AttnkitError
from attnkit.data.tokenization import Tokenizer
from attnkit.models.outputs import ClassifierOutput, Seq2SeqOutput
from attnkit.models.saved import (
    CONFIG_FILE,
    WEIGHTS_FILE,
    is_training_run,
    read_json,
    read_run_json,
)
from attnkit.models.sizes import check_model, check_size_fields
from attnkit.nn.layers import BlockConfig

__all__ = [
    "AttnkitModel",
    "ClassifierOutput",
    "Log",
    "ModelConfig",
    "PretrainedSource",
    "Seq2SeqOutput",
    "TransformerSizes",
    "param",
    "read_config_as",
    "saved_model_section",
]

C = TypeVar("C", bound="ModelConfig")
M = TypeVar("M", bound="AttnkitModel")
Log = Callable[[str], Any]


@runtime_checkable
class PretrainedSource(Protocol):
    """What a config (``check_source``, ``adopt``) and its model (``load_pretrained``) may
    ask of the folder ``model.init_from`` names; ``attnkit.models.pretrained.open_pretrained``
    reads one (``PretrainedFolder``).

    ``given``: the value as the recipe gives it; ``path``: the folder; ``kind``: ``"run"``
    (a training run with weights), ``"model"`` (a ``save_pretrained`` folder), ``"hf"`` (a
    Hugging Face BERT or GPT-2 folder) or None (none of these: missing, unfinished, ...);
    ``raw``: its config.json (a run's with every model size; {} when there is none);
    ``data_kinds``: the kinds of examples (``attnkit.data.kinds``) the dataset a run trained
    on can be read as, as the task that opened it found them (models know no datasets; ()
    when not known).
    """

    given: str
    path: Path
    kind: str | None
    raw: dict[str, Any]
    data_kinds: tuple[str, ...]

    @property
    def task(self) -> str | None:
        """The task of a run (None for other folders)."""
        ...

    @property
    def model_section(self) -> dict[str, Any]:
        """The source model's saved settings: a run's ``model`` section, else config.json."""
        ...

    @property
    def model_type(self) -> str | None:
        """Its model's family as saved (``bert``, ``gpt``, ...; a Hugging Face folder's
        ``model_type``: ``bert`` or ``gpt2``)."""
        ...

    @property
    def arch(self) -> str | None:
        """Its model's ``arch`` as saved (None for a Hugging Face folder)."""
        ...

    @property
    def data_name(self) -> str | None:
        """The ``data.name`` a run trained on (None for other folders)."""
        ...

    @property
    def weights_path(self) -> Path: ...

    @property
    def config(self) -> Any:
        """The source model's config, every size bounded and checked (nothing is built)."""
        ...

    def require_finished_run(self) -> None:
        """A one-line ``ConfigError`` unless this is a training run with its weights."""
        ...

    def require_model(self, model_type: str, needs: str) -> None:
        """A one-line ``ConfigError`` unless this is a finished run whose model is of the
        family ``model_type``; ``needs`` ends the message for another model."""
        ...

    def tokenizer(self) -> Tokenizer:
        """The tokenizer the source model read text with."""
        ...

    def state_dict(self) -> dict[str, Tensor]:
        """The source's weights under attnkit's names, on the CPU."""
        ...

    def load_model(self) -> nn.Module:
        """The source model itself, built and loaded (eval mode, CPU)."""
        ...

    def changed_keys(self, config: ModelConfig, keys: dict[str, str]) -> dict[str, Any]:
        """The settings ``config`` takes over from the source model (``keys``: each of
        ``config``'s fields -> the source config's field of that value); only those that
        differ."""
        ...

    def log_taken(self, before: ModelConfig, after: ModelConfig, what: str, log: Log) -> None:
        """Log the settings ``after`` took from the source (if any): ``what`` names them."""
        ...

    def check_vocabulary(self, tokenizer: Tokenizer) -> None:
        """A one-line ``ConfigError`` if ``tokenizer`` has more tokens than the source
        model has embedding rows."""
        ...


def block_checks(config: Any) -> list[tuple[bool, str]]:
    """The checks every Transformer block config shares (``TransformerSizes``, BERT's, GPT's),
    for ``check``: d_model, num_heads, d_ff and num_layers > 0, d_model divisible by
    num_heads, and each dropout (``dropout``, ``attention_dropout``, ``ffn_dropout`` where
    the config has it; None: the default) in [0, 1). Sizes first: the division needs them."""
    sizes = [
        positive(f"model.{n}", getattr(config, n))
        for n in ("d_model", "num_heads", "d_ff", "num_layers")
    ]
    if not all(ok for ok, _ in sizes):
        return sizes
    rates = [
        (
            value is None or 0.0 <= value < 1.0,
            f"model.{name} must be in [0, 1), got {value!r}",
        )
        for name in ("dropout", "attention_dropout", "ffn_dropout")
        if hasattr(config, name)
        for value in (getattr(config, name),)
    ]
    divisible = (
        config.d_model % config.num_heads == 0,
        f"model.d_model must be divisible by model.num_heads, got d_model "
        f"{config.d_model} and num_heads {config.num_heads}",
    )
    return [*sizes, divisible, *rates]


def param(default: Any, doc: str, derived: bool = False) -> Any:
    """A config field with its one-line documentation. ``derived``: the task sets it from
    the data (a recipe may not)."""
    return field(default=default, metadata={"doc": doc, "derived": derived})


@dataclass
class ModelConfig:
    """Fields every model has. Subclasses add theirs and set ``model_type`` (the family)
    and ``arch`` (the recipe's name for it)."""

    model_type: ClassVar[str] = ""
    # keys that belong to other archs or tasks -> the error that explains it
    KEY_HINTS: ClassVar[dict[str, str]] = {}
    # the sizes a model started from a pretrained encoder takes over from it
    PRETRAINED_KEYS: ClassVar[tuple[str, ...]] = ()

    arch: str = param("", "the architecture's name in recipes (model.arch)")
    vocab_size: int = param(0, "token embedding rows (the tokenizer's vocabulary)", True)
    pad_id: int = param(0, "the padding token's id (its embedding stays zero)", True)
    max_len: int = param(512, "longest sequence the model reads (positional table size)", True)

    # ------------------------------------------------------------------ checks
    def validate(self) -> None:
        """Raise ``ConfigError`` (one line, naming the key) for impossible values; every
        size first: an int within ``attnkit.models.sizes.SIZE_LIMITS``."""
        check_size_fields(self)
        check(positive("model.max_len", self.max_len))

    def check_export(self, fmt: str) -> None:
        """A one-line ``ConfigError`` if this model, although its class has the ``fmt``
        export in general (``AttnkitModel.export_formats``), would compute something else in
        that format; nothing here (a family with such cases overrides it)."""

    # ------------------------------------------------------------------ (de)serialisation
    @classmethod
    def docs(cls) -> dict[str, str]:
        """Each field's one-line documentation (for help texts and the docs)."""
        return {f.name: f.metadata.get("doc", "") for f in dataclasses.fields(cls)}

    @classmethod
    def derived_fields(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls) if f.metadata.get("derived")]

    def to_dict(self) -> dict[str, Any]:
        return {"model_type": self.model_type, **dataclasses.asdict(self)}

    @classmethod
    def from_dict(
        cls: type[C],
        raw: dict[str, Any],
        allow_derived: bool = True,
        ignore: frozenset[str] = frozenset(),
    ) -> C:
        """Build from a ``model:`` section or a saved config, every key checked.
        ``allow_derived=False`` (a recipe) refuses the fields the task derives from the
        data; ``ignore``: keys to skip silently (first-format runs)."""
        raw = dict(raw)
        model_type = raw.pop("model_type", cls.model_type)
        if model_type != cls.model_type:
            raise ConfigError(
                f"model.model_type is {short_repr(model_type)}, but this is a "
                f"{cls.model_type} config"
            )
        if not allow_derived:  # (an unfilled config's own defaults round-trip)
            for name in cls.derived_fields():
                if name in raw and raw[name] != cls.__dataclass_fields__[name].default:
                    raise ConfigError(
                        f"model.{name} is set by the task from the data and the tokenizer; "
                        "remove it from the recipe"
                    )
        raw.setdefault("arch", cls.__dataclass_fields__["arch"].default)
        config = build_dataclass(cls, raw, "model.", hints=cls.KEY_HINTS, ignore=ignore)
        return config

    def replace(self: C, **changes: Any) -> C:
        return dataclasses.replace(self, **changes)

    # ------------------------------------------------------------------ building
    def build(self) -> AttnkitModel:
        """The model this config describes (freshly initialised)."""
        raise NotImplementedError

    def model_class(self) -> type[AttnkitModel]:
        """The class ``build()`` makes (found by building on the meta device: no memory)."""
        with torch.device("meta"):
            return type(self.build())

    @classmethod
    def is_foreign(cls, raw: Any) -> bool:
        """True if ``raw`` (a config.json's contents) is another library's config that this
        family reads (BERT and GPT: Hugging Face's); only the JSON is looked at. The
        registry asks the classes in ``attnkit.models.registry.FOREIGN_FORMATS``."""
        return False

    @classmethod
    def read_foreign(cls, directory: Path, raw: Any) -> ModelConfig | None:
        """The config of a directory in another library's format that this family reads
        (its config.json's contents ``raw``, ``is_foreign``), its sizes checked against its
        weights and the memory; None: not such a directory."""
        return None

    # a seq2seq decoder that can be fed its own predictions (training.teacher_forcing_ratio < 1)
    SCHEDULED_SAMPLING: ClassVar[bool] = False

    def describe(self) -> str:
        """What the "model: ..." log line calls it."""
        return self.arch

    @property
    def needs_cls(self) -> bool:
        """True if the model reads a [CLS] token the data must put first."""
        return False

    @property
    def prefix_ids(self) -> tuple[int, ...]:
        """Token ids the data puts before every text (after a [CLS]), counted in
        ``data.max_len``: e.g. the [EOS] a GPT pretrained on packed reviews read each review
        after. Default: none."""
        return ()

    @property
    def hidden_width(self) -> int:
        """The width the Noam learning-rate schedule scales by (d_model^-0.5)."""
        return int(getattr(self, "d_model", 512))

    # a model that reads [CLS] A [SEP] (B [SEP]) with segment ids (a BERT): it can classify
    # sentence pairs; the data gives it segment ids (``token_type_ids``) for single texts too
    READS_PAIRS: ClassVar[bool] = False
    # the embeddings' sum (token + position + segment) goes through a LayerNorm before the
    # first layer (BERT); what the explainer labels its embedding panel with
    EMBEDDING_LAYER_NORM: ClassVar[bool] = False

    def validate_recipe(self) -> None:
        """Checks only a recipe must pass (a saved run passed them when it started; a model
        built in Python needs none of them): raise ``ConfigError``. Default: none."""

    def data_sizes(self, tokenizer: Tokenizer, max_len: int) -> dict[str, Any]:
        """The fields the data sets (``max_len``: the data's longest sequence): the
        tokenizer's vocabulary and padding id and the positions. A config that took its
        sizes from a pretrained model (``adopt``) keeps those it must."""
        return {"vocab_size": tokenizer.vocab_size, "pad_id": tokenizer.pad_id,
                "max_len": max_len}  # fmt: skip

    # the dataclass the model's ``forward`` returns (one per family, attnkit.models.outputs:
    # ClassifierOutput, TaggerOutput, ...); None: the model's own (e.g. a BiLM's)
    OUTPUT: ClassVar[type | None] = None

    def output_from(self, tensors: dict[str, Tensor]) -> Any:
        """What this model's ``forward`` returns, made from its output tensors by name (an
        ONNX export's outputs, named as the fields of ``OUTPUT``)."""
        if self.OUTPUT is None:
            raise TypeError(f"{type(self).__name__} declares no output type (OUTPUT)")
        return self.OUTPUT(**tensors)

    # ------------------------------------------------------------------ pretrained weights
    @property
    def pretrained(self) -> str | None:
        """``model.init_from``: what the model starts from (None: from scratch, and for the
        configs that have no such field)."""
        return getattr(self, "init_from", None)

    def check_source(self, source: PretrainedSource) -> None:
        """Raise a one-line ``ConfigError`` (``model.init_from: ...``) unless this model can
        start from ``source``. A config with an ``init_from`` field says what it takes."""
        raise ConfigError(f"model.init_from does not apply to arch {self.arch}")

    def adopt(self: C, source: PretrainedSource, max_len: int, log: Log) -> tuple[C, Tokenizer]:
        """(this config with what it takes over from ``source``, the tokenizer the model
        must read text with: the source's), before the data is read; ``max_len`` is the
        data's longest sequence. By default the ``PRETRAINED_KEYS`` are the source model's
        settings of the same name; what changed is logged."""
        self.check_source(source)
        config = self.replace(**source.changed_keys(self, {k: k for k in self.PRETRAINED_KEYS}))
        source.log_taken(self, config, "encoder sizes", log)
        return config, source.tokenizer()


@dataclass
class TransformerSizes(ModelConfig):
    """The settings every Transformer stack shares (the paper's names), their checks, and
    the ``BlockConfig`` its layers are built from. Encoder-only and encoder-decoder configs
    add theirs."""

    d_model: int = param(256, "width of every position's vector")
    num_heads: int = param(4, "attention heads (d_model must be divisible by it)")
    d_ff: int = param(1024, "inner width of the position-wise feed-forward network")
    num_layers: int = param(2, "encoder layers")
    dropout: float = param(0.1, "dropout on embeddings, sublayer outputs and in the FFN")
    attention_dropout: float | None = param(None, "dropout on attention weights (None: dropout)")
    ffn_dropout: float | None = param(
        None, "dropout inside the FFN, after the activation (None: dropout; 0: as BERT, GPT-2)"
    )
    positional: str = param("sinusoidal", "sinusoidal (the paper's) | learned (BERT's)")
    norm_first: bool = param(False, "pre-norm instead of the paper's post-norm Add & Norm")
    activation: str = param("gelu", "the feed-forward's activation: relu | gelu")

    POSITIONALS: ClassVar[tuple[str, ...]] = ("sinusoidal", "learned")

    def validate(self) -> None:
        super().validate()
        check(*block_checks(self))
        check(
            (
                self.positional in self.POSITIONALS,
                f"model.positional must be one of {', '.join(self.POSITIONALS)}, "
                f"got {short_repr(self.positional)}",
            ),
            (self.activation in ("relu", "gelu"), "model.activation must be relu|gelu"),
        )

    def block(self) -> BlockConfig:
        """The per-layer sizes for ``attnkit.nn.layers``."""
        return BlockConfig(
            d_model=self.d_model,
            num_heads=self.num_heads,
            d_ff=self.d_ff,
            dropout=self.dropout,
            attention_dropout=self.attention_dropout,
            activation=self.activation,
            norm_first=self.norm_first,
            ffn_dropout=self.ffn_dropout,
        )


class AttnkitModel(nn.Module):
    """Base of every attnkit model: ``self.config`` and the capabilities tasks rely on.

    Subclasses set ``config_class`` and build themselves from ``config``; the keyword form
    ``Model(vocab_size=..., d_model=...)`` builds the config from the keywords.
    """

    config_class: ClassVar[type[ModelConfig]] = ModelConfig
    # capabilities (class defaults; a model overrides what it has)
    needs_cls: bool = False  # the classifier reads position 0: the data puts a [CLS] there
    returns_attention: bool = False  # attends: its weights are recorded by attnkit.nn.capture
    explains_by_contributions: bool = False  # has contributions(ids) (an exact explanation)
    fits_from_data: bool = False  # fit_from_data(batches) must run before training
    takes_token_types: bool = False  # forward(input_ids, attention_mask, token_type_ids)
    # what ``attnkit export`` may write of it: int8 (any model: its Linear layers quantized),
    # onnx (forward(input_ids, attention_mask[, token_type_ids]) traces: attnkit.interop.onnx),
    # hf (save_pretrained writes a Hugging Face folder: BERT, GPT-2)
    export_formats: tuple[str, ...] = ("int8",)

    def __init__(self, config: ModelConfig | None = None, **kwargs: Any) -> None:
        super().__init__()
        if config is None:
            config = self.config_class(**kwargs)
        elif kwargs:
            config = dataclasses.replace(config, **kwargs)
        if not isinstance(config, self.config_class):
            raise TypeError(
                f"{type(self).__name__} needs a {self.config_class.__name__}, "
                f"got {type(config).__name__}"
            )
        config.validate()
        self.config = config

    # ------------------------------------------------------------------ pretrained weights
    def load_pretrained(self, source: PretrainedSource, log: Log) -> int:
        """Copy what this model takes from ``source`` (``model.init_from``, which its config
        adopted) into it; log it and return the number of tensors copied."""
        raise ConfigError(f"model.init_from does not apply to arch {self.config.arch}")

    def training_note(self) -> str | None:
        """A line worth logging about what training learned (e.g. ELMo's layer mix), read
        from the trained weights; None: nothing."""
        return None

    # ------------------------------------------------------------------ files
    def save_pretrained(self, directory: str | Path) -> Path:
        """Write ``config.json`` (this model's config) and ``model.safetensors``."""
        out = Path(directory)
        if is_training_run(out):
            raise ConfigError(
                f"{out} is a training run: save_pretrained would replace its config.json; "
                "choose another folder"
            )
        out.mkdir(parents=True, exist_ok=True)
        text = json.dumps(self.config.to_dict(), indent=2, ensure_ascii=False) + "\n"
        atomic_write_text(out / CONFIG_FILE, text)
        save_model_weights(self, out / WEIGHTS_FILE)
        return out

    @classmethod
    def from_pretrained(cls: type[M], directory: str | Path, map_location: str = "cpu") -> M:
        """Load a directory written by ``save_pretrained`` or a training run's directory
        (either run format): its config.json gives every size, nothing else is needed. The
        model comes back in eval mode."""
        config = read_config_as(directory, cls.config_class)
        model = cls(config)
        load_model_weights(model, Path(directory) / WEIGHTS_FILE, map_location=map_location)
        return model.eval()  # like transformers: dropout off until model.train()


def saved_model_section(directory: str | Path) -> tuple[Any, frozenset[str]]:
    """(the model config saved in ``directory``'s config.json: a bare model config
    (``save_pretrained``), a run's ``model`` section or another library's config.json,
    the keys to ignore in it: those of other families in a first-format run)."""
    directory = Path(directory)
    path = directory / CONFIG_FILE
    if not path.is_file():
        raise ConfigError(f"{directory} has no config.json")
    raw = read_json(path)
    if isinstance(raw, dict) and "task" in raw:  # a run directory
        run = read_run_json(directory)
        ignore = FIRST_FORMAT_MODEL_KEYS if run["format"] == 1 else frozenset()
        return run["model"], ignore
    return raw, frozenset()


def read_config_as(
    directory: str | Path, config_class: type[C], error: type[AttnkitError] = ConfigError
) -> C:
    """The ``config_class`` saved in ``directory`` (a ``save_pretrained`` folder or a run,
    either format), its sizes checked: bounded (else a one-line ``error`` naming config.json),
    against the weights' header and within the memory (a ``RunError``), before anything is
    built from it. ``attnkit.models.read_model_config`` finds the class itself."""
    raw, ignore = saved_model_section(directory)
    path = Path(directory) / CONFIG_FILE
    if not isinstance(raw, dict) or "model_type" not in raw:
        raise ConfigError(f"{path} is not an attnkit model config (no model_type)")
    try:
        config = config_class.from_dict(raw, ignore=ignore)
        config.validate()
    except ConfigError as exc:
        raise error(f"{path}: {exc}") from None
    weights = Path(directory) / WEIGHTS_FILE
    check_model(config, str(path), weights if weights.is_file() else None)
    return config

"""The model registry: each model family (the ``model_type`` a task trains) and its archs
(the recipe's ``model.arch``), and finding the class of a saved model.

    config = config_class("classifier", "gru")(vocab_size=8000, num_classes=2)
    model = build_model(config)
    model = from_pretrained("runs/nsmc-gru")       # any saved model, its class from its config

The table names each config class by its module (``"attnkit.models.bert:BertConfig"``), as
transformers' auto mappings do: a class is imported the first time it is asked for
(``config_class``, ``MODEL_CONFIGS[family][arch]``), so reading the table imports no model
and no model module needs the registry. Adding a model = its module + one line in
``MODEL_CONFIGS`` (or ``register_model`` from outside the package).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
from collections.abc import Iterator, Mapping, MutableMapping
from pathlib import Path
from typing import Any

from torch import nn

from attnkit.core.config import ConfigError
from attnkit.core.errors import AttnkitError
from attnkit.models.base import ModelConfig, read_config_as, saved_model_section
from attnkit.models.hf_bert import BERT_ARCHS
from attnkit.models.saved import CONFIG_FILE

__all__ = [
    "FOREIGN_FORMATS",
    "MODEL_CONFIGS",
    "ModelConfigs",
    "archs",
    "archs_exporting",
    "build_classifier",
    "build_model",
    "config_class",
    "foreign_formats",
    "from_pretrained",
    "load_entry",
    "read_model_config",
    "register_model",
]

# an entry of the table: a config class by name ("module:Class"), or the class itself
Entry = str | type[ModelConfig]


def load_entry(entry: Entry) -> type[ModelConfig]:
    """The class an entry names (``"attnkit.models.bert:BertConfig"``), imported now."""
    if not isinstance(entry, str):
        return entry
    module, _, name = entry.partition(":")
    return getattr(importlib.import_module(module), name)


class _Archs(Mapping[str, type[ModelConfig]]):
    """One family's archs: arch -> config class, each imported when it is looked up."""

    def __init__(self, entries: dict[str, Entry]) -> None:
        self.entries = entries  # arch -> "module:Class" | class

    def __getitem__(self, arch: str) -> type[ModelConfig]:
        return load_entry(self.entries[arch])

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.entries!r})"


class ModelConfigs(MutableMapping[str, Mapping[str, type[ModelConfig]]]):
    """family -> arch -> config class, read from a table of names (``names``: family ->
    arch -> ``"module:Class"`` or a class registered from outside); a class is imported when
    it is looked up. ``reset()`` gives back the built-in table (what a test changed)."""

    def __init__(self, builtin: dict[str, dict[str, Entry]]) -> None:
        self._builtin = builtin
        self.names: dict[str, dict[str, Entry]] = {}
        self.reset()

    def reset(self) -> None:
        self.names = {family: dict(by_arch) for family, by_arch in self._builtin.items()}

    def register(self, family: str, arch: str, config: Entry) -> None:
        self.names.setdefault(family, {})[arch] = config

    def __getitem__(self, family: str) -> Mapping[str, type[ModelConfig]]:
        return _Archs(self.names[family])

    def __setitem__(self, family: str, by_arch: Mapping[str, Any]) -> None:
        entries = by_arch.entries if isinstance(by_arch, _Archs) else by_arch
        self.names[family] = dict(entries)

    def __delitem__(self, family: str) -> None:
        del self.names[family]

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.names!r})"


_BERT = "attnkit.models.bert:BertConfig"
_GPT = "attnkit.models.gpt:GPTConfig"

# family (model_type) -> arch -> config class, by name
MODEL_CONFIGS = ModelConfigs(
    {
        "classifier": {
            "transformer": "attnkit.models.classifier:TransformerClassifierConfig",
            "rnn": "attnkit.models.classifier:RNNClassifierConfig",
            "lstm": "attnkit.models.classifier:RNNClassifierConfig",
            "gru": "attnkit.models.classifier:RNNClassifierConfig",
            "ngram": "attnkit.models.ngram:NgramConfig",
            "bert-classifier": _BERT,  # BertForSequenceClassification
            # frozen ELMo biLM features + a small task model
            "elmo": "attnkit.models.elmo_classifier:ELMoClassifierConfig",
            # GPT fine-tuned with a pooled linear head
            "gpt-classifier": "attnkit.models.gpt_classifier:GPTClassifierConfig",
        },
        "seq2seq": {
            "transformer": "attnkit.models.transformer:TransformerConfig",
            "lstm": "attnkit.models.rnn:Seq2SeqLSTMConfig",
        },
        "masked_lm": {"transformer": "attnkit.models.masked_lm:MaskedLMConfig"},
        "bert": dict.fromkeys(BERT_ARCHS, _BERT),  # bert, bert-mlm, ..., bert-qa
        # the families of the BERT tasks (each trains its own head)
        "bert_pretraining": {"bert-pretraining": _BERT, "bert-mlm": _BERT},
        "tagger": {"bert-tagger": _BERT},
        "qa": {"bert-qa": _BERT},
        "bilm": {"elmo": "attnkit.models.elmo:ELMoConfig"},  # ELMo's forward + backward LMs
        "lm": {"gpt": _GPT},  # decoder-only Transformer (GPT / GPT-2), task lm
        "gpt": {"gpt": _GPT},  # its saved model_type (read_model_config finds it by that)
    }
)
# the config classes that read another library's directories (``read_foreign``), by name
FOREIGN_FORMATS: tuple[str, ...] = (_BERT, _GPT)


def foreign_formats() -> tuple[type[ModelConfig], ...]:
    """The classes of ``FOREIGN_FORMATS``, imported."""
    return tuple(load_entry(name) for name in FOREIGN_FORMATS)


def register_model(family: str, arch: str, config: Entry) -> None:
    """Make ``config`` (whose ``build()`` makes the model; or its name, ``"module:Class"``)
    the class of ``arch`` in ``family``."""
    MODEL_CONFIGS.register(family, arch, config)


def archs(family: str) -> list[str]:
    """The ``model.arch`` names of a family."""
    return list(MODEL_CONFIGS.get(family, {}))


def archs_exporting(fmt: str) -> list[str]:
    """The ``model.arch`` names, of every registered family, whose model ``attnkit export``
    can write as ``fmt`` (``hf``, ``onnx``, ``int8``: its class's ``export_formats``), in
    registry order."""
    out: list[str] = []
    for by_arch in MODEL_CONFIGS.values():
        for arch, cls in by_arch.items():
            # (a class is hashable; mypy reads the dataclass's __hash__: python/mypy#11470)
            if arch not in out and fmt in _export_formats(cls, arch):  # type: ignore[arg-type]
                out.append(arch)
    return out


@functools.cache
def _export_formats(cls: type[ModelConfig], arch: str) -> tuple[str, ...]:
    """``export_formats`` of the class ``arch``'s config builds (found on the meta device,
    with a vocabulary: a recipe's comes from the data); () for one whose defaults do not
    make a model."""
    try:
        config = cls(arch=arch)
        config = config.replace(vocab_size=max(config.vocab_size, 8))
        return tuple(getattr(config.model_class(), "export_formats", ()))
    except Exception:  # noqa: BLE001 - e.g. a registered toy config that needs more
        return ()


def config_class(family: str, arch: str) -> type[ModelConfig]:
    """The config dataclass of ``arch`` in ``family``."""
    if family not in MODEL_CONFIGS:
        raise ConfigError(f"unknown model family {family!r} (known: {', '.join(MODEL_CONFIGS)})")
    by_arch = MODEL_CONFIGS[family]
    if arch not in by_arch:
        raise ConfigError(
            f"model.arch must be one of {', '.join(by_arch)} for a {family} model, got {arch!r}"
        )
    return by_arch[arch]


def build_model(config: ModelConfig) -> nn.Module:
    """The (freshly initialised) model a complete config describes."""
    return config.build()


def read_model_config(directory: str | Path, error: type[AttnkitError] = ConfigError) -> Any:
    """The model config saved in ``directory``, whatever its class: a bare model config.json
    (``save_pretrained``), a run's (its ``model`` section, either run format) or a Hugging
    Face BERT or GPT-2 one (``FOREIGN_FORMATS``). Its sizes are checked before anything is
    built from it (bounded: else a one-line ``error``; against the weights and the memory)."""
    directory = Path(directory)
    raw, _ = saved_model_section(directory)
    for foreign in foreign_formats():
        config = foreign.read_foreign(directory, raw)
        if config is not None:
            return config
    if not isinstance(raw, dict) or "model_type" not in raw:
        raise ConfigError(
            f"{directory / CONFIG_FILE} is not an attnkit model config (no model_type)"
        )
    cls = config_class(raw["model_type"], raw.get("arch", ""))
    return read_config_as(directory, cls, error)


def from_pretrained(directory: str | Path, map_location: str = "cpu") -> nn.Module:
    """Any attnkit model from a ``save_pretrained`` directory or a run directory (in eval
    mode), its class found from the saved ``model_type`` and ``arch``. A Hugging Face BERT
    directory gives the class of its config.json's ``architectures`` (``BertModel``,
    ``BertForMaskedLM``, ...), a GPT-2 one a ``GPT``."""
    config = read_model_config(directory)
    # (the class reads its own folder: BERT's and GPT's also read Hugging Face's names)
    return config.model_class().from_pretrained(directory, map_location=map_location)


def build_classifier(
    arch: str, vocab_size: int, num_classes: int, pad_id: int, **hparams: object
) -> nn.Module:
    """Build a classifier by name: "transformer" -> TransformerClassifier; "rnn" | "lstm" |
    "gru" -> RNNClassifier with that cell; "ngram" -> ``attnkit.models.ngram.NgramClassifier``
    (bag of n-grams, NBSVM). ``hparams`` are the fields of the arch's config; an unknown
    arch or hyperparameter name raises ``ConfigError`` (a ValueError) naming the valid ones."""
    arch = arch.lower()
    if arch not in archs("classifier"):
        raise ConfigError(
            f"unknown classifier arch {arch!r}; choose one of {', '.join(archs('classifier'))}"
        )
    cls = config_class("classifier", arch)
    fixed = ("arch", "vocab_size", "pad_id", "num_classes", "max_len")
    valid = [f.name for f in dataclasses.fields(cls) if f.name not in fixed] + ["max_len"]
    unknown = sorted(set(hparams) - set(valid))
    if unknown:
        raise ConfigError(
            f"unknown hyperparameter(s) {', '.join(map(repr, unknown))} for arch {arch!r}; "
            f"valid: {', '.join(valid)}"
        )
    config = cls(arch=arch, vocab_size=vocab_size, pad_id=pad_id)  # (num_classes: the arch's own)
    return config.replace(num_classes=num_classes, **hparams).build()

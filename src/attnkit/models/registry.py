"""The model registry: each model family (the ``model_type`` a task trains) and its archs
(the recipe's ``model.arch``), and finding the class of a saved model.

    config = config_class("classifier", "gru")(vocab_size=8000, num_classes=2)
    model = build_model(config)
    model = from_pretrained("runs/nsmc-gru")       # any saved model, its class from its config

Adding a model = its module + one line in ``MODEL_CONFIGS`` (or ``register_model`` from
outside the package).
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Any

from torch import nn

from attnkit.core.config import ConfigError
from attnkit.core.errors import AttnkitError
from attnkit.models.base import ModelConfig, read_config_as, saved_model_section
from attnkit.models.bert import BertConfig
from attnkit.models.classifier import RNNClassifierConfig, TransformerClassifierConfig
from attnkit.models.elmo import ELMoConfig
from attnkit.models.elmo_classifier import ELMoClassifierConfig
from attnkit.models.gpt import GPTConfig
from attnkit.models.gpt_classifier import GPTClassifierConfig
from attnkit.models.hf_bert import BERT_ARCHS
from attnkit.models.masked_lm import MaskedLMConfig
from attnkit.models.ngram import NgramConfig
from attnkit.models.rnn import Seq2SeqLSTMConfig
from attnkit.models.saved import CONFIG_FILE
from attnkit.models.transformer import TransformerConfig

__all__ = [
    "FOREIGN_FORMATS",
    "MODEL_CONFIGS",
    "archs",
    "archs_exporting",
    "build_classifier",
    "build_model",
    "config_class",
    "from_pretrained",
    "read_model_config",
    "register_model",
]

# family (model_type) -> arch -> config class
MODEL_CONFIGS: dict[str, dict[str, type[ModelConfig]]] = {
    "classifier": {
        "transformer": TransformerClassifierConfig,
        "rnn": RNNClassifierConfig,
        "lstm": RNNClassifierConfig,
        "gru": RNNClassifierConfig,
        "ngram": NgramConfig,
        "bert-classifier": BertConfig,  # BertForSequenceClassification
        "elmo": ELMoClassifierConfig,  # frozen ELMo biLM features + a small task model
        "gpt-classifier": GPTClassifierConfig,  # GPT fine-tuned with a pooled linear head
    },
    "seq2seq": {"transformer": TransformerConfig, "lstm": Seq2SeqLSTMConfig},
    "masked_lm": {"transformer": MaskedLMConfig},
    "bert": dict.fromkeys(BERT_ARCHS, BertConfig),  # bert, bert-mlm, ..., bert-qa
    # the families of the BERT tasks (each trains its own head)
    "bert_pretraining": {"bert-pretraining": BertConfig, "bert-mlm": BertConfig},
    "tagger": {"bert-tagger": BertConfig},
    "qa": {"bert-qa": BertConfig},
    "bilm": {"elmo": ELMoConfig},  # ELMo's forward + backward LSTM language models
    "lm": {"gpt": GPTConfig},  # decoder-only Transformer (GPT / GPT-2), task lm
    "gpt": {"gpt": GPTConfig},  # its saved model_type (read_model_config finds it by that)
}
# the config classes that read another library's directories (``read_foreign``)
FOREIGN_FORMATS: tuple[type[ModelConfig], ...] = (BertConfig, GPTConfig)


def register_model(family: str, arch: str, config: type[ModelConfig]) -> None:
    """Make ``config`` (whose ``build()`` makes the model) the class of ``arch`` in ``family``."""
    MODEL_CONFIGS.setdefault(family, {})[arch] = config


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
            if arch not in out and fmt in _export_formats(cls, arch):
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
    for foreign in FOREIGN_FORMATS:
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
    config = cls(arch=arch, vocab_size=vocab_size, num_classes=num_classes, pad_id=pad_id)
    return config.replace(**hparams).build()

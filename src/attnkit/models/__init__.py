"""Models built from ``attnkit.nn.attention`` and ``attnkit.nn.layers``; they know only tensors.

Each model family declares its config dataclass (``attnkit.models.base.ModelConfig``) and is
registered here by its family (the ``model_type`` a task trains) and ``arch`` (the recipe's
``model.arch``). Adding a model = its module + one line in ``MODEL_CONFIGS``.

    config = config_class("classifier", "gru")(vocab_size=8000, num_classes=2)
    model = build_model(config)
"""

from __future__ import annotations

from pathlib import Path

from torch import nn

from attnkit.core.config import ConfigError
from attnkit.models.base import AttnkitModel, ModelConfig, Seq2SeqOutput, read_model_config
from attnkit.models.bert import BERT_ARCHS, BertConfig, BertModel, BertOutput
from attnkit.models.bert_heads import (
    BertForMaskedLM,
    BertForPreTraining,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
)
from attnkit.models.classifier import (
    RNNClassifier,
    RNNClassifierConfig,
    TransformerClassifier,
    TransformerClassifierConfig,
    build_classifier,
)
from attnkit.models.elmo import BiLM, ELMoConfig, ELMoEmbedder
from attnkit.models.elmo_classifier import ELMoClassifier, ELMoClassifierConfig
from attnkit.models.gpt import GPT, GPTConfig
from attnkit.models.gpt_classifier import GPTClassifier, GPTClassifierConfig
from attnkit.models.masked_lm import MaskedLMConfig
from attnkit.models.ngram import NgramClassifier, NgramConfig
from attnkit.models.rnn import Seq2SeqLSTMConfig
from attnkit.models.transformer import TransformerConfig

__all__ = [
    "MODEL_CONFIGS",
    "AttnkitModel",
    "BertConfig",
    "BertForMaskedLM",
    "BertForPreTraining",
    "BertForQuestionAnswering",
    "BertForSequenceClassification",
    "BertForTokenClassification",
    "BertModel",
    "BertOutput",
    "BiLM",
    "ELMoClassifier",
    "ELMoClassifierConfig",
    "ELMoConfig",
    "ELMoEmbedder",
    "GPT",
    "GPTClassifier",
    "GPTClassifierConfig",
    "GPTConfig",
    "ModelConfig",
    "NgramClassifier",
    "RNNClassifier",
    "Seq2SeqOutput",
    "TransformerClassifier",
    "build_classifier",
    "build_model",
    "config_class",
    "from_pretrained",
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


def register_model(family: str, arch: str, config: type[ModelConfig]) -> None:
    """Make ``config`` (whose ``build()`` makes the model) the class of ``arch`` in ``family``."""
    MODEL_CONFIGS.setdefault(family, {})[arch] = config


def archs(family: str) -> list[str]:
    """The ``model.arch`` names of a family."""
    return list(MODEL_CONFIGS.get(family, {}))


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


def from_pretrained(directory: str | Path, map_location: str = "cpu") -> nn.Module:
    """Any attnkit model from a ``save_pretrained`` directory or a run directory (in eval
    mode), its class found from the saved ``model_type`` and ``arch``. A Hugging Face BERT
    directory gives the class of its config.json's ``architectures`` (``BertModel``,
    ``BertForMaskedLM``, ...)."""
    from attnkit.core.checkpoint import load_model_weights
    from attnkit.runtime.run import RunDir

    config = read_model_config(directory)
    if isinstance(config, BertConfig):  # its own loader reads Hugging Face's names
        return config.model_class().from_pretrained(directory, map_location=map_location)
    if type(config) is GPTConfig:  # a GPT-2 directory (or attnkit's own format)
        return GPT.from_pretrained(directory, map_location=map_location)
    model = config.build()
    load_model_weights(model, RunDir(directory).weights_path, map_location=map_location)
    return model.eval()

"""Models built from ``attnkit.nn.attention`` and ``attnkit.nn.layers``; they know only tensors.

Each model family declares its config dataclass (``attnkit.models.base.ModelConfig``: its
sizes, their checks, how it adopts pretrained weights) and its output type, and is
registered by its family (the ``model_type`` a task trains) and ``arch`` (the recipe's
``model.arch``) in ``attnkit.models.registry``, by name (``"attnkit.models.bert:BertConfig"``:
imported on first use). Adding a model = its module + one line in ``MODEL_CONFIGS``.

    config = config_class("classifier", "gru")(vocab_size=8000, num_classes=2)
    model = build_model(config)
    source = open_pretrained("runs/nsmc-pretrain")   # what model.init_from names
"""

from __future__ import annotations

from attnkit.models.base import (
    AttnkitModel,
    ClassifierOutput,
    ModelConfig,
    PretrainedSource,
    Seq2SeqOutput,
)
from attnkit.models.bert import (
    BertConfig,
    BertForMaskedLM,
    BertForPreTraining,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
    BertOutput,
)
from attnkit.models.classifier import (
    RNNClassifier,
    RNNClassifierConfig,
    TransformerClassifier,
    TransformerClassifierConfig,
)
from attnkit.models.elmo import BiLM, ELMoConfig, ELMoEmbedder
from attnkit.models.elmo_classifier import ELMoClassifier, ELMoClassifierConfig
from attnkit.models.gpt import GPT, GPTConfig
from attnkit.models.gpt_classifier import GPTClassifier, GPTClassifierConfig
from attnkit.models.masked_lm import MaskedLMConfig
from attnkit.models.ngram import NgramClassifier, NgramConfig
from attnkit.models.outputs import MaskedLMOutput, SpanOutput, TaggerOutput
from attnkit.models.pretrained import PretrainedFolder, open_pretrained
from attnkit.models.registry import (
    MODEL_CONFIGS,
    archs,
    archs_exporting,
    build_classifier,
    build_model,
    config_class,
    from_pretrained,
    read_model_config,
    register_model,
)
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
    "ClassifierOutput",
    "ELMoClassifier",
    "ELMoClassifierConfig",
    "ELMoConfig",
    "ELMoEmbedder",
    "GPT",
    "GPTClassifier",
    "GPTClassifierConfig",
    "GPTConfig",
    "MaskedLMConfig",
    "MaskedLMOutput",
    "ModelConfig",
    "NgramClassifier",
    "NgramConfig",
    "PretrainedFolder",
    "PretrainedSource",
    "RNNClassifier",
    "RNNClassifierConfig",
    "Seq2SeqLSTMConfig",
    "Seq2SeqOutput",
    "SpanOutput",
    "TaggerOutput",
    "TransformerClassifier",
    "TransformerClassifierConfig",
    "TransformerConfig",
    "archs",
    "archs_exporting",
    "build_classifier",
    "build_model",
    "config_class",
    "from_pretrained",
    "open_pretrained",
    "read_model_config",
    "register_model",
]

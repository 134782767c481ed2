"""BERT (Devlin et al., 2019) built from attnkit's own layers, and its task heads.

    input_ids (B, T), token_type_ids (B, T)
      -> word + learned position + segment embeddings, summed      (B, T, d_model)
      -> LayerNorm -> Dropout
      -> num_layers post-norm EncoderLayers (GELU feed-forward)     (B, T, d_model)  last_hidden_state
      -> pooler: tanh(W h_[CLS] + b) on position 0                  (B, d_model)     pooler_output

Each ``EncoderLayer`` (``attnkit.nn.layers``, ``norm_first=False``) computes exactly Hugging
Face's ``BertLayer``: LayerNorm(x + Dropout(W^O MultiHead(x))), then
LayerNorm(x + Dropout(W_2 GELU(W_1 x + b_1) + b_2)); GELU is the exact (erf) one.

The config's names are attnkit's (``d_model``, ``num_heads``, ``d_ff``, ...), but a
directory written by ``save_pretrained`` is a Hugging Face one: its config.json has
``hidden_size``, ``num_attention_heads``, ... and model.safetensors has Hugging Face's
parameter names, so ``transformers.BertModel.from_pretrained(dir)`` reads it. The one place
that knows those names is ``attnkit.models.hf_bert``.

    model = BertModel.from_pretrained("all-MiniLM-L6-v2/")    # a Hugging Face directory
    out = model(input_ids, attention_mask)                    # BertOutput
    out.last_hidden_state  # (B, T, d_model)

The heads, as in Hugging Face, each a ``BertModel`` under ``bert`` plus its head:

    BertForMaskedLM               last_hidden_state -> dense, act, LayerNorm -> h E^T + b
                                  (E the word embedding, tied)            (B, T, V) | (N, V)
                                  -> ``MaskedLMOutput`` (logits)
    BertForPreTraining            the same + Linear(d, 2) on pooler_output (B, 2) "is next"
                                  -> ``MaskedLMOutput`` (logits, next_sentence_logits)
    BertForSequenceClassification Dropout + Linear(d, num_classes) on pooler_output
                                  -> ``ClassifierOutput`` (logits (B, C))
    BertForTokenClassification    Dropout + Linear(d, num_classes) at every position
                                  -> ``TaggerOutput`` (logits (B, T, C))
    BertForQuestionAnswering      Linear(d, 2) at every position
                                  -> ``SpanOutput`` (start_logits, end_logits (B, T) each)

One ``BertConfig`` describes them all; its ``arch`` (bert-mlm, bert-pretraining,
bert-classifier, bert-tagger, bert-qa) picks the head and ``num_classes`` sizes the
classifiers. ``save_pretrained`` writes a Hugging Face directory the matching
``transformers`` class reads.

A BERT task model starts from a pretrained encoder with ``model.init_from``: a Hugging Face
BERT directory or an attnkit run whose model is a BERT (``BertConfig.adopt`` takes its sizes,
``load_pretrained`` copies its encoder; the head stays new).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnkit.core.config import ConfigError, check, positive, short_repr
from attnkit.data.tokenization import Tokenizer
from attnkit.models.base import (
    AttnkitModel,
    Log,
    ModelConfig,
    PretrainedSource,
    block_checks,
    param,
)
from attnkit.models.hf_bert import (
    BERT_ARCHS,
    bert_config_from_hf,
    check_hf_bert,
    check_hf_exportable,
    is_hf_bert_config,
    load_hf_bert,
    save_hf_bert,
)
from attnkit.models.outputs import ClassifierOutput, MaskedLMOutput, SpanOutput, TaggerOutput
from attnkit.models.saved import CONFIG_FILE
from attnkit.nn.dropout import Dropout
from attnkit.nn.fast_paths import Linear, linear
from attnkit.nn.layers import (
    BlockConfig,
    Encoder,
    LearnedPositionalEmbedding,
    ScalarMix,
    SegmentEmbedding,
)

__all__ = [
    "BERT_ARCHS",
    "PRESETS",
    "BertConfig",
    "BertForMaskedLM",
    "BertForPreTraining",
    "BertForQuestionAnswering",
    "BertForSequenceClassification",
    "BertForTokenClassification",
    "BertLMHead",
    "BertModel",
    "BertOutput",
    "HfBertFiles",
]

ACTIVATIONS = ("gelu", "relu", "gelu_tanh")
# the heads that can read a frozen encoder's layer mix (model.freeze_encoder)
FEATURE_ARCHS = ("bert-classifier", "bert-tagger", "bert-qa")
POOLINGS = ("pooler", "mean", "cls")
# model.preset -> sizes (Turc et al. 2019's compact BERTs; d_ff = 4 d_model, 64-wide heads)
PRESETS: dict[str, dict[str, int]] = {
    "tiny": {"num_layers": 2, "d_model": 128, "num_heads": 2, "d_ff": 512},
    "mini": {"num_layers": 4, "d_model": 256, "num_heads": 4, "d_ff": 1024},
    "small": {"num_layers": 4, "d_model": 512, "num_heads": 8, "d_ff": 2048},
    "base": {"num_layers": 12, "d_model": 768, "num_heads": 12, "d_ff": 3072},
}


@dataclass
class BertConfig(ModelConfig):
    """BERT's encoder sizes (BERT-base's defaults), in attnkit's names; see
    ``attnkit.models.hf_bert`` for the Hugging Face config.json keys they map to."""

    model_type: ClassVar[str] = "bert"

    arch: str = param("bert", "bert | bert-mlm | bert-pretraining | bert-classifier | ...")
    vocab_size: int = param(30522, "token embedding rows (the WordPiece vocabulary)", True)
    pad_id: int = param(0, "the [PAD] token's id (its embedding gets no gradient)", True)
    max_len: int = param(512, "position embedding rows (max_position_embeddings)", True)
    d_model: int = param(768, "width of every position's vector (hidden_size)")
    num_heads: int = param(12, "attention heads (d_model must be divisible by it)")
    d_ff: int = param(3072, "inner width of the feed-forward network (intermediate_size)")
    num_layers: int = param(12, "encoder layers (num_hidden_layers)")
    dropout: float = param(0.1, "dropout on embeddings and sublayer outputs")
    attention_dropout: float = param(0.1, "dropout on attention weights")
    activation: str = param("gelu", "the feed-forward's activation: gelu | relu | gelu_tanh")
    layer_norm_eps: float = param(1e-12, "LayerNorm epsilon (BERT's 1e-12)")
    type_vocab_size: int = param(2, "segment (token type) embedding rows: sentence A / B")
    init_std: float = param(0.02, "std of the normal initialisation (initializer_range)")
    num_classes: int = param(2, "classes of bert-classifier / bert-tagger (num_labels)", True)
    pooling: str | None = param(
        None,
        "bert-classifier: pooler (tanh(W h_[CLS] + b), BERT's; the default) | mean (over real "
        "tokens, as sentence-transformers; the default with freeze_encoder) | cls (h_[CLS])",
    )
    preset: str | None = param(
        None, "tiny (2 layers, d_model 128) | mini (4, 256) | small (4, 512) | base (12, 768)"
    )
    init_from: str | None = param(
        None,
        "a Hugging Face BERT directory or an attnkit run with a BERT model: the encoder, its "
        "sizes and its tokenizer are taken from it (the head stays new)",
    )
    freeze_encoder: bool = param(
        False,
        "feature-based mode: the encoder stays fixed and the head reads a learned "
        "softmax-weighted sum of all its layers (times a learned scale)",
    )

    # the settings a model started from a pretrained encoder (init_from) takes over from it
    PRETRAINED_KEYS: ClassVar[tuple[str, ...]] = (
        "vocab_size",
        "pad_id",
        "max_len",
        "d_model",
        "num_heads",
        "d_ff",
        "num_layers",
        "activation",
        "layer_norm_eps",
        "type_vocab_size",
    )

    @classmethod
    def from_dict(
        cls, raw: dict[str, Any], allow_derived: bool = True, ignore: frozenset[str] = frozenset()
    ) -> BertConfig:
        """As ``ModelConfig.from_dict``; ``preset`` fills in the sizes the section does not
        set itself (d_model, num_heads, d_ff, num_layers)."""
        preset = raw.get("preset")
        if preset is not None:
            if preset not in PRESETS:
                raise ConfigError(
                    f"model.preset must be one of {', '.join(PRESETS)}, got {short_repr(preset)}"
                )
            raw = {**PRESETS[preset], **raw}
        return super().from_dict(raw, allow_derived=allow_derived, ignore=ignore)

    def check_export(self, fmt: str) -> None:
        """``hf``: refused for what transformers' BERT classes would compute otherwise (a
        classifier pooled by mean or [CLS] alone, a feature-based model):
        ``attnkit.models.hf_bert.check_hf_exportable``."""
        if fmt == "hf":
            check_hf_exportable(self)

    def validate(self) -> None:
        super().validate()
        check(positive("model.vocab_size", self.vocab_size), *block_checks(self))
        check(
            positive("model.type_vocab_size", self.type_vocab_size),
            positive("model.layer_norm_eps", self.layer_norm_eps),
            positive("model.init_std", self.init_std),
            positive("model.num_classes", self.num_classes),
        )
        check(
            (
                self.arch in BERT_ARCHS,
                f"model.arch must be one of {', '.join(BERT_ARCHS)}, got {short_repr(self.arch)}",
            ),
            (
                0 <= self.pad_id < self.vocab_size,
                f"model.pad_id must be in [0, vocab_size), got {self.pad_id}",
            ),
            (
                self.preset is None or self.preset in PRESETS,
                f"model.preset must be one of {', '.join(PRESETS)}, got {short_repr(self.preset)}",
            ),
            (
                self.pooling in (None, *POOLINGS),
                f"model.pooling must be one of {', '.join(POOLINGS)}, got {short_repr(self.pooling)}",
            ),
            (
                not (self.freeze_encoder and self.pooling == "pooler"),
                "model.pooling: pooler reads the last layer; with freeze_encoder the head reads "
                "a mix of all layers: choose mean or cls",
            ),
            (
                not self.freeze_encoder or self.arch in FEATURE_ARCHS,
                f"model.freeze_encoder applies to {', '.join(FEATURE_ARCHS)}, not {self.arch}",
            ),
            (
                self.activation in ACTIVATIONS,
                f"model.activation must be one of {', '.join(ACTIVATIONS)}, "
                f"got {short_repr(self.activation)}",
            ),
        )

    def block(self) -> BlockConfig:
        """One post-norm encoder layer, as BERT's."""
        return BlockConfig(
            d_model=self.d_model,
            num_heads=self.num_heads,
            d_ff=self.d_ff,
            dropout=self.dropout,
            attention_dropout=self.attention_dropout,
            activation=self.activation,
            norm_first=False,
            eps=self.layer_norm_eps,
            ffn_dropout=0.0,  # BERT has no dropout inside the feed-forward (Hugging Face's neither)
        )

    @property
    def pooling_used(self) -> str:
        """What bert-classifier's head reads: ``pooling``, else pooler (mean when frozen)."""
        return self.pooling or ("mean" if self.freeze_encoder else "pooler")

    def describe(self) -> str:
        body = f"BERT encoder ({self.num_layers} layers, d_model {self.d_model})"
        if self.freeze_encoder:
            body += ", frozen: the head reads a learned mix of its layers"
        return body if self.arch == "bert" else f"{BERT_ARCHS[self.arch]}: {body}"

    @property
    def needs_cls(self) -> bool:
        return True

    READS_PAIRS: ClassVar[bool] = True
    EMBEDDING_LAYER_NORM: ClassVar[bool] = True

    @property
    def predicts_next_sentence(self) -> bool:
        """True for the head that also learns next-sentence prediction (bert-pretraining):
        its data are NSP pairs; bert-mlm reads single [CLS] document [SEP] pieces."""
        return self.arch == "bert-pretraining"

    def model_class(self) -> type[HfBertFiles]:
        """The class of ``arch``: ``BertModel`` or one of the heads."""
        return _BERT_CLASSES[self.arch]

    def build(self) -> HfBertFiles:
        return self.model_class()(self)

    def output_from(self, tensors: dict[str, Tensor]) -> Any:
        """The output type of ``arch``'s head (``OUTPUT`` of its class: bert-classifier a
        ``ClassifierOutput``, bert-tagger a ``TaggerOutput``, bert-qa a ``SpanOutput``, ...)
        of the tensors named as its fields."""
        return self.model_class().OUTPUT(**tensors)

    # ------------------------------------------------------------------ files
    @classmethod
    def is_foreign(cls, raw: Any) -> bool:
        """A Hugging Face BERT config.json (``"model_type": "bert"``)."""
        return is_hf_bert_config(raw)

    @classmethod
    def read_foreign(cls, directory: Path, raw: Any) -> BertConfig | None:
        """The config of a Hugging Face BERT directory (its config.json's contents ``raw``),
        its sizes checked against the encoder's weights and the memory; None: not one."""
        if not cls.is_foreign(raw):
            return None
        config = bert_config_from_hf(raw, cls, where=str(directory / CONFIG_FILE))
        check_hf_bert(directory, config.replace(arch="bert"), BertModel)
        return config

    # ------------------------------------------------------------------ model.init_from
    def check_source(self, source: PretrainedSource) -> None:
        """A Hugging Face BERT directory or a finished attnkit run whose model is a BERT."""
        if not source.path.is_dir():
            raise ConfigError(f"model.init_from: {source.path} is not a directory")
        if source.kind == "hf" and source.model_type == "bert":
            return
        if source.kind == "run":
            if source.model_type == "bert":
                return
            raise ConfigError(
                f"model.init_from: {source.path} is a run of a {source.arch!r} model; a BERT "
                "task starts from a BERT run (e.g. task bert-pretrain) or a Hugging Face BERT"
            )
        raise ConfigError(
            f"model.init_from: {source.path} is neither a Hugging Face BERT directory "
            '(config.json with "model_type": "bert") nor a finished attnkit run with a BERT model'
        )

    def adopt(
        self, source: PretrainedSource, max_len: int, log: Log
    ) -> tuple[BertConfig, Tokenizer]:
        """The pretrained encoder's sizes (``PRETRAINED_KEYS``) and its tokenizer (the model
        must read text as it was taught)."""
        config, tokenizer = super().adopt(source, max_len, log)
        pretrained = source.config
        if max_len > pretrained.max_len:
            raise ConfigError(
                f"data.max_len={max_len} exceeds the {pretrained.max_len} positions of "
                f"{source.path}; lower data.max_len"
            )
        source.check_vocabulary(tokenizer)
        return config, tokenizer

    def data_sizes(self, tokenizer: Tokenizer, max_len: int) -> dict[str, Any]:
        """A pretrained encoder keeps its own vocabulary and positions; a BERT trained from
        scratch gets the tokenizer's vocabulary and ``max_len`` positions."""
        return {} if self.init_from else super().data_sizes(tokenizer, max_len)


@dataclass
class BertOutput:
    """What ``BertModel.forward`` returns (like Hugging Face's
    ``BaseModelOutputWithPoolingAndCrossAttentions``).

    last_hidden_state: (B, T, d_model) the last encoder layer's output at every position.
    pooler_output: (B, d_model) tanh(W h_0 + b), the [CLS] position's pooled vector (None
        for a model built without the pooler, as inside the heads that do not use it).
    hidden_states: the embeddings' output and each layer's, num_layers + 1 tensors
        (B, T, d_model); only with ``output_hidden_states``.
    (The attention weights: ``attnkit.nn.capture``.)
    """

    last_hidden_state: Tensor
    pooler_output: Tensor | None
    hidden_states: list[Tensor] | None = None


class BertEmbeddings(nn.Module):
    """word (B, T) + position + segment embeddings -> LayerNorm -> Dropout: (B, T, d_model)."""

    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.word = nn.Embedding(c.vocab_size, c.d_model, padding_idx=c.pad_id)
        self.pos = LearnedPositionalEmbedding(c.max_len, c.d_model)
        self.segment = SegmentEmbedding(c.d_model, c.type_vocab_size)
        self.norm = nn.LayerNorm(c.d_model, eps=c.layer_norm_eps)
        self.dropout = Dropout(c.dropout)

    def forward(self, input_ids: Tensor, token_type_ids: Tensor) -> Tensor:
        x = self.word(input_ids) + self.segment(token_type_ids)  # (B, T, d_model)
        x = self.pos(x)  # + P[0:T]
        return self.dropout(self.norm(x))


class HfBertFiles(AttnkitModel):
    """``save_pretrained`` / ``from_pretrained`` in Hugging Face's format, for ``BertModel``
    and the heads: ``ARCH`` (the config's ``model.arch``), ``HAS_POOLER`` (Hugging Face's
    model has ``bert.pooler``) and ``HEAD_KEYS`` (the head's attnkit names -> Hugging
    Face's) are all ``attnkit.models.hf_bert`` needs. ``load_pretrained`` copies a
    pretrained encoder (``model.init_from``) into it."""

    config_class: ClassVar[type[ModelConfig]] = BertConfig
    config: BertConfig
    ARCH: ClassVar[str] = "bert"
    HAS_POOLER: ClassVar[bool] = True
    HEAD_KEYS: ClassVar[dict[str, str]] = {}
    OUTPUT: ClassVar[type] = BertOutput  # what ``forward`` returns (each head: its family's)
    export_formats: tuple[str, ...] = ("int8", "hf")
    # (only a model loaded from a Hugging Face directory: ``attnkit.models.hf_bert``)
    loading_info: dict[str, list[str]]

    # ------------------------------------------------------------------ files
    def save_pretrained(
        self,
        directory: str | Path,
        labels: list[str] | None = None,
        temperature: float | None = None,
    ) -> Path:
        """Write a Hugging Face BERT directory (config.json + model.safetensors with Hugging
        Face's names) that ``transformers.BertModel.from_pretrained`` (or the head's class,
        for a model with a head) reads; ``labels``: a classifier's or tagger's class names
        (config.json's ``id2label``); ``temperature``: a calibrated classifier's T, folded
        into its head (``attnkit.models.hf_bert.fold_temperature``)."""
        return save_hf_bert(self, directory, labels=labels, temperature=temperature)

    @classmethod
    def from_pretrained(cls, directory: str | Path, map_location: str = "cpu") -> Any:
        """Load a Hugging Face BERT directory (config.json with ``"model_type": "bert"``,
        model.safetensors or pytorch_model.bin; a ``bert.`` prefix and pretraining heads are
        accepted) or one in attnkit's own format. In eval mode. Called on a head's class, a
        checkpoint without that head gives the encoder and a freshly initialised head
        (``model.loading_info`` lists the new tensors; a warning is logged)."""
        path = Path(directory) / CONFIG_FILE
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            raw = None
        if is_hf_bert_config(raw):
            return load_hf_bert(directory, cls, map_location=map_location)
        return super().from_pretrained(directory, map_location=map_location)

    def load_pretrained(self, source: PretrainedSource, log: Log) -> int:
        """Copy the encoder of ``source`` (a Hugging Face BERT directory or a BERT run) into
        this model (a ``BertModel``, or a head: into its encoder ``bert``); the head (and a
        pooler the source lacks) stay new. Returns the number of tensors copied."""
        self.config.check_source(source)
        if source.kind == "hf":
            pretrained: nn.Module = load_hf_bert(source.path, BertModel)
        else:
            pretrained = source.load_model()
        encoder = getattr(pretrained, "bert", pretrained)  # a head's run: its encoder
        target = getattr(self, "bert", self)
        own = target.state_dict()
        weights = {k: v for k, v in encoder.state_dict().items() if k in own}  # (pooler: if both)
        misfits = [
            f"{k} is {tuple(v.shape)} there, {tuple(own[k].shape)} here"
            for k, v in weights.items()
            if v.shape != own[k].shape
        ]
        if misfits:
            raise ConfigError(
                f"model.init_from: {source.path} does not fit the model ({len(misfits)} "
                f"tensors): {misfits[0]}"
            )
        result = target.load_state_dict(weights, strict=False)
        fresh = list(result.missing_keys)
        log(
            f"initialised the encoder from {source.path} ({len(weights)} tensors)"
            + (f"; new: {', '.join(sorted({k.split('.')[0] for k in fresh}))}" if fresh else "")
        )
        return len(weights)


class BertModel(HfBertFiles):
    """BERT's encoder: embeddings, ``num_layers`` post-norm ``EncoderLayer``s, the pooler.

    Parameter names are attnkit's (``embeddings.word.weight``,
    ``encoder.layers.0.self_attn.q_proj.weight``, ...);
    ``attnkit.models.hf_bert.hf_key_map`` maps them to Hugging Face's.
    """

    config_class: ClassVar[type[ModelConfig]] = BertConfig
    needs_cls = True
    returns_attention = True

    def __init__(
        self, config: BertConfig | None = None, add_pooling_layer: bool = True, **kwargs: Any
    ) -> None:
        super().__init__(config, **kwargs)
        c = self.config
        self.pad_id, self.max_len = c.pad_id, c.max_len
        self.embeddings = BertEmbeddings(c)
        self.encoder = Encoder(c.block(), c.num_layers)
        # (Hugging Face's masked-LM, token-classification and QA heads have no pooler)
        self.pooler = Linear(c.d_model, c.d_model) if add_pooling_layer else None
        self.apply(self._init_weights)

    def _init_weights(self, module: nn.Module) -> None:
        """BERT's initialisation: N(0, init_std) weights, zero biases, the [PAD] row zero."""
        std = self.config.init_std
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=std)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=std)
            if module.padding_idx is not None:
                with torch.no_grad():
                    module.weight[module.padding_idx].zero_()
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        output_hidden_states: bool = False,
    ) -> BertOutput:
        """input_ids (B, T) long; attention_mask (B, T), 1/True = real token (None: every
        position is real, as in Hugging Face); token_type_ids (B, T) segment ids (None: all
        sentence A). Returns ``BertOutput`` (``hidden_states`` with
        ``output_hidden_states``)."""
        t = input_ids.size(1)
        if t > self.max_len:
            raise ValueError(
                f"input of length {t} exceeds the model's max_len={self.max_len}; "
                "truncate the sequences first"
            )
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        mask = None if attention_mask is None else attention_mask.bool()  # (B, T)
        x = self.embeddings(input_ids, token_type_ids)  # (B, T, d_model)
        states: list[Tensor] | None = [] if output_hidden_states else None
        x = self.encoder(x, key_padding_mask=mask, hidden_states=states)  # (B, T, d_model)
        pooled = None if self.pooler is None else torch.tanh(self.pooler(x[:, 0]))  # (B, d)
        return BertOutput(x, pooled, hidden_states=states)


# --------------------------------------------------------------------------------------
# the task heads
# --------------------------------------------------------------------------------------
_ACT: dict[str, Callable[[Tensor], Tensor]] = {
    "gelu": F.gelu,
    "relu": F.relu,
    "gelu_tanh": partial(F.gelu, approximate="tanh"),
}
_LM_KEYS = {
    "lm_head.dense.weight": "cls.predictions.transform.dense.weight",
    "lm_head.dense.bias": "cls.predictions.transform.dense.bias",
    "lm_head.norm.weight": "cls.predictions.transform.LayerNorm.weight",
    "lm_head.norm.bias": "cls.predictions.transform.LayerNorm.bias",
    "lm_head.bias": "cls.predictions.bias",
}


def _real(input_ids: Tensor, attention_mask: Tensor | None) -> Tensor:
    """(B, T) float: 1 at real tokens (every token when there is no mask)."""
    if attention_mask is None:
        return torch.ones_like(input_ids, dtype=torch.float)
    return attention_mask.float()


class BertLMHead(nn.Module):
    """BERT's masked-LM head: LayerNorm(act(W h + b)) E^T + bias, with E the (tied) word
    embedding matrix passed in (B, T, d) | (N, d) -> (..., vocab)."""

    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.dense = Linear(c.d_model, c.d_model)
        self.act = _ACT[c.activation]
        self.norm = nn.LayerNorm(c.d_model, eps=c.layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(c.vocab_size))

    def forward(self, x: Tensor, embedding: Tensor) -> Tensor:
        return linear(self.norm(self.act(self.dense(x))), embedding, self.bias, owner=self)


class _BertWithHead(HfBertFiles):
    """A ``BertModel`` (``self.bert``) and a head; the config's ``arch`` is the head's."""

    needs_cls = True
    takes_token_types = True
    export_formats = ("int8", "onnx", "hf")

    def __init__(self, config: BertConfig | None = None, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        if self.config.arch != self.ARCH:  # BertForMaskedLM(BertConfig(...)) is a bert-mlm
            self.config = self.config.replace(arch=self.ARCH)
        c = self.config
        self.bert = BertModel(
            c.replace(arch="bert", freeze_encoder=False), add_pooling_layer=self.HAS_POOLER
        )

    def _init_head(self) -> None:
        """BERT's initialisation for every module but the (already initialised) encoder;
        in feature-based mode (``freeze_encoder``) the encoder is frozen and a ``ScalarMix``
        of its num_layers + 1 outputs is what the head reads."""
        if self.config.freeze_encoder:
            self.mix = ScalarMix(self.config.num_layers + 1)
            self.bert.requires_grad_(False)
            self.bert.eval()
        for name, module in self.named_children():
            if name not in ("bert", "mix"):
                module.apply(self.bert._init_weights)

    def train(self, mode: bool = True) -> _BertWithHead:
        """As ``nn.Module.train``, but a frozen encoder stays in eval mode (no dropout)."""
        super().train(mode)
        if self.config.freeze_encoder:
            self.bert.eval()
        return self

    def features(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None,
        token_type_ids: Tensor | None,
    ) -> BertOutput:
        """The encoder's output as the head reads it: fine-tuning, ``BertModel``'s own;
        feature-based, the frozen encoder run without gradients and ``last_hidden_state``
        replaced by the learned mix gamma * sum_j softmax(s)_j h_j of its layers."""
        if not self.config.freeze_encoder:
            return self.bert(input_ids, attention_mask, token_type_ids)
        with torch.no_grad():
            out = self.bert(input_ids, attention_mask, token_type_ids, output_hidden_states=True)
        out.last_hidden_state = self.mix(out.hidden_states)  # (B, T, d_model)
        return out

    def decoder_weight(self) -> Tensor:
        """The output projection of the masked-LM head: the word embedding itself."""
        return self.bert.embeddings.word.weight


class BertForMaskedLM(_BertWithHead):
    """BERT + the masked-LM head (decoder tied to the word embedding)."""

    ARCH: ClassVar[str] = "bert-mlm"
    OUTPUT: ClassVar[type] = MaskedLMOutput
    HAS_POOLER: ClassVar[bool] = False
    HEAD_KEYS: ClassVar[dict[str, str]] = dict(_LM_KEYS)

    def __init__(self, config: BertConfig | None = None, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self.lm_head = BertLMHead(self.config)
        self._init_head()

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        positions: Tensor | None = None,
    ) -> MaskedLMOutput:
        """input_ids, attention_mask, token_type_ids (B, T) as ``BertModel``'s; positions
        (B, T) bool: the positions to predict (None: all). Returns ``MaskedLMOutput`` with
        logits (B, T, vocab), or (N, vocab) for the N chosen positions in row-major order
        (only those projected)."""
        x = self.bert(input_ids, attention_mask, token_type_ids).last_hidden_state
        if positions is not None:
            x = x[positions]  # (N, d_model)
        return MaskedLMOutput(self.lm_head(x, self.decoder_weight()))

    def masked_lm(self) -> BertForMaskedLM:
        """The model that fills in [MASK] (itself)."""
        return self


class BertForPreTraining(_BertWithHead):
    """BERT + the masked-LM head + next-sentence prediction on the pooled [CLS] vector."""

    ARCH: ClassVar[str] = "bert-pretraining"
    OUTPUT: ClassVar[type] = MaskedLMOutput
    HEAD_KEYS: ClassVar[dict[str, str]] = {
        **_LM_KEYS,
        "nsp_head.weight": "cls.seq_relationship.weight",
        "nsp_head.bias": "cls.seq_relationship.bias",
    }

    def __init__(self, config: BertConfig | None = None, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self.lm_head = BertLMHead(self.config)
        self.nsp_head = Linear(self.config.d_model, 2)
        self._init_head()

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        positions: Tensor | None = None,
    ) -> MaskedLMOutput:
        """As ``BertForMaskedLM.forward``; returns ``MaskedLMOutput`` with logits (B, T,
        vocab) or (N, vocab) and next_sentence_logits (B, 2): index 0 = "B follows A"."""
        out = self.bert(input_ids, attention_mask, token_type_ids)
        x = out.last_hidden_state if positions is None else out.last_hidden_state[positions]
        return MaskedLMOutput(
            self.lm_head(x, self.decoder_weight()), self.nsp_head(out.pooler_output)
        )

    def masked_lm(self) -> BertForPreTraining:
        """The model that fills in [MASK] (itself; its ``logits``)."""
        return self


class BertForSequenceClassification(_BertWithHead):
    """BERT + Dropout + Linear(d_model, num_classes) on the pooled [CLS] vector."""

    ARCH: ClassVar[str] = "bert-classifier"
    OUTPUT: ClassVar[type] = ClassifierOutput
    returns_attention = True  # (its encoder's, recorded by attnkit.nn.capture)
    HEAD_KEYS: ClassVar[dict[str, str]] = {
        "classifier.weight": "classifier.weight",
        "classifier.bias": "classifier.bias",
    }

    def __init__(self, config: BertConfig | None = None, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self.dropout = Dropout(self.config.dropout)
        self.classifier = Linear(self.config.d_model, self.config.num_classes)
        self._init_head()

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
    ) -> ClassifierOutput:
        """Returns ``ClassifierOutput``: logits (B, num_classes) from the pooled vector
        ``config.pooling_used``: pooler (BERT's tanh layer on [CLS], Hugging Face's), mean
        (over real tokens of the states the head reads: the last layer, or the layer mix
        when ``freeze_encoder``) or cls (those states at [CLS])."""
        out = self.features(input_ids, attention_mask, token_type_ids)
        pooling, h = self.config.pooling_used, out.last_hidden_state  # (B, T, d)
        if pooling == "pooler":
            pooled = out.pooler_output
        elif pooling == "cls":
            pooled = h[:, 0]
        else:
            real = _real(input_ids, attention_mask).to(h.dtype)  # (B, T)
            pooled = (h * real.unsqueeze(-1)).sum(1) / real.sum(1, keepdim=True).clamp_min(1)
        return ClassifierOutput(self.classifier(self.dropout(pooled)))


class BertForTokenClassification(BertForSequenceClassification):
    """BERT + Dropout + Linear(d_model, num_classes) at every position (tagging): the
    sequence classifier's head, applied to each position instead of the pooled [CLS]."""

    ARCH: ClassVar[str] = "bert-tagger"
    OUTPUT: ClassVar[type] = TaggerOutput
    HAS_POOLER: ClassVar[bool] = False

    def forward(  # type: ignore[override]  # (the classifier's head, at every position)
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
    ) -> TaggerOutput:
        """Returns ``TaggerOutput`` with logits (B, T, num_classes)."""
        x = self.features(input_ids, attention_mask, token_type_ids).last_hidden_state
        return TaggerOutput(self.classifier(self.dropout(x)))


class BertForQuestionAnswering(_BertWithHead):
    """BERT + Linear(d_model, 2) at every position: span start and end scores."""

    ARCH: ClassVar[str] = "bert-qa"
    OUTPUT: ClassVar[type] = SpanOutput
    HAS_POOLER: ClassVar[bool] = False
    HEAD_KEYS: ClassVar[dict[str, str]] = {
        "qa_outputs.weight": "qa_outputs.weight",
        "qa_outputs.bias": "qa_outputs.bias",
    }

    def __init__(self, config: BertConfig | None = None, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self.qa_outputs = Linear(self.config.d_model, 2)
        self._init_head()

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
    ) -> SpanOutput:
        """Returns ``SpanOutput`` with start_logits and end_logits, each (B, T)."""
        x = self.features(input_ids, attention_mask, token_type_ids).last_hidden_state
        start, end = self.qa_outputs(x).unbind(-1)
        return SpanOutput(start, end)


# model.arch -> its class (BertConfig.model_class)
_BERT_CLASSES: dict[str, type[HfBertFiles]] = {
    cls.ARCH: cls
    for cls in (
        BertModel,
        BertForMaskedLM,
        BertForPreTraining,
        BertForSequenceClassification,
        BertForTokenClassification,
        BertForQuestionAnswering,
    )
}

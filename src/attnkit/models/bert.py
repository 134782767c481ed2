"""BERT (Devlin et al., 2019) built from attnkit's own layers.

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
that knows those names is ``attnkit.interop.hf_bert``.

    model = BertModel.from_pretrained("all-MiniLM-L6-v2/")    # a Hugging Face directory
    out = model(input_ids, attention_mask)                    # BertOutput
    out.last_hidden_state  # (B, T, d_model)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from attnkit.core.config import ConfigError, check, positive, short_repr
from attnkit.models.base import AttnkitModel, ModelConfig, param
from attnkit.nn.dropout import Dropout
from attnkit.nn.layers import BlockConfig, Encoder, LearnedPositionalEmbedding, SegmentEmbedding

__all__ = ["BERT_ARCHS", "PRESETS", "BertConfig", "BertModel", "BertOutput", "HfBertFiles"]

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
# model.arch -> (the model's class name in attnkit.models.bert_heads, Hugging Face's class)
BERT_ARCHS = {
    "bert": "BertModel",
    "bert-mlm": "BertForMaskedLM",
    "bert-pretraining": "BertForPreTraining",
    "bert-classifier": "BertForSequenceClassification",
    "bert-tagger": "BertForTokenClassification",
    "bert-qa": "BertForQuestionAnswering",
}


@dataclass
class BertConfig(ModelConfig):
    """BERT's encoder sizes (BERT-base's defaults), in attnkit's names; see
    ``attnkit.interop.hf_bert`` for the Hugging Face config.json keys they map to."""

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

    def validate(self) -> None:
        super().validate()
        check(
            positive("model.vocab_size", self.vocab_size),
            positive("model.d_model", self.d_model),
            positive("model.num_heads", self.num_heads),
            positive("model.d_ff", self.d_ff),
            positive("model.num_layers", self.num_layers),
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
                self.d_model % self.num_heads == 0,
                f"model.d_model must be divisible by model.num_heads, got d_model "
                f"{self.d_model} and num_heads {self.num_heads}",
            ),
            (
                0 <= self.pad_id < self.vocab_size,
                f"model.pad_id must be in [0, vocab_size), got {self.pad_id}",
            ),
            (0.0 <= self.dropout < 1.0, f"model.dropout must be in [0, 1), got {self.dropout!r}"),
            (
                0.0 <= self.attention_dropout < 1.0,
                f"model.attention_dropout must be in [0, 1), got {self.attention_dropout!r}",
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

    def model_class(self) -> type[HfBertFiles]:
        """The class of ``arch``: ``BertModel`` or one of ``attnkit.models.bert_heads``."""
        if self.arch == "bert":
            return BertModel
        from attnkit.models import bert_heads

        return getattr(bert_heads, BERT_ARCHS[self.arch])

    def build(self) -> HfBertFiles:
        return self.model_class()(self)


@dataclass
class BertOutput:
    """What ``BertModel.forward`` returns (like Hugging Face's
    ``BaseModelOutputWithPoolingAndCrossAttentions``).

    last_hidden_state: (B, T, d_model) the last encoder layer's output at every position.
    pooler_output: (B, d_model) tanh(W h_0 + b), the [CLS] position's pooled vector (None
        for a model built without the pooler, as inside the heads that do not use it).
    attentions: per layer (B, H, T, T) self-attention weights; only with ``need_weights``.
    hidden_states: the embeddings' output and each layer's, num_layers + 1 tensors
        (B, T, d_model); only with ``output_hidden_states``.
    """

    last_hidden_state: Tensor
    pooler_output: Tensor | None
    attentions: list[Tensor] | None = None
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
    and the heads of ``attnkit.models.bert_heads``: ``ARCH`` (the config's ``model.arch``),
    ``HAS_POOLER`` (Hugging Face's model has ``bert.pooler``) and ``HEAD_KEYS`` (the head's
    attnkit names -> Hugging Face's) are all ``attnkit.interop.hf_bert`` needs."""

    config_class: ClassVar[type[ModelConfig]] = BertConfig
    ARCH: ClassVar[str] = "bert"
    HAS_POOLER: ClassVar[bool] = True
    HEAD_KEYS: ClassVar[dict[str, str]] = {}

    # ------------------------------------------------------------------ files
    def save_pretrained(self, directory: str | Path) -> Path:
        """Write a Hugging Face BERT directory (config.json + model.safetensors with Hugging
        Face's names) that ``transformers.BertModel.from_pretrained`` (or the head's class,
        for a model with a head) reads."""
        from attnkit.interop.hf_bert import save_hf_bert

        return save_hf_bert(self, directory)

    @classmethod
    def from_pretrained(cls, directory: str | Path, map_location: str = "cpu") -> Any:
        """Load a Hugging Face BERT directory (config.json with ``"model_type": "bert"``,
        model.safetensors or pytorch_model.bin; a ``bert.`` prefix and pretraining heads are
        accepted) or one in attnkit's own format. In eval mode. Called on a head's class, a
        checkpoint without that head gives the encoder and a freshly initialised head
        (``model.loading_info`` lists the new tensors; a warning is logged)."""
        from attnkit.interop.hf_bert import is_hf_bert_config, load_hf_bert

        path = Path(directory) / "config.json"
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            raw = None
        if is_hf_bert_config(raw):
            return load_hf_bert(directory, map_location=map_location, model_class=cls)
        return super().from_pretrained(directory, map_location=map_location)


class BertModel(HfBertFiles):
    """BERT's encoder: embeddings, ``num_layers`` post-norm ``EncoderLayer``s, the pooler.

    Parameter names are attnkit's (``embeddings.word.weight``,
    ``encoder.layers.0.self_attn.q_proj.weight``, ...);
    ``attnkit.interop.hf_bert.hf_key_map`` maps them to Hugging Face's.
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
        self.pooler = nn.Linear(c.d_model, c.d_model) if add_pooling_layer else None
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
        need_weights: bool = False,
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
        states = None
        if output_hidden_states:  # layer by layer (post-norm: the stack adds no final norm)
            states, weights = [x], [] if need_weights else None
            for layer in self.encoder.layers:
                x, w = layer(x, mask, None, need_weights)
                states.append(x)
                if weights is not None:
                    weights.append(w)
        else:
            x, weights = self.encoder(x, key_padding_mask=mask, need_weights=need_weights)
        pooled = None if self.pooler is None else torch.tanh(self.pooler(x[:, 0]))  # (B, d)
        return BertOutput(x, pooled, attentions=weights, hidden_states=states)

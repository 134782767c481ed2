"""Sequence classifiers (the course's sentiment classifier and its RNN baselines).

    ids (B, T) -> TokenEmbedding * sqrt(d_model) + PE -> Dropout     (B, T, d_model)
               -> Encoder (num_layers x [self-attention, FFN])       (B, T, d_model)
               -> pool over real tokens ("mean" | "max" | "cls")     (B, d_model)
               -> Dropout -> Linear                                  (B, num_classes)

``RNNClassifier`` replaces the encoder by an RNN / LSTM / GRU over packed sequences, so
padding never enters the recurrence. Every classifier (these, ``ngram``, ``elmo``,
``gpt-classifier``; ``bert-classifier`` takes ``token_type_ids`` too) shares one forward
signature and one output type:

    model(input_ids (B, T) long, attention_mask (B, T) bool | None)
        -> ClassifierOutput(logits (B, num_classes))

(the attention weights, where there are any, are recorded by ``attnkit.nn.capture``)

``attention_mask`` is True on real tokens (Hugging Face convention); when None it is
derived from ``pad_id``. Padding is expected on the right (the data pipeline's layout).
Models know only tensors: the task decides how logits become predictions and metrics.

Each model is built from its config (``TransformerClassifierConfig``, ``RNNClassifierConfig``;
``attnkit.models.base``), which a recipe's ``model:`` section fills in. With
``model.init_from`` both start from a masked-LM run (task mlm): the Transformer takes its
encoder, the RNN its token embedding, and both its tokenizer.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from attnkit.core.config import ConfigError, check, positive, short_repr
from attnkit.data.tokenization import Tokenizer
from attnkit.models.base import (
    AttnkitModel,
    ClassifierOutput,
    Log,
    ModelConfig,
    PretrainedSource,
    TransformerSizes,
    param,
)
from attnkit.nn.attention import padding_mask
from attnkit.nn.dropout import Dropout
from attnkit.nn.fast_paths import Linear
from attnkit.nn.layers import (
    Encoder,
    LearnedPositionalEmbedding,
    SinusoidalPositionalEncoding,
    TokenEmbedding,
)

__all__ = [
    "RNNClassifier",
    "RNNClassifierConfig",
    "TransformerClassifier",
    "TransformerClassifierConfig",
    "TransformerEncoderConfig",
    "TransformerEncoderModel",
    "masked_max",
    "masked_mean",
]

# keys of the masked-LM pretraining config: a classifier recipe that sets them gets this
_PRETRAINING_ONLY = {
    key: f"model.{key} is for task mlm (pretraining)"
    for key in ("objective", "generator_d_model", "rtd_weight")
}


def _check_mlm_source(source: PretrainedSource) -> None:
    """A classifier's ``model.init_from`` must be a finished run of a masked-LM pretrained
    encoder (the ``masked_lm`` family of ``attnkit.models.masked_lm``: task mlm, either
    objective)."""
    source.require_model("masked_lm", "it must be a task mlm run (a masked_lm encoder)")


class _TakesEncoder(Protocol):
    """A classifier that can start from a task-mlm run's weights (both classifiers)."""

    def load_pretrained_encoder(self, weights: dict[str, Tensor], source: str) -> int: ...


def _load_mlm_encoder(model: _TakesEncoder, source: PretrainedSource, log: Log) -> int:
    """Copy what ``model`` (``load_pretrained_encoder``) takes of a task-mlm run; log it."""
    _check_mlm_source(source)
    copied = model.load_pretrained_encoder(source.state_dict(), source.given)
    log(f"initialised from {source.given} ({copied} tensors)")
    return int(copied)


# --------------------------------------------------------------------------------------
# Pooling over real tokens
# --------------------------------------------------------------------------------------
def masked_mean(x: Tensor, mask: Tensor) -> Tensor:
    """Mean of x (B, T, D) over the positions where mask (B, T) is True -> (B, D).

    Padding contributes exactly nothing; a row with no real token gives zeros."""
    m = mask.unsqueeze(-1).to(x.dtype)  # (B, T, 1)
    total = (x * m).sum(dim=1)  # (B, D)
    count = m.sum(dim=1).clamp(min=1.0)  # (B, 1)
    return total / count


def masked_max(x: Tensor, mask: Tensor) -> Tensor:
    """Max of x (B, T, D) over the positions where mask (B, T) is True -> (B, D).

    Padded positions never win, however large their vectors; a row with no real token
    gives zeros."""
    m = mask.unsqueeze(-1)  # (B, T, 1)
    pooled = x.masked_fill(~m, torch.finfo(x.dtype).min).amax(dim=1)  # (B, D)
    return pooled.masked_fill(~mask.any(dim=1, keepdim=True), 0.0)


def _real_token_mask(input_ids: Tensor, attention_mask: Tensor | None, pad_id: int) -> Tensor:
    """(B, T) bool, True = real token: the given mask (any dtype) or ``input_ids != pad_id``."""
    if attention_mask is None:
        return padding_mask(input_ids, pad_id)
    if attention_mask.shape != input_ids.shape:
        raise ValueError(
            f"attention_mask shape {tuple(attention_mask.shape)} does not match "
            f"input_ids shape {tuple(input_ids.shape)}"
        )
    return attention_mask.bool()


# --------------------------------------------------------------------------------------
# Transformer encoder (shared by the classifier and masked-LM pretraining)
# --------------------------------------------------------------------------------------
@dataclass
class TransformerEncoderConfig(TransformerSizes):
    """The Transformer encoder's settings (shared by the classifier and the masked LM)."""

    embed_scale: bool = param(True, "multiply token embeddings by sqrt(d_model) (the paper)")


class TransformerEncoderModel(AttnkitModel):
    """Token embedding + positional encoding + ``num_layers`` encoder blocks.

    The body that ``TransformerClassifier`` (pooling + linear head) and ``TransformerMLM``
    (masked-LM head, ``attnkit.models.masked_lm``) add their heads to; both keep the parameter
    names ``embed.*``, ``pos.*`` and ``encoder.*``, so pretrained encoder weights load into a
    classifier one to one.
    """

    config_class: ClassVar[type[ModelConfig]] = TransformerEncoderConfig
    config: TransformerEncoderConfig
    returns_attention = True
    POSITIONALS = TransformerEncoderConfig.POSITIONALS

    def __init__(self, config: TransformerEncoderConfig | None = None, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        c = self.config
        self.pad_id = c.pad_id
        self.max_len = c.max_len
        self.d_model = c.d_model
        self.embed = TokenEmbedding(
            c.vocab_size, c.d_model, padding_idx=c.pad_id, scale=c.embed_scale
        )
        self.pos: SinusoidalPositionalEncoding | LearnedPositionalEmbedding
        if c.positional == "sinusoidal":
            self.pos = SinusoidalPositionalEncoding(c.d_model, c.max_len)
        else:
            self.pos = LearnedPositionalEmbedding(c.max_len, c.d_model)
        self.embed_dropout = Dropout(c.dropout)
        self.encoder = Encoder(c.block(), c.num_layers)

    def encode(
        self, input_ids: Tensor, attention_mask: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """input_ids (B, T) long; attention_mask (B, T), True = real token (None:
        ``input_ids != pad_id``). Returns (hidden states (B, T, d_model), the boolean mask
        (B, T))."""
        t = input_ids.size(1)
        if t > self.max_len:
            raise ValueError(
                f"input of length {t} exceeds the model's max_len={self.max_len}; "
                "truncate the sequences first (the data pipeline does) or build with a "
                "larger max_len"
            )
        mask = _real_token_mask(input_ids, attention_mask, self.pad_id)  # (B, T)
        x = self.embed_dropout(self.pos(self.embed(input_ids)))  # (B, T, d_model)
        return self.encoder(x, key_padding_mask=mask), mask


# --------------------------------------------------------------------------------------
# Transformer encoder classifier
# --------------------------------------------------------------------------------------
@dataclass
class TransformerClassifierConfig(TransformerEncoderConfig):
    """``arch: transformer`` for task classify."""

    model_type: ClassVar[str] = "classifier"
    KEY_HINTS: ClassVar[dict[str, str]] = _PRETRAINING_ONLY

    arch: str = param("transformer", "transformer")
    num_classes: int = param(2, "output classes (the labels in the training data)", True)
    pooling: str = param("mean", "mean | max over real tokens, or cls (the vector at [CLS])")
    init_from: str | None = param(
        None,
        "a task-mlm run whose encoder and tokenizer the classifier starts from; its sizes "
        "replace d_model / num_heads / d_ff / num_layers",
    )

    POOLINGS: ClassVar[tuple[str, ...]] = ("mean", "max", "cls")
    OUTPUT: ClassVar[type | None] = ClassifierOutput
    PRETRAINED_KEYS: ClassVar[tuple[str, ...]] = (
        "d_model",
        "num_heads",
        "d_ff",
        "num_layers",
        "positional",
        "norm_first",
        "activation",
    )

    @property
    def needs_cls(self) -> bool:
        return self.pooling == "cls"

    def validate(self) -> None:
        super().validate()
        check(
            positive("model.num_classes", self.num_classes),
            (
                self.pooling in self.POOLINGS,
                f"model.pooling must be one of {', '.join(self.POOLINGS)} for arch transformer, "
                f"got {short_repr(self.pooling)}",
            ),
        )

    def build(self) -> TransformerClassifier:
        return TransformerClassifier(self)

    def check_source(self, source: PretrainedSource) -> None:
        _check_mlm_source(source)

    def adopt(
        self, source: PretrainedSource, max_len: int, log: Log
    ) -> tuple[TransformerClassifierConfig, Tokenizer]:
        """The encoder's sizes (``PRETRAINED_KEYS``) and the run's tokenizer (the classifier
        reads text exactly as its encoder did); learned positions bound ``max_len``."""
        config, tokenizer = super().adopt(source, max_len, log)
        trained = source.raw["data"]["max_len"]
        if config.positional == "learned" and max_len > trained:
            raise ConfigError(
                f"data.max_len={max_len} exceeds the pretrained learned positions "
                f"({trained}); lower it or pretrain with a larger max_len"
            )
        return config, tokenizer


class TransformerClassifier(TransformerEncoderModel):
    """The encoder of ``TransformerEncoderModel``, then pooling and a linear head.

    pooling: "mean" (masked mean over real tokens), "max" (masked max), or "cls" (the vector
    at position 0; ``needs_cls`` tells the data pipeline to put a [CLS] token there).
    positional: "sinusoidal" (fixed, paper) or "learned" (BERT style).
    """

    config_class: ClassVar[type[ModelConfig]] = TransformerClassifierConfig
    config: TransformerClassifierConfig
    POOLINGS = TransformerClassifierConfig.POOLINGS
    export_formats = ("int8", "onnx")

    def __init__(self, config: TransformerClassifierConfig | None = None, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        c = self.config
        self.pooling = c.pooling
        self.needs_cls = c.needs_cls
        self.num_classes = c.num_classes
        self.head_dropout = Dropout(c.dropout)
        self.head = Linear(c.d_model, c.num_classes)

    def load_pretrained_encoder(self, weights: dict[str, Tensor], source: str) -> int:
        """Copy a pretrained encoder (``embed.*``, ``pos.*``, ``encoder.*`` of a masked-LM
        run's weights) into this model; returns the number of tensors copied. The pooling
        and head stay freshly initialised; learned positions are cut to this ``max_len``."""
        own = self.state_dict()
        wanted = [k for k in own if k.startswith(("embed.", "pos.", "encoder."))]
        missing = [k for k in wanted if k not in weights]
        if missing:
            raise ConfigError(f"model.init_from: {source} lacks {', '.join(missing[:3])}")
        update = {}
        for k in wanted:
            value = weights[k]
            if k == "pos.embedding.weight":
                value = value[: own[k].size(0)]
            if value.shape != own[k].shape:
                raise ConfigError(
                    f"model.init_from: {k} has shape {tuple(value.shape)} in {source}, "
                    f"{tuple(own[k].shape)} in the classifier"
                )
            update[k] = value
        self.load_state_dict(update, strict=False)
        return len(update)

    def load_pretrained(self, source: PretrainedSource, log: Log) -> int:
        """The encoder of a task-mlm run (``load_pretrained_encoder``)."""
        return _load_mlm_encoder(self, source, log)

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> ClassifierOutput:
        """input_ids (B, T) long; attention_mask (B, T) bool, True = real token (None:
        ``input_ids != pad_id``). Returns ``ClassifierOutput``: logits (B, num_classes)."""
        x, mask = self.encode(input_ids, attention_mask)
        if self.pooling == "mean":
            pooled = masked_mean(x, mask)
        elif self.pooling == "max":
            pooled = masked_max(x, mask)
        else:  # "cls"
            pooled = x[:, 0]
        return ClassifierOutput(self.head(self.head_dropout(pooled)))  # (B, C)


# --------------------------------------------------------------------------------------
# Recurrent classifier (RNN / LSTM / GRU baselines)
# --------------------------------------------------------------------------------------
# (each class's own constructor: RNNBase's takes a mode first)
_CELLS: dict[str, Callable[..., nn.RNNBase]] = {"rnn": nn.RNN, "lstm": nn.LSTM, "gru": nn.GRU}


@dataclass
class RNNClassifierConfig(ModelConfig):
    """``arch: rnn | lstm | gru`` for task classify (the recurrent baselines)."""

    model_type: ClassVar[str] = "classifier"
    KEY_HINTS: ClassVar[dict[str, str]] = _PRETRAINING_ONLY

    arch: str = param("lstm", "the recurrent cell: rnn | lstm | gru")
    num_classes: int = param(2, "output classes (the labels in the training data)", True)
    d_model: int = param(256, "token embedding size")
    hidden_size: int = param(256, "hidden state size of each direction")
    num_layers: int = param(2, "stacked recurrent layers")
    bidirectional: bool = param(True, "read the text in both directions")
    dropout: float = param(0.1, "dropout on embeddings, between layers and before the head")
    pooling: str = param("mean", "mean | max over real positions, or last (final state)")
    init_from: str | None = param(
        None, "a task-mlm run whose token embedding (and tokenizer) the classifier starts from"
    )

    CELLS: ClassVar[tuple[str, ...]] = ("rnn", "lstm", "gru")
    OUTPUT: ClassVar[type | None] = ClassifierOutput
    # a recurrent classifier takes only the token embedding, so only its width must match
    PRETRAINED_KEYS: ClassVar[tuple[str, ...]] = ("d_model",)
    POOLINGS: ClassVar[tuple[str, ...]] = ("mean", "max", "last")

    def validate(self) -> None:
        super().validate()
        check(
            (self.arch in self.CELLS, f"model.arch must be one of {', '.join(self.CELLS)}"),
            positive("model.d_model", self.d_model),
            positive("model.hidden_size", self.hidden_size),
            positive("model.num_layers", self.num_layers),
            positive("model.num_classes", self.num_classes),
            (0.0 <= self.dropout < 1.0, f"model.dropout must be in [0, 1), got {self.dropout!r}"),
            (
                self.pooling in self.POOLINGS,
                f"model.pooling must be one of {', '.join(self.POOLINGS)} for arch {self.arch}, "
                f"got {short_repr(self.pooling)}",
            ),
        )

    def build(self) -> RNNClassifier:
        return RNNClassifier(self)

    def check_source(self, source: PretrainedSource) -> None:
        _check_mlm_source(source)


class RNNClassifier(AttnkitModel):
    """Embedding, a (bi)directional RNN / LSTM / GRU over packed sequences, pooling, head.

    pooling: "mean" / "max" over the real positions' outputs (B, T, hidden * directions),
    or "last": the final hidden state of the top layer (forward and backward concatenated
    when bidirectional). Sequences are packed with their lengths, so pads never enter the
    recurrence; the mask must be a prefix of each row (right padding).
    """

    config_class: ClassVar[type[ModelConfig]] = RNNClassifierConfig
    config: RNNClassifierConfig
    POOLINGS = RNNClassifierConfig.POOLINGS

    def __init__(self, config: RNNClassifierConfig | None = None, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        c = self.config
        self.cell, self.pooling, self.pad_id = c.arch, c.pooling, c.pad_id
        self.num_classes = c.num_classes
        self.num_directions = 2 if c.bidirectional else 1

        self.embed = nn.Embedding(c.vocab_size, c.d_model, padding_idx=c.pad_id)
        self.embed_dropout = Dropout(c.dropout)
        self.rnn = _CELLS[c.arch](
            c.d_model,
            c.hidden_size,
            num_layers=c.num_layers,
            batch_first=True,
            bidirectional=c.bidirectional,
            dropout=c.dropout if c.num_layers > 1 else 0.0,  # between layers only
        )
        self.head_dropout = Dropout(c.dropout)
        self.head = Linear(c.hidden_size * self.num_directions, c.num_classes)

    def load_pretrained_encoder(self, weights: dict[str, Tensor], source: str) -> int:
        """Take the token embedding of a pretrained Transformer encoder, as the vectors that
        encoder saw: ``E * sqrt(d_model)`` (``TokenEmbedding``'s scale), so they have the
        size the recurrent layer expects of its inputs (the feature-based use of a
        pretrained model, like word2vec vectors). Returns 1 (tensors copied)."""
        table = weights.get("embed.embedding.weight")
        if table is None:
            raise ConfigError(f"model.init_from: {source} has no token embedding")
        value = table * math.sqrt(table.size(1))
        if value.shape != self.embed.weight.shape:
            raise ConfigError(
                f"model.init_from: the token embedding has shape {tuple(value.shape)} in "
                f"{source}, {tuple(self.embed.weight.shape)} in the classifier"
            )
        self.load_state_dict({"embed.weight": value}, strict=False)
        return 1

    def load_pretrained(self, source: PretrainedSource, log: Log) -> int:
        """The token embedding of a task-mlm run (``load_pretrained_encoder``)."""
        return _load_mlm_encoder(self, source, log)

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> ClassifierOutput:
        """input_ids (B, T) long; attention_mask (B, T), True = real token (None:
        ``input_ids != pad_id``). Returns ``ClassifierOutput`` with logits (B, num_classes)
        (an RNN has no attention weights)."""
        mask = _real_token_mask(input_ids, attention_mask, self.pad_id)  # (B, T)
        t = input_ids.size(1)
        lengths = mask.sum(dim=1)  # (B,)
        x = self.embed_dropout(self.embed(input_ids))  # (B, T, d_model)
        # pack_padded_sequence needs lengths >= 1 (on the CPU); an empty row reads one pad.
        packed = pack_padded_sequence(
            x, lengths.clamp(min=1).cpu(), batch_first=True, enforce_sorted=False
        )
        out, h_n = self.rnn(packed)
        if self.pooling == "last":
            h_n = h_n[0] if isinstance(h_n, tuple) else h_n  # LSTM: (h_n, c_n)
            # h_n (num_layers * D, B, hidden): the top layer's directions are the last D rows.
            pooled = torch.cat(list(h_n[-self.num_directions :]), dim=-1)  # (B, hidden * D)
        else:
            out, _ = pad_packed_sequence(out, batch_first=True, total_length=t)  # (B, T, H*D)
            pool = masked_mean if self.pooling == "mean" else masked_max
            pooled = pool(out, mask)
        return ClassifierOutput(self.head(self.head_dropout(pooled)))

"""Sequence classifiers (the course's sentiment classifier and its RNN baselines).

    ids (B, T) -> TokenEmbedding * sqrt(d_model) + PE -> Dropout     (B, T, d_model)
               -> Encoder (num_layers x [self-attention, FFN])       (B, T, d_model)
               -> pool over real tokens ("mean" | "max" | "cls")     (B, d_model)
               -> Dropout -> Linear                                  (B, num_classes)

``RNNClassifier`` replaces the encoder by an RNN / LSTM / GRU over packed sequences, so
padding never enters the recurrence. Both share one forward signature:

    model(input_ids (B, T) long, attention_mask (B, T) bool | None, need_weights=False)
        -> (logits (B, num_classes), per-layer attention weights [(B, H, T, T)] | None)

``attention_mask`` is True on real tokens (Hugging Face convention); when None it is
derived from ``pad_id``. Padding is expected on the right (the data pipeline's layout).
Models know only tensors: the task decides how logits become predictions and metrics.
"""

from __future__ import annotations

import inspect

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from attnkit.attention import padding_mask
from attnkit.layers import (
    Encoder,
    LearnedPositionalEmbedding,
    SinusoidalPositionalEncoding,
    TokenEmbedding,
)
from attnkit.models.ngram import NgramClassifier

__all__ = [
    "ARCHS",
    "RNNClassifier",
    "TransformerClassifier",
    "TransformerEncoderModel",
    "build_classifier",
    "masked_max",
    "masked_mean",
]


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
class TransformerEncoderModel(nn.Module):
    """Token embedding + positional encoding + ``num_layers`` encoder blocks.

    The body that ``TransformerClassifier`` (pooling + linear head) and ``TransformerMLM``
    (masked-LM head, ``attnkit.models.mlm``) add their heads to; both keep the parameter
    names ``embed.*``, ``pos.*`` and ``encoder.*``, so pretrained encoder weights load into a
    classifier one to one.
    positional: "sinusoidal" (fixed, paper) or "learned" (BERT style).
    attention_dropout: dropout on the attention weights (None: ``dropout``); see
    ``attnkit.layers.EncoderLayer``.
    """

    POSITIONALS = ("sinusoidal", "learned")

    def __init__(
        self,
        vocab_size: int,
        d_model: int = 256,
        num_heads: int = 4,
        d_ff: int = 1024,
        num_layers: int = 2,
        dropout: float = 0.1,
        max_len: int = 512,
        positional: str = "sinusoidal",
        norm_first: bool = False,
        activation: str = "gelu",
        pad_id: int = 0,
        embed_scale: bool = True,
        attention_dropout: float | None = None,
    ) -> None:
        super().__init__()
        if positional not in self.POSITIONALS:
            raise ValueError(f"positional must be one of {self.POSITIONALS}, got {positional!r}")
        self.pad_id = pad_id
        self.max_len = max_len
        self.d_model = d_model
        self.embed = TokenEmbedding(vocab_size, d_model, padding_idx=pad_id, scale=embed_scale)
        if positional == "sinusoidal":
            self.pos = SinusoidalPositionalEncoding(d_model, max_len)
        else:
            self.pos = LearnedPositionalEmbedding(max_len, d_model)
        self.embed_dropout = nn.Dropout(dropout)
        self.encoder = Encoder(
            num_layers,
            d_model,
            num_heads,
            d_ff,
            dropout,
            activation,
            norm_first,
            attention_dropout=attention_dropout,
        )

    def encode(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor, list[Tensor] | None]:
        """input_ids (B, T) long; attention_mask (B, T), True = real token (None:
        ``input_ids != pad_id``). Returns (hidden states (B, T, d_model), the boolean mask
        (B, T), per-layer self-attention weights [(B, H, T, T)] if ``need_weights``)."""
        t = input_ids.size(1)
        if t > self.max_len:
            raise ValueError(
                f"input of length {t} exceeds the model's max_len={self.max_len}; "
                "truncate the sequences first (the data pipeline does) or build with a "
                "larger max_len"
            )
        mask = _real_token_mask(input_ids, attention_mask, self.pad_id)  # (B, T)
        x = self.embed_dropout(self.pos(self.embed(input_ids)))  # (B, T, d_model)
        x, weights = self.encoder(x, key_padding_mask=mask, need_weights=need_weights)
        return x, mask, weights


# --------------------------------------------------------------------------------------
# Transformer encoder classifier
# --------------------------------------------------------------------------------------
class TransformerClassifier(TransformerEncoderModel):
    """The encoder of ``TransformerEncoderModel``, then pooling and a linear head.

    pooling: "mean" (masked mean over real tokens), "max" (masked max), or "cls" (the vector
    at position 0; ``needs_cls`` tells the data pipeline to put a [CLS] token there).
    positional: "sinusoidal" (fixed, paper) or "learned" (BERT style).
    """

    POOLINGS = ("mean", "max", "cls")

    def __init__(
        self,
        vocab_size: int,
        num_classes: int,
        d_model: int = 256,
        num_heads: int = 4,
        d_ff: int = 1024,
        num_layers: int = 2,
        dropout: float = 0.1,
        max_len: int = 512,
        pooling: str = "mean",
        positional: str = "sinusoidal",
        norm_first: bool = False,
        activation: str = "gelu",
        pad_id: int = 0,
        embed_scale: bool = True,
        attention_dropout: float | None = None,
    ) -> None:
        if pooling not in self.POOLINGS:
            raise ValueError(f"pooling must be one of {self.POOLINGS}, got {pooling!r}")
        super().__init__(
            vocab_size,
            d_model=d_model,
            num_heads=num_heads,
            d_ff=d_ff,
            num_layers=num_layers,
            dropout=dropout,
            max_len=max_len,
            positional=positional,
            norm_first=norm_first,
            activation=activation,
            pad_id=pad_id,
            embed_scale=embed_scale,
            attention_dropout=attention_dropout,
        )
        self.pooling = pooling
        self.needs_cls = pooling == "cls"
        self.num_classes = num_classes
        self.head_dropout = nn.Dropout(dropout)
        self.head = nn.Linear(d_model, num_classes)

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, list[Tensor] | None]:
        """input_ids (B, T) long; attention_mask (B, T) bool, True = real token (None:
        ``input_ids != pad_id``). Returns (logits (B, num_classes), per-layer self-attention
        weights [(B, H, T, T)] if ``need_weights`` else None)."""
        x, mask, weights = self.encode(input_ids, attention_mask, need_weights)
        if self.pooling == "mean":
            pooled = masked_mean(x, mask)
        elif self.pooling == "max":
            pooled = masked_max(x, mask)
        else:  # "cls"
            pooled = x[:, 0]
        return self.head(self.head_dropout(pooled)), weights  # (B, num_classes)


# --------------------------------------------------------------------------------------
# Recurrent classifier (RNN / LSTM / GRU baselines)
# --------------------------------------------------------------------------------------
_CELLS: dict[str, type[nn.RNNBase]] = {"rnn": nn.RNN, "lstm": nn.LSTM, "gru": nn.GRU}


class RNNClassifier(nn.Module):
    """Embedding, a (bi)directional RNN / LSTM / GRU over packed sequences, pooling, head.

    pooling: "mean" / "max" over the real positions' outputs (B, T, hidden * directions),
    or "last": the final hidden state of the top layer (forward and backward concatenated
    when bidirectional). Sequences are packed with their lengths, so pads never enter the
    recurrence; the mask must be a prefix of each row (right padding).
    """

    POOLINGS = ("mean", "max", "last")
    needs_cls = False

    def __init__(
        self,
        vocab_size: int,
        num_classes: int,
        cell: str = "lstm",
        d_model: int = 256,
        hidden_size: int = 256,
        num_layers: int = 1,
        bidirectional: bool = True,
        dropout: float = 0.1,
        pooling: str = "mean",
        pad_id: int = 0,
    ) -> None:
        super().__init__()
        if cell not in _CELLS:
            raise ValueError(f"cell must be one of {tuple(_CELLS)}, got {cell!r}")
        if pooling not in self.POOLINGS:
            raise ValueError(f"pooling must be one of {self.POOLINGS}, got {pooling!r}")
        self.cell, self.pooling, self.pad_id = cell, pooling, pad_id
        self.num_classes = num_classes
        self.num_directions = 2 if bidirectional else 1

        self.embed = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        self.embed_dropout = nn.Dropout(dropout)
        self.rnn = _CELLS[cell](
            d_model,
            hidden_size,
            num_layers=num_layers,
            batch_first=True,
            bidirectional=bidirectional,
            dropout=dropout if num_layers > 1 else 0.0,  # between layers only
        )
        self.head_dropout = nn.Dropout(dropout)
        self.head = nn.Linear(hidden_size * self.num_directions, num_classes)

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, None]:
        """input_ids (B, T) long; attention_mask (B, T), True = real token (None:
        ``input_ids != pad_id``). Returns (logits (B, num_classes), None): an RNN has no
        attention weights, ``need_weights`` is accepted for a uniform interface."""
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
        return self.head(self.head_dropout(pooled)), None


# --------------------------------------------------------------------------------------
# Factory
# --------------------------------------------------------------------------------------
ARCHS = ("transformer", "rnn", "lstm", "gru", "ngram")

# Arguments the factory fills itself (the cell comes from ``arch``).
_RESERVED = {"self", "vocab_size", "num_classes", "pad_id", "cell"}


def build_classifier(
    arch: str, vocab_size: int, num_classes: int, pad_id: int, **hparams: object
) -> nn.Module:
    """Build a classifier by name: "transformer" -> TransformerClassifier; "rnn" | "lstm" |
    "gru" -> RNNClassifier with that cell; "ngram" -> ``attnkit.models.ngram.NgramClassifier``
    (bag of n-grams, NBSVM). ``hparams`` are the class's keyword arguments;
    an unknown arch or hyperparameter name raises ValueError listing the valid ones."""
    arch = arch.lower()
    if arch not in ARCHS:
        raise ValueError(f"unknown classifier arch {arch!r}; choose one of {', '.join(ARCHS)}")
    cls: type[nn.Module] = {"transformer": TransformerClassifier, "ngram": NgramClassifier}.get(
        arch, RNNClassifier
    )
    valid = [n for n in inspect.signature(cls.__init__).parameters if n not in _RESERVED]
    unknown = sorted(set(hparams) - set(valid))
    if unknown:
        raise ValueError(
            f"unknown hyperparameter(s) {', '.join(map(repr, unknown))} for arch {arch!r}; "
            f"valid: {', '.join(valid)}"
        )
    if cls is RNNClassifier:
        hparams["cell"] = arch
    return cls(vocab_size=vocab_size, num_classes=num_classes, pad_id=pad_id, **hparams)

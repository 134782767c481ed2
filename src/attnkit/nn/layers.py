"""The Transformer's building blocks (Vaswani et al., 2017), with the paper's names.

    x = Embedding(tokens) * sqrt(d_model) + PE                     (B, T, d_model)
    EncoderLayer:  x = AddNorm(x, SelfAttention(x))                 padding mask
                   x = AddNorm(x, FFN(x))
    DecoderLayer:  y = AddNorm(y, MaskedSelfAttention(y))           look-ahead + padding
                   y = AddNorm(y, CrossAttention(y, memory))        encoder padding mask
                   y = AddNorm(y, FFN(y))
    FFN(x) = max(0, x W_1 + b_1) W_2 + b_2                          d_model -> d_ff -> d_model

"Add & Norm" is post-norm as in the paper, LayerNorm(x + Dropout(Sublayer(x))), or
pre-norm, x + Dropout(Sublayer(LayerNorm(x))) (``norm_first=True``), which trains more
stably in deep stacks and needs one final LayerNorm after the stack.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnkit.nn import capture as _capture
from attnkit.nn.attention import KVCache, MultiHeadAttention
from attnkit.nn.dropout import Dropout
from attnkit.nn.fast_forward import encoder_forward
from attnkit.nn.fast_paths import Linear, linear_activation, without_full_mask

__all__ = [
    "AddNorm",
    "BlockConfig",
    "Decoder",
    "DecoderLayer",
    "Encoder",
    "EncoderLayer",
    "FeedForward",
    "LearnedPositionalEmbedding",
    "ScalarMix",
    "SegmentEmbedding",
    "SinusoidalPositionalEncoding",
    "TokenEmbedding",
    "count_parameters",
    "sinusoidal_encoding",
]


# --------------------------------------------------------------------------------------
# Embeddings and positional encodings
# --------------------------------------------------------------------------------------
class TokenEmbedding(nn.Module):
    """Token ids (B, T) -> vectors (B, T, d_model), multiplied by sqrt(d_model) as in the
    paper (section 3.4) unless ``scale=False``."""

    def __init__(
        self, vocab_size: int, d_model: int, padding_idx: int | None = None, scale: bool = True
    ) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=padding_idx)
        self.scale = math.sqrt(d_model) if scale else 1.0
        if scale:  # N(0, 1/d_model) so that after x sqrt(d_model) each component has unit
            # variance, like the positional encoding (N(0, 1) would make it sqrt(d_model)
            # times larger and saturate the first attention softmax)
            nn.init.normal_(self.embedding.weight, mean=0.0, std=d_model**-0.5)
            if padding_idx is not None:
                with torch.no_grad():
                    self.embedding.weight[padding_idx].zero_()

    @property
    def weight(self) -> Tensor:
        return self.embedding.weight

    def forward(self, ids: Tensor) -> Tensor:
        out = self.embedding(ids) * self.scale
        if _capture.ACTIVE:
            _capture.record("token_embedding", self, ids=ids, output=out, scale=self.scale)
        return out


def sinusoidal_encoding(max_len: int, d_model: int) -> Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model)).

    Returns (max_len, d_model) float32. Works for odd d_model (the last cos column is dropped).
    """
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]  # (max_len, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # 2i = 0, 2, 4, ...
    angle = pos / torch.pow(10000.0, two_i / d_model)  # (max_len, ceil(d_model/2))
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return pe.float()


class SinusoidalPositionalEncoding(nn.Module):
    """Adds the fixed sinusoidal encoding: x (B, T, d_model) -> x + PE[offset : offset + T].

    The table is a non-persistent buffer (rebuilt, not stored in checkpoints).
    """

    def __init__(self, d_model: int, max_len: int = 5000) -> None:
        super().__init__()
        self.max_len = max_len
        self.pe: Tensor  # (max_len, d_model)
        self.register_buffer("pe", sinusoidal_encoding(max_len, d_model), persistent=False)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        end = offset + x.size(1)
        if end > self.max_len:
            raise ValueError(f"sequence of length {end} exceeds max_len={self.max_len}")
        if _capture.ACTIVE:
            _capture.record("position", self, kind="sinusoidal", offset=offset,
                            positions=torch.arange(offset, end), rows=self.pe[offset:end])  # fmt: skip
        return x + self.pe[offset:end].to(x.dtype)


class LearnedPositionalEmbedding(nn.Module):
    """Adds a trained embedding per position (BERT/GPT style): x + P[offset : offset + T]."""

    def __init__(self, max_len: int, d_model: int) -> None:
        super().__init__()
        self.max_len = max_len
        self.embedding = nn.Embedding(max_len, d_model)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        end = offset + x.size(1)
        if end > self.max_len:
            raise ValueError(f"sequence of length {end} exceeds max_len={self.max_len}")
        positions = torch.arange(offset, end, device=x.device)
        rows = self.embedding(positions)
        if _capture.ACTIVE:
            _capture.record("position", self, kind="learned", offset=offset, positions=positions,
                            rows=rows)  # fmt: skip
        return x + rows.to(x.dtype)


class SegmentEmbedding(nn.Module):
    """Segment (token type) embedding, BERT's sentence A = 0 / sentence B = 1: (B, T) -> (B, T, d)."""

    def __init__(self, d_model: int, num_segments: int = 2) -> None:
        super().__init__()
        self.embedding = nn.Embedding(num_segments, d_model)

    def forward(self, segment_ids: Tensor) -> Tensor:
        out = self.embedding(segment_ids)
        if _capture.ACTIVE:
            _capture.record("segment", self, ids=segment_ids, output=out)
        return out


class ScalarMix(nn.Module):
    """ELMo's learned layer mix (Peters et al. 2018, eq. 1): a softmax-weighted sum of the
    layers' representations, times a learned scale,

        mix(h_0 .. h_L) = gamma * sum_j softmax(s)_j * h_j

    ``num_inputs`` tensors of one shape (e.g. (B, T, d)) -> that shape. The weights start
    equal (s = 0) and gamma at 1. Used where a frozen encoder's layers feed a task head
    (the feature-based mode of BERT, ELMo's biLM layers)."""

    def __init__(self, num_inputs: int) -> None:
        super().__init__()
        self.scalars = nn.Parameter(torch.zeros(num_inputs))  # s
        self.gamma = nn.Parameter(torch.ones(()))

    def forward(self, layers: Sequence[Tensor]) -> Tensor:
        if len(layers) != self.scalars.numel():
            raise ValueError(f"ScalarMix expects {self.scalars.numel()} inputs, got {len(layers)}")
        weights = self.scalars.softmax(0)  # (L + 1,)
        out = self.gamma * sum(w * h for w, h in zip(weights, layers, strict=True))
        if _capture.ACTIVE:
            _capture.record("scalar_mix", self, scalars=self.scalars, weights=weights,
                            gamma=self.gamma, layers=list(layers), output=out)  # fmt: skip
        return out


# --------------------------------------------------------------------------------------
# Position-wise feed-forward and Add & Norm
# --------------------------------------------------------------------------------------
_ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "relu": F.relu,
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
}


class FeedForward(nn.Module):
    """FFN(x) = W_2 Dropout(act(W_1 x + b_1)) + b_2, applied at every position alike.
    (B, T, d_model) -> (B, T, d_ff) -> (B, T, d_model). The inner dropout (on the d_ff-wide
    activations: the costliest dropout of a layer) is torch.nn's and the Annotated
    Transformer's; the paper, BERT and GPT-2 have none there (``dropout=0``)."""

    def __init__(
        self,
        d_model: int,
        d_ff: int,
        dropout: float = 0.1,
        activation: str = "relu",
        bias: bool = True,
    ) -> None:
        super().__init__()
        if activation not in _ACTIVATIONS:
            raise ValueError(
                f"activation must be one of {sorted(_ACTIVATIONS)}, got {activation!r}"
            )
        self.linear1 = Linear(d_model, d_ff, bias=bias)  # W_1 (and b_1 unless bias=False)
        self.linear2 = Linear(d_ff, d_model, bias=bias)  # W_2
        self.dropout = Dropout(dropout)
        self.activation = _ACTIVATIONS[activation]
        self.activation_name = activation  # (what the explainer prints: its formula)

    def forward(self, x: Tensor) -> Tensor:
        # act(x W_1 + b_1): (B, T, d_ff), in one kernel where that is faster (fast_paths)
        hidden = linear_activation(self.linear1, x, self.activation_name, self.activation)
        out = self.linear2(self.dropout(hidden))
        if _capture.ACTIVE:
            _capture.record("ffn", self, hidden=hidden, output=out,
                            activation=self.activation_name)  # fmt: skip
        return out


class AddNorm(nn.Module):
    """Residual connection + layer normalization around one sub-layer ("Add & Norm").

    post-norm (paper): LayerNorm(x + Dropout(sublayer(x)))
    pre-norm:          x + Dropout(sublayer(LayerNorm(x)))

    A layer calls it twice around its sub-layer, so that the residual reads in order:

        h = add_norm.sublayer_input(x)      # pre-norm: LayerNorm(x); post-norm: x
        x = add_norm(x, sublayer(h))        # x + Dropout(.), then LayerNorm if post-norm
    """

    def __init__(
        self,
        d_model: int,
        dropout: float = 0.1,
        norm_first: bool = False,
        eps: float = 1e-5,
        bias: bool = True,
    ) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_model, eps=eps, bias=bias)  # gamma (and beta unless bias=False)
        self.dropout = Dropout(dropout)
        self.norm_first = norm_first

    def sublayer_input(self, x: Tensor) -> Tensor:
        """What the sub-layer reads: LayerNorm(x) pre-norm, x itself post-norm."""
        return self.norm(x) if self.norm_first else x

    def forward(self, x: Tensor, sublayer_out: Tensor) -> Tensor:
        """x (B, T, d) the sub-layer's input before ``sublayer_input``, sublayer_out its
        output (B, T, d) -> the Add & Norm output (B, T, d)."""
        if self.norm_first:
            out = x + self.dropout(sublayer_out)  # x + Dropout(sublayer(LayerNorm(x)))
        else:
            z = x + self.dropout(sublayer_out)
            out = self.norm(z)  # LayerNorm(x + Dropout(sublayer(x)))
        if _capture.ACTIVE:
            n = self.norm
            z, normed = (x, n(x)) if self.norm_first else (z, out)  # what was normalised
            _capture.record("add_norm", self, input=x, sublayer=sublayer_out, output=out,
                            norm_first=self.norm_first, norm_input=z, norm_output=normed,
                            gamma=n.weight, beta=n.bias, eps=n.eps)  # fmt: skip
        return out


# --------------------------------------------------------------------------------------
# Encoder and decoder layers
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BlockConfig:
    """The sizes and options of one encoder or decoder layer (the paper's names).

    d_model: width of every position's vector; num_heads: attention heads (d_model must be
    divisible by it); d_ff: the feed-forward's inner width; dropout: on sublayer outputs;
    attention_dropout: on the attention weights (None: ``dropout``; Hugging Face's
    ``attention_probs_dropout_prob``); ffn_dropout: inside the FFN, after the activation
    (None: ``dropout``, as torch.nn; BERT and GPT-2 use 0); activation: relu | gelu;
    norm_first: pre-norm instead of the paper's post-norm; eps: LayerNorm epsilon; bias:
    the layer's biases, Linear b and LayerNorm beta (False: none, as nanoGPT's bias=False)."""

    d_model: int
    num_heads: int
    d_ff: int
    dropout: float = 0.1
    attention_dropout: float | None = None
    activation: str = "relu"
    norm_first: bool = False
    eps: float = 1e-5
    ffn_dropout: float | None = None
    bias: bool = True

    @property
    def attention_p(self) -> float:
        return self.dropout if self.attention_dropout is None else self.attention_dropout

    @property
    def ffn_p(self) -> float:
        return self.dropout if self.ffn_dropout is None else self.ffn_dropout


class EncoderLayer(nn.Module):
    """Self-attention + FFN, each wrapped in Add & Norm. (B, T, d_model) -> same.

    ``dropout`` applies to the sublayer outputs (and inside the FFN unless ``ffn_dropout``
    says otherwise); ``attention_dropout`` to the attention weights (None: the same as ``dropout``; Hugging Face's
    ``attention_probs_dropout_prob``). At 0 the fused attention kernel runs, which on the CPU
    is several times faster for long sequences (no (B, H, T, T) weights are built)."""

    def __init__(self, config: BlockConfig) -> None:
        super().__init__()
        c = config
        self.self_attn = MultiHeadAttention(
            c.d_model, c.num_heads, dropout=c.attention_p, bias=c.bias
        )
        self.add_norm1 = AddNorm(c.d_model, c.dropout, c.norm_first, c.eps, c.bias)
        self.ffn = FeedForward(c.d_model, c.d_ff, c.ffn_p, c.activation, c.bias)
        self.add_norm2 = AddNorm(c.d_model, c.dropout, c.norm_first, c.eps, c.bias)

    def forward(
        self,
        x: Tensor,
        *,
        key_padding_mask: Tensor | None = None,
        attn_mask: Tensor | None = None,
        is_causal: bool = False,
        cache: KVCache | None = None,
    ) -> Tensor:
        """x (B, T, d_model) -> (B, T, d_model); key_padding_mask (B, T_total) True = real
        token; attn_mask (T, T_total) True = may attend.

        ``is_causal`` adds the look-ahead mask (a decoder-only model such as GPT);
        ``cache`` (a ``KVCache``) makes it incremental: pass only the new positions, the
        earlier keys/values come from the cache (T_total = cached + T). The attention
        weights are recorded by ``attnkit.nn.capture``, not returned."""
        h = self.add_norm1.sublayer_input(x)  # Add & Norm around self-attention
        h, _ = self.self_attn(h, h, h, key_padding_mask=key_padding_mask, attn_mask=attn_mask,
                              cache=cache, is_causal=is_causal)  # fmt: skip
        x = self.add_norm1(x, h)
        h = self.add_norm2.sublayer_input(x)  # Add & Norm around the feed-forward
        return self.add_norm2(x, self.ffn(h))


class DecoderLayer(nn.Module):
    """Masked self-attention, encoder-decoder (cross) attention and FFN, each with Add & Norm.
    ``d_memory``: the encoder output's width if it differs from ``config.d_model``."""

    def __init__(self, config: BlockConfig, d_memory: int | None = None) -> None:
        super().__init__()
        c = config
        self.self_attn = MultiHeadAttention(
            c.d_model, c.num_heads, dropout=c.attention_p, bias=c.bias
        )
        self.add_norm1 = AddNorm(c.d_model, c.dropout, c.norm_first, c.eps, c.bias)
        self.cross_attn = MultiHeadAttention(
            c.d_model, c.num_heads, dropout=c.attention_p, bias=c.bias, kdim=d_memory,
            vdim=d_memory,
        )  # fmt: skip
        self.add_norm2 = AddNorm(c.d_model, c.dropout, c.norm_first, c.eps, c.bias)
        self.ffn = FeedForward(c.d_model, c.d_ff, c.ffn_p, c.activation, c.bias)
        self.add_norm3 = AddNorm(c.d_model, c.dropout, c.norm_first, c.eps, c.bias)

    def forward(
        self,
        y: Tensor,
        memory: Tensor,
        *,
        tgt_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
        is_causal: bool = True,
        cache: dict[str, KVCache] | None = None,
    ) -> Tensor:
        """y (B, Tt, d_model) target so far; memory (B, Ts, d_memory) encoder output ->
        (B, Tt, d_model).

        tgt_key_padding_mask (B, Tt_total) / memory_key_padding_mask (B, Ts): True = real.
        ``is_causal`` applies the look-ahead mask; ``tgt_mask`` adds any other (Tt,
        Tt_total) mask. cache: {"self": KVCache(), "cross": KVCache(static=True)} for
        incremental decoding. The attention weights are recorded by ``attnkit.nn.capture``.
        """
        self_cache = cache["self"] if cache is not None else None
        cross_cache = cache["cross"] if cache is not None else None
        h = self.add_norm1.sublayer_input(y)  # masked self-attention
        h, _ = self.self_attn(h, h, h, key_padding_mask=tgt_key_padding_mask,
                              attn_mask=tgt_mask, cache=self_cache, is_causal=is_causal)  # fmt: skip
        y = self.add_norm1(y, h)
        h = self.add_norm2.sublayer_input(y)  # encoder-decoder (cross) attention
        h, _ = self.cross_attn(h, memory, memory, key_padding_mask=memory_key_padding_mask,
                               cache=cross_cache)  # fmt: skip
        y = self.add_norm2(y, h)
        h = self.add_norm3.sublayer_input(y)  # position-wise feed-forward
        return self.add_norm3(y, self.ffn(h))


# --------------------------------------------------------------------------------------
# Stacks
# --------------------------------------------------------------------------------------
class Encoder(nn.Module):
    """num_layers EncoderLayers (+ a final LayerNorm when pre-norm). (B, T, d) -> (B, T, d)."""

    def __init__(self, config: BlockConfig, num_layers: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(config) for _ in range(num_layers))
        self.norm = (
            nn.LayerNorm(config.d_model, eps=config.eps, bias=config.bias)
            if config.norm_first
            else nn.Identity()
        )

    def init_cache(self) -> list[KVCache]:
        """An empty per-layer self-attention cache for step-by-step causal decoding."""
        return [KVCache() for _ in self.layers]

    def forward(
        self,
        x: Tensor,
        *,
        key_padding_mask: Tensor | None = None,
        attn_mask: Tensor | None = None,
        is_causal: bool = False,
        cache: list[KVCache] | None = None,
        hidden_states: list[Tensor] | None = None,
    ) -> Tensor:
        """x (B, T, d) -> (B, T, d). ``is_causal``: look-ahead mask in every layer (a
        decoder-only stack); with ``cache`` (from ``init_cache``) pass only the new
        positions and a key_padding_mask (B, T_total) covering cached + new ones.
        ``hidden_states``: a list that receives the input and each layer's output
        (num_layers + 1 tensors, before the final pre-norm LayerNorm)."""
        if hidden_states is not None:
            hidden_states.append(x)
        if not _capture.ACTIVE:  # (the explainer shows the mask as given)
            key_padding_mask = without_full_mask(key_padding_mask)  # no padding: no mask
        if attn_mask is None and all(map(standard_layer, self.layers)):
            # inference: the same layers without module calls (attnkit.nn.fast_forward), a
            # prompt's prefill into an empty cache too
            out = encoder_forward(
                self, self.layers, x, key_padding_mask, is_causal, hidden_states, cache
            )
            if out is not None:
                return self.norm(out)
        for i, layer in enumerate(self.layers):
            x = layer(x, key_padding_mask=key_padding_mask, attn_mask=attn_mask,
                      is_causal=is_causal, cache=None if cache is None else cache[i])  # fmt: skip
            if hidden_states is not None:
                hidden_states.append(x)
        return self.norm(x)


def standard_layer(layer: nn.Module) -> bool:
    """An EncoderLayer of this module's own parts (what attnkit.nn.fast_forward reads)."""
    parts = layer._modules
    return (
        type(layer) is EncoderLayer
        and type(parts["self_attn"]) is MultiHeadAttention
        and type(parts["ffn"]) is FeedForward
        and type(parts["add_norm1"]) is AddNorm
        and type(parts["add_norm2"]) is AddNorm
    )


class Decoder(nn.Module):
    """num_layers DecoderLayers (+ a final LayerNorm when pre-norm)."""

    def __init__(self, config: BlockConfig, num_layers: int, d_memory: int | None = None) -> None:
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(config, d_memory) for _ in range(num_layers))
        self.norm = (
            nn.LayerNorm(config.d_model, eps=config.eps, bias=config.bias)
            if config.norm_first
            else nn.Identity()
        )

    def init_cache(self) -> list[dict[str, KVCache]]:
        """An empty per-layer cache for step-by-step decoding (see ``forward``)."""
        return [{"self": KVCache(), "cross": KVCache(static=True)} for _ in self.layers]

    def forward(
        self,
        y: Tensor,
        memory: Tensor,
        *,
        tgt_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
        is_causal: bool = True,
        cache: list[dict[str, KVCache]] | None = None,
    ) -> Tensor:
        """y (B, Tt, d) -> (B, Tt, d). With ``cache`` (from ``init_cache``) pass only the new
        target positions; earlier keys/values come from the cache."""
        for i, layer in enumerate(self.layers):
            y = layer(y, memory, tgt_key_padding_mask=tgt_key_padding_mask,
                      memory_key_padding_mask=memory_key_padding_mask, tgt_mask=tgt_mask,
                      is_causal=is_causal, cache=None if cache is None else cache[i])  # fmt: skip
        return self.norm(y)


def count_parameters(module: nn.Module) -> int:
    """Number of trainable parameters."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)

"""Attention, as the course teaches it: score functions, soft/hard attention, masks,
scaled dot-product attention and multi-head attention (with a key/value cache).

Shapes (batch-first everywhere):
    query   (B, Tq, Dq)      one row per decoder state s_t / query token
    keys    (B, Tk, Dk)      one row per encoder state h_i / key token
    values  (B, Tk, Dv)
    scores  (B, Tq, Tk)      e_t,i = score(s_t, h_i)
    weights (B, Tq, Tk)      alpha_t,i = softmax_i(e_t,i); in multi-head: (B, H, Tq, Tk)
    context (B, Tq, Dv)      c_t = sum_i alpha_t,i v_i  (the course's H = V A)

Masks are boolean and **True means "may attend"** (like PyTorch's fused kernel and
Hugging Face's ``attention_mask``). ``padding_mask`` gives (B, Tk), ``causal_mask`` gives
(Tq, Tk); they combine with ``&`` after broadcasting (see ``merge_masks``). A query row whose
keys are all masked produces zero weights and a zero output, never NaN.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

import torch
from torch import Tensor, nn

from attnkit.nn import capture as _capture
from attnkit.nn.dropout import dropout
from attnkit.nn.fast_paths import Linear, fusable, fused_attention, fused_qkv

__all__ = [
    "ConcatScore",
    "DotScore",
    "GeneralScore",
    "KVCache",
    "LocationScore",
    "MultiHeadAttention",
    "ScaledDotScore",
    "Score",
    "SCORE_NAMES",
    "attend",
    "causal_mask",
    "explicit_attention",
    "hard_attention",
    "make_score",
    "masked_softmax",
    "merge_masks",
    "padding_mask",
    "scaled_dot_product_attention",
    "soft_attention",
]


# --------------------------------------------------------------------------------------
# Masks
# --------------------------------------------------------------------------------------
def padding_mask(ids: Tensor, pad_id: int) -> Tensor:
    """(B, T) token ids -> (B, T) bool, True where the token is real (not padding)."""
    return ids != pad_id


def causal_mask(q_len: int, k_len: int | None = None, device: torch.device | None = None) -> Tensor:
    """Look-ahead mask: (q_len, k_len) bool, True where query i may see key j.

    With ``k_len > q_len`` the queries are the *last* ``q_len`` positions (incremental
    decoding with a cache of ``k_len - q_len`` earlier keys): ``mask[i, j] = j <= i + offset``.
    """
    k_len = q_len if k_len is None else k_len
    offset = k_len - q_len
    return torch.ones(q_len, k_len, dtype=torch.bool, device=device).tril(diagonal=offset)


def merge_masks(
    key_padding_mask: Tensor | None = None,
    attn_mask: Tensor | None = None,
    num_heads: int | None = None,
) -> Tensor | None:
    """Combine a (B, Tk) padding mask with a (Tq, Tk) or (B, Tq, Tk) attention mask.

    Returns a bool mask broadcastable to (B, Tq, Tk) -- or to (B, H, Tq, Tk) when
    ``num_heads`` is given -- or None if neither mask is given.
    """
    mask = None
    if key_padding_mask is not None:
        if key_padding_mask.dtype != torch.bool:
            raise TypeError("key_padding_mask must be bool (True = may attend)")
        mask = key_padding_mask[:, None, :]  # (B, 1, Tk)
    if attn_mask is not None:
        if attn_mask.dtype != torch.bool:
            raise TypeError("attn_mask must be bool (True = may attend)")
        mask = attn_mask if mask is None else mask & attn_mask
    if mask is not None and num_heads is not None:
        mask = mask.unsqueeze(-3) if mask.dim() == 3 else mask  # (B, 1, Tq|1, Tk)
    return mask


# --------------------------------------------------------------------------------------
# Score functions: score(query (B,Tq,Dq), keys (B,Tk,Dk)) -> (B,Tq,Tk)
#
# A decoder scores the same keys (the encoder outputs) at every step, so each score splits
# into ``prepare(keys)`` (the key-side work, done once per source) and
# ``score(query, prepared)``; ``forward(query, keys)`` is the two in one.
# --------------------------------------------------------------------------------------
class Score(nn.Module):
    """Base class: ``forward(q, k) == score(q, prepare(k))``. ``name`` is the course's name
    of the score (``make_score``'s), ``formula`` the formula it computes (what the explainer
    shows beside the scores; under ``attnkit.nn.capture`` each call is recorded)."""

    name: ClassVar[str] = ""
    formula: ClassVar[str] = ""

    def prepare(self, keys: Tensor) -> Tensor:
        """keys (B, Tk, Dk) -> what ``score`` needs from them (default: the keys)."""
        return keys

    def score(self, query: Tensor, prepared: Tensor) -> Tensor:
        raise NotImplementedError

    def forward(self, query: Tensor, keys: Tensor) -> Tensor:
        return self.score(query, self.prepare(keys))

    def recorded(self, query: Tensor, prepared: Tensor, scores: Tensor) -> Tensor:
        """``scores``, recorded when a capture is open (what each ``score`` returns)."""
        if _capture.ACTIVE:
            _capture.record("score", self, query=query, keys=prepared, scores=scores)
        return scores


class DotScore(Score):
    """Luong dot: score(s_t, h_i) = s_t^T h_i."""

    name = "dot"
    formula = "score(s_t, h_i) = s_t^T h_i"

    def score(self, query: Tensor, prepared: Tensor) -> Tensor:
        scores = query @ prepared.transpose(-2, -1)
        return self.recorded(query, prepared, scores)


class ScaledDotScore(Score):
    """Vaswani scaled dot: score(s_t, h_i) = s_t^T h_i / sqrt(d_k)."""

    name = "scaled_dot"
    formula = "score(s_t, h_i) = s_t^T h_i / sqrt(d_k)"

    def score(self, query: Tensor, prepared: Tensor) -> Tensor:
        scores = query @ prepared.transpose(-2, -1) / math.sqrt(prepared.size(-1))
        return self.recorded(query, prepared, scores)


class GeneralScore(Score):
    """Luong general: score(s_t, h_i) = s_t^T W_a h_i, with W_a of shape (Dq, Dk)."""

    name = "general"
    formula = "score(s_t, h_i) = s_t^T W_a h_i"

    def __init__(self, d_query: int, d_key: int | None = None) -> None:
        super().__init__()
        self.W_a = Linear(d_key or d_query, d_query, bias=False)  # h_i -> W_a h_i

    def prepare(self, keys: Tensor) -> Tensor:
        return self.W_a(keys)  # (B, Tk, Dq)

    def score(self, query: Tensor, prepared: Tensor) -> Tensor:
        scores = query @ prepared.transpose(-2, -1)
        return self.recorded(query, prepared, scores)


class ConcatScore(Score):
    """Bahdanau concat/additive: score(s_t, h_i) = v_a^T tanh(W_b s_t + W_c h_i)."""

    name = "concat"
    formula = "score(s_t, h_i) = v_a^T tanh(W_b s_t + W_c h_i)"

    def __init__(self, d_query: int, d_key: int | None = None, d_attn: int | None = None) -> None:
        super().__init__()
        d_attn = d_attn or d_query
        self.W_b = Linear(d_query, d_attn, bias=False)
        self.W_c = Linear(d_key or d_query, d_attn, bias=False)
        self.v_a = Linear(d_attn, 1, bias=False)

    def prepare(self, keys: Tensor) -> Tensor:
        return self.W_c(keys)  # (B, Tk, A)

    def score(self, query: Tensor, prepared: Tensor) -> Tensor:
        s = self.W_b(query).unsqueeze(2)  # (B, Tq, 1, A)
        scores = self.v_a(torch.tanh(s + prepared.unsqueeze(1))).squeeze(-1)  # (B, Tq, Tk)
        return self.recorded(query, prepared, scores)


class LocationScore(Score):
    """Luong location-based: alpha_t = softmax(W_a s_t); the score depends only on the
    query and the key *position*, so W_a maps the query to ``max_len`` position scores.
    The keys are used only for their length, which must be <= ``max_len``.
    """

    name = "location"
    formula = "alpha_t = softmax(W_a s_t)  (score(s_t, h_i) = (W_a s_t)_i)"

    def __init__(self, d_query: int, max_len: int) -> None:
        super().__init__()
        self.max_len = max_len
        self.W_a = Linear(d_query, max_len, bias=False)

    def score(self, query: Tensor, prepared: Tensor) -> Tensor:
        k_len = prepared.size(1)
        if k_len > self.max_len:
            raise ValueError(
                f"location score was built for max_len={self.max_len}, got {k_len} keys"
            )
        scores = self.W_a(query)[..., :k_len]
        return self.recorded(query, prepared, scores)


SCORE_NAMES = ("dot", "scaled_dot", "general", "concat", "location")


def make_score(
    name: str,
    d_query: int | None = None,
    d_key: int | None = None,
    d_attn: int | None = None,
    max_len: int | None = None,
) -> Score:
    """Build a score function by the course's name (see ``SCORE_NAMES``)."""
    name = name.replace("-", "_").lower()
    if name == "additive" or name == "bahdanau":
        name = "concat"
    if name == "dot":
        return DotScore()
    if name == "scaled_dot":
        return ScaledDotScore()
    if name not in SCORE_NAMES:
        raise ValueError(f"unknown score {name!r}; choose one of {', '.join(SCORE_NAMES)}")
    if d_query is None:
        raise ValueError(f"score {name!r} has parameters: give d_query")
    if name == "general":
        return GeneralScore(d_query, d_key)
    if name == "concat":
        return ConcatScore(d_query, d_key, d_attn)
    if max_len is None:
        raise ValueError("the location score needs max_len (the longest source it can attend to)")
    return LocationScore(d_query, max_len)


# --------------------------------------------------------------------------------------
# Soft and hard attention
# --------------------------------------------------------------------------------------
def masked_softmax(scores: Tensor, mask: Tensor | None = None, dim: int = -1) -> Tensor:
    """softmax over ``dim`` with masked entries (mask False) exactly 0.

    Masked scores get half the dtype's most negative value added before the softmax (the
    mask's shape, e.g. (B, 1, 1, Tk), broadcast: cheaper than filling the whole score
    tensor; half, so that no score can overflow to -inf); the weights of a row with every
    key masked are set to zeros instead of a uniform distribution.
    """
    weights = _masked_softmax(scores, mask, dim)
    if _capture.ACTIVE:
        _capture.record("softmax", None, scores=scores, mask=mask, weights=weights)
    return weights


def _masked_softmax(scores: Tensor, mask: Tensor | None = None, dim: int = -1) -> Tensor:
    """``masked_softmax`` without recording (what multi-head attention uses under capture,
    which records the whole call itself)."""
    if mask is None:
        return scores.softmax(dim)
    bias = torch.zeros(mask.shape, dtype=scores.dtype, device=scores.device)
    bias.masked_fill_(~mask, torch.finfo(scores.dtype).min / 2)
    weights = (scores + bias).softmax(dim)
    # some row sees no key (an exported graph always zeroes: it cannot branch on data)
    if mask.ndim and (torch.compiler.is_exporting() or not bool(mask.any(dim).all())):
        weights = weights.masked_fill(~mask, 0.0)
    return weights


def soft_attention(scores: Tensor, mask: Tensor | None = None, beta: float = 1.0) -> Tensor:
    """Soft attention weights alpha = softmax(beta * scores); beta is the inverse temperature
    (beta -> infinity approaches hard attention, beta -> 0 approaches uniform)."""
    return masked_softmax(scores * beta if beta != 1.0 else scores, mask)


def hard_attention(
    scores: Tensor, mask: Tensor | None = None, straight_through: bool = False
) -> Tensor:
    """Hard attention: a one-hot vector on the argmax key (per query row).

    The argmax has no gradient; with ``straight_through=True`` the forward value is still
    one-hot but the backward pass uses the soft attention gradient (straight-through
    estimator), so the model can be trained. Fully masked rows give zeros.
    """
    soft = masked_softmax(scores, mask)
    index = soft.argmax(dim=-1, keepdim=True)
    hard = torch.zeros_like(soft).scatter_(-1, index, 1.0)
    if mask is not None:
        hard = hard * mask.any(dim=-1, keepdim=True)
    if straight_through:
        return hard + soft - soft.detach()
    return hard


def attend(weights: Tensor, values: Tensor) -> Tensor:
    """Context vectors: (B, Tq, Tk) weights x (B, Tk, Dv) values -> (B, Tq, Dv)."""
    context = weights @ values
    if _capture.ACTIVE:
        _capture.record("attend", None, weights=weights, values=values, context=context)
    return context


# --------------------------------------------------------------------------------------
# Scaled dot-product attention
# --------------------------------------------------------------------------------------
def explicit_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    dropout_p: float = 0.0,
    scale: float | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """softmax(Q K^T * scale) V step by step (scale: 1 / sqrt(d_k) when None): q (..., Tq,
    d_k), k (..., Tk, d_k), v (..., Tk, d_v), mask bool broadcastable to (..., Tq, Tk),
    True = may attend. Returns (output (..., Tq, d_v), weights (after dropout), scores
    (before the mask))."""
    scale = 1.0 / math.sqrt(q.size(-1)) if scale is None else scale
    scores = (q @ k.transpose(-2, -1)) * scale
    weights = dropout(_masked_softmax(scores, mask), dropout_p)
    return weights @ v, weights, scores


def scaled_dot_product_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    dropout_p: float = 0.0,
    need_weights: bool = False,
    is_causal: bool = False,
    scale: float | None = None,
) -> tuple[Tensor, Tensor | None]:
    """Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V.

    q (..., Tq, d_k), k (..., Tk, d_k), v (..., Tk, d_v); ``mask`` bool broadcastable to
    (..., Tq, Tk), True = may attend; ``is_causal`` adds the look-ahead mask.
    Returns (output (..., Tq, d_v), weights (..., Tq, Tk) or None).

    With ``need_weights`` the formula is computed step by step (``explicit_attention``) so
    that the weights can be returned (after dropout: the ones applied); otherwise
    ``attnkit.nn.fast_paths.fused_attention`` gives the same numbers with PyTorch's
    fused kernel where that is faster.
    """
    own_causal = is_causal and mask is None and q.size(-2) == k.size(-2)  # the kernel's own
    if is_causal and not own_causal:
        look_ahead = causal_mask(q.size(-2), k.size(-2), device=q.device)
        mask = look_ahead if mask is None else mask & look_ahead
    if not need_weights:
        out = fused_attention(q, k, v, mask, dropout_p, own_causal, scale)
        if out is not None:
            return out, None
    if own_causal:
        mask = causal_mask(q.size(-2), k.size(-2), device=q.device)
    out, weights, _ = explicit_attention(q, k, v, mask, dropout_p, scale)
    return out, weights if need_weights else None


# --------------------------------------------------------------------------------------
# Multi-head attention
# --------------------------------------------------------------------------------------
@dataclass
class KVCache:
    """Keys/values already computed by one attention layer, for step-by-step decoding.

    Self-attention (``static=False``): each call appends the new tokens' keys/values.
    Cross-attention (``static=True``): the encoder memory is projected once, then reused.
    Tensors are (B, H, T, d_head).
    """

    key: Tensor | None = None
    value: Tensor | None = None
    static: bool = False
    # self-attention: the storage ``key`` / ``value`` are views of, with room to grow
    _room: tuple[Tensor, Tensor] | None = field(default=None, repr=False, compare=False)

    def __len__(self) -> int:
        return 0 if self.key is None else self.key.size(-2)

    def append(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """Add t new positions (B, H, t, d_head) after the cached ones; returns all of them
        (B, H, T + t, d_head). The keys are written into preallocated storage that doubles
        when full, so a decoding step copies only its new position, not the whole past (as
        ``torch.cat`` would: O(T^2) copying over a generation)."""
        n, t = len(self), key.size(-2)
        if self.key is not None and (key.shape[:2] != self.key.shape[:2]):
            raise ValueError(f"cache holds batch x heads {tuple(self.key.shape[:2])}, got "
                             f"{tuple(key.shape[:2])}")  # fmt: skip
        room = self._room
        if room is None or room[0].size(-2) < n + t or room[0].dtype != key.dtype:
            size = max(2 * (n + t), 16)
            shape = (*key.shape[:2], size, key.size(-1))
            grown = tuple(key.new_empty(shape) for _ in range(2))
            if self.key is not None and self.value is not None:  # (n > 0)
                grown[0][:, :, :n] = self.key
                grown[1][:, :, :n] = self.value
            room = self._room = (grown[0], grown[1])
        room[0].narrow(2, n, t).copy_(key)  # (narrow + copy_: a decoding step's Python
        room[1].narrow(2, n, t).copy_(value)  # costs more than its copy)
        self.key, self.value = room[0].narrow(2, 0, n + t), room[1].narrow(2, 0, n + t)
        return self.key, self.value

    def reorder(self, index: Tensor) -> None:
        """Select batch rows (beam search): index (B',) of rows to keep, in order."""
        if self.key is not None and self.value is not None:
            self.key = self.key.index_select(0, index)
            self.value = self.value.index_select(0, index)
            self._room = None

    def drop_front(self, n: int) -> None:
        """Forget the first ``n`` positions (padding no row needs any more)."""
        if self.key is not None and self.value is not None and n > 0:
            self.key, self.value = self.key[:, :, n:], self.value[:, :, n:]
            self._room = None  # (the next append copies them into new storage)


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O,
    head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V).

    The h heads are computed at once: one (d_model -> d_model) projection each for Q, K, V,
    split into ``num_heads`` heads of size d_head = d_model / num_heads.
    Self-attention: query = key = value; cross-attention: key = value = encoder memory
    (its width may differ: ``kdim`` / ``vdim``).
    """

    # what the explainer shows beside a head's scores (the score of every head)
    score_name: ClassVar[str] = "scaled_dot"
    formula: ClassVar[str] = "head_i = softmax(Q_i K_i^T / sqrt(d_k)) V_i"

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        kdim: int | None = None,
        vdim: int | None = None,
    ) -> None:
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
        self.d_model, self.num_heads = d_model, num_heads
        self.d_head = d_model // num_heads
        self.dropout = dropout
        self.q_proj = Linear(d_model, d_model, bias=bias)  # W^Q
        self.k_proj = Linear(kdim or d_model, d_model, bias=bias)  # W^K
        self.v_proj = Linear(vdim or d_model, d_model, bias=bias)  # W^V
        self.out_proj = Linear(d_model, d_model, bias=bias)  # W^O

    def _split(self, x: Tensor) -> Tensor:
        """(B, T, d_model) -> (B, H, T, d_head)."""
        b, t, _ = x.shape
        return x.view(b, t, self.num_heads, self.d_head).transpose(1, 2)

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        key_padding_mask: Tensor | None = None,
        attn_mask: Tensor | None = None,
        need_weights: bool = False,
        cache: KVCache | None = None,
        is_causal: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """query (B, Tq, d_model), key (B, Tk, kdim), value (B, Tk, vdim).

        key_padding_mask: (B, Tk_total) bool, True = real token (Tk_total includes cached keys).
        attn_mask: (Tq, Tk_total) or (B, Tq, Tk_total) bool, True = may attend.
        is_causal: add the look-ahead mask (aligned to the last query, so it also works with
        a cache). cache: a KVCache, updated in place.
        Returns (output (B, Tq, d_model), weights (B, H, Tq, Tk_total) if need_weights).
        """
        b, t_q, _ = query.shape
        projections = (self.q_proj, self.k_proj, self.v_proj)
        if cache is not None and cache.static and cache.key is not None and cache.value is not None:
            q = self._split(self.q_proj(query))  # Q = query W^Q
            k, v = cache.key, cache.value  # the memory's K, V: projected at the first step
        else:
            if key is query and value is query and fusable(projections):
                q, k, v = map(self._split, fused_qkv(self, projections, query))  # one GEMM
            else:
                q = self._split(self.q_proj(query))  # Q = query W^Q  (B, H, Tq, d_head)
                k = self._split(self.k_proj(key))  # K = key W^K  (B, H, Tk, d_head)
                v = self._split(self.v_proj(value))  # V = value W^V
            if cache is not None:
                if cache.static:
                    cache.key, cache.value = k, v  # the memory's keys, projected once
                else:
                    k, v = cache.append(k, v)
        mask = merge_masks(key_padding_mask, attn_mask, num_heads=self.num_heads)
        dropout_p = self.dropout if self.training else 0.0
        causal = is_causal and t_q > 1  # one new query may see every cached key
        rec = _capture.current() if _capture.ACTIVE else None
        weights: Tensor | None
        if rec is not None:  # attnkit.nn.capture: the explicit formula, every step kept
            if causal:
                look_ahead = causal_mask(t_q, k.size(-2), device=q.device)
                mask = look_ahead if mask is None else mask & look_ahead
            heads, weights, scores = explicit_attention(q, k, v, mask, dropout_p)
        else:
            heads, weights = scaled_dot_product_attention(
                q, k, v, mask=mask, dropout_p=dropout_p, need_weights=need_weights,
                is_causal=causal,
            )  # fmt: skip
        out = self.out_proj(heads.transpose(1, 2).reshape(b, t_q, self.d_model))  # concat heads
        if rec is not None:
            role = "cross" if key is not query else "causal_self" if is_causal else "self"
            rec.add("attention", self, q=q, k=k, v=v, mask=mask, scores=scores, weights=weights,
                    head_out=heads, output=out, role=role, look_ahead=is_causal,
                    padding=key_padding_mask is not None, scale=1.0 / math.sqrt(self.d_head),
                    dropout_p=dropout_p)  # fmt: skip
            weights = weights if need_weights else None
        return out, weights

"""Fast paths beside the teaching code of ``attnkit.nn.attention``: the same numbers, fewer
operations. Nothing here changes what attention computes; each function says which formula
of attention.py it stands in for, and the tests compare them (tests/nn/test_attention.py,
tests/nn/test_dropout.py).

* ``fused_qkv``: x W^Q, x W^K, x W^V as one matrix product (the three weights side by
  side), the concatenated weight kept between decoding steps until a weight changes;
* ``fused_attention``: PyTorch's fused softmax(Q K^T / sqrt(d_k)) V kernel where it is the
  faster choice, or None where the explicit formula is (CPU with dropout, CPU bfloat16).

A leaf of attnkit.nn: torch only.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnkit.nn.fast_linear import linear

__all__ = ["fused_attention", "fused_qkv", "fusable"]


def fusable(projections: tuple[nn.Linear, nn.Linear, nn.Linear]) -> bool:
    """True for plain Linear weights (not, e.g., the packed ones of a dynamically quantized
    model, which run as three separate products)."""
    return all(isinstance(m.weight, Tensor) for m in projections)


def fused_qkv(
    owner: nn.Module, projections: tuple[nn.Linear, nn.Linear, nn.Linear], x: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    """(x W^Q, x W^K, x W^V) for self-attention, (B, T, d) -> 3 x (B, T, d_out), as one GEMM
    (faster than three small ones, forward and backward; the weights stay three Hugging
    Face-named parameters). Without gradients (inference, generation) ``owner`` keeps the
    concatenated weight until a weight changes (another tensor, or the same one changed in
    place: its version counter): a decoding step would otherwise spend more time copying
    the weights than multiplying by them. With gradients nothing is kept."""
    params = [p for m in projections for p in (m.weight, m.bias) if p is not None]
    versions = [p._version for p in params]
    cached = owner.__dict__.get("_qkv_cache")
    if not torch.is_grad_enabled() and (
        cached is not None
        and all(a is b for a, b in zip(cached[0], params, strict=True))
        and cached[1] == versions
    ):
        weight, bias = cached[2], cached[3]
    else:
        weight = torch.cat([m.weight for m in projections])
        first = projections[0].bias
        bias = None if first is None else torch.cat([m.bias for m in projections])
        if not torch.is_grad_enabled():  # the tensors themselves are held: compared by identity
            owner.__dict__["_qkv_cache"] = (params, versions, weight, bias)
        elif cached is not None:
            del owner.__dict__["_qkv_cache"]  # training: the weights are about to change
    width = projections[0].out_features
    q, k, v = torch.split(linear(x, weight, bias, owner=owner), width, dim=-1)
    return q, k, v


def fused_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None,
    dropout_p: float,
    is_causal: bool,
    scale: float | None,
) -> Tensor | None:
    """softmax(Q K^T * scale + mask) V by PyTorch's fused kernel (no (.., Tq, Tk) weights
    built), or None where the explicit formula is faster: on the CPU with dropout (the
    fused CPU kernel falls back to the same math with slower ``bernoulli_`` masks, where
    ``attnkit.nn.dropout`` draws cheaper ones) and in bfloat16 (the fused CPU kernel is
    1.5-5x slower forward and backward than three bf16 matrix products; measured for
    20-512 tokens, benchmarks/notes-speed.md). ``is_causal`` with no other mask and square
    attention uses the kernel's own causal path; otherwise the caller merged the look-ahead
    mask into ``mask``. A query row with no visible key gives zeros, as the formula does."""
    if q.device.type == "cpu" and (dropout_p > 0.0 or q.dtype == torch.bfloat16):
        return None
    if is_causal:
        return F.scaled_dot_product_attention(
            q, k, v, dropout_p=dropout_p, is_causal=True, scale=scale
        )
    if mask is None:
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, scale=scale)
    # rows with no visible key: let the kernel see every key (no NaN forward or backward),
    # then zero those rows
    has_key = mask.any(dim=-1, keepdim=True)
    out = F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask | ~has_key, dropout_p=dropout_p, scale=scale
    )
    return out.masked_fill(~has_key, 0.0)

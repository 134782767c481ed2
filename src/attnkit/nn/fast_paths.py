"""Fast paths beside the teaching code of ``attnkit.nn.attention`` and ``attnkit.nn.layers``:
the same numbers (up to float rounding), fewer operations or cycles. Nothing here changes
what a layer computes; each function says which formula it stands in for, and the tests
compare them (tests/nn/test_fast_paths_linear.py, tests/nn/test_attention.py,
tests/nn/test_dropout.py).

Attention:

* ``fused_qkv``: x W^Q, x W^K, x W^V as one matrix product (the three weights side by
  side), the concatenated weight kept between decoding steps until a weight changes;
* ``fused_attention``: PyTorch's fused softmax(Q K^T / sqrt(d_k)) V kernel where it is the
  faster choice, or None where the explicit formula is (CPU with dropout, CPU bfloat16).

The affine map y = x W^T + b (``Linear``, ``linear``). PyTorch multiplies float32 matrices
on the CPU with MKL. For the shapes of these models (a few to a few thousand rows, 64-4096
columns) oneDNN, which PyTorch also ships, is faster: on an AMD EPYC with AVX-512 (MKL runs
its AVX2 code there) 2.0-2.4x for 16-768 rows forward and for dL/dx, 1.3-1.6x for dL/dW;
held to AVX2 kernels 1.1-1.25x; for a single row (a decoding step) MKL's matrix-vector
product is the faster one and keeps it (benchmarks/notes-speed.md).

* ``Linear``: ``torch.nn.Linear`` (same parameters, names, initialisation, state_dict)
  whose product goes through ``linear``; every layer of attnkit.nn and attnkit.models uses it;
* ``linear(x, weight, bias, owner=None)``: ``F.linear`` by oneDNN where that is the faster
  kernel: a CPU tensor of float32 or bfloat16 on x86-64 with at least ``MIN_ROWS`` rows,
  outside autocast (but see below), tracing, ``torch.compile`` and ONNX export. With
  gradients (only on AMD CPUs: on Intel's MKL is the faster one there) it is an autograd
  function whose backward is oneDNN too; without, ``owner`` (the module) keeps the weight
  re-laid out in oneDNN's blocked format until the weight changes (its identity, version
  counter or storage: ``stamp``) or a forward pass with gradients runs
  (``torch.optim.AdamW(fused=True)`` updates weights without moving their version
  counters). Inside CPU autocast to bfloat16 (inference: no gradients) the
  product is autocast's own, bfloat16 x bfloat16 by oneDNN, but ``owner`` keeps the weight
  and bias cast to bfloat16 (and the weight re-laid out) instead of autocast casting them
  again at every forward: the same numbers, 1.2-1.8x faster per product for 1-128 rows
  (``python benchmarks/profile_ops.py bf16``).

``ATTNKIT_ONEDNN=0`` in the environment turns the oneDNN products off (every product is
``F.linear``).

A leaf of attnkit.nn: torch only.
"""

from __future__ import annotations

import contextlib
import os
import platform
import sys
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

__all__ = [
    "FEW_SCORES",
    "Linear",
    "MIN_ROWS",
    "cpu_vendor",
    "enabled",
    "fusable",
    "fused_attention",
    "fused_qkv",
    "linear",
    "linear_activation",
    "qkv_weight",
    "stamp",
    "without_full_mask",
]

MIN_ROWS = 16
"""Products with fewer rows (x flattened to (rows, in_features)) stay with F.linear."""

_X86 = platform.machine().lower() in {"x86_64", "amd64", "x86", "i686"}


# --------------------------------------------------------------------------------------
# y = x W^T + b
# --------------------------------------------------------------------------------------
def enabled() -> bool:
    """Whether oneDNN products are used at all on this machine and in this environment."""
    return (
        _X86
        and torch.backends.mkldnn.is_available()  # type: ignore[no-untyped-call]
        and os.environ.get("ATTNKIT_ONEDNN", "1").strip() != "0"
    )


def cpu_vendor() -> str:
    """The CPU's vendor string (``GenuineIntel``, ``AuthenticAMD``, ...) from /proc/cpuinfo
    or, elsewhere, ``platform.processor()``; "" where neither says."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("vendor_id"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    text = platform.processor()
    return next((v for v in ("GenuineIntel", "AuthenticAMD", "HygonGenuine") if v in text), "")


_ON = enabled()
# Products with gradients (training) go through oneDNN only on CPUs where MKL, which
# F.linear uses, does not run its best code: AMD's (and Hygon's). On an Intel Xeon, MKL's
# forward + backward were 1.4x faster than oneDNN's for nanoGPT's training shapes (768 rows;
# benchmarks/notes-speed.md); without gradients oneDNN's pre-packed weights were as fast or
# faster on both. An unknown vendor keeps F.linear.
_ON_WITH_GRAD = _ON and cpu_vendor() in ("AuthenticAMD", "HygonGenuine")
_DTYPES = (torch.float32, torch.bfloat16)


def _exporting() -> bool:
    """Inside tracing, scripting, ``torch.compile`` or an ONNX export (torch.onnx is looked
    up, not imported: a process that never imported it is not exporting)."""
    onnx = sys.modules.get("torch.onnx")
    return (
        torch._C._get_tracing_state() is not None
        or torch.jit.is_scripting()  # type: ignore[attr-defined]
        or torch.compiler.is_compiling()
        or torch.compiler.is_exporting()  # (torch.export, the dynamo ONNX exporter)
        or (onnx is not None and onnx.is_in_onnx_export())
    )


def _onednn_operands(x: Tensor, weight: Tensor) -> bool:
    """x and weight are what oneDNN's product takes: dense CPU float32/bfloat16 tensors
    (a plain weight, not a quantized or other subclass), outside tracing and export."""
    return (
        _ON
        and x.device.type == "cpu"
        and x.dtype in _DTYPES
        and type(weight) in (Tensor, nn.Parameter)
        and x.layout == torch.strided
        and weight.layout == torch.strided
        and x.dim() >= 1
        and x.numel() > 0
        and not _exporting()
    )


def _usable(x: Tensor, weight: Tensor) -> bool:
    return (
        _onednn_operands(x, weight)  # (first: x has a last dimension then)
        and weight.dtype == x.dtype
        and x.numel() >= MIN_ROWS * x.shape[-1]
        and not torch.is_autocast_enabled("cpu")
    )


def _onednn(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    """x (..., in) @ weight (out, in)^T + bias, by oneDNN (weight plain or pre-packed)."""
    return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")


class _OneDnnLinear(torch.autograd.Function):
    """y = x W^T + b with oneDNN products forward and backward:
    dL/dx = g W, dL/dW = g^T x, dL/db = sum over rows of g."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        rows = x.reshape(-1, x.shape[-1])  # (N, in)
        ctx.save_for_backward(rows, weight)
        ctx.in_shape = x.shape
        y = _onednn(rows, weight, bias)  # (N, out)
        return y.view(*x.shape[:-1], weight.shape[0])

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
        rows, weight = ctx.saved_tensors
        g = grad.reshape(-1, grad.shape[-1])  # (N, out)
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_x = _onednn(g, weight.t(), None).view(ctx.in_shape)  # g W: (N, in)
        if ctx.needs_input_grad[1]:  # g^T x: (out, in); oneDNN copies its transposed input,
            if rows.shape[1] < g.shape[1]:  # so the narrower of x and g is the one transposed
                grad_w = _onednn(rows.t(), g.t(), None).t()  # (x^T g)^T
            else:
                grad_w = _onednn(g.t(), rows.t(), None)
        if ctx.needs_input_grad[2]:
            grad_b = g.sum(0)
        return grad_x, grad_w, grad_b


def stamp(t: Tensor) -> tuple[int, int]:
    """What tells a tensor's values at two moments apart: its version counter (moved by
    in-place changes; an inference tensor has none: -1) and the address of its data (moved
    by ``.data = ...`` and by ``Module.to``, ``.double()``, which keep the Parameter and its
    counter). A cache of something derived from a weight holds the weight and its stamp."""
    return (-1 if t.is_inference() else t._version, t.data_ptr())


class _Kept:
    """A module's slot for a tensor derived from its weight: copies (``copy.deepcopy``,
    pickle) start empty, since the copy's weight is another tensor."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value: tuple[Any, ...] | None = None

    def __deepcopy__(self, memo: dict[int, Any]) -> _Kept:
        return _Kept()

    def __reduce__(self) -> tuple[type[_Kept], tuple[()]]:
        return (_Kept, ())


def _packed(owner: nn.Module, weight: Tensor, rows: int) -> Tensor:
    """``weight`` in oneDNN's blocked layout, kept on ``owner`` until the weight changes."""
    kept = owner.__dict__.get("_onednn_weight")
    if kept is None:
        kept = owner.__dict__["_onednn_weight"] = _Kept()
    version = stamp(weight)
    if kept.value is not None and kept.value[0] is weight and kept.value[1] == version:
        return kept.value[2]
    packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach(), rows)
    kept.value = (weight, version, packed)
    return packed


def _autocast_bf16(x: Tensor, weight: Tensor) -> bool:
    """Inside CPU autocast to bfloat16, a product that autocast would run in bfloat16 (a
    float32 weight), any number of rows (one row by a 256 -> 768 weight: 41 us with the kept
    bfloat16 weight, 63 us under autocast; ``python benchmarks/profile_ops.py bf16``)."""
    return (
        torch.is_autocast_enabled("cpu")
        and torch.get_autocast_dtype("cpu") == torch.bfloat16
        and weight.dtype == torch.float32
        and _onednn_operands(x, weight)
    )


def _packed_bf16(
    owner: nn.Module, weight: Tensor, bias: Tensor | None, rows: int
) -> tuple[Tensor, Tensor | None]:
    """``weight`` and ``bias`` as autocast casts them (bfloat16), the weight in oneDNN's
    blocked layout, kept on ``owner`` until either changes: autocast casts every weight
    again at every forward (a BERT's 12.6 MB of float32 weights read, 6.3 MB written for a
    16-token sentence), which took longer than the products themselves."""
    kept = owner.__dict__.get("_onednn_bf16")
    if kept is None:
        kept = owner.__dict__["_onednn_bf16"] = _Kept()
    key = (weight, stamp(weight), bias, None if bias is None else stamp(bias))
    v = kept.value
    if v is not None and v[0] is weight and v[2] is bias and (v[1], v[3]) == (key[1], key[3]):
        return v[4], v[5]
    packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach().bfloat16(), rows)
    bias16 = None if bias is None else bias.detach().bfloat16()
    kept.value = (*key, packed, bias16)
    return packed, bias16


def linear(
    x: Tensor, weight: Tensor, bias: Tensor | None = None, owner: nn.Module | None = None
) -> Tensor:
    """``F.linear(x, weight, bias)``: x (..., in), weight (out, in), bias (out,) -> (..., out),
    by oneDNN where it is the faster kernel (see the module docstring). ``owner``: the module
    that may keep the pre-packed weight between calls without gradients."""
    training = torch.is_grad_enabled() and (
        x.requires_grad or weight.requires_grad or (bias is not None and bias.requires_grad)
    )
    if owner is not None and training:  # (with any kernel, autocast's too): the weights are
        for slot in ("_onednn_weight", "_onednn_bf16"):  # about to change, and a fused
            kept = owner.__dict__.get(slot)  # optimizer step moves no version counter
            if kept is not None:
                kept.value = None
    if owner is not None and not training and _autocast_bf16(x, weight):
        packed, bias16 = _packed_bf16(owner, weight, bias, x.numel() // x.shape[-1])
        return _onednn(x.to(torch.bfloat16), packed, bias16)  # what autocast computes
    if not _usable(x, weight) or (training and not _ON_WITH_GRAD):
        return F.linear(x, weight, bias)
    if training:
        out: Tensor = _OneDnnLinear.apply(x, weight, bias)  # type: ignore[no-untyped-call]
        return out
    if owner is None:
        return _onednn(x, weight, bias)
    return _onednn(x, _packed(owner, weight, x.numel() // x.shape[-1]), bias)


_POST_OPS = {"relu": ("relu", ""), "gelu": ("gelu", "none"), "gelu_tanh": ("gelu", "tanh")}


def linear_activation(
    module: nn.Linear, x: Tensor, name: str, activation: Callable[[Tensor], Tensor]
) -> Tensor:
    """``activation(module(x))``, e.g. GELU(x W_1 + b_1): (..., in) -> (..., out). Without
    gradients, where oneDNN runs the product, the activation (``name``: relu | gelu |
    gelu_tanh) is applied by the same kernel as its result is written (one pass over the
    (..., out) activations fewer; inside CPU autocast to bfloat16 the activation of the
    float32 sums, before they are rounded to bfloat16); otherwise the two are computed one
    after the other."""
    post = _POST_OPS.get(name)
    weight, bias = module.weight, module.bias
    if (
        post is None
        or type(module) is not Linear
        or torch.is_grad_enabled()
        and (x.requires_grad or weight.requires_grad or bias is not None and bias.requires_grad)
    ):
        return activation(module(x))
    rows = x.numel() // max(x.shape[-1], 1)
    if _autocast_bf16(x, weight) and rows >= MIN_ROWS:
        packed, bias16 = _packed_bf16(module, weight, bias, rows)
        return torch.ops.mkldnn._linear_pointwise(
            x.to(torch.bfloat16), packed, bias16, post[0], [], post[1]
        )
    if not _usable(x, weight):
        return activation(module(x))
    packed = _packed(module, weight, rows)
    return torch.ops.mkldnn._linear_pointwise(x, packed, bias, post[0], [], post[1])


class Linear(nn.Linear):
    """``torch.nn.Linear`` (y = x W^T + b; the same parameters and state_dict) whose product
    runs in oneDNN where that is the faster CPU kernel (``attnkit.nn.fast_paths.linear``)."""

    def forward(self, input: Tensor) -> Tensor:
        return linear(input, self.weight, self.bias, owner=self)


# --------------------------------------------------------------------------------------
# Attention
# --------------------------------------------------------------------------------------
def fusable(projections: tuple[nn.Linear, nn.Linear, nn.Linear]) -> bool:
    """True for plain Linear weights (not, e.g., the packed ones of a dynamically quantized
    model, which run as three separate products)."""
    return all(isinstance(m.weight, Tensor) for m in projections)


def qkv_weight(
    owner: nn.Module, projections: tuple[nn.Linear, nn.Linear, nn.Linear]
) -> tuple[Tensor, Tensor | None]:
    """[W^Q W^K W^V] (3 d_out, d_in) and [b^Q b^K b^V] (or None): the three weights side by
    side. Without gradients (inference, generation) ``owner`` keeps them until a weight
    changes (another tensor, or the same one changed or moved: its ``stamp``): a
    decoding step would otherwise spend more time copying the weights than multiplying by
    them. With gradients nothing is kept."""
    # (read from the modules' dictionaries: nn.Module's attribute lookup costs ~0.6 us)
    weights = [m._parameters["weight"] for m in projections]
    biases = [m._parameters["bias"] for m in projections]
    params = [p for p in (*weights, *biases) if p is not None]
    versions = None
    if not (torch.is_grad_enabled() or _exporting()):
        # (a tracer's fake tensor -- torch.export, the dynamo ONNX exporter -- has no data
        # to stamp: nothing kept)
        with contextlib.suppress(RuntimeError):
            versions = [stamp(p) for p in params]
    if versions is None:  # training (the weights are about to change), tracing
        owner.__dict__.pop("_qkv_cache", None)
        return torch.cat(weights), None if biases[0] is None else torch.cat(biases)  # type: ignore[arg-type]
    cached = owner.__dict__.get("_qkv_cache")
    if (
        cached is not None
        and all(a is b for a, b in zip(cached[0], params, strict=True))
        and cached[1] == versions
    ):
        return cached[2], cached[3]
    weight = torch.cat(weights)  # type: ignore[arg-type]
    bias = None if biases[0] is None else torch.cat(biases)  # type: ignore[arg-type]
    owner.__dict__["_qkv_cache"] = (params, versions, weight, bias)  # (held: by identity)
    return weight, bias


def fused_qkv(
    owner: nn.Module, projections: tuple[nn.Linear, nn.Linear, nn.Linear], x: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    """(x W^Q, x W^K, x W^V) for self-attention, (B, T, d) -> 3 x (B, T, d_out), as one GEMM
    (faster than three small ones, forward and backward; the weights stay three Hugging
    Face-named parameters), by the concatenated weight of ``qkv_weight`` (kept on ``owner``
    between calls without gradients)."""
    weight, bias = qkv_weight(owner, projections)
    width = projections[0].out_features
    q, k, v = torch.split(linear(x, weight, bias, owner=owner), width, dim=-1)
    return q, k, v


def without_full_mask(mask: Tensor | None) -> Tensor | None:
    """A padding mask (B, T) bool (True = real token), or None where every token is real:
    attention without a mask computes the same weights, and PyTorch's fused CPU kernel is
    faster without one (a 16-token BERT forward at batch 1: 2.4 vs 3.1 ms; the mask's own
    operators go too). On the CPU only (elsewhere the check would stall the device queue
    every forward), and not while tracing or exporting (a graph must take any padding)."""
    if mask is None or mask.device.type != "cpu" or mask.dtype != torch.bool or _exporting():
        return mask
    return None if bool(mask.all()) else mask


FEW_SCORES = 16384
"""Up to this many attention scores (B x H x Tq x Tk) bfloat16 inference on the CPU takes
the fused kernel (``fused_attention``); on a CPU with AMX any number does."""


def _amx_tiles() -> bool:
    """Whether oneDNN may compute with AMX tiles here (Intel Sapphire Rapids and later):
    the CPU has them and ``ONEDNN_MAX_CPU_ISA`` does not hold oneDNN below them."""
    isa = os.environ.get("ONEDNN_MAX_CPU_ISA", "ALL").upper()
    if isa not in ("ALL", "DEFAULT") and "AMX" not in isa:
        return False
    probe = getattr(torch.cpu, "_is_amx_tile_supported", None)
    try:
        return bool(probe()) if probe is not None else False
    except Exception:  # a torch without the probe, a platform that cannot answer
        return False


_AMX = _amx_tiles()


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
    ``attnkit.nn.dropout`` draws cheaper ones) and in bfloat16 with gradients (the fused
    CPU kernel is 1.5-5x slower forward and backward than three bf16 matrix products;
    measured for 20-512 tokens, benchmarks/notes-speed.md). Without gradients it is the
    faster one on a CPU with AMX tiles, whose oneDNN kernels it calls (an Intel Xeon: 1.2-2.4x
    for 1K-262K scores), and elsewhere for at most ``FEW_SCORES`` scores (B x H x Tq x Tk),
    where the formula's five operators cost more than their work (an AMD EPYC with
    avx512_bf16: one 16-token sentence, 4 heads: 12 us fused, 41 us explicit; at 8 x 4 x 32
    x 32 the explicit formula is faster again, 77 vs 160 us; ``python
    benchmarks/profile_ops.py bf16``). ``is_causal`` with no other mask and square
    attention uses the kernel's own causal path; otherwise the caller merged the look-ahead
    mask into ``mask``. A query row with no visible key gives zeros, as the formula does."""
    if q.device.type == "cpu" and (
        dropout_p > 0.0
        or q.dtype == torch.bfloat16
        and (
            torch.is_grad_enabled()
            or not _AMX
            and q.numel() // q.size(-1) * k.size(-2) > FEW_SCORES
        )
    ):
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

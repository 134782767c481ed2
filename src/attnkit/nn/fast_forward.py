"""A whole stack's forward at inference (BERT encoding a sentence, a classifier, a GPT
prompt scored without a cache) as plain tensor operations: a fast path beside
``attnkit.nn.layers.Encoder``, the same numbers.

Encoding one 16-token sentence with a small BERT (L4 H256) multiplies 16 rows by each
weight: the products take about a millisecond, and calling the ~15 modules of each layer
(``nn.Module.__call__`` with its hook checks, the capture checks, the mask merging) added
0.23 ms to a 1.30 ms forward (``python benchmarks/profile_ops.py infer``). ``encoder_forward`` reads each layer's weights and
runs exactly what ``EncoderLayer.forward`` runs::

    post-norm (the paper, BERT)                 pre-norm (GPT)
    q, k, v = x [W^Q W^K W^V] + b               h = LayerNorm_1(x)
    a = Attention(q, k, v) W^O + b^O            q, k, v = h [W^Q W^K W^V] + b
    x = LayerNorm_1(x + a)                      x = x + Attention(q, k, v) W^O + b^O
    x = LayerNorm_2(x + FFN(x))                 x = x + FFN(LayerNorm_2(x))

with FFN(x) = act(x W_1 + b_1) W_2 + b_2, the same kernels (``attnkit.nn.fast_paths``,
``attnkit.nn.attention.scaled_dot_product_attention``) and the same precision (under
autocast too).

It applies only where the module path computes exactly that (``encoder_forward`` returns
None otherwise, and the caller runs the modules): plain ``EncoderLayer``s whose Linear and
LayerNorm modules hold plain float tensors (not int8-quantized), no forward hook on any of
them nor a global one, without gradients, in eval mode or with every dropout at 0, outside
``attnkit.nn.capture`` (which records the explicit formula) and outside tracing, compiling
and export. The weights are read anew at every call (a weight replaced or changed in place
is the one used); only [W^Q W^K W^V] side by side and oneDNN's re-laid-out weights are
kept between calls, each until its weights change (``attnkit.nn.fast_paths``).

``attnkit.nn.fast_decode`` runs one decoding step of a pre-norm stack the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn.modules import module as _module_hooks

from attnkit.nn import capture as _capture
from attnkit.nn.attention import KVCache, scaled_dot_product_attention
from attnkit.nn.fast_paths import Linear, linear, linear_activation, qkv_weight

__all__ = ["LayerWeights", "encoder_forward", "layer_weights", "plain_inference"]

Norm = tuple[Tensor, Tensor, float]  # a LayerNorm's gamma, beta, eps (over the last dim)


@dataclass(slots=True)
class LayerWeights:
    """What one EncoderLayer's forward reads: its tensors (a module's attribute lookup
    costs more than the product of a row by a small weight) and the modules that keep
    their pre-packed weights (``owner`` of ``fast_paths.linear``)."""

    norm_first: bool  # pre-norm (GPT) or post-norm (the paper, BERT)
    norm1: Norm  # LayerNorm_1: gamma, beta, eps
    qkv: tuple[Tensor, Tensor | None]  # [W^Q W^K W^V] (3 d_model, d_model), its bias
    out: tuple[Tensor, Tensor | None]  # W^O, b^O
    norm2: Norm
    ffn1: tuple[Tensor, Tensor | None]  # W_1, b_1
    activation: tuple[str, Callable[[Tensor], Tensor]]  # name (fast_paths' post-op), function
    ffn2: tuple[Tensor, Tensor | None]  # W_2, b_2
    num_heads: int
    owners: tuple[nn.Module, nn.Module, nn.Module, nn.Module]  # qkv, W^O, W_1, W_2


_PLAIN = (Linear, nn.Linear, nn.LayerNorm)
_FLOATS = (torch.float32, torch.bfloat16, torch.float16, torch.float64)


def _plain(m: nn.Module) -> bool:
    """An (attnkit) Linear or a LayerNorm of plain float tensors (an int8-quantized layer
    is another type) without hooks."""
    if type(m) not in _PLAIN or m._forward_hooks or m._forward_pre_hooks:
        return False
    return all(
        p is None or (type(p) is nn.Parameter or type(p) is Tensor) and p.dtype in _FLOATS
        for p in m._parameters.values()
    )


def _hooked(m: nn.Module) -> bool:
    return bool(m._forward_hooks or m._forward_pre_hooks)


def layer_weights(layer: nn.Module) -> LayerWeights | None:
    """The weights of an ``EncoderLayer`` made of attnkit's own attention, Add & Norm and
    feed-forward modules (the caller checked their types) for a forward without module
    calls, or None where that would not compute what the layer does (int8 or other
    non-float Linear layers, a forward hook on any module the layer calls)."""
    parts: dict[str, Any] = layer._modules  # (faster than nn.Module's __getattr__)
    attn, ffn, an1, an2 = (parts[n] for n in ("self_attn", "ffn", "add_norm1", "add_norm2"))
    q, k, v, o = (attn._modules[n] for n in ("q_proj", "k_proj", "v_proj", "out_proj"))
    l1, l2, drop = (ffn._modules[n] for n in ("linear1", "linear2", "dropout"))
    n1, n2 = an1._modules["norm"], an2._modules["norm"]
    called = (layer, attn, ffn, an1, an2, an1._modules["dropout"], an2._modules["dropout"], drop)
    if any(map(_hooked, called)) or not all(map(_plain, (q, k, v, o, l1, l2, n1, n2))):
        return None
    p1, p2, po, pf1, pf2 = (m._parameters for m in (n1, n2, o, l1, l2))
    return LayerWeights(
        an1.norm_first,
        (p1["weight"], p1["bias"], n1.eps),
        qkv_weight(attn, (q, k, v)),
        (po["weight"], po["bias"]),
        (p2["weight"], p2["bias"], n2.eps),
        (pf1["weight"], pf1["bias"]),
        (ffn.activation_name, ffn.activation),
        (pf2["weight"], pf2["bias"]),
        attn.num_heads,
        (attn, o, l1, l2),
    )


def dropout_on(stack: nn.Module) -> bool:
    """Any dropout (module or attention probability) above 0 in ``stack``."""
    for m in stack.modules():
        p = getattr(m, "p", None) if isinstance(m, nn.Dropout) else getattr(m, "dropout", None)
        if isinstance(p, float) and p > 0.0:
            return True
    return False


def plain_inference(stack: nn.Module) -> bool:
    """Whether a forward of ``stack`` now runs without gradients, dropout, capture, global
    hooks, tracing, compiling and export: what the plain-tensor paths compute."""
    return (
        not torch.is_grad_enabled()
        and not _capture.ACTIVE
        and not _module_hooks._global_forward_hooks
        and not _module_hooks._global_forward_pre_hooks
        and not torch.compiler.is_compiling()
        and not torch.compiler.is_exporting()
        and torch._C._get_tracing_state() is None
        and not (stack.training and dropout_on(stack))
    )


def encoder_forward(
    stack: nn.Module,
    layers: Iterable[nn.Module],
    x: Tensor,
    key_padding_mask: Tensor | None,
    is_causal: bool,
    hidden_states: list[Tensor] | None,
    cache: list[KVCache] | None = None,
) -> Tensor | None:
    """x (B, T, d_model) -> the output of ``layers`` (B, T, d_model), before the stack's
    final LayerNorm; or None where the module path must run (nothing computed then).
    ``layers``: the stack's EncoderLayers (the caller checked their type);
    key_padding_mask (B, T) bool, True = real token, or None; ``is_causal``: the look-ahead
    mask; ``hidden_states`` receives each layer's output. ``cache``: empty ``KVCache``s
    (a prompt read before decoding, its "prefill"), one per layer, that receive each
    layer's keys and values (B, H, T, d_head); a cache that holds positions already: None."""
    if cache is not None and any(len(kv) for kv in cache):
        return None  # (the new positions would attend to cached ones: the modules do that)
    if not plain_inference(stack):
        return None
    plan = []
    for layer in layers:
        w = layer_weights(layer)
        if w is None:
            return None
        plan.append(w)
    b, t, d = x.shape
    mask = None if key_padding_mask is None else key_padding_mask[:, None, None, :]
    causal = is_causal and t > 1
    for n, w in enumerate(plan):
        own_qkv, own_out, own_1, own_2 = w.owners
        h = torch.layer_norm(x, (d,), *w.norm1) if w.norm_first else x  # sub-layer input
        qkv = linear(h, *w.qkv, owner=own_qkv)  # (B, T, 3 d_model): Q, K, V in one product
        q, k, v = qkv.view(b, t, 3, w.num_heads, d // w.num_heads).permute(2, 0, 3, 1, 4).unbind(0)
        if cache is not None:
            cache[n].append(k, v)  # (B, H, T, d_head) each, for the decoding steps
        a = scaled_dot_product_attention(q, k, v, mask=mask, is_causal=causal)[0]
        a = linear(a.transpose(1, 2).reshape(b, t, d), *w.out, owner=own_out)  # concat W^O
        x = x + a if w.norm_first else torch.layer_norm(x + a, (d,), *w.norm1)
        h = torch.layer_norm(x, (d,), *w.norm2) if w.norm_first else x
        h = linear_activation(own_1, h, *w.activation)  # type: ignore[arg-type]  # act(h W_1 + b_1)
        h = linear(h, *w.ffn2, owner=own_2)
        x = x + h if w.norm_first else torch.layer_norm(x + h, (d,), *w.norm2)
        if hidden_states is not None:
            hidden_states.append(x)
    return x

"""One decoding step of a causal pre-norm stack (GPT) as plain tensor operations: a fast
path beside ``attnkit.nn.layers.Encoder``, the same numbers.

A step of greedy generation at batch 1 multiplies a single row by every weight: the
products take well under a millisecond for a small model, and calling ~15 modules per
layer (each ``nn.Module.__call__`` with its hook checks, the capture checks, the mask
merging) took about as long again (benchmarks/notes-speed.md). ``DecodePlan`` reads the
weights of an ``Encoder`` once and then runs, per layer, exactly what
``EncoderLayer.forward`` runs for one new position with a ``KVCache``::

    h = LayerNorm_1(x)
    q, k, v = h [W^Q W^K W^V] + [b^Q b^K b^V]        one product (the fused weight)
    K, V = cache.append(k, v)                          (B, H, T_total, d_head)
    x = x + Attention(q, K, V) W^O + b^O               the new query sees every unmasked key
    x = x + act(LayerNorm_2(x) W_1 + b_1) W_2 + b_2
    ...
    LayerNorm_final(x)

It applies only where the module path would compute exactly that (``DecodePlan.build``
returns None otherwise, and ``usable()`` is checked before every step): a stack of plain
pre-norm ``EncoderLayer``s with plain float weights (not int8-quantized) and no forward
hooks anywhere in the model, in eval mode or with every dropout at 0, without gradients,
outside ``attnkit.nn.capture`` (which records the explicit formula) and outside tracing
and export. The plan holds the weights it read: it belongs to one generation (a
``GPTStepper``), during which the weights do not change.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.modules import module as _module_hooks

from attnkit.nn.attention import KVCache, scaled_dot_product_attention
from attnkit.nn.fast_forward import LayerWeights, layer_weights, plain_inference
from attnkit.nn.fast_paths import MIN_ROWS, linear, linear_activation
from attnkit.nn.layers import Encoder, standard_layer

__all__ = ["DecodePlan"]


def _has_hooks(model: nn.Module) -> bool:
    """Any forward hook or pre-hook on ``model`` or its submodules, or a global one."""
    if _module_hooks._global_forward_hooks or _module_hooks._global_forward_pre_hooks:
        return True
    return any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())


class DecodePlan:
    """The weights of an ``Encoder`` (pre-norm, causal) laid out for ``step``."""

    def __init__(self, stack: Encoder, layers: Sequence[LayerWeights]) -> None:
        self.stack = stack
        self.layers = list(layers)
        norm = stack.norm
        assert isinstance(norm, nn.LayerNorm)  # (build checked it)
        self.norm = (norm.weight, norm.bias, norm.eps)  # the final LayerNorm

    @classmethod
    def build(cls, stack: Encoder, model: nn.Module | None = None) -> DecodePlan | None:
        """A plan for ``stack`` (``model``: the module around it, checked for hooks too),
        or None where ``step`` would not compute what ``stack`` does."""
        if type(stack) is not Encoder or not isinstance(stack.norm, nn.LayerNorm):
            return None  # (a pre-norm stack ends in LayerNorm)
        if _has_hooks(model if model is not None else stack):
            return None
        layers = []
        with torch.no_grad():  # ([W^Q W^K W^V] kept on the attention module)
            for layer in stack.layers:
                w = layer_weights(layer) if standard_layer(layer) else None
                if w is None or not w.norm_first:
                    return None
                layers.append(w)
        return cls(stack, layers)

    def usable(self) -> bool:
        """Whether ``step`` computes what the stack's forward would, now."""
        return plain_inference(self.stack)

    def step(self, x: Tensor, cache: list[KVCache], key_padding_mask: Tensor | None) -> Tensor:
        """x (B, 1, d_model): the new position's input (embeddings) -> the final
        LayerNorm's output (B, 1, d_model); each layer's ``cache`` gets its key/value.
        key_padding_mask: (B, T_total) True = real token (cached + new), or None (all
        real)."""
        b = x.size(0)
        mask = None if key_padding_mask is None else key_padding_mask[:, None, None, :]
        fused = x.device.type != "cpu" or x.dtype == torch.float32  # fused_attention's choice
        # F.linear's rows (fast_paths.linear's too), but inside CPU autocast, where linear
        # keeps each weight cast to bfloat16 for any rows (autocast would cast it again)
        autocast = x.device.type == "cpu" and torch.is_autocast_enabled("cpu")
        few = x.numel() < MIN_ROWS * x.size(-1) and not autocast
        for w, kv in zip(self.layers, cache, strict=True):
            own_qkv, own_out, own_1, own_2 = w.owners
            h = torch.layer_norm(x, x.shape[-1:], *w.norm1)  # LayerNorm_1(x)
            qkv = F.linear(h, *w.qkv) if few else linear(h, *w.qkv, owner=own_qkv)
            q, k, v = qkv.view(b, 1, 3, w.num_heads, -1).permute(2, 0, 3, 1, 4).unbind(0)
            keys, values = kv.append(k, v)  # (B, H, T_total, d_head)
            if fused:  # the new query sees its own key: no row without one, so the
                # kernel takes the padding mask as it is (no empty-row fix-up to run)
                a = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)
            else:
                a = scaled_dot_product_attention(q, keys, values, mask=mask)[0]
            a = a.transpose(1, 2).reshape(b, 1, -1)  # concat heads (B, 1, d_model)
            x = x + (F.linear(a, *w.out) if few else linear(a, *w.out, owner=own_out))
            h = torch.layer_norm(x, x.shape[-1:], *w.norm2)  # LayerNorm_2(x)
            if few:  # act(h W_1 + b_1)
                h = w.activation[1](F.linear(h, *w.ffn1))
            else:
                h = linear_activation(own_1, h, *w.activation)  # type: ignore[arg-type]
            x = x + (F.linear(h, *w.ffn2) if few else linear(h, *w.ffn2, owner=own_2))
        return torch.layer_norm(x, x.shape[-1:], *self.norm)

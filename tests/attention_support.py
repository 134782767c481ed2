"""Test helper: the attention weights of a model's every ``MultiHeadAttention`` by torch's
contract (``need_weights=True``, the one place attnkit keeps that flag), as a reference
beside what ``attnkit.nn.capture`` records."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import Tensor, nn

from attnkit.nn.attention import MultiHeadAttention


def weights_by_need_weights(model: nn.Module, call: Callable[[], Any]) -> tuple[Any, list[Tensor]]:
    """(``call()``'s result, the weights (B, H, Tq, Tk) each MultiHeadAttention of ``model``
    returned, in call order), every attention called with ``need_weights=True``."""
    found: list[Tensor] = []
    handles = []
    for module in model.modules():
        if isinstance(module, MultiHeadAttention):
            handles.append(module.register_forward_pre_hook(
                lambda mod, args, kwargs: (args, {**kwargs, "need_weights": True}),
                with_kwargs=True,
            ))  # fmt: skip
            handles.append(
                module.register_forward_hook(lambda mod, args, out: found.append(out[1]))
            )
    if not handles:
        raise AssertionError(f"{type(model).__name__} has no MultiHeadAttention to read")
    try:
        result = call()
    finally:
        for handle in handles:
            handle.remove()
    if not found or any(w is None for w in found):  # need_weights=True must give weights
        raise AssertionError(f"need_weights=True gave no weights: {found!r:.200}")
    return result, found

"""``AdamW``: torch's AdamW, the same state and arithmetic, without importing torch._dynamo.

torch wraps the optimizer's bookkeeping (``add_param_group``, ``zero_grad``,
``state_dict``, ``load_state_dict``) and its step in ``torch._disable_dynamo`` /
``torch._dynamo.graph_break``, so that ``torch.compile`` never traces them. Both import
``torch._dynamo`` the first time they run: 0.8-1.2 s measured on 2-core CPUs, a quarter of
the start-up of a small training run (nanoGPT's CPU recipe takes ~17 s in all), paid by
every ``attnkit train`` that does not compile anything.

This class calls the undecorated functions (``__wrapped__``, which ``functools.wraps``
leaves on each decorator; where a torch version has none, the decorated one) and, for the
fused implementation with nothing unusual about it, runs the step as torch's
``_fused_adamw`` does: ``step += 1``, then the fused kernel ``torch._fused_adamw_`` over
the group. Everything else (a closure, AMSGrad, ``capturable``, a tensor learning rate,
a GradScaler's ``grad_scale``/``found_inf``, parameters of several devices or dtypes in a
group, the foreach implementation) goes to ``torch.optim.AdamW.step`` itself. The update,
per parameter theta with gradient g at step t (lr, beta1, beta2, eps, weight decay lambda):

    theta <- theta - lr * lambda * theta                      (decoupled weight decay)
    m <- beta1 m + (1 - beta1) g ;  v <- beta2 v + (1 - beta2) g^2
    theta <- theta - lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)

tests/runtime/test_adamw.py checks it against ``torch.optim.AdamW(fused=True)`` to the bit,
the state dict round trip, and that a training run leaves ``torch._dynamo`` unimported.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.optim import Optimizer


def _undecorated(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` without torch's dynamo-disabling wrapper (the wrapper if it hides nothing)."""
    return getattr(fn, "__wrapped__", fn)


_add_param_group = _undecorated(Optimizer.add_param_group)
_zero_grad = _undecorated(Optimizer.zero_grad)
_state_dict = _undecorated(Optimizer.state_dict)
_load_state_dict = _undecorated(Optimizer.load_state_dict)


class AdamW(torch.optim.AdamW):
    """``torch.optim.AdamW`` (same arguments, state dict and updates) that does not import
    ``torch._dynamo``; see the module docstring."""

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        _add_param_group(self, param_group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        _zero_grad(self, set_to_none)

    def state_dict(self) -> dict[str, Any]:
        return dict(_state_dict(self))

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        _load_state_dict(self, state_dict)

    def _plain_fused(self) -> bool:
        """True where the step below is exactly torch's fused step: one device and dtype
        for all parameters (torch groups by both itself), none of the cases in the
        module docstring that torch's own step handles."""
        if getattr(self, "grad_scale", None) is not None:
            return False
        if getattr(self, "found_inf", None) is not None:
            return False
        kinds = set()
        for g in self.param_groups:
            if not g["fused"] or g["amsgrad"] or g["capturable"] or g["differentiable"]:
                return False
            if g["maximize"] or isinstance(g["lr"], torch.Tensor):
                return False
            kinds.update((p.device, p.dtype) for p in g["params"])
        return len(kinds) <= 1

    def _state(self, p: torch.Tensor) -> dict[str, torch.Tensor]:
        """``p``'s state, created as torch's fused AdamW creates it (step: a float32
        scalar on ``p``'s device; both moments zero)."""
        state = self.state[p]
        if not state:
            state["step"] = torch.zeros((), dtype=torch.float32, device=p.device)
            state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        return state

    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        if closure is not None or not self._plain_fused():
            return super().step(closure)
        with torch.no_grad():
            for group in self.param_groups:
                params = [p for p in group["params"] if p.grad is not None]
                if not params:
                    continue
                states = [self._state(p) for p in params]
                steps = [s["step"] for s in states]
                torch._foreach_add_(steps, 1)
                beta1, beta2 = group["betas"]
                torch._fused_adamw_(
                    params,
                    [p.grad for p in params],
                    [s["exp_avg"] for s in states],
                    [s["exp_avg_sq"] for s in states],
                    [],  # AMSGrad's maxima: not used
                    steps,
                    amsgrad=False,
                    lr=group["lr"],
                    beta1=beta1,
                    beta2=beta2,
                    weight_decay=group["weight_decay"],
                    eps=group["eps"],
                    maximize=False,
                    grad_scale=None,
                    found_inf=None,
                )
        return None

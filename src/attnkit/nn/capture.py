"""The one tensor-capture mechanism: a recording context that attnkit's attention and layers
write into while it is open (what the explainer, ``attnkit.app.explain``, shows).

    with capture(model) as rec:
        logits, _ = model(ids)
    rec.of("attention")      # one Record per attention call, in call order
    rec.of("add_norm", "encoder.layers.0.add_norm1")

Off, it costs one ``if`` per call site: the layers test the module-level flag ``ACTIVE``
(True only while some ``capture()`` is open, in any thread) before they look up the
recorder of the current thread / asyncio task (a ``ContextVar``), so training and serving
run exactly the code they ran before. Under capture, ``MultiHeadAttention`` computes the
explicit formula softmax(Q K^T / sqrt(d_k)) V instead of the fused kernel, so that its
scores and weights exist (the two agree to ~1e-6 in float32; tests/app/explain/test_explain_trace.py).

What is recorded (``Record.kind`` -> ``Record.data`` keys; tensors detached, as computed):

    attention        q, k, v (B, H, T, d_head); scores (B, H, Tq, Tk) before the mask;
                     mask (bool, broadcastable to scores; None: no mask); weights; head_out
                     (B, H, Tq, d_head) = weights @ v (before W^O); output (B, Tq, d_model);
                     role ("self" | "causal_self" | "cross"); padding (a key padding mask
                     was given); look_ahead (bool); scale; dropout_p
    score            query, keys (as the score function prepared them), scores (B, Tq, Tk)
                     (a score function of attnkit.nn.attention: its module has ``name`` and
                     ``formula``)
    softmax          scores, mask, weights (masked_softmax)
    attend           weights, values, context (attend: the weighted sum)
    token_embedding  ids, output (after the sqrt(d_model) scale), scale
    position         kind ("sinusoidal" | "learned"), offset, positions (T,), rows (T, d)
    segment          ids, output
    add_norm         input, sublayer (the sublayer's output), output, norm_first; its
                     LayerNorm's norm_input (what it normalised: x + sublayer(x) post-norm,
                     x pre-norm), norm_output (LayerNorm(norm_input)), gamma, beta, eps
    ffn              hidden (after the activation, (B, T, d_ff)), output, activation (its
                     name: "relu" | "gelu" | "gelu_tanh")
    scalar_mix       scalars (s), weights (softmax(s)), gamma, layers (list), output
    tap              input, output of a module named in ``capture(taps=...)`` (a forward
                     hook, registered only inside the ``with`` block)
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from torch import Tensor, nn

__all__ = ["ACTIVE", "Record", "Recorder", "capture", "current", "record"]

ACTIVE = False  # True while at least one capture() is open (any thread): the layers' one `if`
_OPEN = 0
_LOCK = threading.Lock()
_RECORDER: ContextVar[Recorder | None] = ContextVar("attnkit_capture", default=None)


@dataclass
class Record:
    """One call of a captured layer: ``kind`` (see the module docstring), ``module`` (its
    name in the captured model, "" when unknown), ``data`` (tensors detached), ``index``
    (call order within the capture)."""

    kind: str
    module: str
    data: dict[str, Any]
    index: int

    def __getitem__(self, key: str) -> Any:
        return self.data[key]


def _detach(value: Any) -> Any:
    if isinstance(value, Tensor):
        return value.detach()
    if isinstance(value, (list, tuple)):
        return [_detach(v) for v in value]
    return value


@dataclass
class Recorder:
    """The records of one ``capture()`` block, in call order."""

    records: list[Record] = field(default_factory=list)
    names: dict[int, str] = field(default_factory=dict)  # id(module) -> name in the model

    def name_of(self, module: nn.Module | None) -> str:
        return "" if module is None else self.names.get(id(module), "")

    def add(self, kind: str, module: nn.Module | None, /, **data: Any) -> Record:
        rec = Record(kind, self.name_of(module), {k: _detach(v) for k, v in data.items()},
                     len(self.records))  # fmt: skip
        self.records.append(rec)
        return rec

    def of(self, kind: str, module: str | None = None, prefix: str | None = None) -> list[Record]:
        """The records of ``kind`` (of the module named ``module``, or of modules whose
        names start with ``prefix``), in call order."""
        return [
            r
            for r in self.records
            if r.kind == kind
            and (module is None or r.module == module)
            and (prefix is None or r.module.startswith(prefix))
        ]

    def attention_weights(self, *roles: str) -> list[Tensor]:
        """The weights (B, H, Tq, Tk) of each recorded multi-head attention call, in call
        order (in a stack: layer order); only those of ``roles`` ("self", "causal_self",
        "cross") when given. The one way attnkit's models give their attention weights:

            with capture(model) as rec:
                model(ids)
            rec.attention_weights()         # [(B, H, T, T) per layer]
        """
        return [r["weights"] for r in self.of("attention") if not roles or r["role"] in roles]

    def clear(self) -> None:
        self.records.clear()


def current() -> Recorder | None:
    """The recorder of this thread / task's innermost open ``capture()``, or None."""
    return _RECORDER.get()


def record(kind: str, module: nn.Module | None = None, /, **data: Any) -> None:
    """Add a record to the current capture (nothing when none is open in this context).
    Call sites test ``capture.ACTIVE`` first, so that this costs nothing when off."""
    rec = _RECORDER.get()
    if rec is not None:
        rec.add(kind, module, **data)


@contextmanager
def capture(
    model: nn.Module | None = None, taps: Mapping[str, nn.Module] | None = None
) -> Iterator[Recorder]:
    """Record what attnkit's layers compute inside the block (this thread / task only).

    ``model``: names the records by the modules' names in it (``named_modules``).
    ``taps``: {name: module} whose input and output are recorded as kind "tap" under
    ``name`` (a forward hook, removed when the block ends), for values no attnkit layer
    sees (e.g. the vector a classifier's linear head reads)."""
    global ACTIVE, _OPEN
    rec = Recorder()
    if model is not None:
        rec.names = {id(m): name for name, m in model.named_modules()}
    handles = []
    for name, module in (taps or {}).items():

        def hook(mod: nn.Module, args: tuple[Any, ...], output: Any, name: str = name) -> None:
            rec.records.append(
                Record("tap", name, {"input": _detach(args[0]) if args else None,
                                     "output": _detach(output)}, len(rec.records))
            )  # fmt: skip

        handles.append(module.register_forward_hook(hook))
    token = _RECORDER.set(rec)
    with _LOCK:
        _OPEN += 1
        ACTIVE = True
    try:
        yield rec
    finally:
        for handle in handles:
            handle.remove()
        _RECORDER.reset(token)
        with _LOCK:
            _OPEN -= 1
            ACTIVE = _OPEN > 0

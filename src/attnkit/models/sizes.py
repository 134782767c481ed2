"""Sizes from untrusted config.json files, checked before anything is allocated.

A run directory or a Hugging Face directory is input like any other: its config.json may say
``d_model: 1000000`` (a model of terabytes), ``num_layers: 1000000`` (hours of building) or
``vocab_size: -5``. Before a model is built from one:

1. every size field is an int within ``SIZE_LIMITS`` (``check_size_fields``, part of every
   ``ModelConfig.validate``, so a recipe gets the same one-line ``ConfigError``);
2. the model is built on the ``meta`` device (shapes only, no memory, bounded time since
   the sizes are bounded) and its tensors' shapes are compared with the weight file's
   safetensors header (read without loading a tensor): the sizes must be those the weights
   were trained with (``check_weights``);
3. its parameters and buffers must fit in the memory the machine has available
   (``check_memory``; skipped where the system does not say).

``check_model`` runs 2 and 3 for a validated config (``attnkit.models.read_model_config``
reads a run's or a ``save_pretrained`` folder's config.json with all three). Each failure is
one line naming the file and the field, e.g. ``runs/x/config.json: model.num_layers must be
<= 1000, got 1000000``.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Callable, Iterable
from itertools import chain
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from torch import nn
from torch.overrides import TorchFunctionMode

from attnkit.core.checkpoint import misfit_summary
from attnkit.core.config import ConfigError, short_repr
from attnkit.core.errors import AttnkitError, MissingFileError, RunError

__all__ = [
    "ID_LIMITS",
    "activation_bytes",
    "MAX_LAYERS",
    "MAX_LEN",
    "MAX_VOCAB",
    "MAX_WIDTH",
    "SIZE_LIMITS",
    "available_memory",
    "check_foreign_weights",
    "check_memory",
    "check_model",
    "check_size_fields",
    "check_training_memory",
    "check_weights",
    "explain_misfit",
    "layer_counts",
    "meta_model",
    "misfit_error",
    "misfit_evidence",
    "model_bytes",
    "renamed_fields",
    "weight_shapes",
]

# generous but finite: far above any model attnkit trains, far below what hangs or explodes
MAX_VOCAB = 10_000_000  # rows of an embedding table (tokens, classes, segments)
MAX_WIDTH = 65_536  # a vector's width (d_model, d_ff, hidden sizes)
MAX_LAYERS = 1_000  # layers of a stack
MAX_LEN = 1_000_000  # positions
# model config field -> (lowest, highest) allowed value; every int field of every registered
# model config is listed here or is a token id (``*_id``: 0 .. MAX_VOCAB - 1)
SIZE_LIMITS: dict[str, tuple[int, int]] = {
    "vocab_size": (1, MAX_VOCAB),  # (0: not yet set by the task, in a recipe)
    "tgt_vocab_size": (1, MAX_VOCAB),
    "type_vocab_size": (1, MAX_VOCAB),
    "num_classes": (1, MAX_VOCAB),
    "d_model": (1, MAX_WIDTH),
    "d_ff": (1, MAX_WIDTH),
    "num_heads": (1, MAX_WIDTH),
    "hidden_size": (1, MAX_WIDTH),
    "emb_dim": (1, MAX_WIDTH),
    "bilm_d_model": (1, MAX_WIDTH),
    "bilm_hidden_size": (1, MAX_WIDTH),
    "task_hidden_size": (1, MAX_WIDTH),
    "generator_d_model": (1, MAX_WIDTH),
    "token_dim": (0, MAX_WIDTH),
    "num_layers": (1, MAX_LAYERS),
    "num_decoder_layers": (1, MAX_LAYERS),
    "bilm_num_layers": (1, MAX_LAYERS),
    "max_len": (1, MAX_LEN),
    "ngram_max": (1, 32),
    "num_buckets": (1, 1 << 28),
}
ID_LIMITS = (0, MAX_VOCAB - 1)
# fields whose 0 means "the task fills this in from the data" (a recipe's model section)
UNSET_WHEN_ZERO = frozenset({"vocab_size"})
# the fields named first when a size disagrees with a tensor of the same length
_PRIORITY = (
    "vocab_size",
    "tgt_vocab_size",
    "d_model",
    "hidden_size",
    "emb_dim",
    "d_ff",
    "max_len",
    "num_classes",
    "type_vocab_size",
    "num_buckets",
)


def _limits(name: str) -> tuple[int, int] | None:
    if name in SIZE_LIMITS:
        return SIZE_LIMITS[name]
    return ID_LIMITS if name.endswith("_id") else None


def _int_fields(config: Any) -> list[tuple[str, bool]]:
    """(name, optional) of the config's int fields."""
    out = []
    for f in dataclasses.fields(config):
        kind = str(f.type).replace(" ", "")
        if kind in ("int", "int|None"):
            out.append((f.name, kind != "int"))
    return out


def check_size_fields(config: Any) -> None:
    """Raise a one-line ``ConfigError`` naming the first int field of ``config`` (a model
    config dataclass) that is not an int (bool, float, str: refused) or lies outside
    ``SIZE_LIMITS`` (token ids: ``ID_LIMITS``)."""
    for name, optional in _int_fields(config):
        value = getattr(config, name)
        where = f"model.{name}"
        if value is None and optional:
            continue
        if not isinstance(value, int) or isinstance(value, bool):
            raise ConfigError(f"{where} must be int, got {short_repr(value)}")
        if value == 0 and name in UNSET_WHEN_ZERO:
            continue
        limits = _limits(name)
        if limits is None:
            continue
        low, high = limits
        if value < low:
            bound = "> 0" if low == 1 else f">= {low}"
            raise ConfigError(f"{where} must be {bound}, got {short_repr(value)}")
        if value > high:
            raise ConfigError(f"{where} must be <= {high}, got {short_repr(value)}")
    # token ids index the embedding tables (once the task has set their sizes)
    tables = [v for v in (config.vocab_size, getattr(config, "tgt_vocab_size", None)) if v]
    for name, _ in _int_fields(config):
        value = getattr(config, name)
        if tables and name.endswith("_id") and value is not None and value >= min(tables):
            raise ConfigError(f"model.{name} must be in [0, vocab_size), got {value}")


# --------------------------------------------------------------------------------------
# what building would take
# --------------------------------------------------------------------------------------
class _NoValuesOnMeta(TorchFunctionMode):
    """Inside ``meta_model``: the initialisers and in-place value fills of meta tensors are
    skipped (a meta tensor has a shape and no values). PyTorch would run each through a
    Python reference decomposition whose wrapper imports ``torch._dynamo`` (~0.8 s of a
    command's start-up) to fill values that do not exist."""

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Iterable[type],
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        if func is torch.arange and _on_meta(kwargs):  # (its decomposition imports dynamo)
            return _meta_arange(*args, **kwargs)
        first = args[0] if args else kwargs.get("tensor", kwargs.get("self"))
        name = getattr(func, "__name__", "")
        fills = getattr(func, "__module__", None) == "torch.nn.init" or name in _VALUE_FILLS
        if fills and isinstance(first, torch.Tensor) and first.is_meta:
            return first
        if name in _ELEMENTWISE and not kwargs:  # (a table's formula: sinusoidal encoding)
            tensors = [a for a in args if isinstance(a, torch.Tensor)]
            if tensors and all(t.is_meta for t in tensors):
                return _meta_elementwise(name, args)
        return func(*args, **kwargs)


def _on_meta(kwargs: dict[str, Any]) -> bool:
    device = kwargs.get("device")
    return device is None or torch.device(device).type == "meta"


def _meta_arange(*args: Any, dtype: torch.dtype | None = None, **_: Any) -> torch.Tensor:
    """``torch.arange(...)``'s result on the meta device: its length and dtype alone."""
    start, end, step = (0, args[0], 1) if len(args) == 1 else (*args, 1)[:3]
    numbers = [v.item() if isinstance(v, torch.Tensor) else v for v in (start, end, step)]
    start, end, step = numbers
    if dtype is None:
        floats = any(isinstance(v, float) for v in numbers)
        dtype = torch.get_default_dtype() if floats else torch.int64
    length = max(math.ceil((end - start) / step), 0)
    return torch.empty(length, dtype=dtype, device="meta")


def _meta_elementwise(name: str, args: tuple[Any, ...]) -> torch.Tensor:
    """An elementwise op's result on meta operands: the broadcast shape, the promoted dtype
    (a float for the functions that make one)."""
    shapes = [a.shape for a in args if isinstance(a, torch.Tensor)]
    dtype = args[0].dtype if len(args) == 1 else torch.result_type(args[0], args[1])
    if not dtype.is_floating_point and name.strip("_").removeprefix("r") in _FLOAT_RESULTS:
        dtype = torch.get_default_dtype()
    return torch.empty(_broadcast(shapes), dtype=dtype, device="meta")


def _broadcast(shapes: list[torch.Size]) -> tuple[int, ...]:
    """NumPy's broadcasting of ``shapes`` (``torch.broadcast_shapes`` imports sympy)."""
    ndim = max(len(s) for s in shapes)
    out = []
    for dims in zip(*[(1,) * (ndim - len(s)) + tuple(s) for s in shapes], strict=True):
        sizes = {d for d in dims if d != 1}
        if len(sizes) > 1:
            raise RuntimeError(f"shapes {[tuple(s) for s in shapes]} do not broadcast")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


_FLOAT_RESULTS = frozenset(
    {"truediv", "div", "true_divide", "sin", "cos", "exp", "log", "sqrt", "rsqrt", "tanh",
     "sigmoid"}
)  # fmt: skip
# elementwise functions (and operators) whose meta kernels are Python references
_ELEMENTWISE = frozenset(
    {"__truediv__", "__rtruediv__", "__div__", "__rdiv__", "div", "true_divide", "__mul__",
     "__rmul__", "mul", "__add__", "__radd__", "add", "__sub__", "__rsub__", "sub", "pow",
     "__pow__", "__rpow__", "sin", "cos", "exp", "log", "sqrt", "rsqrt", "neg", "__neg__",
     "tanh", "sigmoid"}
)  # fmt: skip


# in-place ops that change a tensor's values only (never its shape)
_VALUE_FILLS = frozenset(
    {"normal_", "uniform_", "zero_", "fill_", "random_", "exponential_", "bernoulli_",
     "cauchy_", "log_normal_", "geometric_", "trunc_normal_", "copy_"}
)  # fmt: skip


def meta_model(config: Any, where: str, error: type[AttnkitError] = RunError) -> nn.Module:
    """The model ``config`` describes, built on the ``meta`` device: every tensor's shape,
    no memory, no values (``_NoValuesOnMeta``). A config that does not build is a one-line
    ``error`` naming ``where``."""
    try:
        with torch.device("meta"), _NoValuesOnMeta():
            return config.build()
    except AttnkitError as exc:
        raise error(f"{where}: {exc}") from None
    except Exception as exc:  # whatever the constructors raise for sizes they cannot take
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise error(
            f"{where}: the model sizes do not make a model ({type(exc).__name__}: {reason[:200]})"
        ) from None


def model_bytes(model: nn.Module) -> int:
    """Bytes of ``model``'s parameters and buffers (also the non-persistent ones, e.g. a
    sinusoidal table), each counted once; works on a ``meta`` model."""
    seen: set[int] = set()
    total = 0
    for t in chain(model.parameters(), model.buffers()):
        if id(t) not in seen:
            seen.add(id(t))
            total += t.numel() * t.element_size()
    return total


def available_memory() -> int | None:
    """Bytes of memory this process may still take: MemAvailable (/proc/meminfo, else the
    available pages sysconf reports), capped by a cgroup v2 limit; None where the system
    does not say."""
    available: int | None = None
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    available = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    if available is None:
        try:
            available = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
        except (AttributeError, OSError, ValueError):
            return None
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text(encoding="ascii").strip()
        if limit != "max":
            used = int(Path("/sys/fs/cgroup/memory.current").read_text(encoding="ascii"))
            available = min(available, max(int(limit) - used, 0))
    except (OSError, ValueError):
        pass
    return available


def _gb(n: int) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB"


def _sizes_summary(config: Any) -> str:
    """The config's size fields, for a message (``model.d_model=768, ...``)."""
    names = [n for n in (*_PRIORITY, "num_layers", "num_decoder_layers") if hasattr(config, n)]
    return ", ".join(f"model.{n}={getattr(config, n)}" for n in names if getattr(config, n))


def check_memory(
    model: nn.Module, config: Any, where: str, error: type[AttnkitError] = RunError
) -> None:
    """A one-line ``error`` if ``model`` (a ``meta_model``) needs more memory for its
    parameters and buffers than the machine has available (no check where it cannot say)."""
    need = model_bytes(model)
    have = available_memory()
    if have is not None and need > have:
        raise error(
            f"{where}: the model these sizes describe ({_sizes_summary(config)}) needs "
            f"{_gb(need)} for its weights, more than the {_gb(have)} of memory available"
        )


def activation_bytes(config: Any, batch: int, seq_len: int) -> int:
    """A lower estimate of the bytes one training step keeps for backward: per token and
    layer, the activations a Transformer block saves (~16 d_model + 2 d_ff floats, an
    LSTM's gates ~8 hidden) and the attention weights (heads x seq_len), in fp32; the
    output layer is left out (per token for a language model, per text for a classifier).
    Meant to refuse sizes that cannot fit, not to plan memory."""
    width = getattr(config, "d_model", None) or getattr(config, "hidden_size", None) or 0
    d_ff = getattr(config, "d_ff", None) or 0
    heads = getattr(config, "num_heads", None) or 0
    layers = (getattr(config, "num_layers", None) or 1) + (
        getattr(config, "num_decoder_layers", None) or 0
    )
    per_token = layers * (16 * width + 2 * d_ff + 2 * heads * seq_len)
    return 4 * batch * seq_len * per_token


def check_training_memory(
    model: nn.Module,
    config: Any,
    batch: int,
    seq_len: int,
    where: str,
    error: type[AttnkitError] = ConfigError,
) -> None:
    """A one-line ``error`` if training ``model`` (a ``meta_model`` of ``config``) on
    batches of ``batch`` sequences of ``seq_len`` tokens needs more memory than is
    available: weights, gradients and two Adam moments (4 x the weights) plus
    ``activation_bytes``. No check where the system does not say."""
    have = available_memory()
    if have is None:
        return
    weights = model_bytes(model)
    activations = activation_bytes(config, batch, seq_len)
    if 4 * weights + activations > have:
        raise error(
            f"{where}: a training step on batches of {batch:,} sequences of {seq_len:,} "
            f"tokens needs about {_gb(4 * weights + activations)} ({_gb(activations)} of "
            f"activations, {_gb(4 * weights)} for the weights, gradients and optimizer), more "
            f"than the {_gb(have)} of memory available: lower training.batch_size (or "
            "training.max_tokens, data.max_len)"
        )


# --------------------------------------------------------------------------------------
# the weight file
# --------------------------------------------------------------------------------------
def weight_shapes(path: str | os.PathLike[str]) -> dict[str, tuple[int, ...]]:
    """Every tensor's shape in a safetensors file, from its header alone (nothing is
    loaded). A missing or damaged file is a one-line error naming it."""
    try:
        with safe_open(str(path), framework="pt") as f:
            return {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}  # noqa: SIM118
    except FileNotFoundError:
        raise MissingFileError(f"{path} is missing") from None
    except (SafetensorError, OSError, ValueError, RuntimeError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise RunError(f"{path} is damaged or not a safetensors file ({reason})") from None


def _int8_as_float_names(shapes: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    """An int8 file's shapes (``attnkit.interop.quantize``: each quantized weight as
    ``NAME.int8`` with its ``.scales`` and ``.zero_points``) under the float model's names."""
    out = {}
    for key, shape in shapes.items():
        if key.endswith((".weight.scales", ".weight.zero_points")):
            continue
        out[key.removesuffix(".int8")] = shape
    return out


_NUMBERED = re.compile(r"^(.*?\.)(\d+)\.")


def layer_counts(keys: Iterable[str]) -> dict[str, int]:
    """For each numbered module list among tensor names (``encoder.layers.3.…``): how many
    entries it has."""
    seen: dict[str, set[str]] = {}
    for key in keys:
        m = _NUMBERED.match(key)
        if m:
            seen.setdefault(m.group(1), set()).add(m.group(2))
    return {prefix: len(indices) for prefix, indices in seen.items()}


def explain_misfit(
    config: Any,
    fits: Callable[[Any], bool],
    expected: dict[str, tuple[int, ...]],
    found: dict[str, tuple[int, ...]],
) -> tuple[str, int] | None:
    """(field, value) such that ``config`` with that one size changed to ``value`` gives
    exactly the tensors of the file (``fits(changed_config)``), or None. ``expected``: the
    tensors' shapes by ``config``, ``found``: the file's (under the same names). The field a
    config.json got wrong is named only when changing it alone explains every tensor (a
    single damaged tensor names none). Only the sizes behind the first misfit are tried:
    a few meta builds, on the error path only."""
    values = {n: getattr(config, n) for n, _ in _int_fields(config) if n in SIZE_LIMITS}
    tries: list[tuple[str, int]] = []
    ours, theirs = layer_counts(expected), layer_counts(found)
    for prefix in sorted(set(ours) | set(theirs)):
        mine, there = ours.get(prefix, 0), theirs.get(prefix, 0)
        if mine != there:
            tries += [(n, there) for n, v in values.items() if v == mine and "layers" in n]
            break
    for key, shape in expected.items():
        if key in found and found[key] != shape and len(found[key]) == len(shape):
            for mine, there in zip(shape, found[key], strict=True):
                if mine != there:
                    tries += [(n, there) for n, v in values.items() if v == mine]
            break
    order = {n: i for i, n in enumerate(_PRIORITY)}
    tries.sort(key=lambda t: order.get(t[0], len(order)))
    for name, value in tries[:8]:
        if value <= 0:
            continue
        try:
            changed = dataclasses.replace(config, **{name: value})
            changed.validate()
            if fits(changed):
                return name, value
        except Exception:  # noqa: BLE001, S112 - a value that does not build: not it
            continue
    return None


def misfit_error(
    where: str,
    field: str,
    current: Any,
    value: int,
    weights_name: str,
    expected: dict[str, tuple[int, ...]],
    found: dict[str, tuple[int, ...]],
    error: type[AttnkitError] = RunError,
) -> AttnkitError:
    """The one line for a config.json whose ``field`` (as the file names it) says
    ``current`` where the weights were saved with ``value`` (``explain_misfit``)."""
    return error(
        f"{where}: {field} is {current} but {weights_name} was saved with {value} "
        f"({misfit_evidence(expected, found)})"
    )


def misfit_evidence(expected: dict[str, tuple[int, ...]], found: dict[str, tuple[int, ...]]) -> str:
    """What shows a misfit: the first tensor of another shape, else the layer counts."""
    for key, shape in expected.items():
        if key in found and found[key] != shape:
            return f"{key} is {found[key]} there"
    ours, theirs = layer_counts(expected), layer_counts(found)
    for prefix in sorted(set(ours) | set(theirs)):
        if ours.get(prefix, 0) != theirs.get(prefix, 0):
            return f"it holds {theirs.get(prefix, 0)} {prefix}N"
    return "its tensors differ"


Shapes = dict[str, tuple[int, ...]]


def check_foreign_weights(
    directory: Path,
    config: Any,
    check_tensors: Callable[[Shapes, Any], None],
    expected_found: Callable[[Shapes, Any], tuple[Shapes, Shapes]],
    field_names: dict[str, str],
    build: Callable[[Any], nn.Module],
    weights_file: str = "model.safetensors",
) -> None:
    """Before loading anything from a directory in another library's format (Hugging Face
    BERT, GPT-2): a model of ``config`` (read from its config.json, sizes bounded) must have
    the tensors of its ``weights_file`` (their shapes read from the header) and fit in the
    memory available. One line naming config.json and, where one size explains every
    tensor (``explain_misfit``), the field as the file names it (``field_names``: attnkit
    field -> config.json key): a ``RunError`` for weights that disagree, a ``ConfigError``
    for memory. Without ``weights_file`` (a pytorch_model.bin has no header) the weights are
    checked once loaded.

    check_tensors(shapes, config): a ``RunError`` unless a model of ``config`` has exactly
        the file's tensors (``shapes``, under the file's names);
    expected_found(shapes, config): (the shapes a model of ``config`` has, the file's), under
        the same names, for the message;
    build(config): the model (called on the ``meta`` device).
    """
    where = str(directory / "config.json")
    path = directory / weights_file
    if path.is_file():
        shapes = weight_shapes(path)

        def fits(changed: Any) -> bool:
            try:
                check_tensors(shapes, changed)
            except RunError:
                return False
            return True

        if not fits(config):
            expected, found = expected_found(shapes, config)
            named = explain_misfit(config, fits, expected, found)
            if named is None:
                check_tensors(shapes, config)  # (raises: the tensor that does not fit)
            else:
                field, value = named
                current = getattr(config, field)
                name = field_names.get(field, field)
                raise misfit_error(where, name, current, value, weights_file, expected, found)
    try:
        with torch.device("meta"):
            model = build(config)
    except Exception as exc:  # (sizes validated: should not happen)
        raise ConfigError(f"{where}: the sizes do not make a model ({exc})") from None
    check_memory(model, config, where, ConfigError)


def _meta_shapes(config: Any) -> dict[str, tuple[int, ...]]:
    with torch.device("meta"):
        model = config.build()
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}


def check_weights(
    model: nn.Module,
    config: Any,
    weights: str | os.PathLike[str],
    where: str,
    error: type[AttnkitError] = RunError,
    int8: bool = False,
) -> None:
    """A one-line ``error`` naming ``where`` (config.json) and the field if ``model`` (a
    ``meta_model`` of ``config``) does not have exactly the tensors of ``weights`` (a
    safetensors file; ``int8``: an ``attnkit.interop.quantize`` file), read from its header."""
    weights = Path(weights)
    found = weight_shapes(weights)
    if int8:
        found = _int8_as_float_names(found)
    own = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    if own == found:
        return
    named = explain_misfit(config, lambda c: _meta_shapes(c) == found, own, found)
    if named is not None:
        name, value = named
        raise misfit_error(
            where, f"model.{name}", getattr(config, name), value, weights.name, own, found, error
        )
    missing = [k for k in own if k not in found]
    extra = [k for k in found if k not in own]
    shapes = [
        f"{k} is {found[k]} there, {shape} by these sizes"
        for k, shape in own.items()
        if k in found and found[k] != shape
    ]
    raise error(
        f"{where}: the model sizes do not match {weights.name}: "
        f"{misfit_summary(missing, extra, shapes)}"
    )


def renamed_fields(message: str, names: dict[str, str]) -> str:
    """``message`` with each ``model.FIELD`` written as ``names[FIELD]`` (the name another
    format's config.json gives it, e.g. Hugging Face's ``hidden_size`` for ``d_model``)."""
    return re.sub(r"model\.(\w+)", lambda m: names.get(m.group(1), m.group(0)), message)


def check_model(
    config: Any,
    where: str,
    weights: str | os.PathLike[str] | None = None,
    error: type[AttnkitError] = RunError,
    int8: bool = False,
) -> None:
    """Before building a model from an untrusted ``config`` (read from ``where``): its
    sizes are checked (``config.validate()``), a ``meta`` model of them must have the
    tensors of ``weights`` (if given) and fit in the available memory. Allocates nothing."""
    try:
        config.validate()
    except ConfigError as exc:
        raise error(f"{where}: {exc}") from None
    if config.vocab_size == 0:  # a recipe's "not set yet": a saved model has one
        raise error(f"{where}: model.vocab_size must be > 0, got 0")
    model = meta_model(config, where, error)
    if weights is not None:
        check_weights(model, config, weights, where, error, int8=int8)
    check_memory(model, config, where, error)

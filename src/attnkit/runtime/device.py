"""Where tensors live and how they are computed: choosing a device, its precision and its
threads, moving batches there, finding a model's.

A leaf module (torch only), used by the Trainer, the tasks' predictors and the API alike.

Precision (``training.bf16: auto | true | false``): ``auto`` turns bf16 autocast on only
where the device computes bf16 natively, a CUDA GPU of compute capability >= 8.0 or a CPU
whose flags show ``avx512_bf16`` or ``amx_bf16``. Elsewhere bf16 is emulated: on a CPU
with AVX2 only, about 20x slower than fp32.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from attnkit.core.errors import ConfigError

__all__ = [
    "Precision",
    "cpu_flags",
    "apply_threads",
    "busy_note",
    "threads_kept",
    "check_threads",
    "cpu_has_native_bf16",
    "default_threads",
    "inference",
    "model_device",
    "native_bf16",
    "resolve_device",
    "resolve_precision",
    "to_device",
    "usable_cores",
]

# CPU flags that decide how fast attnkit runs (shown by `attnkit env`)
SPEED_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")


def _mps_available() -> bool:
    mps = getattr(torch.backends, "mps", None)
    return mps is not None and mps.is_available()


def resolve_device(name: str, what: str = "training.device") -> torch.device:
    """``training.device`` -> a torch.device; raises ConfigError for one this machine lacks
    (``what`` names the setting in the message).

    auto: CUDA if present, else MPS, else CPU. cpu | cuda | cuda:N | mps: exactly that one.
    """
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        return torch.device("mps" if _mps_available() else "cpu")
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError):
        device = None
    if device is None or device.type not in ("cpu", "cuda", "mps"):
        raise ConfigError(f"{what}: unknown device {name!r} (auto | cpu | cuda | cuda:N | mps)")
    if device.type in ("cpu", "mps") and device.index is not None:  # one of each at most
        if device.index != 0:
            raise ConfigError(
                f"{what}: unknown device {name!r}: there is one {device.type} ({device.type}, "
                f"or {device.type}:0)"
            )
        device = torch.device(device.type)  # cpu:0 is the cpu
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(f"{what} is {name!r} but CUDA is not available here")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ConfigError(f"{what} is {name!r} but there are {torch.cuda.device_count()} GPUs")
    if device.type == "mps" and not _mps_available():
        raise ConfigError(f"{what} is {name!r} but MPS is not available here")
    return device


def to_device(batch: Any, device: torch.device) -> Any:
    """``batch`` with every tensor in it (nested in dicts, lists, tuples) copied to ``device``;
    anything else is returned as it is. On CUDA, CPU tensors are pinned first so that the
    copy does not block the host."""
    if isinstance(batch, Tensor):
        if device.type == "cuda" and batch.device.type == "cpu":
            batch = batch.pin_memory()
        return batch.to(device, non_blocking=True)
    if isinstance(batch, dict):
        return {key: to_device(value, device) for key, value in batch.items()}
    if isinstance(batch, (list, tuple)):
        items = [to_device(value, device) for value in batch]
        if hasattr(batch, "_fields"):  # a namedtuple
            return type(batch)(*items)
        return type(batch)(items)
    return batch


def model_device(model: nn.Module) -> torch.device:
    """Where a model's parameters are (predictors send their inputs there)."""
    return next(iter(model.parameters()), torch.empty(0)).device


# ----------------------------------------------------------------------------- precision
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags from /proc/cpuinfo (empty where there is none, e.g. macOS)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


def cpu_has_native_bf16() -> bool:
    """True if the CPU advertises bf16 matrix instructions (AVX512-BF16 or AMX-BF16).

    Without them bf16 autocast on the CPU still works but is emulated, and much slower than
    fp32 (about 20x on an AVX2 laptop). ``ATTNKIT_CPU_BF16=0|1`` overrides the answer (tests
    use it to take the path of the other kind of CPU); unset or empty: the CPU decides; any
    other value is a ``ConfigError`` naming the accepted ones (not ignored).
    """
    forced = os.environ.get("ATTNKIT_CPU_BF16", "").strip()
    if forced in ("0", "1"):
        return forced == "1"
    if forced:
        raise ConfigError(f"ATTNKIT_CPU_BF16 must be 0 (no native bf16) or 1 (native bf16), or "
                          f"unset (the CPU decides), got {forced!r}")  # fmt: skip
    flags = cpu_flags()
    return "avx512_bf16" in flags or "amx_bf16" in flags


def native_bf16(device: torch.device) -> tuple[bool, str]:
    """(does ``device`` compute bf16 natively, why): CUDA of compute capability >= 8.0, or a
    CPU with avx512_bf16 / amx_bf16. MPS and older GPUs: no."""
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        ok = major >= 8
        return ok, f"CUDA compute capability {major}.{minor} ({'>=' if ok else '<'} 8.0)"
    if device.type == "cpu":
        if cpu_has_native_bf16():
            return True, "the CPU has native bf16 (avx512_bf16/amx_bf16)"
        return False, "the CPU has no native bf16 (no avx512_bf16/amx_bf16)"
    return False, f"no bf16 autocast on {device.type}"


@dataclass(frozen=True)
class Precision:
    """What a forward pass computes in: ``dtype`` for autocast (None: fp32), and why."""

    dtype: torch.dtype | None
    reason: str
    device_type: str = "cpu"  # where it autocasts: cpu | cuda
    emulated: bool = False  # bf16 asked for explicitly where the device only emulates it

    @property
    def name(self) -> str:
        return {None: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}[self.dtype]

    def autocast(self) -> contextlib.AbstractContextManager:
        """A context manager: autocast to ``dtype`` (fp32: autocast explicitly off, so an
        outer autocast does not reach a model meant to run in fp32)."""
        if self.dtype is None:
            return torch.autocast(self.device_type, enabled=False)
        return torch.autocast(self.device_type, dtype=self.dtype)


FP32 = Precision(None, "fp32")


def inference(method: Callable) -> Callable:
    """Decorator for a predictor's methods: no gradients, and autocast to the predictor's
    ``precision`` (``attnkit.load`` sets it from ``precision="auto"``: bf16 only where the
    device computes it natively); fp32 for a predictor without one."""

    @functools.wraps(method)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        precision = getattr(self, "precision", None) or FP32
        with torch.no_grad(), precision.autocast():
            return method(self, *args, **kwargs)

    return run


def resolve_precision(
    bf16: bool | str, device: torch.device, fp16: bool = False, what: str = "training.bf16"
) -> Precision:
    """``training.bf16`` (auto | True | False) and ``training.fp16`` on ``device`` -> the
    precision to use. auto: bf16 where ``native_bf16(device)``, else fp32. Raises
    ConfigError for a combination the device cannot run."""
    where = f"(the device resolved to {device})"
    if bf16 is True and fp16:
        raise ConfigError("training.bf16 and training.fp16 are both on: choose one")
    if fp16:
        if device.type != "cuda":
            raise ConfigError(f"training.fp16 needs a CUDA device {where}")
        return Precision(torch.float16, "training.fp16 is on", "cuda")
    kind = device.type if device.type in ("cpu", "cuda") else "cpu"
    native, why = native_bf16(device)
    if bf16 == "auto":
        if native:
            return Precision(torch.bfloat16, f"{what}=auto and {why}", kind)
        return Precision(None, f"{what}=auto and {why}", kind)
    if bf16:
        if device.type not in ("cpu", "cuda"):
            raise ConfigError(f"{what} needs a CPU or CUDA device {where}")
        return Precision(torch.bfloat16, f"{what}=true", kind, emulated=not native)
    return Precision(None, f"{what}=false", kind)


# ----------------------------------------------------------------------------- threads
def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, e.g. under taskset, a container
    or a batch scheduler), not the machine's count."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # macOS, Windows
        return max(1, os.cpu_count() or 1)


def default_threads() -> int:
    """torch's intra-op threads when nothing is set: the usable cores."""
    return usable_cores()


def busy_note(threads: int) -> str | None:
    """A note when other processes already keep cores busy (1-minute load average) and
    ``threads`` would share them: there OpenMP threads spin waiting for the one that lost its
    core (2 threads ran at 0.38x of 1 on a 2-core machine with one core busy, docs/results.md
    "Threads"). None when the machine looks free, or on systems without a load average."""
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        return None
    cores = usable_cores()
    if threads < 2 or load < 0.9 or load + threads <= cores + 0.5:
        return None
    return (
        f"note: this machine is busy (load average {load:.1f} on {cores} cores); if training "
        "is slow, try --threads 1 (threads that share a busy core wait for each other)"
    )


@contextlib.contextmanager
def threads_kept() -> Iterator[None]:
    """torch's intra-op thread count as it is now, put back when the block ends: training
    sets ``training.num_threads`` for its own work only (a notebook's torch is not left on
    the count a recipe chose)."""
    threads = torch.get_num_threads()
    try:
        yield
    finally:
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)


THREADS_PER_CORE = 4  # the most intra-op threads asked for, per usable core


def check_threads(threads: int) -> int:
    """``threads`` if it is 1 .. THREADS_PER_CORE x the usable cores, else ``ConfigError``
    (a count in the thousands crashed OpenMP; beyond a few per core none is faster)."""
    most = THREADS_PER_CORE * usable_cores()
    if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= most:
        raise ConfigError(f"threads must be an integer from 1 to {most} ({THREADS_PER_CORE} x the "
                          f"{usable_cores()} cores this process may use), got {threads!r}")  # fmt: skip
    return threads


def apply_threads(threads: int | None = None) -> int:
    """Set torch's intra-op threads to ``threads`` (None: ``default_threads()``, the cores
    this process may use; torch's own default is the machine's count, which oversubscribes
    a process confined to fewer cores). Returns the number set. On a machine where another
    process keeps a core busy, fewer threads can be faster: OpenMP threads spin waiting for
    each other (docs/results.md measures it)."""
    n = check_threads(int(threads)) if threads else default_threads()
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
    return n

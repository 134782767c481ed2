"""Where tensors live: choosing a device, moving batches there, finding a model's.

A leaf module (torch only), used by the Trainer, the tasks' predictors and the API alike.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from attnkit.errors import ConfigError

__all__ = ["model_device", "resolve_device", "to_device"]


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

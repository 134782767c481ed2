"""The one checkpoint format: safetensors for tensors, JSON for everything else.

Every file is written to a temporary name in the same directory and renamed into place,
so a crash (or SIGKILL) never leaves a half-written file behind. No pickle anywhere.

    run_dir/model.safetensors          best weights
    run_dir/last/model.safetensors     latest weights        } written together, then the
    run_dir/last/optimizer.safetensors optimizer tensors     } folder is swapped in with
    run_dir/last/state.json            step, epoch, sampler, } one rename
                                       scheduler, RNG, best
"""

from __future__ import annotations

import json
import os
import random
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch import nn

__all__ = [
    "atomic_write_text",
    "load_model_weights",
    "load_training_state",
    "rng_state",
    "save_model_weights",
    "save_training_state",
    "set_rng_state",
]


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` via a temporary file + ``os.replace``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _atomic_save_tensors(tensors: dict[str, torch.Tensor], path: Path, metadata=None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        save_file(tensors, tmp, metadata=metadata)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_model_weights(model: nn.Module, path: str | os.PathLike) -> Path:
    """state_dict -> safetensors (tied/shared tensors are stored once each, contiguous)."""
    state = {k: v.detach().contiguous().clone() for k, v in model.state_dict().items()}
    _atomic_save_tensors(state, Path(path), metadata={"format": "pt"})
    return Path(path)


def load_model_weights(model: nn.Module, path: str | os.PathLike, strict: bool = True) -> None:
    model.load_state_dict(load_file(str(path)), strict=strict)


def rng_state() -> dict[str, Any]:
    """Python and torch RNG states (torch's as a uint8 tensor, Python's as JSON)."""
    version, internal, gauss = random.getstate()
    return {"torch": torch.get_rng_state(), "python": [version, list(internal), gauss]}


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))


def _flatten_optimizer(opt_state: dict[str, Any]) -> tuple[dict[str, torch.Tensor], dict]:
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, dict[str, Any]] = {}
    for idx, per_param in opt_state["state"].items():
        for name, value in per_param.items():
            if torch.is_tensor(value):
                tensors[f"{idx}.{name}"] = value.detach().contiguous()
            else:
                scalars.setdefault(str(idx), {})[name] = value
    return tensors, {"param_groups": opt_state["param_groups"], "scalars": scalars}


def _unflatten_optimizer(tensors: dict[str, torch.Tensor], meta: dict) -> dict[str, Any]:
    state: dict[int, dict[str, Any]] = {}
    for key, value in tensors.items():
        idx, name = key.split(".", 1)
        state.setdefault(int(idx), {})[name] = value
    for idx, values in meta["scalars"].items():
        state.setdefault(int(idx), {}).update(values)
    return {"state": state, "param_groups": meta["param_groups"]}


def save_training_state(
    run_dir: str | os.PathLike,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    state: dict[str, Any],
) -> Path:
    """Write ``run_dir/last/`` (weights, optimizer, JSON state incl. RNG) atomically.

    The three files go into a fresh temporary folder that then replaces ``last/`` (the old
    one is removed only after the new one is complete).
    """
    run_dir = Path(run_dir)
    tmp = Path(tempfile.mkdtemp(dir=run_dir, prefix=".last."))
    try:
        save_model_weights(model, tmp / "model.safetensors")
        opt_tensors, opt_meta = _flatten_optimizer(optimizer.state_dict())
        rng = rng_state()
        opt_tensors["__rng_torch__"] = rng["torch"]
        _atomic_save_tensors(opt_tensors, tmp / "optimizer.safetensors")
        payload = {**state, "optimizer": opt_meta, "rng_python": rng["python"]}
        atomic_write_text(tmp / "state.json", json.dumps(payload))
        last = run_dir / "last"
        old = run_dir / ".last.old"
        if last.exists():
            shutil.rmtree(old, ignore_errors=True)
            os.replace(last, old)
        os.replace(tmp, last)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return run_dir / "last"


def load_training_state(
    run_dir: str | os.PathLike, model: nn.Module, optimizer: torch.optim.Optimizer
) -> dict[str, Any]:
    """Restore weights, optimizer and RNG from ``run_dir/last``; returns the JSON state."""
    last = Path(run_dir) / "last"
    if not (last / "state.json").is_file():
        old = Path(run_dir) / ".last.old"  # killed between the two renames
        if (old / "state.json").is_file():
            last = old
        else:
            raise FileNotFoundError(f"no resumable checkpoint in {last}")
    state = json.loads((last / "state.json").read_text(encoding="utf-8"))
    load_model_weights(model, last / "model.safetensors")
    tensors = load_file(str(last / "optimizer.safetensors"))
    torch_rng = tensors.pop("__rng_torch__")
    optimizer.load_state_dict(_unflatten_optimizer(tensors, state.pop("optimizer")))
    set_rng_state({"torch": torch_rng, "python": state.pop("rng_python")})
    return state

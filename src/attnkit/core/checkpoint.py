"""The one checkpoint format: safetensors for tensors, JSON for everything else.

Every file is written to a temporary name in the same directory and renamed into place,
so a crash (or SIGKILL) never leaves a half-written file behind. No pickle anywhere.

    model.safetensors              weights (``save_model_weights``)
    last/model.safetensors         latest weights        } written together by
    last/optimizer.safetensors     optimizer tensors,    } ``save_training_state``, then the
                                   torch RNG (CPU, CUDA) } folder is swapped in with one
    last/state.json                step, epoch, sampler, } rename
                                   Python RNG, best      }

Which file lives where in a run directory is ``attnkit.runtime.run.RunDir``'s business; these
functions take the paths they are given. Tensors are loaded onto ``map_location`` (a
checkpoint written on a GPU loads on a CPU and the other way round).
"""

from __future__ import annotations

import errno
import json
import os
import random
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import nn

from attnkit.core.errors import MissingFileError, RunError

__all__ = [
    "atomic_write_text",
    "load_model_weights",
    "load_training_state",
    "rng_state",
    "save_model_weights",
    "save_tensors",
    "save_training_state",
    "set_rng_state",
]


def fsync_path(path: str | os.PathLike[str]) -> None:
    """Flush a file's (or a folder's entries') data to the disk, so that a rename that
    follows survives a power cut. A no-op where the system cannot open folders (Windows)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def replace_durably(tmp: str | os.PathLike[str], path: str | os.PathLike[str]) -> None:
    """``os.replace(tmp, path)`` after ``tmp``'s data reached the disk, then the folder's."""
    fsync_path(tmp)
    os.replace(tmp, path)
    fsync_path(Path(path).parent)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def temp_file_beside(path: Path) -> tuple[int, str]:
    """A new temporary file in ``path``'s folder (``.NAME.XXXX.tmp``, unique per call), open
    as (fd, name), with the mode ``open(path, "w")`` would give (0666 minus the umask), not
    ``mkstemp``'s private 0600: renamed into place, it is readable as any other file there."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.fchmod(fd, 0o666 & ~_umask())
    return fd, tmp


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` via a temporary file (unique per process) that is
    fsync'ed and renamed into place; nothing is left behind when it fails."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = temp_file_beside(path)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        replace_durably(tmp, path)
    except OSError as exc:  # a full disk, say: named by the file meant, not the temporary one
        Path(tmp).unlink(missing_ok=True)
        raise _naming(exc, path) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _naming(exc: OSError, path: Path) -> OSError:
    """``exc`` as an ``OSError`` of the same errno whose filename is ``path``."""
    if exc.errno is None:
        return exc
    return OSError(exc.errno, exc.strerror or os.strerror(exc.errno), str(path))


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """``atomic_write_bytes`` of ``text`` in UTF-8."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def _atomic_save_tensors(
    tensors: dict[str, torch.Tensor], path: Path, metadata: dict[str, str] | None = None
) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = temp_file_beside(path)
    os.close(fd)
    try:
        try:
            save_file(tensors, tmp, metadata=metadata)  # safetensors makes its files 0600
        except SafetensorError as exc:  # its own type, for a full disk too: an OSError
            raise _as_os_error(exc, path) from None
        os.chmod(tmp, 0o666 & ~_umask())
        replace_durably(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise _naming(exc, path) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


_OS_ERROR = re.compile(r"\(os error (\d+)\)")


def _as_os_error(exc: SafetensorError, path: Path) -> OSError:
    """safetensors' error while writing ``path`` as the ``OSError`` it wraps ("... No space
    left on device (os error 28)"), so that writers report it as any other write error."""
    found = _OS_ERROR.search(str(exc))
    code = int(found.group(1)) if found else errno.EIO
    return OSError(code, os.strerror(code), str(path))


def _cpu_copy(tensor: torch.Tensor) -> torch.Tensor:
    """A contiguous CPU copy with its own storage (safetensors takes neither GPU tensors nor
    tensors that share memory)."""
    tensor = tensor.detach().contiguous()
    return tensor.clone() if tensor.device.type == "cpu" else tensor.cpu()


def save_model_weights(model: nn.Module, path: str | os.PathLike[str]) -> Path:
    """state_dict -> safetensors, from any device (tied/shared tensors are stored once each,
    contiguous, on the CPU)."""
    state = {k: _cpu_copy(v) for k, v in model.state_dict().items()}
    _atomic_save_tensors(state, Path(path), metadata={"format": "pt"})
    return Path(path)


def save_tensors(tensors: dict[str, torch.Tensor], path: str | os.PathLike[str]) -> Path:
    """Named tensors (from any device) -> safetensors, atomically; for weights stored under
    other names than a model's own (``attnkit.interop.quantize``'s int8 weights,
    ``attnkit.models.hf_bert``'s Hugging Face names, which ``attnkit.interop.hf_dir``
    exports)."""
    state = {k: _cpu_copy(v) for k, v in tensors.items()}
    _atomic_save_tensors(state, Path(path), metadata={"format": "pt"})
    return Path(path)


def read_tensors(
    path: str | os.PathLike[str], map_location: str | torch.device = "cpu"
) -> dict[str, torch.Tensor]:
    """The tensors of a safetensors file; a missing, truncated or foreign file (a pickle
    named .safetensors, say) is a one-line ``RunError`` naming it. Nothing is executed."""
    try:
        return load_file(str(path), device=str(map_location))
    except FileNotFoundError:
        raise MissingFileError(f"{path} is missing") from None
    except (SafetensorError, OSError, ValueError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise RunError(f"{path} is damaged or not a safetensors file ({reason})") from None


def load_model_weights(
    model: nn.Module,
    path: str | os.PathLike[str],
    strict: bool = True,
    map_location: str | torch.device = "cpu",
) -> None:
    """Load safetensors weights into ``model`` (copied onto each parameter's own device).
    Weights that do not fit the model (missing or extra tensors, other shapes, a tensor
    whose values are of another kind than the model's: int8 or bool for a float weight,
    float for an integer buffer) are a one-line ``RunError`` that says which."""
    tensors = read_tensors(path, map_location)
    own = model.state_dict()
    missing = [k for k in own if k not in tensors] if strict else []
    extra = [k for k in tensors if k not in own] if strict else []
    shapes = [
        f"{k} is {tuple(v.shape)} in the file, {tuple(own[k].shape)} in the model"
        for k, v in tensors.items()
        if k in own and v.shape != own[k].shape
    ]
    problems = misfit_summary(missing, extra, shapes)
    if problems:
        raise RunError(f"{path} does not match the model's config: {problems}")
    # load_state_dict casts silently: int8 or bool values copied into float weights are
    # other weights (a float type for another is a cast that keeps them: fp16, bf16, fp32)
    kinds = [
        f"{k} is {_dtype_name(v.dtype)} in the file, {_dtype_name(own[k].dtype)} in the model"
        for k, v in tensors.items()
        if k in own and _dtype_kind(v.dtype) != _dtype_kind(own[k].dtype)
    ]
    if kinds:
        more = f" (and {len(kinds) - 1} more)" if len(kinds) > 1 else ""
        raise RunError(f"{path} holds tensors of another type: {kinds[0]}{more}")
    model.load_state_dict(tensors, strict=strict)


def _dtype_kind(dtype: torch.dtype) -> str:
    """``float``, ``complex``, ``bool`` or ``int``: what a tensor's values are."""
    if dtype.is_floating_point:
        return "float"
    if dtype.is_complex:
        return "complex"
    return "bool" if dtype == torch.bool else "int"


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def misfit_summary(missing: list[str], extra: list[str], shapes: list[str]) -> str:
    """One line on how weights misfit a model ("" if they fit): counts and an example each."""
    problems = []
    if missing:
        problems.append(f"{len(missing)} tensors missing (e.g. {missing[0]})")
    if extra:
        problems.append(f"{len(extra)} unexpected tensors (e.g. {extra[0]})")
    if shapes:
        problems.append(f"{len(shapes)} of other shapes (e.g. {shapes[0]})")
    return "; ".join(problems)


def rng_state() -> dict[str, Any]:
    """Python and torch RNG states (torch's as uint8 tensors, Python's as JSON).

    ``cuda`` (one state per GPU) is there only once CUDA is in use in this process.
    """
    version, internal, gauss = random.getstate()
    state = {"torch": torch.get_rng_state(), "python": [version, list(internal), gauss]}
    if torch.cuda.is_available() and torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore ``rng_state()``. CUDA states are restored for the GPUs this machine has; a
    state without them (written on a CPU) leaves the CUDA generators as they are."""
    torch.set_rng_state(state["torch"])
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    if state.get("cuda") and torch.cuda.is_available():
        for index, cuda_state in enumerate(state["cuda"][: torch.cuda.device_count()]):
            torch.cuda.set_rng_state(cuda_state.cpu(), index)


def _flatten_optimizer(
    opt_state: dict[str, Any],
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, dict[str, Any]] = {}
    for idx, per_param in opt_state["state"].items():
        for name, value in per_param.items():
            if torch.is_tensor(value):
                tensors[f"{idx}.{name}"] = value.detach().contiguous().cpu()
            else:
                scalars.setdefault(str(idx), {})[name] = value
    return tensors, {"param_groups": opt_state["param_groups"], "scalars": scalars}


def _unflatten_optimizer(tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> dict[str, Any]:
    state: dict[int, dict[str, Any]] = {}
    for key, value in tensors.items():
        idx, name = key.split(".", 1)
        state.setdefault(int(idx), {})[name] = value
    for idx, values in meta["scalars"].items():
        state.setdefault(int(idx), {}).update(values)
    return {"state": state, "param_groups": meta["param_groups"]}


def save_training_state(
    last: str | os.PathLike[str],
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    state: dict[str, Any],
) -> Path:
    """Write the folder ``last`` (weights, optimizer, JSON state incl. RNG) atomically.

    The three files go into a fresh temporary sibling folder that then replaces ``last``
    (the old one is removed only after the new one is complete).
    """
    last = Path(last)
    run_dir = last.parent
    run_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=run_dir, prefix=f".{last.name}."))
    try:
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes it private (0700)
        save_model_weights(model, tmp / "model.safetensors")
        opt_tensors, opt_meta = _flatten_optimizer(optimizer.state_dict())
        rng = rng_state()
        opt_tensors["__rng_torch__"] = rng["torch"]
        for index, cuda_state in enumerate(rng.get("cuda", [])):
            opt_tensors[f"__rng_cuda_{index}__"] = cuda_state
        _atomic_save_tensors(opt_tensors, tmp / "optimizer.safetensors")
        payload = {**state, "optimizer": opt_meta, "rng_python": rng["python"]}
        atomic_write_text(tmp / "state.json", json.dumps(payload))
        old = run_dir / f".{last.name}.old"
        if last.exists():
            shutil.rmtree(old, ignore_errors=True)
            os.replace(last, old)
        os.replace(tmp, last)
        fsync_path(run_dir)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return last


def load_training_state(
    last: str | os.PathLike[str],
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    map_location: str | torch.device = "cpu",
) -> dict[str, Any]:
    """Restore weights, optimizer and RNG from the folder ``last``; returns the JSON state.
    Weights and optimizer tensors go to ``map_location`` (the model's device)."""
    last = Path(last)
    if not (last / "state.json").is_file():
        old = last.parent / f".{last.name}.old"  # killed between the two renames
        if (old / "state.json").is_file():
            last = old
        else:
            raise MissingFileError(f"no resumable checkpoint in {last}")
    try:
        state = json.loads((last / "state.json").read_text(encoding="utf-8"))
        if not isinstance(state, dict) or not {"step", "optimizer"} <= set(state):
            raise ValueError("not a checkpoint state")
    except (OSError, ValueError) as exc:
        raise RunError(f"{last / 'state.json'} is damaged ({exc})") from None
    load_model_weights(model, last / "model.safetensors", map_location=map_location)
    tensors = read_tensors(last / "optimizer.safetensors", map_location)
    torch_rng = tensors.pop("__rng_torch__").cpu()
    n_cuda = sum(key.startswith("__rng_cuda_") for key in tensors)
    cuda_rng = [tensors.pop(f"__rng_cuda_{i}__").cpu() for i in range(n_cuda)]
    try:
        optimizer.load_state_dict(_unflatten_optimizer(tensors, state.pop("optimizer")))
    except (KeyError, ValueError, RuntimeError) as exc:
        where = last / "optimizer.safetensors"
        raise RunError(f"{where} does not match the model's optimizer ({exc})") from None
    set_rng_state({"torch": torch_rng, "python": state.pop("rng_python"), "cuda": cuda_rng})
    return state

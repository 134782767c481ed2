"""What a run is: the one definition that train, ``--force``, export and the output guard use.

A folder is a **run** (a training run, or a model export of one) when it holds config.json
and one of

* weights of any format: ``model.safetensors``, ``model.int8.safetensors`` (int8 export),
  ``model.onnx`` (ONNX export);
* a checkpoint to resume from: ``last/state.json`` (or ``.last.old/state.json``, the
  previous ``last/`` while a new one is swapped in);
* the mark ``.unfinished``, which ``attnkit train`` writes before anything else of a new
  run and removes when it ends: a run killed before its first checkpoint keeps it.

A config.json alone is not a run (a copied config next to a thesis is the user's folder).
A run is **unfinished** when it carries the mark and neither weights nor a checkpoint:
attnkit started it, recorded so, and it saved nothing to use or continue. Only such a run
is cleared without ``--force``.

``RUN_ENTRIES`` names every entry a run consists of; clearing a run (``--force``, or a new
run replacing an unfinished one) removes those and nothing else, so a file of the user's
that sits in a run folder survives.

A leaf module: the standard library only.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = [
    "CHECKPOINTS",
    "CONFIG_FILE",
    "INT8_WEIGHTS",
    "LOCK_FILE",
    "ONNX_DATA",
    "ONNX_FILE",
    "RUN_ENTRIES",
    "TOKENIZER_FILE",
    "UNFINISHED_MARK",
    "WEIGHTS_FILE",
    "WEIGHT_FILES",
    "enclosing_run",
    "has_weights_or_checkpoint",
    "is_run",
    "is_unfinished",
]

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
TOKENIZER_FILE = "tokenizer.json"
INT8_WEIGHTS = "model.int8.safetensors"  # ``attnkit export --format attnkit --quantize int8``
ONNX_FILE = "model.onnx"  # ``attnkit export --format onnx``
ONNX_DATA = "model.onnx.data"  # its external tensors, for a large graph
UNFINISHED_MARK = ".unfinished"  # written by ``attnkit train`` first, removed at its end
LOCK_FILE = ".lock"  # held (flock) by the process training in the run

WEIGHT_FILES = (WEIGHTS_FILE, INT8_WEIGHTS, ONNX_FILE)
CHECKPOINTS = ("last", ".last.old")  # folders holding state.json (``--resume``)

# every entry a run (or an export) is made of, the lock aside: what clearing it removes
RUN_ENTRIES = (
    CONFIG_FILE,
    TOKENIZER_FILE,
    *WEIGHT_FILES,
    ONNX_DATA,
    *CHECKPOINTS,
    "metrics.jsonl",
    "metrics.csv",
    "tensorboard",
    "curves.png",
    "data",  # the tables of ``attnkit.train(..., data=DataFrame)``
    UNFINISHED_MARK,
)


def has_weights_or_checkpoint(folder: str | os.PathLike[str]) -> bool:
    """True if ``folder`` holds weights of any format or a checkpoint to resume from."""
    folder = Path(folder)
    return any((folder / name).is_file() for name in WEIGHT_FILES) or any(
        (folder / name / "state.json").is_file() for name in CHECKPOINTS
    )


def is_run(folder: str | os.PathLike[str]) -> bool:
    """True if ``folder`` is a run (see the module docstring): config.json with weights, a
    checkpoint or the unfinished mark; a config.json alone is not one."""
    folder = Path(folder)
    if not (folder / CONFIG_FILE).is_file():
        return is_unfinished(folder)  # killed between its mark and its config
    return has_weights_or_checkpoint(folder) or (folder / UNFINISHED_MARK).is_file()


def is_unfinished(folder: str | os.PathLike[str]) -> bool:
    """True if ``attnkit train`` started a run in ``folder`` (its mark is there) that saved
    neither weights nor a checkpoint: it may be cleared and started again."""
    folder = Path(folder)
    return (folder / UNFINISHED_MARK).is_file() and not has_weights_or_checkpoint(folder)


def enclosing_run(path: str | os.PathLike[str]) -> Path | None:
    """The run that ``path`` is, or lies in at any depth (``runs/cls/last/a/b``), if any:
    the nearest such folder among ``path`` and its ancestors (resolved), else None."""
    resolved = Path(os.path.realpath(path))
    for candidate in (resolved, *resolved.parents):
        if is_run(candidate):
            return candidate
    return None

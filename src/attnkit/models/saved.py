"""What a folder holding a saved model contains, and reading its config.json.

Two kinds of folders hold an attnkit model: a training run (``attnkit.runtime.run.RunDir``
writes it: config.json with ``task``, ``data``, ``tokenizer``, ``model`` and ``training``
sections) and a ``save_pretrained`` folder (config.json is the model's config alone). Both
keep the weights in model.safetensors and, where there is one, the tokenizer in
tokenizer.json; an export may hold int8 weights or an ONNX graph instead. The models read
these folders themselves (``from_pretrained``, ``model.init_from``), so the names live here,
below the run directory that writes them.

    raw = read_run_json("runs/nsmc")          # config.json, a first-format run upgraded
    raw["model"]                              # every size of the model (format 1 too)

Run directories written before the redesign (no ``"format"`` key in config.json) are read as
they are: ``read_run_json`` completes their ``model`` section with the sizes the code of that
time took from elsewhere (vocabulary, padding id, ``data.max_len``, number of labels). A run
of a newer format than ``RUN_FORMAT`` (written by a newer attnkit) is refused in one line
that names both versions.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from attnkit.core.config import short_repr
from attnkit.core.errors import RunError
from attnkit.core.run_layout import (  # the file names: one definition of a run
    CONFIG_FILE,
    INT8_WEIGHTS,
    ONNX_FILE,
    TOKENIZER_FILE,
    WEIGHTS_FILE,
)
from attnkit.core.version import __version__

__all__ = [
    "CONFIG_FILE",
    "INT8_WEIGHTS",
    "ONNX_FILE",
    "RUN_FORMAT",
    "RUN_SECTIONS",
    "TOKENIZER_FILE",
    "WEIGHTS_FILE",
    "is_training_run",
    "read_json",
    "read_run_json",
]

RUN_SECTIONS = ("task", "data", "tokenizer", "model", "training")  # a run's config.json
# the layout of a run's config.json this code writes and reads ("format"; 1: none, the first)
RUN_FORMAT = 2  # 2: the model section holds every size
# the model family each task of the first format trained (used to read those runs)
_LEGACY_FAMILY = {
    "classify": "classifier",
    "translate": "seq2seq",
    "chat": "seq2seq",
    "mlm": "masked_lm",
}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def read_json(path: str | Path) -> Any:
    """A JSON file's contents; damaged (bad JSON, bad UTF-8): a one-line ``RunError``."""
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:  # ValueError: bad JSON or bad UTF-8
        raise RunError(f"{path} is damaged ({_first_line(exc)})") from None


def is_training_run(directory: str | Path) -> bool:
    """True if ``directory`` holds a training run's config.json (not a bare model config)."""
    try:
        raw = json.loads((Path(directory) / CONFIG_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError, TypeError):
        return False
    return isinstance(raw, dict) and "task" in raw


def read_run_json(directory: str | Path) -> dict[str, Any]:
    """A run's config.json as a dict; a first-format run's ``model`` section is completed
    (see the module docstring) and ``format`` says which format it was written in. A
    missing or damaged file is a one-line ``RunError`` naming it."""
    directory = Path(directory)
    path = directory / CONFIG_FILE
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RunError(f"{directory} is not a run directory (no config.json)") from None
    except (OSError, ValueError) as exc:  # ValueError: bad JSON or bad UTF-8
        raise RunError(f"{path} is damaged ({_first_line(exc)})") from None
    if not isinstance(raw, dict):
        raise RunError(f"{path} must hold a JSON object, not {type(raw).__name__}")
    missing = [k for k in RUN_SECTIONS if k not in raw]
    if missing:
        raise RunError(f"{path} lacks {', '.join(missing)}: not an attnkit run")
    if "format" not in raw:
        return _upgrade_first_format(raw, directory)
    check_run_format(raw["format"], directory)
    return raw


def check_run_format(found: Any, directory: str | Path) -> None:
    """A one-line ``RunError`` unless ``found`` (config.json's ``format``) is a run format
    this code reads (1 .. ``RUN_FORMAT``): a newer one asks for a newer attnkit."""
    if isinstance(found, bool) or not isinstance(found, int) or found < 1:
        raise RunError(
            f"{Path(directory) / CONFIG_FILE}: format must be a run format 1..{RUN_FORMAT}, "
            f"got {short_repr(found)}"
        )
    if found > RUN_FORMAT:
        raise RunError(
            f"{directory} was written by a newer attnkit (run format {found}; this is "
            f"{__version__}, format {RUN_FORMAT}): upgrade attnkit"
        )


def _upgrade_first_format(raw: dict[str, Any], directory: Path) -> dict[str, Any]:
    """A first-format config.json in today's shape. Its model section was the flat list of
    every family's settings; the sizes the code of that time took from elsewhere are added
    here: the vocabulary (top-level ``vocab_size``), the padding id (the tokenizer's [PAD]),
    the positional table (``data.max_len``) and, for classifiers, the number of labels. The
    settings of other families stay; ``format: 1`` tells the config reader to ignore them."""
    model = dict(raw.get("model") or {})
    model.setdefault("model_type", _LEGACY_FAMILY.get(raw["task"], raw["task"]))
    if "vocab_size" in raw:
        model.setdefault("vocab_size", raw["vocab_size"])
    model.setdefault("pad_id", _pad_id(directory))
    model.setdefault("max_len", raw.get("data", {}).get("max_len", 128))
    if "labels" in raw:
        model.setdefault("num_classes", len(raw["labels"]))
    return {**raw, "model": model, "format": 1}


def _pad_id(directory: Path) -> int:
    """The [PAD] id in the run's tokenizer.json (0 in every tokenizer attnkit trains)."""
    try:
        text = (directory / TOKENIZER_FILE).read_text(encoding="utf-8")
        vocab = json.loads(text)["model"]["vocab"]
        return int(vocab["[PAD]"]) if isinstance(vocab, dict) else 0
    except (OSError, KeyError, TypeError, ValueError):
        return 0

"""``RunDir``: the only code that knows a run directory's layout.

    runs/NAME/
      config.json         the resolved recipe (task, data, tokenizer, model, training), the
                          model's full config (sizes from the data too) and what loading
                          needs (labels, temperature, ...)
      tokenizer.json      Hugging Face ``tokenizers`` format
      model.safetensors   best weights so far
      last/               latest weights + optimizer + state.json: what ``--resume`` reads
      metrics.jsonl       one JSON object per log / evaluation step
      metrics.csv         the same rows as a table (``training.report_to: csv``)
      tensorboard/        TensorBoard event files (``training.report_to: tensorboard``)
      curves.png          learning curves
      data/               the data it was trained on, where it came from memory
                          (``attnkit.train(..., data=DataFrame)``: attnkit.data.tables)
      .lock               held (flock) by the process training here; says who that is
      .unfinished         written first by a new training, removed when it ends

What makes a folder a run (and an unfinished one) is ``attnkit.core.run_layout``'s one
definition, which the output guard, ``--force`` and export use too; ``clear`` removes the
entries a run consists of (``RUN_ENTRIES``) and nothing else.

Every file is written to a temporary name and renamed into place (``attnkit.core.checkpoint``),
so a crash never leaves a half-written file.

Run directories written before the redesign (no ``"format"`` key in config.json) are read
as they are: ``read_config`` completes their ``model`` section with the sizes the code of
that time took from elsewhere (vocabulary, padding id, ``data.max_len``, number of labels).
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import shutil
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attnkit.core.checkpoint import (
    atomic_write_text,
    load_model_weights,
    load_training_state,
    save_model_weights,
    save_training_state,
)
from attnkit.core.errors import RunError
from attnkit.core.run_layout import LOCK_FILE, RUN_ENTRIES, UNFINISHED_MARK
from attnkit.core.run_layout import is_run as _is_run
from attnkit.core.run_layout import is_unfinished as _is_unfinished
from attnkit.data.tokenization import Tokenizer
from attnkit.models.saved import (
    CONFIG_FILE,
    RUN_FORMAT,
    TOKENIZER_FILE,
    WEIGHTS_FILE,
    read_run_json,
)

if TYPE_CHECKING:
    import torch
    from torch import nn

__all__ = ["FORMAT", "RunDir", "RunLock", "read_jsonl"]

FORMAT = RUN_FORMAT  # config.json layout version; 1 = before the model section held every size


class RunDir:
    """A training run's directory (see the module docstring for its layout)."""

    CONFIG = CONFIG_FILE
    TOKENIZER = TOKENIZER_FILE
    WEIGHTS = WEIGHTS_FILE
    LAST = "last"
    METRICS = "metrics.jsonl"
    METRICS_CSV = "metrics.csv"
    TENSORBOARD = "tensorboard"
    CURVES = "curves.png"
    LOCK = LOCK_FILE
    UNFINISHED = UNFINISHED_MARK

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    def __str__(self) -> str:
        return str(self.path)

    # ------------------------------------------------------------------ paths
    @property
    def config_path(self) -> Path:
        return self.path / self.CONFIG

    @property
    def tokenizer_path(self) -> Path:
        return self.path / self.TOKENIZER

    @property
    def weights_path(self) -> Path:
        return self.path / self.WEIGHTS

    @property
    def last_path(self) -> Path:
        return self.path / self.LAST

    @property
    def metrics_path(self) -> Path:
        return self.path / self.METRICS

    @property
    def metrics_csv_path(self) -> Path:
        return self.path / self.METRICS_CSV

    @property
    def tensorboard_path(self) -> Path:
        return self.path / self.TENSORBOARD

    @property
    def curves_path(self) -> Path:
        return self.path / self.CURVES

    # ------------------------------------------------------------------ state
    def has_config(self) -> bool:
        """True if config.json is here (a run, or a bare config: see ``is_run``)."""
        return self.config_path.is_file()

    def is_run(self) -> bool:
        """True if this folder is a run: config.json with weights of any format, a
        checkpoint, or the unfinished mark (``attnkit.core.run_layout``)."""
        return _is_run(self.path)

    def has_weights(self) -> bool:
        """True once training has saved weights (after its first evaluation)."""
        return self.weights_path.is_file()

    def has_checkpoint(self) -> bool:
        """True if ``--resume`` has a checkpoint to continue from."""
        return any((self.path / d / "state.json").is_file() for d in (self.LAST, ".last.old"))

    def is_empty(self) -> bool:
        """True if there is nothing here but (maybe) the lock file."""
        return not self.path.exists() or all(p.name == self.LOCK for p in self.path.iterdir())

    def is_unfinished(self) -> bool:
        """A run that attnkit started (its mark is here) and that saved nothing to continue
        from or to use (killed or failed before its first checkpoint): it may be started
        again in its place."""
        return _is_unfinished(self.path)

    def mark_unfinished(self) -> None:
        """Record that a new training starts here (before any other file of it)."""
        atomic_write_text(
            self.path / self.UNFINISHED,
            f"started by attnkit train, pid {os.getpid()}, "
            f"{datetime.datetime.now().isoformat(timespec='seconds')}\n",
        )

    def mark_finished(self) -> None:
        """Training ended with something to keep: the run is no longer unfinished."""
        (self.path / self.UNFINISHED).unlink(missing_ok=True)

    def create(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)

    def clear(self) -> None:
        """Remove the entries a run consists of (``RUN_ENTRIES``: config, tokenizer,
        weights of every format, last/, metrics, curves, data/, the unfinished mark), and
        nothing else: a file of the user's in the folder stays (as does the lock)."""
        for name in RUN_ENTRIES:
            entry = self.path / name
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            elif os.path.lexists(entry):
                entry.unlink()

    def lock(self) -> RunLock:
        """An exclusive lock on this run directory (``with run.lock(): ...``): a second
        training or ``--resume`` of the same folder is refused while it is held."""
        return RunLock(self)

    # ------------------------------------------------------------------ config.json
    def read_config(self) -> dict[str, Any]:
        """config.json as a dict; a first-format run's ``model`` section is completed (see
        the module docstring) and ``format`` says which format it was written in. A
        damaged file is a one-line ``RunError`` naming it (``attnkit.models.saved``, which
        the models read runs with too)."""
        return read_run_json(self.path)

    def write_config(self, payload: dict[str, Any]) -> None:
        """Write config.json (atomically), stamped with the current format."""
        payload = {"format": FORMAT, **{k: v for k, v in payload.items() if k != "format"}}
        atomic_write_text(
            self.config_path, json.dumps(payload, indent=2, ensure_ascii=False) + "\n"
        )

    def update_config(self, **values: Any) -> None:
        """Set top-level config.json entries (e.g. a fitted temperature), atomically, keeping
        the file's format as it is."""
        raw = json.loads(self.config_path.read_text(encoding="utf-8"))
        raw.update(values)
        atomic_write_text(self.config_path, json.dumps(raw, indent=2, ensure_ascii=False) + "\n")

    # ------------------------------------------------------------------ tokenizer, weights
    def save_tokenizer(self, tokenizer: Tokenizer) -> None:
        tokenizer.save(self.tokenizer_path)

    def load_tokenizer(self) -> Tokenizer:
        return Tokenizer.load(self.tokenizer_path)

    def save_weights(self, model: nn.Module) -> None:
        save_model_weights(model, self.weights_path)

    def load_weights(self, model: nn.Module, map_location: str | torch.device = "cpu") -> None:
        load_model_weights(model, self.weights_path, map_location=map_location)

    # ------------------------------------------------------------------ last/ (resume)
    def save_checkpoint(self, model: nn.Module, optimizer: Any, state: dict[str, Any]) -> None:
        """Write last/ (weights, optimizer, state.json with RNG) atomically."""
        save_training_state(self.last_path, model, optimizer, state)

    def load_checkpoint(
        self, model: nn.Module, optimizer: Any, map_location: str | torch.device = "cpu"
    ) -> dict[str, Any]:
        """Restore weights, optimizer and RNG from last/; returns its JSON state."""
        return load_training_state(self.last_path, model, optimizer, map_location=map_location)

    # ------------------------------------------------------------------ metrics.jsonl
    def append_metrics(self, row: dict[str, Any]) -> None:
        with self.metrics_path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")

    def read_metrics(self) -> list[dict[str, Any]]:
        """Every complete row of metrics.jsonl (a line cut by a kill is skipped)."""
        return read_jsonl(self.metrics_path) if self.metrics_path.is_file() else []

    def keep_metrics_until(self, step: int) -> None:
        """Drop the rows logged after ``step`` (a resumed run writes them again)."""
        kept = [r for r in self.read_metrics() if r.get("step", 0) <= step]
        atomic_write_text(self.metrics_path, "".join(json.dumps(r) + "\n" for r in kept))

    def clear_metrics(self) -> None:
        self.metrics_path.unlink(missing_ok=True)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a .jsonl file, one per line; a line cut short (by a kill) or
    that is not an object is skipped."""
    rows = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            row = json.loads(line)
            if isinstance(row, dict):
                rows.append(row)
    return rows


class RunLock:
    """An exclusive, advisory lock on a run directory (``flock`` on its ``.lock`` file),
    held for a whole training: two processes never write into one run. The lock file says
    who holds it (pid, host, start time, command), for the error the second one gets. The
    operating system drops the lock when the process ends, however it ends. A folder this
    lock created and that holds nothing else when it is released is removed again.
    Where ``fcntl`` does not exist (Windows) the lock is a no-op."""

    def __init__(self, run: RunDir) -> None:
        self.run = run
        self.path = run.path / RunDir.LOCK
        self._fd: int | None = None
        self._created = False

    def __enter__(self) -> RunLock:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX
            return self
        self._created = not self.run.path.exists()
        self.run.create()
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 500).decode("utf-8", "replace").strip() or "another process"
            os.close(fd)
            raise RunError(
                f"{self.run} is in use by {holder}; wait for it to finish or choose another --out"
            ) from None
        since = datetime.datetime.now().isoformat(timespec="seconds")
        command = " ".join(sys.argv[:3])[:120]
        self._fd = fd
        try:  # (a full disk fails here: the lock and a folder made for it go again)
            os.ftruncate(fd, 0)
            os.write(
                fd,
                f"pid {os.getpid()} on {socket.gethostname()} since {since} ({command})".encode(),
            )
        except OSError as exc:
            self.__exit__(None, None, None)
            raise OSError(exc.errno, exc.strerror, str(self.path)) from None
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is None:
            return
        if self._created and self.run.is_empty():  # nothing was written: leave no trace
            self.path.unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                self.run.path.rmdir()
        os.close(self._fd)  # closing the descriptor releases the flock
        self._fd = None

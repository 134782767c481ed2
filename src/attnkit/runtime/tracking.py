"""The built-in trackers of ``training.report_to``: callbacks that copy metrics.jsonl.

    csv          RUN/metrics.csv: one row per metrics.jsonl row, the columns the union of
                 their keys (in order of first appearance; an empty cell where a row lacks
                 one), for a spreadsheet or pandas
    tensorboard  RUN/tensorboard/: event files of every number of every row, tagged
                 ``train/loss``, ``train/lr``, ``val/accuracy``, ... against the step
                 (``tensorboard --logdir RUN``); needs ``pip install "attnkit[tensorboard]"``

Both follow ``--resume``: the CSV is rewritten from metrics.jsonl (whose rows after the
checkpoint were dropped) and TensorBoard purges the events after the checkpoint's step; a
fresh run starts them over. metrics.csv is always complete: a row whose keys are all known
is one appended line (a single write), a row with a new key rewrites the file atomically
with the wider header.
"""

from __future__ import annotations

import csv
import io
import math
import os
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from attnkit.core.checkpoint import atomic_write_text
from attnkit.core.config import ConfigError
from attnkit.core.extras import require
from attnkit.runtime.callbacks import Callback
from attnkit.runtime.run import RunDir
from attnkit.runtime.training_config import REPORT_TO

__all__ = ["CsvTracker", "TensorBoardTracker", "check_trackers", "make_trackers", "scalar_tag"]


def check_trackers(names: Iterable[str]) -> None:
    """Raise before anything runs: an unknown tracker is a ``ConfigError``, a missing
    optional package a ``MissingExtraError`` naming its ``pip install``."""
    for name in names:
        if name not in REPORT_TO:
            raise ConfigError(
                f"training.report_to: unknown tracker {name!r} (valid: {', '.join(REPORT_TO)}; "
                "others plug in as callbacks)"
            )
        if name == "tensorboard":
            _summary_writer()


def make_trackers(names: Sequence[str], run: RunDir) -> list[Callback]:
    """The trackers ``names`` (``TrainingConfig.trackers``) writing into ``run``."""
    check_trackers(names)
    kinds = {"csv": CsvTracker, "tensorboard": TensorBoardTracker}
    return [kinds[name](run) for name in dict.fromkeys(names)]


def _summary_writer() -> type:
    module = require("torch.utils.tensorboard", "tensorboard", "training.report_to: tensorboard")
    return module.SummaryWriter


class CsvTracker(Callback):
    """RUN/metrics.csv, a copy of metrics.jsonl (see the module docstring)."""

    def __init__(self, run: RunDir) -> None:
        self.run = run
        self.path = run.metrics_csv_path
        self.columns: list[str] = []

    def on_start(self, run_dir: Path, step: int) -> None:
        rows = self.run.read_metrics()  # a fresh run: none; a resumed one: up to its step
        self.columns = _union(rows)
        if rows:
            self._rewrite(rows)
        else:
            self.path.unlink(missing_ok=True)

    def on_log(self, row: dict[str, Any]) -> None:
        new = [k for k in row if k not in self.columns]
        if new or not self.path.is_file():
            self.columns += new
            self._rewrite(self.run.read_metrics())  # (the row is in metrics.jsonl already)
            return
        data = self._lines([row]).encode("utf-8")
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, data)  # one write: the line is there whole or not at all
        finally:
            os.close(fd)

    def _rewrite(self, rows: list[dict[str, Any]]) -> None:
        atomic_write_text(self.path, self._lines(rows, header=True))

    def _lines(self, rows: list[dict[str, Any]], header: bool = False) -> str:
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, self.columns, restval="", extrasaction="ignore")
        if header:
            writer.writeheader()
        writer.writerows(rows)
        return buffer.getvalue()


def _union(rows: Iterable[dict[str, Any]]) -> list[str]:
    """Every key of ``rows``, in order of first appearance."""
    return list(dict.fromkeys(k for row in rows for k in row))


def scalar_tag(key: str) -> str:
    """The TensorBoard tag of a metrics.jsonl key: ``val_accuracy`` -> ``val/accuracy``,
    ``train_loss`` -> ``train/loss``, ``lr`` -> ``train/lr``."""
    for prefix in ("val", "train"):
        if key.startswith(prefix + "_"):
            return f"{prefix}/{key[len(prefix) + 1 :]}"
    return f"train/{key}"


class TensorBoardTracker(Callback):
    """RUN/tensorboard/ event files (see the module docstring)."""

    FOLDER = "tensorboard"

    def __init__(self, run: RunDir) -> None:
        self.writer_class = _summary_writer()  # missing tensorboard: said before training
        self.folder = run.tensorboard_path
        self.writer: Any = None

    def on_start(self, run_dir: Path, step: int) -> None:
        if step == 0:  # a fresh run: no events of an earlier one
            shutil.rmtree(self.folder, ignore_errors=True)
        # resumed: TensorBoard drops the earlier events from step + 1 on (logged again now)
        self.writer = self.writer_class(str(self.folder), purge_step=step + 1 if step else None)

    def on_log(self, row: dict[str, Any]) -> None:
        if self.writer is None:
            return
        step = int(row.get("step", 0))
        for key, value in row.items():
            if key in ("step", "epoch") or isinstance(value, bool):
                continue
            if isinstance(value, (int, float)) and math.isfinite(value):
                self.writer.add_scalar(scalar_tag(key), value, global_step=step)
        self.writer.flush()  # rows are seconds apart: each is on disk at once

    def on_end(self, result: Any) -> None:
        self.close()

    def close(self) -> None:
        """Close the event file (also when training stopped with an error)."""
        if self.writer is not None:
            self.writer.close()
            self.writer = None

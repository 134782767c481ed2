"""Callbacks: what the Trainer tells the code around it while it trains.

``attnkit.train(recipe, callbacks=[...])`` and ``Trainer(..., callbacks=[...])`` take any
objects with some of these methods (duck typing; ``Callback`` is a base class whose methods
do nothing, to subclass and override only what is needed)::

    on_start(run_dir, step)   training begins (step 0, or the step a resumed run continues from)
    on_log(row)               each row written to metrics.jsonl (training and evaluation rows)
    on_eval(metrics)          each evaluation: its metrics.jsonl row (step, epoch, val_*)
    on_best(run_dir, metrics) new best weights were saved in run_dir (metrics: that evaluation)
    on_end(result)            training finished (a ``TrainResult``)

Plugging in a tracker, e.g. Weights & Biases::

    class WandbCallback(attnkit.Callback):
        def on_log(self, row):
            wandb.log(row, step=row["step"])

Callbacks run in the order given, on the process that writes the run (rank 0 under
torchrun), after the row is in metrics.jsonl. An exception in a callback stops training and
propagates, as any error in the user's code does: a tracker's bug is never hidden (the
last checkpoint stays usable for ``--resume``). The rows are copies: a callback may keep or
change them. The built-in trackers of ``training.report_to`` (``attnkit.runtime.tracking``)
are callbacks too, and run before the user's.

A leaf of the runtime layer: the standard library only (``import attnkit`` stays light).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["CALLBACK_EVENTS", "Callback"]

CALLBACK_EVENTS = ("on_start", "on_log", "on_eval", "on_best", "on_end")


class Callback:
    """Base class of training callbacks: every method does nothing (see the module
    docstring for when each is called)."""

    def on_start(self, run_dir: Path, step: int) -> None:
        """Training begins at optimizer step ``step`` (0, or where a resumed run goes on)."""

    def on_log(self, row: dict[str, Any]) -> None:
        """A row was written to metrics.jsonl (training: train_loss, lr, tokens_per_s, ...;
        evaluation: val_*), with its ``step`` and ``epoch``."""

    def on_eval(self, metrics: dict[str, Any]) -> None:
        """An evaluation's row: ``step``, ``epoch`` and the task's ``val_*`` metrics."""

    def on_best(self, run_dir: Path, metrics: dict[str, Any]) -> None:
        """The best weights so far were just saved (``run_dir/model.safetensors``)."""

    def on_end(self, result: Any) -> None:
        """Training is over; ``result`` is the ``TrainResult`` that ``fit`` returns."""

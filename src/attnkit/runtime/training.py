"""The one Trainer, shared by every task.

AdamW (no weight decay on biases and norms), warmup + linear / cosine decay or the paper's
Noam schedule (scaled by the model's ``config.hidden_width``), gradient clipping and
accumulation, evaluation every epoch or every N steps, early stopping, the best weights by
the task's metric, a progress bar (loss, tokens/s, lr, ETA), ``metrics.jsonl`` and
``curves.png``, and exact resume from ``last/`` (weights, optimizer, sampler position, RNG).

What it says goes through ``logging`` (logger ``attnkit.runtime.training``: the evaluation
lines at INFO, at DEBUG with ``training.progress: false``), and the progress bar shows only
where INFO is shown (``attnkit.core.logs``): a live ``tqdm.auto`` bar in Jupyter / Colab, a
redrawn bar on a terminal, plain lines elsewhere (``LineProgress``). Callbacks
(``attnkit.runtime.callbacks``) and the trackers of ``training.report_to``
(``attnkit.runtime.tracking``) receive every metrics row.

Devices (``training.device``): auto | cpu | cuda | cuda:N | mps, auto = CUDA if present, else
MPS, else CPU. The model moves there once; every batch is copied there (on CUDA from pinned
memory, without blocking). Mixed precision (``attnkit.runtime.device.resolve_precision``): ``bf16``
auto (the default) autocasts to bfloat16 where the device computes it natively (CUDA >= 8.0,
a CPU with avx512_bf16/amx_bf16) and trains in fp32 elsewhere; ``true`` forces it, ``false``
turns it off. ``fp16`` autocasts to float16 with a GradScaler (CUDA only); MPS trains in fp32. ``compile``
runs the training forward through ``torch.compile``; evaluation and saving use the plain
module, so weight names never change. Checkpoints load on whichever device resumes them.

Several processes (``torchrun``, see ``attnkit.runtime.distributed``): every process draws the same
batches and trains on its share of each (``DistributedDataParallel`` averages the
gradients, once per optimizer step with ``grad_accum``), so the global batch is the recipe's
on any number of processes. Rank 0 alone evaluates and writes the run directory; the
logged training loss and tokens/s are over all processes.

A task (see ``attnkit.tasks``) tells the Trainer how to batch, what the loss is and how to
evaluate; the Trainer knows nothing about data formats or models.
"""

from __future__ import annotations

import contextlib
import logging
import math
import random
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm
from tqdm.auto import tqdm as auto_tqdm

from attnkit.core.errors import TrainingError
from attnkit.core.extras import MissingExtraError, needs
from attnkit.core.logs import shows_info, verbosity
from attnkit.data.batching import BucketBatchSampler
from attnkit.runtime import distributed, viz
from attnkit.runtime.adamw import AdamW
from attnkit.runtime.callbacks import Callback
from attnkit.runtime.device import (
    Precision,
    apply_threads,
    cpu_has_native_bf16,
    resolve_device,
    resolve_precision,
    threads_kept,
    to_device,
)
from attnkit.runtime.run import RunDir
from attnkit.runtime.tracking import make_trackers
from attnkit.runtime.training_config import TrainingConfig

__all__ = [
    "Objective",
    "Trainer",
    "TrainResult",
    "cpu_has_native_bf16",
    "lr_multiplier",
    "training_precision",
    "make_adamw",
    "autocast_dtype",
    "in_notebook",
    "progress_kind",
    "resolve_device",
    "schedule_width",
    "to_device",
]

NOAM_DEFAULT_WIDTH = 512  # d_model of the paper's base model, for models without a config
# fp16: the GradScaler skips a step whose gradients overflowed and halves its scale, which
# is normal now and then; this many skipped steps in a row (a scale 2^25 times smaller) is
# divergence
FP16_MAX_SKIPPED = 25

logger = logging.getLogger(__name__)


class Objective(Protocol):
    """What the Trainer needs from a task: its objective (how to batch, the loss, how to
    evaluate, the metric)."""

    metric: str  # name of the model-selection metric in evaluate()'s result
    greater_is_better: bool
    # optional: ``shown``, names of other evaluate() results printed on each evaluation's line

    def collate(self, items: Sequence[Any]) -> dict[str, Tensor]: ...

    def loss(self, model: nn.Module, batch: dict[str, Tensor]) -> tuple[Tensor, int]:
        """(mean loss over the batch, number of real tokens in it)."""
        ...

    def evaluate(self, model: nn.Module, batches: Iterable[dict[str, Tensor]]) -> dict[str, Any]:
        """Metrics over a dataset; must contain ``self.metric`` and ``loss``."""
        ...


def lr_multiplier(schedule: str, step: int, warmup: int, total: int, d_model: int = 512) -> float:
    """Learning-rate factor at optimizer step ``step`` (1-based).

    constant: 1 after linear warmup. linear / cosine: warmup, then decay to 0 at ``total``.
    noam (Vaswani et al.): d_model^-0.5 * min(step^-0.5, step * warmup^-1.5); the configured
    ``lr`` multiplies it (the paper's lr = 1 corresponds to ``lr: 1.0``).
    """
    step = max(step, 1)
    if schedule == "noam":
        return d_model**-0.5 * min(step**-0.5, step * max(warmup, 1) ** -1.5)
    if warmup and step <= warmup:
        return step / warmup
    if schedule == "constant":
        return 1.0
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    if schedule == "linear":
        return 1.0 - progress
    if schedule == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * progress))
    raise ValueError(f"unknown schedule {schedule!r}")


@dataclass
class TrainResult:
    run_dir: Path
    step: int
    best_metric: float | None
    best_step: int | None
    last_metrics: dict[str, Any]
    stopped_early: bool
    train_seconds: float


def _param_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """Weight decay on matrices only (not on biases, LayerNorm or 1-D parameters)."""
    decay, no_decay = [], []
    for p in model.parameters():
        if p.requires_grad:
            (decay if p.dim() >= 2 else no_decay).append(p)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


def make_adamw(model: nn.Module, config: TrainingConfig) -> torch.optim.AdamW:
    """AdamW over ``_param_groups``, the fused implementation where PyTorch has one
    (``attnkit.runtime.adamw.AdamW``: torch's, without the 0.8 s import of torch._dynamo).

    On the CPU, PyTorch's default AdamW updates each tensor in a Python loop; the fused
    kernel does the same arithmetic in one pass and is ~7x faster (3.7 vs 25.6 ms per step
    for the 4.1M-parameter NSMC classifier, whose fine-tuning step went from 0.118 to
    0.104 s in full runs).
    """
    groups = _param_groups(model, config.weight_decay)
    kwargs = {"lr": config.lr, "betas": tuple(config.betas)}
    try:
        return AdamW(groups, fused=True, **kwargs)
    except (RuntimeError, ValueError):  # a dtype/device without a fused kernel
        return AdamW(groups, foreach=True, **kwargs)


def schedule_width(model: nn.Module) -> int:
    """The d_model the Noam schedule scales by: ``model.config.hidden_width``, else 512."""
    width = getattr(getattr(model, "config", None), "hidden_width", None)
    return NOAM_DEFAULT_WIDTH if width is None else int(width)


def training_precision(config: TrainingConfig, device: torch.device) -> Precision:
    """What ``training.bf16`` / ``training.fp16`` mean on ``device`` (see
    ``attnkit.runtime.device.resolve_precision``); raises ConfigError for what it cannot run."""
    return resolve_precision(config.bf16, device, fp16=config.fp16)


def autocast_dtype(config: TrainingConfig, device: torch.device) -> torch.dtype | None:
    """The autocast dtype for ``config.bf16`` / ``config.fp16`` on ``device`` (None: fp32)."""
    return training_precision(config, device).dtype


class ObjectiveLoss(nn.Module):
    """``task.loss(model, batch)`` as a module's forward, so that ``DistributedDataParallel``
    sees every use of the weights, whichever of the model's methods the task calls."""

    def __init__(self, model: nn.Module, objective: Objective) -> None:
        super().__init__()
        self.model, self.objective = model, objective

    def forward(self, batch: dict[str, Tensor]) -> tuple[Tensor, int]:
        return self.objective.loss(self.model, batch)


@dataclass
class _State:
    """What ``fit`` changes as it goes (the first five are saved in last/state.json)."""

    step: int = 0  # optimizer steps taken
    epoch: int = 0
    best: float | None = None  # best value of task.metric so far
    best_step: int | None = None
    bad_evals: int = 0  # evaluations since the best one
    stopped_early: bool = False
    last_metrics: dict[str, Any] = field(default_factory=dict)  # the latest validation row
    ema: float | None = None  # smoothed training loss, for the progress bar
    start: float = 0.0  # perf_counter() when fit started
    window_start: float = 0.0  # tokens/s is measured since the last metrics row
    window_tokens: int = 0
    step_tokens: int = 0  # this process's tokens in the current optimizer step
    skipped: int = 0  # fp16: optimizer steps in a row the GradScaler skipped (overflow)


class Trainer:
    """Train ``model`` on ``train_items`` for ``task``; write everything into ``run``.

    train_items / val_items: sequences of task items (e.g. (token ids, label) pairs);
    lengths / val_lengths: token count per item (for length-bucketed batching).
    on_best: called with the run directory each time the best weights are saved.
    callbacks: objects with any of ``on_start``, ``on_log``, ``on_eval``, ``on_best``,
    ``on_end`` (``attnkit.runtime.callbacks``), called after the trackers of
    ``training.report_to``; an exception in one propagates.
    """

    def __init__(
        self,
        model: nn.Module,
        objective: Objective,
        train_items: Sequence[Any],
        lengths: Sequence[int],
        val_items: Sequence[Any] | None,
        val_lengths: Sequence[int] | None,
        config: TrainingConfig,
        run: RunDir | str | Path,
        on_best: Callable[[Path], None] | None = None,
        callbacks: Sequence[Callback | object] = (),
    ) -> None:
        self.objective, self.cfg, self.on_best = objective, config, on_best
        self.train_items, self.val_items = train_items, val_items
        self.run = run if isinstance(run, RunDir) else RunDir(run)
        # the trackers first (a missing tensorboard fails here, before any work)
        self.trackers = make_trackers(config.trackers, self.run)
        self.callbacks: list[Callback | object] = [*self.trackers, *callbacks]
        self.where, self.device = distributed.setup(resolve_device(config.device))
        self.precision = training_precision(config, self.device)  # api.train logs it
        self.autocast_dtype = self.precision.dtype
        # self.model: saved, loaded, evaluated, optimized; self.train_model: the training
        # forward; self.train_loss: task.loss on it (under torchrun: in DDP, which averages
        # the gradients over the processes)
        self.model = model.to(self.device)
        self.train_model = torch.compile(self.model) if config.compile else self.model
        self.train_loss: nn.Module = ObjectiveLoss(self.train_model, objective)
        if self.where.distributed:
            self.train_loss = DistributedDataParallel(
                self.train_loss,
                device_ids=[self.device] if self.device.type == "cuda" else None,
                find_unused_parameters=True,  # e.g. a pooler that an MLM-only loss never uses
            )
        self.optimizer = make_adamw(self.model, config)
        self.scaler = torch.amp.GradScaler("cuda") if config.fp16 else None
        self.width = schedule_width(self.model)

        self.sampler = BucketBatchSampler(
            lengths,
            batch_size=None if config.max_tokens else config.batch_size,
            max_tokens=config.max_tokens,
            seed=config.seed,
        )
        self.val_batches = (
            list(BucketBatchSampler(val_lengths, batch_size=2 * config.batch_size, shuffle=False))
            if val_items
            else []
        )
        self.steps_per_epoch = math.ceil(len(self.sampler) / config.grad_accum)
        self.total_steps = config.max_steps or config.epochs * self.steps_per_epoch
        self.warmup = (
            config.warmup_steps
            if config.warmup_steps is not None
            else int(config.warmup_ratio * self.total_steps)
        )
        self._bar: tqdm | LineProgress | None = None

    # ------------------------------------------------------------------ the loop
    def fit(self, resume: bool = False) -> TrainResult:
        """Train for ``max_steps`` (else ``epochs``) or until early stopping.

        resume: continue from last/ exactly where the checkpoint left off; otherwise start
        over (an old metrics.jsonl is removed).

        Runs inside ``attnkit.core.logs.verbosity``: where nothing else decides (no logging
        configured, the ``attnkit`` level unset) its lines and bar are shown. torch's
        intra-op threads (``training.num_threads``) are set for training only: the caller's
        count is put back afterwards (a notebook's torch is not left on 1 thread).
        """
        with threads_kept(), verbosity():
            return self._fit(resume)

    def _fit(self, resume: bool) -> TrainResult:
        cfg = self.cfg
        if self.where.is_main:
            self.run.create()
        apply_threads(cfg.num_threads)  # None: the cores this process may use
        # other dropout masks on each process (the batches come from the sampler's own seed)
        torch.manual_seed(cfg.seed + self.where.rank)
        random.seed(cfg.seed + self.where.rank)
        s = self._restore() if resume else self._start()
        try:
            self._callback("on_start", self.run.path, s.step)
            self._bar = self._progress_bar(s.step)
            self.model.train()
            s.start = s.window_start = time.perf_counter()
            self._curves_drawn_at = s.start  # the first figure after curves_every_s
            done = s.step >= self.total_steps
            try:
                while not done:
                    done = self._train_epoch(s)
            finally:  # also on Ctrl-C: the bar ends before the CLI's one line, not after it
                self._bar.close()
            if s.best is None and self.where.is_main:  # no validation data: the last weights
                if not self._weights_finite():
                    self._diverged(
                        s.step, self._current_lr(), "some weights are not finite numbers"
                    )
                self.run.save_weights(self.model)
            self._plot(final=True)
            distributed.barrier()  # the run directory is complete before any process returns
            result = TrainResult(
                run_dir=self.run.path,
                step=s.step,
                best_metric=s.best,
                best_step=s.best_step,
                last_metrics=s.last_metrics,
                stopped_early=s.stopped_early,
                train_seconds=time.perf_counter() - s.start,
            )
            self._callback("on_end", result)
            return result
        finally:  # the trackers' files are closed however training ends
            for tracker in self.trackers:
                close = getattr(tracker, "close", None)
                if close is not None:
                    close()

    def _start(self) -> _State:
        """A fresh run."""
        if self.where.is_main:
            self.run.clear_metrics()
        return _State()

    def _restore(self) -> _State:
        """Weights, optimizer, RNG, sampler and counters from last/, onto this device; the
        metrics rows logged after that checkpoint are dropped (they will be logged again)."""
        saved = self.run.load_checkpoint(self.model, self.optimizer, map_location=self.device)
        self.sampler.load_state_dict(saved["sampler"])
        if self.scaler is not None and "grad_scaler" in saved:
            self.scaler.load_state_dict(saved["grad_scaler"])
        s = _State(
            step=saved["step"],
            epoch=saved["epoch"],
            best=saved["best"],
            best_step=saved["best_step"],
            bad_evals=saved["bad_evals"],
        )
        if self.sampler.position >= len(self.sampler):
            # saved after the last step of an epoch that also ended training (max_steps):
            # go on with the next epoch, as a run that had not stopped there does
            s.epoch += 1
            self.sampler.set_epoch(s.epoch)
        if self.where.is_main:
            self.run.keep_metrics_until(s.step)
        distributed.barrier()  # no process writes before every process has read last/
        return s

    def _train_epoch(self, s: _State) -> bool:
        """The rest of epoch ``s.epoch``: one optimizer step per ``grad_accum`` micro-batches,
        then logging, evaluation and checkpoints as configured. True when training is over."""
        cfg = self.cfg
        self.sampler.set_epoch(s.epoch)
        batches = iter(self.sampler)
        remaining = len(self.sampler) - self.sampler.position  # micro-batches left
        micro, accum_loss = 0, 0.0
        self.optimizer.zero_grad(set_to_none=True)
        for i, indices in enumerate(batches):
            # the last accumulation group of an epoch may be shorter
            group = min(cfg.grad_accum, remaining - (i - micro))
            accum_loss += self._backward(s, indices, group, last=micro + 1 == group)
            micro += 1
            if micro < group:
                continue
            micro = 0
            lr = self._step(s, accum_loss)
            if self.where.distributed:  # the mean loss and all tokens over the processes
                total, tokens = distributed.all_sum([accum_loss, s.step_tokens], self.device)
                accum_loss, s.step_tokens = total / self.where.world_size, int(tokens)
            s.window_tokens += s.step_tokens
            s.step_tokens = 0
            self._log_train(s, accum_loss, lr)
            accum_loss = 0.0

            end_of_epoch = self.sampler.position >= len(self.sampler)
            done = s.step >= self.total_steps
            want_eval = (
                (cfg.eval_every and s.step % cfg.eval_every == 0)
                or (not cfg.eval_every and end_of_epoch)
                or done
            )
            if want_eval and self.val_items:
                # rank 0 evaluates; every process follows its early-stopping decision
                stop = self._evaluate_and_select(s) if self.where.is_main else None
                s.stopped_early = bool(distributed.broadcast_object(stop))
                done = done or s.stopped_early
            if end_of_epoch and not done:
                s.epoch += 1
                self.sampler.set_epoch(s.epoch)
            if want_eval or (cfg.save_every and s.step % cfg.save_every == 0) or done:
                self._checkpoint(s)
            if done or end_of_epoch:
                return done
        return False

    def _backward(self, s: _State, indices: list[int], group: int, last: bool = True) -> float:
        """Forward and backward of one micro-batch (this process's share of it), its loss
        divided by ``group`` (the micro-batches in this optimizer step); returns that share
        of the step's loss. ``last``: the step's last micro-batch, whose backward pass
        averages the gradients over the processes (the others skip that)."""
        mine = distributed.shard(indices, self.where)
        batch = to_device(self.objective.collate([self.train_items[j] for j in mine]), self.device)
        sync = (
            self.train_loss.no_sync()
            if isinstance(self.train_loss, DistributedDataParallel) and not last
            else contextlib.nullcontext()
        )
        with sync:
            with self._autocast():
                loss, n_tokens = self.train_loss(batch)
            share = loss / group
            (share if self.scaler is None else self.scaler.scale(share)).backward()
        s.step_tokens += n_tokens
        return loss.item() / group

    def _step(self, s: _State, loss: float) -> float:
        """Clip the gradients, set the learning rate of step ``s.step + 1``, update the
        weights; returns that learning rate. ``loss``: the step's (this process's) loss.

        A diverged step stops training before the update (``TrainingError``, one line
        naming the step and the learning rate): a non-finite loss or gradient norm (fp32 /
        bf16), or, with fp16, ``FP16_MAX_SKIPPED`` steps in a row whose gradients
        overflowed (the GradScaler skips such a step: one now and then is normal). Nothing
        is written from the diverged state; last/ and the best weights stay as they were."""
        lr = self._set_lr(s.step + 1)
        if self.scaler is None:
            norm = self._grad_norm()
            # under torchrun the gradients (so the norm) are every process's average: all
            # stop together; the loss is this process's own, checked when alone
            if not self.where.distributed and not math.isfinite(loss):
                self._diverged(s.step + 1, lr, f"the loss is {loss}")
            if not math.isfinite(norm):
                self._diverged(s.step + 1, lr, f"the gradient norm is {norm}")
        elif self.cfg.clip_grad_norm:
            self.scaler.unscale_(self.optimizer)  # clip the true gradients
            nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.clip_grad_norm)
        if self.scaler is None:
            self.optimizer.step()
        else:  # skips the update if the fp16 gradients overflowed, then adapts the scale
            scale = self.scaler.get_scale()
            self.scaler.step(self.optimizer)
            self.scaler.update()
            s.skipped = s.skipped + 1 if self.scaler.get_scale() < scale else 0
            if s.skipped >= FP16_MAX_SKIPPED:
                self._diverged(
                    s.step + 1,
                    lr,
                    f"the fp16 gradients overflowed {s.skipped} steps in a row (the loss is "
                    f"{loss:.4g})",
                )
        s.step += 1
        self.optimizer.zero_grad(set_to_none=True)
        return lr

    def _grad_norm(self) -> float:
        """The gradients' total norm, after clipping them to ``clip_grad_norm`` if set
        (the norm before clipping, as ``clip_grad_norm_`` returns it)."""
        if self.cfg.clip_grad_norm:
            return float(nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.clip_grad_norm))
        grads = [p.grad for p in self.model.parameters() if p.grad is not None]
        if not grads:
            return 0.0
        total_norm = getattr(nn.utils, "get_total_norm", None)  # torch >= 2.6
        if total_norm is not None:
            return float(total_norm(grads))
        return float(torch.linalg.vector_norm(torch.stack([g.norm() for g in grads])))

    def _diverged(self, step: int, lr: float, what: str) -> None:
        """Stop: training diverged at ``step`` (``what`` says how); the message says what
        is kept (last/ and the best weights are never written from a diverged state)."""
        if self.run.has_checkpoint():
            kept = f"the last good checkpoint is kept in {self.run.last_path}"
        else:
            kept = "nothing was saved yet"
        raise TrainingError(
            f"training diverged at step {step} (lr {lr:.3g}): {what}; {kept}; lower "
            "training.lr (or raise training.warmup_steps)"
        )

    def _weights_finite(self) -> bool:
        """True if every weight is a finite number (checked before anything is saved)."""
        checks = [torch.isfinite(p).all() for p in self.model.parameters()]
        return not checks or bool(torch.stack(checks).all())

    def _current_lr(self) -> float:
        return float(self.optimizer.param_groups[0]["lr"]) if self.optimizer.param_groups else 0.0

    def _set_lr(self, step: int) -> float:
        lr = self.cfg.lr * lr_multiplier(
            self.cfg.schedule, step, self.warmup, self.total_steps, self.width
        )
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        return lr

    def _autocast(self) -> contextlib.AbstractContextManager:
        return self.precision.autocast()

    # ------------------------------------------------------------------ evaluation
    def evaluate(self) -> dict[str, Any]:
        """The task's metrics on the validation items (eval mode, no gradients)."""
        self.model.eval()
        batches = (
            to_device(self.objective.collate([self.val_items[i] for i in b]), self.device)
            for b in self.val_batches
        )
        with torch.no_grad(), self._autocast():
            result = self.objective.evaluate(self.model, batches)
        self.model.train()
        return result

    def _evaluate_and_select(self, s: _State) -> bool:
        """Evaluate, log, keep the best weights (model.safetensors, then ``on_best``);
        True when ``patience`` evaluations in a row brought no improvement."""
        result = self.evaluate()
        value = float(result[self.objective.metric])
        row = {"step": s.step, "epoch": s.epoch}
        row.update({f"val_{k}": v for k, v in result.items() if isinstance(v, (int, float))})
        if not math.isfinite(value) or not self._weights_finite():
            # never a NaN "best", never weights of a diverged model saved
            what = f"the validation {self.objective.metric} is {value}"
            if math.isfinite(value):
                what = "some weights are not finite numbers"
            self._diverged(s.step, self._current_lr(), what)
        self._log(row)
        self._callback("on_eval", dict(row))
        s.last_metrics = row
        better = s.best is None or (
            value > s.best if self.objective.greater_is_better else value < s.best
        )
        if better:
            s.best, s.best_step, s.bad_evals = value, s.step, 0
            self.run.save_weights(self.model)
            if self.on_best:
                self.on_best(self.run.path)
            self._callback("on_best", self.run.path, dict(row))
        else:
            s.bad_evals += 1
        self._say(
            f"step {s.step}: val {self.objective.metric} {value:.4f}"
            f" (best {s.best:.4f} at step {s.best_step})"
            + (f", val loss {result['loss']:.4f}" if self.objective.metric != "loss" else "")
            + "".join(  # a task's other headline numbers (its ``shown`` metric names)
                f", {k} {result[k]:.4f}"
                for k in getattr(self.objective, "shown", ())
                if k in result
            )
        )
        self._plot()
        return bool(self.cfg.patience) and s.bad_evals >= self.cfg.patience

    # ------------------------------------------------------------------ output
    def _checkpoint(self, s: _State) -> None:
        """Write last/: weights, optimizer, RNG, and the state ``_restore`` reads back (rank
        0's; every process restores it, so a resumed run's dropout masks are rank 0's on
        every process: the batches and the weights continue exactly, the masks do not)."""
        if not self._weights_finite():  # last/ keeps the last good state (every process
            # holds the same weights: all stop together)
            self._diverged(s.step, self._current_lr(), "some weights are not finite numbers")
        if not self.where.is_main:
            return
        state = {
            "step": s.step,
            "epoch": s.epoch,
            "sampler": self.sampler.state_dict(),
            "best": s.best,
            "best_step": s.best_step,
            "bad_evals": s.bad_evals,
        }
        if self.scaler is not None:
            state["grad_scaler"] = self.scaler.state_dict()  # a few floats and ints
        self.run.save_checkpoint(self.model, self.optimizer, state)

    def _log_train(self, s: _State, loss: float, lr: float) -> None:
        """After each optimizer step: the progress bar (smoothed loss, tokens/s, lr); every
        ``log_every`` steps also a metrics.jsonl row."""
        s.ema = loss if s.ema is None else 0.98 * s.ema + 0.02 * loss
        now = time.perf_counter()
        tok_s = s.window_tokens / max(now - s.window_start, 1e-9)
        self._bar.set_postfix(loss=f"{s.ema:.4f}", tok_s=f"{tok_s:,.0f}", lr=f"{lr:.2e}")
        self._bar.update(1)
        if s.step % self.cfg.log_every == 0:
            self._log(
                {
                    "step": s.step,
                    "epoch": s.epoch,
                    "train_loss": loss,
                    "lr": lr,
                    "tokens_per_s": round(tok_s, 1),
                    "elapsed_s": round(now - s.start, 2),
                }
            )
            s.window_tokens, s.window_start = 0, now

    def _log(self, row: dict[str, Any]) -> None:
        """Append one metrics.jsonl row, then hand it to the callbacks' ``on_log`` (every
        row goes through here; rank 0 only)."""
        if self.where.is_main:
            self.run.append_metrics(row)
            self._callback("on_log", dict(row))

    def _callback(self, event: str, *args: Any) -> None:
        """Call ``event`` on every callback that has it, in order (rank 0 only); an
        exception propagates (see ``attnkit.runtime.callbacks``)."""
        if not self.where.is_main:
            return
        for callback in self.callbacks:
            method = getattr(callback, event, None)
            if callable(method):  # each its own copy of a row: one may keep, another change
                method(*(dict(a) if isinstance(a, dict) else a for a in args))

    def _say(self, line: str) -> None:
        """An evaluation line, logged at INFO (DEBUG with ``training.progress: false``)
        without tearing a redrawn bar."""
        level = logging.INFO if self.cfg.progress else logging.DEBUG
        if not logger.isEnabledFor(level):
            return
        with self._bar.external_write_mode() if self._bar else contextlib.nullcontext():
            logger.log(level, line)

    _curves_skipped = False  # set once curves.png cannot be drawn (no plot extra)
    # curves.png after an evaluation only if the last was drawn this long ago (and always at
    # the end): a figure costs 0.2-0.3 s, the first one ~0.5 s more to import matplotlib,
    # which in a run of ~20 s with 2 evaluations is 5% of its time
    curves_every_s = 30.0
    _curves_drawn_at = 0.0

    def _plot(self, final: bool = False) -> None:
        if not self.where.is_main or self._curves_skipped:
            return
        now = time.perf_counter()
        if not final and now - self._curves_drawn_at < self.curves_every_s:
            return
        self._curves_drawn_at = now
        try:
            with needs("plot", "drawing it"):
                viz.draw_run_curves(self.run)
        except MissingExtraError as exc:  # training needs only the core: one note, no curves
            self._curves_skipped = True
            logger.info("note: curves.png skipped: %s", exc)
        except Exception as exc:  # a plot must never kill a training run
            logger.warning("could not draw curves.png: %s", exc)

    def _progress_bar(self, step: int) -> tqdm | LineProgress:
        """The bar ``progress_kind`` chooses: a live ``tqdm.auto`` bar in a notebook, a
        redrawn bar on a terminal, elsewhere (a log file, a pipe) plain lines
        (``LineProgress``). Disabled with ``training.progress: false``, off rank 0, and
        where attnkit's INFO messages are not shown (``verbose=False``, the ``attnkit``
        logger at WARNING)."""
        disable = not (self.cfg.progress and self.where.is_main and shows_info(__name__))
        kind = progress_kind()
        if kind == "lines":
            return LineProgress(self.total_steps, step, disable=disable)
        if kind == "notebook":
            return auto_tqdm(
                total=self.total_steps, initial=step, disable=disable, unit="step", desc="train"
            )
        return tqdm(
            total=self.total_steps,
            initial=step,
            disable=disable,
            unit="step",
            dynamic_ncols=True,
            desc="train",
            mininterval=0.1,
        )


def in_notebook() -> bool:
    """True inside a Jupyter kernel (JupyterLab, Notebook, Colab, VS Code): IPython's
    kernel is running, not a terminal IPython."""
    if "ipykernel" not in sys.modules:
        return False
    get_ipython = getattr(sys.modules.get("IPython"), "get_ipython", None)
    shell = get_ipython() if callable(get_ipython) else None
    return shell is not None and getattr(shell, "kernel", None) is not None


def progress_kind() -> str:
    """Which progress display fits where this process writes: ``notebook`` (a live
    ``tqdm.auto`` bar: a widget with ipywidgets, else text), ``terminal`` (a redrawn bar on
    stderr) or ``lines`` (a log file, a pipe: ``LineProgress``)."""
    if in_notebook():
        return "notebook"
    return "terminal" if sys.stderr.isatty() else "lines"


class LineProgress:
    """Progress for a log file or a pipe: plain lines on stderr,
    ``train: step 120/2227 (5%), loss 0.5321, tok_s 4,200, lr 9.8e-04, 1m02s, ETA 18m40s``,
    never a redrawn bar: after the first step, then as the elapsed time doubles (5 s, 10 s,
    20 s, ...) until lines are ``interval`` seconds apart, and at the last step. The same
    methods as the tqdm bar the Trainer uses on a terminal."""

    interval = 30.0  # seconds between lines, once the run is past its first interval
    first_gap = 5.0  # seconds between the first two lines (then the gap doubles)

    def __init__(self, total: int, initial: int = 0, disable: bool = False) -> None:
        self.total, self.n, self.disable = total, initial, disable
        self.start_n, self.start = initial, time.perf_counter()
        self.last_line = self.start
        self.postfix: dict[str, str] = {}

    def update(self, n: int = 1) -> None:
        first = self.n == self.start_n
        self.n += n
        now = time.perf_counter()
        gap = min(self.interval, max(self.first_gap, self.last_line - self.start))
        if first or now - self.last_line >= gap or self.n >= self.total:
            self.last_line = now
            self._line(now)

    @staticmethod
    def external_write_mode(**_: Any) -> contextlib.AbstractContextManager:
        """As tqdm's: around a line written while the bar runs (plain lines need nothing)."""
        return contextlib.nullcontext()

    def set_postfix(self, **values: str) -> None:
        self.postfix = values

    def close(self) -> None:
        pass

    def _line(self, now: float) -> None:
        if self.disable:
            return
        elapsed = now - self.start
        rate = (self.n - self.start_n) / max(elapsed, 1e-9)
        eta = (self.total - self.n) / rate if rate > 0 else float("nan")
        pct = 100 * self.n / max(self.total, 1)
        parts = [f"train: step {self.n}/{self.total} ({pct:.0f}%)"]
        parts += [f"{k} {v}" for k, v in self.postfix.items()]
        parts += [_duration(elapsed), f"ETA {_duration(eta)}"]
        print(", ".join(parts), file=sys.stderr, flush=True)


def _duration(seconds: float) -> str:
    """``1h02m``, ``3m05s``, ``42s`` (``?`` when unknown)."""
    if not math.isfinite(seconds):
        return "?"
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"

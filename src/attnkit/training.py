"""The one Trainer, shared by every task.

AdamW (no weight decay on biases and norms), warmup + linear / cosine decay or the paper's
Noam schedule, gradient clipping and accumulation, optional bf16 autocast, evaluation every
epoch or every N steps, early stopping, the best checkpoint by the task's metric, a progress
bar (loss, tokens/s, ETA), ``metrics.jsonl`` and ``curves.png``, and exact resume from
``last/`` (weights, optimizer, sampler position and RNG states).

A task (see ``attnkit.tasks``) tells the Trainer how to batch, what the loss is and how to
evaluate; the Trainer knows nothing about data formats or models.
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

from attnkit.checkpoint import (
    atomic_write_text,
    load_training_state,
    save_model_weights,
    save_training_state,
)
from attnkit.config import TrainingConfig
from attnkit.data.batching import BucketBatchSampler

__all__ = ["Task", "Trainer", "TrainResult", "lr_multiplier"]


class Task(Protocol):
    """What the Trainer needs from a task."""

    metric: str  # name of the model-selection metric in evaluate()'s result
    greater_is_better: bool

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
    """AdamW over ``_param_groups``, the fused implementation where PyTorch has one.

    On the CPU, PyTorch's default AdamW updates each tensor in a Python loop; the fused
    kernel does the same arithmetic in one pass and is ~7x faster (3.7 vs 25.6 ms per step
    for the 4.1M-parameter NSMC classifier, whose fine-tuning step went from 0.118 to
    0.104 s in full runs).
    """
    groups = _param_groups(model, config.weight_decay)
    kwargs = {"lr": config.lr, "betas": tuple(config.betas)}
    try:
        return torch.optim.AdamW(groups, fused=True, **kwargs)
    except (RuntimeError, ValueError):  # a dtype/device without a fused kernel
        return torch.optim.AdamW(groups, foreach=True, **kwargs)


def cpu_has_native_bf16() -> bool:
    """True if the CPU advertises bf16 matrix instructions (AVX512-BF16 or AMX-BF16).

    Without them bf16 autocast on the CPU still works but is emulated, and slower than fp32.
    """
    try:
        flags = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


class Trainer:
    """Train ``model`` on ``train_items`` for ``task``; write everything into ``run_dir``.

    train_items / val_items: sequences of task items (e.g. (token ids, label) pairs);
    lengths: token count per training item (for length-bucketed batching).
    """

    def __init__(
        self,
        model: nn.Module,
        task: Task,
        train_items: Sequence[Any],
        lengths: Sequence[int],
        val_items: Sequence[Any] | None,
        val_lengths: Sequence[int] | None,
        config: TrainingConfig,
        run_dir: str | Path,
        d_model: int = 512,
        on_best: Callable[[Path], None] | None = None,
    ) -> None:
        self.model, self.task, self.cfg = model, task, config
        self.train_items, self.val_items = train_items, val_items
        self.run_dir = Path(run_dir)
        self.d_model = d_model
        self.on_best = on_best
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
        self.optimizer = make_adamw(model, config)
        micro_per_epoch = len(self.sampler)
        self.steps_per_epoch = math.ceil(micro_per_epoch / config.grad_accum)
        self.total_steps = config.max_steps or config.epochs * self.steps_per_epoch
        self.warmup = (
            config.warmup_steps
            if config.warmup_steps is not None
            else int(config.warmup_ratio * self.total_steps)
        )
        self.metrics_path = self.run_dir / "metrics.jsonl"
        if config.bf16 and not cpu_has_native_bf16():
            warnings.warn(
                "training.bf16 is on but this CPU has no native bf16 (avx512_bf16/amx_bf16): "
                "autocast is emulated and usually slower than fp32",
                stacklevel=2,
            )

    # ------------------------------------------------------------------ helpers
    def _autocast(self):
        if self.cfg.bf16:
            return torch.autocast("cpu", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def _set_lr(self, step: int) -> float:
        lr = self.cfg.lr * lr_multiplier(
            self.cfg.schedule, step, self.warmup, self.total_steps, self.d_model
        )
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        return lr

    def _log(self, row: dict[str, Any]) -> None:
        with self.metrics_path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")

    def _history(self) -> list[dict[str, Any]]:
        if not self.metrics_path.is_file():
            return []
        lines = self.metrics_path.read_text(encoding="utf-8").splitlines()
        rows = []
        for line in lines:
            with contextlib.suppress(json.JSONDecodeError):  # a line cut by a kill
                rows.append(json.loads(line))
        return rows

    def evaluate(self) -> dict[str, Any]:
        """Run the task's evaluation on the validation items."""
        self.model.eval()
        batches = (self.task.collate([self.val_items[i] for i in b]) for b in self.val_batches)
        with torch.no_grad(), self._autocast():
            result = self.task.evaluate(self.model, batches)
        self.model.train()
        return result

    def _plot(self) -> None:
        try:
            from attnkit.viz import plot_curves

            plot_curves(self._history(), self.run_dir / "curves.png")
        except Exception as exc:  # a plot must never kill a training run
            print(f"warning: could not draw curves.png: {exc}")

    # ------------------------------------------------------------------ main loop
    def fit(self, resume: bool = False) -> TrainResult:
        cfg = self.cfg
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if cfg.num_threads:
            torch.set_num_threads(cfg.num_threads)
        torch.manual_seed(cfg.seed)
        random.seed(cfg.seed)
        step, epoch, best, best_step, bad_evals = 0, 0, None, None, 0
        if resume:
            state = load_training_state(self.run_dir, self.model, self.optimizer)
            step, epoch = state["step"], state["epoch"]
            best, best_step, bad_evals = state["best"], state["best_step"], state["bad_evals"]
            self.sampler.load_state_dict(state["sampler"])
            # drop log rows written after the checkpoint (the resumed run rewrites them)
            kept = [r for r in self._history() if r.get("step", 0) <= step]
            atomic_write_text(self.metrics_path, "".join(json.dumps(r) + "\n" for r in kept))
        elif self.metrics_path.exists():
            self.metrics_path.unlink()

        def checkpoint() -> None:
            save_training_state(
                self.run_dir,
                self.model,
                self.optimizer,
                {
                    "step": step,
                    "epoch": epoch,
                    "sampler": self.sampler.state_dict(),
                    "best": best,
                    "best_step": best_step,
                    "bad_evals": bad_evals,
                },
            )

        def run_eval() -> bool:
            """Evaluate, log, keep the best weights; returns True to stop early."""
            nonlocal best, best_step, bad_evals
            result = self.evaluate()
            value = float(result[self.task.metric])
            row = {"step": step, "epoch": epoch}
            row.update({f"val_{k}": v for k, v in result.items() if isinstance(v, (int, float))})
            self._log(row)
            improved = best is None or (
                value > best if self.task.greater_is_better else value < best
            )
            if improved:
                best, best_step, bad_evals = value, step, 0
                save_model_weights(self.model, self.run_dir / "model.safetensors")
                if self.on_best:
                    self.on_best(self.run_dir)
            else:
                bad_evals += 1
            bar.write(
                f"step {step}: val {self.task.metric} {value:.4f}"
                f" (best {best:.4f} at step {best_step})"
                + (f", val loss {result['loss']:.4f}" if self.task.metric != "loss" else "")
            )
            self._plot()
            return bool(cfg.patience) and bad_evals >= cfg.patience

        interactive = sys.stderr.isatty()
        bar = tqdm(
            total=self.total_steps,
            initial=step,
            disable=not cfg.progress,
            unit="step",
            dynamic_ncols=True,
            desc="train",
            mininterval=0.1 if interactive else 30.0,  # a log file gets a line every 30 s
        )
        self.model.train()
        start = time.perf_counter()
        window_tokens, window_start, ema = 0, time.perf_counter(), None
        stopped_early, done = False, step >= self.total_steps
        last_metrics: dict[str, Any] = {}
        while not done:
            self.sampler.set_epoch(epoch)
            micro, accum_loss = 0, 0.0
            self.optimizer.zero_grad(set_to_none=True)
            batches = iter(self.sampler)
            remaining = len(self.sampler) - self.sampler.position
            for i, indices in enumerate(batches):
                batch = self.task.collate([self.train_items[j] for j in indices])
                with self._autocast():
                    loss, n_tokens = self.task.loss(self.model, batch)
                # the last accumulation group of an epoch may be shorter
                group = min(cfg.grad_accum, remaining - (i - micro))
                (loss / group).backward()
                accum_loss += loss.item() / group
                window_tokens += n_tokens
                micro += 1
                if micro < group:
                    continue
                micro = 0
                if cfg.clip_grad_norm:
                    nn.utils.clip_grad_norm_(self.model.parameters(), cfg.clip_grad_norm)
                step += 1
                lr = self._set_lr(step)
                self.optimizer.step()
                self.optimizer.zero_grad(set_to_none=True)
                ema = accum_loss if ema is None else 0.98 * ema + 0.02 * accum_loss
                now = time.perf_counter()
                tok_s = window_tokens / max(now - window_start, 1e-9)
                bar.update(1)
                bar.set_postfix(loss=f"{ema:.4f}", tok_s=f"{tok_s:,.0f}", lr=f"{lr:.2e}")
                if step % cfg.log_every == 0:
                    self._log(
                        {
                            "step": step,
                            "epoch": epoch,
                            "train_loss": accum_loss,
                            "lr": lr,
                            "tokens_per_s": round(tok_s, 1),
                            "elapsed_s": round(now - start, 2),
                        }
                    )
                    window_tokens, window_start = 0, now
                accum_loss = 0.0
                end_of_epoch = self.sampler.position >= len(self.sampler)
                done = step >= self.total_steps
                want_eval = (
                    (cfg.eval_every and step % cfg.eval_every == 0)
                    or (not cfg.eval_every and end_of_epoch)
                    or done
                )
                if want_eval and self.val_items:
                    stopped_early = run_eval()
                    last_metrics = self._history()[-1]
                    done = done or stopped_early
                if end_of_epoch and not done:
                    epoch += 1
                    self.sampler.set_epoch(epoch)
                if want_eval or (cfg.save_every and step % cfg.save_every == 0) or done:
                    checkpoint()
                if done or end_of_epoch:
                    break
        bar.close()
        if best is None:  # no validation data: the last weights are the result
            save_model_weights(self.model, self.run_dir / "model.safetensors")
        self._plot()
        return TrainResult(
            run_dir=self.run_dir,
            step=step,
            best_metric=best,
            best_step=best_step,
            last_metrics=last_metrics,
            stopped_early=stopped_early,
            train_seconds=time.perf_counter() - start,
        )

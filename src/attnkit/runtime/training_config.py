"""The recipe's ``training`` section: what the Trainer does (steps, batches, optimizer,
schedule, precision, evaluation and checkpoints)."""

from __future__ import annotations

from dataclasses import dataclass

from attnkit.core.config import at_least, check, positive, short_repr
from attnkit.runtime.device import THREADS_PER_CORE, usable_cores

__all__ = ["REPORT_TO", "TrainingConfig"]

REPORT_TO = ("tensorboard", "csv")  # training.report_to: the built-in trackers
# sequences in a batch: far above any batch that trains well, far below an integer that
# overflows; whether a batch fits in memory is checked once the data is read
MAX_BATCH = 1 << 20


@dataclass
class TrainingConfig:
    epochs: int = 3
    max_steps: int | None = None  # stop after this many optimizer steps (overrides epochs)
    batch_size: int = 64
    max_tokens: int | None = None  # token-budget batching instead of batch_size
    lr: float = 5e-4
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.98)
    schedule: str = "linear"  # constant | linear | cosine | noam
    warmup_steps: int | None = None
    warmup_ratio: float = 0.05
    clip_grad_norm: float | None = 1.0
    grad_accum: int = 1
    label_smoothing: float = 0.0
    teacher_forcing_ratio: float = 1.0  # seq2seq LSTM: probability of feeding the gold token
    device: str = (
        "auto"  # auto | cpu | cuda | cuda:N | mps (auto: CUDA if present, else MPS, else CPU)
    )
    # bf16 autocast: auto = on where the device computes bf16 natively (CUDA >= 8.0, a CPU
    # with avx512_bf16/amx_bf16), off elsewhere; true where it is emulated is ~20x slower
    bf16: bool | str = "auto"
    fp16: bool = False  # fp16 autocast with a GradScaler (CUDA only)
    compile: bool = False  # torch.compile the model (the first steps are slow while it compiles)
    eval_every: int | None = None  # optimizer steps between evaluations (None: every epoch)
    save_every: int | None = None  # steps between resumable checkpoints (None: at each eval)
    patience: int | None = None  # early stopping: evaluations without improvement
    log_every: int = 50
    seed: int = 0
    num_threads: int | None = None
    progress: bool = True  # false: no progress bar and no evaluation lines
    # trackers beside metrics.jsonl: tensorboard (RUN/tensorboard/) and/or csv
    # (RUN/metrics.csv); a name or a list of names (none: null or [])
    report_to: list[str] | str | None = None

    @property
    def trackers(self) -> tuple[str, ...]:
        """``report_to`` as a tuple of tracker names (``()`` for none)."""
        value = self.report_to
        if value is None or value == "none":
            return ()
        if isinstance(value, str):
            return (value,)
        return tuple(value)

    def validate(self) -> None:
        """One-line ``ConfigError`` naming the first bad value."""
        betas = self.betas
        bad = _bad_tracker(self.report_to)
        check(
            (
                self.schedule in ("constant", "linear", "cosine", "noam"),
                "training.schedule must be constant|linear|cosine|noam",
            ),
            positive("training.lr", self.lr),
            positive("training.batch_size", self.batch_size),
            positive("training.grad_accum", self.grad_accum),
            positive("training.max_tokens", self.max_tokens, optional=True),
            at_least("training.epochs", self.epochs, 1),
            at_least("training.max_steps", self.max_steps, 1, optional=True),
            at_least("training.warmup_steps", self.warmup_steps, 0, optional=True),
            (
                0.0 <= self.warmup_ratio < 1.0,
                f"training.warmup_ratio must be in [0, 1), got {short_repr(self.warmup_ratio)}",
            ),
            at_least("training.weight_decay", self.weight_decay, 0),
            at_least("training.clip_grad_norm", self.clip_grad_norm, 0, optional=True),
            (
                len(betas) == 2 and all(0.0 <= b < 1.0 for b in betas),
                f"training.betas must be two numbers in [0, 1), got {short_repr(list(betas))}",
            ),
            at_least("training.eval_every", self.eval_every, 1, optional=True),
            at_least("training.save_every", self.save_every, 1, optional=True),
            at_least("training.patience", self.patience, 1, optional=True),
            at_least("training.log_every", self.log_every, 1),
            (
                isinstance(self.seed, int) and 0 <= self.seed < 2**32,
                f"training.seed must be an integer in [0, 2**32), got {short_repr(self.seed)}",
            ),
            (
                self.batch_size <= MAX_BATCH,
                f"training.batch_size must be at most {MAX_BATCH:,}, got "
                f"{short_repr(self.batch_size)}",
            ),
            (
                self.max_tokens is None or self.max_tokens <= MAX_BATCH * 1024,
                f"training.max_tokens must be at most {MAX_BATCH * 1024:,}, got "
                f"{short_repr(self.max_tokens)}",
            ),
            at_least("training.num_threads", self.num_threads, 1, optional=True),
            (
                self.num_threads is None or self.num_threads <= THREADS_PER_CORE * usable_cores(),
                f"training.num_threads must be at most {THREADS_PER_CORE * usable_cores()} "
                f"({THREADS_PER_CORE} x the {usable_cores()} cores this process may use), got "
                f"{short_repr(self.num_threads)}",
            ),
            (
                not (self.bf16 is True and self.fp16),
                "training.bf16 and training.fp16 exclude each other",
            ),
            (
                bad is None,
                f"training.report_to must be {' | '.join(REPORT_TO)} or a list of them, got "
                f"{short_repr(bad)} (other trackers plug in as callbacks)",
            ),
            (
                0.0 <= self.teacher_forcing_ratio <= 1.0,
                "training.teacher_forcing_ratio must be in [0, 1], got "
                f"{short_repr(self.teacher_forcing_ratio)}",
            ),
            (
                0.0 <= self.label_smoothing < 1.0,
                "training.label_smoothing must be in [0, 1), got "
                f"{short_repr(self.label_smoothing)}",
            ),
        )


def _bad_tracker(value: object) -> object:
    """The first value of ``training.report_to`` that names no built-in tracker (the whole
    value if it is neither a name nor a list of names), else None."""
    if value is None or value == "none":
        return None
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, (list, tuple)):
        return value
    return next((x for x in names if not isinstance(x, str) or x not in REPORT_TO), None)

"""Data-parallel training under ``torchrun``: which process am I, and what is mine.

torchrun starts one process per device and tells each its place in the environment
(``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``)::

    torchrun --nproc-per-node 2 -m attnkit train configs/nsmc-transformer.yaml

Every process builds the same model (same seed) and draws the same sequence of
length-bucketed batches (same sampler seed); each process trains on its share of every
batch (:func:`shard`), and ``DistributedDataParallel`` averages the gradients. So a recipe's
global batch stays ``batch_size x grad_accum`` on 1 or N processes: the same recipe gives
the same trajectory (up to float rounding and dropout masks), N processes just share the
work. Rank 0 alone writes the run directory (config, tokenizer, metrics, checkpoints,
curves) and evaluates; the others wait for it and follow its early-stopping decision.

Backends: ``nccl`` for CUDA (one GPU per process: ``cuda:LOCAL_RANK``), ``gloo`` on the
CPU. Without torchrun (``WORLD_SIZE`` unset or 1) nothing here does anything.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from attnkit.core.errors import ConfigError

__all__ = [
    "Placement",
    "active",
    "all_sum",
    "barrier",
    "broadcast_object",
    "finish",
    "placement",
    "setup",
    "shard",
]


@dataclass(frozen=True)
class Placement:
    """This process's place among the training processes (1 process: rank 0 of 1)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """Rank 0: the process that writes files and prints."""
        return self.rank == 0


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "")
    try:
        return int(value) if value else default
    except ValueError:
        raise ConfigError(f"{name}={value!r} is not an integer (set by torchrun)") from None


def placement() -> Placement:
    """Where this process is, from torchrun's environment variables."""
    world = _env_int("WORLD_SIZE", 1)
    rank = _env_int("RANK", 0)
    local = _env_int("LOCAL_RANK", rank)
    if not 0 <= rank < max(world, 1):
        raise ConfigError(f"RANK={rank} is outside WORLD_SIZE={world}")
    return Placement(rank=rank, world_size=max(world, 1), local_rank=local)


def setup(device: torch.device) -> tuple[Placement, torch.device]:
    """Join the process group if torchrun started several processes (once per process).

    Returns the placement and the device this process trains on: under torchrun with CUDA,
    ``cuda:LOCAL_RANK`` (one GPU per process), otherwise ``device`` itself.
    """
    where = placement()
    if not where.distributed:
        return where, device
    if device.type == "cuda":
        if device.index is None:
            device = torch.device("cuda", where.local_rank)
        torch.cuda.set_device(device)
    elif device.type != "cpu":
        raise RuntimeError(
            f"distributed training runs on CUDA (nccl) or the CPU (gloo), not {device}"
        )
    global _joined
    if not dist.is_initialized():
        backend = "nccl" if device.type == "cuda" else "gloo"
        dist.init_process_group(backend=backend, rank=where.rank, world_size=where.world_size)
        _joined = True
    return where, device


_joined = False  # True when ``setup`` created the process group (``finish`` then ends it)


def finish() -> None:
    """Leave the process group at the end of training, if ``setup`` joined it (one that the
    caller created is left alone)."""
    global _joined
    if _joined and dist.is_initialized():
        dist.destroy_process_group()
    _joined = False


def active() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def shard(indices: list[int], where: Placement) -> list[int]:
    """This process's share of one global batch: every ``world_size``-th item from ``rank``.

    Shares differ in size by at most one item. A batch with fewer items than processes
    (the last one of an epoch, at most) gives the processes without an item of their own a
    copy of one (every process must take part in each step), so that batch counts one
    example twice.
    """
    if not where.distributed:
        return indices
    if not indices:
        raise ValueError("an empty batch cannot be shared")
    mine = indices[where.rank :: where.world_size]
    return mine or [indices[where.rank % len(indices)]]


def barrier() -> None:
    if active():
        dist.barrier()


def broadcast_object(obj: Any, src: int = 0) -> Any:
    """``obj`` of process ``src`` on every process (itself where not distributed). Small
    in-memory values only (a recipe, a tokenizer's JSON); nothing is written to disk."""
    if not active():
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=src)
    return box[0]


def all_sum(values: list[float], device: torch.device) -> list[float]:
    """The sum of each value over all processes (the values themselves where not
    distributed): one all-reduce for the whole list."""
    if not active():
        return values
    t = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(t)
    return t.tolist()

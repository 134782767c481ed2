"""Length-bucketed batching and dynamic padding.

:class:`BucketBatchSampler` groups examples of similar length so that padding is small, while
staying random from epoch to epoch and exactly reproducible (and resumable) given its seed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import Sampler

__all__ = ["BucketBatchSampler", "pad_batch"]


class BucketBatchSampler(Sampler[list[int]]):
    """Yield batches of example indices with similar lengths.

    Each epoch: shuffle all indices, cut them into buckets of ``bucket_size``, sort each bucket
    by length (ties keep the shuffled order), cut each bucket into batches, and shuffle the order
    of all batches. Everything is drawn from a generator seeded with ``(seed, epoch)``, so the
    batches depend only on the lengths, the settings, ``seed`` and ``epoch``.

    Batches hold ``batch_size`` examples, or, with ``max_tokens``, as many examples as fit in
    ``max_tokens`` padded tokens (``len(batch) * longest <= max_tokens``; an example longer than
    ``max_tokens`` gets a batch of its own).

    Epochs: call :meth:`set_epoch` before each epoch, or simply iterate again: a new pass after
    a completed one moves to the next epoch by itself. Resuming: :meth:`state_dict` records the
    epoch and how many batches of it were produced; after :meth:`load_state_dict`, iteration
    continues with exactly the batches an uninterrupted run would have produced next (calling
    ``set_epoch`` with the saved epoch keeps the position). With a ``DataLoader`` that has
    workers, the sampler runs ahead of training: pass the number of batches actually consumed,
    ``state_dict(position=n)``.

    Args:
        lengths: length (e.g. number of tokens) of each example.
        batch_size: examples per batch (exactly one of ``batch_size`` / ``max_tokens``).
        max_tokens: padded tokens per batch.
        bucket_size: examples per sorting bucket; default about 100 batches' worth. Larger
            buckets mean less padding but less randomness in which examples share a batch.
        shuffle: if False, no randomness: buckets in dataset order, batches in bucket order.
        seed: base seed.
        drop_last: drop batches smaller than ``batch_size`` (``batch_size`` mode only).
    """

    def __init__(
        self,
        lengths: Sequence[int] | np.ndarray,
        batch_size: int | None = None,
        max_tokens: int | None = None,
        bucket_size: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ) -> None:
        self.lengths = np.asarray(lengths, dtype=np.int64)
        if self.lengths.ndim != 1:
            raise ValueError("lengths must be a flat sequence of integers")
        if (batch_size is None) == (max_tokens is None):
            raise ValueError("give exactly one of batch_size and max_tokens")
        if batch_size is not None and batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if max_tokens is not None and max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
        self.batch_size = batch_size
        self.max_tokens = max_tokens
        if bucket_size is None:
            mean_len = max(1, int(self.lengths.mean())) if len(self.lengths) else 1
            per_batch = batch_size or max(1, (max_tokens or 1) // mean_len)
            bucket_size = 100 * per_batch
        if batch_size is not None:  # whole batches per bucket: only the last bucket has a remainder
            bucket_size = -(-bucket_size // batch_size) * batch_size
        if bucket_size < 1:
            raise ValueError(f"bucket_size must be >= 1, got {bucket_size}")
        self.bucket_size = bucket_size
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last
        self.epoch = 0
        self.position = 0
        self._cache: tuple[int, list[list[int]]] | None = None

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch to iterate. Changing the epoch restarts at its first batch."""
        if epoch != self.epoch:
            self.epoch = epoch
            self.position = 0

    def batches(self, epoch: int | None = None) -> list[list[int]]:
        """All batches of ``epoch`` (default: the current epoch), in iteration order."""
        epoch = self.epoch if epoch is None else epoch
        if self._cache is not None and self._cache[0] == epoch:
            return self._cache[1]
        rng = np.random.default_rng([self.seed, epoch]) if self.shuffle else None
        n = len(self.lengths)
        order = rng.permutation(n) if rng is not None else np.arange(n)
        batches: list[list[int]] = []
        for start in range(0, n, self.bucket_size):
            bucket = order[start : start + self.bucket_size]
            bucket = bucket[np.argsort(self.lengths[bucket], kind="stable")]
            batches.extend(self._split(bucket))
        if rng is not None:
            batches = [batches[i] for i in rng.permutation(len(batches))]
        self._cache = (epoch, batches)
        return batches

    def _split(self, bucket: np.ndarray) -> list[list[int]]:
        """Cut a length-sorted bucket into batches."""
        if self.batch_size is not None:
            size = self.batch_size
            out = [bucket[i : i + size].tolist() for i in range(0, len(bucket), size)]
            if self.drop_last and out and len(out[-1]) < size:
                out.pop()
            return out
        assert self.max_tokens is not None
        out, current, longest = [], [], 0
        for index, length in zip(bucket.tolist(), self.lengths[bucket].tolist(), strict=True):
            new_longest = max(longest, length)
            if current and (len(current) + 1) * new_longest > self.max_tokens:
                out.append(current)
                current, new_longest = [], length
            current.append(index)
            longest = new_longest
        if current:
            out.append(current)
        return out

    def __iter__(self) -> Iterator[list[int]]:
        batches = self.batches()
        if self.position >= len(batches):  # previous pass finished: go on with the next epoch
            self.set_epoch(self.epoch + 1)
            batches = self.batches()
        while self.position < len(batches):
            batch = batches[self.position]
            self.position += 1
            yield batch

    def __len__(self) -> int:
        """Number of batches in the current epoch (constant in ``batch_size`` mode)."""
        return len(self.batches())

    def state_dict(self, position: int | None = None) -> dict[str, Any]:
        """The resumable state: epoch, batches produced in it, and a check of the settings."""
        return {
            "epoch": self.epoch,
            "position": self.position if position is None else int(position),
            "seed": self.seed,
            "num_examples": len(self.lengths),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`; the next iteration continues from the saved position."""
        for key in ("seed", "num_examples"):
            mine = self.seed if key == "seed" else len(self.lengths)
            if key in state and state[key] != mine:
                raise ValueError(f"sampler state has {key}={state[key]}, this sampler {mine}")
        self.epoch = int(state["epoch"])
        self.position = int(state["position"])


def pad_batch(
    sequences: Sequence[Sequence[int]], pad_id: int, max_len: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pad token id sequences to the longest one in the batch.

    Args:
        sequences: token ids per example.
        pad_id: the id used for padding.
        max_len: if given, sequences longer than this are truncated (the batch is padded to
            ``min(longest, max_len)``).

    Returns:
        ``ids`` (LongTensor ``(B, T)``) and ``mask`` (BoolTensor ``(B, T)``, True = real token).
    """
    if len(sequences) == 0:
        raise ValueError("pad_batch needs at least one sequence")
    if max_len is not None and max_len < 0:
        raise ValueError(f"max_len must be >= 0, got {max_len}")
    lengths = [len(s) if max_len is None else min(len(s), max_len) for s in sequences]
    width = max(lengths)
    ids = np.full((len(sequences), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(sequences), width), dtype=np.bool_)
    for row, (seq, n) in enumerate(zip(sequences, lengths, strict=True)):
        ids[row, :n] = seq[:n]
        mask[row, :n] = True
    return torch.from_numpy(ids), torch.from_numpy(mask)

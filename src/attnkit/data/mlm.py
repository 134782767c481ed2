"""BERT's masked-LM corruption (Devlin et al. 2019, section 3.1 "Task #1: Masked LM").

Of the real, non-special tokens, each is chosen with probability ``mask_prob`` (15%); a
chosen token is replaced by [MASK] 80% of the time, by a random token 10% of the time and
kept 10% of the time, and the model must predict the original at every chosen position.
The 10% random / 10% kept make the model build a representation of *every* input token,
not only of [MASK] (which never occurs at fine-tuning time).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

__all__ = ["IGNORE_INDEX", "chunk_ids", "mask_tokens"]

IGNORE_INDEX = -100  # label of positions that are not predicted (F.cross_entropy's default)


def mask_tokens(
    input_ids: Tensor,
    attention_mask: Tensor,
    mask_id: int,
    vocab_size: int,
    num_special: int,
    mask_prob: float = 0.15,
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """Corrupt a padded batch for masked-LM training.

    input_ids (B, T) long; attention_mask (B, T) bool, True = real token. Ids below
    ``num_special`` are special tokens ([PAD] [UNK] [CLS] ...): never chosen, never drawn as
    random replacements. Every row with at least one maskable token gets at least one
    prediction (short reviews would otherwise often get none).

    Returns (corrupted ids (B, T), labels (B, T): the original id at chosen positions,
    ``IGNORE_INDEX`` elsewhere). ``generator`` makes the corruption reproducible; None uses
    torch's global RNG (restored by the Trainer on resume).
    """
    if not 0.0 < mask_prob < 1.0:
        raise ValueError(f"mask_prob must be in (0, 1), got {mask_prob}")
    maskable = attention_mask.bool() & (input_ids >= num_special)  # (B, T)
    u = torch.rand(input_ids.shape, generator=generator)  # (B, T)
    u = u.masked_fill(~maskable, 2.0)  # never below mask_prob
    chosen = u < mask_prob
    # at least one prediction per row: the maskable position with the smallest draw
    first = u.argmin(dim=1, keepdim=True)  # (B, 1)
    has_any = maskable.any(dim=1, keepdim=True)
    chosen |= torch.zeros_like(chosen).scatter_(1, first, has_any)

    labels = input_ids.masked_fill(~chosen, IGNORE_INDEX)
    action = torch.rand(input_ids.shape, generator=generator)  # 80 / 10 / 10 split
    to_mask = chosen & (action < 0.8)
    to_random = chosen & (action >= 0.8) & (action < 0.9)
    random_ids = torch.randint(num_special, vocab_size, input_ids.shape, generator=generator)
    corrupted = input_ids.masked_fill(to_mask, mask_id)
    corrupted = torch.where(to_random, random_ids, corrupted)
    return corrupted, labels


def chunk_ids(ids: Sequence[int], max_len: int, min_len: int = 2) -> list[list[int]]:
    """Cut one document's ids into pieces of at most ``max_len`` (a long review becomes
    several training sequences instead of being truncated); pieces shorter than
    ``min_len`` are dropped."""
    pieces = [list(ids[i : i + max_len]) for i in range(0, len(ids), max_len)]
    return [p for p in pieces if len(p) >= min_len]

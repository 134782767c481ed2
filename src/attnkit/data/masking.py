"""BERT's masked-LM corruption (Devlin et al. 2019, section 3.1 "Task #1: Masked LM").

Of the real, non-special tokens, each is chosen with probability ``mask_prob`` (15%); a
chosen token is replaced by [MASK] 80% of the time, by a random token 10% of the time and
kept 10% of the time, and the model must predict the original at every chosen position.
The 10% random / 10% kept make the model build a representation of *every* input token,
not only of [MASK] (which never occurs at fine-tuning time).

Whole-word masking (BERT's later release, Google's ``bert`` README, 2019): with
``word_starts`` given, *words* are chosen, each with probability ``mask_prob`` (so ~15% of
the maskable tokens are chosen on average), and all WordPiece pieces of a chosen word are
predicted together; the 80/10/10 decision is still made per token.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from torch import Tensor

if TYPE_CHECKING:
    from attnkit.data.tokenization import Tokenizer

__all__ = ["IGNORE_INDEX", "chunk_ids", "mask_tokens", "wordpiece_word_starts"]

IGNORE_INDEX = -100  # label of positions that are not predicted (F.cross_entropy's default)


def mask_tokens(
    input_ids: Tensor,
    attention_mask: Tensor,
    mask_id: int,
    vocab_size: int,
    num_special: int,
    mask_prob: float = 0.15,
    generator: torch.Generator | None = None,
    word_starts: Tensor | None = None,
    special_ids: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Corrupt a padded batch for masked-LM training.

    input_ids (B, T) long; attention_mask (B, T) bool, True = real token. Ids below
    ``num_special`` are special tokens ([PAD] [UNK] [CLS] ...): never chosen, never drawn as
    random replacements. Every row with at least one maskable token gets at least one
    prediction (short reviews would otherwise often get none).

    Returns (corrupted ids (B, T), labels (B, T): the original id at chosen positions,
    ``IGNORE_INDEX`` elsewhere). ``generator`` makes the corruption reproducible; None uses
    torch's global RNG (restored by the Trainer on resume).

    ``word_starts`` (B, T) bool, optional: True where a token begins a word (WordPiece
    continuation pieces "##..." are False; see ``wordpiece_word_starts``). When given, whole
    words are chosen: a word is chosen with probability ``mask_prob`` (the draw at its first
    piece) and then every piece of it is predicted. A maskable continuation piece right after
    a non-maskable token starts a word of its own. None (default): per-token choice, with the
    same random draws as always.

    ``special_ids`` (1-D long), optional: the special tokens' ids when they are not the first
    ``num_special`` ids (a Hugging Face vocabulary: [PAD] 0, [UNK] 100, [CLS] 101, ...); they
    are never chosen and random replacements are drawn from the other ids.
    """
    if not 0.0 < mask_prob < 1.0:
        raise ValueError(f"mask_prob must be in (0, 1), got {mask_prob}")
    if special_ids is None:
        maskable = attention_mask.bool() & (input_ids >= num_special)  # (B, T)
    else:
        maskable = attention_mask.bool() & ~torch.isin(input_ids, special_ids.to(input_ids.device))
    u = torch.rand(input_ids.shape, generator=generator)  # (B, T)
    u = u.masked_fill(~maskable, 2.0)  # never below mask_prob
    has_any = maskable.any(dim=1, keepdim=True)
    if word_starts is None:
        chosen = u < mask_prob
        # at least one prediction per row: the maskable position with the smallest draw
        first = u.argmin(dim=1, keepdim=True)  # (B, 1)
        chosen |= torch.zeros_like(chosen).scatter_(1, first, has_any)
    else:
        chosen = _whole_word_choice(u, maskable, word_starts.bool(), mask_prob, has_any)

    labels = input_ids.masked_fill(~chosen, IGNORE_INDEX)
    action = torch.rand(input_ids.shape, generator=generator)  # 80 / 10 / 10 split
    to_mask = chosen & (action < 0.8)
    to_random = chosen & (action >= 0.8) & (action < 0.9)
    if special_ids is None:
        random_ids = torch.randint(num_special, vocab_size, input_ids.shape, generator=generator)
    else:  # uniform over the ordinary ids
        ordinary = torch.ones(vocab_size, dtype=torch.bool)
        ordinary[special_ids.cpu()] = False
        pool = ordinary.nonzero().flatten()  # (V - S,)
        pick = torch.randint(len(pool), input_ids.shape, generator=generator)
        random_ids = pool[pick].to(input_ids.device)
    corrupted = input_ids.masked_fill(to_mask, mask_id)
    corrupted = torch.where(to_random, random_ids, corrupted)
    return corrupted, labels


def _whole_word_choice(
    u: Tensor, maskable: Tensor, word_starts: Tensor, mask_prob: float, has_any: Tensor
) -> Tensor:
    """(B, T) bool: tokens of the words whose first piece drew below ``mask_prob``."""
    prev_maskable = torch.zeros_like(maskable)
    prev_maskable[:, 1:] = maskable[:, :-1]
    starts = maskable & (word_starts | ~prev_maskable)  # (B, T) first piece of each word
    pos = torch.arange(u.shape[1]).expand_as(u)
    start_of = torch.where(starts, pos, torch.zeros_like(pos)).cummax(dim=1).values  # (B, T)
    u_start = u.masked_fill(~starts, 2.0)  # draws of words only
    chosen_start = u_start < mask_prob
    # at least one prediction per row: the word whose draw is smallest
    first = u_start.argmin(dim=1, keepdim=True)  # (B, 1)
    chosen_start |= torch.zeros_like(chosen_start).scatter_(1, first, has_any)
    return maskable & chosen_start.gather(1, start_of)


def wordpiece_word_starts(tokenizer: Tokenizer, ids: Tensor) -> Tensor:
    """(same shape as ``ids``) bool: True where the token begins a word, i.e. its string does
    not start with "##" (WordPiece's continuation prefix). Special tokens and pads come out
    True but are never maskable in ``mask_tokens``."""
    flat = ids.reshape(-1).tolist()
    cache: dict[int, bool] = {}
    for i in set(flat):
        token = tokenizer.id_to_token(i)
        cache[i] = not (token or "").startswith("##")
    return torch.tensor([cache[i] for i in flat], dtype=torch.bool).reshape(ids.shape)


def chunk_ids(ids: Sequence[int], max_len: int, min_len: int = 2) -> list[list[int]]:
    """Cut one document's ids into pieces of at most ``max_len`` (a long review becomes
    several training sequences instead of being truncated); pieces shorter than
    ``min_len`` are dropped."""
    pieces = [list(ids[i : i + max_len]) for i in range(0, len(ids), max_len)]
    return [p for p in pieces if len(p) >= min_len]

"""The one function that picks a recipe's training and validation examples, for every task.

data.limit       a seeded random subset of N training examples, kept in file order
                 (files may be sorted by label, e.g. IMDB)
data.val_split   random: a seeded random val_fraction of the training examples
                 last:   the last val_fraction of each group (classify: each label),
                         in file order, for data whose neighbouring rows are related
validation file  when the dataset has one, it is the validation split as it is
val_fraction 0   no validation: the Trainer keeps the last weights

One continuous text (task lm) is cut by position instead (``split_by_position``).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, TypeVar

from attnkit.data.readers import train_val_split

if TYPE_CHECKING:
    from attnkit.data.settings import DataConfig

__all__ = ["limit_examples", "split_by_position", "split_examples"]

T = TypeVar("T")


def limit_examples(examples: Sequence[T], limit: int | None, seed: int) -> list[T]:
    """``limit`` examples drawn with ``seed`` (all when ``limit`` is None or not smaller),
    in their original order."""
    if not limit or limit >= len(examples):
        return list(examples)
    keep = sorted(random.Random(seed).sample(range(len(examples)), limit))
    return [examples[i] for i in keep]


def split_examples(
    examples: Sequence[T],
    data: DataConfig,
    seed: int,
    validation: Sequence[T] | None = None,
    key: Callable[[T], Hashable] | None = None,
) -> tuple[list[T], list[T]]:
    """(train, validation) for a recipe: ``data.limit`` first, then the validation split:
    ``validation`` when the dataset has that split, else ``data.val_fraction`` of the
    examples held out as ``data.val_split`` says (``key``: the groups ``last`` keeps apart,
    e.g. the label), else none."""
    train = limit_examples(examples, data.limit, seed)
    if validation is not None:
        return train, list(validation)
    if data.val_fraction <= 0:
        return train, []
    return train_val_split(train, data.val_fraction, seed=seed, how=data.val_split, key=key)


def split_by_position(text: str, val_fraction: float) -> tuple[str, str]:
    """(the first 1 - val_fraction of the characters, the rest), nanoGPT's cut:
    ``n = int(len(text) * (1 - val_fraction))``."""
    if val_fraction <= 0:
        return text, ""
    cut = int(len(text) * (1.0 - val_fraction))
    return text[:cut], text[cut:]

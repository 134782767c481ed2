"""Property tests of the one train/validation split (attnkit.data.split), for any input:
train and validation are disjoint and together are the (limited) input, both keep the input
order, the split is a function of the seed, and ``val_split: last`` holds out the last share
of each group."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from attnkit.core.errors import DataError
from attnkit.data.settings import DataConfig
from attnkit.data.split import limit_examples, split_examples

# examples are (position, group): unique, so that "disjoint" and "order" are checkable
examples_st = st.lists(st.integers(0, 3), max_size=60).map(lambda gs: list(enumerate(gs)))
limit_st = st.none() | st.integers(1, 80)
fraction_st = st.floats(0.01, 0.99)
seed_st = st.integers(0, 2**32 - 1)
PROPS = settings(max_examples=150, deadline=None)


def group(ex: tuple[int, int]) -> int:
    return ex[1]


def is_ordered(part: list[tuple[int, int]]) -> bool:
    return all(a[0] < b[0] for a, b in zip(part, part[1:], strict=False))


@PROPS
@given(examples_st, limit_st, seed_st)
def test_limit_is_a_seeded_subsequence(examples, limit, seed):
    kept = limit_examples(examples, limit, seed)
    assert len(kept) == (min(limit, len(examples)) if limit else len(examples))
    assert is_ordered(kept) and set(kept) <= set(examples)
    assert kept == limit_examples(examples, limit, seed)


@PROPS
@given(examples_st, limit_st, fraction_st, st.sampled_from(["random", "last"]), seed_st)
def test_split_partitions_the_limited_input(examples, limit, fraction, how, seed):
    data = DataConfig(val_fraction=fraction, val_split=how, limit=limit)
    limited = limit_examples(examples, limit, seed)
    if len(limited) < 2:
        with pytest.raises(DataError, match="cannot split"):
            split_examples(examples, data, seed, key=group)
        return
    train, val = split_examples(examples, data, seed, key=group)
    assert train and val  # both sides always get at least one example
    assert not set(train) & set(val)
    assert sorted(train + val) == limited  # nothing lost, nothing added
    assert is_ordered(train) and is_ordered(val)
    assert (train, val) == split_examples(examples, data, seed, key=group)  # deterministic
    n = len(limited)
    if how == "random":
        assert len(val) == min(max(1, round(n * fraction)), n - 1)


@PROPS
@given(examples_st, fraction_st, seed_st, seed_st)
def test_last_holds_out_the_end_of_each_group(examples, fraction, seed, other_seed):
    assume(len(examples) >= 2)
    data = DataConfig(val_fraction=fraction, val_split="last")
    train, val = split_examples(examples, data, seed, key=group)
    for g in {group(ex) for ex in examples}:
        # within a group, every validation example comes after every training example
        last_train = max((ex[0] for ex in train if group(ex) == g), default=-1)
        first_val = min((ex[0] for ex in val if group(ex) == g), default=len(examples))
        assert last_train < first_val
    sizes = Counter(group(ex) for ex in examples)
    shares = {g: round(size * fraction) for g, size in sizes.items()}
    if 0 < sum(shares.values()) < len(examples):  # no rounding to an empty side
        assert Counter(group(ex) for ex in val) == +Counter(shares)
    # no randomness: the seed does not matter without a limit
    assert (train, val) == split_examples(examples, data, other_seed, key=group)


@PROPS
@given(examples_st, limit_st, seed_st, st.lists(st.integers(), max_size=5))
def test_a_validation_file_is_used_as_is(examples, limit, seed, validation):
    data = DataConfig(val_fraction=0.3, limit=limit)
    train, val = split_examples(examples, data, seed, validation=validation)
    assert train == limit_examples(examples, limit, seed) and val == validation
    no_val = DataConfig(val_fraction=0.0, limit=limit)
    assert split_examples(examples, no_val, seed) == (train, [])

"""Tests for attnkit.data.batching: BucketBatchSampler and pad_batch."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.data import DataLoader

from attnkit.data import BucketBatchSampler, pad_batch


def lengths(n: int = 1000, seed: int = 0) -> list[int]:
    return np.random.default_rng(seed).integers(1, 200, size=n).tolist()


def padding_ratio(batches: list[list[int]], lens: list[int]) -> float:
    padded = sum(len(b) * max(lens[i] for i in b) for b in batches)
    return 1.0 - sum(lens) / padded


def test_deterministic_given_seed_and_epoch():
    lens = lengths()
    a = BucketBatchSampler(lens, batch_size=16, seed=1)
    b = BucketBatchSampler(lens, batch_size=16, seed=1)
    assert list(a) == list(b)
    a.set_epoch(3)
    b.set_epoch(3)
    assert list(a) == list(b) == a.batches(3)
    assert a.batches(0) != a.batches(1)
    assert a.batches(0) != BucketBatchSampler(lens, batch_size=16, seed=2).batches(0)


@pytest.mark.parametrize("kwargs", [{"batch_size": 7}, {"max_tokens": 500}, {"batch_size": 1}])
def test_every_index_exactly_once(kwargs):
    lens = lengths(503)
    sampler = BucketBatchSampler(lens, bucket_size=60, **kwargs)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        batches = list(sampler)
        assert len(batches) == len(sampler)
        flat = [i for b in batches for i in b]
        assert sorted(flat) == list(range(len(lens)))


def test_max_tokens_budget():
    lens = lengths(800)
    lens[5] = 900  # longer than the budget: a batch of its own
    sampler = BucketBatchSampler(lens, max_tokens=600, seed=0)
    for batch in sampler:
        padded = len(batch) * max(lens[i] for i in batch)
        assert padded <= 600 or batch == [5]
    assert [5] in sampler.batches(0)


def test_less_padding_than_random_batches():
    lens = lengths(2000)
    sampler = BucketBatchSampler(lens, batch_size=32, seed=0)
    bucketed = padding_ratio(list(sampler), lens)
    perm = np.random.default_rng(0).permutation(len(lens)).tolist()
    random_batches = [perm[i : i + 32] for i in range(0, len(perm), 32)]
    assert bucketed < 0.5 * padding_ratio(random_batches, lens)
    assert bucketed < 0.1


def test_batch_order_is_shuffled_but_shuffle_false_is_sequential():
    lens = lengths(640)
    sampler = BucketBatchSampler(lens, batch_size=8, bucket_size=64, seed=0)
    firsts = [max(lens[i] for i in b) for b in sampler]
    assert firsts != sorted(firsts)
    plain = BucketBatchSampler(lens, batch_size=8, bucket_size=len(lens), shuffle=False)
    maxes = [max(lens[i] for i in b) for b in plain]
    assert maxes == sorted(maxes)


def test_drop_last_and_len():
    sampler = BucketBatchSampler(list(range(1, 102)), batch_size=10, drop_last=True)
    assert len(sampler) == 10 and all(len(b) == 10 for b in sampler)
    assert len(BucketBatchSampler(list(range(1, 102)), batch_size=10)) == 11


@pytest.mark.parametrize("kwargs", [{"batch_size": 10}, {"max_tokens": 400}])
def test_resume_mid_epoch_matches_uninterrupted(kwargs):
    lens = lengths(500)
    reference = BucketBatchSampler(lens, seed=7, **kwargs)
    expected = []
    for epoch in range(3):
        reference.set_epoch(epoch)
        expected.extend(reference)

    first = BucketBatchSampler(lens, seed=7, **kwargs)
    first.set_epoch(1)
    got = list(BucketBatchSampler(lens, seed=7, **kwargs).batches(0))
    iterator = iter(first)
    got += [next(iterator) for _ in range(5)]
    state = first.state_dict()
    assert state["epoch"] == 1 and state["position"] == 5

    resumed = BucketBatchSampler(lens, seed=7, **kwargs)
    resumed.load_state_dict(state)
    resumed.set_epoch(1)  # a trainer re-announcing the saved epoch keeps the position
    got += list(resumed)
    resumed.set_epoch(2)
    got += list(resumed)
    assert got == expected


def test_resume_at_end_of_epoch_and_auto_advance():
    lens = lengths(100)
    sampler = BucketBatchSampler(lens, batch_size=10, seed=0)
    epoch0 = list(sampler)
    state = sampler.state_dict()
    assert state["position"] == len(epoch0)
    epoch1 = list(sampler)  # iterating again moves to the next epoch by itself
    assert sampler.epoch == 1 and epoch1 == sampler.batches(1) != epoch0
    other = BucketBatchSampler(lens, batch_size=10, seed=0)
    other.load_state_dict(state)
    assert list(other) == epoch1


def test_state_dict_position_override_and_mismatch():
    sampler = BucketBatchSampler(lengths(100), batch_size=10, seed=0)
    assert sampler.state_dict(position=3)["position"] == 3
    with pytest.raises(ValueError, match="num_examples"):
        BucketBatchSampler(lengths(99), batch_size=10, seed=0).load_state_dict(sampler.state_dict())


def test_works_as_dataloader_batch_sampler():
    lens = lengths(50)
    data = [list(range(n)) for n in lens]
    sampler = BucketBatchSampler(lens, batch_size=8, seed=0)
    loader = DataLoader(data, batch_sampler=sampler, collate_fn=lambda b: pad_batch(b, 0))
    total = 0
    for ids, mask in loader:
        assert ids.shape == mask.shape and ids.dtype == torch.long
        total += int(mask.sum())
    assert total == sum(lens)


def test_invalid_arguments():
    with pytest.raises(ValueError, match="exactly one"):
        BucketBatchSampler([1, 2], batch_size=2, max_tokens=10)
    with pytest.raises(ValueError, match="exactly one"):
        BucketBatchSampler([1, 2])
    with pytest.raises(ValueError):
        BucketBatchSampler([1, 2], batch_size=0)


@settings(max_examples=40, deadline=None)
@given(
    lens=st.lists(st.integers(1, 60), min_size=1, max_size=120),
    batch_size=st.integers(1, 17),
    bucket=st.integers(1, 50),
    seed=st.integers(0, 3),
)
def test_partition_property(lens, batch_size, bucket, seed):
    sampler = BucketBatchSampler(lens, batch_size=batch_size, bucket_size=bucket, seed=seed)
    batches = list(sampler)
    assert sorted(i for b in batches for i in b) == list(range(len(lens)))
    assert all(1 <= len(b) <= batch_size for b in batches)
    tokens = BucketBatchSampler(lens, max_tokens=batch_size * 10, bucket_size=bucket, seed=seed)
    batches = list(tokens)
    assert sorted(i for b in batches for i in b) == list(range(len(lens)))


def test_pad_batch_shapes_and_values():
    ids, mask = pad_batch([[5, 6, 7], [8], []], pad_id=0)
    assert ids.dtype == torch.long and mask.dtype == torch.bool
    assert ids.tolist() == [[5, 6, 7], [8, 0, 0], [0, 0, 0]]
    assert mask.tolist() == [[True, True, True], [True, False, False], [False, False, False]]
    ids, mask = pad_batch([[1, 2, 3, 4], [5]], pad_id=9, max_len=2)
    assert ids.tolist() == [[1, 2], [5, 9]] and mask.sum().item() == 3
    ids, _ = pad_batch([[1], [2]], pad_id=0, max_len=10)
    assert ids.shape == (2, 1)
    with pytest.raises(ValueError):
        pad_batch([], pad_id=0)

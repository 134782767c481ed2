"""``data.limit`` and ``data.val_split`` mean the same for every task: one function
(``attnkit.data.split``) picks the training and validation examples of classify, mlm,
translate and chat. Each task is checked on data whose examples can be told apart."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

from attnkit.data.masking import IGNORE_INDEX
from attnkit.data.split import limit_examples, split_examples
from attnkit.tasks import get_task
from attnkit.tasks.run_config import RunConfig
from conftest import tiny_recipe, write_csv

N, LIMIT, SEED = 60, 40, 3
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]


def _texts(n: int) -> list[str]:
    """n distinct short texts (three words each)."""
    rng = random.Random(0)
    seen: set[str] = set()
    while len(seen) < n:
        seen.add(" ".join(rng.choices(WORDS, k=3)))
    return sorted(seen)


def test_limit_and_split_functions() -> None:
    items = list(range(100))
    sub = limit_examples(items, 30, seed=1)
    assert len(sub) == 30 and sub == sorted(sub) and sub == limit_examples(items, 30, seed=1)
    assert sub != items[:30] and limit_examples(items, None, 1) == items
    cfg = RunConfig.from_dict({"data": {"limit": 30, "val_fraction": 0.2, "val_split": "last"}})
    train, val = split_examples(items, cfg.data, seed=1)
    assert train + val == sub and val == sub[-6:]
    cfg.data.val_fraction = 0.0
    assert split_examples(items, cfg.data, seed=1) == (sub, [])
    assert split_examples(items, cfg.data, 1, validation=[7, 8]) == (sub, [7, 8])


def _expected(texts: list[str], how: str) -> tuple[list[str], list[str]]:
    """What every task must hold out: the seeded subset of LIMIT, then 25% of it."""
    sub = limit_examples(texts, LIMIT, SEED)
    if how == "last":
        return sub[:30], sub[30:]
    order = list(range(LIMIT))
    random.Random(SEED).shuffle(order)
    held = set(order[:10])
    return [t for i, t in enumerate(sub) if i not in held], [sub[i] for i in sorted(held)]


def _recipe(task: str, data: dict, how: str) -> dict:
    sizes = {"d_model": 16, "num_heads": 2, "d_ff": 32, "num_layers": 1}
    return {
        "task": task,
        "data": {**data, "limit": LIMIT, "val_fraction": 0.25, "val_split": how, "max_len": 12},
        "tokenizer": {"kind": "wordpiece", "vocab_size": 60, "min_frequency": 1},
        "model": {"arch": "transformer", **sizes},
        "training": {"seed": SEED, "progress": False},
    }


@pytest.mark.parametrize("how", ["random", "last"])
@pytest.mark.parametrize("task", ["translate", "chat"])
def test_seq2seq_tasks_limit_and_hold_out_like_the_others(
    tmp_path: Path, task: str, how: str
) -> None:
    texts = _texts(N)
    # target = the source reversed: each pair is identified by its target
    (tmp_path / "pairs.tsv").write_text(
        "".join(f"{t}\t{' '.join(reversed(t.split()))}\n" for t in texts), encoding="utf-8"
    )
    cfg = RunConfig.from_dict(
        _recipe(task, {"name": "file", "train": str(tmp_path / "pairs.tsv")}, how)
    )
    data = get_task(task).prepare_data(cfg, None, log=lambda *_: None)
    train, val = _expected(texts, how)
    reverse = lambda t: " ".join(reversed(t.split()))  # noqa: E731
    assert data.extras["val_references"] == [reverse(t) for t in val]
    assert [data.tokenizer.decode(src) for src, _, _ in data.train] == train


@pytest.mark.parametrize("how", ["random", "last"])
def test_mlm_limits_and_holds_out_like_the_others(tmp_path: Path, how: str) -> None:
    texts = _texts(N)
    (tmp_path / "corpus.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    cfg = RunConfig.from_dict(
        _recipe("mlm", {"name": "file", "train": str(tmp_path / "corpus.txt")}, how)
    )
    data = get_task("mlm").prepare_data(cfg, None, log=lambda *_: None)
    train, val = _expected(texts, how)
    tok = data.tokenizer
    assert [tok.decode(ids) for ids in data.train] == train
    originals = []
    for inputs, labels in data.validation:  # undo the masking: labels hold the originals
        x, y = torch.tensor(inputs), torch.tensor(labels)
        originals.append(tok.decode(torch.where(y != IGNORE_INDEX, y, x).tolist()))
    assert originals == val


@pytest.mark.parametrize("how", ["random", "last"])
def test_classify_limits_and_holds_out_like_the_others(tmp_path: Path, how: str) -> None:
    texts = _texts(N)
    rows = [{"text": t, "label": "pos"} for t in texts]  # one class: "last" = last of all
    rows[0]["label"] = rows[-1]["label"] = "neg"
    write_csv(tmp_path / "train.csv", rows)
    recipe = tiny_recipe(tmp_path)
    recipe["data"].update(limit=LIMIT, val_fraction=0.25, val_split=how)
    recipe["training"]["seed"] = SEED
    data = get_task("classify").prepare_data(RunConfig.from_dict(recipe), None, log=lambda *_: None)
    sub = limit_examples(rows, LIMIT, SEED)
    train, val = split_examples(
        sub, RunConfig.from_dict(recipe).data, SEED, key=lambda r: r["label"]
    )
    tok = data.tokenizer
    assert [tok.decode(ids) for ids, _ in data.train] == [r["text"] for r in train]
    assert [tok.decode(ids) for ids, _ in data.validation] == [r["text"] for r in val]
    if how == "last":  # the last quarter of the positives (the negatives round to none)
        pos = [r["text"] for r in sub if r["label"] == "pos"]
        assert [r["text"] for r in val] == pos[-round(len(pos) * 0.25) :]

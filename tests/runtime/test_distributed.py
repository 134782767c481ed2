"""Data-parallel training under torchrun (2 gloo processes on this CPU) against one process
with the same global batch: the same trajectory, one writer, resume after a crash."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

from attnkit.data.tokenization import train_tokenizer
from attnkit.runtime.distributed import Placement, shard
from conftest import make_sentiment_rows, tiny_recipe, write_csv

# Float sums in another order (two half-batch means instead of one batch mean, gradients
# added by an all-reduce): measured differences are ~1e-7; 1e-5 leaves room, a wrong
# share of the batch or gradients not averaged are off by > 1e-2.
RTOL = 1e-5

# Rank 0 SIGKILLs itself while logging step 7 (after the checkpoint of step 6); torchrun
# then stops the other process: a hard crash of a 2-process run.
KILLER = """
import os, signal, sys
import attnkit.runtime.training as T
original = T.Trainer._log
def _log(self, row):
    original(self, row)
    if row.get("step") == 7 and "train_loss" in row:
        os.kill(os.getpid(), signal.SIGKILL)
T.Trainer._log = _log
from attnkit.app.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_shard_splits_a_batch_among_processes():
    batch = list(range(10))
    shares = [shard(batch, Placement(rank=r, world_size=3)) for r in range(3)]
    assert shares == [[0, 3, 6, 9], [1, 4, 7], [2, 5, 8]]
    assert shard(batch, Placement()) is batch  # one process: the whole batch
    # fewer items than processes: each process still gets one (a copy), none is empty
    assert [shard([4, 5], Placement(rank=r, world_size=3)) for r in range(3)] == [[4], [5], [4]]
    with pytest.raises(ValueError, match="empty"):
        shard([], Placement(rank=0, world_size=2))


@pytest.fixture(scope="module")
def recipe(tmp_path_factory) -> Path:
    """The tiny sentiment recipe without dropout (masks differ per process by design),
    with one shared tokenizer file (WordPiece training breaks ties differently in each
    process; see test_trainer_resume)."""
    d = tmp_path_factory.mktemp("ddp")
    write_csv(d / "train.csv", make_sentiment_rows(320, seed=0))  # 288 train: 18 batches of 16
    write_csv(d / "test.csv", make_sentiment_rows(80, seed=1))
    texts = [line.split(",")[0] for line in (d / "train.csv").read_text().splitlines()]
    train_tokenizer(texts, vocab_size=120, min_frequency=1).save(d / "tok.json")
    raw = tiny_recipe(d, epochs=2, save_every=3, eval_every=9)
    raw["model"]["dropout"] = 0.0
    raw["tokenizer"]["path"] = str(d / "tok.json")
    path = d / "recipe.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


def _train(*args: str, procs: int = 2, script: Path | None = None) -> subprocess.CompletedProcess:
    """`attnkit train ...` under torchrun in ``procs`` gloo processes."""
    run = ["-m", "attnkit"] if script is None else [str(script)]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc-per-node={procs}", *run, "train", *args]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)


def _rows(run: Path) -> list[dict]:
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in ("tokens_per_s", "elapsed_s")} for r in rows]


def _assert_same_run(a: Path, b: Path) -> None:
    ra, rb = _rows(a), _rows(b)
    assert [sorted(r) for r in ra] == [sorted(r) for r in rb]  # same rows: one writer
    for x, y in zip(ra, rb, strict=True):
        for key in x:
            assert x[key] == pytest.approx(y[key], rel=RTOL, abs=1e-7), (x["step"], key)
    wa = load_file(str(a / "model.safetensors"))
    wb = load_file(str(b / "model.safetensors"))
    for name in wa:
        # the key projection's bias adds the same number to every score of a query, which
        # softmax ignores: its true gradient is 0, so it only follows float noise (which
        # Adam scales up to lr-sized steps); every other weight matches closely
        if not name.endswith("k_proj.bias"):
            torch.testing.assert_close(wa[name], wb[name], rtol=1e-4, atol=1e-5, msg=name)


# Micro-batches of 8 (4 per process), 2 per optimizer step: the processes average their
# gradients once per step (no_sync on the first micro-batch, the sync on the second: the
# path every step takes without accumulation), and must match one process.
ACCUMULATE = ("--set", "training.batch_size=8", "--set", "training.grad_accum=2")


@pytest.fixture(scope="module")
def runs(recipe, tmp_path_factory) -> dict[str, Path]:
    """The same recipe trained by one process and by two."""
    from attnkit.app.cli import main

    out = tmp_path_factory.mktemp("ddp-runs")
    # one process: `attnkit train` in this one (no child process to start); two: torchrun
    assert main(["train", str(recipe), "--out", str(out / "one"), *ACCUMULATE]) == 0
    done = _train(str(recipe), "--out", str(out / "two"), *ACCUMULATE)
    assert done.returncode == 0, done.stderr[-3000:]
    return {"one": out / "one", "two": out / "two", "out": out}


@pytest.mark.slow
def test_two_processes_follow_the_one_process_trajectory(runs):
    """With gradient accumulation (ACCUMULATE): every loss, evaluation and weight as one
    process computes them."""
    rows = _rows(runs["two"])
    steps = [r["step"] for r in rows if "train_loss" in r]
    assert steps == list(range(1, 37))  # 2 epochs x 18 steps, each logged once
    assert sum("val_accuracy" in r for r in rows) == 4  # steps 9, 18, 27, 36
    _assert_same_run(runs["one"], runs["two"])
    # rank 0 wrote the run like a one-process run: config, tokenizer, curves, last/
    for name in ("config.json", "tokenizer.json", "curves.png", "last/state.json"):
        assert (runs["two"] / name).is_file(), name


@pytest.mark.slow
def test_a_crashed_two_process_run_resumes_exactly(recipe, runs, tmp_path):
    killer = tmp_path / "killer.py"
    killer.write_text(KILLER, encoding="utf-8")
    crash = str(tmp_path / "crash")
    crashed = _train(str(recipe), "--out", crash, *ACCUMULATE, procs=2, script=killer)
    assert crashed.returncode != 0
    state = json.loads((tmp_path / "crash/last/state.json").read_text())
    assert state["step"] == 6
    resumed = _train("--resume", "--out", str(tmp_path / "crash"), procs=2)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert resumed.stdout.count("done:") == 1  # rank 0 reports, rank 1 does not
    _assert_same_run(runs["two"], tmp_path / "crash")


def test_bad_torchrun_environment_is_a_config_error(monkeypatch):
    from attnkit.core.errors import ConfigError
    from attnkit.runtime.distributed import placement

    monkeypatch.setenv("WORLD_SIZE", "two")
    with pytest.raises(ConfigError, match="WORLD_SIZE='two' is not an integer"):
        placement()
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "5")
    with pytest.raises(ConfigError, match="outside WORLD_SIZE=2"):
        placement()
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert placement() == Placement(rank=1, world_size=2, local_rank=1)

"""The Trainer on a real (tiny) task: exact resume after SIGKILL, early stopping, atomic
checkpoints, schedules (the toy-task unit tests are in tests/runtime/test_training.py)."""

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

from attnkit.app.api import RunError, load, train
from attnkit.core import checkpoint as ckpt
from attnkit.data.tokenization import train_tokenizer
from attnkit.runtime.training import lr_multiplier, make_adamw
from attnkit.runtime.training_config import TrainingConfig
from attnkit.tasks.run_config import RunConfig
from conftest import tiny_recipe

KILL_AT_STEP = 7

# Runs `attnkit train` in a child process that SIGKILLs itself while logging step 7
# (after the checkpoint of step 6, before the one of step 9): a hard crash mid-run.
KILLER = """
import os, signal, sys
import attnkit.runtime.training as T
original = T.Trainer._log
def _log(self, row):
    original(self, row)
    if row.get("step") == {step} and "train_loss" in row:
        os.kill(os.getpid(), signal.SIGKILL)
T.Trainer._log = _log
from attnkit.app.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _cli(*args, killer=False):
    code = (
        KILLER.replace("{step}", str(KILL_AT_STEP))
        if killer
        else ("import sys; from attnkit.app.cli import main; sys.exit(main(sys.argv[1:]))")
    )
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300
    )


def _cli_here(*args) -> int:
    """`attnkit train ...` in this process (cli.main, no child process): the unbroken
    reference run a crashed child's resume is compared with (the crash and the resume stay
    real processes)."""
    from attnkit.app.cli import main

    return main(list(args))


def _rows(run):
    lines = (Path(run) / "metrics.jsonl").read_text().splitlines()
    return [json.loads(x) for x in lines]


@pytest.mark.slow
def test_resume_after_sigkill_reproduces_the_uninterrupted_run(tmp_path, tiny_data):
    # WordPiece training in `tokenizers` breaks ties differently in each process, so both
    # runs share one tokenizer file; everything after that must be bit-for-bit reproducible.
    texts = [line.split(",")[0] for line in (tiny_data / "train.csv").read_text().splitlines()]
    train_tokenizer(texts, vocab_size=120, min_frequency=1).save(tmp_path / "tok.json")
    recipe_dict = tiny_recipe(tiny_data, save_every=3, epochs=2)
    recipe_dict["tokenizer"]["path"] = str(tmp_path / "tok.json")
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump(recipe_dict))
    assert _cli_here("train", str(recipe), "--out", str(tmp_path / "full")) == 0

    crashed = _cli("train", str(recipe), "--out", str(tmp_path / "crash"), killer=True)
    assert crashed.returncode == -9  # really killed
    state = json.loads((tmp_path / "crash/last/state.json").read_text())
    assert state["step"] == 6
    resumed = _cli("train", "--resume", "--out", str(tmp_path / "crash"))
    assert resumed.returncode == 0, resumed.stderr

    a, b = _rows(tmp_path / "full"), _rows(tmp_path / "crash")
    strip = [{k: v for k, v in r.items() if k not in ("tokens_per_s", "elapsed_s")} for r in a]
    strip_b = [{k: v for k, v in r.items() if k not in ("tokens_per_s", "elapsed_s")} for r in b]
    assert strip == strip_b  # same losses at every step, same evaluations, no duplicates
    wa = load_file(str(tmp_path / "full/last/model.safetensors"))
    wb = load_file(str(tmp_path / "crash/last/model.safetensors"))
    for name in wa:
        torch.testing.assert_close(wa[name], wb[name], rtol=0, atol=0)


def test_early_stopping_and_best_checkpoint(tmp_path, tiny_data):
    # lr so small nothing changes: the first evaluation stays the best, patience 2 stops it.
    cfg = RunConfig.from_dict(
        tiny_recipe(
            tiny_data,
            lr=1e-12,
            schedule="constant",
            warmup_steps=0,
            eval_every=2,
            patience=2,
            epochs=5,
        )
    )
    result = train(cfg, out=tmp_path / "run", log=lambda *_: None)
    assert result.stopped_early
    assert result.step == 6 and result.best_step == 2
    evals = [r for r in _rows(tmp_path / "run") if "val_accuracy" in r]
    assert [r["step"] for r in evals] == [2, 4, 6]
    assert (tmp_path / "run/curves.png").is_file()
    assert load(tmp_path / "run").predict(["the movie was great"])[0].label in ("neg", "pos")


@pytest.mark.slow
def test_training_learns_the_tiny_task(tmp_path, tiny_data):
    cfg = RunConfig.from_dict(tiny_recipe(tiny_data, epochs=6))
    result = train(cfg, out=tmp_path / "run", log=lambda *_: None)
    assert result.best_metric >= 0.9
    rows = [r for r in _rows(tmp_path / "run") if "train_loss" in r]
    assert rows[-1]["train_loss"] < rows[0]["train_loss"]


def test_grad_accumulation_counts_optimizer_steps(tmp_path, tiny_data):
    """288 examples / batch 16 = 18 micro-batches; accumulating 4 gives ceil(18/4) = 5
    optimizer steps per epoch (the last group has 2 micro-batches)."""
    cfg = RunConfig.from_dict(tiny_recipe(tiny_data, epochs=2, grad_accum=4))
    result = train(cfg, out=tmp_path / "run", log=lambda *_: None)
    assert result.step == 10
    evals = [r for r in _rows(tmp_path / "run") if "val_accuracy" in r]
    assert [(r["step"], r["epoch"]) for r in evals] == [(5, 0), (10, 1)]


@pytest.mark.slow
def test_existing_run_is_not_overwritten(tmp_path, tiny_data):
    cfg = RunConfig.from_dict(tiny_recipe(tiny_data, max_steps=2))
    train(cfg, out=tmp_path / "run", log=lambda *_: None)
    before = (tmp_path / "run/model.safetensors").read_bytes()
    with pytest.raises(RunError, match="already holds a run"):
        train(cfg, out=tmp_path / "run", log=lambda *_: None)
    assert (tmp_path / "run/model.safetensors").read_bytes() == before
    with pytest.raises(RunError, match="no resumable checkpoint"):
        train(None, out=tmp_path / "nothing", resume=True)


def test_checkpoint_write_is_atomic(tmp_path, monkeypatch):
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.AdamW(model.parameters())
    model(torch.randn(4, 3)).sum().backward()
    opt.step()
    ckpt.save_training_state(tmp_path / "last", model, opt, {"step": 1})
    good = (tmp_path / "last/model.safetensors").read_bytes()

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(ckpt, "save_file", broken)
    with torch.no_grad():
        model.weight.add_(1.0)
    with pytest.raises(OSError, match="disk full"):
        ckpt.save_training_state(tmp_path / "last", model, opt, {"step": 2})
    assert (tmp_path / "last/model.safetensors").read_bytes() == good
    assert json.loads((tmp_path / "last/state.json").read_text())["step"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last"]  # no temp leftovers
    monkeypatch.undo()
    fresh = torch.nn.Linear(3, 2)
    fresh_opt = torch.optim.AdamW(fresh.parameters())
    state = ckpt.load_training_state(tmp_path / "last", fresh, fresh_opt)
    assert state["step"] == 1
    torch.testing.assert_close(
        fresh_opt.state_dict()["state"][0]["exp_avg"], opt.state_dict()["state"][0]["exp_avg"]
    )


def test_no_pickle_in_run_directory(tmp_path, tiny_data):
    cfg = RunConfig.from_dict(tiny_recipe(tiny_data, max_steps=2))
    train(cfg, out=tmp_path / "run", log=lambda *_: None)
    files = [p for p in (tmp_path / "run").rglob("*") if p.is_file() and p.name != ".lock"]
    assert {p.suffix for p in files} <= {".json", ".jsonl", ".safetensors", ".png"}


def test_trainer_adamw_matches_the_reference_adamw():
    """The Trainer's AdamW (fused where PyTorch has the kernel) takes the same steps as the
    textbook for-loop AdamW, with weight decay on matrices only."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.Linear(16, 3)
    )
    ref_model = copy.deepcopy(model)
    start = copy.deepcopy(model)
    cfg = TrainingConfig(lr=1e-2, weight_decay=0.1)
    opt = make_adamw(model, cfg)
    assert opt.defaults["fused"] or opt.defaults["foreach"]
    params = list(ref_model.parameters())
    ref = torch.optim.AdamW(
        [
            {"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
        ],
        lr=1e-2,
        betas=tuple(cfg.betas),
        foreach=False,
    )
    x, y = torch.randn(32, 8), torch.randint(0, 3, (32,))
    for _ in range(20):
        for m, o in ((model, opt), (ref_model, ref)):
            o.zero_grad()
            torch.nn.functional.cross_entropy(m(x), y).backward()
            o.step()
    for p, q, p0 in zip(
        model.parameters(), ref_model.parameters(), start.parameters(), strict=True
    ):
        assert not torch.allclose(p, p0)
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("schedule", ["linear", "cosine", "constant"])
def test_warmup_then_decay(schedule):
    lrs = [lr_multiplier(schedule, s, warmup=10, total=100) for s in range(1, 101)]
    assert lrs[0] == pytest.approx(0.1) and lrs[9] == pytest.approx(1.0)
    assert max(lrs) == pytest.approx(1.0)
    if schedule == "constant":
        assert lrs[-1] == pytest.approx(1.0)
    else:
        assert lrs[-1] == pytest.approx(0.0, abs=1e-9)
        assert all(a >= b for a, b in zip(lrs[9:], lrs[10:], strict=False))


def test_noam_schedule_formula():
    d, w = 512, 4000
    for step in (1, 100, 4000, 20000):
        expected = d**-0.5 * min(step**-0.5, step * w**-1.5)
        assert lr_multiplier("noam", step, w, 10**6, d_model=d) == pytest.approx(expected)
    peak = max(range(1, 10000, 10), key=lambda s: lr_multiplier("noam", s, w, 10**6, d))
    assert abs(peak - w) <= 10


def test_limit_takes_a_seeded_subset_not_the_head(tmp_path):
    """IMDB's files are sorted by label: `data.limit` must not keep only the first class."""
    from attnkit.tasks.classify import prepare_data
    from conftest import make_sentiment_rows, write_csv

    rows = sorted(make_sentiment_rows(400, seed=3), key=lambda r: r["label"])
    write_csv(tmp_path / "train.csv", rows)
    write_csv(tmp_path / "test.csv", rows[:10])
    recipe = tiny_recipe(tmp_path)
    recipe["data"]["limit"] = 60
    cfg = RunConfig.from_dict(recipe)
    data = prepare_data(cfg, log=lambda *_: None)
    labels = {y for _, y in data.train} | {y for _, y in data.validation}
    assert labels == {0, 1}
    assert len(data.train) + len(data.validation) == 60
    again = prepare_data(cfg, tokenizer=data.tokenizer, log=lambda *_: None)
    assert again.train == data.train  # same seed, same subset


def test_truncation_setting_reaches_training_and_prediction(tmp_path):
    """`data.truncation: tail` keeps the end of long reviews in training and in predict."""
    from attnkit.tasks.classify import ClassifierPredictor, prepare_data
    from conftest import make_sentiment_rows, write_csv

    rows = make_sentiment_rows(60, seed=4)
    long_text = " ".join(["the movie"] * 10 + ["great"])  # the verdict comes after max_len
    rows[0]["text"] = long_text
    write_csv(tmp_path / "train.csv", rows)
    write_csv(tmp_path / "test.csv", rows[:5])
    recipe = tiny_recipe(tmp_path)
    recipe["data"].update(val_fraction=0.0, max_len=6, truncation="tail")
    cfg = RunConfig.from_dict(recipe)
    data = prepare_data(cfg, log=lambda *_: None)
    tok = data.tokenizer
    expected = tok.encode(long_text, max_len=6, keep="tail")
    assert expected[-1] == tok.encode("great")[-1] != tok.encode(long_text, max_len=6)[-1]
    assert data.train[0][0] == expected and data.extras["truncated"] >= 1
    predictor = ClassifierPredictor(torch.nn.Identity(), tok, cfg, ["neg", "pos"])
    with pytest.warns(UserWarning, match=r"truncated \(kept: tail\)"):
        ids, _, cut = predictor.encode([long_text])
    assert ids == [expected] and cut == [True]


def test_val_split_last_holds_out_the_end_of_each_class(tmp_path):
    from attnkit.tasks.classify import prepare_data
    from conftest import make_sentiment_rows, write_csv

    rows = sorted(make_sentiment_rows(100, seed=6), key=lambda r: r["label"])  # like IMDB
    write_csv(tmp_path / "train.csv", rows)
    write_csv(tmp_path / "test.csv", rows[:5])
    recipe = tiny_recipe(tmp_path)
    recipe["data"].update(val_split="last", val_fraction=0.1)
    data = prepare_data(RunConfig.from_dict(recipe), log=lambda *_: None)
    tok = data.tokenizer
    neg = [r["text"] for r in rows if r["label"] == "neg"]
    pos = [r["text"] for r in rows if r["label"] == "pos"]
    held_out = neg[-round(len(neg) * 0.1) :] + pos[-round(len(pos) * 0.1) :]
    assert [ids for ids, _ in data.validation] == [tok.encode(t, max_len=16) for t in held_out]
    assert len(data.train) + len(data.validation) == 100

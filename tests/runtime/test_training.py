"""The Trainer on a toy task (CPU): devices, precision, the Noam width, checkpoints, resume,
torch.compile. Resume after SIGKILL, early stopping and schedules on a real task are in
tests/runtime/test_training_resume.py."""

from __future__ import annotations

import os
from collections import namedtuple
from dataclasses import dataclass

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from torch import nn

from attnkit.core import checkpoint as ckpt
from attnkit.core.config import ConfigError
from attnkit.runtime.run import RunDir
from attnkit.runtime.training import (
    Trainer,
    cpu_has_native_bf16,
    lr_multiplier,
    make_adamw,
    resolve_device,
    schedule_width,
    to_device,
)
from attnkit.runtime.training_config import TrainingConfig

FEATURES = 8


class ToyObjective:
    """Two classes of random feature vectors, split by a fixed hyperplane."""

    metric = "accuracy"
    greater_is_better = True

    def __init__(self) -> None:
        self.logit_dtypes: list[torch.dtype] = []  # dtype of the logits in each loss()

    def collate(self, items):
        x = torch.stack([x for x, _ in items])  # (B, FEATURES)
        y = torch.tensor([y for _, y in items])  # (B,)
        return {"x": x, "y": y, "note": "not a tensor"}

    def loss(self, model, batch):
        logits = model(batch["x"])  # (B, 2)
        self.logit_dtypes.append(logits.dtype)
        return F.cross_entropy(logits.float(), batch["y"]), len(batch["y"])

    def evaluate(self, model, batches):
        correct = total = 0
        loss = 0.0
        for batch in batches:
            logits = model(batch["x"]).float()
            loss += F.cross_entropy(logits, batch["y"], reduction="sum").item()
            correct += int((logits.argmax(-1) == batch["y"]).sum())
            total += len(batch["y"])
        return {"accuracy": correct / total, "loss": loss / total}


class ToyModel(nn.Module):
    def __init__(self, hidden: int = 16) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(FEATURES, hidden), nn.ReLU(), nn.Dropout(0.2), nn.Linear(hidden, 2)
        )

    def forward(self, x):
        return self.net(x)


@dataclass
class ToyConfig:
    hidden_width: int


class ConfiguredModel(ToyModel):
    def __init__(self, hidden_width: int) -> None:
        super().__init__()
        self.config = ToyConfig(hidden_width)


def make_items(n: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, FEATURES, generator=g)
    y = (x @ torch.linspace(-1, 1, FEATURES) > 0).long()
    return [(x[i], int(y[i])) for i in range(n)]


def make_trainer(run, model=None, task=None, n_train=32, n_val=16, on_best=None, **training):
    torch.manual_seed(0)
    model = model if model is not None else ToyModel()
    train, val = make_items(n_train, seed=0), make_items(n_val, seed=1)
    config = TrainingConfig(
        **{"batch_size": 8, "lr": 1e-2, "log_every": 1, "progress": False, **training}
    )
    return Trainer(
        model,
        task or ToyObjective(),
        train,
        [1] * len(train),
        val or None,
        [1] * len(val) if val else None,
        config,
        run,
        on_best=on_best,
    )


def weights(module: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def assert_same_weights(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=0, atol=0)


# ---------------------------------------------------------------------- devices, precision
def test_resolve_device(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")
    assert resolve_device("cpu") == torch.device("cpu")
    for name in ("cuda", "cuda:1", "mps"):
        with pytest.raises(ConfigError, match="training.device .* not available"):
            resolve_device(name)
    for name in ("gpu", "meta", ""):
        with pytest.raises(ConfigError, match="training.device: unknown device"):
            resolve_device(name)


def test_trainer_runs_on_the_resolved_device(tmp_path):
    trainer = make_trainer(tmp_path, device="auto")
    expected = resolve_device("auto")
    assert trainer.device == expected
    assert all(p.device.type == expected.type for p in trainer.model.parameters())


def test_precision_settings_are_checked(tmp_path):
    with pytest.raises(ConfigError, match=r"training.fp16 needs a CUDA device .*resolved to cpu"):
        make_trainer(tmp_path, device="cpu", fp16=True)
    with pytest.raises(ConfigError, match="training.bf16 and training.fp16"):
        make_trainer(tmp_path, device="cpu", bf16=True, fp16=True)


def test_to_device_moves_nested_tensors_and_keeps_the_rest():
    Pair = namedtuple("Pair", "a b")
    batch = {
        "ids": torch.ones(2, 3, dtype=torch.long),
        "more": [torch.zeros(1), ("text", torch.ones(2))],
        "pair": Pair(torch.ones(1), 7),
        "n": 3,
    }
    moved = to_device(batch, torch.device("meta"))  # a device every machine has
    assert moved["ids"].device.type == "meta" and moved["ids"].dtype == torch.long
    assert moved["more"][0].device.type == "meta"
    assert moved["more"][1][0] == "text" and moved["more"][1][1].device.type == "meta"
    assert isinstance(moved["pair"], Pair) and moved["pair"].a.device.type == "meta"
    assert moved["pair"].b == 7 and moved["n"] == 3
    same = to_device(batch, torch.device("cpu"))
    assert same["ids"] is batch["ids"]  # already there: no copy


def test_bf16_autocast_trains_in_bf16_on_cpu(tmp_path):
    task = ToyObjective()
    trainer = make_trainer(tmp_path, task=task, device="cpu", bf16=True, max_steps=4)
    assert trainer.precision.name == "bf16"
    assert trainer.precision.emulated == (not cpu_has_native_bf16())
    before = weights(trainer.model)
    result = trainer.fit()
    assert result.step == 4
    assert task.logit_dtypes and set(task.logit_dtypes) == {torch.bfloat16}
    assert trainer.model.net[0].weight.dtype == torch.float32  # master weights stay fp32
    after = weights(trainer.model)
    assert any(not torch.equal(before[k], after[k]) for k in before)
    rows = RunDir(tmp_path).read_metrics()
    assert all(torch.isfinite(torch.tensor(r["train_loss"])) for r in rows if "train_loss" in r)


# ---------------------------------------------------------------------- schedule
@pytest.mark.slow
@pytest.mark.parametrize(
    ("make_model", "width"), [(lambda: ConfiguredModel(hidden_width=64), 64), (ToyModel, 512)]
)
def test_noam_reads_the_width_from_the_model_config(tmp_path, make_model, width):
    model = make_model()
    assert schedule_width(model) == width
    trainer = make_trainer(
        tmp_path, model=model, schedule="noam", lr=1.0, warmup_steps=3, max_steps=5
    )
    trainer.fit()
    lrs = {r["step"]: r["lr"] for r in RunDir(tmp_path).read_metrics() if "lr" in r}
    assert sorted(lrs) == [1, 2, 3, 4, 5]
    for step, lr in lrs.items():
        expected = width**-0.5 * min(step**-0.5, step * 3**-1.5)
        assert lr == pytest.approx(expected, rel=1e-12)
        assert lr == pytest.approx(lr_multiplier("noam", step, 3, 5, width), rel=1e-12)


# ---------------------------------------------------------------------- checkpoints, resume
def test_best_weights_and_checkpoint_reload_on_cpu(tmp_path):
    calls = []
    trainer = make_trainer(tmp_path, max_steps=4, eval_every=2, on_best=calls.append)
    result = trainer.fit()
    run = RunDir(tmp_path)
    assert calls and all(c == run.path for c in calls)
    assert run.has_weights() and run.has_checkpoint() and run.curves_path.is_file()
    assert result.best_step in (2, 4) and result.last_metrics["step"] == 4
    evals = [r for r in run.read_metrics() if "val_accuracy" in r]
    assert [r["step"] for r in evals] == [2, 4]

    best = ToyModel()
    run.load_weights(best, map_location="cpu")  # strict: the keys match
    resumed = ToyModel()
    state = run.load_checkpoint(resumed, make_adamw(resumed, trainer.cfg), map_location="cpu")
    assert state["step"] == 4 and state["best_step"] == result.best_step
    assert_same_weights(weights(resumed), weights(trainer.model))


@pytest.mark.parametrize(("every", "drawn"), [(0.0, 3), (3600.0, 1)])
def test_curves_are_drawn_at_most_every_curves_every_s_and_at_the_end(
    tmp_path, monkeypatch, every, drawn
):
    """Evaluations at steps 2 and 4: curves.png after each and at the end when
    ``curves_every_s`` has passed, else only at the end (the figure then holds both)."""
    from attnkit.runtime import viz

    calls = []
    draw = viz.draw_run_curves
    monkeypatch.setattr(viz, "draw_run_curves", lambda run: calls.append(run) or draw(run))
    trainer = make_trainer(tmp_path, max_steps=4, eval_every=2)
    trainer.curves_every_s = every
    trainer.fit()
    assert len(calls) == drawn and RunDir(tmp_path).curves_path.is_file()


def test_checkpoint_with_cuda_rng_states_loads_without_cuda(tmp_path, monkeypatch):
    """A checkpoint written on a GPU machine carries CUDA RNG states; a CPU-only machine
    skips them (and one written on a CPU has none to restore)."""
    model = nn.Linear(3, 2)
    opt = torch.optim.AdamW(model.parameters())
    on_gpu_machine = ckpt.rng_state
    monkeypatch.setattr(
        ckpt, "rng_state", lambda: {**on_gpu_machine(), "cuda": [torch.get_rng_state()]}
    )
    ckpt.save_training_state(tmp_path / "last", model, opt, {"step": 3})
    assert "__rng_cuda_0__" in load_file(str(tmp_path / "last/optimizer.safetensors"))
    monkeypatch.undo()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    state = ckpt.load_training_state(tmp_path / "last", nn.Linear(3, 2), opt, map_location="cpu")
    assert state == {"step": 3}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("n_train", "grad_accum"),
    [
        (24, 1),  # 3 steps per epoch: step 4 is in the middle of epoch 1
        (32, 1),  # 4 steps per epoch: the first run stops at the end of epoch 0
        (40, 2),  # 5 micro-batches per epoch: groups of 2, 2, 1
    ],
)
def test_resume_after_a_finished_run_continues_exactly(tmp_path, n_train, grad_accum):
    common = {"n_train": n_train, "grad_accum": grad_accum, "schedule": "constant"}
    common["warmup_steps"] = 0
    full = make_trainer(tmp_path / "full", max_steps=8, **common)
    full.fit()

    make_trainer(tmp_path / "part", max_steps=4, **common).fit()
    again = make_trainer(tmp_path / "part", max_steps=8, **common)
    result = again.fit(resume=True)
    assert result.step == 8

    assert_same_weights(weights(again.model), weights(full.model))
    assert_same_weights(
        load_file(str(tmp_path / "part/last/model.safetensors")),
        load_file(str(tmp_path / "full/last/model.safetensors")),
    )

    def train_rows(run):
        keep = ("step", "epoch", "train_loss", "lr")
        rows = RunDir(run).read_metrics()
        return [{k: r[k] for k in keep} for r in rows if "train_loss" in r]

    assert train_rows(tmp_path / "part") == train_rows(tmp_path / "full")


# ---------------------------------------------------------------------- torch.compile
@pytest.mark.slow
@pytest.mark.parametrize(
    "backend",
    [
        "aot_eager",  # dynamo's graph capture and AOTAutograd, no code generation
        pytest.param(
            "inductor",  # what training.compile uses: ~35 s cold on 2 cores, all of it Inductor
            marks=pytest.mark.skipif(
                not os.environ.get("ATTNKIT_TEST_INDUCTOR"),
                reason="Inductor's code generation: ATTNKIT_TEST_INDUCTOR=1 (make test-inductor)",
            ),
        ),
    ],
)
def test_compile_trains_and_saves_plain_weight_names(tmp_path, monkeypatch, backend):
    """The Trainer trains through the compiled module and saves the plain one's names. The
    backend is torch.compile's own business; which one compiled changes neither."""
    compile_ = torch.compile
    monkeypatch.setattr(torch, "compile", lambda model: compile_(model, backend=backend))
    trainer = make_trainer(tmp_path, compile=True, max_steps=2, n_train=16, n_val=0)
    assert trainer.train_model is not trainer.model
    try:
        trainer.fit()
    except Exception as exc:  # Inductor needs a working C++ compiler on the CPU
        text = f"{type(exc).__name__}: {exc}"
        if any(word in text for word in ("Cxx", "CppCompile", "compiler", "C++")):
            pytest.skip(f"torch.compile unavailable here: {text.splitlines()[0]}")
        raise
    for path in (tmp_path / "model.safetensors", tmp_path / "last/model.safetensors"):
        keys = set(load_file(str(path)))
        assert keys == set(ToyModel().state_dict())  # no "_orig_mod." prefix

"""Non-finite training stops loudly, and a model with non-finite outputs is an error
(issue 32, item 4): a NaN loss or gradient norm stops training with one line naming the
step and the learning rate, nothing is written from the diverged state (last/ and the
best weights stay), NaN is never a best metric; predictors, the CLI and the server never
emit NaN (JSON stays valid)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

from attnkit.app.cli import main
from attnkit.core.errors import NonFiniteError, TrainingError, check_finite, json_line
from attnkit.runtime.training import FP16_MAX_SKIPPED, Trainer
from attnkit.runtime.training_config import TrainingConfig

FEATURES = 8
NON_FINITE_LINE = (
    "attnkit: error: the model's outputs are not finite numbers (NaN or infinity): its "
    "weights are damaged or its training diverged (train it again, with a lower "
    "training.lr)\n"
)


# ----------------------------------------------------------------------------- the Trainer
class Toy(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(FEATURES, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2)
        )

    def forward(self, x):
        return self.net(x)


class ToyObjective:
    """Random feature vectors split by a hyperplane; ``nan_from``: the loss is NaN from that
    call on; ``nan_metric``: evaluation says NaN."""

    metric = "accuracy"
    greater_is_better = True

    def __init__(self, nan_from: int | None = None, nan_metric: bool = False) -> None:
        self.calls, self.nan_from, self.nan_metric = 0, nan_from, nan_metric

    def collate(self, items):
        return {"x": torch.stack([x for x, _ in items]), "y": torch.tensor([y for _, y in items])}

    def loss(self, model, batch):
        self.calls += 1
        loss = F.cross_entropy(model(batch["x"]).float(), batch["y"])
        if self.nan_from is not None and self.calls >= self.nan_from:
            loss = loss * float("nan")
        return loss, len(batch["y"])

    def evaluate(self, model, batches):
        correct = total = 0
        for batch in batches:
            correct += int((model(batch["x"]).argmax(-1) == batch["y"]).sum())
            total += len(batch["y"])
        accuracy = float("nan") if self.nan_metric else correct / total
        return {"accuracy": accuracy, "loss": 1.0 - correct / max(total, 1)}


def items(n: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, FEATURES, generator=g)
    y = (x @ torch.linspace(-1, 1, FEATURES) > 0).long()
    return [(x[i], int(y[i])) for i in range(n)]


def trainer(run: Path, task: ToyObjective, model=None, **training) -> Trainer:
    torch.manual_seed(0)
    train, val = items(32, 0), items(16, 1)
    config = TrainingConfig(
        **{
            "batch_size": 8,
            "lr": 1e-2,
            "log_every": 1,
            "eval_every": 1,
            "progress": False,
            "device": "cpu",
            "bf16": False,
            **training,
        }  # fmt: skip
    )
    t = Trainer(model or Toy(), task, train, [1] * len(train), val, [1] * len(val), config, run)
    t._plot = lambda **_: None  # curves.png is not what is tested here
    return t


def test_a_nan_loss_stops_before_the_update_and_keeps_the_last_checkpoint(tmp_path) -> None:
    t = trainer(tmp_path, ToyObjective(nan_from=3), epochs=2)
    with pytest.raises(TrainingError) as caught:
        t.fit()
    message = str(caught.value)
    assert message == (
        f"training diverged at step 3 (lr {t._current_lr():.3g}): the loss is nan; the last "
        f"good checkpoint is kept in {tmp_path / 'last'}; lower training.lr (or raise "
        "training.warmup_steps)"
    )
    state = json.loads((tmp_path / "last" / "state.json").read_text())
    assert state["step"] == 2 and math.isfinite(state["best"])
    best = load_file(tmp_path / "model.safetensors")
    assert all(torch.isfinite(v).all() for v in best.values())
    assert all(torch.isfinite(p).all() for p in t.model.parameters())  # never updated by NaN
    rows = (tmp_path / "metrics.jsonl").read_text()
    assert "NaN" not in rows and "Infinity" not in rows


def test_an_infinite_gradient_norm_stops_training(tmp_path) -> None:
    model = Toy()
    first = model.net[0].weight
    first.register_hook(lambda g: g * float("inf"))
    with pytest.raises(TrainingError, match=r"^training diverged at step 1 \(lr .*\): the "
                       r"gradient norm is (inf|nan); nothing was saved yet"):  # fmt: skip
        trainer(tmp_path, ToyObjective(), model=model).fit()
    assert not (tmp_path / "model.safetensors").exists()


def test_a_nan_validation_metric_is_never_the_best(tmp_path) -> None:
    with pytest.raises(TrainingError, match=r"at step 1 .*: the validation accuracy is nan"):
        trainer(tmp_path, ToyObjective(nan_metric=True)).fit()
    assert not (tmp_path / "model.safetensors").exists()
    assert not (tmp_path / "last").exists()


class FakeScaler:
    """A GradScaler whose gradients overflow at the steps in ``overflow`` (it then skips the
    update and halves its scale, as torch's does)."""

    def __init__(self, overflow) -> None:
        self.scale_value, self.overflow, self.steps = 2.0**16, overflow, 0

    def scale(self, loss):
        return loss

    def unscale_(self, optimizer):
        pass

    def get_scale(self):
        return self.scale_value

    def step(self, optimizer):
        self.steps += 1
        if self.steps not in self.overflow:
            optimizer.step()

    def update(self):
        if self.steps in self.overflow:
            self.scale_value /= 2

    def state_dict(self):
        return {"scale": self.scale_value}


def test_fp16_overflows_now_and_then_are_normal(tmp_path) -> None:
    t = trainer(tmp_path, ToyObjective(), max_steps=12, eval_every=12)
    t.scaler = FakeScaler(overflow={1, 2, 3, 7, 8})
    assert t.fit().step == 12


def test_fp16_overflowing_step_after_step_is_divergence(tmp_path) -> None:
    t = trainer(tmp_path, ToyObjective(), max_steps=100, eval_every=50)
    t.scaler = FakeScaler(overflow=set(range(5, 200)))
    with pytest.raises(TrainingError, match=rf"at step {4 + FP16_MAX_SKIPPED} .*: the fp16 "
                       rf"gradients overflowed {FP16_MAX_SKIPPED} steps in a row"):  # fmt: skip
        t.fit()


# ----------------------------------------------------------------------------- the CLI
def test_train_with_a_huge_lr_is_one_line_and_leaves_nothing(tiny_config, tmp_path, capsys):
    out = tmp_path / "runs" / "x"
    assert main(["train", str(tiny_config), "--out", str(out), "--set", "training.lr=1e6"]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert err[-1].startswith("attnkit: error: training diverged at step ")
    assert "(lr " in err[-1] and "the loss is nan" in err[-1] and "nothing was saved yet" in err[-1]
    assert "done:" not in captured.out and "nan" not in captured.out
    assert not out.exists() or not any(out.iterdir())


def test_resuming_into_divergence_keeps_last_and_the_best_weights(tiny_run_once, tmp_path, capsys):
    run = Path(shutil.copytree(tiny_run_once, tmp_path / "run"))
    config = json.loads((run / "config.json").read_text())
    config["training"].update(lr=1e6, epochs=2)  # the second epoch at lr 1e6
    (run / "config.json").write_text(json.dumps(config))
    weights = (run / "model.safetensors").read_bytes()
    last = {p.name: p.read_bytes() for p in (run / "last").iterdir()}
    assert main(["train", "--resume", "--out", str(run)]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("attnkit: error: training diverged at step ")
    assert f"the last good checkpoint is kept in {run / 'last'}; lower training.lr" in err
    assert (run / "model.safetensors").read_bytes() == weights
    assert {p.name: p.read_bytes() for p in (run / "last").iterdir()} == last
    assert "NaN" not in (run / "metrics.jsonl").read_text()


# ----------------------------------------------------------------------------- NaN models
def nan_copy(run: Path, dest: Path) -> Path:
    """A copy of ``run`` whose float weights are all NaN."""
    shutil.copytree(run, dest)
    weights = load_file(dest / "model.safetensors")
    nan = {k: torch.full_like(v, float("nan")) if v.is_floating_point() else v
           for k, v in weights.items()}  # fmt: skip
    save_file(nan, dest / "model.safetensors", metadata={"format": "pt"})
    return dest


def test_json_line_refuses_nan() -> None:
    assert json_line({"p": 0.5, "t": "좋아"}) == '{"p": 0.5, "t": "좋아"}'
    for bad in (float("nan"), float("inf")):
        with pytest.raises(NonFiniteError, match="not finite numbers"):
            json_line({"p": bad})
    check_finite(torch.tensor([0.0, float("-inf")]), allow_neg_inf=True)
    with pytest.raises(NonFiniteError):
        check_finite(torch.tensor([0.0, float("-inf")]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_check_finite_whatever_the_sum_is(dtype) -> None:
    big = torch.finfo(dtype).max
    inf, nan = float("inf"), float("nan")
    ok = [[1.0, 2.0], [big, big], [-big, -big], [0.0] * 0]  # sums that overflow: still finite
    for values in ok:
        check_finite(torch.tensor(values, dtype=dtype))
    check_finite(torch.tensor([big, big, -inf], dtype=dtype), allow_neg_inf=True)
    bad = [[1.0, nan], [inf, 1.0], [inf, -inf], [nan, -inf], [big, big, inf]]
    for values in bad:
        for allow in (False, True):
            with pytest.raises(NonFiniteError):
                check_finite(torch.tensor(values, dtype=dtype), allow_neg_inf=allow)
    check_finite(torch.tensor([3, 4]))  # integers: finite


@pytest.mark.parametrize("extra", [[], ["--json"]])
def test_predict_on_nan_weights_is_one_line(tiny_run_once, tmp_path, capsys, extra) -> None:
    run = nan_copy(tiny_run_once, tmp_path / "nan")
    assert main(["predict", str(run), "great movie", *extra]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == NON_FINITE_LINE


def test_evaluate_on_nan_weights_is_one_line(tiny_run_once, tmp_path, capsys) -> None:
    run = nan_copy(tiny_run_once, tmp_path / "nan")
    assert main(["evaluate", str(run), "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == NON_FINITE_LINE


@pytest.mark.slow
def test_generate_on_nan_weights_is_one_line(served_runs, tmp_path, capsys) -> None:
    run = nan_copy(served_runs["verse"], tmp_path / "nan")
    for extra in ([], ["--json"], ["--temperature", "0"]):
        assert main(["generate", str(run), "--seed", "0", *extra]) == 2
        captured = capsys.readouterr()
        assert captured.err == NON_FINITE_LINE and "NaN" not in captured.out


@pytest.mark.slow
def test_serve_answers_a_nan_model_with_a_json_error(served_runs, tiny_run_once, tmp_path):
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    from attnkit.app.serve import Limits, create_app
    from attnkit.app.serve.runs import load_runs

    cls = nan_copy(tiny_run_once, tmp_path / "cls")
    lm = nan_copy(served_runs["verse"], tmp_path / "lm")
    client = TestClient(create_app(load_runs([f"cls={cls}", f"lm={lm}"]), Limits()))
    for path, body in [
        ("/v1/classify", {"model": "cls", "texts": ["great movie"]}),
        ("/v1/generate", {"model": "lm", "prompt": "ROMEO:", "max_new_tokens": 4, "seed": 0}),
    ]:
        response = client.post(path, json=body)
        assert response.status_code == 422, response.text
        error = response.json()["error"]
        assert error["type"] == "invalid_request"
        assert error["message"].startswith("the model's outputs are not finite numbers")

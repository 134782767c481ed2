"""Temperature scaling: the fit recovers a known temperature, training stores it, and
predictions, `attnkit calibrate` and the CLI use it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
import yaml

import attnkit
from attnkit.app.cli import main
from attnkit.tasks.classify import fit_temperature
from conftest import tiny_recipe


@pytest.mark.parametrize("true_t", [0.5, 2.0])
def test_fit_temperature_recovers_the_temperature_that_generated_the_labels(true_t):
    g = torch.Generator().manual_seed(0)
    logits = 3 * torch.randn(20000, 3, generator=g)
    labels = torch.multinomial((logits / true_t).softmax(-1), 1, generator=g)[:, 0]
    t = fit_temperature(logits, labels)
    assert t == pytest.approx(true_t, rel=0.08)
    # it minimises the NLL: nudging T either way does not help
    nll = lambda temp: F.cross_entropy(logits / temp, labels).item()  # noqa: E731
    assert nll(t) <= min(nll(t * 1.1), nll(t / 1.1), nll(1.0))


def test_fit_temperature_is_clamped_when_validation_is_all_right():
    logits = torch.tensor([[3.0, -3.0], [-2.0, 2.0]])
    assert fit_temperature(logits, torch.tensor([0, 1])) == pytest.approx(0.05)


def test_training_stores_the_temperature_and_predictions_use_it(
    tmp_path: Path, tiny_data: Path, capsys
):
    raw = tiny_recipe(tiny_data, epochs=1, lr=1e-3)  # one short epoch: not yet all right
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(yaml.safe_dump(raw), encoding="utf-8")
    run = tmp_path / "run"
    attnkit.train(cfg, out=run)
    saved = json.loads((run / "config.json").read_text(encoding="utf-8"))
    t = saved["temperature"]
    assert 0.05 <= t <= 20 and t != 1.0

    clf = attnkit.load(run)
    assert clf.temperature == t
    ids, _, _ = clf.encode(["great film", "awful story 최악"])
    torch.testing.assert_close(clf.probabilities(ids), (clf.logits(ids) / t).softmax(-1))

    # calibrating again finds the same temperature and never raises the validation NLL
    (run / "config.json").write_text(json.dumps({**saved, "temperature": 1.0}), encoding="utf-8")
    result = attnkit.calibrate(run, log=lambda *_: None)
    assert result["temperature"] == pytest.approx(t, rel=1e-3)
    assert result["nll_after"] <= result["nll_before"] + 1e-9
    assert attnkit.load(run).temperature == result["temperature"]

    assert main(["calibrate", str(run)]) == 0
    assert "temperature scaling: T =" in capsys.readouterr().out
    assert main(["calibrate", str(tmp_path / "missing")]) == 2

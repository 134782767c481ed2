"""Run directories written before the redesign keep working.

tests/fixtures/legacy_runs/ holds seven tiny runs written by attnkit at commit 4900ef8 (the
last commit before per-model configs; its config.json had one flat model section for every
model family and no "format" key), with what they predicted then (expected.json). Each must
load, predict exactly the same, and give its model config with every size filled in."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pytest
import torch

import attnkit
from attnkit.app.cli import main
from attnkit.models import from_pretrained, read_model_config
from attnkit.runtime.run import RunDir
from conftest import make_sentiment_rows, write_csv

FIXTURES = Path(__file__).parents[1] / "fixtures" / "legacy_runs"
EXPECTED = json.loads((FIXTURES / "expected.json").read_text(encoding="utf-8"))
CLASSIFY = ["classify-transformer", "classify-gru", "classify-ngram"]


@pytest.fixture
def legacy(tmp_path: Path) -> Path:
    """A copy of the fixtures whose DATA/ paths point at regenerated data (same seeds)."""
    data = tmp_path / "data"
    data.mkdir()
    write_csv(data / "train.csv", make_sentiment_rows(240, 0))
    write_csv(data / "test.csv", make_sentiment_rows(40, 1))
    runs = tmp_path / "runs"
    shutil.copytree(FIXTURES, runs)
    for config in runs.glob("*/config.json"):
        text = config.read_text(encoding="utf-8").replace('"DATA/', f'"{data}/')
        config.write_text(text, encoding="utf-8")
    return runs


@pytest.mark.parametrize("name", CLASSIFY)
def test_first_format_classifiers_predict_as_before(legacy: Path, name: str) -> None:
    assert "format" not in json.loads((legacy / name / "config.json").read_text())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # truncation warnings
        got = attnkit.load(legacy / name).predict(EXPECTED["texts"])
    for p, (label, prob) in zip(got, EXPECTED["outputs"][name], strict=True):
        assert p.label == label and p.probability == pytest.approx(prob, abs=2e-5)


@pytest.mark.parametrize("name", ["mlm", "mlm-electra"])
def test_first_format_pretraining_runs_fill_masks_as_before(legacy: Path, name: str) -> None:
    fills = attnkit.load(legacy / name).fill_mask("the movie was [MASK]", top_k=3)
    expected = EXPECTED["outputs"][name]
    assert [[t for t, _ in f] for f in fills] == [[t for t, _ in f] for f in expected]
    for f, e in zip(fills, expected, strict=True):
        assert [p for _, p in f] == pytest.approx([p for _, p in e], abs=2e-5)


@pytest.mark.parametrize("name", ["translate-transformer", "chat-lstm"])
def test_first_format_seq2seq_runs_decode_as_before(legacy: Path, name: str) -> None:
    got = attnkit.load(legacy / name).translate(["red cat sun", "moon tree"])
    assert got == EXPECTED["outputs"][name]


@pytest.mark.parametrize(
    ("name", "model_type", "sizes"),
    [
        ("classify-transformer", "classifier", {"num_classes": 2, "max_len": 16}),
        ("classify-gru", "classifier", {"num_classes": 2, "hidden_size": 16}),
        ("classify-ngram", "classifier", {"num_buckets": 512}),
        ("mlm-electra", "masked_lm", {"objective": "electra", "generator_d_model": 16}),
        ("chat-lstm", "seq2seq", {"attention": "general", "max_len": 10}),
    ],
)
def test_first_format_model_configs_are_complete(
    legacy: Path, name: str, model_type: str, sizes: dict
) -> None:
    config = read_model_config(legacy / name)
    assert config.model_type == model_type and config.pad_id == 0
    assert (
        config.vocab_size == json.loads((legacy / name / "config.json").read_text())["vocab_size"]
    )
    for key, value in sizes.items():
        assert getattr(config, key) == value, key
    model = from_pretrained(legacy / name)  # the run directory is all it needs
    assert type(model).__name__ == type(config.build()).__name__


def test_first_format_runs_evaluate_ensemble_resume_and_keep_their_format(
    legacy: Path, capsys
) -> None:
    runs = [legacy / "classify-transformer", legacy / "classify-gru"]
    report = attnkit.evaluate(runs, "test")
    assert report["num_examples"] == 40 and len(report["members"]) == 2
    # resuming a finished first-format run: the checkpoint loads, nothing else changes
    before = (runs[0] / "model.safetensors").read_bytes()
    result = attnkit.train(out=runs[0], resume=True, log=lambda *_: None)
    assert result.step == 6 and (runs[0] / "model.safetensors").read_bytes() == before
    assert "format" not in json.loads((runs[0] / "config.json").read_text())
    assert main(["predict", str(runs[1]), "the movie was great"]) == 0
    assert capsys.readouterr().out.startswith("neg\t0.5197")


def test_new_runs_are_stamped_and_complete(tmp_path: Path, tiny_config: Path) -> None:
    run = tmp_path / "run"
    attnkit.train(tiny_config, out=run, overrides=["training.epochs=1"], log=lambda *_: None)
    saved = RunDir(run).read_config()
    assert saved["format"] == 2
    model = saved["model"]
    assert model["model_type"] == "classifier" and model["vocab_size"] == saved["vocab_size"]
    assert model["num_classes"] == len(saved["labels"]) and model["max_len"] == 16
    loaded = from_pretrained(run)
    predictor = attnkit.load(run)
    ids = torch.tensor([[5, 6, 7]])
    torch.testing.assert_close(loaded(ids).logits, predictor.model(ids).logits)


@pytest.mark.parametrize(
    ("task", "data"),
    [
        ("translate", {"limit": 100}),
        ("chat", {"val_split": "last"}),
        ("mlm", {"val_split": "last"}),
    ],
)
def test_first_format_runs_that_would_resume_on_other_data_are_refused(task, data) -> None:
    """translate/chat's data.limit took the first pairs and val_split was ignored before
    format 2 (mlm ignored val_split): resuming such a run would change its data."""
    from attnkit.core.errors import RunError
    from attnkit.tasks import get_task
    from attnkit.tasks.run_config import RunConfig

    raw = {"task": task, "data": {"name": "file", "train": "x", **data}}
    cfg = RunConfig.from_dict(raw)
    with pytest.raises(RunError, match="cannot resume on its own data"):
        get_task(task).check_resume(cfg, {"format": 1})
    get_task(task).check_resume(cfg, {"format": 2})  # runs of today resume as they started


def test_runs_of_a_newer_format_are_refused_in_one_line(tmp_path: Path, capsys) -> None:
    """A run written by a newer attnkit (config.json's format above RUN_FORMAT) is refused
    by every reader, naming both versions, instead of failing on a key this code lacks."""
    from attnkit.core.errors import RunError
    from attnkit.core.version import __version__
    from attnkit.models.saved import RUN_FORMAT

    run = Path(shutil.copytree(FIXTURES / "classify-gru", tmp_path / "x"))
    raw = json.loads((run / "config.json").read_text(encoding="utf-8"))
    (run / "config.json").write_text(json.dumps({**raw, "format": RUN_FORMAT + 1}))
    message = (
        f"{run} was written by a newer attnkit (run format {RUN_FORMAT + 1}; this is "
        f"{__version__}, format {RUN_FORMAT}): upgrade attnkit"
    )
    for read in (attnkit.load, from_pretrained, read_model_config):
        with pytest.raises(RunError) as err:
            read(run)
        assert str(err.value) == message
    assert main(["predict", str(run), "good"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"attnkit: error: {message}"]
    (run / "config.json").write_text(json.dumps({**raw, "format": "2"}))
    with pytest.raises(RunError, match=r"config.json: format must be a run format 1\.\.2, got '2'"):
        attnkit.load(run)

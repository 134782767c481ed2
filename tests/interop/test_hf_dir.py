"""`attnkit export --format hf` predicts what attnkit predicts: a calibrated classifier's
temperature is folded into the exported head (transformers' ``pipeline`` gives attnkit's
probabilities, single texts and sentence pairs), attnkit reads the export back without
applying it twice, and a mean-pooled BERT classifier (which transformers'
BertForSequenceClassification cannot express) is refused in one line, its ONNX export
predicting as the run does."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
import torch

import attnkit
from attnkit.app.cli import main
from attnkit.core.config import ConfigError
from attnkit.models.bert import BertConfig, BertForSequenceClassification
from attnkit.runtime.run import RunDir

transformers = pytest.importorskip("transformers")

WORDS = ["the", "a", "cat", "dog", "sat", "ran", "on", "under", "mat", "house", "big", "red"]
TINY = {"d_model": 32, "num_heads": 2, "d_ff": 64, "num_layers": 2}
QUICK = {"epochs": 1, "batch_size": 8, "lr": 1.0e-3, "progress": False, "log_every": 5}
T = 2.5  # the calibration temperature the runs are given (fitted ones may be near 1)
TEXTS = ["the cat sat on the mat", "a big red dog ran", "under the house", "dog"]
FIRSTS = ["the cat sat on mat", "a dog ran under the house", "red mat"]
SECONDS = ["the dog ran", "big cat", "red house on the mat"]


def _train(folder: Path, name: str, data: dict, rows: list[str]) -> Path:
    """A tiny bert-classifier run trained on ``rows`` (a TSV), its temperature set to T."""
    import yaml

    (folder / f"{name}.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    recipe = {
        "task": "classify",
        "data": {"name": "file", "train": str(folder / f"{name}.tsv"), "max_len": 24,
                 "val_fraction": 0.2, **data},
        "tokenizer": {"vocab_size": 60, "min_frequency": 1},
        "model": {"arch": "bert-classifier", **TINY},
        "training": QUICK,
    }  # fmt: skip
    (folder / f"{name}.yaml").write_text(yaml.safe_dump(recipe), encoding="utf-8")
    out = folder / name
    attnkit.train(folder / f"{name}.yaml", out=out, log=lambda *_: None)
    RunDir(out).update_config(temperature=T)
    return out


@pytest.fixture(scope="module")
def single_run(tmp_path_factory) -> Path:
    """Three classes: the first word's group."""
    rng = random.Random(0)
    rows = ["text\tlabel"]
    for _ in range(40):
        words = [rng.choice(WORDS) for _ in range(5)]
        rows.append(f"{' '.join(words)}\t{['low', 'mid', 'high'][WORDS.index(words[0]) % 3]}")
    return _train(tmp_path_factory.mktemp("single"), "three", {}, rows)


@pytest.fixture(scope="module")
def pair_run(tmp_path_factory) -> Path:
    """Sentence pairs: 'same' when both start with the same word."""
    rng = random.Random(1)
    rows = ["premise\thypothesis\tlabel"]
    for _ in range(40):
        a, b = ([rng.choice(WORDS) for _ in range(4)] for _ in range(2))
        if rng.random() < 0.5:
            b[0] = a[0]
        rows.append(f"{' '.join(a)}\t{' '.join(b)}\t{'same' if a[0] == b[0] else 'different'}")
    data = {"text_column": "premise", "pair_column": "hypothesis"}
    return _train(tmp_path_factory.mktemp("pairs"), "nli", data, rows)


def _export(run: Path, out: Path) -> Path:
    assert main(["export", str(run), "--format", "hf", "-o", str(out)]) == 0
    return out


def _by_label(scores: list[dict]) -> dict[str, float]:
    return {s["label"]: s["score"] for s in scores}


@pytest.mark.slow  # (trains a tiny run: ~3 s)
def test_pipeline_gives_attnkit_probabilities_of_a_calibrated_classifier(
    single_run, tmp_path
) -> None:
    clf = attnkit.load(single_run)
    assert clf.temperature == T
    out = _export(single_run, tmp_path / "hf")
    saved = json.loads((out / "config.json").read_text(encoding="utf-8"))
    assert saved["attnkit_temperature_folded"] == T
    pipe = transformers.pipeline(
        "text-classification", model=str(out), tokenizer=str(out), top_k=None, device="cpu"
    )
    theirs = pipe(TEXTS)
    ours = clf.predict(TEXTS)
    for mine, hf in zip(ours, theirs, strict=True):
        got = _by_label(hf)
        assert got.keys() == mine.probabilities.keys()
        for label, p in mine.probabilities.items():
            assert got[label] == pytest.approx(p, abs=1e-5)
    # the fold is what makes them equal: without it, transformers' softmax differs
    logits = clf.logits(clf.encode(TEXTS)[0])
    assert not torch.allclose(logits.softmax(-1), logits.div(T).softmax(-1), atol=1e-3)


@pytest.mark.slow  # (trains a tiny run: ~3 s)
def test_pipeline_gives_attnkit_probabilities_of_a_calibrated_pair_classifier(
    pair_run, tmp_path
) -> None:
    out = _export(pair_run, tmp_path / "hf")
    pipe = transformers.pipeline(
        "text-classification", model=str(out), tokenizer=str(out), top_k=None, device="cpu"
    )
    ours = attnkit.load(pair_run).predict(FIRSTS, pairs=SECONDS)
    for a, b, mine in zip(FIRSTS, SECONDS, ours, strict=True):
        got = _by_label(pipe({"text": a, "text_pair": b}))
        assert set(got) == {"same", "different"}
        for label, p in mine.probabilities.items():
            assert got[label] == pytest.approx(p, abs=1e-5)


@pytest.mark.slow  # (trains a tiny run: ~3 s)
def test_attnkit_reads_the_export_without_applying_the_temperature_again(
    single_run, tmp_path
) -> None:
    out = _export(single_run, tmp_path / "hf")
    clf = attnkit.load(single_run)
    ids, _, _ = clf.encode(TEXTS)
    reloaded = BertForSequenceClassification.from_pretrained(out)
    from attnkit.data.batching import pad_batch

    input_ids, mask = pad_batch(ids, clf.tokenizer.pad_id)
    with torch.no_grad():
        logits = reloaded(input_ids, mask).logits
    # its logits are the calibrated ones: softmax of them is attnkit's probabilities
    assert torch.allclose(logits, clf.logits(ids) / T, atol=1e-5)
    assert torch.allclose(logits.softmax(-1), clf.probabilities(ids), atol=1e-6)


# ---------------------------------------------------------------------------- fast, no run
def _tiny_classifier(**changes) -> BertForSequenceClassification:
    torch.manual_seed(0)
    config = BertConfig(
        arch="bert-classifier", vocab_size=16, max_len=8, num_classes=3, **TINY, **changes
    )
    return BertForSequenceClassification(config).eval()


def test_the_folded_head_gives_transformers_the_calibrated_softmax(tmp_path) -> None:
    ours = _tiny_classifier()
    out = ours.save_pretrained(tmp_path / "hf", labels=["a", "b", "c"], temperature=T)
    assert json.loads((out / "config.json").read_text())["attnkit_temperature_folded"] == T
    theirs = transformers.BertForSequenceClassification.from_pretrained(out).eval()
    back = BertForSequenceClassification.from_pretrained(out)  # attnkit reads it as it is
    ids = torch.randint(1, 16, (3, 6))
    mask = torch.ones_like(ids, dtype=torch.bool)
    mask[0, 4:] = False
    with torch.no_grad():
        logits = ours(ids, mask).logits
        hf = theirs(input_ids=ids, attention_mask=mask.long()).logits
        reread = back(ids, mask).logits
    assert torch.allclose(hf.softmax(-1), (logits / T).softmax(-1), atol=1e-6)
    assert torch.allclose(reread, logits / T, atol=1e-6)  # divided once, not twice
    assert not torch.allclose(hf.softmax(-1), logits.softmax(-1), atol=1e-3)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"pooling": "mean"}, "it pools by mean over tokens (model.pooling: mean)"),
        ({"pooling": "cls"}, "it pools on the bare [CLS] vector (model.pooling: cls)"),
        ({"freeze_encoder": True, "pooling": "cls"}, "a feature-based model"),
    ],
)
def test_classifiers_transformers_would_run_differently_are_refused(
    changes, message, tmp_path
) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)) as err:
        _tiny_classifier(**changes).save_pretrained(tmp_path / "x")
    assert "\n" not in str(err.value)
    assert not (tmp_path / "x").exists()


def test_a_temperature_must_be_a_positive_number(tmp_path) -> None:
    model = _tiny_classifier()
    for bad in (0.0, -1.0, float("inf"), "2"):
        with pytest.raises(ConfigError, match="temperature must be a number > 0"):
            model.save_pretrained(tmp_path / "x", temperature=bad)  # type: ignore[arg-type]
    assert not (tmp_path / "x").exists()


def _mean_pooled(run: Path, folder: Path) -> Path:
    """A copy of ``run`` whose classifier pools by mean over the real tokens."""
    copy = folder / "mean-run"
    copy.mkdir()
    for name in ("tokenizer.json", "model.safetensors"):
        (copy / name).write_bytes((run / name).read_bytes())
    raw = json.loads((run / "config.json").read_text(encoding="utf-8"))
    raw["model"]["pooling"] = "mean"
    (copy / "config.json").write_text(json.dumps(raw), encoding="utf-8")
    return copy


@pytest.mark.slow  # (trains a tiny run: ~3 s)
def test_a_mean_pooled_classifier_is_refused_in_one_line(single_run, tmp_path, capsys) -> None:
    run = _mean_pooled(single_run, tmp_path)
    out = tmp_path / "hf"
    assert main(["export", str(run), "--format", "hf", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"attnkit: error: {run}: it pools by mean over tokens")
    assert "BertForSequenceClassification reads the [CLS] pooler" in err
    assert "--format onnx" in err
    assert not out.exists()
    with pytest.raises(ConfigError, match="pools by mean"):  # Python's save_pretrained too
        attnkit.models.from_pretrained(run).save_pretrained(tmp_path / "py")


@pytest.mark.slow
def test_a_mean_pooled_classifier_exports_to_onnx_and_predicts_as_the_run(
    single_run, tmp_path
) -> None:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    run = _mean_pooled(single_run, tmp_path)
    out = tmp_path / "onnx"
    assert main(["export", str(run), "--format", "onnx", "-o", str(out)]) == 0
    ours = attnkit.load(run).predict(TEXTS)
    exported = attnkit.load(out).predict(TEXTS)
    for a, b in zip(ours, exported, strict=True):
        for label, p in a.probabilities.items():
            assert b.probabilities[label] == pytest.approx(p, abs=1e-5)

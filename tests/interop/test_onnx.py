"""ONNX export (`attnkit export RUN --format onnx`): the graph matches PyTorch under
onnxruntime for every exportable kind of run (Transformer / GPT / BERT classifiers, sentence
pairs, taggers, QA), at batch sizes and lengths other than the traced ones; the export loads
back for predict / evaluate; bad input gets a clear error. Tiny models: seconds each."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import yaml

pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

import attnkit  # noqa: E402
from attnkit.app.api import RunError, export, load  # noqa: E402
from attnkit.app.cli import main  # noqa: E402
from attnkit.core.errors import InputError  # noqa: E402
from attnkit.interop.onnx import ONNX_FILE, OnnxModel  # noqa: E402
from conftest import SERVE_LM_TEXT, make_sentiment_rows, tiny_recipe, write_csv  # noqa: E402

TEXTS = [
    "the movie was great",
    "boring and awful film really boring story",
    "최고 영화",
    "지루해요",
]
TINY_BERT = {"d_model": 32, "num_heads": 2, "d_ff": 64, "num_layers": 2}


def _train(root: Path, name: str, recipe: dict) -> Path:
    path = root / f"{name}.yaml"
    path.write_text(yaml.safe_dump(recipe), encoding="utf-8")
    attnkit.train(path, out=root / name, log=lambda *_: None)
    return root / name


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("onnx")
    write_csv(root / "train.csv", make_sentiment_rows(160, seed=0))
    write_csv(root / "test.csv", make_sentiment_rows(40, seed=1))
    out = {}
    for arch, model in (
        ("transformer", {}),
        ("bert-classifier", TINY_BERT),
        ("gpt-classifier", TINY_BERT),
    ):
        recipe = tiny_recipe(root, epochs=1)
        recipe["model"] = {"arch": arch, **(model or recipe["model"])}
        out[arch] = _train(root, arch, recipe)
    # sentence pairs: label "same" when both sentences start with the same word
    rng, words = random.Random(0), ["cat", "dog", "sat", "mat", "red", "blue", "ran", "big"]
    rows = ["premise\thypothesis\tlabel"]
    for _ in range(60):
        a, b = rng.choices(words, k=4), rng.choices(words, k=3)
        rows.append(f"{' '.join(a)}\t{' '.join(b)}\t{'same' if a[0] == b[0] else 'different'}")
    (root / "pairs.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    out["pairs"] = _train(root, "pairs", {
        "task": "classify",
        "data": {"name": "file", "train": str(root / "pairs.tsv"), "text_column": "premise",
                 "pair_column": "hypothesis", "max_len": 24, "val_fraction": 0.2},
        "tokenizer": {"vocab_size": 60, "min_frequency": 1},
        "model": {"arch": "bert-classifier", **TINY_BERT},
        "training": {"max_steps": 3, "batch_size": 8, "progress": False, "num_threads": 1},
    })  # fmt: skip
    return out


def _export(run: Path, tmp_path: Path) -> Path:
    out = export(run, tmp_path / f"{run.name}-onnx", fmt="onnx")
    raw = json.loads((out / "config.json").read_text())
    assert raw["onnx"]["max_abs_diff"] < 1e-4, raw["onnx"]
    assert raw["exported_from"] == str(run)
    assert (out / ONNX_FILE).is_file() and not (out / "model.safetensors").exists()
    return out


@pytest.fixture(scope="module")
def exported(runs, tmp_path_factory):
    """``exported(name)``: the ONNX export of ``runs[name]`` (checked by ``_export``), made
    once per module: the tests that only read an export share it (the CLI test writes its
    own)."""
    root = tmp_path_factory.mktemp("onnx-exports")
    done: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in done:
            done[name] = _export(runs[name], root)
        return done[name]

    return get


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["transformer", "bert-classifier", "gpt-classifier"])
def test_classifier_export_predicts_like_the_run(runs, exported, arch):
    run = runs[arch]
    out = exported(arch)
    torch_side, onnx_side = load(run), load(out)
    assert isinstance(onnx_side.model, OnnxModel)
    # the graph stores the model's weights (+ constant tables such as sinusoidal positions)
    want = sum(p.numel() for p in torch_side.model.parameters())
    assert want <= onnx_side.model.num_parameters <= want * 1.05, arch
    # one text at a time (batch 1, different lengths), then all together (padded)
    texts = [*TEXTS, " ".join(["영화"] * 40)]  # the last is cut to max_len
    singles = [onnx_side.predict([t])[0] for t in texts]
    for a, b, c in zip(torch_side.predict(texts), onnx_side.predict(texts), singles, strict=True):
        assert a.label == b.label == c.label
        for label, p in a.probabilities.items():
            assert abs(p - b.probabilities[label]) < 1e-4
            assert abs(p - c.probabilities[label]) < 1e-4
    assert attnkit.evaluate(out)["accuracy"] == pytest.approx(attnkit.evaluate(run)["accuracy"])
    if arch == "bert-classifier":  # the README's recipe: tokenizers + onnxruntime, no attnkit
        import numpy as np
        import onnxruntime as ort
        from tokenizers import Tokenizer

        ids = np.array([Tokenizer.from_file(str(out / "tokenizer.json")).encode(TEXTS[0]).ids])
        feed = {"input_ids": ids, "attention_mask": np.ones_like(ids),
                "token_type_ids": np.zeros_like(ids)}  # fmt: skip
        (logits,) = ort.InferenceSession(str(out / ONNX_FILE)).run(None, feed)
        want = torch_side.logits(torch_side.encode([TEXTS[0]])[0])
        assert np.abs(logits - want.numpy()).max() < 1e-4


@pytest.mark.slow
def test_serve_answers_from_an_onnx_export(runs, exported):
    from fastapi.testclient import TestClient

    from attnkit.app.serve import create_app

    out = exported("transformer")
    client = TestClient(create_app([f"onnx={out}"]))
    (info,) = client.get("/v1/models").json()["models"]
    assert info["name"] == "onnx" and info["parameters"] > 0 and info["attention"] is False
    body = client.post("/v1/classify", json={"texts": TEXTS}).json()
    for got, want in zip(
        body["predictions"], load(runs["transformer"]).predict(TEXTS), strict=True
    ):
        assert got["label"] == want.label
        assert got["probabilities"] == pytest.approx(want.probabilities, abs=1e-4)


@pytest.mark.slow
def test_sentence_pair_export_uses_segment_ids(runs, exported):
    run = runs["pairs"]
    out = exported("pairs")
    assert json.loads((out / "config.json").read_text())["onnx"]["inputs"] == [
        "input_ids",
        "attention_mask",
        "token_type_ids",
    ]
    a, b = ["cat dog sat", "red mat ran"], ["cat big", "blue cat"]
    ref, got = load(run).predict(a, pairs=b), load(out).predict(a, pairs=b)
    for x, y in zip(ref, got, strict=True):
        for label, p in x.probabilities.items():
            assert abs(p - y.probabilities[label]) < 1e-4
    with pytest.raises(InputError, match="second sentence"):
        load(out).predict(a)


@pytest.mark.slow
def test_tagger_and_qa_export(tmp_path):
    from test_qa import _squad, _write
    from test_tag import _recipe as tag_recipe
    from test_tag import _sentences
    from test_tag import _write as write_conll

    for split, n, seed in (("train", 40, 0), ("valid", 10, 1), ("test", 10, 2)):
        write_conll(tmp_path / f"{split}.conll", _sentences(n, seed=seed))
    tagger = _train(tmp_path, "tagger", tag_recipe(tmp_path, max_steps=3))
    out = _export(tagger, tmp_path)
    sentence = "Seoul hosted the Olympics in 1988 ."
    assert load(out).tag([sentence]) == load(tagger).tag([sentence])

    qa = _train(tmp_path, "qa", {
        "task": "qa",
        "data": {"name": "file", "train": _write(tmp_path / "train.json", _squad(3, 0)),
                 "validation": _write(tmp_path / "dev.json", _squad(1, 1)),
                 "max_len": 40, "doc_stride": 12, "max_question_len": 16, "max_answer_len": 8},
        "tokenizer": {"kind": "wordpiece", "vocab_size": 300, "min_frequency": 1},
        "model": {"arch": "bert-qa", **TINY_BERT},
        "training": {"max_steps": 2, "batch_size": 16, "progress": False, "num_threads": 1},
    })  # fmt: skip
    out = _export(qa, tmp_path)
    context = " ".join(f"In {1900 + i} the city of Oslo had {10 + i} visitors." for i in range(12))
    question = "How many visitors did Oslo have in 1905?"
    ref, got = load(qa).answer(question, context), load(out).answer(question, context)
    assert got.text == ref.text and got.score == pytest.approx(ref.score, abs=1e-3)


@pytest.mark.slow
def test_cli_export_and_bad_input(runs, tmp_path, capsys):
    run = runs["transformer"]
    assert main(["export", str(run), "--format", "onnx", "-o", str(tmp_path / "x")]) == 0
    assert "wrote" in capsys.readouterr().out
    assert main(["predict", str(tmp_path / "x"), "great movie"]) == 0
    label = load(run).predict(["great movie"])[0].label
    assert label in capsys.readouterr().out
    # the same folder again: refused, nothing overwritten
    before = (tmp_path / "x" / ONNX_FILE).read_bytes()
    assert main(["export", str(run), "--format", "onnx", "-o", str(tmp_path / "x")]) != 0
    assert "not empty" in capsys.readouterr().err
    assert (tmp_path / "x" / ONNX_FILE).read_bytes() == before
    with pytest.raises(RunError, match="runs as exported, on the CPU"):
        load(tmp_path / "x", quantize="int8")
    with pytest.raises(InputError, match="attention maps exist only"):
        load(tmp_path / "x").explain("great movie", tmp_path / "map.png")
    with pytest.raises(RunError, match="not a finished run"):
        export(tmp_path / "x", tmp_path / "y", fmt="onnx")


@pytest.mark.slow
def test_language_models_have_no_onnx_export(tmp_path, capsys):
    corpus = tmp_path / "verse.txt"
    corpus.write_text(SERVE_LM_TEXT, encoding="utf-8")
    lm = _train(tmp_path, "lm", {
        "task": "lm",
        "data": {"name": "file", "train": str(corpus), "val_fraction": 0.1, "max_len": 16},
        "tokenizer": {"kind": "char", "min_frequency": 1},
        "model": {"arch": "gpt", "num_layers": 1, "d_model": 16, "num_heads": 2, "d_ff": 32},
        "training": {"max_steps": 2, "batch_size": 4, "progress": False, "num_threads": 1},
    })  # fmt: skip
    assert main(["export", str(lm), "--format", "onnx", "-o", str(tmp_path / "o")]) != 0
    err = capsys.readouterr().err.strip()
    assert "a lm run with model.arch gpt has no ONNX export" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "o").exists()  # nothing written

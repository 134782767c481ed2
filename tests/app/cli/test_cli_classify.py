"""attnkit train / evaluate / predict / data: happy paths and every bad input, each a
one-line error with exit code 2 that leaves nothing half-written."""

import csv
import io
import json
import sys

import pytest
import yaml

from attnkit import load
from attnkit.app.cli import main
from conftest import tiny_recipe, write_tiny_data


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    data = write_tiny_data(root / "data")
    recipe = root / "tiny.yaml"
    recipe.write_text(yaml.safe_dump(tiny_recipe(data, epochs=4)))
    assert main(["train", str(recipe), "--out", str(root / "run")]) == 0
    gru = tiny_recipe(data, epochs=4)  # a second, different model for ensembles
    gru["model"] = {"arch": "gru", "d_model": 32, "hidden_size": 32}
    (root / "gru.yaml").write_text(yaml.safe_dump(gru))
    assert main(["train", str(root / "gru.yaml"), "--out", str(root / "gru")]) == 0
    return root


def _run(argv, capsys, stdin: bytes | None = None, monkeypatch=None):
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.slow
def test_train_wrote_a_complete_run(trained):
    run = trained / "run"
    names = {p.name for p in run.iterdir()}
    assert {
        "config.json",
        "tokenizer.json",
        "model.safetensors",
        "last",
        "metrics.jsonl",
        "curves.png",
    } <= names
    cfg = json.loads((run / "config.json").read_text())
    assert cfg["labels"] == ["neg", "pos"] and cfg["model"]["d_model"] == 32


@pytest.mark.slow
def test_evaluate_prints_accuracy_f1_confusion(trained, capsys):
    code, out, _ = _run(["evaluate", str(trained / "run"), "--split", "test"], capsys)
    assert code == 0
    assert "accuracy" in out and "macro-F1" in out and "true \\ pred" in out
    code, out, _ = _run(["evaluate", str(trained / "run"), "--json"], capsys)
    report = json.loads(out)
    assert report["num_examples"] == 80 and report["accuracy"] > 0.8
    assert sum(map(sum, report["confusion_matrix"])) == 80


@pytest.mark.slow
def test_predict_text_stdin_file_json_explain(trained, capsys, monkeypatch, tmp_path):
    run = str(trained / "run")
    texts = ["the movie was really great", "이 영화 정말 지루해요 최악"]
    expected = [p.label for p in load(run).predict(texts)]  # the Python API
    code, out, _ = _run(["predict", run, *texts], capsys)
    assert code == 0
    lines = out.strip().splitlines()
    assert [line.split("\t")[0] for line in lines] == expected
    assert [line.split("\t")[2] for line in lines] == texts
    stdin = (texts[0] + "\n\n" + texts[1] + "\n").encode()
    code, out, _ = _run(
        ["predict", run, "-", "--json"], capsys, stdin=stdin, monkeypatch=monkeypatch
    )
    rows = [json.loads(x) for x in out.splitlines()]
    assert code == 0 and [r["label"] for r in rows] == expected  # blank line skipped
    for r in rows:
        assert r["probability"] == max(r["probabilities"].values())
        assert abs(sum(r["probabilities"].values()) - 1) < 1e-5
    f = tmp_path / "in.txt"
    f.write_text("loved it\n", encoding="utf-8")
    png = tmp_path / "heat.png"
    code, out, err = _run(
        ["predict", run, "--file", str(f), "--explain", str(png), "--layer", "0", "--head", "1"],
        capsys,
    )
    assert code == 0 and png.is_file() and "wrote" in err


@pytest.mark.slow
def test_evaluate_and_predict_an_ensemble(trained, capsys):
    runs = [str(trained / "run"), str(trained / "gru")]
    code, out, _ = _run(["evaluate", *runs, "--json"], capsys)
    report = json.loads(out)
    assert code == 0 and [m["run"] for m in report["members"]] == runs
    singles = [json.loads(_run(["evaluate", r, "--json"], capsys)[1]) for r in runs]
    assert [m["accuracy"] for m in report["members"]] == [r["accuracy"] for r in singles]
    # the ensemble's score is that of the averaged probabilities from the Python API
    with (trained / "data" / "test.csv").open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    texts = [r["text"] for r in rows]
    preds = load(runs).predict(texts)
    correct = sum(p.label == r["label"] for p, r in zip(preds, rows, strict=True))
    assert report["accuracy"] == pytest.approx(correct / len(rows))
    code, out, _ = _run(["evaluate", *runs], capsys)
    assert code == 0 and "member" in out and "ensemble (averaged probabilities)" in out
    code, out, _ = _run(["predict", runs[0], "--ensemble", runs[1], *texts[:5]], capsys)
    assert code == 0
    assert [line.split("\t")[0] for line in out.strip().splitlines()] == [
        p.label for p in preds[:5]
    ]


@pytest.mark.slow
def test_ensemble_of_a_missing_run_is_a_clean_error(trained, capsys, tmp_path):
    code, out, err = _run(["evaluate", str(trained / "run"), str(tmp_path)], capsys)
    assert code == 2 and "not a run directory" in err and len(err.strip().splitlines()) == 1
    code, out, err = _run(
        ["predict", str(trained / "run"), "--ensemble", str(tmp_path), "x"], capsys
    )
    assert code == 2 and "not a run directory" in err and out == ""


@pytest.mark.slow
def test_predict_overlong_input_truncates_with_warning(trained, capsys):
    long_text = " ".join(["great"] * 200)
    code, out, err = _run(["predict", str(trained / "run"), long_text], capsys)
    assert code == 0 and out.split("\t")[0] in ("neg", "pos")
    assert "truncated" in err and "max_len=16" in err


@pytest.mark.slow
@pytest.mark.parametrize(
    "argv_tail, stdin, message",
    [
        (["   "], None, "empty or whitespace"),
        ([""], None, "empty or whitespace"),
        (["-"], b"ok line\n\xff\xfe broken\n", "not valid UTF-8 (line 2)"),
        (["-"], b"\n  \n", "no input text"),
        ([], None, "no input text"),
        (["--file", "/nonexistent.txt"], None, "cannot read"),
        (["x", "--layer", "5", "--explain", "e.png"], None, "layer must be in"),
        (["x", "--bogus", "y"], None, "unrecognized arguments: --bogus y"),
    ],
)
def test_predict_bad_input(trained, capsys, monkeypatch, argv_tail, stdin, message, tmp_path):
    monkeypatch.chdir(tmp_path)
    code, out, err = _run(
        ["predict", str(trained / "run"), *argv_tail], capsys, stdin=stdin, monkeypatch=monkeypatch
    )
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "e.png").exists()


def test_predict_not_a_run(capsys, tmp_path):
    code, _, err = _run(["predict", str(tmp_path), "hi"], capsys)
    assert code == 2 and "not a run directory" in err


def _recipe(tmp_path, data, mutate):
    r = tiny_recipe(data, max_steps=2)
    mutate(r)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(r))
    return path


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda r: r["training"].update(lrr=1), "unknown config key 'training.lrr'"),
        (lambda r: r["data"].update(label_column="sentiment"), "'sentiment'"),
        (lambda r: r["data"].update(text_column="body"), "'body'"),
        (lambda r: r["data"].update(train="/no/such.csv"), "/no/such.csv"),
    ],
)
def test_train_bad_recipe_writes_nothing(tmp_path, tiny_data, capsys, mutate, message):
    recipe = _recipe(tmp_path, tiny_data, mutate)
    code, _, err = _run(["train", str(recipe), "--out", str(tmp_path / "run")], capsys)
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()


def test_train_undecodable_data_file(tmp_path, tiny_data, capsys):
    (tiny_data / "train.csv").write_bytes(b"text,label\ngood,pos\n\xff\xfe,neg\n")
    recipe = _recipe(tmp_path, tiny_data, lambda r: None)
    code, _, err = _run(["train", str(recipe), "--out", str(tmp_path / "run")], capsys)
    assert code == 2 and "line 3" in err
    assert not (tmp_path / "run").exists()


def test_train_set_override_and_unknown_set(tmp_path, tiny_config, capsys):
    out = tmp_path / "run"
    code, _, _ = _run(
        [
            "train",
            str(tiny_config),
            "--out",
            str(out),
            "--set",
            "training.max_steps=2",
            "--set",
            "model.num_layers=2",
        ],
        capsys,
    )
    assert code == 0
    assert json.loads((out / "config.json").read_text())["model"]["num_layers"] == 2
    code, _, err = _run(
        ["train", str(tiny_config), "--out", str(tmp_path / "r2"), "--set", "model.layers=2"],
        capsys,
    )
    assert code == 2 and "did you mean 'num_layers'" in err


def test_data_list_and_missing_dataset_message(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ATTNKIT_DATA", str(tmp_path))
    code, out, _ = _run(["data", "list"], capsys)
    assert code == 0 and "nsmc" in out and "imdb" in out and str(tmp_path) in out
    recipe = tmp_path / "n.yaml"
    recipe.write_text("data:\n  name: nsmc\n")
    code, _, err = _run(["train", str(recipe), "--out", str(tmp_path / "run")], capsys)
    assert code == 2 and "attnkit data fetch nsmc" in err and str(tmp_path) in err

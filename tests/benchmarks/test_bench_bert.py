"""benchmarks/bert.py: an interrupted pretraining continues with ``--resume`` to the run an
uninterrupted one gives, and its record says so. Tiny models; nothing is written outside
tmp_path."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest
import yaml
from safetensors.torch import load_file

import attnkit.runtime.training as training
from attnkit.data.tokenization import train_tokenizer
from conftest import FILLER, NEG, POS, pretraining_documents

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
CUT_AT_STEP = 7  # after the checkpoint of step 6, before the one of step 9


@pytest.fixture
def bert(monkeypatch, tmp_path):
    """benchmarks/bert.py importable, writing its runs under tmp_path."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    for name in ("report", "bert"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    module = importlib.import_module("bert")
    monkeypatch.setattr(module, "ROOT", tmp_path)
    yield module
    for name in ("report", "bert"):
        sys.modules.pop(name, None)


@pytest.fixture
def recipe(tmp_path) -> str:
    docs = pretraining_documents(FILLER + POS + NEG)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join(docs) + "\n", encoding="utf-8")
    # one tokenizer file for both runs (WordPiece breaks ties differently per process)
    train_tokenizer(docs, vocab_size=60, min_frequency=1).save(tmp_path / "tok.json")
    raw = {
        "task": "bert-pretrain",
        "data": {"name": "file", "train": str(corpus), "max_len": 32, "val_fraction": 0.2},
        "tokenizer": {"path": str(tmp_path / "tok.json")},
        "model": {"arch": "bert-pretraining", "d_model": 32, "num_heads": 2, "d_ff": 64,
                  "num_layers": 2},
        "training": {"max_steps": 12, "batch_size": 8, "lr": 1.0e-3, "eval_every": 3,
                     "log_every": 1},
    }  # fmt: skip
    path = tmp_path / "pre.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return str(path)


def _timed(run: Path) -> list[dict]:
    return [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]


def _rows(run: Path) -> list[dict]:
    """metrics.jsonl without the timings."""
    drop = ("tokens_per_s", "elapsed_s")
    return [{k: v for k, v in r.items() if k not in drop} for r in _timed(run)]


@pytest.mark.slow
def test_an_interrupted_pretraining_resumes_to_the_uninterrupted_run(bert, recipe, monkeypatch):
    full, info = bert.pretrain(recipe, [], "full")
    assert info["pretrain_steps"] == 12 and "pretrain_resumed" not in info
    assert set(info["pretrain_validation"]) == {"mlm_accuracy", "mlm_loss", "nsp_accuracy"}

    original = training.Trainer._log

    def cut(self, row):
        original(self, row)
        if row.get("step") == CUT_AT_STEP and "train_loss" in row:
            raise KeyboardInterrupt  # the session ends mid-run

    monkeypatch.setattr(training.Trainer, "_log", cut)
    with pytest.raises(KeyboardInterrupt):
        bert.pretrain(recipe, [], "cut")
    monkeypatch.setattr(training.Trainer, "_log", original)
    cut_run = full.parent / "bench-cut"
    assert json.loads((cut_run / "last/state.json").read_text())["step"] == 6
    kept = [r for r in _timed(cut_run) if r["step"] <= 6]

    resumed, info = bert.pretrain(recipe, [], "cut", resume=True)
    assert resumed == cut_run and info["pretrain_resumed"] is True
    # the minutes count the time before the resume too (2 places: this run may show 0.0)
    before = max(r["elapsed_s"] for r in kept if "elapsed_s" in r)
    assert info["pretrain_steps"] == 12 and info["pretrain_minutes"] >= round(before / 60, 2)
    assert _rows(resumed) == _rows(full)  # same losses and evaluations, none twice
    assert _timed(resumed)[: len(kept)] == kept  # steps 1-6 were not trained again
    a, b = load_file(str(full / "model.safetensors")), load_file(str(resumed / "model.safetensors"))
    assert a.keys() == b.keys() and all(a[k].equal(b[k]) for k in a)

    # --resume with nothing to continue starts afresh
    _, info = bert.pretrain(recipe, [], "new", resume=True)
    assert info["pretrain_steps"] == 12 and "pretrain_resumed" not in info


def test_resume_is_left_out_of_the_recorded_command(bert, monkeypatch, capsys):
    calls, records = [], []
    monkeypatch.setattr(
        bert,
        "pretrain",
        lambda *a: calls.append(a) or (Path("runs/bench-p"), {"pretrain_steps": 1}),
    )
    monkeypatch.setattr(bert, "finetune", lambda *a: calls.append(a) or {"test": {}})
    monkeypatch.setattr(bert, "publish", records.append)
    argv = ["bert.py", "f.yaml", "--pretrain", "p.yaml", "--resume", "--name", "n"]
    monkeypatch.setattr(sys, "argv", argv)
    assert bert.main() == 0
    assert calls[0] == ("p.yaml", [], None, True)
    assert calls[1] == ("f.yaml", "n", ["model.init_from=runs/bench-p"])
    assert records[0]["command"] == "python benchmarks/bert.py f.yaml --pretrain p.yaml --name n"

    monkeypatch.setattr(sys, "argv", ["bert.py", "f.yaml", "--resume"])
    with pytest.raises(SystemExit):
        bert.main()
    assert "--resume continues a --pretrain run" in capsys.readouterr().err


def test_minutes_before_a_resume_add_every_interrupted_segment(bert, tmp_path):
    """Each resume restarts the elapsed_s clock: a run interrupted twice (last/ at step 6,
    the first part resumed from step 2) has spent 30 s + 50 s, not max(...) = 50 s."""
    run = tmp_path / "run"
    (run / "last").mkdir(parents=True)
    (run / "last/state.json").write_text(json.dumps({"step": 6}))
    rows = [(1, 20.0), (2, 30.0), (3, 10.0), (4, 30.0), (5, 40.0), (6, 50.0), (7, 60.0)]
    lines = [json.dumps({"step": s, "elapsed_s": t}) for s, t in rows]
    lines.insert(2, json.dumps({"step": 2, "val_loss": 1.0}))  # rows without a clock are skipped
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    assert bert._seconds_before_resume(run) == 80.0


@pytest.mark.slow
def test_self_training_labels_then_fine_tunes_on_the_extra_examples(bert, tmp_path):
    """--pseudo-from: the teacher's pseudo-labels are counted in the record, and the
    fine-tuning reports how many extra examples it trained on."""
    import attnkit
    from conftest import make_sentiment_rows, tiny_recipe, write_csv

    data = tmp_path / "data"
    data.mkdir()
    write_csv(data / "train.csv", make_sentiment_rows(320, seed=0))
    write_csv(data / "test.csv", make_sentiment_rows(80, seed=1))
    recipe = tmp_path / "tiny.yaml"
    recipe.write_text(yaml.safe_dump(tiny_recipe(data, epochs=8)), encoding="utf-8")
    attnkit.train(recipe, out=tmp_path / "teacher", log=lambda *_: None)
    corpus = tmp_path / "u.txt"
    rows = make_sentiment_rows(200, seed=3)
    corpus.write_text("\n".join(r["text"] + " the the" for r in rows) + "\n", encoding="utf-8")
    tsv = tmp_path / "p.tsv"
    info = bert.pseudo_labels([str(tmp_path / "teacher")], str(corpus), tsv, 0.5, True)
    assert info["pseudo_texts"] == len({r["text"] for r in rows})
    assert info["pseudo_confident"] == info["pseudo_texts"]  # two classes: max prob >= 0.5
    assert 0 < info["pseudo_kept"] <= info["pseudo_confident"] and info["pseudo_kept"] % 2 == 0
    student = tmp_path / "student.yaml"  # (one epoch: the counts are what is checked)
    student.write_text(yaml.safe_dump(tiny_recipe(data, epochs=1)), encoding="utf-8")
    record = bert.finetune(str(student), "student", [f"data.extra_train={tsv}"])
    assert record["extra_train_examples"] == info["pseudo_kept"]
    assert "extra_train_examples" not in bert.finetune(str(student), "plain", [])

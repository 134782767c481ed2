"""Format-2 runs written before issue 33's re-layout keep working.

tests/fixtures/format2_runs/ holds eight tiny runs written by attnkit at commit b635b3b (the
last commit before the layer folders, per-task data settings and one init_from mechanism;
their config.json has the flat data section of every task): a BERT classifier, a
sentence-pair one, a character GPT (task lm), a BERT tagger, a BERT QA model, a biLM, an
ELMo classifier on that biLM and a GPT classifier on that GPT, with what each predicted and
how each evaluated then (expected.json; made by make_runs.py there, see its README). Each
must load, predict and evaluate the same, and give its model config with every size filled
in."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

import attnkit
from attnkit.app.cli import main
from attnkit.models import from_pretrained, read_model_config

FIXTURES = Path(__file__).parents[1] / "fixtures" / "format2_runs"
EXPECTED = json.loads((FIXTURES / "expected.json").read_text(encoding="utf-8"))
INPUTS = EXPECTED["inputs"]
RUNS = sorted(EXPECTED["runs"])
CLASSIFIERS = ["bert-classifier", "bert-classifier-pair", "elmo-classifier", "gpt-classifier"]
TOL = 1e-6
SIZE = re.compile(r"(size|_len|_dim|d_model|d_ff|num_heads|num_layers|num_classes)$")


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """A copy of the fixtures whose DATA/ and RUNS/ paths point at the copy."""
    root = tmp_path_factory.mktemp("format2") / "runs"
    shutil.copytree(FIXTURES, root, ignore=shutil.ignore_patterns("*.py", "*.md"))
    for config in root.glob("*/config.json"):
        text = config.read_text(encoding="utf-8")
        text = text.replace('"DATA/', f'"{root / "data"}/').replace('"RUNS/', f'"{root}/')
        config.write_text(text, encoding="utf-8")
    return root


def _close(got: Any, want: Any, where: str) -> None:
    """Equal, floats to 1e-6 (relative or absolute), recursing into lists and dicts."""
    if isinstance(want, float):
        assert got == pytest.approx(want, rel=TOL, abs=TOL), where
    elif isinstance(want, dict):
        assert isinstance(got, dict) and got.keys() == want.keys(), where
        for key in want:
            _close(got[key], want[key], f"{where}.{key}")
    elif isinstance(want, list):
        assert isinstance(got, (list, tuple)) and len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            _close(g, w, f"{where}[{i}]")
    else:
        assert got == want, where


def test_the_fixtures_are_format_2_runs_of_the_old_layout() -> None:
    for name in RUNS:
        saved = json.loads((FIXTURES / name / "config.json").read_text(encoding="utf-8"))
        assert saved["format"] == 2 and "doc_stride" in saved["data"], name  # flat data section
        assert not (FIXTURES / name / "last").exists()
    assert EXPECTED["commit"] == "b635b3b"


@pytest.mark.parametrize("name", CLASSIFIERS)
def test_classifiers_predict_as_before(runs: Path, name: str) -> None:
    predictor = attnkit.load(runs / name)
    if name == "bert-classifier-pair":
        got = predictor.predict(INPUTS["premises"], pairs=INPUTS["hypotheses"])
    else:
        got = predictor.predict(INPUTS["texts"])
    got = [{"label": p.label, "probabilities": p.probabilities} for p in got]
    _close(got, EXPECTED["runs"][name]["predict"], name)


def test_gpt_scores_as_before(runs: Path) -> None:
    lm = attnkit.load(runs / "gpt-lm")
    _close(lm.perplexity(INPUTS["verse"]), EXPECTED["runs"]["gpt-lm"]["perplexity"], "ppl")


@pytest.mark.slow  # 1-3 s here: the process's first generation warms torch's kernels up
def test_gpt_generates_as_before(runs: Path) -> None:
    lm = attnkit.load(runs / "gpt-lm")
    want = EXPECTED["runs"]["gpt-lm"]
    greedy = lm.generate(INPUTS["prompts"], max_new_tokens=16, temperature=0)
    assert [g.text for g in greedy] == want["greedy"]
    sampled = lm.generate(INPUTS["prompts"], max_new_tokens=16, temperature=1.0, seed=0)
    assert [g.text for g in sampled] == want["sampled_seed0"]


def test_tagger_tags_as_before(runs: Path) -> None:
    got = attnkit.load(runs / "bert-tagger").tag(INPUTS["tag_texts"])
    got = [{"words": t.words, "labels": t.labels,
            "entities": [[e.type, e.text, e.start, e.end] for e in t.entities]}
           for t in got]  # fmt: skip
    _close(got, EXPECTED["runs"]["bert-tagger"]["tag"], "tag")


def test_qa_model_answers_as_before(runs: Path) -> None:
    questions = [tuple(q) for q in INPUTS["questions"]]
    got = attnkit.load(runs / "bert-qa").answer_batch(questions)
    got = [{"text": a.text, "start": a.start, "end": a.end, "score": a.score} for a in got]
    _close(got, EXPECTED["runs"]["bert-qa"]["answer"], "answer")


def test_bilm_scores_as_before(runs: Path) -> None:
    got = [t.to_dict() for t in attnkit.load(runs / "bilm").predict(INPUTS["texts"])]
    _close(got, EXPECTED["runs"]["bilm"]["perplexity"], "bilm")


@pytest.mark.parametrize("name", RUNS)
def test_cli_evaluate_gives_the_old_metrics(runs: Path, name: str, capsys) -> None:
    want = EXPECTED["runs"][name]
    assert main(["evaluate", str(runs / name), "--split", want["evaluate_split"], "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    for key, value in want["evaluate"].items():
        _close(report[key], value, f"{name} evaluate {key}")


@pytest.mark.parametrize("name", RUNS)
def test_model_configs_are_complete(runs: Path, name: str) -> None:
    saved = json.loads((runs / name / "config.json").read_text(encoding="utf-8"))
    config = read_model_config(runs / name)
    assert config.model_type == saved["model"]["model_type"]
    assert config.vocab_size == saved["vocab_size"] and config.pad_id == 0
    if "labels" in saved and hasattr(config, "num_classes"):
        assert config.num_classes == len(saved["labels"])
    for key, value in saved["model"].items():
        if key in ("init_from", "preset"):  # where the sizes came from, not a size
            continue
        assert getattr(config, key) == value, f"{name}: model.{key}"
    sizes = {k: v for k, v in vars(config).items() if SIZE.search(k)}
    assert {"vocab_size", "max_len"} <= sizes.keys(), name
    for key, value in sizes.items():  # every size a number, none left to a default
        assert isinstance(value, int) and value > 0, f"{name}: model.{key} = {value!r}"
    model = from_pretrained(runs / name)  # the run directory is all it needs
    assert type(model).__name__ == type(config.build()).__name__

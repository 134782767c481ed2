"""task: qa -- extractive question answering (BERT + span head) through attnkit.app.api:
windows and their targets, collate, training, loading, answering, evaluation, init_from a
Hugging Face BERT directory, recipe checks, and a smoke test on KorQuAD when the shared
data is there. Tiny models and tiny SQuAD-format files: the whole file runs in seconds."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest
import torch
import yaml

import attnkit
from attnkit.app.cli import main
from attnkit.core.config import ConfigError
from attnkit.core.errors import DataError, InputError
from attnkit.data.tokenization import train_tokenizer
from attnkit.models import SpanOutput
from attnkit.tasks import get_task
from attnkit.tasks.qa import (
    AnswerResult,
    QAObjective,
    QAPredictor,
    QASpec,
    encode_examples,
    prepare_data,
    qa_settings,
    read_split,
)
from attnkit.tasks.run_config import RunConfig

CITIES = ["Seoul", "Busan", "Paris", "Tokyo", "Lisbon", "Cairo", "Lima", "Oslo"]
SHARED = Path(
    os.environ.get("ATTNKIT_DATA") or Path(__file__).resolve().parents[3] / "shared" / "data"
)


def _context(seed: int, n: int = 12) -> tuple[str, list[tuple[str, int, int]]]:
    """A paragraph of n sentences and, per sentence, (city, year, visitors)."""
    rng = random.Random(seed)
    facts, parts = [], []
    for _ in range(n):
        city, year, visitors = rng.choice(CITIES), rng.randint(1900, 1999), rng.randint(10, 999)
        facts.append((city, year, visitors))
        parts.append(f"In {year} the city of {city} had {visitors} visitors.")
    return " ".join(parts), facts


def _squad(n_paragraphs: int, seed: int, per_paragraph: int = 3, sentences: int = 12) -> dict:
    """SQuAD-v1 JSON: questions "How many visitors did CITY have in YEAR?" -> the number."""
    rng = random.Random(seed)
    paragraphs = []
    for p in range(n_paragraphs):
        context, facts = _context(seed * 1000 + p, sentences)
        qas = []
        for q in rng.sample(range(len(facts)), per_paragraph):
            city, year, visitors = facts[q]
            start = context.index(f"In {year} the city of {city} had {visitors}")
            start += len(f"In {year} the city of {city} had ")
            assert context[start : start + len(str(visitors))] == str(visitors)
            qas.append(
                {
                    "id": f"{seed}-{p}-{q}",
                    "question": f"How many visitors did {city} have in {year}?",
                    "answers": [{"text": str(visitors), "answer_start": start}],
                }
            )
        paragraphs.append({"context": context, "qas": qas})
    return {"version": "1.1", "data": [{"title": f"t{seed}", "paragraphs": paragraphs}]}


def _write(path: Path, obj: dict) -> str:
    path.write_text(json.dumps(obj), encoding="utf-8")
    return str(path)


@pytest.fixture
def recipe(tmp_path: Path) -> dict:
    return {
        "task": "qa",
        "data": {
            "name": "file",
            "train": _write(tmp_path / "train.json", _squad(6, 0)),
            "validation": _write(tmp_path / "dev.json", _squad(2, 1)),
            "test": _write(tmp_path / "test.json", _squad(2, 2)),
            "max_len": 40,
            "doc_stride": 12,
            "max_question_len": 16,
            "max_answer_len": 8,
        },
        "tokenizer": {"kind": "wordpiece", "vocab_size": 300, "min_frequency": 1},
        "model": {"arch": "bert-qa", "d_model": 32, "num_heads": 2, "d_ff": 64,
                  "num_layers": 2},
        "training": {"epochs": 1, "max_steps": 4, "batch_size": 16, "lr": 1e-3,
                     "progress": False, "num_threads": 1, "log_every": 2, "device": "cpu"},
    }  # fmt: skip


def _quiet(*_: object) -> None:
    pass


# ----------------------------------------------------------------------------- data
def test_windows_targets_and_collate(recipe: dict) -> None:
    cfg = RunConfig.from_dict(recipe)
    assert qa_settings(cfg) == (12, 16, 8)
    data = prepare_data(cfg, log=_quiet)
    assert "train questions ->" in data.summary and "outside every window" in data.summary
    assert data.run_info == {"scorer": "squad"}
    assert len(data.train) > 3 * 18  # several windows per question
    examples = data.extras["val_examples"]
    features = data.extras["val_features"]
    assert len(examples) == 6 and len(features) == len(data.validation)
    for k, (ids, types, s, e, index) in enumerate(data.validation):
        f = features[index]
        assert index == k and ids == f.input_ids and len(ids) <= 40
        assert types == f.token_type_ids and ids[0] == data.tokenizer.cls_id
        ex = examples[f.example_index]
        if s == 0:  # a window without the whole answer points at [CLS]
            assert e == 0
        else:
            text, start = ex.answers[0]
            assert f.offsets[s][0] <= start and f.offsets[e][1] >= start + len(text)
            assert types[s] == types[e] == 1
    # every question has one window holding its answer, and windows without it
    targets = {}
    for _, _, s, _, index in data.validation:
        targets.setdefault(features[index].example_index, []).append(s)
    assert all(any(t > 0 for t in ts) and 0 in ts for ts in targets.values())

    task = get_task("qa").objective(cfg, data)
    batch = task.collate(data.validation[:5])
    width = max(len(it[0]) for it in data.validation[:5])
    assert batch["input_ids"].shape == batch["token_type_ids"].shape == (5, width)
    assert batch["attention_mask"].dtype == torch.bool
    for row, it in enumerate(data.validation[:5]):
        n = len(it[0])
        assert batch["input_ids"][row, n:].eq(data.tokenizer.pad_id).all()
        assert batch["token_type_ids"][row, :n].tolist() == it[1]
        assert batch["token_type_ids"][row, n:].eq(0).all()
        assert batch["attention_mask"][row].sum() == n
    assert batch["start_positions"].tolist() == [it[2] for it in data.validation[:5]]
    assert batch["index"].tolist() == [it[4] for it in data.validation[:5]]


def test_span_loss_and_evaluate_with_perfect_logits(recipe: dict) -> None:
    """Logits that point at the gold span score EM 100; the loss ignores padding."""
    cfg = RunConfig.from_dict(recipe)
    data = prepare_data(cfg, log=_quiet)
    features = data.extras["val_features"]

    class Oracle(torch.nn.Module):
        def forward(self, ids, mask, types):
            start = torch.zeros(ids.shape)
            end = torch.zeros(ids.shape)
            for row, k in enumerate(self.index.tolist()):
                f = features[k]
                start[row, f.start_position] = end[row, f.end_position] = 50.0
            return SpanOutput(start, end)

    task: QAObjective = get_task("qa").objective(cfg, data)
    oracle = Oracle()
    batches = []
    for lo in range(0, len(data.validation), 7):
        batches.append(task.collate(data.validation[lo : lo + 7]))

    def with_index(batch):
        oracle.index = batch["index"]
        return batch

    report = task.evaluate(oracle, (with_index(b) for b in batches))
    assert report["exact_match"] == report["f1"] == 100.0
    assert report["count"] == 6 and report["num_windows"] == len(data.validation)
    assert report["loss"] < 1e-6
    loss, tokens = task.loss(oracle, with_index(batches[0]))
    assert loss.item() < 1e-6 and tokens == int(batches[0]["attention_mask"].sum())


def test_unusable_answers_are_skipped_and_counted(tmp_path: Path, recipe: dict) -> None:
    squad = _squad(3, 0)
    qas = squad["data"][0]["paragraphs"][0]["qas"]
    qas[0]["answers"][0]["answer_start"] += 1  # no longer points at its text
    qas[1]["answers"] = []
    recipe["data"]["train"] = _write(tmp_path / "bad.json", squad)
    data = prepare_data(RunConfig.from_dict(recipe), log=_quiet)
    assert "2 training questions without a usable answer skipped" in data.summary
    assert data.extras["skipped"] == 2
    qas[2]["question"] = " "
    recipe["data"]["train"] = _write(tmp_path / "bad.json", squad)
    with pytest.raises(DataError, match=f"question '{qas[2]['id']}': the question is empty"):
        prepare_data(RunConfig.from_dict(recipe), log=_quiet)


# ----------------------------------------------------------------------------- the api
@pytest.mark.slow
def test_train_load_answer_evaluate(tmp_path: Path, recipe: dict) -> None:
    run = tmp_path / "run"
    lines: list[str] = []
    result = attnkit.train(RunConfig.from_dict(recipe), out=run, log=lines.append)
    assert result.step == 4 and result.best_metric is not None
    saved = json.loads((run / "config.json").read_text())
    assert saved["scorer"] == "squad" and saved["model"]["arch"] == "bert-qa"
    metrics = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert any("val_f1" in m and "val_exact_match" in m for m in metrics)

    qa = attnkit.load(run)
    assert isinstance(qa, QAPredictor) and qa.task == "qa"
    context, facts = _context(99, n=20)  # long: many windows
    city, year, _ = facts[3]
    res = qa.answer(f"How many visitors did {city} have in {year}?", context)
    assert isinstance(res, AnswerResult)
    assert res.text and context[res.start : res.end] == res.text
    assert res.format().split("\t")[0] == res.text and res.format().count("\t") == 2
    assert json.loads(qa.to_json([res]))["text"] == res.text
    batch = qa.answer_batch([("Who?", context), ("When?", "It rained in 1990 and 1991.")])
    assert len(batch) == 2 and all(r.text for r in batch)
    long_q = " ".join(["visitors"] * 40) + "?"
    with pytest.warns(UserWarning, match="longer than max_question_len"):
        assert qa.answer(long_q, context).question_truncated
    # a context that holds no answer: extractive QA still returns its best span (documented),
    # a piece of the context with a score the caller can threshold
    unrelated = "The weather was mild and the river ran slowly past the old mill."
    res = qa.answer(f"How many visitors did {city} have in {year}?", unrelated)
    assert res.text and unrelated[res.start : res.end] == res.text and res.score < float("inf")

    report = attnkit.evaluate(run, "test")
    assert report["split"] == "test" and report["count"] == 6
    assert 0.0 <= report["exact_match"] <= report["f1"] <= 100.0
    assert report["scorer"] == "squad" and report["num_windows"] > 6
    assert get_task("qa").evaluate(qa, "test", scorer="korquad")["scorer"] == "korquad"


def test_the_cli_and_bad_input(tmp_path: Path, recipe: dict, capsys) -> None:
    recipe["training"]["max_steps"] = 1
    (tmp_path / "qa.yaml").write_text(yaml.safe_dump(recipe), encoding="utf-8")
    run = str(tmp_path / "run")
    assert main(["train", str(tmp_path / "qa.yaml"), "--out", run]) == 0
    context, facts = _context(7)
    (tmp_path / "context.txt").write_text(context, encoding="utf-8")
    capsys.readouterr()
    question = f"How many visitors did {facts[0][0]} have in {facts[0][1]}?"
    assert main(["answer", run, "--context", str(tmp_path / "context.txt"),
                 "--question", question, "--question", "Who?"]) == 0  # fmt: skip
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and lines[0].split("\t")[0] in context
    assert lines[0].endswith("\t" + question)
    assert main(["answer", run, "--context", context, "--question", question, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert context[out["start"] : out["end"]] == out["text"]
    assert main(["evaluate", run, "--split", "validation"]) == 0
    assert "f1" in capsys.readouterr().out
    assert main(["answer", run, "--context", context, "--question", " "]) == 2
    assert capsys.readouterr().err.startswith("attnkit: error:")

    qa = attnkit.load(run)
    for question, context, message in [
        ("", "Some context.", "the question is empty"),
        ("  ", "Some context.", "the question is empty"),
        ("Who?", " \n", "the context is empty"),
        (None, "Some context.", "the question must be a string"),
    ]:
        with pytest.raises(InputError, match=message) as info:
            qa.answer(question, context)
        assert "\n" not in str(info.value)
    with pytest.raises(InputError, match="max_answer_len"):
        qa.answer("Who?", "Some context.", max_answer_len=0)
    with pytest.raises(InputError, match="pair 1: the context is empty"):
        qa.answer_batch([("Who?", "Some context."), ("Who?", "")])


@pytest.mark.slow
def test_a_tiny_model_learns_its_training_answers(tmp_path: Path, recipe: dict) -> None:
    """Overfitting 3 questions (each about its own 6-sentence paragraph, read in several
    windows): EM 100 on them, so windows, targets, loss and decoding agree."""
    squad = _squad(3, 5, per_paragraph=1, sentences=6)
    recipe["data"].update(
        train=_write(tmp_path / "few.json", squad), validation=None, val_fraction=0.0,
    )  # fmt: skip
    recipe["model"]["dropout"] = 0.0
    recipe["model"]["attention_dropout"] = 0.0
    recipe["training"].update(max_steps=150, epochs=1000, lr=3e-3, warmup_ratio=0.0)
    run = tmp_path / "run"
    attnkit.train(RunConfig.from_dict(recipe), out=run, log=_quiet)
    qa = attnkit.load(run)
    pairs = [(p["qas"][0]["question"], p["context"]) for p in squad["data"][0]["paragraphs"]]
    gold = [p["qas"][0]["answers"][0]["text"] for p in squad["data"][0]["paragraphs"]]
    assert [r.text for r in qa.answer_batch(pairs)] == gold
    assert qa.evaluate_examples(read_split(qa.config, "train"))["exact_match"] == 100


# ----------------------------------------------------------------------------- init_from
@pytest.mark.slow
def test_init_from_a_hugging_face_bert_directory(tmp_path: Path, recipe: dict) -> None:
    from attnkit.models.bert import BertConfig, BertModel

    texts = [p["context"] for p in _squad(6, 0)["data"][0]["paragraphs"]]
    tokenizer = train_tokenizer(texts * 2, vocab_size=200, min_frequency=1, lowercase=True)
    hf = tmp_path / "hf-bert"
    config = BertConfig(vocab_size=tokenizer.vocab_size, max_len=64, d_model=32, num_heads=2,
                        d_ff=64, num_layers=2)  # fmt: skip
    BertModel(config).save_pretrained(hf)
    tokenizer.save(hf / "tokenizer.json")
    recipe["model"] = {"arch": "bert-qa", "init_from": str(hf)}
    recipe["training"]["max_steps"] = 2
    lines: list[str] = []
    run = tmp_path / "run"
    attnkit.train(RunConfig.from_dict(recipe), out=run, log=lines.append)
    assert any("initialised the encoder from" in line for line in lines)
    saved = json.loads((run / "config.json").read_text())
    assert saved["model"]["d_model"] == 32 and saved["model"]["max_len"] == 64
    qa = attnkit.load(run)
    res = qa.answer("How many visitors did Seoul have?", texts[0])
    assert texts[0][res.start : res.end] == res.text


# ----------------------------------------------------------------------------- recipe checks
def test_recipe_checks(recipe: dict) -> None:
    def bad(match: str, **data) -> None:
        raw = {**recipe, "data": {**recipe["data"], **data}}
        with pytest.raises(ConfigError, match=match):
            RunConfig.from_dict(raw)

    bad("task qa reads data.name korquad or file, got .nsmc.", name="nsmc")
    bad("needs data.train", train=None)
    bad("must exceed data.max_question_len", max_len=19)
    with pytest.raises(ConfigError, match="remove tokenizer.path"):
        RunConfig.from_dict(
            {**recipe, "model": {"arch": "bert-qa", "init_from": "x"},
             "tokenizer": {"path": "tok.json"}}
        )  # fmt: skip
    with pytest.raises(ConfigError, match="task qa needs model.arch bert-qa"):
        RunConfig.from_dict({**recipe, "model": {"arch": "transformer"}})
    assert isinstance(get_task("qa"), QASpec)
    cfg = RunConfig.from_dict(recipe)
    with pytest.raises(DataError, match="no file for split 'dev'"):
        read_split(cfg, "dev")


# ----------------------------------------------------------------------------- real data
@pytest.mark.skipif(
    not (SHARED / "korquad").is_dir(), reason="the shared datasets are not on this machine"
)
def test_korquad_smoke(tmp_path: Path) -> None:
    """10 KorQuAD questions cut into windows by a tokenizer trained on them."""
    cfg = RunConfig.from_dict(
        {"task": "qa", "data": {"name": "korquad", "data_dir": str(SHARED), "max_len": 128,
                                "doc_stride": 64}}
    )  # fmt: skip
    examples = read_split(cfg, "validation")[:10]
    assert len(examples) == 10 and all(ex.answers for ex in examples)
    texts = [ex.context for ex in examples] + [ex.question for ex in examples]
    tokenizer = train_tokenizer(texts, vocab_size=800, min_frequency=1)
    features = encode_examples(examples, tokenizer, cfg)
    assert len(features) > 10  # KorQuAD paragraphs exceed 128 tokens
    hits = [f for f in features if f.start_position > 0]
    assert {f.example_index for f in hits} == set(range(10))
    for f in hits:
        ex = examples[f.example_index]
        text, start = ex.answers[0]
        span = ex.context[f.offsets[f.start_position][0] : f.offsets[f.end_position][1]]
        assert text in span  # (a token may run past the answer: "서울이다" vs "서울")


def test_held_out_validation_keeps_articles_apart() -> None:
    """Without a validation file, whole articles are held out: no paragraph is in both."""
    from attnkit.data.qa_readers import QAExample
    from attnkit.tasks import qa
    from attnkit.tasks.run_config import RunConfig

    examples = [
        QAExample(f"q{a}-{i}", f"article {a}", f"context of article {a}", f"question {i}?",
                  [("article", 11)])
        for a in range(20) for i in range(5)
    ]  # fmt: skip
    cfg = RunConfig()
    cfg.data.name, cfg.data.train, cfg.data.val_fraction = "file", "x.json", 0.2
    original = qa.read_split
    qa.read_split = lambda cfg, split: examples
    try:
        train, val = qa._split(cfg)
    finally:
        qa.read_split = original
    assert len(train) + len(val) == 100 and 0 < len(val) < 100
    assert not {ex.title for ex in train} & {ex.title for ex in val}

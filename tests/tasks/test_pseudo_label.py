"""Self-training: pseudo-labels from a teacher run (confidence threshold, class balance,
repeats), their TSV, and data.extra_train (added after the validation split, without any
text of the dataset's own splits); `attnkit pseudo-label` and its bad inputs."""

from __future__ import annotations

import json

import pytest
import torch
import yaml

import attnkit
from attnkit.app.cli import main
from attnkit.core.config import ConfigError
from attnkit.core.errors import DataError, InputError
from attnkit.data.pseudo_label_files import (
    PseudoLabel,
    extra_training_examples,
    same_text,
    write_pseudo_labels,
)
from attnkit.data.readers import Example, read_table
from attnkit.models import ClassifierOutput
from attnkit.tasks.classify import ClassificationObjective, prepare_data
from attnkit.tasks.pseudo_label import pseudo_label
from attnkit.tasks.run_config import load_config
from conftest import make_sentiment_rows, tiny_recipe, write_tiny_data

QUIET = {"log": lambda *_: None}


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
    root = tmp_path_factory.mktemp("teacher")
    data = write_tiny_data(root / "data")
    recipe = root / "tiny.yaml"
    recipe.write_text(yaml.safe_dump(tiny_recipe(data, epochs=8)))
    attnkit.train(recipe, out=root / "run", **QUIET)
    return root


def _teacher(root):
    """The teacher at temperature 1: the tiny run's fitted temperature is ~0.05, which
    rounds most probabilities to exactly 1.0."""
    predictor = attnkit.load(root / "run")
    predictor.temperature = 1.0
    return predictor


def _unlabelled(n: int = 300, seed: int = 7) -> list[str]:
    # new texts like the teacher's (an unseen word would make its guesses random: tiny data)
    return [row["text"] + " the the" for row in make_sentiment_rows(n, seed=seed)]


@pytest.mark.slow
def test_keeps_exactly_the_texts_at_or_above_the_threshold(teacher):
    predictor = _teacher(teacher)
    texts = _unlabelled()
    probs = {p.text: p.probability for p in predictor.predict(texts)}
    threshold = sorted(probs.values())[len(probs) // 2]  # about half the texts pass
    rows, stats = pseudo_label(predictor, texts, threshold, bf16=False, **QUIET)
    kept = [r.text for r in rows]
    # pseudo-labelling batches the texts otherwise than predict(), which can move a
    # probability in its last float bits: a text within 1e-6 of the threshold may go either
    # way, every other one must be kept exactly when it is at or above it
    distinct = [same_text(t) for t in dict.fromkeys(texts)]
    sure = [t for t in distinct if abs(probs[t] - threshold) > 1e-6]
    assert [t for t in kept if t in sure] == [t for t in sure if probs[t] >= threshold]
    assert kept == [t for t in distinct if t in set(kept)]  # input order, repeats once
    assert 0 < len(rows) < stats["texts"]
    assert stats["confident"] == stats["kept"] == len(rows)
    assert stats["texts"] == len(set(texts))
    for r in rows:
        assert r.label == predictor.predict(r.text)[0].label
        assert r.confidence == pytest.approx(probs[r.text], abs=1e-5)


@pytest.mark.slow
def test_balance_keeps_the_most_confident_of_each_class(teacher):
    predictor = _teacher(teacher)
    texts = _unlabelled(400)
    # skew the input: three positive texts for each negative one
    preds = predictor.predict(texts)
    pos = [p for p in preds if p.label == "pos"]
    neg = [p for p in preds if p.label == "neg"][: max(1, len(pos) // 3)]
    texts = [p.text for p in [*pos, *neg]]
    everything, _ = pseudo_label(predictor, texts, 0.5, bf16=False, **QUIET)
    rows, stats = pseudo_label(predictor, texts, 0.5, balance=True, bf16=False, **QUIET)
    n_neg = sum(r.label == "neg" for r in everything)
    assert (
        stats["kept_neg"] == stats["kept_pos"] == n_neg < sum(r.label == "pos" for r in everything)
    )
    lowest_kept = min(r.confidence for r in rows if r.label == "pos")
    dropped = [r for r in everything if r.label == "pos" and r not in rows]
    assert dropped and max(r.confidence for r in dropped) <= lowest_kept


@pytest.mark.slow
def test_empty_repeated_and_bad_arguments(teacher):
    predictor = attnkit.load(teacher / "run")
    rows, stats = pseudo_label(
        predictor, ["great  movie", "great movie", "   ", "great movie "], 0.0, **QUIET
    )
    assert [r.text for r in rows] == ["great movie"] and stats["texts"] == 1
    with pytest.raises(InputError, match="empty"):
        pseudo_label(predictor, ["", "  "], **QUIET)
    with pytest.raises(InputError, match="between 0 and 1"):
        pseudo_label(predictor, ["great"], 1.5, **QUIET)
    with pytest.raises(InputError, match="a classify run or an ensemble"):
        pseudo_label(object(), ["great"], **QUIET)


@pytest.mark.slow
def test_bf16_labels_agree_with_fp32(teacher):
    predictor = _teacher(teacher)
    texts = _unlabelled(200)
    fp32, _ = pseudo_label(predictor, texts, 0.0, bf16=False, **QUIET)
    bf16, _ = pseudo_label(predictor, texts, 0.0, bf16=True, chunk=64, **QUIET)
    agree = sum(a.label == b.label for a, b in zip(fp32, bf16, strict=True))
    assert agree >= 0.97 * len(fp32)
    assert torch.allclose(
        torch.tensor([r.confidence for r in fp32]),
        torch.tensor([r.confidence for r in bf16]),
        atol=0.05,
    )


def test_tsv_round_trip_keeps_text_label_and_confidence(tmp_path):
    rows = [
        PseudoLabel("탭\t과 줄\n바꿈", "positive", 0.98765),
        PseudoLabel("별로", "negative", 0.9),
    ]
    path = write_pseudo_labels(rows, tmp_path / "p.tsv")
    back = read_table(path)
    assert [(ex.text, ex.label) for ex in back] == [
        ("탭 과 줄 바꿈", "positive"),
        ("별로", "negative"),
    ]
    assert path.read_text(encoding="utf-8").splitlines()[1].endswith("\t0.9877")
    assert not list(tmp_path.glob("*.tmp*"))  # written via a temp file, renamed


def _recipe(data, tmp_path, extra=None, **data_keys):
    r = tiny_recipe(data)
    r["data"].update(data_keys)
    if extra is not None:
        r["data"]["extra_train"] = str(extra)
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(r))
    return load_config(path)


@pytest.mark.slow
def test_extra_train_drops_texts_of_every_split_and_repeats(tmp_path, teacher):
    data = teacher / "data"
    cfg = _recipe(data, tmp_path)
    train = read_table(data / "train.csv")
    test = read_table(data / "test.csv")
    rows = [
        PseudoLabel("a brand new  review", "pos", 0.99),
        PseudoLabel("a brand new review", "pos", 0.99),  # a repeat (whitespace aside)
        PseudoLabel(train[0].text + " ", "neg", 0.99),  # a training text
        PseudoLabel(test[0].text.replace(" ", "  "), "pos", 0.99),  # a test text
        PseudoLabel("another new one", "neg", 0.95),
    ]
    cfg.data.extra_train = str(write_pseudo_labels(rows, tmp_path / "p.tsv"))
    to_id = {"neg": 0, "pos": 1}
    extra, soft, dropped = extra_training_examples(cfg.data, ["neg", "pos"], to_id, train, test)
    assert extra == [Example("a brand new review", "pos"), Example("another new one", "neg")]
    assert dropped == 3 and soft is None  # (no prob_ columns: hard labels)


@pytest.mark.slow
def test_extra_train_labels_by_name_or_raw_form_and_unknown_ones(tmp_path, teacher):
    cfg = _recipe(teacher / "data", tmp_path)
    path = tmp_path / "p.tsv"
    path.write_text("text\tlabel\na\tpositive\nb\t0\n", encoding="utf-8")
    cfg.data.extra_train = str(path)
    names, raw = ["negative", "positive"], {"0": 0, "1": 1}  # how NSMC's labels map
    extra, _, _ = extra_training_examples(cfg.data, names, raw, [])
    assert [ex.label for ex in extra] == ["1", "0"]
    path.write_text("text\tlabel\na\tneutral\n", encoding="utf-8")
    with pytest.raises(DataError, match="'neutral' is not one of the classes"):
        extra_training_examples(cfg.data, names, raw, [])


@pytest.mark.slow
def test_extra_train_joins_training_after_the_validation_split(tmp_path, teacher):
    data = teacher / "data"
    base = prepare_data(_recipe(data, tmp_path), **QUIET)
    rows = [PseudoLabel(t, "pos", 0.99) for t in ("fresh text one", "fresh text two")]
    extra = write_pseudo_labels(rows, tmp_path / "p.tsv")
    more = prepare_data(_recipe(data, tmp_path, extra), base.tokenizer, **QUIET)
    assert more.validation == base.validation  # the same held-out examples
    assert more.train[: len(base.train)] == base.train
    assert len(more.train) == len(base.train) + 2
    assert more.run_info["extra_train_examples"] == 2
    assert "extra_train_examples" not in base.run_info


@pytest.mark.slow
def test_extra_train_refused_for_sentence_pairs(tmp_path, teacher):
    path = tmp_path / "pairs.csv"
    path.write_text("a,b,label\nx,y,yes\nz,w,no\n", encoding="utf-8")
    r = tiny_recipe(teacher / "data")
    r["data"] = {"name": "file", "train": str(path), "text_column": "a", "pair_column": "b",
                 "extra_train": str(path)}  # fmt: skip
    r["model"] = {"arch": "bert-classifier", "preset": "tiny"}
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(r))
    with pytest.raises(ConfigError, match="extra_train adds single texts"):
        attnkit.train(tmp_path / "r.yaml", out=tmp_path / "run", **QUIET)


def _cli(argv, capsys):
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.slow
def test_cli_writes_the_tsv_a_recipe_trains_on(teacher, tmp_path, capsys):
    corpus = tmp_path / "u.txt"
    corpus.write_text("\n".join(_unlabelled()) + "\n", encoding="utf-8")
    out = tmp_path / "p.tsv"
    argv = ["pseudo-label", str(teacher / "run"), "--input", str(corpus), "-o", str(out)]
    code, stdout, stderr = _cli([*argv, "--balance", "--min-confidence", "0.7"], capsys)
    assert code == 0, stderr
    assert stdout.startswith(f"wrote {out}: ") and "had confidence >= 0.7" in stdout
    assert "labelled 300/300 texts" in stderr
    table = read_table(out)
    splits = [read_table(teacher / "data" / f"{split}.csv") for split in ("train", "test")]
    known = {same_text(ex.text) for split in splits for ex in split}
    new = [ex for ex in table if same_text(ex.text) not in known]  # what the student adds
    labels = [ex.label for ex in table]
    assert labels.count("pos") == labels.count("neg") > 0
    student = tmp_path / "student.yaml"
    r = tiny_recipe(teacher / "data", epochs=1)
    r["data"]["extra_train"] = str(out)
    student.write_text(yaml.safe_dump(r))
    assert _cli(["train", str(student), "--out", str(tmp_path / "s")], capsys)[0] == 0
    saved = attnkit.load(tmp_path / "s").run_dir / "config.json"
    assert f'"extra_train_examples": {len(new)}' in saved.read_text()


@pytest.mark.slow
@pytest.mark.parametrize(
    "tail, message",
    [
        (["--min-confidence", "1.5"], "expected a number from 0 to 1"),
        (["-o", "{tmp}/missing/p.tsv"], "missing does not exist (create it first)"),
        (["-o", "{tmp}"], "is a folder"),
        (["--input", "no-such-dataset"], "no unlabelled text for dataset 'no-such-dataset'"),
    ],
)
def test_cli_bad_input_is_one_line_and_writes_nothing(teacher, tmp_path, capsys, tail, message):
    corpus = tmp_path / "u.txt"
    corpus.write_text("good movie\n", encoding="utf-8")
    argv = ["pseudo-label", str(teacher / "run"), "--input", str(corpus), "-o",
            str(tmp_path / "p.tsv")]  # fmt: skip
    argv += [a.format(tmp=tmp_path) for a in tail]
    code, _, stderr = _cli(argv, capsys)
    assert code == 2
    assert message in stderr and len(stderr.strip().splitlines()) == 1
    assert not (tmp_path / "p.tsv").exists()


def test_cli_refuses_a_run_that_is_not_a_classifier(served_runs, tmp_path, capsys):
    corpus = tmp_path / "u.txt"
    corpus.write_text("good movie\n", encoding="utf-8")
    code, _, stderr = _cli(
        ["pseudo-label", str(served_runs["verse"]), "--input", str(corpus), "-o",
         str(tmp_path / "p.tsv")], capsys)  # fmt: skip
    assert code == 2 and "is a lm run; pseudo-labels come from a classify run" in stderr


@pytest.mark.slow
def test_an_ensemble_teacher_averages_its_members(teacher, tmp_path):
    other = tiny_recipe(teacher / "data", epochs=2)
    other["model"] = {"arch": "gru", "d_model": 32, "hidden_size": 32}
    (tmp_path / "gru.yaml").write_text(yaml.safe_dump(other))
    attnkit.train(tmp_path / "gru.yaml", out=tmp_path / "gru", **QUIET)
    texts = _unlabelled(100)
    one, _ = pseudo_label(attnkit.load(teacher / "run"), texts, 0.0, soft=True, **QUIET)
    two, _ = pseudo_label(attnkit.load(tmp_path / "gru"), texts, 0.0, soft=True, **QUIET)
    both = attnkit.load([teacher / "run", tmp_path / "gru"])
    rows, _ = pseudo_label(both, texts, 0.0, soft=True, **QUIET)
    for a, b, r in zip(one, two, rows, strict=True):
        mean = [(x + y) / 2 for x, y in zip(a.probabilities, b.probabilities, strict=True)]
        assert r.probabilities == pytest.approx(mean, abs=1e-5)
        assert r.confidence == pytest.approx(max(mean), abs=1e-5)
        # the label of the largest mean (to the same 1e-5: two classes can tie that closely)
        assert mean[both.labels.index(r.label)] == pytest.approx(max(mean), abs=1e-5)


@pytest.mark.slow
def test_soft_targets_reach_the_loss_as_distributions(teacher, tmp_path):
    predictor = attnkit.load(teacher / "run")
    rows, _ = pseudo_label(predictor, _unlabelled(50), 0.0, soft=True, **QUIET)
    assert all(sum(r.probabilities) == pytest.approx(1.0, abs=1e-5) for r in rows)
    with pytest.raises(InputError, match="class names"):
        write_pseudo_labels(rows, tmp_path / "p.tsv")
    path = write_pseudo_labels(rows, tmp_path / "p.tsv", predictor.labels)
    assert path.read_text(encoding="utf-8").splitlines()[0].split("\t") == [
        "text", "label", "confidence", "prob_neg", "prob_pos"]  # fmt: skip
    data = prepare_data(_recipe(teacher / "data", tmp_path, path), **QUIET)
    base = len(data.train) - len(rows)
    assert all(isinstance(it[1], int) for it in data.train[:base])  # the labelled ones
    soft = [it[1] for it in data.train[base:]]
    assert soft == [pytest.approx(r.probabilities, abs=1e-4) for r in rows]
    task = ClassificationObjective(["neg", "pos"], pad_id=0)
    batch = task.collate([data.train[0], data.train[base]])
    assert batch["labels"].shape == (2, 2)
    assert batch["labels"][0].tolist() == [1.0 - data.train[0][1], float(data.train[0][1])]
    logits = torch.tensor([[0.3, -0.2], [1.0, 2.0]])
    expected = -(batch["labels"] * logits.log_softmax(-1)).sum(-1).mean()
    model = lambda ids, mask: ClassifierOutput(logits)  # noqa: E731
    assert task.loss(model, batch)[0].item() == pytest.approx(expected.item(), abs=1e-6)
    hard = task.collate(data.train[:2])  # no soft target: class ids, as before
    assert hard["labels"].dtype == torch.long and hard["labels"].shape == (2,)


@pytest.mark.slow
@pytest.mark.parametrize(
    "body, message",
    [
        ("text\tlabel\tprob_neg\na\tneg\t0.9\n", "missing prob_pos"),
        ("text\tlabel\tprob_neg\tprob_pos\na\tneg\t0.9\t0.3\n", "sum to 1"),
        ("text\tlabel\tprob_neg\tprob_pos\na\tneg\tx\t0.3\n", "not a number"),
    ],
)
def test_bad_soft_targets_are_one_clear_error(teacher, tmp_path, body, message):
    path = tmp_path / "p.tsv"
    path.write_text(body, encoding="utf-8")
    cfg = _recipe(teacher / "data", tmp_path, path)
    with pytest.raises(DataError, match=message):
        prepare_data(cfg, **QUIET)


@pytest.mark.slow
def test_soft_targets_from_json_lines(teacher, tmp_path):
    path = tmp_path / "p.jsonl"
    rows = [
        {"text": "fresh text one", "label": "pos", "prob_neg": 0.2, "prob_pos": 0.8},
        {"text": "fresh text two", "label": "neg", "prob_neg": 0.7, "prob_pos": 0.3},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    cfg = _recipe(teacher / "data", tmp_path, path)
    extra, soft, dropped = extra_training_examples(
        cfg.data, ["neg", "pos"], {"neg": 0, "pos": 1}, []
    )
    assert [ex.text for ex in extra] == ["fresh text one", "fresh text two"] and dropped == 0
    assert soft == [pytest.approx((0.2, 0.8)), pytest.approx((0.7, 0.3))]

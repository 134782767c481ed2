"""task: tag (NER with a BERT, attnkit.tasks.tag): training through attnkit.train on tiny
CoNLL-style files, loading, tagging with character offsets, evaluation, the CLI, label
alignment through the collate, init_from a Hugging Face BERT directory, KLUE-NER
(per character: labels on every piece of the natural text, or each character a word) smoke
tests on the shared data when it is present, the piece -> character mapping of the
predictor, the klue-ner recipe."""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path

import pytest
import torch

import attnkit
from attnkit.app.cli import main
from attnkit.core.config import ConfigError
from attnkit.core.errors import DataError, InputError, RunError
from attnkit.data.ner_features import IGNORE_INDEX
from attnkit.data.ner_readers import TaggedSentence, load_tagged
from attnkit.data.tokenization import Tokenizer, train_tokenizer
from attnkit.models import TaggerOutput
from attnkit.tasks.run_config import RunConfig, load_config
from attnkit.tasks.tag import (
    KNOWN_TAGS,
    TaggingObjective,
    TagPredictor,
    _entities,
    encode_sentences,
    split_words,
    tag_labels,
    word_unit,
)

SHARED = Path(
    os.environ.get("ATTNKIT_DATA") or Path(__file__).resolve().parents[3] / "shared" / "data"
)
QUIET = {"log": lambda *_: None}

FIRST_NAMES = ["John", "Mary", "Anna", "Peter"]
LAST_NAMES = ["Smith", "Kim", "Brown"]  # always second: I-PER is a property of the word
PLACES = ["Paris", "London", "Berlin", "Seoul", "Rome"]
ORGS = ["Google", "Reuters", "Samsung"]
FILLER = ["the", "visited", "said", "in", "on", "today", "met", "from", "a", "report", ","]


def _sentences(n: int, seed: int, misc: bool = False) -> list[list[tuple[str, str]]]:
    """Random sentences of filler words with a person, a place and maybe an organisation."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words = [(w, "O") for w in rng.choices(FILLER, k=rng.randint(2, 5))]
        first, last = rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)
        spans = [[(first, "B-PER"), (last, "I-PER")], [(rng.choice(PLACES), "B-LOC")]]
        if rng.random() < 0.5:
            spans.append([(rng.choice(ORGS), "B-ORG")])
        if misc:
            spans.append([("Olympics", "B-MISC")])
        for span in spans:
            at = rng.randrange(len(words) + 1)
            words[at:at] = span
        out.append([*words, (".", "O")])
    return out


def _write(path: Path, sentences: list[list[tuple[str, str]]]) -> Path:
    blocks = ["\n".join(f"{w}\t{t}" for w, t in s) for s in sentences]
    path.write_text("-DOCSTART-\tO\n\n" + "\n\n".join(blocks) + "\n", encoding="utf-8")
    return path


def _recipe(data: Path, **training) -> dict:
    return {
        "task": "tag",
        "data": {
            "name": "file",
            "train": str(data / "train.conll"),
            "validation": str(data / "valid.conll"),
            "test": str(data / "test.conll"),
            "max_len": 24,
        },
        "tokenizer": {"kind": "wordpiece", "vocab_size": 120, "min_frequency": 1},
        "model": {
            "arch": "bert-tagger",
            "d_model": 32,
            "num_heads": 2,
            "d_ff": 64,
            "num_layers": 2,
            "dropout": 0.0,
            "attention_dropout": 0.0,
        },
        "training": {
            "epochs": 1,
            "max_steps": 60,
            "batch_size": 16,
            "lr": 5e-3,
            "warmup_ratio": 0.0,
            "eval_every": 30,
            "log_every": 10,
            "progress": False,
            "num_threads": 1,
            **training,
        },
    }


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("conll")
    _write(d / "train.conll", _sentences(240, seed=0))
    _write(d / "valid.conll", _sentences(30, seed=1))
    _write(d / "test.conll", _sentences(30, seed=2))
    return d


@pytest.fixture(scope="module")
def run(tmp_path_factory, data: Path) -> Path:
    out = tmp_path_factory.mktemp("runs") / "tagger"
    attnkit.train(RunConfig.from_dict(_recipe(data)), out=out, **QUIET)
    return out


# ------------------------------------------------------------------------- training and use
def test_train_load_tag_and_evaluate(run: Path) -> None:
    saved = json.loads((run / "config.json").read_text())
    assert saved["labels"] == ["O", "B-LOC", "B-ORG", "B-PER", "I-PER"]
    assert saved["word_unit"] == "word" and saved["model"]["num_classes"] == 5
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert {"val_f1", "val_precision", "val_recall", "val_accuracy", "val_loss"} <= set(rows[-1])

    tagger = attnkit.load(run)
    assert isinstance(tagger, TagPredictor) and tagger.task == "tag"
    text = "today  Mary Kim visited Paris, said Reuters."
    (result,) = tagger.tag(text)
    assert result.words == ["today", "Mary", "Kim", "visited", "Paris", ",", "said", "Reuters", "."]
    assert len(result.labels) == len(result.words) and not result.truncated
    assert set(result.labels) <= set(saved["labels"])
    for e in result.entities:
        assert text[e.start : e.end] == e.text and e.type in ("PER", "LOC", "ORG")
    # the tiny model learned the names (240 sentences, 60 steps)
    assert [(e.type, e.text) for e in result.entities] == [
        ("PER", "Mary Kim"),
        ("LOC", "Paris"),
        ("ORG", "Reuters"),
    ]
    assert result.entities[0].start == 7 and result.entities[0].end == 15
    assert tagger.entities(text) == result.entities
    assert tagger.predict([text, "Anna met John"])[0] == result

    assert (
        result.format() == "today Mary/B-PER Kim/I-PER visited Paris/B-LOC , said Reuters/B-ORG ."
    )
    (line,) = tagger.to_json([result]).splitlines()
    assert json.loads(line) == {
        "text": text,
        "words": result.words,
        "labels": result.labels,
        "entities": [
            {"type": "PER", "text": "Mary Kim", "start": 7, "end": 15},
            {"type": "LOC", "text": "Paris", "start": 24, "end": 29},
            {"type": "ORG", "text": "Reuters", "start": 36, "end": 43},
        ],
        "truncated": False,
    }

    report = attnkit.evaluate(run, "test")
    assert {"f1", "precision", "recall", "accuracy", "per_type", "support"} <= set(report)
    assert report["split"] == "test" and report["num_sentences"] == 30
    assert set(report["per_type"]) <= {"PER", "LOC", "ORG"}
    assert report["f1"] > 0.8 and report["accuracy"] > 0.9


def test_predictor_edge_cases(run: Path) -> None:
    tagger = attnkit.load(run)
    for bad in ("", "  \n", ["Paris", " "]):
        with pytest.raises(InputError, match="empty or whitespace only"):
            tagger.tag(bad)
    long = " ".join(["Paris"] * 40)  # max_len 24: 22 words fit
    with pytest.warns(UserWarning, match="longer than max_len=24"):
        (result,) = tagger.tag(long)
    assert result.truncated and len(result.labels) == 40 and result.labels[22:] == ["O"] * 18
    shown = tagger.tag("a\x1bb Paris")[0].format()  # a control character inside a word
    assert "\x1b" not in shown and shown.startswith("a\\x1bb")


def test_run_with_wrong_labels_is_refused(run: Path, tmp_path: Path) -> None:
    copy = shutil.copytree(run, tmp_path / "copy")
    saved = json.loads((copy / "config.json").read_text())
    saved["labels"] = saved["labels"][:-1]
    (copy / "config.json").write_text(json.dumps(saved))
    with pytest.raises(RunError, match="labels are missing or do not match"):
        attnkit.load(copy)


def test_cli_predict_and_evaluate(run: Path, capsys) -> None:
    capsys.readouterr()
    assert main(["predict", str(run), "John Smith visited Paris."]) == 0
    assert capsys.readouterr().out == "John/B-PER Smith/I-PER visited Paris/B-LOC .\n"
    assert main(["predict", str(run), "--json", "Anna in Rome"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["words"] == ["Anna", "in", "Rome"] and len(out["labels"]) == 3
    assert main(["tag", str(run), "Mary Brown met Anna"]) == 0  # the tag verb: the same
    assert capsys.readouterr().out == "Mary/B-PER Brown/I-PER met Anna/B-PER\n"
    assert main(["evaluate", str(run), "--split", "test"]) == 0
    printed = capsys.readouterr().out
    assert "f1" in printed and "accuracy" in printed


# ------------------------------------------------------------------------- pieces
def test_split_words_and_entity_offsets() -> None:
    assert split_words(" Paris, (France)  U.S.\tok") == [
        ("Paris", 1, 6),
        (",", 6, 7),
        ("(", 8, 9),
        ("France", 9, 15),
        (")", 15, 16),
        ("U", 18, 19),
        (".", 19, 20),
        ("S", 20, 21),
        (".", 21, 22),
        ("ok", 23, 25),
    ]
    text = "전남 진도에서, 3일"
    words = split_words(text, "char")
    assert [w for w, _, _ in words] == list("전남진도에서,3일")
    labels = ["B-LC", "I-LC", "I-LC", "I-LC", "O", "O", "O", "B-DT", "I-DT"]
    entities = _entities(text, [(a, b) for _, a, b in words], labels)
    assert [(e.type, e.text, e.start, e.end) for e in entities] == [
        ("LC", "전남 진도", 0, 5),
        ("DT", "3일", 9, 11),
    ]
    assert tag_labels(["B-PER", "O", "I-PER", "B-LOC"]) == ["O", "B-LOC", "B-PER", "I-PER"]


def test_labels_sit_on_the_first_piece_through_the_collate() -> None:
    # a vocabulary of little more than the characters: words are several pieces
    tokenizer = train_tokenizer(["Johnson went to", "Jim sent one"], vocab_size=25, min_frequency=1)
    sentences = [
        TaggedSentence(["Johnson", "went"], ["B-PER", "O"]),
        TaggedSentence(["to"], ["O"]),
    ]
    to_id = {"O": 0, "B-PER": 1}
    items, truncated = encode_sentences(sentences, tokenizer, to_id, max_len=32)
    assert truncated == 0
    pieces = len(tokenizer.encode_words(["Johnson"])[0])
    assert pieces == 7 and len(tokenizer.encode_words(["went"])[0]) == 4
    batch = TaggingObjective(["O", "B-PER"], tokenizer.pad_id).collate(items)
    ids, mask, labels = batch["input_ids"], batch["attention_mask"], batch["labels"]
    assert ids.shape == labels.shape == mask.shape and ids.shape[0] == 2
    first = labels[0].tolist()
    assert first[0] == IGNORE_INDEX and first[1] == 1  # [CLS], then Johnson's first piece
    assert first[2 : 1 + pieces] == [IGNORE_INDEX] * (pieces - 1)
    assert first[1 + pieces] == 0  # "went"'s first piece
    assert labels[1].tolist()[:4] == [IGNORE_INDEX, 0, IGNORE_INDEX, IGNORE_INDEX]  # [CLS] t ##o
    assert (labels[1][~mask[1]] == IGNORE_INDEX).all()  # padding is ignored
    assert int(mask[1].sum()) == len(items[1][0])
    # the loss counts only the labelled positions
    torch.manual_seed(0)
    logits = torch.randn(*ids.shape, 2)
    task = TaggingObjective(["O", "B-PER"], tokenizer.pad_id)
    loss, n_tokens = task.loss(lambda i, m: TaggerOutput(logits), batch)
    real = labels != IGNORE_INDEX
    expected = torch.nn.functional.cross_entropy(logits[real], labels[real])
    assert torch.allclose(loss, expected) and n_tokens == int(mask.sum())


# ------------------------------------------------------------------------- errors
def test_a_validation_tag_unseen_in_training_is_one_line(data: Path, tmp_path: Path) -> None:
    _write(tmp_path / "valid.conll", _sentences(5, seed=3, misc=True))
    recipe = _recipe(data, max_steps=2)
    recipe["data"]["validation"] = str(tmp_path / "valid.conll")
    out = tmp_path / "run"
    with pytest.raises(DataError, match="validation sentence 1: tag 'B-MISC' never appears") as e:
        attnkit.train(RunConfig.from_dict(recipe), out=out, **QUIET)
    assert "\n" not in str(e.value) and not out.exists()


def test_recipe_errors(data: Path) -> None:
    recipe = _recipe(data)
    with pytest.raises(ConfigError, match="task tag reads data.name conll2003, klue-ner or file"):
        RunConfig.from_dict({**recipe, "data": {"name": "nsmc"}})
    with pytest.raises(ConfigError, match="data.name file needs data.train"):
        RunConfig.from_dict({**recipe, "data": {"name": "file"}})
    with pytest.raises(ConfigError, match="init_from brings its tokenizer"):
        RunConfig.from_dict(
            {**recipe, "model": {"init_from": "x"}, "tokenizer": {"path": "tok.json"}}
        )
    with pytest.raises(ConfigError, match="needs model.arch bert-tagger"):
        RunConfig.from_dict({**recipe, "model": {"arch": "transformer"}})


# ------------------------------------------------------------------------- init_from
def test_init_from_a_hugging_face_bert_directory(data: Path, tmp_path: Path) -> None:
    from attnkit.models.bert import BertConfig, BertModel

    text = (data / "train.conll").read_text(encoding="utf-8").split()
    tokenizer = train_tokenizer([" ".join(text)], vocab_size=90, min_frequency=1)
    hf = tmp_path / "hf-bert"
    torch.manual_seed(0)
    encoder = BertModel(
        BertConfig(vocab_size=tokenizer.vocab_size, max_len=64, d_model=48, num_heads=4,
                   d_ff=96, num_layers=1)
    )  # fmt: skip
    encoder.save_pretrained(hf)
    tokenizer.save(hf)
    recipe = _recipe(data, max_steps=2, eval_every=2)
    recipe["model"] = {"arch": "bert-tagger", "init_from": str(hf)}
    recipe.pop("tokenizer")
    lines: list[str] = []
    out = tmp_path / "run"
    attnkit.train(RunConfig.from_dict(recipe), out=out, log=lines.append)
    assert any("initialised the encoder from" in x for x in lines)
    saved = json.loads((out / "config.json").read_text())
    assert saved["model"]["d_model"] == 48 and saved["model"]["num_layers"] == 1
    assert saved["vocab_size"] == tokenizer.vocab_size
    tagger = attnkit.load(out)
    assert tagger.tokenizer.vocab_size == tokenizer.vocab_size
    (result,) = tagger.tag("Mary visited Seoul")
    assert len(result.labels) == 3


# ------------------------------------------------------------------------- KLUE-NER
KLUE = pytest.mark.skipif(
    not (SHARED / "klue" / "klue-ner-v1.1_dev.tsv").is_file(), reason="KLUE-NER not present"
)


@pytest.mark.slow
@KLUE
@pytest.mark.parametrize("label_unit", [None, "char"])
def test_klue_ner_tags_characters(tmp_path: Path, label_unit: str | None) -> None:
    """Default (piece): the natural text, a label on every piece; char: every character
    a word of its own. Both tag and score characters."""
    recipe = _recipe(tmp_path, max_steps=2, eval_every=2, batch_size=10)
    recipe["data"] = {"name": "klue-ner", "data_dir": str(SHARED), "limit": 20, "max_len": 64}
    if label_unit:
        recipe["data"]["label_unit"] = label_unit
    recipe["tokenizer"]["vocab_size"] = 400
    out = tmp_path / "klue"
    lines: list[str] = []
    attnkit.train(RunConfig.from_dict(recipe), out=out, log=lines.append)
    assert any(x.startswith("data: 20 train / 500 validation sentences") for x in lines)
    assert any("labelled pieces" in x for x in lines) == (label_unit is None)
    saved = json.loads((out / "config.json").read_text())
    assert saved["word_unit"] == (label_unit or "piece") and len(saved["labels"]) == 13
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert "val_f1" in rows[-1]
    tagger = attnkit.load(out)
    assert tagger.word_unit == (label_unit or "piece")
    text = "이순신은 전남 진도에서 태어났다."
    (result,) = tagger.tag(text)
    assert result.words == [c for c in text if not c.isspace()]
    assert len(result.labels) == len(result.words)
    for e in result.entities:
        assert text[e.start : e.end] == e.text
    report = attnkit.evaluate(out, "test", batch_size=64)
    assert report["num_sentences"] == 500 and 0.0 <= report["f1"] <= 1.0
    assert report["num_words"] == sum(len(s.words) for s in load_tagged("klue-ner", "test", SHARED))
    if label_unit == "char":  # a run saved before word_unit piece existed: still char
        saved.pop("word_unit")
        saved["data"].pop("label_unit")
        (out / "config.json").write_text(json.dumps(saved), encoding="utf-8")
        old = attnkit.load(out)
        assert old.word_unit == "char"
        assert old.tag(text)[0].labels == result.labels
        assert attnkit.evaluate(out, "test", batch_size=64) == report


class _LookupTagger(torch.nn.Module):
    """A stand-in tagger: each token id's label is fixed (one-hot logits)."""

    def __init__(self, label_of_id: list[int], num_labels: int) -> None:
        super().__init__()
        self.table = torch.nn.Embedding(len(label_of_id), num_labels)
        with torch.no_grad():
            self.table.weight.copy_(torch.eye(num_labels)[label_of_id])

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> TaggerOutput:
        return TaggerOutput(self.table(ids))


def test_piece_predictor_maps_piece_labels_to_characters(tmp_path: Path) -> None:
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "나는", "전남", "진도", "##에",
             "김", "##철", "##수를", "만났", "##다", "."]  # fmt: skip
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tokenizer = Tokenizer.from_vocab(tmp_path / "vocab.txt", lowercase=False)
    labels = KNOWN_TAGS["klue-ner"]
    piece_label = {"전남": "B-LC", "진도": "I-LC", "김": "B-PS", "##철": "I-PS", "##수를": "B-PS"}
    label_of_id = [labels.index(piece_label.get(tok, "O")) for tok in vocab]
    cfg = RunConfig.from_dict({"task": "tag", "data": {"name": "klue-ner", "max_len": 32}})
    tagger = TagPredictor(
        _LookupTagger(label_of_id, len(labels)), tokenizer, cfg, labels, None, "piece"
    )
    text = "나는 전남 진도에 김철수를 만났다."
    (result,) = tagger.tag(text)
    assert result.words == [c for c in text if c != " "] and not result.truncated
    # 나는 | 전남 진도(LC) | 에 | 김 ##철 (PS) | ##수를 (a new PS: B- on 수, I- on 를)
    assert result.labels == ["O", "O", "B-LC", "I-LC", "I-LC", "I-LC", "O", "B-PS", "I-PS",
                             "B-PS", "I-PS", "O", "O", "O", "O"]  # fmt: skip
    assert [(e.type, e.text, e.start, e.end) for e in result.entities] == [
        ("LC", "전남 진도", 3, 8), ("PS", "김철", 10, 12), ("PS", "수를", 12, 14)
    ]  # fmt: skip
    cfg.data.max_len = 4  # [CLS] 나는 전남 [SEP]: the characters after 전남 get O
    with pytest.warns(UserWarning, match="the characters that did not fit were labelled O"):
        (cut,) = tagger.tag(text)
    assert cut.truncated and cut.labels == ["O", "O", "B-LC", "I-LC"] + ["O"] * 11


def test_klue_ner_recipe_and_label_unit() -> None:
    cfg = load_config(Path(__file__).resolve().parents[2] / "configs" / "klue-ner-bert.yaml")
    assert cfg.task == "tag" and cfg.data.name == "klue-ner"
    assert word_unit(cfg) == "piece"
    assert word_unit(RunConfig.from_dict({"task": "tag", "data": {"name": "conll2003"}})) == "word"
    char = RunConfig.from_dict({"task": "tag", "data": {"name": "klue-ner", "label_unit": "char"}})
    assert word_unit(char) == "char"
    with pytest.raises(ConfigError, match="data.label_unit must be word|piece|char"):
        RunConfig.from_dict({"task": "tag", "data": {"name": "klue-ner", "label_unit": "x"}})
    with pytest.raises(ConfigError, match="klue-ner takes data.label_unit piece or char"):
        RunConfig.from_dict({"task": "tag", "data": {"name": "klue-ner", "label_unit": "word"}})
    with pytest.raises(ConfigError, match="conll2003 takes data.label_unit word"):
        RunConfig.from_dict({"task": "tag", "data": {"name": "conll2003", "label_unit": "piece"}})

"""Tests for the NER, NLI and QA datasets: catalogue entries, fixed splits, readers (on the
offline copy when it is there) and the user-file readers (on tiny files)."""

from __future__ import annotations

import gzip
import json
import logging
import os
import re
from collections import Counter
from pathlib import Path

import pytest

from attnkit.data import (
    DataError,
    DatasetNotFoundError,
    PairExample,
    QAExample,
    TaggedSentence,
    answer_offset_mismatches,
    dataset_path,
    fixed_split,
    get_dataset,
    list_datasets,
    load_tagged,
    read_conll2003,
    read_klue_ner,
    read_klue_nli,
    read_korquad,
    read_pair_file,
    read_squad_file,
    read_tagged_file,
    to_iob2,
)

SHARED = Path(
    os.environ.get("ATTNKIT_DATA") or Path(__file__).resolve().parents[3] / "shared" / "data"
)
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason="offline data copy not present")

SPLITS = ("train", "validation", "test")


def iob2_problems(tags: list[str]) -> list[int]:
    """Positions where an I-X follows O, nothing, or a tag of another type."""
    bad, prev = [], "O"
    for i, tag in enumerate(tags):
        assert tag == "O" or re.fullmatch(r"[BI]-[A-Z]+", tag), tag
        if tag.startswith("I-") and (prev == "O" or prev[2:] != tag[2:]):
            bad.append(i)
        prev = tag
    return bad


# --------------------------------------------------------------------------- catalogue
def test_new_catalogue_entries():
    names = {info.name for info in list_datasets()}
    assert {"conll2003", "klue-ner", "klue-nli", "korquad"} <= names
    assert get_dataset("conll2003").splits == {
        "train": "conll2003/train.txt.gz",
        "validation": "conll2003/valid.txt.gz",
        "test": "conll2003/test.txt.gz",
    }
    for name, rel in [
        ("klue-ner", "klue/klue-ner-v1.1_dev.tsv"),
        ("klue-nli", "klue/klue-nli-v1.1_dev.json"),
        ("korquad", "korquad/KorQuAD_v1.0_dev.json.gz"),
    ]:
        info = get_dataset(name)
        assert info.splits == dict.fromkeys((*SPLITS, "dev"), rel)
        assert [f.relpath for f in info.files] == [rel]
        assert "split" in info.description
    # CoNLL train was cleaned by hand: no upstream file has its checksum, so it is not fetched
    assert [f.relpath for f in get_dataset("conll2003").files] == [
        "conll2003/valid.txt.gz",
        "conll2003/test.txt.gz",
    ]


def test_missing_files_give_the_usual_message(tmp_path):
    with pytest.raises(DatasetNotFoundError, match="attnkit data fetch korquad"):
        read_korquad("train", tmp_path)
    with pytest.raises(DatasetNotFoundError, match="attnkit data fetch klue-nli"):
        read_klue_nli("dev", tmp_path)
    with pytest.raises(DatasetNotFoundError, match="attnkit data fetch conll2003"):
        read_conll2003("test", tmp_path)
    with pytest.raises(DataError, match="does not download it") as info:
        read_conll2003("train", tmp_path)
    assert str(tmp_path / "conll2003" / "train.txt.gz") in str(info.value)
    with pytest.raises(DataError, match="no split 'valid'.*train, validation, test, dev"):
        read_klue_ner("valid", tmp_path)


# --------------------------------------------------------------------------- fixed_split
def test_fixed_split_is_pinned_and_seed_free():
    keys = [str(i) for i in range(10)]
    expected = {"6": "validation", "5": "test"} | {
        k: "train" for k in ["9", "8", "4", "3", "0", "1", "7", "2"]
    }
    assert fixed_split(keys) == expected  # SHA-256 order: the same under any PYTHONHASHSEED
    assert fixed_split(reversed(keys + keys)) == expected  # order and repeats do not matter
    counts = Counter(fixed_split(f"k{i}" for i in range(1000)).values())
    assert counts == {"train": 800, "validation": 100, "test": 100}
    assert set(fixed_split(keys, (("a", 0.5), ("b", 0.5))).values()) == {"a", "b"}
    with pytest.raises(ValueError, match="sum to 1"):
        fixed_split(keys, (("a", 0.5), ("b", 0.4)))


# --------------------------------------------------------------------------- offline copy
@pytest.fixture(scope="module")
def klue_ner() -> dict[str, list[TaggedSentence]]:
    return {split: read_klue_ner(split, SHARED) for split in (*SPLITS, "dev")}


@pytest.mark.slow
@needs_shared
def test_conll2003_counts_and_iob2():
    expected = {
        "train": (14041, {"PER": 6600, "LOC": 7140, "ORG": 6321, "MISC": 3438}),
        "validation": (3250, {"PER": 1842, "LOC": 1837, "ORG": 1341, "MISC": 922}),
        "test": (3453, {"PER": 1617, "LOC": 1668, "ORG": 1661, "MISC": 702}),
    }
    for split, (n, entities) in expected.items():
        sentences = read_conll2003(split, SHARED)
        assert len(sentences) == n
        tags = [tag for s in sentences for tag in s.tags]
        assert {t for t in tags} == {"O"} | {f"{p}-{e}" for p in "BI" for e in entities}
        assert Counter(t[2:] for t in tags if t.startswith("B-")) == entities
        assert all(not iob2_problems(s.tags) for s in sentences)
        assert all(s.words and "-DOCSTART-" not in s.words for s in sentences)
    first = read_conll2003("train", SHARED)[0]
    assert first.words[:3] == ["EU", "rejects", "German"]
    assert first.tags[:3] == ["B-ORG", "O", "B-MISC"] and first.text().startswith("EU rejects")


@pytest.mark.slow
@needs_shared
def test_klue_ner_split_tags_and_text(klue_ner):
    dev = klue_ner["dev"]
    assert [len(klue_ner[s]) for s in (*SPLITS, "dev")] == [4000, 500, 500, 5000]
    key = lambda s: (s.text(), tuple(s.tags))  # noqa: E731
    parts = [{key(s) for s in klue_ner[split]} for split in SPLITS]
    assert sum(map(len, parts)) == 5000 and set().union(*parts) == {key(s) for s in dev}
    assert klue_ner["test"][0].text().startswith("m이라고 써있는 펜던트")  # pinned split
    assert read_klue_ner("test", SHARED) == klue_ner["test"]
    # IOB2 everywhere; the entity counts of the dataset's README are kept
    assert all(not iob2_problems(s.tags) for s in dev)
    entities = Counter(t[2:] for s in dev for t in s.tags if t.startswith("B-"))
    assert entities == {"PS": 4418, "QT": 3151, "DT": 2312, "OG": 2182, "LC": 1649, "TI": 545}
    # words are single non-space characters, and text() rebuilds each sentence exactly
    raw = (SHARED / "klue" / "klue-ner-v1.1_dev.tsv").read_text(encoding="utf-8")
    annotated = re.findall(r"^## klue-ner-\S+\t(.*)$", raw, flags=re.MULTILINE)
    plain = [re.sub(r"<([^<>]*?):[A-Z]{2}>", r"\1", a) for a in annotated]
    chars = [
        "".join(line[0] for line in block.split("\n")[1:] if line)
        for block in raw.split("\n## klue-ner-")[1:]
    ]
    assert [s.text() for s in dev] == chars == plain
    assert all(len(w) == 1 and w != " " for s in dev for w in s.words)


@needs_shared
def test_klue_nli_split_by_premise():
    parts = {split: read_klue_nli(split, SHARED) for split in (*SPLITS, "dev")}
    assert [len(parts[s]) for s in (*SPLITS, "dev")] == [2400, 300, 300, 3000]
    for split, n in zip(SPLITS, (800, 100, 100), strict=True):
        assert Counter(p.label for p in parts[split]) == dict.fromkeys(
            ("entailment", "neutral", "contradiction"), n
        )
    premises = [{p.text for p in parts[s]} for s in SPLITS]
    assert sum(map(len, premises)) == 1000 == len(set().union(*premises))
    pairs = [{(p.text, p.text_b) for p in parts[s]} for s in SPLITS]
    assert set().union(*pairs) == {(p.text, p.text_b) for p in parts["dev"]}
    assert sum(map(len, pairs)) == 3000
    assert parts["test"][0] == PairExample(
        "18일 귀국이라 발인도 지켜드리지 못해 더욱 죄송할 따름입니다.",
        "귀국 바로 다음날이라 발인을 지킬 수 있었습니다.",
        "contradiction",
    )


@needs_shared
def test_korquad_split_by_article_and_offsets():
    parts = {split: read_korquad(split, SHARED) for split in (*SPLITS, "dev")}
    dev = parts["dev"]
    assert len(dev) == 5774 and len({ex.id for ex in dev}) == 5774
    assert [len(parts[s]) for s in SPLITS] == [4330, 586, 858]
    titles = [{ex.title for ex in parts[s]} for s in SPLITS]
    assert [len(t) for t in titles] == [112, 14, 14]
    assert len(set().union(*titles)) == 140  # no title in two splits
    ids = [{ex.id for ex in parts[s]} for s in SPLITS]
    assert set().union(*ids) == {ex.id for ex in dev} and sum(map(len, ids)) == 5774
    assert parts["test"][0].title == "금강산" and parts["validation"][0].title == "서양_철학"
    assert answer_offset_mismatches(dev) == []
    assert all(len(ex.answers) == 1 for ex in dev)
    first = dev[0]
    assert first.answers == [("1989년 2월 15일", 0)] and first.id == "6548850-0-0"


# --------------------------------------------------------------------------- tagged files
def test_to_iob2():
    assert to_iob2(["I-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-ORG"]) == [
        "B-PER",
        "I-PER",
        "O",
        "B-LOC",
        "B-LOC",
        "B-ORG",
    ]
    valid = ["B-PER", "I-PER", "B-PER", "O", "B-LOC"]
    assert to_iob2(valid) == valid
    with pytest.raises(ValueError, match="S-PER"):
        to_iob2(["S-PER"])


def test_tagged_sentence_text():
    s = TaggedSentence(
        ["경", "찰", "은", "또"], ["B-OG", "I-OG", "O", "O"], [False, False, True, True]
    )
    assert s.text() == "경찰은 또 "
    assert TaggedSentence(["a", "b"], ["O", "O"]).text() == "a b"
    with pytest.raises(ValueError):
        TaggedSentence(["a"], ["O", "O"])


def test_read_tagged_file_formats(tmp_path):
    conll = tmp_path / "iob1.txt"
    conll.write_text(
        "-DOCSTART- -X- -X- O\n\nEU NNP B-NP I-ORG\nrejects VBZ B-VP O\n"
        "German JJ B-NP I-MISC\n\n\nPeter NNP B-NP I-PER\nBlackburn NNP I-NP I-PER\n",
        encoding="utf-8",
    )
    sentences = read_tagged_file(conll)
    assert sentences == [
        TaggedSentence(["EU", "rejects", "German"], ["B-ORG", "O", "B-MISC"]),
        TaggedSentence(["Peter", "Blackburn"], ["B-PER", "I-PER"]),
    ]
    tsv = tmp_path / "words.tsv.gz"
    with gzip.open(tsv, "wt", encoding="utf-8") as fh:
        fh.write("New York\tB-LOC\r\nis\tO\r\n")  # a tab-separated word may contain spaces
    assert read_tagged_file(tsv) == [TaggedSentence(["New York", "is"], ["B-LOC", "O"])]
    pos = tmp_path / "pos.txt"
    pos.write_text("The DT\ncat NN\n", encoding="utf-8")
    assert read_tagged_file(pos, normalize=False)[0].tags == ["DT", "NN"]
    assert load_tagged("file", "test", files={"train": pos, "test": conll}) == sentences
    assert load_tagged({"test": conll}, "test") == sentences


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("EU B-ORG\nrejects\n", "line 2: expected a word and a tag"),
        ("EU NNP B-ORG\n\nrejects O\n", "line 3: 2 columns, expected 3"),
        ("EU S-ORG\n", "line 1: tag 'S-ORG' is not O, B-TYPE or I-TYPE"),
        ("\n\n", "has no sentences"),
    ],
)
def test_read_tagged_file_errors(tmp_path, content, message):
    path = tmp_path / "bad.conll"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DataError, match=message) as info:
        read_tagged_file(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_tagged_errors_and_dispatch(tmp_path):
    with pytest.raises(DataError, match="file not found"):
        read_tagged_file(tmp_path / "nope.conll")
    bad = tmp_path / "latin1.conll"
    bad.write_bytes("café O\n".encode("latin-1"))
    with pytest.raises(DataError, match="line 1: not valid UTF-8"):
        read_tagged_file(bad)
    with pytest.raises(DataError, match="not a token classification dataset"):
        load_tagged("nsmc", "train")
    with pytest.raises(DataError, match="no file for split 'test'"):
        load_tagged("file", "test", files={"train": "a.conll"})
    with pytest.raises(DataError, match="needs a file per split"):
        load_tagged("file", "train")


KLUE_NER_TINY = (
    "## 토큰, 레이블 구분자 : \\t\n## 컬럼명 : CHAR\tNE_TAG\n"
    "## klue-ner-v1_dev_00000-x\t<경찰:OG>은 <24살:QT> \n"
    "경\tB-OG\n찰\tI-OG\n은\tO\n \tB-QT\n2\tI-QT\n4\tI-QT\n살\tI-QT\n \tO\n\n"
    "## klue-ner-v1_dev_00001-x\t<A:PS> 씨\nA\tB-PS\n \tO\n씨\tO\n\n"
)


def test_read_klue_ner_characters(tmp_path):
    (tmp_path / "klue").mkdir()
    (tmp_path / "klue" / "klue-ner-v1.1_dev.tsv").write_text(KLUE_NER_TINY, encoding="utf-8")
    first, second = read_klue_ner("dev", tmp_path)
    # the B- that sat on the space moves to the entity's first character
    assert first == TaggedSentence(
        ["경", "찰", "은", "2", "4", "살"],
        ["B-OG", "I-OG", "O", "B-QT", "I-QT", "I-QT"],
        [False, False, True, False, False, True],
    )
    assert first.text() == "경찰은 24살 " and second.text() == "A 씨"
    assert load_tagged("klue-ner", "dev", tmp_path) == [first, second]
    assert (
        len(read_klue_ner("train", tmp_path) + read_klue_ner("test", tmp_path))
        + len(read_klue_ner("validation", tmp_path))
        == 2
    )
    (tmp_path / "klue" / "klue-ner-v1.1_dev.tsv").write_text(
        "## klue-1\tab\na\tO\nb O\n", encoding="utf-8"
    )
    with pytest.raises(DataError, match=r"line 3: expected 'CHARACTER<TAB>TAG'"):
        read_klue_ner("dev", tmp_path)


# --------------------------------------------------------------------------- pair files
def test_read_pair_file_formats(tmp_path, caplog):
    csv_file = tmp_path / "pairs.csv"
    csv_file.write_text(
        'premise,hypothesis,label\n"a, b",c,entailment\nd,,neutral\ne,f, contradiction \n',
        encoding="utf-8",
    )
    with caplog.at_level(logging.WARNING):
        pairs = read_pair_file(csv_file, "premise", "hypothesis", "label")
    assert pairs == [
        PairExample("a, b", "c", "entailment"),
        PairExample("e", "f", "contradiction"),
    ]
    assert "dropped 1 row" in caplog.text
    jsonl = tmp_path / "pairs.jsonl"
    jsonl.write_text(json.dumps({"text": "x", "text_b": "y", "label": 1}) + "\n", encoding="utf-8")
    assert read_pair_file(jsonl) == [PairExample("x", "y", "1")]
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text('text\ttext_b\tlabel\n"q\tr\tneutral\n', encoding="utf-8")
    assert read_pair_file(tsv) == [PairExample('"q', "r", "neutral")]


def test_read_pair_file_errors(tmp_path):
    path = tmp_path / "p.tsv"
    path.write_text("text\thyp\tlabel\na\tb\tx\n", encoding="utf-8")
    with pytest.raises(DataError, match="no column 'text_b'; columns are: text, hyp, label"):
        read_pair_file(path)
    path.write_text("text\ttext_b\tlabel\na\tb\tx\nc\td\t \n", encoding="utf-8")
    with pytest.raises(DataError, match="line 3: empty label"):
        read_pair_file(path)
    path.write_text("text\ttext_b\tlabel\na\tb\n", encoding="utf-8")
    with pytest.raises(DataError, match="line 2: 2 fields, but the header has 3"):
        read_pair_file(path)


def test_read_klue_nli_checks_labels(tmp_path):
    (tmp_path / "klue").mkdir()
    path = tmp_path / "klue" / "klue-nli-v1.1_dev.json"
    records = [
        {"guid": "g0", "premise": "p", "hypothesis": "h", "gold_label": "neutral"},
        {"guid": "g1", "premise": "p", "hypothesis": "i", "gold_label": "maybe"},
    ]
    path.write_text(json.dumps(records), encoding="utf-8")
    with pytest.raises(DataError, match="record 1: gold_label 'maybe'"):
        read_klue_nli("dev", tmp_path)
    path.write_text(json.dumps(records[:1]), encoding="utf-8")
    assert read_klue_nli("dev", tmp_path) == [PairExample("p", "h", "neutral")]
    path.write_text("[{", encoding="utf-8")
    with pytest.raises(DataError, match="line 1: invalid JSON"):
        read_klue_nli("train", tmp_path)


# --------------------------------------------------------------------------- SQuAD files
def _squad(answer_start: int) -> dict:
    qa = {
        "id": "q1",
        "question": "누가?",
        "answers": [{"text": "철수", "answer_start": answer_start}],
    }
    return {"data": [{"title": "T", "paragraphs": [{"context": "어제 철수가 왔다", "qas": [qa]}]}]}


def test_read_squad_file(tmp_path, caplog):
    path = tmp_path / "squad.json.gz"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        json.dump(_squad(3), fh, ensure_ascii=False)
    assert read_squad_file(path) == [
        QAExample("q1", "T", "어제 철수가 왔다", "누가?", [("철수", 3)])
    ]
    off = tmp_path / "off.json"
    off.write_text(json.dumps(_squad(2)), encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        examples = read_squad_file(off)
    assert examples[0].answers == [("철수", 2)]  # kept, not fixed
    assert answer_offset_mismatches(examples) == [("q1", "철수", 2)]
    assert "1 answer(s) whose answer_start" in caplog.text


def test_read_squad_file_errors(tmp_path):
    path = tmp_path / "bad.json"
    data = _squad(3)
    del data["data"][0]["paragraphs"][0]["qas"][0]["question"]
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(DataError, match=r"data\[0\]\.paragraphs\[0\]\.qas\[0\]: no 'question'"):
        read_squad_file(path)
    data = _squad(3)
    data["data"][0]["paragraphs"][0]["qas"][0]["answers"][0]["answer_start"] = "3"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(DataError, match=r"answers\[0\]\.answer_start: unexpected str"):
        read_squad_file(path)
    path.write_text('{"data": [\n{]}', encoding="utf-8")
    with pytest.raises(DataError, match="line 2: invalid JSON"):
        read_squad_file(path)
    path.write_text("[]", encoding="utf-8")
    with pytest.raises(DataError, match="top level: expected a JSON object"):
        read_squad_file(path)
    with pytest.raises(DataError, match="file not found"):
        read_squad_file(tmp_path / "none.json")


@needs_shared
def test_dataset_paths_resolve_through_env(monkeypatch):
    monkeypatch.setenv("ATTNKIT_DATA", str(SHARED))
    assert dataset_path("korquad", "dev").name == "KorQuAD_v1.0_dev.json.gz"
    assert len(read_conll2003("validation")) == 3250

"""Datasets read themselves: each catalogue entry carries a reader per kind of examples, and a
task reads a recipe's data by kind (``attnkit.data.catalogue.read``), never by its name."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from attnkit.core.config import ConfigError
from attnkit.data import catalogue
from attnkit.data.catalogue import (
    USER_FILES,
    DatasetInfo,
    Reader,
    describe,
    find_kind,
    has_split,
    names_reading,
    read,
    register_dataset,
    unregister_dataset,
)
from attnkit.data.kinds import KINDS
from attnkit.data.pairs import PairExample
from attnkit.data.parallel import Pair
from attnkit.data.paths import DataError
from attnkit.tasks import get_task, task_names
from attnkit.tasks.run_config import RunConfig

BUILT_IN = ("classify", "translate", "chat", "mlm", "tag", "qa", "bert-pretrain", "lm", "bilm")


def _data(task: str = "classify", **data):
    return RunConfig.from_dict({"task": task, "data": data}, source="run").data


def test_every_reader_is_of_a_known_kind():
    for info in [*catalogue.list_datasets(), USER_FILES]:
        assert set(info.readers) <= set(KINDS), info.name
        for reader in info.readers.values():
            splits = reader.splits if reader.splits is not None else tuple(info.splits)
            assert splits and "train" in splits, info.name
    for name in BUILT_IN:
        assert set(get_task(name).reads) <= set(KINDS), name


@pytest.mark.parametrize(
    ("task", "names"),
    [
        ("classify", "nsmc, imdb, klue-nli or file"),
        ("translate", "multi30k, chatbot-ko or file"),
        ("chat", "multi30k, chatbot-ko or file"),
        ("mlm", "nsmc, imdb or file"),
        ("bilm", "nsmc, imdb or file"),
        ("bert-pretrain", "nsmc, imdb or file"),
        ("lm", "nsmc, imdb, tinyshakespeare or file"),
        ("tag", "conll2003, klue-ner or file"),
        ("qa", "korquad or file"),
    ],
)
def test_a_task_reads_the_datasets_of_its_kinds(task: str, names: str):
    """What each task reads follows from the catalogue: a dataset of another kind is refused
    in one line listing those it reads."""
    listed = names_reading(get_task(task).reads)
    assert f"{', '.join(listed[:-1])} or {listed[-1]}" == names
    with pytest.raises(ConfigError) as exc:
        RunConfig.from_dict(
            {"task": task, "data": {"name": "conll2003" if task != "tag" else "nsmc"}}
        )
    assert str(exc.value).startswith(f"task {task} reads data.name {names}, got ")


def test_the_kind_a_dataset_is_read_as():
    assert find_kind(_data(name="nsmc"), ("text", "documents")) == "documents"
    assert find_kind(_data(name="tinyshakespeare"), ("text", "documents")) == "text"
    assert find_kind(_data(name="file"), ("text", "documents")) == "text"  # the first offered
    assert find_kind(_data(name="klue-nli"), ("labelled", "pairs")) == "pairs"
    assert find_kind(_data(name="no-such-set"), ("labelled",)) is None
    assert find_kind("imdb", ("segments",)) == "segments"  # a name works too


def test_own_splits():
    """A split of the dataset's own (else the task holds validation out of train)."""
    assert has_split(_data(name="nsmc"), "labelled", "test")
    assert not has_split(_data(name="nsmc"), "labelled", "validation")
    assert not has_split(_data(name="nsmc"), "documents", "test")  # unlabelled: no test
    assert has_split(_data("translate", name="multi30k"), "parallel", "validation")  # "val"
    assert has_split(_data("translate", name="chatbot-ko"), "parallel", "test")
    assert has_split(_data("lm", name="tinyshakespeare"), "text", "validation")  # last 10%
    assert has_split(_data(name="klue-nli"), "pairs", "validation")
    files = _data(name="file", train="a.csv", test="b.csv")
    assert has_split(files, "labelled", "test") and not has_split(files, "labelled", "validation")
    assert not has_split(
        _data("lm", name="file", train="a.txt", validation="v"), "text", "validation"
    )


def test_dataset_facts_the_tasks_use():
    assert catalogue.get_dataset("nsmc").readers["labelled"].labels == ("negative", "positive")
    assert catalogue.get_dataset("klue-nli").readers["pairs"].labels == ()  # sorted from data
    assert catalogue.get_dataset("klue-ner").readers["tagged"].unit == "char"
    assert catalogue.get_dataset("conll2003").readers["tagged"].unit == "word"
    assert catalogue.get_dataset("korquad").readers["qa"].scorer == "korquad"
    assert USER_FILES.readers["qa"].scorer == "squad"
    assert describe(_data("bilm", name="nsmc"), "documents") == "the unlabelled nsmc corpus"
    assert describe(_data("lm", name="file", train="/x/corpus.txt"), "text") == "corpus.txt"


def test_data_checks_of_the_reader():
    with pytest.raises(ConfigError, match=r"^data.name file needs data.train \(a text file\)$"):
        RunConfig.from_dict({"task": "lm", "data": {"name": "file"}})
    with pytest.raises(ConfigError, match="needs data.train .a CSV, TSV or JSON Lines file"):
        RunConfig.from_dict({"data": {"name": "file"}})
    with pytest.raises(ConfigError, match="multi30k has de and en"):
        RunConfig.from_dict({"task": "translate", "data": {"name": "multi30k", "src_lang": "fr"}})
    with pytest.raises(ConfigError, match="data.pair_column names a column of your own file"):
        RunConfig.from_dict({"data": {"name": "nsmc", "pair_column": "b"}})
    with pytest.raises(DataError, match="dataset 'nsmc' cannot be read as qa"):
        read(_data(name="nsmc"), "qa", "train")


def test_the_users_files_by_kind(tmp_path: Path):
    """``data.name: file`` is read like any dataset, by the kind the task asks for."""
    (tmp_path / "t.csv").write_text("text,label\ngood,1\nbad,0\n", encoding="utf-8")
    (tmp_path / "p.csv").write_text("a,b,label\nx,y,entailment\n", encoding="utf-8")
    (tmp_path / "t.tsv").write_text("ein Hund\ta dog\n", encoding="utf-8")
    (tmp_path / "t.conll").write_text("John B-PER\nruns O\n", encoding="utf-8")
    with gzip.open(tmp_path / "c.txt.gz", "wt", encoding="utf-8") as fh:
        fh.write("one line\nanother\n\nthird\n")
    labelled = _data(name="file", train=str(tmp_path / "t.csv"))
    assert [(e.text, e.label) for e in read(labelled, "labelled", "train")] == [
        ("good", "1"),
        ("bad", "0"),
    ]
    pairs = _data(name="file", train=str(tmp_path / "p.csv"), text_column="a", pair_column="b")
    assert read(pairs, "pairs", "train") == [PairExample("x", "y", "entailment")]
    parallel = _data("translate", name="file", train=str(tmp_path / "t.tsv"))
    assert read(parallel, "parallel", "train") == [Pair("ein Hund", "a dog")]
    tagged = read(_data("tag", name="file", train=str(tmp_path / "t.conll")), "tagged", "train")
    assert tagged[0].words == ["John", "runs"] and tagged[0].tags == ["B-PER", "O"]
    corpus = str(tmp_path / "c.txt.gz")
    assert read(_data("mlm", name="file", train=corpus), "documents", "train") == [
        "one line",
        "another",
        "third",
    ]
    assert read(_data("lm", name="file", train=corpus), "text", "train").count("\n") == 4
    plain = tmp_path / "c.txt"  # (read as it is: not decompressed)
    plain.write_text("one line\nanother\n\nthird\n", encoding="utf-8")
    assert read(_data("bert-pretrain", name="file", train=str(plain)), "segments", "train") == [
        ["one line", "another"],
        ["third"],
    ]
    with pytest.raises(DataError, match="no file for split 'test'; splits given: train"):
        read(labelled, "labelled", "test")


def test_register_a_dataset():
    info = DatasetInfo("toy-lines", "toy", "en", "text", "CC0", (), {},
                       readers={"documents": Reader(lambda data, split: ["a", "b"], ("train",))})  # fmt: skip
    assert register_dataset(info) is info
    try:
        assert "toy-lines" in names_reading(("documents",))
        assert read(_data("mlm", name="toy-lines"), "documents", "train") == ["a", "b"]
        with pytest.raises(ValueError, match="already in the catalogue"):
            register_dataset(DatasetInfo("toy-lines", "", "", "", "", (), {}))
    finally:
        unregister_dataset("toy-lines")
    assert "toy-lines" not in [d.name for d in catalogue.list_datasets()]
    for name in ("nsmc", "file", "Toy"):
        with pytest.raises(ValueError):
            register_dataset(DatasetInfo(name, "", "", "", "", (), {}))
    assert set(BUILT_IN) <= set(task_names())


def test_a_reader_needs_its_settings_in_the_tasks_section():
    """A task whose data section lacks what its kind's reader reads is told which."""
    from attnkit.data.settings import DataConfig

    with pytest.raises(ConfigError, match="needs the data setting.s. text_column, label_column"):
        catalogue.check_data(DataConfig(name="file", train="x.csv"), "labelled")
    catalogue.check_data(DataConfig(name="nsmc"), "labelled")  # a catalogued one reads none

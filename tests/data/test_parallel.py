"""Parallel data readers: alignment checks, TSV, Multi30k and the chatbot held-out split."""

import gzip
import os
from pathlib import Path

import pytest

from attnkit.data.parallel import (
    read_chatbot,
    read_multi30k,
    read_parallel_files,
    read_parallel_tsv,
)
from attnkit.data.paths import DataError

SHARED = Path(os.environ.get("ATTNKIT_DATA", "../shared/data"))


def test_parallel_files_and_tsv(tmp_path):
    (tmp_path / "a.de").write_text("Ein Hund.\nZwei Katzen.\n", encoding="utf-8")
    with gzip.open(tmp_path / "a.en.gz", "wt", encoding="utf-8") as f:
        f.write("A dog.\nTwo cats.\n")
    pairs = read_parallel_files(tmp_path / "a.de", tmp_path / "a.en.gz")
    assert pairs == [("Ein Hund.", "A dog."), ("Zwei Katzen.", "Two cats.")]
    (tmp_path / "b.en").write_text("only one\n", encoding="utf-8")
    with pytest.raises(DataError, match="not aligned"):
        read_parallel_files(tmp_path / "a.de", tmp_path / "b.en")
    (tmp_path / "p.tsv").write_text("안녕\t안녕하세요\n\nbad line\n", encoding="utf-8")
    with pytest.raises(DataError, match="line 3"):
        read_parallel_tsv(tmp_path / "p.tsv")
    (tmp_path / "bin.de").write_bytes(b"ok\n\xff\n")
    with pytest.raises(DataError, match="line 2"):
        read_parallel_files(tmp_path / "bin.de", tmp_path / "a.de")


def _chatbot_dir(tmp_path):
    d = tmp_path / "chatbot"
    d.mkdir()
    rows = ["Q,A,label"] + [f"질문 {i % 150},답 {i},0" for i in range(300)]
    (d / "ChatbotData.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return tmp_path


def test_chatbot_split_is_disjoint_deterministic_and_complete(tmp_path):
    root = _chatbot_dir(tmp_path)
    splits = {s: read_chatbot(s, root) for s in ("train", "validation", "test")}
    qs = {s: {p.src for p in pairs} for s, pairs in splits.items()}
    assert not (qs["train"] & qs["test"]) and not (qs["train"] & qs["validation"])
    assert sum(len(p) for p in splits.values()) == 300
    assert len(qs["test"]) == len(qs["validation"]) == round(150 * 0.05)
    assert read_chatbot("test", root) == splits["test"]
    with pytest.raises(DataError, match="splits are"):
        read_chatbot("dev", root)


@pytest.mark.skipif(not (SHARED / "multi30k").is_dir(), reason="shared data not present")
def test_real_multi30k_and_chatbot_counts():
    assert len(read_multi30k("train", data_dir=SHARED)) == 29000
    test = read_multi30k("test", data_dir=SHARED)
    assert len(test) == 1000 and all(p.src and p.tgt for p in test)
    assert read_multi30k("val", "en", "de", data_dir=SHARED)[0].tgt[:3].isalpha()
    total = sum(len(read_chatbot(s, SHARED)) for s in ("train", "validation", "test"))
    assert total == 11823

"""``data.name: file``: the readers of the user's own files, one per kind (``kinds.KINDS``).

``data.train`` (required), ``data.validation`` and ``data.test`` name the files of the
splits; a kind's reader says what they must be (``Reader.file``) and which task settings it
reads (``Reader.settings``: the columns of a table, the languages of a pair of files).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from attnkit.data.kinds import Reader
from attnkit.data.ner_readers import TaggedSentence, load_tagged
from attnkit.data.pairs import PairExample, read_pair_file
from attnkit.data.parallel import Pair, read_user_pairs
from attnkit.data.paths import DataError
from attnkit.data.qa_readers import QAExample, read_squad_file
from attnkit.data.readers import Examples, load_text_classification, read_text_file, read_texts
from attnkit.data.sentence_split import split_documents

__all__ = ["FILE_READERS", "split_files"]

SPLITS = ("train", "validation", "test")


def split_files(data: Any) -> dict[str, str]:
    """The files the recipe names, by split (``data.train`` / ``validation`` / ``test``)."""
    return {s: path for s in SPLITS if (path := getattr(data, s, None))}


def _file(data: Any, split: str) -> str:
    files = split_files(data)
    if split not in files:
        raise DataError(f"no file for split '{split}'; splits given: {', '.join(files)}")
    return files[split]


def _labelled(data: Any, split: str) -> Examples:
    return load_text_classification(
        split_files(data), split, text_column=data.text_column, label_column=data.label_column
    )


def _pairs(data: Any, split: str) -> list[PairExample]:
    return read_pair_file(_file(data, split), data.text_column, data.pair_column, data.label_column)


def _parallel(data: Any, split: str) -> list[Pair]:
    path = getattr(data, split, None) if split in SPLITS else None
    if not path:
        raise DataError(f"no data.{split} file in this recipe")
    return read_user_pairs(path, data.src_lang, data.tgt_lang, f"data.{split}")


def _tagged(data: Any, split: str) -> list[TaggedSentence]:
    return load_tagged("file", split, files=split_files(data))


def _qa(data: Any, split: str) -> list[QAExample]:
    return read_squad_file(_file(data, split))


def _documents(data: Any, split: str) -> list[str]:
    return read_texts(_file(data, split), text_column=data.text_column)


def _text(data: Any, split: str) -> str:
    return read_text_file(_file(data, split), f"data.{split}")


def _segments(data: Any, split: str) -> list[list[str]]:
    path = Path(_file(data, split)).expanduser()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataError(f"data.{split}: {path} does not exist") from None
    except UnicodeDecodeError as exc:
        raise DataError(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return split_documents(text)


_TABLE = "a CSV, TSV or JSON Lines file"
FILE_READERS: dict[str, Reader] = {
    "labelled": Reader(_labelled, SPLITS, ("text_column", "label_column"), _TABLE),
    "pairs": Reader(_pairs, SPLITS, ("text_column", "pair_column", "label_column"), _TABLE),
    "parallel": Reader(_parallel, SPLITS, ("src_lang", "tgt_lang"), "a TSV file"),
    "tagged": Reader(_tagged, SPLITS, (), "a CoNLL-style file"),
    "qa": Reader(_qa, SPLITS, (), "SQuAD JSON"),
    # the corpora: held-out texts for validation, data.test for a test split
    "documents": Reader(
        _documents, ("train", "test"), ("text_column",), "a text file", "your corpus file"
    ),
    "text": Reader(_text, ("train", "test"), (), "a text file"),
    "segments": Reader(_segments, ("train",), (), "a text file"),
}

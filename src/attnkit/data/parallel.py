"""Readers for sequence-to-sequence data: source/target sentence pairs.

- Multi30k (de <-> en): aligned line by line, splits train / val / test (test_2016_flickr).
- Korean chatbot pairs (ChatbotData.csv, Q -> A): one file; attnkit defines the held-out
  split (see ``read_chatbot``).
- Your own data: two aligned text files, or one TSV file with two columns.
"""

from __future__ import annotations

import csv
import gzip
import io
import random
import re
import zlib
from pathlib import Path
from typing import NamedTuple

from attnkit.data.paths import DataError, locate, read_error_reason
from attnkit.data.readers import allow_long_csv_fields

__all__ = [
    "CHATBOT_SPLITS",
    "MULTI30K_SPLITS",
    "Pair",
    "read_chatbot",
    "read_multi30k",
    "read_parallel_files",
    "read_parallel_tsv",
    "read_user_pairs",
]

# where the catalogued files lie under the data directory (attnkit.data.catalogue)
MULTI30K_SPLITS = {
    "train": "multi30k/train.{lang}.gz",
    "val": "multi30k/val.{lang}.gz",
    "test": "multi30k/test_2016_flickr.{lang}.gz",
}
CHATBOT_SPLITS = {"train": "chatbot/ChatbotData.csv"}  # one file: read_chatbot splits it


class Pair(NamedTuple):
    src: str
    tgt: str


_LINE_END = re.compile(r"\r\n|\r|\n")


def _read_lines(path: Path) -> list[str]:
    """The lines of a text file (``.gz`` decompressed), ending at ``\n``, ``\r\n`` or a lone
    ``\r`` (classic Mac) only: not at the other breaks of ``str.splitlines`` (``\x85``,
    ``\u2028``, ...), which would shift one side of an aligned corpus."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            raw = f.read()
    except (OSError, EOFError, zlib.error) as exc:
        raise DataError(f"cannot read {path}: {read_error_reason(exc)}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise DataError(f"{path} is not valid UTF-8 (line {line})") from None
    lines = _LINE_END.split(text)
    if lines[-1] == "":  # the file ends with a line break (or is empty)
        lines.pop()
    return lines


def read_parallel_files(src_path: str | Path, tgt_path: str | Path) -> list[Pair]:
    """Two files aligned line by line (``.gz`` allowed). Different line counts -> DataError."""
    src, tgt = _read_lines(Path(src_path)), _read_lines(Path(tgt_path))
    if len(src) != len(tgt):
        raise DataError(
            f"{src_path} has {len(src)} lines but {tgt_path} has {len(tgt)}: not aligned"
        )
    return [Pair(s.strip(), t.strip()) for s, t in zip(src, tgt, strict=True)]


def read_parallel_tsv(path: str | Path) -> list[Pair]:
    """A TSV file with source and target in the first two columns (no header)."""
    pairs = []
    for lineno, line in enumerate(_read_lines(Path(path)), 1):
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) < 2:
            raise DataError(f"{path} line {lineno}: expected source<TAB>target")
        pairs.append(Pair(cols[0].strip(), cols[1].strip()))
    return pairs


def read_user_pairs(path: str, src_lang: str, tgt_lang: str, what: str = "data") -> list[Pair]:
    """Your own pairs: ``path`` is a TSV file (source<TAB>target), or the common prefix of
    two files aligned line by line, ``path.SRC`` and ``path.TGT`` (fairseq's naming: with
    ``src_lang: de`` / ``tgt_lang: en``, ``data/train`` reads data/train.de + data/train.en)."""
    if Path(path).is_file():
        return read_parallel_tsv(path)
    src, tgt = Path(f"{path}.{src_lang}"), Path(f"{path}.{tgt_lang}")
    if src.is_file() and tgt.is_file():
        return read_parallel_files(src, tgt)
    raise DataError(
        f"{what}: no file {path} (a TSV) and no aligned pair {src.name} + {tgt.name} next to it"
    )


def read_multi30k(
    split: str, src_lang: str = "de", tgt_lang: str = "en", data_dir: str | Path | None = None
) -> list[Pair]:
    """Multi30k task 1: split "train" (29,000), "val" (1,014) or "test" (1,000, 2016 Flickr)."""
    if {src_lang, tgt_lang} != {"de", "en"}:
        raise DataError(f"multi30k has de and en, got {src_lang}->{tgt_lang}")
    return read_parallel_files(
        locate("multi30k", MULTI30K_SPLITS, split, data_dir, lang=src_lang),
        locate("multi30k", MULTI30K_SPLITS, split, data_dir, lang=tgt_lang),
    )


CHATBOT_HELD_OUT = 0.05  # fraction of distinct questions in validation, and again in test


def read_chatbot(split: str, data_dir: str | Path | None = None, seed: int = 0) -> list[Pair]:
    """Korean chatbot Q -> A pairs with attnkit's fixed held-out split.

    The file has no official split. Distinct questions (after stripping whitespace) are
    shuffled with ``random.Random(seed)``; the first 5% go to "test", the next 5% to
    "validation", the rest to "train". Splitting by question keeps a repeated question out
    of two splits at once. With the default seed the split is the same everywhere.
    """
    if split not in ("train", "validation", "test"):
        raise DataError(f"chatbot-ko splits are train, validation, test; got '{split}'")
    path = locate("chatbot-ko", CHATBOT_SPLITS, "train", data_dir)
    text = "\n".join(_read_lines(path))
    allow_long_csv_fields()
    try:
        rows = list(csv.DictReader(io.StringIO(text)))
    except csv.Error as err:
        raise DataError(f"{path}: {err}") from None
    if not rows or not {"Q", "A"} <= set(rows[0]):
        raise DataError(f"{path}: expected a CSV header with Q and A columns")
    questions = sorted({r["Q"].strip() for r in rows})
    random.Random(seed).shuffle(questions)
    n = round(len(questions) * CHATBOT_HELD_OUT)
    chosen = {
        "test": set(questions[:n]),
        "validation": set(questions[n : 2 * n]),
        "train": set(questions[2 * n :]),
    }[split]
    return [Pair(r["Q"].strip(), r["A"].strip()) for r in rows if r["Q"].strip() in chosen]

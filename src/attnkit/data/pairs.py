"""Readers for sentence-pair classification (NLI) data: KLUE-NLI and a user's pair file.

KLUE-NLI v1.1 dev (``klue-nli``)
    A JSON list of 3,000 records with ``guid``, ``premise``, ``hypothesis`` and ``gold_label``
    (``entailment``, ``neutral`` or ``contradiction``, 1,000 each). Each of the 1,000 premises
    has exactly three hypotheses, one per label.

    KLUE's train set is not available, so the dev set is cut into a **fixed** train /
    validation / test split by :func:`attnkit.data.readers.fixed_split` on the **premise**
    (SHA-256 order, 80/10/10 of the premises; no seed): a premise's three hypotheses stay in
    one split, so no premise is seen in training and again in testing (a split by ``guid``
    would put about half of the premises in two splits). Result: **train 2,400 / validation 300 / test
    300** pairs (800 / 100 / 100 premises), each split with exactly one third of every label.
    Split ``dev`` is the whole file. Pairs keep their file order.
"""

from __future__ import annotations

import gzip
import json
import logging
import zlib
from dataclasses import dataclass
from pathlib import Path

from attnkit.data.paths import DataError, locate, read_error_reason
from attnkit.data.readers import _chain, _getter, _infer_format, _rows, fixed_split

__all__ = ["KLUE_NLI_SPLITS", "NLI_LABELS", "PairExample", "read_klue_nli", "read_pair_file"]

log = logging.getLogger(__name__)

NLI_LABELS = ("entailment", "neutral", "contradiction")
# the one dev file, cut into a fixed split by the reader (attnkit.data.catalogue)
KLUE_NLI_SPLITS = {s: "klue/klue-nli-v1.1_dev.json" for s in ("train", "validation", "test", "dev")}


@dataclass
class PairExample:
    """Two texts and the label of the pair (for NLI: premise, hypothesis, relation)."""

    text: str
    text_b: str
    label: str


def _load_json(path: Path) -> object:
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8-sig") as fh:
            return json.load(fh)
    except json.JSONDecodeError as err:
        raise DataError(
            f"{path}: line {err.lineno}: invalid JSON ({err.msg}, column {err.colno})"
        ) from None
    except UnicodeDecodeError as err:
        raise DataError(f"{path}: not valid UTF-8 ({err.reason}); save the file as UTF-8") from None
    except (OSError, EOFError, zlib.error) as err:
        raise DataError(f"cannot read {path}: {read_error_reason(err)}") from None


def read_klue_nli(split: str, data_dir: str | Path | None = None) -> list[PairExample]:
    """Read KLUE-NLI v1.1 dev as (premise, hypothesis, gold label name) pairs.

    ``split`` is ``train`` (2,400 pairs), ``validation`` (300) or ``test`` (300), the fixed
    split by premise described in the module docstring, or ``dev`` (all 3,000).
    """
    path = locate("klue-nli", KLUE_NLI_SPLITS, split, data_dir)
    records = _load_json(path)
    if not isinstance(records, list):
        raise DataError(f"{path}: expected a JSON list of KLUE-NLI records")
    pairs: list[PairExample] = []
    for i, rec in enumerate(records):
        try:
            premise, hypothesis, label = rec["premise"], rec["hypothesis"], rec["gold_label"]
        except (KeyError, TypeError):
            raise DataError(
                f"{path}: record {i}: expected premise, hypothesis and gold_label"
            ) from None
        if label not in NLI_LABELS:
            raise DataError(
                f"{path}: record {i}: gold_label '{label}' is not one of {', '.join(NLI_LABELS)}"
            )
        pairs.append(PairExample(str(premise), str(hypothesis), label))
    if split == "dev":
        return pairs
    assigned = fixed_split(p.text for p in pairs)
    return [p for p in pairs if assigned[p.text] == split]


def read_pair_file(
    path: str | Path,
    text_column: str = "text",
    pair_column: str = "text_b",
    label_column: str = "label",
    fmt: str | None = None,
) -> list[PairExample]:
    """Read a user CSV, TSV or JSON Lines file (optionally gzipped) of labelled text pairs.

    The format comes from the extension unless ``fmt`` is given, as in
    :func:`attnkit.data.readers.read_table`: CSV with standard quoting, TSV without quote
    processing, the first CSV/TSV row a header. Labels stay strings, stripped of surrounding
    whitespace. Rows where either text is empty are dropped (logged).

    Raises:
        DataError: unknown format, empty file, missing column, undecodable bytes, a row with
            the wrong number of fields or an empty label; the message names the file and line.
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise DataError(f"file not found: {path}")
    fmt = (fmt or _infer_format(path)).lower()
    if fmt not in ("csv", "tsv", "jsonl"):
        raise DataError(f"unknown format '{fmt}'; use 'csv', 'tsv' or 'jsonl'")
    rows = _rows(path, fmt)
    first = next(rows, None)
    if first is None:
        raise DataError(f"{path} is empty")
    if fmt == "jsonl":
        columns = [str(c) for c in first[1]]
        body = _chain(first, rows)
    else:
        columns = [str(c).strip() for c in first[1]]
        body = rows
    for column in (text_column, pair_column, label_column):
        if column not in columns:
            raise DataError(f"{path}: no column '{column}'; columns are: {', '.join(columns)}")
    get = _getter(path, fmt, columns)
    pairs: list[PairExample] = []
    dropped = 0
    for lineno, row in body:
        text, text_b = get(row, text_column, lineno), get(row, pair_column, lineno)
        label = get(row, label_column, lineno).strip()
        if not label:
            raise DataError(f"{path}: line {lineno}: empty label in column '{label_column}'")
        if not text.strip() or not text_b.strip():
            dropped += 1
            continue
        pairs.append(PairExample(text, text_b, label))
    if dropped:
        log.warning("%s: dropped %d row(s) with an empty text", path, dropped)
    if not pairs:
        what = "has a header but no rows" if not dropped else "has only rows with empty texts"
        raise DataError(f"{path} {what}")
    return pairs

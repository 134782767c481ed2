"""Pseudo-label files: what ``attnkit pseudo-label`` writes and ``data.extra_train`` reads.

The file is a TSV with the header ``text  label  confidence`` (labels by name), or a CSV
or JSON Lines file, gzip-compressed for a name ending in .gz (the name gives the format:
``.tsv``, ``.csv``, ``.jsonl``, each optionally ``.gz``); soft labels add a ``prob_<label>``
column per class. A classify recipe reads it as ``data.extra_train``: the student adds those
examples to its training split *after* the validation split is made, and drops every text
that is in the dataset's own train, validation or test split (``extra_training_examples``),
so validation and test accuracy stay measured on texts no label of the teacher touched.
Labelling itself (a teacher run) is ``attnkit.tasks.pseudo_label``.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from attnkit.core.checkpoint import atomic_write_bytes
from attnkit.core.errors import DataError, InputError
from attnkit.core.output_guard import cannot_write, check_output
from attnkit.data.readers import (
    Example,
    _chain,
    _infer_format,
    _rows,
    read_table,
    read_texts,
    read_unlabeled,
)
from attnkit.data.settings import DataConfig

__all__ = [
    "PSEUDO_LABEL_SUFFIXES",
    "SOFT_PREFIX",
    "PseudoLabel",
    "extra_training_examples",
    "pseudo_label_format",
    "read_unlabelled",
    "same_text",
    "write_pseudo_labels",
]


@dataclass(frozen=True)
class PseudoLabel:
    text: str
    label: str  # the teacher's label (a class name)
    confidence: float  # the teacher's calibrated probability of that label
    probabilities: tuple[float, ...] | None = None  # soft: every class's, in label order


SOFT_PREFIX = "prob_"  # a soft-target column: prob_<class name>


def same_text(text: str) -> str:
    """The form in which two texts count as the same review: whitespace runs collapsed."""
    return " ".join(text.split())


PSEUDO_LABEL_SUFFIXES = (".tsv", ".csv", ".jsonl", ".tsv.gz", ".csv.gz", ".jsonl.gz")


def pseudo_label_format(path: str | Path) -> tuple[str, bool]:
    """(format, gzip) of a pseudo-label file from its name: tsv, csv or jsonl, compressed
    when it ends in .gz (what ``data.extra_train`` reads back); any other name is an
    ``InputError`` listing the suffixes written."""
    name = Path(path).name.lower()
    compressed = name.endswith(".gz")
    base = name.removesuffix(".gz")
    for fmt in ("tsv", "csv", "jsonl"):
        if base.endswith(f".{fmt}") and len(base) > len(fmt) + 1:
            return fmt, compressed
    raise InputError(
        f"cannot write {path}: pseudo-labels are written as {', '.join(PSEUDO_LABEL_SUFFIXES)} "
        "(the name says which)"
    )


def _pseudo_label_text(rows: Sequence[PseudoLabel], header: list[str], fmt: str) -> str:
    """The file's text: a header and a row per label (TSV, CSV) or an object per line."""
    cells = [
        [same_text(r.text), r.label, f"{r.confidence:.4f}"]
        + [f"{p:.4f}" for p in r.probabilities or ()]
        for r in rows
    ]
    if fmt == "jsonl":
        return "".join(
            json.dumps(
                {
                    k: (v if i < 2 else float(v))
                    for i, (k, v) in enumerate(zip(header, row, strict=True))
                },
                ensure_ascii=False,
            )
            + "\n"
            for row in cells
        )
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(cells)
        return buffer.getvalue()
    return "".join("\t".join(row) + "\n" for row in [header, *cells])


def write_pseudo_labels(
    rows: Sequence[PseudoLabel], path: str | Path, labels: Sequence[str] | None = None
) -> Path:
    """Write ``rows`` (``text  label  confidence``, and ``prob_<label>`` for each of
    ``labels`` when the rows are soft; line breaks and tabs in a text become spaces) in the
    format ``path``'s name gives (``pseudo_label_format``: TSV, CSV or JSON Lines, gzip for
    .gz), atomically: a temp file renamed into place. ``path`` passes
    ``attnkit.core.output_guard.check_output`` (never a device, FIFO, folder or a run's file);
    an error while writing is one ``InputError`` line and leaves the old file as it was."""
    fmt, compressed = pseudo_label_format(path)
    target = check_output(path, what="output")
    soft = bool(rows) and rows[0].probabilities is not None
    if soft and (labels is None or len(labels) != len(rows[0].probabilities)):
        raise InputError("soft pseudo-labels need the class names of their probabilities")
    header = ["text", "label", "confidence"] + ([SOFT_PREFIX + n for n in labels] if soft else [])
    data = _pseudo_label_text(rows, header, fmt).encode("utf-8")
    if compressed:
        data = gzip.compress(data, mtime=0)
    try:
        atomic_write_bytes(target, data)
    except OSError as exc:
        raise cannot_write(target, exc) from None
    return target


def _soft_targets(
    path: str | Path, labels: Sequence[str], text_column: str
) -> dict[str, tuple[float, ...]] | None:
    """text -> (p_1, ..., p_C) from a CSV/TSV/JSONL (already read by ``read_table``: its
    ``text_column`` exists) with a ``prob_<class>`` column for every class, in the run's
    label order; None when the file has no such column."""
    path = Path(path).expanduser()
    rows = _rows(path, _infer_format(path))
    first = next(rows, None)
    if first is None:
        return None
    keyed = isinstance(first[1], dict)  # JSON Lines: every row names its columns
    header = list(first[1]) if keyed else [str(c).strip() for c in first[1]]
    if not any(c.startswith(SOFT_PREFIX) for c in header):
        return None
    wanted = [SOFT_PREFIX + n for n in labels]
    missing = [c for c in wanted if c not in header]
    if missing:
        raise DataError(f"{path}: soft targets need a column for every class; "
                        f"missing {', '.join(missing)}")  # fmt: skip
    if keyed:
        rows = _chain(first, rows)
        at, text_at = wanted, text_column
    else:
        at, text_at = [header.index(c) for c in wanted], header.index(text_column)
    out: dict[str, tuple[float, ...]] = {}
    for lineno, row in rows:
        try:
            text, p = str(row[text_at]), tuple(float(row[i]) for i in at)
        except (IndexError, KeyError):
            continue  # (read_table reports malformed rows)
        except (TypeError, ValueError):
            raise DataError(f"{path}: line {lineno}: a probability is not a number") from None
        if not all(0.0 <= x <= 1.0 for x in p) or abs(sum(p) - 1.0) > 0.01:
            raise DataError(f"{path}: line {lineno}: probabilities must be in [0, 1] and "
                            f"sum to 1, got {', '.join(map(str, p))}")  # fmt: skip
        out[same_text(text)] = tuple(x / sum(p) for x in p)
    return out


def read_unlabelled(source: str, data_dir: str | Path | None = None) -> list[str]:
    """The texts to pseudo-label: a file (one text per line, .gz too, or a CSV/TSV/JSONL's
    text column) or a catalogued dataset's unlabelled reviews (nsmc, imdb)."""
    if Path(source).expanduser().is_file():
        return read_texts(source)
    return read_unlabeled(source, data_dir)


def extra_training_examples(
    d: DataConfig,
    labels: Sequence[str],
    to_id: dict[str, int],
    labelled: Iterable[Example],
    test: Iterable[Example] = (),
) -> tuple[list[Example], list[tuple[float, ...]] | None, int]:
    """The examples of ``data.extra_train`` (a CSV/TSV/JSONL with the recipe's text and label
    columns; labels by class name or as the dataset writes them), without repeats and
    without any text of ``labelled`` or ``test`` (the dataset's test split). ``d``: the
    classify recipe's data settings (``extra_train``, ``text_column``, ``label_column``). Returns (examples,
    their soft targets or None, texts dropped). Each example's label is the dataset's own
    form (``to_id``'s keys); soft targets, one distribution per example in the run's label
    order, come from a TSV with a ``prob_<class>`` column for every class."""
    table = read_table(d.extra_train, text_column=d.text_column, label_column=d.label_column)
    soft = _soft_targets(d.extra_train, labels, d.text_column)
    known = {same_text(ex.text) for ex in labelled}
    known.update(same_text(ex.text) for ex in test)
    by_name = {name: key for key, i in to_id.items() for name in (labels[i],)}
    out: list[Example] = []
    targets: list[tuple[float, ...]] = []
    dropped = 0
    for ex in table:
        label = str(ex.label).strip()
        key = label if label in to_id else by_name.get(label)
        if key is None:
            raise DataError(
                f"{d.extra_train}: label {label!r} is not one of the classes ({', '.join(labels)})"
            )
        text = same_text(ex.text)
        if text in known:
            dropped += 1
            continue
        known.add(text)
        out.append(Example(ex.text, key))
        if soft is not None:
            targets.append(soft[text])
    return out, (targets if soft is not None else None), dropped

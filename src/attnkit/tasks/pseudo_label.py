"""Self-training: a trained classifier (the teacher) labels unlabelled texts, and the texts
it is confident about join the next model's (the student's) training data.

    attnkit pseudo-label runs/nsmc-bert --input nsmc -o pseudo.tsv --min-confidence 0.9 --balance
    attnkit train configs/nsmc-bert.yaml --set data.extra_train=pseudo.tsv

* The teacher's confidence is its calibrated probability of the label it gives,
  softmax(logits / T) with the temperature T fitted after its training.
* ``balance`` keeps as many texts of each class as the rarest class has (the most confident
  ones), so a teacher's lean toward one class, or a corpus that leans (raw Naver reviews are
  mostly positive), does not shift the student's prior; the test sets here are balanced.
* The teacher may be an ensemble of classify runs (their averaged probabilities), which is
  usually more accurate than any one of them.
* ``soft``: each text also keeps the teacher's whole distribution (columns ``prob_<label>``),
  and the student learns to match it (cross-entropy with probability targets, knowledge
  distillation) instead of the top label: a review the teacher finds 60/40 teaches 60/40.
  Soft targets are usually given for every text (``min_confidence`` 0); a student whose
  targets are the teacher's p(y | x) learns the teacher's function, whatever the class mix
  of the unlabelled texts, so they need no balancing.
* The file is a TSV with the header ``text  label  confidence`` (labels by name), or a CSV
  or JSON Lines file, gzip-compressed for a name ending in .gz (the name gives the format:
  ``.tsv``, ``.csv``, ``.jsonl``, each optionally ``.gz``), which any classify recipe reads
  as ``data.extra_train``. The student adds those examples to its
  training split *after* the validation split is made, and drops every text that is in the
  dataset's own train, validation or test split (``extra_training_examples``): validation
  and test accuracy stay measured on texts no label of the teacher touched.
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import io
import json
import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from attnkit.core.checkpoint import atomic_write_bytes
from attnkit.core.config import RunConfig
from attnkit.core.errors import DataError, InputError
from attnkit.core.output_guard import cannot_write, check_output
from attnkit.data.catalogue import has_split
from attnkit.data.readers import (
    Example,
    _chain,
    _infer_format,
    _rows,
    read_table,
    read_texts,
    read_unlabeled,
)
from attnkit.runtime.device import resolve_precision

__all__ = [
    "PSEUDO_LABEL_SUFFIXES",
    "PseudoLabel",
    "extra_training_examples",
    "pseudo_label",
    "pseudo_label_format",
    "read_unlabelled",
    "same_text",
    "write_pseudo_labels",
]

Log = Callable[[str], None]


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


@contextlib.contextmanager
def _precision(member, bf16: bool | None) -> Iterator[None]:
    """The member's own precision (``attnkit.load``'s rule: bf16 where native), or for the
    duration the one ``bf16`` asks for (True / False)."""
    saved = member.precision
    if bf16 is not None:
        member.precision = resolve_precision(bf16, member.device, what="bf16")
    try:
        yield
    finally:
        member.precision = saved


def _teachers(predictor) -> list:
    """The classify runs behind ``predictor``: itself, or an ensemble's members."""
    from attnkit.tasks.classify import ClassifierPredictor, EnsemblePredictor

    if isinstance(predictor, EnsemblePredictor):
        return list(predictor.members)
    if not isinstance(predictor, ClassifierPredictor):
        raise InputError("pseudo-labels come from a classify run or an ensemble of them")
    if predictor.pairs:
        raise InputError("this run classifies sentence pairs; pseudo-labelling reads single texts")
    return [predictor]


@torch.no_grad()
def pseudo_label(
    predictor,
    texts: Iterable[str],
    min_confidence: float = 0.9,
    balance: bool = False,
    batch_size: int = 256,
    bf16: bool | None = None,
    chunk: int = 32768,
    soft: bool = False,
    log: Log = print,
) -> tuple[list[PseudoLabel], dict[str, int]]:
    """The teacher ``predictor``'s (a ClassifierPredictor or an EnsemblePredictor) confident
    labels for ``texts``.

    Empty texts and repeats (``same_text``) are labelled once. Keeps the texts whose
    confidence is >= ``min_confidence``; ``balance``: then the same number of each class,
    the most confident. ``soft``: each label also keeps the whole distribution. ``bf16``:
    autocast the forward pass or not (None: each teacher's own ``precision``, by default
    ``attnkit.load``'s rule: bf16 where the device computes it natively). Returns the kept
    labels in input order and counts: ``texts``
    (distinct), ``confident``, ``kept`` and ``kept_<label>``."""
    from attnkit.tasks.classify import _encode

    if not 0.0 <= min_confidence <= 1.0 or math.isnan(min_confidence):
        raise InputError(f"min_confidence must be between 0 and 1, got {min_confidence}")
    members = _teachers(predictor)
    seen: set[str] = set()
    distinct: list[str] = []
    for text in texts:
        key = same_text(text)
        if key and key not in seen:
            seen.add(key)
            distinct.append(key)
    if not distinct:
        raise InputError("no text to label: the input is empty")
    probs = []
    start = time.perf_counter()
    for i in range(0, len(distinct), chunk):
        part = distinct[i : i + chunk]
        p = torch.zeros(len(part), len(predictor.labels))
        for m in members:  # p(y | x) = 1/M * sum_m softmax(logits_m / T_m)
            ids, _, _ = _encode(m.tokenizer, part, m.config)
            with _precision(m, bf16):
                logits = m.logits(ids, batch_size)
            p += (logits / m.temperature).softmax(-1) / len(members)
        probs.append(p)
        done = i + len(part)
        rate = done / max(time.perf_counter() - start, 1e-9)
        log(f"labelled {done:,}/{len(distinct):,} texts ({rate:,.0f} texts/s)")
    all_probs = torch.cat(probs)  # (N, num_classes)
    best, top = all_probs.max(-1)  # (N,), (N,)
    keep = (best >= min_confidence).nonzero().flatten().tolist()
    confidence, label = best.tolist(), top.tolist()  # (Python lists: indexed per text below)
    stats = {"texts": len(distinct), "confident": len(keep)}
    if balance:
        by_class = {k: [i for i in keep if label[i] == k] for k in range(len(predictor.labels))}
        n = min(len(rows) for rows in by_class.values())
        keep = sorted(
            i for rows in by_class.values() for i in sorted(rows, key=lambda i: -confidence[i])[:n]
        )
    distributions = all_probs.tolist() if soft else None
    rows = [
        PseudoLabel(
            distinct[i],
            predictor.labels[label[i]],
            confidence[i],
            tuple(distributions[i]) if distributions is not None else None,
        )
        for i in keep
    ]
    stats["kept"] = len(rows)
    for name in predictor.labels:
        stats[f"kept_{name}"] = sum(r.label == name for r in rows)
    return rows, stats


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
    cfg: RunConfig, labels: Sequence[str], to_id: dict[str, int], labelled: Iterable[Example]
) -> tuple[list[Example], list[tuple[float, ...]] | None, int]:
    """The examples of ``data.extra_train`` (a CSV/TSV/JSONL with the recipe's text and label
    columns; labels by class name or as the dataset writes them), without repeats and
    without any text of ``labelled`` or of the dataset's test split. Returns (examples,
    their soft targets or None, texts dropped). Each example's label is the dataset's own
    form (``to_id``'s keys); soft targets, one distribution per example in the run's label
    order, come from a TSV with a ``prob_<class>`` column for every class."""
    from attnkit.tasks.classify import read_split

    d = cfg.data
    table = read_table(d.extra_train, text_column=d.text_column, label_column=d.label_column)
    soft = _soft_targets(d.extra_train, labels, d.text_column)
    known = {same_text(ex.text) for ex in labelled}
    if has_split(d, "test"):
        known.update(same_text(ex.text) for ex in read_split(cfg, "test"))
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

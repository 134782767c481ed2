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
import math
import time
from collections.abc import Callable, Iterable, Iterator

import torch

from attnkit.core.errors import InputError
from attnkit.data.pseudo_label_files import (
    PSEUDO_LABEL_SUFFIXES,
    PseudoLabel,
    extra_training_examples,
    pseudo_label_format,
    read_unlabelled,
    same_text,
    write_pseudo_labels,
)
from attnkit.runtime.device import resolve_precision
from attnkit.tasks.base import log_info
from attnkit.tasks.classify import ClassifierPredictor, EnsemblePredictor, encode_texts

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
    log: Log = log_info,
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
            ids, _, _ = encode_texts(m.tokenizer, part, m.config)
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

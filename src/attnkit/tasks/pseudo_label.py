"""Self-training: a trained classifier (the teacher) labels unlabelled texts, and the texts
it is confident about join the next model's (the student's) training data.

    attnkit pseudo-label runs/nsmc-bert --input nsmc -o pseudo.tsv --min-confidence 0.9 --balance
    attnkit train configs/nsmc-bert.yaml --set data.extra_train=pseudo.tsv

* The teacher's confidence is its calibrated probability of the label it gives,
  softmax(logits / T) with the temperature T fitted after its training.
* ``balance`` keeps as many texts of each class as the rarest class has (the most confident
  ones), so a teacher's lean toward one class, or a corpus that leans (raw Naver reviews are
  mostly positive), does not shift the student's prior; the test sets here are balanced.
* The file is a TSV with the header ``text  label  confidence`` (labels by name), which any
  classify recipe reads as ``data.extra_train``. The student adds those examples to its
  training split *after* the validation split is made, and drops every text that is in the
  dataset's own train, validation or test split (``extra_training_examples``): validation
  and test accuracy stay measured on texts no label of the teacher touched.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from attnkit.checkpoint import atomic_write_text
from attnkit.config import RunConfig
from attnkit.data.catalogue import has_split
from attnkit.data.readers import Example, read_table
from attnkit.errors import DataError, InputError

__all__ = [
    "PseudoLabel",
    "extra_training_examples",
    "pseudo_label",
    "same_text",
    "write_pseudo_labels",
]

Log = Callable[[str], None]


@dataclass(frozen=True)
class PseudoLabel:
    text: str
    label: str  # the teacher's label (a class name)
    confidence: float  # the teacher's calibrated probability of that label


def same_text(text: str) -> str:
    """The form in which two texts count as the same review: whitespace runs collapsed."""
    return " ".join(text.split())


def _bf16_helps(device: torch.device) -> bool:
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    from attnkit.training import cpu_has_native_bf16

    return device.type == "cpu" and cpu_has_native_bf16()


@torch.no_grad()
def pseudo_label(
    predictor,
    texts: Iterable[str],
    min_confidence: float = 0.9,
    balance: bool = False,
    batch_size: int = 256,
    bf16: bool | None = None,
    chunk: int = 32768,
    log: Log = print,
) -> tuple[list[PseudoLabel], dict[str, int]]:
    """The teacher ``predictor``'s (a ClassifierPredictor) confident labels for ``texts``.

    Empty texts and repeats (``same_text``) are labelled once. Keeps the texts whose
    confidence is >= ``min_confidence``; ``balance``: then the same number of each class,
    the most confident. ``bf16``: autocast the forward pass (None: where it is fast, i.e. a
    CUDA GPU with bf16 or a CPU with native bf16). Returns the kept labels in input order
    and counts: ``texts`` (distinct), ``confident``, ``kept`` and ``kept_<label>``."""
    from attnkit.tasks.classify import ClassifierPredictor, _encode

    if not 0.0 <= min_confidence <= 1.0 or math.isnan(min_confidence):
        raise InputError(f"min_confidence must be between 0 and 1, got {min_confidence}")
    if not isinstance(predictor, ClassifierPredictor):
        raise InputError("pseudo-labels come from one classify run (not an ensemble)")
    if predictor.pairs:
        raise InputError("this run classifies sentence pairs; pseudo-labelling reads single texts")
    seen: set[str] = set()
    distinct: list[str] = []
    for text in texts:
        key = same_text(text)
        if key and key not in seen:
            seen.add(key)
            distinct.append(key)
    if not distinct:
        raise InputError("no text to label: the input is empty")
    use_bf16 = _bf16_helps(predictor.device) if bf16 is None else bf16
    autocast = (
        torch.autocast(predictor.device.type, dtype=torch.bfloat16)
        if use_bf16
        else contextlib.nullcontext()
    )
    probs = []
    start = time.perf_counter()
    for i in range(0, len(distinct), chunk):
        part = distinct[i : i + chunk]
        ids, _, _ = _encode(predictor.tokenizer, part, predictor.config)
        with autocast:
            logits = predictor.logits(ids, batch_size)
        probs.append((logits / predictor.temperature).softmax(-1))
        done = i + len(part)
        rate = done / max(time.perf_counter() - start, 1e-9)
        log(f"labelled {done:,}/{len(distinct):,} texts ({rate:,.0f} texts/s)")
    confidence, label = torch.cat(probs).max(-1)  # (N,), (N,)
    keep = (confidence >= min_confidence).nonzero().flatten().tolist()
    stats = {"texts": len(distinct), "confident": len(keep)}
    if balance:
        by_class = {k: [i for i in keep if label[i] == k] for k in range(len(predictor.labels))}
        n = min(len(rows) for rows in by_class.values())
        keep = sorted(
            i
            for rows in by_class.values()
            for i in sorted(rows, key=lambda i: -float(confidence[i]))[:n]
        )
    rows = [
        PseudoLabel(distinct[i], predictor.labels[int(label[i])], float(confidence[i]))
        for i in keep
    ]
    stats["kept"] = len(rows)
    for name in predictor.labels:
        stats[f"kept_{name}"] = sum(r.label == name for r in rows)
    return rows, stats


def write_pseudo_labels(rows: Sequence[PseudoLabel], path: str | Path) -> Path:
    """Write ``rows`` as a TSV (``text  label  confidence``; tabs and line breaks in a text
    become spaces), atomically: a temp file renamed into place."""
    lines = ["text\tlabel\tconfidence"]
    lines += [f"{same_text(r.text)}\t{r.label}\t{r.confidence:.4f}" for r in rows]
    return atomic_write_text(path, "\n".join(lines) + "\n")


def extra_training_examples(
    cfg: RunConfig, labels: Sequence[str], to_id: dict[str, int], labelled: Iterable[Example]
) -> tuple[list[Example], int]:
    """The examples of ``data.extra_train`` (a CSV/TSV/JSONL with the recipe's text and label
    columns; labels by class name or as the dataset writes them), without repeats and
    without any text of ``labelled`` or of the dataset's test split. Returns (examples,
    texts dropped). Each example's label is the dataset's own form (``to_id``'s keys)."""
    from attnkit.tasks.classify import read_split

    d = cfg.data
    table = read_table(d.extra_train, text_column=d.text_column, label_column=d.label_column)
    known = {same_text(ex.text) for ex in labelled}
    if has_split(d, "test"):
        known.update(same_text(ex.text) for ex in read_split(cfg, "test"))
    by_name = {name: key for key, i in to_id.items() for name in (labels[i],)}
    out: list[Example] = []
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
    return out, dropped

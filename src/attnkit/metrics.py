"""Evaluation metrics, in plain Python/numpy (no scikit-learn needed).

Classification labels are integer class ids; ``y_true`` / ``y_pred`` may be lists, tuples,
1-D numpy arrays or 1-D torch tensors (any device) of ints.

Per class c, from the confusion matrix (rows = true class, columns = predicted class):
    tp = M[c, c], fp = column sum - tp, fn = row sum - tp
    precision = tp / (tp + fp), recall = tp / (tp + fn), F1 = 2 tp / (2 tp + fp + fn)
A ratio whose denominator is 0 is 0 (scikit-learn's default ``zero_division`` result).

Macro F1 averages F1 over the classes that occur in ``y_true`` or ``y_pred``, which is
what ``sklearn.metrics.f1_score(average="macro")`` does without ``labels``: a class seen
only in y_true (never predicted) or only in y_pred counts with F1 = 0; a class absent from
both is left out of the average (it says nothing about the model).
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "BleuScore",
    "accuracy",
    "bleu",
    "classification_report",
    "confusion_matrix",
    "format_confusion_matrix",
    "macro_f1",
    "per_class_scores",
    "perplexity",
]


def _as_labels(y: Any, name: str) -> np.ndarray:
    """Lists / 1-D ndarrays / 1-D tensors of integer labels -> 1-D int64 ndarray."""
    if hasattr(y, "detach"):  # torch.Tensor, without importing torch here
        y = y.detach().cpu().numpy()
    arr = np.asarray(y)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    integral = np.issubdtype(arr.dtype, np.integer) or arr.dtype == np.bool_
    if not integral and np.issubdtype(arr.dtype, np.floating):
        integral = bool(np.all(arr == np.round(arr)))  # e.g. 1.0 from a float tensor
    if arr.size and not integral:
        raise ValueError(f"{name} must hold integer class ids, got dtype {arr.dtype}")
    return arr.astype(np.int64)


def _pair(y_true: Any, y_pred: Any) -> tuple[np.ndarray, np.ndarray]:
    t, p = _as_labels(y_true, "y_true"), _as_labels(y_pred, "y_pred")
    if t.shape != p.shape:
        raise ValueError(f"y_true has {t.size} labels but y_pred has {p.size}")
    return t, p


def _ratio(num: float, den: float) -> float:
    return num / den if den else 0.0


# --------------------------------------------------------------------------------------
# Classification
# --------------------------------------------------------------------------------------
def accuracy(y_true: Any, y_pred: Any) -> float:
    """Fraction of positions where y_pred == y_true (0.0 for empty input)."""
    t, p = _pair(y_true, y_pred)
    return float((t == p).mean()) if t.size else 0.0


def confusion_matrix(y_true: Any, y_pred: Any, num_classes: int) -> list[list[int]]:
    """(num_classes, num_classes) counts: ``matrix[i][j]`` = examples of true class i
    predicted as class j (rows = true, columns = predicted)."""
    t, p = _pair(y_true, y_pred)
    for name, arr in (("y_true", t), ("y_pred", p)):
        if arr.size and (arr.min() < 0 or arr.max() >= num_classes):
            raise ValueError(f"{name} has labels outside [0, {num_classes}): {sorted(set(arr))}")
    m = np.zeros((num_classes, num_classes), dtype=np.int64)
    np.add.at(m, (t, p), 1)
    return m.tolist()


def per_class_scores(matrix: Sequence[Sequence[int]]) -> list[dict[str, float]]:
    """Per-class precision, recall, F1 and support (true count) from a confusion matrix."""
    m = np.asarray(matrix, dtype=np.int64).reshape(len(matrix), len(matrix))
    scores = []
    for c in range(m.shape[0]):
        tp = int(m[c, c])
        fp = int(m[:, c].sum()) - tp
        fn = int(m[c, :].sum()) - tp
        scores.append(
            {
                "precision": _ratio(tp, tp + fp),
                "recall": _ratio(tp, tp + fn),
                "f1": _ratio(2 * tp, 2 * tp + fp + fn),
                "support": tp + fn,
            }
        )
    return scores


def _macro_f1_from_matrix(matrix: list[list[int]]) -> float:
    m = np.asarray(matrix, dtype=np.int64).reshape(len(matrix), len(matrix))
    present = (m.sum(axis=0) + m.sum(axis=1)) > 0  # class occurs in y_true or y_pred
    if not present.any():
        return 0.0
    f1 = [s["f1"] for s, keep in zip(per_class_scores(m), present, strict=True) if keep]
    return float(np.mean(f1))


def macro_f1(y_true: Any, y_pred: Any, num_classes: int | None = None) -> float:
    """Unweighted mean of per-class F1 over the classes present in y_true or y_pred.

    Matches ``sklearn.metrics.f1_score(y_true, y_pred, average="macro")``: a class that is
    never predicted (or only predicted) has F1 = 0 and counts; a class absent from both is
    excluded, also when ``num_classes`` is given (it is then only a range check). 0.0 for
    empty input."""
    t, p = _pair(y_true, y_pred)
    if num_classes is None:
        num_classes = int(max(t.max(initial=-1), p.max(initial=-1))) + 1
    return _macro_f1_from_matrix(confusion_matrix(t, p, num_classes))


def classification_report(y_true: Any, y_pred: Any, labels: Sequence[str]) -> dict[str, Any]:
    """Everything a classification evaluation reports, JSON-serializable.

    ``labels[i]`` names class id i. Returns
        {"accuracy": float, "macro_f1": float, "num_examples": int,
         "per_class": {label: {"precision", "recall", "f1", "support"}},
         "labels": [...], "confusion_matrix": [[int]] (rows = true, cols = predicted)}
    """
    t, p = _pair(y_true, y_pred)
    matrix = confusion_matrix(t, p, len(labels))
    scores = per_class_scores(matrix)
    return {
        "accuracy": accuracy(t, p),
        "macro_f1": _macro_f1_from_matrix(matrix),
        "num_examples": int(t.size),
        "per_class": {label: s for label, s in zip(labels, scores, strict=True)},
        "labels": list(labels),
        "confusion_matrix": matrix,
    }


# --------------------------------------------------------------------------------------
# Text table
# --------------------------------------------------------------------------------------
def _width(text: str) -> int:
    """Terminal columns of ``text``: East Asian wide/full-width characters (Hangul, CJK)
    take two columns, combining marks none."""
    return sum(
        0 if unicodedata.combining(ch) else 2 if unicodedata.east_asian_width(ch) in "WF" else 1
        for ch in text
    )


def _pad(text: str, width: int, right: bool = False) -> str:
    fill = " " * max(0, width - _width(text))
    return fill + text if right else text + fill


def format_confusion_matrix(matrix: Sequence[Sequence[int]], labels: Sequence[str]) -> str:
    """Aligned text table of a confusion matrix, rows = true, columns = predicted.

    Column widths count display columns, so Korean (and other wide) labels line up in a
    monospace terminal::

        true \\ pred  긍정  부정
        긍정            5     1
        부정            2     4
    """
    m = [list(map(int, row)) for row in matrix]
    if len(m) != len(labels) or any(len(row) != len(labels) for row in m):
        raise ValueError(f"matrix must be {len(labels)} x {len(labels)} to match the labels")
    corner = "true \\ pred"
    first = max([_width(corner), *(_width(label) for label in labels)])
    cols = [
        max(_width(label), *(len(str(row[j])) for row in m), 1) for j, label in enumerate(labels)
    ]
    lines = [
        "  ".join(
            [
                _pad(corner, first),
                *(_pad(lab, w, right=True) for lab, w in zip(labels, cols, strict=True)),
            ]
        )
    ]
    for label, row in zip(labels, m, strict=True):
        cells = [_pad(str(v), w, right=True) for v, w in zip(row, cols, strict=True)]
        lines.append("  ".join([_pad(label, first), *cells]))
    return "\n".join(lines)


# --------------------------------------------------------------------------------------
# Language modelling
# --------------------------------------------------------------------------------------
def perplexity(mean_nll: float) -> float:
    """PPL = exp(mean negative log-likelihood per token, in nats); inf on overflow."""
    try:
        return math.exp(mean_nll)
    except OverflowError:
        return math.inf


# --------------------------------------------------------------------------------------
# Translation
# --------------------------------------------------------------------------------------
@dataclass
class BleuScore:
    score: float  # corpus BLEU, 0-100
    signature: str  # sacreBLEU's signature, e.g. "nrefs:1|case:mixed|eff:no|tok:13a|..."
    text: str  # sacreBLEU's one-line summary (n-gram precisions, brevity penalty)


def bleu(
    hypotheses: Sequence[str],
    references: Sequence[str],
    lowercase: bool = False,
    tokenize: str = "13a",
) -> BleuScore:
    """Corpus BLEU with sacreBLEU on detokenized text (one reference per hypothesis).

    The defaults are sacreBLEU's standard (cased, 13a tokenization); report the signature
    with the score. ``lowercase=True`` gives the case-insensitive figure."""
    from sacrebleu.metrics import BLEU

    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    metric = BLEU(lowercase=lowercase, tokenize=tokenize)
    if not hypotheses:
        return BleuScore(0.0, str(metric.get_signature()), "BLEU = 0.00 (no sentences)")
    result = metric.corpus_score(list(hypotheses), [list(references)])
    return BleuScore(float(result.score), str(metric.get_signature()), str(result))

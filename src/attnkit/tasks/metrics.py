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
import re
import string
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "BleuScore",
    "accuracy",
    "bleu",
    "classification_report",
    "confusion_matrix",
    "entity_f1",
    "format_confusion_matrix",
    "get_entities",
    "korquad_scores",
    "macro_f1",
    "per_class_scores",
    "perplexity",
    "qa_report",
    "squad_scores",
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


# --------------------------------------------------------------------------------------
# Sequence tagging (NER): entity-level scores as seqeval / conlleval
# --------------------------------------------------------------------------------------
def _split_tag(tag: str) -> tuple[str, str]:
    """``"B-PER"`` -> ``("B", "PER")``; ``"O"`` -> ``("O", "_")``; a tag without type
    (``"B"``) has type ``"_"`` (seqeval's convention)."""
    return tag[:1], tag[1:].split("-", maxsplit=1)[-1] or "_"


def _chunk_ends(prev_tag: str, tag: str, prev_type: str, type_: str) -> bool:
    """Whether an entity ends between the previous and the current tag (seqeval)."""
    if prev_tag in ("E", "S"):
        return True
    if prev_tag in ("B", "I") and tag in ("B", "S", "O"):
        return True
    return prev_tag not in ("O", ".") and prev_type != type_


def _chunk_starts(prev_tag: str, tag: str, prev_type: str, type_: str) -> bool:
    """Whether an entity starts at the current tag (seqeval)."""
    if tag in ("B", "S"):
        return True
    if prev_tag in ("E", "S", "O") and tag in ("E", "I"):
        return True
    return tag not in ("O", ".") and prev_type != type_


def get_entities(tags: Sequence[str]) -> list[tuple[str, int, int]]:
    """The entities of one tag sequence as ``(type, first, last)`` (inclusive positions).

    Exactly ``seqeval.metrics.sequence_labeling.get_entities`` (its default,
    conlleval-compatible mode): an entity starts at ``B-X`` (or ``S-X``), at an ``I-X``
    after ``O`` or after a tag of another type, and at ``I-X``/``E-X`` after ``E``/``S``;
    it ends before ``B``/``O``/``S``, after ``E``/``S``, and where the type changes. So
    IOB1-style and malformed IOB2 (an ``I-X`` with no ``B-X``) are read as conlleval does.
    """
    entities = []
    prev_tag, prev_type, begin = "O", "", 0
    for i, chunk in enumerate([*tags, "O"]):
        tag, type_ = _split_tag(chunk)
        if _chunk_ends(prev_tag, tag, prev_type, type_):
            entities.append((prev_type, begin, i - 1))
        if _chunk_starts(prev_tag, tag, prev_type, type_):
            begin = i
        prev_tag, prev_type = tag, type_
    return entities


def _prf(tp: int, n_pred: int, n_true: int) -> dict[str, float]:
    precision, recall = _ratio(tp, n_pred), _ratio(tp, n_true)
    f1 = _ratio(2 * precision * recall, precision + recall)  # seqeval's formula, same floats
    return {"precision": precision, "recall": recall, "f1": f1}


def entity_f1(y_true: Sequence[Sequence[str]], y_pred: Sequence[Sequence[str]]) -> dict[str, Any]:
    """Entity-level precision / recall / F1 of tagged sentences, as seqeval's default mode.

    An entity counts as found only if its type, first and last word all match. The
    sentences are joined with an ``O`` between them (as seqeval does), so no entity spans
    two sentences. Ratios with a zero denominator are 0 (seqeval's default).

    Args:
        y_true, y_pred: per sentence, one tag per word (``"B-PER"``, ``"I-PER"``, ``"O"``).

    Returns:
        ``{"precision", "recall", "f1": micro over all entities, "support": number of true
        entities, "per_type": {type: {"precision", "recall", "f1", "support"}}}``; types
        sorted, including those only predicted (support 0), as in
        ``seqeval.metrics.classification_report``.
    """
    if len(y_true) != len(y_pred):
        raise ValueError(f"y_true has {len(y_true)} sentences but y_pred has {len(y_pred)}")
    for k, (t, p) in enumerate(zip(y_true, y_pred, strict=True)):
        if len(t) != len(p):
            raise ValueError(f"sentence {k}: {len(t)} true tags but {len(p)} predicted")
    found: dict[str, dict[str, set[tuple[int, int]]]] = {
        "true": defaultdict(set),
        "pred": defaultdict(set),
    }
    for name, sentences in (("true", y_true), ("pred", y_pred)):
        flat = [tag for sentence in sentences for tag in [*sentence, "O"]]
        for type_, first, last in get_entities(flat):
            found[name][type_].add((first, last))
    per_type = {}
    for type_ in sorted(set(found["true"]) | set(found["pred"])):
        true, pred = found["true"][type_], found["pred"][type_]
        per_type[type_] = {**_prf(len(true & pred), len(pred), len(true)), "support": len(true)}
    tp = sum(len(found["true"][t] & found["pred"][t]) for t in per_type)
    n_pred = sum(len(v) for v in found["pred"].values())
    n_true = sum(len(v) for v in found["true"].values())
    return {**_prf(tp, n_pred, n_true), "support": n_true, "per_type": per_type}


# --------------------------------------------------------------------------------------
# Extractive QA: SQuAD v1.1 and KorQuAD 1.0 official scores
# --------------------------------------------------------------------------------------
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = set(string.punctuation)
# KorQuAD 1.0's extra symbols, replaced by a space before punctuation is removed
_KORQUAD_SYMBOLS = re.compile("['\"《》<>〈〉()‘’]")


def _squad_normalize(text: str) -> str:
    """SQuAD v1.1's ``normalize_answer``: lowercase, drop ASCII punctuation, replace the
    articles a/an/the by a space, collapse whitespace."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _korquad_normalize(text: str) -> str:
    """KorQuAD 1.0's ``normalize_answer``: ``' " 《 》 < > 〈 〉 ( ) ‘ ’`` -> space, lowercase,
    drop ASCII punctuation, collapse whitespace (no article removal)."""
    text = _KORQUAD_SYMBOLS.sub(" ", text).lower()
    return " ".join("".join(ch for ch in text if ch not in _PUNCTUATION).split())


def _overlap_f1(prediction: list[str], truth: list[str]) -> float:
    """F1 of the multiset overlap of two unit lists (0 if nothing is shared)."""
    same = sum((Counter(prediction) & Counter(truth)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(prediction), same / len(truth)
    return (2 * precision * recall) / (precision + recall)


def _best_over_truths(
    prediction: str,
    ground_truths: Sequence[str],
    normalize: Callable[[str], str],
    units: Callable[[str], list[str]],
) -> tuple[float, float]:
    if not ground_truths:
        raise ValueError("at least one ground-truth answer is needed")
    pred = normalize(prediction)
    truths = [normalize(t) for t in ground_truths]
    em = max(float(pred == t) for t in truths)
    f1 = max(_overlap_f1(units(pred), units(t)) for t in truths)
    return em, f1


def squad_scores(prediction: str, ground_truths: Sequence[str]) -> tuple[float, float]:
    """(exact match, F1) of one answer, each in [0, 1], as SQuAD v1.1's official
    ``evaluate-v1.1.py``: both strings normalised (lowercase, ASCII punctuation removed,
    articles a/an/the removed, whitespace collapsed), EM = equality, F1 over the
    whitespace tokens (bag of words); the maximum over the ground truths."""
    return _best_over_truths(prediction, ground_truths, _squad_normalize, str.split)


def korquad_scores(prediction: str, ground_truths: Sequence[str]) -> tuple[float, float]:
    """(exact match, F1) of one answer, each in [0, 1], as KorQuAD 1.0's official
    ``evaluate-v1.0.py``.

    Its ``normalize_answer`` replaces ``' " 《 》 < > 〈 〉 ( ) ‘ ’`` by spaces, lowercases,
    deletes ``string.punctuation`` and collapses whitespace (articles are NOT removed);
    EM is equality of the normalised strings; F1 is over CHARACTERS: the multiset of
    characters of the normalised string with spaces removed (Korean words carry
    particles, so word-level F1 would be too harsh). Maximum over the ground truths.

    Source: the script distributed at https://korquad.github.io/KorQuad%201.0/ ("KorQuAD
    v1.0에 대한 공식 평가 스크립트"), read in the copy github.com/monologg/KoBERT-KorQuAD
    ``evaluate_v1_0.py`` (identical copies in other KorQuAD repositories).
    """

    def characters(text: str) -> list[str]:
        return [ch for token in text.split() for ch in token]

    return _best_over_truths(prediction, ground_truths, _korquad_normalize, characters)


QA_SCORERS: dict[str, Callable[[str, Sequence[str]], tuple[float, float]]] = {
    "squad": squad_scores,
    "korquad": korquad_scores,
}


def qa_report(
    predictions: Mapping[Any, str], references: Mapping[Any, Sequence[str]], scorer: str = "squad"
) -> dict[str, float | int]:
    """Corpus EM and F1 in percent, as the official scripts compute them.

    Every question of ``references`` (id -> its ground-truth answers) counts; one with no
    prediction scores 0 (the scripts print "Unanswered question ... will receive score
    0."); predictions for ids not in ``references`` are ignored.

    Returns:
        ``{"exact_match": 100 * mean EM, "f1": 100 * mean F1, "count": questions,
        "missing": questions without a prediction}``; 0.0 for both when there are none.
    """
    if scorer not in QA_SCORERS:
        raise ValueError(f"scorer must be one of {', '.join(QA_SCORERS)}, got {scorer!r}")
    score = QA_SCORERS[scorer]
    em = f1 = 0.0
    missing = 0
    for qid, truths in references.items():
        if qid not in predictions:
            missing += 1
            continue
        e, f = score(predictions[qid], truths)
        em, f1 = em + e, f1 + f
    n = len(references)
    return {
        "exact_match": 100.0 * _ratio(em, n),
        "f1": 100.0 * _ratio(f1, n),
        "count": n,
        "missing": missing,
    }

"""metrics.py: hand-computed classification scores, confusion-matrix orientation, the text
table (Korean labels), and perplexity."""

import math

import numpy as np
import pytest
import torch

from attnkit.tasks.metrics import (
    accuracy,
    classification_report,
    confusion_matrix,
    format_confusion_matrix,
    macro_f1,
    per_class_scores,
    perplexity,
)

# Class 2 occurs in y_true but is never predicted.
Y_TRUE = [0, 0, 0, 1, 1, 2, 2]
Y_PRED = [0, 0, 1, 1, 1, 0, 1]


def test_accuracy_inputs_of_every_kind():
    expected = 4 / 7
    assert accuracy(Y_TRUE, Y_PRED) == pytest.approx(expected)
    assert accuracy(np.array(Y_TRUE), np.array(Y_PRED)) == pytest.approx(expected)
    assert accuracy(torch.tensor(Y_TRUE), torch.tensor(Y_PRED)) == pytest.approx(expected)
    assert accuracy([], []) == 0.0
    with pytest.raises(ValueError, match="labels"):
        accuracy([0, 1], [0])
    with pytest.raises(ValueError, match="1-D"):
        accuracy(torch.zeros(2, 2, dtype=torch.long), torch.zeros(2, 2, dtype=torch.long))


def test_confusion_matrix_rows_true_cols_pred():
    m = confusion_matrix(Y_TRUE, Y_PRED, num_classes=3)
    assert m == [
        [2, 1, 0],  # true 0: two right, one predicted as 1
        [0, 2, 0],
        [1, 1, 0],  # true 2: never predicted as 2
    ]
    assert confusion_matrix([1], [0], 2) == [[0, 0], [1, 0]]  # row = true 1, col = pred 0
    with pytest.raises(ValueError, match="outside"):
        confusion_matrix([0, 3], [0, 0], 3)


def test_macro_f1_hand_computed_with_class_never_predicted():
    # class 0: tp=2 fp=1 fn=1 -> P=2/3 R=2/3 F1=2/3
    # class 1: tp=2 fp=2 fn=0 -> P=1/2 R=1   F1=2/3
    # class 2: tp=0 fp=0 fn=2 -> P=0 (0/0) R=0 F1=0
    expected = (2 / 3 + 2 / 3 + 0) / 3
    assert macro_f1(Y_TRUE, Y_PRED) == pytest.approx(expected)
    assert macro_f1(torch.tensor(Y_TRUE), np.array(Y_PRED), num_classes=3) == pytest.approx(
        expected
    )
    scores = per_class_scores(confusion_matrix(Y_TRUE, Y_PRED, 3))
    assert scores[0] == pytest.approx(
        {"precision": 2 / 3, "recall": 2 / 3, "f1": 2 / 3, "support": 3}
    )
    assert scores[1] == pytest.approx({"precision": 0.5, "recall": 1.0, "f1": 2 / 3, "support": 2})
    assert scores[2] == pytest.approx({"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 2})


def test_macro_f1_class_only_predicted_counts_absent_class_excluded():
    # class 1 only predicted (F1 0, counts); class 2 absent from both (excluded, even with
    # num_classes=4 given); class 3 never occurs either.
    y_true, y_pred = [0, 0, 0], [0, 0, 1]
    # class 0: tp=2 fp=0 fn=1 -> F1 = 4/5; class 1: F1 = 0
    assert macro_f1(y_true, y_pred) == pytest.approx((0.8 + 0.0) / 2)
    assert macro_f1(y_true, y_pred, num_classes=4) == pytest.approx(0.4)
    assert macro_f1([1, 1], [1, 1]) == 1.0  # class 0 absent from both: excluded
    assert macro_f1([], []) == 0.0


def test_macro_f1_matches_manual_computation_on_random_labels():
    rng = np.random.default_rng(0)
    for _ in range(20):
        k = int(rng.integers(2, 6))
        t, p = rng.integers(0, k, 50), rng.integers(0, k, 50)
        f1s = []
        for c in range(k):
            tp = int(((t == c) & (p == c)).sum())
            fp = int(((t != c) & (p == c)).sum())
            fn = int(((t == c) & (p != c)).sum())
            if tp + fp + fn == 0:
                continue
            prec = tp / (tp + fp) if tp + fp else 0.0
            rec = tp / (tp + fn) if tp + fn else 0.0
            f1s.append(2 * prec * rec / (prec + rec) if prec + rec else 0.0)
        assert macro_f1(t, p) == pytest.approx(sum(f1s) / len(f1s))
        assert accuracy(t, p) == pytest.approx(float((t == p).mean()))


def test_classification_report():
    rep = classification_report(Y_TRUE, Y_PRED, ["neg", "pos", "neutral"])
    assert rep["accuracy"] == pytest.approx(4 / 7)
    assert rep["macro_f1"] == pytest.approx(4 / 9)
    assert rep["num_examples"] == 7
    assert rep["confusion_matrix"] == confusion_matrix(Y_TRUE, Y_PRED, 3)
    assert set(rep["per_class"]) == {"neg", "pos", "neutral"}
    assert rep["per_class"]["pos"]["precision"] == pytest.approx(0.5)
    assert rep["per_class"]["neutral"]["recall"] == 0.0


def test_format_confusion_matrix_aligns_korean_labels():
    text = format_confusion_matrix([[5, 1], [2, 40]], ["긍정", "부정"])
    lines = text.splitlines()
    assert len(lines) == 3
    assert "긍정" in lines[0] and "부정" in lines[0]
    assert lines[1].startswith("긍정") and lines[2].startswith("부정")
    # every line has the same display width (Hangul counts two columns)
    widths = {sum(2 if "\uac00" <= ch <= "\ud7a3" else 1 for ch in line) for line in lines}
    assert len(widths) == 1
    assert lines[1].rstrip().endswith("1") and lines[2].rstrip().endswith("40")
    with pytest.raises(ValueError):
        format_confusion_matrix([[1, 2]], ["a", "b"])


def test_perplexity():
    assert perplexity(0.0) == 1.0
    assert perplexity(math.log(50.0)) == pytest.approx(50.0)
    assert perplexity(1e6) == math.inf

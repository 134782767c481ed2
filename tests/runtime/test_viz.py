"""viz.py: figures render, Hangul labels find a font, bad shapes are rejected."""

import warnings

import numpy as np
import pytest
from PIL import Image

from attnkit.runtime.viz import curve_series, plot_attention, plot_curves


def test_attention_heatmap_with_korean_labels(tmp_path):
    w = np.random.default_rng(0).random((3, 4))
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*[Gg]lyph.*")  # a missing glyph warns
        path = plot_attention(
            w, ["아", "더빙", "진짜", "짜증"], ["a", "b", "c"], tmp_path / "a.png"
        )
    with Image.open(path) as img:
        assert img.width > 100


def test_attention_heatmap_shape_mismatch(tmp_path):
    with pytest.raises(ValueError, match="do not match"):
        plot_attention(np.zeros((2, 2)), ["a"], ["b", "c"], tmp_path / "a.png")
    assert not (tmp_path / "a.png").exists()


def test_curves(tmp_path):
    rows = [{"step": s, "train_loss": 1 / s, "val_accuracy": s / 10} for s in range(1, 5)]
    rows.append({"epoch": 1})  # rows without a step are ignored
    assert plot_curves(rows, tmp_path / "c.png").is_file()


def test_curves_leave_out_counts_and_perplexity_and_give_scores_their_own_axis(tmp_path):
    # a bert-pretrain evaluation row: its 11,847 predictions and perplexity 60 once squashed
    # the accuracies of the metric panel into a flat line at 0
    rows = [
        {"step": s, "train_loss": 4.0, "val_loss": 4.5, "val_mlm_accuracy": 0.3 + s / 100,
         "val_num_predictions": 11847, "num_examples": 9, "val_perplexity": 60.0,
         "val_bleu": 20.0 + s}
        for s in (1, 2)
    ]  # fmt: skip
    losses, fractions, scores = curve_series(rows)
    assert sorted(losses) == ["train_loss", "val_loss"]
    assert list(fractions) == ["val_mlm_accuracy"] and list(scores) == ["val_bleu"]
    assert fractions["val_mlm_accuracy"] == [(1, 0.31), (2, 0.32)]
    assert plot_curves(rows, tmp_path / "c.png").is_file()

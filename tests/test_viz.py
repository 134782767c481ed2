"""viz.py: figures render, Hangul labels find a font, bad shapes are rejected."""

import warnings

import numpy as np
import pytest
from PIL import Image

from attnkit.viz import plot_attention, plot_curves


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

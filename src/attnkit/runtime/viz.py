"""Plots people would rather look at than read: positional encodings, attention heatmaps,
learning curves. Everything renders off-screen (Agg) and is written atomically to a PNG.

Korean labels need a font with Hangul glyphs; the NanumGothic font shipped by the
``koreanize-matplotlib`` package is used when installed, else any installed CJK font.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from attnkit.core.checkpoint import temp_file_beside
from attnkit.core.errors import InputError
from attnkit.core.output_guard import cannot_write, check_output
from attnkit.nn.layers import sinusoidal_encoding

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "check_output_path",
    "plot_attention",
    "plot_contributions",
    "plot_curves",
    "plot_positional_encoding",
    "save_figure",
]


def _pyplot() -> ModuleType:
    """``matplotlib.pyplot`` on the off-screen Agg backend, imported on the first plot: the
    Trainer and every task import this module, and loading a run must stay quick."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    _use_hangul_font(plt)
    return plt


_HANGUL_FONTS = ("NanumGothic", "Noto Sans CJK KR", "Noto Sans KR", "Malgun Gothic", "AppleGothic")
_font_ready = False


def _use_hangul_font(plt: ModuleType) -> None:
    """Put a Hangul-capable font first in matplotlib's fallback list (once)."""
    global _font_ready
    if _font_ready:
        return
    _font_ready = True
    from matplotlib import font_manager

    # locate the package's font without importing it (its import changes global rcParams)
    spec = importlib.util.find_spec("koreanize_matplotlib")
    if spec is not None and spec.submodule_search_locations:
        font = Path(list(spec.submodule_search_locations)[0]) / "fonts" / "NanumGothic.ttf"
        if font.is_file():
            font_manager.fontManager.addfont(str(font))
    installed = {f.name for f in font_manager.fontManager.ttflist}
    chosen = [name for name in _HANGUL_FONTS if name in installed]
    if chosen:
        plt.rcParams["font.family"] = [*chosen, "DejaVu Sans"]
    plt.rcParams["axes.unicode_minus"] = False


def _format(path: Path) -> str:
    return path.suffix.lstrip(".").lower() or "png"


def check_output_path(
    path: str | os.PathLike, inputs: Sequence[str | os.PathLike | None] = (), what: str = "-o"
) -> Path:
    """The path to write a figure to (``attnkit.core.output_guard.check_output``: a new name or a
    regular file, never a device, FIFO, folder, run file, input, or a link out of its
    folder; its folder exists, never created here, and is writable), whose file extension
    is an image format matplotlib writes; else an ``InputError`` naming why."""
    path = check_output(path, inputs=inputs, what=what)
    fmt = _format(path)
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if fmt not in FigureCanvasAgg.get_supported_filetypes():
        raise InputError(
            f"cannot write {path}: .{fmt} is not an image format (use .png, .svg, .pdf, ...)"
        )
    return path


def save_figure(fig: Figure, path: str | os.PathLike) -> Path:
    """Write ``fig`` to ``path`` atomically, then close it: into a temporary file of the
    same folder (a unique name per call), renamed over ``path`` once complete, so that
    ``path`` is never half-written. The folder must exist (``check_output_path``)."""
    try:
        path = check_output_path(path)
        try:
            fd, tmp = temp_file_beside(path)
        except OSError as exc:
            raise cannot_write(path, exc) from None
        try:
            with os.fdopen(fd, "wb") as f:
                fig.savefig(f, format=_format(path), dpi=120, bbox_inches="tight")
            os.replace(tmp, path)
        except OSError as exc:
            raise cannot_write(path, exc) from None
        finally:
            Path(tmp).unlink(missing_ok=True)
    finally:
        _pyplot().close(fig)
    return path


def plot_positional_encoding(
    max_len: int = 50, d_model: int = 128, path: str | os.PathLike = "pe.png"
) -> Path:
    """The course's figure: the (max_len x d_model) sinusoidal encoding as a heatmap."""
    if max_len < 1 or d_model < 2:
        raise ValueError("need max_len >= 1 and d_model >= 2")
    pe = sinusoidal_encoding(max_len, d_model).numpy()
    fig, ax = _pyplot().subplots(figsize=(10, 4.5))
    mesh = ax.pcolormesh(pe, cmap="RdBu", vmin=-1, vmax=1)
    ax.set_xlabel("depth (embedding dimension i)")
    ax.set_ylabel("position (pos)")
    ax.set_xlim(0, d_model)
    ax.set_ylim(max_len, 0)
    ax.set_title(f"Sinusoidal positional encoding, max_len={max_len}, d_model={d_model}")
    fig.colorbar(mesh, ax=ax)
    return save_figure(fig, path)


def plot_attention(
    weights: np.ndarray | Sequence,
    x_labels: Sequence[str],
    y_labels: Sequence[str],
    path: str | os.PathLike = "attention.png",
    title: str | None = None,
    x_title: str = "keys",
    y_title: str = "queries",
) -> Path:
    """Heatmap of one (Tq, Tk) attention matrix: rows = queries (y_labels), columns = keys."""
    w = np.asarray(weights, dtype=np.float32)
    if w.ndim != 2 or w.shape != (len(y_labels), len(x_labels)):
        raise ValueError(
            f"weights {w.shape} do not match labels ({len(y_labels)}, {len(x_labels)})"
        )
    size = (max(4.0, 0.45 * len(x_labels) + 2), max(3.0, 0.4 * len(y_labels) + 1.5))
    fig, ax = _pyplot().subplots(figsize=size)
    im = ax.imshow(w, cmap="viridis", vmin=0.0, vmax=max(float(w.max()), 1e-9), aspect="auto")
    ax.set_xticks(range(len(x_labels)), labels=list(x_labels), rotation=90)
    ax.set_yticks(range(len(y_labels)), labels=list(y_labels))
    ax.set_xlabel(x_title)
    ax.set_ylabel(y_title)
    if title:
        ax.set_title(title)
    fig.colorbar(im, ax=ax)
    return save_figure(fig, path)


def plot_contributions(
    names: Sequence[str],
    values: Sequence[float],
    path: str | os.PathLike = "contributions.png",
    title: str | None = None,
) -> Path:
    """Horizontal bars, one per feature (e.g. an n-gram), in the given order from the top:
    positive values (for the prediction) green, negative ones red."""
    if len(names) != len(values):
        raise ValueError(f"{len(names)} names but {len(values)} values")
    fig, ax = _pyplot().subplots(figsize=(7, max(2.5, 0.32 * len(names) + 1.2)))
    colors = ["tab:green" if v >= 0 else "tab:red" for v in values]
    ax.barh(range(len(names)), list(values), color=colors)
    ax.set_yticks(range(len(names)), labels=list(names))
    ax.invert_yaxis()
    ax.axvline(0.0, color="black", linewidth=0.8)
    ax.set_xlabel("contribution to the logit margin")
    if title:
        ax.set_title(title)
    return save_figure(fig, path)


Series = dict[str, list[tuple[float, float]]]  # name -> [(step, value)]
_NOT_PLOTTED = {"step", "epoch", "lr", "tokens_per_s", "elapsed_s"}


def curve_series(rows: Sequence[dict]) -> tuple[Series, Series, Series]:
    """metrics.jsonl rows -> (losses, fractions, scores): every numeric key against ``step``
    except counts (``num_*``), perplexities (the exp of a loss already drawn) and bookkeeping;
    ``fractions`` are metrics whose values all lie in [0, 1] (accuracy, F1), ``scores`` the
    others (BLEU, EM on a 0-100 scale), which get their own axis."""
    losses: Series = {}
    metrics: Series = {}
    for row in rows:
        step = row.get("step")
        if step is None:
            continue
        for key, value in row.items():
            if (
                key in _NOT_PLOTTED
                or not isinstance(value, (int, float))
                or isinstance(value, bool)
                or key.startswith("num_")
                or "_num_" in key
                or "perplexity" in key
            ):
                continue
            (losses if "loss" in key else metrics).setdefault(key, []).append((step, value))
    fractions = {k: v for k, v in metrics.items() if all(0 <= y <= 1 for _, y in v)}
    scores = {k: v for k, v in metrics.items() if k not in fractions}
    return losses, fractions, scores


def plot_curves(rows: Sequence[dict], path: str | os.PathLike = "curves.png") -> Path:
    """Learning curves from metrics.jsonl rows (see ``curve_series``): losses on the left
    panel, metrics on the right (fractions on its left axis, other scores on a second one)."""
    losses, fractions, scores = curve_series(rows)
    fig, (left, right) = _pyplot().subplots(1, 2, figsize=(11, 4))
    twin = right.twinx() if fractions and scores else None
    panels = [
        (left, losses, "loss", 0, "-"),
        (right, fractions, "metric", 0, "-"),
        (twin or right, scores, "score", len(fractions), "--" if twin else "-"),
    ]
    handles: list = []
    for ax, series, ylabel, color, style in panels:
        for i, (key, points) in enumerate(sorted(series.items())):
            xs, ys = zip(*points, strict=True)
            marker = "o" if len(xs) < 30 else None
            lines = ax.plot(xs, ys, style, marker=marker, color=f"C{color + i}", label=key)
            handles += lines if ax is not left else []
        if series:
            ax.set_ylabel(ylabel)
    for ax in (left, right):
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    if losses:
        left.legend()
    if handles:
        right.legend(handles=handles, labels=[h.get_label() for h in handles])
    return save_figure(fig, path)

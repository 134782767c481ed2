"""Plots people would rather look at than read: positional encodings, attention heatmaps,
learning curves, n-gram contributions.

Every figure is drawn through matplotlib's object API (``matplotlib.figure.Figure`` on its
own ``FigureCanvasAgg``): no pyplot, no backend switch, no change to the user's global
``rcParams``, so a notebook's own ``plt`` figures keep showing before and after attnkit's.
Each plot function returns an ``AttnkitFigure`` when no ``path`` is given (it displays
inline in Jupyter through ``_repr_png_``, with or without the inline backend; ``.save(path)``
writes it), or writes the figure atomically to ``path`` and returns the path.

    fig = plot_positional_encoding(50, 128)        # a figure (shown inline in a notebook)
    plot_positional_encoding(50, 128, "pe.png")    # -> Path("pe.png"), written atomically

Korean labels need a font with Hangul glyphs: the NanumGothic font shipped by the
``koreanize-matplotlib`` package (found, never imported: its import changes the global
rcParams) is made available to matplotlib's font manager and used for attnkit's figures only
(through ``matplotlib.rc_context`` while a figure is built and drawn), else any installed
CJK font. matplotlib is imported on the first plot: the Trainer and every task import this
module, and loading a run must stay quick.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import io
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from attnkit.core.checkpoint import temp_file_beside
from attnkit.core.errors import InputError
from attnkit.core.extras import needs
from attnkit.core.output_guard import cannot_write, check_output
from attnkit.core.params import check_pe_size
from attnkit.nn.layers import sinusoidal_encoding
from attnkit.runtime.run import RunDir, read_jsonl

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "check_output_path",
    "curve_rows",
    "draw_run_curves",
    "new_figure",
    "plot_attention",
    "plot_contributions",
    "plot_curves",
    "plot_positional_encoding",
    "save_figure",
]

_HANGUL_FONTS = ("NanumGothic", "Noto Sans CJK KR", "Noto Sans KR", "Malgun Gothic", "AppleGothic")
PathArg = str | os.PathLike


def _matplotlib() -> Any:
    """matplotlib, imported on the first plot (an optional dependency: the ``plot`` extra;
    missing, a one-line ``MissingExtraError`` naming its pip install)."""
    with needs("plot", "plotting"):
        import matplotlib
    return matplotlib


@functools.cache
def _font_family() -> tuple[str, ...]:
    """The font families of attnkit's figures: the first installed Hangul-capable font, then
    DejaVu Sans (matplotlib's default, for what it lacks); () when no Hangul font is found.
    NanumGothic from koreanize-matplotlib is added to matplotlib's font manager (which only
    makes it available; nothing the user draws changes)."""
    from matplotlib import font_manager

    spec = importlib.util.find_spec("koreanize_matplotlib")
    if spec is not None and spec.submodule_search_locations:
        font = Path(list(spec.submodule_search_locations)[0]) / "fonts" / "NanumGothic.ttf"
        if font.is_file():
            font_manager.fontManager.addfont(str(font))
    installed = {f.name for f in font_manager.fontManager.ttflist}
    chosen = tuple(name for name in _HANGUL_FONTS if name in installed)
    return (*chosen, "DejaVu Sans") if chosen else ()


@contextlib.contextmanager
def _style() -> Iterator[None]:
    """attnkit's fonts (Hangul-capable, ASCII minus signs) while one of its figures is built
    or drawn; the user's rcParams are restored on exit, whatever happens."""
    mpl = _matplotlib()
    rc: dict[str, Any] = {"axes.unicode_minus": False}
    family = _font_family()
    if family:
        rc["font.family"] = list(family)
    with mpl.rc_context(rc):
        yield


@functools.cache
def _figure_class() -> type[Figure]:
    """``AttnkitFigure``, defined on first use (its base class is matplotlib's)."""
    from matplotlib.figure import Figure

    class AttnkitFigure(Figure):
        """A matplotlib ``Figure`` of attnkit's, on its own Agg canvas (never registered with
        pyplot), drawn with attnkit's fonts. In Jupyter it displays inline as a PNG
        (``_repr_png_``); ``save(path)`` writes it atomically (png, svg, pdf, ...)."""

        def draw(self, renderer: Any) -> None:
            with _style():  # ticks made while drawing get the same fonts
                super().draw(renderer)

        def savefig(self, fname: Any, **kwargs: Any) -> None:
            with _style():
                super().savefig(fname, **kwargs)

        def _repr_png_(self) -> bytes:
            buf = io.BytesIO()
            self.savefig(buf, format="png", dpi=100, bbox_inches="tight")
            return buf.getvalue()

        def save(self, path: PathArg) -> Path:
            """Write the figure to ``path`` atomically (``save_figure``); returns the path."""
            return save_figure(self, path)

    AttnkitFigure.__module__ = __name__  # pickled by name: viz.AttnkitFigure (__getattr__)
    AttnkitFigure.__qualname__ = "AttnkitFigure"
    return AttnkitFigure


def __getattr__(name: str) -> Any:
    if name == "AttnkitFigure":
        return _figure_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def new_figure(figsize: tuple[float, float]) -> Figure:
    """An empty ``AttnkitFigure`` of ``figsize`` inches on its own ``FigureCanvasAgg``. Build it
    inside ``_style()`` so that its texts get attnkit's fonts."""
    _matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = _figure_class()(figsize=figsize)
    FigureCanvasAgg(fig)
    return fig


def _finish(fig: Figure, path: PathArg | None) -> Any:
    """``fig`` itself when ``path`` is None (to display or save later), else ``path`` once
    the figure is written there (``save_figure``)."""
    return fig if path is None else save_figure(fig, path)


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
    _matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if fmt not in FigureCanvasAgg.get_supported_filetypes():
        raise InputError(
            f"cannot write {path}: .{fmt} is not an image format (use .png, .svg, .pdf, ...)"
        )
    return path


def save_figure(fig: Figure, path: PathArg) -> Path:
    """Write ``fig`` to ``path`` atomically: into a temporary file of the same folder (a
    unique name per call), renamed over ``path`` once complete, so that ``path`` is never
    half-written. The folder must exist (``check_output_path``). The figure stays usable
    (it belongs to no pyplot state, so there is nothing to close)."""
    return _write_figure(fig, check_output_path(path))


def _write_figure(fig: Figure, path: Path) -> Path:
    """``fig`` written to ``path`` (already checked, or a run's own figure) atomically."""
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
    return path


def plot_positional_encoding(
    max_len: int = 50, d_model: int = 128, path: PathArg | None = None
) -> Figure | Path:
    """The course's figure: the (max_len x d_model) sinusoidal encoding as a heatmap
    (rows = positions, columns = embedding dimensions). Returns the figure, or with
    ``path`` the path it was written to. Sizes out of range (``attnkit.core.params``: each at
    most 8192, together at most 4,194,304 numbers) are an ``InputError``."""
    check_pe_size(max_len, d_model)
    pe = sinusoidal_encoding(max_len, d_model).numpy()  # (max_len, d_model)
    with _style():
        fig = new_figure((10, 4.5))
        ax = fig.add_subplot()
        mesh = ax.pcolormesh(pe, cmap="RdBu", vmin=-1, vmax=1)
        ax.set_xlabel("depth (embedding dimension i)")
        ax.set_ylabel("position (pos)")
        ax.set_xlim(0, d_model)
        ax.set_ylim(max_len, 0)
        ax.set_title(f"Sinusoidal positional encoding, max_len={max_len}, d_model={d_model}")
        fig.colorbar(mesh, ax=ax)
    return _finish(fig, path)


def plot_attention(
    weights: np.ndarray | Sequence,
    x_labels: Sequence[str],
    y_labels: Sequence[str],
    path: PathArg | None = None,
    title: str | None = None,
    x_title: str = "keys",
    y_title: str = "queries",
) -> Figure | Path:
    """Heatmap of one (Tq, Tk) attention matrix ``weights``: rows = queries (``y_labels``,
    Tq of them), columns = keys (``x_labels``, Tk). Returns the figure, or with ``path``
    the path it was written to."""
    w = np.asarray(weights, dtype=np.float32)
    if w.ndim != 2 or w.shape != (len(y_labels), len(x_labels)):
        raise ValueError(
            f"weights {w.shape} do not match labels ({len(y_labels)}, {len(x_labels)})"
        )
    size = (max(4.0, 0.45 * len(x_labels) + 2), max(3.0, 0.4 * len(y_labels) + 1.5))
    with _style():
        fig = new_figure(size)
        ax = fig.add_subplot()
        im = ax.imshow(w, cmap="viridis", vmin=0.0, vmax=max(float(w.max()), 1e-9), aspect="auto")
        ax.set_xticks(range(len(x_labels)), labels=list(x_labels), rotation=90)
        ax.set_yticks(range(len(y_labels)), labels=list(y_labels))
        ax.set_xlabel(x_title)
        ax.set_ylabel(y_title)
        if title:
            ax.set_title(title)
        fig.colorbar(im, ax=ax)
    return _finish(fig, path)


def plot_contributions(
    names: Sequence[str],
    values: Sequence[float],
    path: PathArg | None = None,
    title: str | None = None,
) -> Figure | Path:
    """Horizontal bars, one per feature (e.g. an n-gram), in the given order from the top:
    positive values (for the prediction) green, negative ones red. Returns the figure, or
    with ``path`` the path it was written to."""
    if len(names) != len(values):
        raise ValueError(f"{len(names)} names but {len(values)} values")
    with _style():
        fig = new_figure((7, max(2.5, 0.32 * len(names) + 1.2)))
        ax = fig.add_subplot()
        colors = ["tab:green" if v >= 0 else "tab:red" for v in values]
        ax.barh(range(len(names)), list(values), color=colors)
        ax.set_yticks(range(len(names)), labels=list(names))
        ax.invert_yaxis()
        ax.axvline(0.0, color="black", linewidth=0.8)
        ax.set_xlabel("contribution to the logit margin")
        if title:
            ax.set_title(title)
    return _finish(fig, path)


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


def curve_rows(source: Any) -> list[dict[str, Any]]:
    """The metrics.jsonl rows of ``source``: rows already read (a sequence of dicts), a run
    directory or a metrics.jsonl file (a path or a ``RunDir``), or anything with a
    ``run_dir`` (what ``attnkit.train`` returns, a loaded predictor)."""
    run_dir = getattr(source, "run_dir", None)
    if run_dir is not None:
        source = run_dir
    if isinstance(source, RunDir):
        source = source.path
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if path.is_dir():
            path = RunDir(path).metrics_path
        if not path.is_file():
            raise InputError(f"no metrics file at {path}")
        return read_jsonl(path)
    rows = list(source)
    if not all(isinstance(r, dict) for r in rows):
        raise InputError("plot_curves needs a run, a metrics.jsonl file or its rows (dicts)")
    return rows


def draw_run_curves(run: RunDir) -> Path:
    """A training's own figure: ``run``'s curves.png, redrawn from its metrics.jsonl. Only
    the training that owns ``run`` calls this (the output guard keeps every other writer
    out of a run); ``plot_curves(run, path)`` draws them anywhere else."""
    fig = plot_curves(run.read_metrics())
    return _write_figure(fig, run.curves_path)


def plot_curves(source: Any, path: PathArg | None = None) -> Figure | Path:
    """Learning curves (see ``curve_series``) of ``source``: metrics.jsonl rows or a run
    (``curve_rows``): losses on the left panel, metrics on the right (fractions on its left
    axis, other scores on a second one). Returns the figure, or with ``path`` the path it
    was written to."""
    losses, fractions, scores = curve_series(curve_rows(source))
    with _style():
        fig = new_figure((11, 4))
        left, right = fig.subplots(1, 2)
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
    return _finish(fig, path)

"""``attnkit.explain(run, text)``: the explorer page of one text as a Python object, for a
notebook (it renders inline) or a script (``.save(path)`` writes the offline page).

    ex = attnkit.explain("runs/nsmc-quick", "정말 재미있어요")
    ex                      # in Jupyter: the explorer, inline (a sandboxed iframe)
    ex.trace["view"]        # the numbers it shows (layout: attnkit.app.explain.schema)
    ex.save("explain.html") # the same page as `attnkit explain RUN TEXT --html FILE`
    ex.show()               # inline in a notebook; from a script: opened in the browser

The page is the one ``attnkit explain --html`` writes (``attnkit.app.explain.page``): its
script, style, data and Hangul glyphs are inline and its Content-Security-Policy forbids
every request, so it works offline, without a CDN. In a notebook it is shown in an
``<iframe sandbox="allow-scripts" srcdoc="...">``: its script runs in an opaque origin,
away from the notebook's own page.
"""

from __future__ import annotations

import html
import os
import tempfile
import webbrowser
from pathlib import Path
from typing import Any

from attnkit.app.api import load
from attnkit.app.explain.page import DEFAULT_BEAM, DEFAULT_STEPS, explain_traces, render_page
from attnkit.app.explain.page import write_page as _write_page
from attnkit.core.errors import InputError
from attnkit.core.output_guard import check_output
from attnkit.runtime.device import resolve_device
from attnkit.tasks.base import Predictor

__all__ = ["Explanation", "explain"]


class Explanation:
    """One text through a run, every step captured: ``traces`` (the data), the explorer
    page (``html``), shown inline by Jupyter (``_repr_html_``) and written by ``save``.

    traces: ``[(label, trace)]``: one trace, or for a seq2seq run with beam > 1 greedy
        decoding and beam search side by side (each trace a JSON-serialisable dict laid
        out as ``attnkit.app.explain.schema`` describes; arrays via ``decode_array``).
    height: the inline frame's height in CSS pixels.
    """

    def __init__(
        self, traces: list[tuple[str, dict[str, Any]]], text: str, height: int = 760
    ) -> None:
        if not traces:
            raise InputError("an explanation needs at least one trace")
        self.traces = traces
        self.text = text
        self.height = int(height)
        self._html: str | None = None

    @property
    def trace(self) -> dict[str, Any]:
        """The first (or only) trace: ``trace["view"]`` holds the prediction shown,
        ``trace["stacks"]`` every layer's captured attention."""
        return self.traces[0][1]

    @property
    def html(self) -> str:
        """The explorer page: one self-contained HTML document (rendered once)."""
        if self._html is None:
            self._html = render_page(self.traces)
        return self._html

    def save(self, path: str | os.PathLike) -> Path:
        """Write the page to ``path`` atomically, after the output-path guard's checks (as
        ``attnkit explain RUN TEXT --html FILE``); returns the path."""
        out = check_output(path, what="path")
        return _write_page(out, self.html)

    def show(self) -> Path | None:
        """Show the explorer: inline where IPython displays HTML (Jupyter, Colab, VS Code;
        returns None); elsewhere (a script, a terminal) the page is written to a new
        temporary folder and opened in the web browser (returns its path)."""
        try:
            from IPython import get_ipython
            from IPython.display import display
        except ImportError:  # no IPython: not a notebook
            shell = None
        else:
            shell = get_ipython()
        if shell is not None and type(shell).__name__ != "TerminalInteractiveShell":
            display(self)
            return None
        path = self.save(Path(tempfile.mkdtemp(prefix="attnkit-explain-")) / "explain.html")
        webbrowser.open(path.as_uri())
        return path

    def _repr_html_(self) -> str:
        """The page inline: a sandboxed iframe (scripts only: no same origin, no forms, no
        pop-ups, no navigation of the notebook) holding the page in ``srcdoc``."""
        run = self.trace.get("run") or self.trace.get("arch") or "run"
        title = html.escape(f"attnkit explain · {run}", quote=True)
        return (
            f'<iframe sandbox="allow-scripts" title="{title}" '
            f'style="width: 100%; height: {self.height}px; border: 1px solid #ddd; '
            f'resize: vertical;" srcdoc="{html.escape(self.html, quote=True)}"></iframe>'
        )

    def __repr__(self) -> str:
        labels = ", ".join(label for label, _ in self.traces)
        return (
            f"Explanation(run={self.trace.get('run')!r}, task={self.trace.get('task')!r}, "
            f"text={self.text!r}, traces=[{labels}])"
        )


def explain(
    run: Any,
    text: str,
    *,
    pair: str | None = None,
    beam: int = DEFAULT_BEAM,
    steps: int = DEFAULT_STEPS,
    temperature: float = 1.0,
    top_k: int = 0,
    seed: int | None = 0,
    max_tokens: int = 128,
    device: str = "cpu",
    height: int = 760,
    pad_to: int | None = None,
    target: str | None = None,
) -> Explanation:
    """Step ``text`` through ``run``'s forward pass: an ``Explanation`` that Jupyter shows as
    the inline explorer, with ``.save(path)`` and the captured data (``.trace``).

    run: a run directory, what ``attnkit.train`` returns (its ``run_dir``), or a predictor
        from ``attnkit.load`` (used as it is; a run is loaded in float32 on ``device``).
    pair: a sentence-pair classifier's second sentence; a qa run's context; a
        bert-pretrain run's sentence B (next-sentence prediction).
    beam: seq2seq runs: the beam shown beside greedy decoding (1: greedy only).
    steps, temperature, top_k, seed: lm runs: the tokens generated, one step each.
    max_tokens: a longer input is cut to this many tokens (a note on the page says so).
    pad_to: classify, mlm, tag, translate and chat runs: the text (a seq2seq run's source)
        padded with [PAD] to this many tokens, as in a batch beside a longer text (the
        course's "I am sam <pad>"): the padding mask hides them.
    target: translate / chat runs: a reference output, shown decoded with teacher forcing
        (the reference shifted right, as in training) beside the free decoding.
    """
    if isinstance(text, bool) or not isinstance(text, str) or not text.strip():
        raise InputError("explain needs a non-empty text (a string)")
    if not isinstance(height, int) or height < 100:
        raise InputError(f"height must be an integer >= 100 (pixels), got {height!r}")
    predictor = run
    if not isinstance(run, Predictor):
        run_dir = getattr(run, "run_dir", run)
        if not isinstance(run_dir, (str, os.PathLike)):
            raise InputError(
                "explain needs a run directory, attnkit.train's result or attnkit.load's "
                f"predictor, got {type(run).__name__}"
            )
        where = str(resolve_device(device, what="device"))
        predictor = load(run_dir, map_location=where, precision="fp32")
    traces = explain_traces(
        predictor,
        text,
        pair=pair,
        beam=beam,
        steps=steps,
        temperature=temperature,
        top_k=top_k,
        seed=seed,
        max_tokens=max_tokens,
        pad_to=pad_to,
        target=target,
    )
    return Explanation(traces, text, height=height)

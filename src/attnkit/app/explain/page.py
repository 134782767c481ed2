"""The explorer page: one or more traces (``attnkit.app.explain.schema``) rendered into one
self-contained HTML page: the script, the style, the data and the glyphs of the Hangul it
shows are all inline, so the file works offline, opened from disk, and the page makes no
request at all (its Content-Security-Policy forbids every one; a served page may ask its
own server for a new text, and nothing else).

    html = render_page(trace(run, "정말 재미있어요"))              # a fixed page
    html = render_page([("greedy", t1), ("beam 4", t2)])           # a picker between them
    html, csp = served_page(t, {"endpoint": "/v1/explain", "model": "nsmc"})  # served
    write_page("explain.html", html)                               # atomically

The page's parts live in ``static/`` (explain.html, explain.css and the script: plain DOM,
canvas and SVG, no framework). The script is several files, ``SCRIPTS``, joined in that
order into the page's one inline script (one top-level scope, one CSP hash).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import html
import importlib.util
import io
import json
import logging
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from attnkit.app.explain.schema import SCHEMA_VERSION
from attnkit.app.explain.trace import DEFAULT_BUDGET, family_of, trace
from attnkit.core.checkpoint import atomic_write_text
from attnkit.core.errors import InputError

__all__ = [
    "DEFAULT_BEAM",
    "DEFAULT_STEPS",
    "SCRIPTS",
    "STATIC",
    "explain_traces",
    "page_csp",
    "render_page",
    "served_page",
    "write_page",
]

DEFAULT_STEPS = 8  # lm runs: the tokens generated, one step each
DEFAULT_BEAM = 4  # seq2seq runs: the beam shown beside greedy decoding

STATIC = Path(__file__).parent / "static"
# the page's script, in static/: joined in this order into its one inline <script>
SCRIPTS = (
    "explain-base.js",  # state, decoding the arrays, DOM and language helpers, lookups
    "explain-draw.js",  # colours, heatmaps and legends, SVG axes, bars
    "explain-input.js",  # sections 1-2: input tokens, embeddings
    "explain-attention.js",  # sections 3-4: one head step by step, every head
    "explain-residual.js",  # section 5: residual stream, FFN, Add & Norm
    "explain-families.js",  # section 6: each family's view (the FAMILIES table)
    "explain-main.js",  # header, notes, tour, the served page's form, wiring, start
)
KOREAN_FONT_FAMILY = "attnkit-ko"
# the Hangul blocks (jamo, compatibility jamo, syllables): the characters the page draws
# with its inline subset of NanumGothic when no Korean system font has them
_HANGUL = re.compile("[\u1100-\u11ff\u3130-\u318f\ua960-\ua97f\uac00-\ud7af\ud7b0-\ud7ff]")


@functools.cache
def _asset(name: str) -> str:
    return (STATIC / name).read_text(encoding="utf-8")


@functools.cache
def _script() -> str:
    """The page's script: the files of ``SCRIPTS``, in order, as one."""
    return "\n".join(_asset(name) for name in SCRIPTS)


def _labelled(traces: Any) -> list[dict[str, Any]]:
    """A trace, or (label, trace) pairs -> [{"label", "trace"}], each trace checked."""
    if isinstance(traces, Mapping):
        traces = [("", traces)]
    items = [{"label": str(label), "trace": t} for label, t in traces]
    if not items:
        raise InputError("render_page needs at least one trace")
    for item in items:
        schema = item["trace"].get("schema") if isinstance(item["trace"], Mapping) else None
        if schema != SCHEMA_VERSION:
            raise InputError(f"not an explain trace of {SCHEMA_VERSION} (schema {schema!r})")
        item["label"] = item["label"] or item["trace"].get("family", "trace")
    return items


def _strings(value: Any) -> list[str]:
    """Every string inside a JSON-like value (the array data left out)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        if "data" in value and "dtype" in value:  # an Array: base64 only
            return []
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _strings(v)]
    return []


def hangul_of(values: Sequence[Any]) -> str:
    """The distinct Hangul characters of the strings inside ``values`` (traces: their texts
    and tokens, not their arrays), sorted."""
    found = {c for v in values for s in _strings(v) for c in _HANGUL.findall(s)}
    return "".join(sorted(found))


def _korean_font_path() -> Path | None:
    """NanumGothic.ttf as koreanize-matplotlib ships it (a dependency; found, not imported:
    importing it would reconfigure matplotlib), or None."""
    spec = importlib.util.find_spec("koreanize_matplotlib")
    folders = list(spec.submodule_search_locations or []) if spec else []
    path = Path(folders[0]) / "fonts" / "NanumGothic.ttf" if folders else None
    return path if path is not None and path.is_file() else None


@functools.lru_cache(maxsize=32)
def korean_font_subset(chars: str) -> bytes:
    """NanumGothic (SIL OFL) cut down to ``chars``, as WOFF: a few kB for the Hangul of one
    text, small enough to carry inline (the whole font is 4.7 MB). Empty bytes when the
    font is not installed. Its VTT source tables, which Chromium's font sanitizer refuses,
    are dropped by the subsetter."""
    path = _korean_font_path()
    if not chars or path is None:
        return b""
    from fontTools import subset  # (fontTools comes with matplotlib)
    from fontTools.ttLib import TTFont

    options = subset.Options()
    options.flavor = "woff"
    options.layout_features = []
    options.name_IDs = [1, 2]
    options.notdef_outline = True
    quiet = logging.getLogger("fontTools.subset")  # its notes on the tables it drops:
    level = quiet.level  # silenced while subsetting only (the user's logging is theirs)
    quiet.setLevel(logging.ERROR)
    try:
        font = TTFont(path, lazy=True)
        subsetter = subset.Subsetter(options)
        subsetter.populate(text=chars)
        subsetter.subset(font)
        out = io.BytesIO()
        font.flavor = "woff"
        font.save(out)
    finally:
        quiet.setLevel(level)
    return out.getvalue()


def _font_face(chars: str, served: bool) -> str:
    """The @font-face rules of the page's Korean fallback font: the inline subset for the
    Hangul of its traces; a served page also names the server's whole font (for text typed
    later), which the browser fetches only for a glyph the subset lacks."""
    rules = []
    data = korean_font_subset(chars)
    ranges = "unicode-range: U+1100-11FF, U+3130-318F, U+A960-A97F, U+AC00-D7AF, U+D7B0-D7FF;"
    if data:
        b64 = base64.b64encode(data).decode("ascii")
        rules.append(
            f'@font-face {{ font-family: "{KOREAN_FONT_FAMILY}"; '
            f'src: url(data:font/woff;base64,{b64}) format("woff"); {ranges} }}'
        )
    if served:
        rules.append(
            f'@font-face {{ font-family: "{KOREAN_FONT_FAMILY}-all"; src: local("NanumGothic"), '
            f'url("/fonts/NanumGothic.ttf") format("truetype"); {ranges} font-display: swap; }}'
        )
    return "\n".join(rules)


def _sha256(text: str) -> str:
    return (
        "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"
    )


def page_csp(script: str, style: str, served: bool) -> str:
    """The page's Content-Security-Policy: only its own inline script and style (by hash),
    inline fonts and images; no request at all from a file, only to its own server
    (``'self'``) from a served page."""
    fonts = "data: 'self'" if served else "data:"
    connect = "'self'" if served else "'none'"
    return (
        f"default-src 'none'; script-src {_sha256(script)}; style-src {_sha256(style)}; "
        f"font-src {fonts}; img-src data:; connect-src {connect}; base-uri 'none'; "
        "form-action 'none'"
    )


def _json_for_script(value: Any) -> str:
    """JSON that is safe inside a <script type="application/json"> element: no "</" or
    "<!--" can end it ("<" is written as \\u003c, valid JSON inside strings)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c")


def explain_traces(
    predictor: Any,
    text: str,
    *,
    pair: str | None = None,
    beam: int = DEFAULT_BEAM,
    steps: int = DEFAULT_STEPS,
    temperature: float = 1.0,
    top_k: int = 0,
    seed: int | None = 0,
    max_tokens: int = 128,
    pad_to: int | None = None,
    target: str | None = None,
) -> list[tuple[str, dict[str, Any]]]:
    """The traces the page shows for one text, as ``(label, trace)`` pairs: one trace; for a
    seq2seq run with ``beam`` > 1, greedy decoding and beam search side by side. ``steps``,
    ``temperature``, ``top_k`` and ``seed`` are an lm run's generation; ``pair`` a BERT
    sentence-pair classifier's second sentence, a qa run's context or a bert-pretrain
    run's sentence B (next-sentence prediction); ``pad_to`` pads the text with [PAD] as a
    batch would; ``target`` is a translate / chat run's reference output (teacher
    forcing) (``attnkit.app.explain.trace``)."""
    family = family_of(predictor)
    nsp = family == "mlm" and predictor.can("next_sentence")
    if pair is not None and family not in ("classifier", "qa") and not nsp:
        raise InputError("a second sentence is read only by sentence-pair classifiers, qa runs "
                         "(the context) and bert-pretrain runs (next-sentence prediction)")  # fmt: skip
    if target is not None and family != "seq2seq":
        raise InputError("a reference target (teacher forcing) is read only by translate / "
                         "chat runs")  # fmt: skip
    options: dict[str, Any] = {"pair": pair, "max_tokens": max_tokens}
    if target is not None:
        options["target"] = target
    if pad_to is not None:
        options["pad_to"] = pad_to
    if family == "lm":
        options.update(steps=steps, temperature=temperature, top_k=top_k, seed=seed)
    if family != "seq2seq":
        return [(family, trace(predictor, text, **options))]
    # one page holds both traces: each gets half of the page's budget for arrays
    options["budget_bytes"] = DEFAULT_BUDGET // (2 if beam > 1 else 1)
    out = [("greedy", trace(predictor, text, beam=1, **options))]
    if beam > 1:
        out.append((f"beam {beam}", trace(predictor, text, beam=beam, **options)))
    return out


def render_page(
    traces: Mapping[str, Any] | Sequence[tuple[str, Mapping[str, Any]]],
    *,
    title: str | None = None,
) -> str:
    """The explorer page of ``traces`` (one trace, or ``(label, trace)`` pairs the page
    offers as alternatives, e.g. greedy and beam decoding of one text) as one HTML string:
    a fixed page (a file: the text cannot change, every control works on the numbers it
    holds, and its Content-Security-Policy forbids every request)."""
    return _render(_labelled(traces), None, title)[0]


def served_page(
    traces: Mapping[str, Any] | Sequence[tuple[str, Mapping[str, Any]]],
    api: Mapping[str, Any],
    *,
    title: str | None = None,
    error: str | None = None,
) -> tuple[str, str]:
    """The page ``attnkit serve`` answers, and its Content-Security-Policy (to send as a
    header too). ``api``: ``{"endpoint": "/v1/explain", "model": NAME, "pairs": bool}``:
    the page posts new texts there (the only request it may make) and draws the traces
    it answers. ``error``: why the run refused the text (then ``traces`` may be empty and
    ``api`` also carries the ``text``, ``pair`` and ``family``): the page shows the message
    and the form, to type another text."""
    api = dict(api)
    if error is not None:
        api["error"] = str(error)
        if not traces:
            return _render([], api, title)
    return _render(_labelled(traces), api, title)


def _render(
    items: list[dict[str, Any]], api: dict[str, Any] | None, title: str | None
) -> tuple[str, str]:
    first = items[0]["trace"] if items else {}
    served = api is not None
    name = first.get("run") or first.get("arch", "") or (api or {}).get("model", "")
    title = title or f"attnkit explain · {name}"
    script = "\n" + _script() + "\n"
    # the Hangul of the traces (a refused page: its text), and of the page's own labels
    chars = hangul_of([i["trace"] for i in items] + [api or {}, _asset("explain.html"),
                      _script()])  # fmt: skip
    style = "\n" + _font_face(chars, served) + "\n" + _asset("explain.css") + "\n"
    csp = page_csp(script, style, served)
    parts = {
        "CSP": html.escape(csp, quote=True),
        "TITLE": html.escape(title),
        "STYLE": style,
        "SCRIPT": script,
        "DATA": _json_for_script({"traces": items, "api": api}),
    }
    # one pass: a placeholder spelt inside the data or the script is left as it is
    page = re.sub(
        r"\{\{([A-Z]+)\}\}", lambda m: parts.get(m.group(1), m.group(0)), _asset("explain.html")
    )
    return page, csp


def write_page(path: str | os.PathLike, page: str) -> Path:
    """Write ``page`` to ``path`` atomically (a temporary file beside it, then renamed):
    ``path`` is never half-written. Check ``path`` first with
    ``attnkit.core.output_guard.check_output``."""
    return atomic_write_text(path, page)

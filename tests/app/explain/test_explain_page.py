"""The explorer page as HTML (issue 34): ``attnkit.app.explain.page``. One self-contained
file: the trace embedded as it is (any text, even one that spells ``</script>``), the script
and style inline and allowed by hash, no request possible from a file (its CSP), a served
page allowed only its own server, and the Hangul it shows drawn by an inline font subset.
What the page displays in a browser: tests/app/explain/test_explain_browser.py."""

from __future__ import annotations

import base64
import hashlib
import html
import io
import json
import re
from pathlib import Path

import pytest

import attnkit
from attnkit.app.explain import trace
from attnkit.app.explain.page import (
    explain_traces,
    hangul_of,
    korean_font_subset,
    render_page,
    served_page,
    write_page,
)
from attnkit.core.errors import InputError

LEGACY = Path(__file__).parents[2] / "fixtures" / "legacy_runs"
TEXT = "최악 영화 정말 the movie"


@pytest.fixture(scope="module")
def clf():
    return attnkit.load(LEGACY / "classify-transformer", precision="fp32")


@pytest.fixture(scope="module")
def one(clf) -> dict:
    return trace(clf, TEXT)


def payload(page: str) -> dict:
    """The JSON the page carries (what its script reads)."""
    found = re.search(r'<script type="application/json" id="trace-data">(.*?)</script>', page, re.S)
    assert found, "no trace data in the page"
    return json.loads(found.group(1))


def inline(page: str, tag: str) -> list[str]:
    return re.findall(rf"<{tag}>(.*?)</{tag}>", page, re.S)


def csp_of(page: str) -> str:
    found = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)">', page)
    assert found, "no Content-Security-Policy"
    return html.unescape(found.group(1))


def sha(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def test_the_trace_is_embedded_as_it_is(one) -> None:
    page = render_page(one)
    data = payload(page)
    assert data["api"] is None  # a fixed page: the text cannot change
    (item,) = data["traces"]
    assert item["label"] == "classifier"
    assert item["trace"] == json.loads(json.dumps(one))
    assert "<title>attnkit explain · classify-transformer</title>" in page


def test_one_file_that_can_make_no_request(one) -> None:
    page = render_page(one)
    (script,) = inline(page, "script")
    (style,) = inline(page, "style")
    policy = csp_of(page)
    assert f"script-src {sha(script)}" in policy and f"style-src {sha(style)}" in policy
    assert "default-src 'none'" in policy and "connect-src 'none'" in policy
    assert "font-src data:;" in policy  # only the inline font
    # nothing is loaded from anywhere: no src/href to a URL, no stylesheet link, no url(http
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert '<link rel="stylesheet"' not in page and not re.search(r"url\(\s*['\"]?http", page)
    assert page.count("<script") == 2  # the data and the inline script


def test_served_page_may_ask_its_own_server_only(one) -> None:
    page, header = served_page([("classifier", one)], {"endpoint": "/v1/explain", "model": "m"})
    assert header == csp_of(page)
    assert "connect-src 'self'" in header and "font-src data: 'self'" in header
    assert payload(page)["api"] == {"endpoint": "/v1/explain", "model": "m"}
    assert 'url("/fonts/NanumGothic.ttf")' in page  # Hangul typed later: the server's font


@pytest.mark.filterwarnings("ignore:input 1 is longer")
def test_any_text_stays_data(clf) -> None:
    nasty = '</script><script>alert(1)</script> {{SCRIPT}} <!-- "quotes" & 한글'
    t = trace(clf, nasty)
    page = render_page(t, title="</title><b>x")
    assert page.count("<script") == 2 and "alert(1)</script>" not in page
    assert payload(page)["traces"][0]["trace"]["text"] == nasty
    assert "<title>&lt;/title&gt;&lt;b&gt;x</title>" in page


def test_hangul_is_drawn_by_an_inline_subset(one) -> None:
    from fontTools.ttLib import TTFont

    chars = hangul_of([one])
    assert set("최악영화정말") <= set(chars) and "t" not in chars
    font = korean_font_subset(chars)
    assert 0 < len(font) < 60_000  # the whole NanumGothic is 4.7 MB
    cmap = TTFont(io.BytesIO(font)).getBestCmap()
    assert all(ord(c) in cmap for c in chars)
    page = render_page(one)
    found = re.search(r"url\(data:font/woff;base64,([A-Za-z0-9+/=]+)\)", page)
    assert found, "no inline font"
    cmap = TTFont(io.BytesIO(base64.b64decode(found.group(1)))).getBestCmap()
    assert all(ord(c) in cmap for c in "최악영화정말입력토큰")  # the page's own labels too


@pytest.mark.slow
def test_a_seq2seq_run_shows_greedy_and_beam_side_by_side() -> None:
    mt = attnkit.load(LEGACY / "translate-transformer", precision="fp32")
    got = explain_traces(mt, "ein mann", beam=3)
    assert [label for label, _ in got] == ["greedy", "beam 3"]
    assert [t["view"]["search"] for _, t in got] == ["greedy", "beam"]
    assert got[0][1]["view"]["output_text"] == mt.translate(["ein mann"])[0]
    assert got[1][1]["view"]["output_text"] == mt.translate(["ein mann"], beam=3)[0]
    assert [label for label, _ in explain_traces(mt, "ein mann", beam=1)] == ["greedy"]
    data = payload(render_page(got))
    assert [i["label"] for i in data["traces"]] == ["greedy", "beam 3"]


def test_refusals(clf, one, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="explain trace"):
        render_page({"schema": "something else"})
    with pytest.raises(InputError, match="at least one"):
        render_page([])
    with pytest.raises(InputError, match="sentence-pair"):
        explain_traces(attnkit.load(LEGACY / "translate-transformer"), "x", pair="y")
    path = write_page(tmp_path / "page.html", render_page(one))
    assert path.read_text(encoding="utf-8").startswith("<!doctype html>")
    assert [p.name for p in tmp_path.iterdir()] == ["page.html"]  # no temporary file left


def test_the_font_subset_leaves_fonttools_logging_as_it_was() -> None:
    """Silencing fontTools' notes is for the subset only: the user's level comes back."""
    import logging

    quiet = logging.getLogger("fontTools.subset")
    before = quiet.level
    try:
        quiet.setLevel(logging.INFO)
        font = korean_font_subset("곰돌이푸")  # (uncached: characters no other test uses)
        assert quiet.level == logging.INFO
    finally:
        quiet.setLevel(before)
    if not font:
        pytest.skip("NanumGothic (koreanize-matplotlib) is not installed: nothing subset")


def test_every_font_list_of_the_page_ends_in_its_korean_font() -> None:
    """A machine without a Korean system font draws Hangul with the page's inline subset
    ("attnkit-ko"): every font-family the page's CSS sets must name it, or the Korean of a
    formula or a command shows as empty boxes."""
    from attnkit.app.explain.page import STATIC

    css = (STATIC / "explain.css").read_text(encoding="utf-8")
    families = re.findall(r"font-family:\s*([^;]+);", css)
    assert len(families) >= 3
    for family in families:
        assert '"attnkit-ko"' in family, family

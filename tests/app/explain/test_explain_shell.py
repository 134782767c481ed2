"""The explorer page's shell (issue 39) in a real browser: the language of its notes (the
browser's by default, the switch), the heatmaps' axes and colour bars (the PNGs' colour
maps), no horizontal overflow at phone width on any family's page, an empty text on the
served page, and the guided start (#tour) in the course's lecture order.

Skipped, with the reason printed, when Playwright or a Chromium binary is missing."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.error import HTTPError
from urllib.request import Request, urlopen

import numpy as np
import pytest
import yaml

import attnkit
from attnkit.app.explain import decode_array
from browser_support import served

sync_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (make test installs it)"
)
uvicorn = pytest.importorskip("uvicorn")

from explain_support import CHROMIUM, WHY_NOT, traces_of, write  # noqa: E402

pytestmark = [pytest.mark.skipif(CHROMIUM is None, reason=WHY_NOT), pytest.mark.slow]

LEGACY = Path(__file__).parents[2] / "fixtures" / "legacy_runs"
HANGUL = re.compile("[\uac00-\ud7af]")
LECTURES = ["000", "001", "002", "003", "004"]


# --------------------------------------------------------------------------------------
# pages
# --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def bilm_run(tmp_path_factory) -> Path:
    """A tiny ELMo biLM (seconds)."""
    from conftest import make_sentiment_rows

    root = tmp_path_factory.mktemp("shell-bilm")
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(r["text"] for r in make_sentiment_rows(200, seed=5)) + "\n",
                      encoding="utf-8")  # fmt: skip
    recipe = {
        "task": "bilm",
        "data": {"name": "file", "train": str(corpus), "val_fraction": 0.1, "max_len": 12},
        "tokenizer": {"kind": "wordpiece", "vocab_size": 120, "min_frequency": 1},
        "model": {"arch": "elmo", "d_model": 16, "hidden_size": 16, "num_layers": 2,
                  "dropout": 0.0},
        "training": {"epochs": 1, "batch_size": 16, "lr": 1e-2, "log_every": 5,
                     "progress": False, "num_threads": 1},
    }  # fmt: skip
    (root / "bilm.yaml").write_text(yaml.safe_dump(recipe), encoding="utf-8")
    attnkit.train(root / "bilm.yaml", out=root / "bilm", log=lambda *_: None)
    return root / "bilm"


@pytest.fixture(scope="module")
def pages(tmp_path_factory, served_runs, bilm_run) -> dict[str, Path]:
    """One page per family (English texts: a note in Hangul is then the page's Korean)."""
    out = tmp_path_factory.mktemp("shell-pages")
    return {
        "classifier": write(LEGACY / "classify-transformer", "the movie was great",
                            out / "clf.html"),
        "lm": write(served_runs["verse"], "First", out / "lm.html", "--steps", "4"),
        "seq2seq": write(LEGACY / "translate-transformer", "ein mann fährt fahrrad",
                         out / "s2s.html"),
        "lstm": write(LEGACY / "chat-lstm", "hello there how are you", out / "lstm.html"),
        "mlm": write(LEGACY / "mlm", "the [MASK] was great", out / "mlm.html"),
        "bilm": write(bilm_run, "the movie was great", out / "bilm.html"),
    }  # fmt: skip


class Page:
    """A page opened in its own browser context (locale, viewport), recording its requests
    and script errors; ``close()`` asserts there were none."""

    def __init__(self, browser, url: str, locale: str = "en-US", width: int = 1100) -> None:
        self.context = browser.new_context(locale=locale,
                                           viewport={"width": width, "height": 844})  # fmt: skip
        self.page = self.context.new_page()
        self.page.set_default_timeout(30_000)
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.open(url)

    def open(self, url: str) -> None:
        self.page.goto(url)
        self.page.wait_for_selector("body[data-ready=true]")

    def close(self) -> None:
        assert not self.errors, self.errors
        self.context.close()


# the visible notes of the parts of the page this shell owns: header, tour, sections 1-2,
# footer (innerText: what is displayed, the other language's spans left out)
VISIBLE_NOTES = """() => {
  const out = [];
  const shown = (e) => e.getClientRects().length > 0;
  for (const e of document.querySelectorAll(
      "header .note, #tour .note, #input .note, #embed .note, #emb-formula, #notes li, footer")) {
    if (shown(e)) out.push([e.id || e.tagName.toLowerCase(), e.innerText.trim()]);
  }
  return out;
}"""


def assert_notes_in(page, lang: str) -> None:
    notes = page.evaluate(VISIBLE_NOTES)
    assert len(notes) >= 5, notes  # fixed-note, tour, input, pe-note, formula, footer ...
    for where, text in notes:
        assert text, f"an empty note: {where}"
        if lang == "ko":
            assert HANGUL.search(text), f"{where} is not in Korean: {text!r}"
        else:
            assert not HANGUL.search(text), f"{where} is not in English: {text!r}"


# --------------------------------------------------------------------------------------
# 1 language
# --------------------------------------------------------------------------------------
def test_language_follows_the_browser_and_the_switch(browser, pages) -> None:
    url = pages["classifier"].as_uri()
    ko = Page(browser, url, locale="ko-KR")
    page = ko.page
    assert page.evaluate("document.documentElement.lang") == "ko"
    assert page.input_value("#lang") == "ko"
    assert_notes_in(page, "ko")
    assert "드롭아웃" in page.inner_text("#notes")  # the trace's English note, in Korean
    assert HANGUL.search(page.inner_text("#tour summary"))
    # the switch: English everywhere, and kept for the next page of this browser
    page.select_option("#lang", "en")
    assert page.evaluate("document.documentElement.lang") == "en"
    assert_notes_in(page, "en")
    ko.open(url)
    assert page.evaluate("document.documentElement.lang") == "en"
    ko.close()
    en = Page(browser, url, locale="en-US")
    assert en.page.evaluate("document.documentElement.lang") == "en"
    assert_notes_in(en.page, "en")
    assert en.page.inner_text("#fixed-note").startswith("This file holds one text")
    en.page.select_option("#lang", "ko")
    assert_notes_in(en.page, "ko")
    en.close()


# --------------------------------------------------------------------------------------
# 2 heatmaps: axes, colour bars, the PNGs' colours
# --------------------------------------------------------------------------------------
LEGENDS = """() => [...document.querySelectorAll("canvas")]
  .filter((c) => c.getClientRects().length > 0)
  .map((c) => {
    const grid = c.closest(".model-view, [data-legend-group]");
    const legend = (grid || c).nextElementSibling;
    const ok = legend && legend.classList.contains("hm-legend");
    return {
      canvas: c.id || c.dataset.map || c.dataset.name || c.className, off: c.dataset.legend === "off",
      legend: ok,
      axes: ok && legend.querySelector(".hm-axes") ? legend.querySelector(".hm-axes").innerText : "",
      numbers: ok ? [...legend.querySelectorAll(".cbar .cbar-num")].map((n) => n.innerText) : [],
      visible: ok && legend.getClientRects().length > 0,
    };
  })"""


@pytest.mark.parametrize("family", ["classifier", "seq2seq"])
def test_every_heatmap_has_axes_and_a_colour_bar(browser, pages, family) -> None:
    o = Page(browser, pages[family].as_uri())
    found = o.page.evaluate(LEGENDS)
    names = {f["canvas"] for f in found}
    assert {"pe-map", "weights-map", "scores-map", "mask-map"} <= names, names
    if family == "seq2seq":
        assert "s2s-align" in names
    for f in found:
        assert f["legend"] and f["visible"], f
        assert "↓" in f["axes"] and "→" in f["axes"], f
        numbers = [n for n in f["numbers"] if n]
        assert len(numbers) >= 2, f
        for n in numbers:
            float(n)  # each end of the bar is a number
    # the weights' bar: 0 .. the colour scale's max, as the PNG (viridis, vmin 0)
    weights = next(f for f in found if f["canvas"] == "weights-map")
    assert float(weights["numbers"][0]) == 0
    pe = next(f for f in found if f["canvas"] == "pe-map")
    assert [float(x) for x in pe["numbers"]] == [-1, 1]  # sinusoidal: -1..1, as viz's PE plot
    # Korean axes in the Korean view
    o.page.select_option("#lang", "ko")
    assert "쿼리" in o.page.locator("#weights-map + .hm-legend .hm-axes").inner_text()
    o.close()


def test_the_svg_axis_helper(browser, pages) -> None:
    """svgAxes (for SVG charts such as section 5's): numbered ticks from min to max and a
    title per axis in the page's language."""
    o = Page(browser, pages["classifier"].as_uri(), locale="ko-KR")
    got = o.page.evaluate("""() => {
      const chart = svg("svg", { width: 300, height: 200 });
      document.body.append(chart);
      svgAxes(chart, { x: 60, top: 20, bottom: 180, right: 290, max: 16, ticks: 4,
                       yTitle: ["‖x‖ (length)", "‖x‖ (길이)"], xTitle: ["stage", "단계"] });
      const ticks = [...chart.querySelectorAll("text.tick")].map((t) => [t.textContent, Number(t.getAttribute("y"))]);
      const titles = [...chart.querySelectorAll("text.axis-title")].map((t) =>
        [...t.querySelectorAll("tspan")].filter((s) => s.getClientRects().length).map((s) => s.textContent).join(""));
      return { ticks, titles };
    }""")
    assert [t for t, _ in got["ticks"]] == ["0", "4.00", "8.00", "12.0", "16.0"]
    ys = [y for _, y in got["ticks"]]
    assert ys == sorted(ys, reverse=True)  # 0 at the bottom, max at the top
    assert got["titles"] == ["‖x‖ (길이)", "단계"]
    o.close()


PIXEL = """([selector, i, j]) => {
  const c = document.querySelector(selector);
  const d = c.dataset;
  const x = Number(d.x0) + j * Number(d.cw) + 3;
  const y = Number(d.y0) + i * Number(d.ch) + 3;
  return { rgb: [...c.getContext("2d").getImageData(x, y, 1, 1).data.slice(0, 3)],
           vmin: Number(d.vmin), vmax: Number(d.vmax), cw: Number(d.cw), ch: Number(d.ch) };
}"""


def assert_colour(got: list[int], cmap_name: str, t: float) -> None:
    """``got`` is matplotlib's ``cmap_name`` at ``t`` (0..1), give or take one of its 256
    steps (the value at a step's boundary, in float16 here and float32 there)."""
    import matplotlib

    cmap = matplotlib.colormaps[cmap_name]
    k = min(255, int(np.clip(t, 0, 1) * 256))
    near = [np.round(np.array(cmap(i)[:3]) * 255) for i in range(max(0, k - 1), min(256, k + 2))]
    assert any(np.abs(np.array(got) - c).max() <= 2 for c in near), (got, near[1 if k else 0], t)


def test_a_cells_colour_is_the_pngs(browser, pages) -> None:
    (t,) = traces_of(pages["classifier"])
    o = Page(browser, pages["classifier"].as_uri())
    page = o.page
    page.select_option("#pick-query", "0")
    # weights: viridis over 0..max (attnkit.runtime.viz.plot_attention)
    att = t["stacks"][0]["layers"][0]["attention"][0]
    w = decode_array(att["weights"])[0]  # head 0: (T, T)
    for i, j in [(1, 0), (2, 1), (w.shape[0] - 1, w.shape[1] - 1), (1, w.shape[1] - 1),
                 (1, int(np.argmax(w[1]))), (1, int(np.argmin(w[1])))]:  # fmt: skip
        px = page.evaluate(PIXEL, ["#weights-map", i, j])
        assert px["vmin"] == 0 and px["cw"] >= 8 and px["ch"] >= 8, px
        assert_colour(px["rgb"], "viridis", float(w[i, j]) / px["vmax"])
    # the positional encoding: RdBu over -1..1 (viz.plot_positional_encoding), a row of a
    # position beyond the text (no outline) and one of its own
    pos = t["embeddings"][0]["position"]
    table = decode_array(pos["table"] if pos.get("table") else pos["rows"])
    rows = [table.shape[0] - 1, 0] if pos.get("table") else [0]
    for i in rows:
        for j in (0, 1, table.shape[1] // 2):
            px = page.evaluate(PIXEL, ["#pe-map", i, j])
            if px["ch"] < 6:
                continue  # too thin to read a pixel clear of the outlines
            assert (px["vmin"], px["vmax"]) == (-1, 1)
            assert_colour(px["rgb"], "RdBu", (float(table[i, j]) + 1) / 2)
    o.close()


# --------------------------------------------------------------------------------------
# 3 phone width
# --------------------------------------------------------------------------------------
OVERFLOW = """() => {
  const view = document.getElementById("head-view");
  const out = { scrollWidth: document.documentElement.scrollWidth, clipped: [], box: null };
  if (view && view.getClientRects().length) {
    const r = view.getBoundingClientRect();
    for (const t of view.querySelectorAll("text")) {
      const b = t.getBoundingClientRect();
      if (b.width && (b.right > r.right + 0.5 || b.left < r.left - 0.5)) out.clipped.push(t.textContent);
    }
    const box = view.closest(".scroll");
    out.box = box ? { overflow: getComputedStyle(box).overflowX, scroll: box.scrollWidth,
                      client: box.clientWidth, svg: Math.round(r.width) } : null;
  }
  return out;
}"""


@pytest.mark.parametrize("family", ["classifier", "lm", "seq2seq", "lstm", "mlm", "bilm"])
def test_no_horizontal_overflow_at_phone_width(browser, pages, family) -> None:
    for locale in ("en-US", "ko-KR"):
        o = Page(browser, pages[family].as_uri(), locale=locale, width=390)
        got = o.page.evaluate(OVERFLOW)
        assert got["scrollWidth"] <= 390, (locale, got)
        assert not got["clipped"], got  # every token of the head view inside the SVG
        if got["box"] is not None:  # a head view wider than the phone scrolls in its box
            assert got["box"]["overflow"] in ("auto", "scroll"), got
            assert got["box"]["scroll"] >= got["box"]["svg"], got
        o.close()


# --------------------------------------------------------------------------------------
# 4 an empty text on the served page
# --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def url():
    specs = [f"clf={LEGACY / 'classify-transformer'}", f"tr={LEGACY / 'translate-transformer'}"]
    with served(specs) as base:
        yield base


@pytest.mark.parametrize("locale", ["en-US", "ko-KR"])
def test_an_empty_text_says_so_and_asks_nothing(browser, url, locale) -> None:
    o = Page(browser, f"{url}/explain/clf?text=good", locale=locale)
    page = o.page
    for empty in ("", "   \n "):
        before = len(o.requests)
        page.fill("#ask-text", empty)
        page.click("#ask-btn")
        page.wait_for_selector("#error:not([hidden])")
        message = o.page.inner_text("#error")
        assert message.strip(), "no message"
        if locale == "ko-KR":
            assert "문장이 비어" in message
        else:
            assert "The text is empty" in message
        assert not any("/v1/explain" in u for u in o.requests[before:]), o.requests
        assert page.evaluate("document.body.dataset.renders") == "1"  # nothing redrawn
    # a text again: the message goes, the page is redrawn
    page.fill("#ask-text", "bad")
    page.click("#ask-btn")
    page.wait_for_selector("body[data-renders='2'][data-ready=true]")
    assert not page.is_visible("#error")
    o.close()


@pytest.mark.parametrize("model", ["clf", "tr"])
def test_the_server_refuses_an_empty_text_in_one_line(url, model) -> None:
    for empty in ("", "  "):
        request = Request(f"{url}/v1/explain", headers={"Content-Type": "application/json"},
                          data=json.dumps({"model": model, "text": empty}).encode())  # fmt: skip
        with pytest.raises(HTTPError) as caught:
            urlopen(request)
        assert 400 <= caught.value.code < 500
        message = json.load(caught.value)["error"]["message"]
        assert message and "\n" not in message and "empty" in message


def test_the_index_page_explains_in_both_languages(browser, url) -> None:
    o = Page(browser, url)
    o.page.wait_for_selector("#explain-links:not([hidden])")
    for selector in ("#explain-links", "#status"):
        text = o.page.inner_text(selector)
        assert HANGUL.search(text) and re.search("[a-z]{4}", text), (selector, text)
    o.close()


# --------------------------------------------------------------------------------------
# 5 the guided start
# --------------------------------------------------------------------------------------
TOUR = """() => {
  const tour = document.getElementById("tour");
  const lectures = [...tour.querySelectorAll("[data-lecture]")].map((l) => l.dataset.lecture);
  const steps = [...tour.querySelectorAll(".tour-step")].map((s) => {
    const a = s.querySelector("a.tour-go");
    const href = a.getAttribute("href");
    const id = href ? href.slice(1) : null;
    const target = id ? document.getElementById(id) : null;
    const na = s.querySelector(".tour-na");
    return {
      lecture: s.closest("[data-lecture]").dataset.lecture, label: a.innerText, target: s.dataset.target,
      href, exists: !!target, shown: !!target && !target.closest("[hidden]"),
      na: s.classList.contains("na"), naText: na && na.getClientRects().length ? na.innerText : "",
    };
  });
  return { open: tour.open, first: document.querySelector("body > *:not(script)") === document.querySelector("header")
    && tour.previousElementSibling === document.querySelector("header"), lectures, steps };
}"""

ANCHORS = {"input", "embed", "head", "padding", "soft-hard", "score-functions", "heads",
           "residual", "ffn", "add-norm", "family", "teacher-forcing", "nsp"}  # fmt: skip


@pytest.mark.parametrize("family", ["classifier", "lm", "seq2seq", "lstm", "mlm", "bilm"])
def test_the_tour_follows_the_lectures_and_links_only_what_is_there(browser, pages, family):
    o = Page(browser, pages[family].as_uri())
    tour = o.page.evaluate(TOUR)
    assert tour["open"] and tour["first"], tour  # at the top, open on the first visit
    assert tour["lectures"] == LECTURES
    steps = tour["steps"]
    assert [s["lecture"] for s in steps] == sorted(s["lecture"] for s in steps)  # in order
    assert {s["target"] for s in steps} == ANCHORS  # every panel the course needs
    for s in steps:
        assert s["label"].startswith(s["lecture"] + " · "), s  # "000 · Q, K, V와 ..."
        if s["na"]:
            assert s["href"] is None and "not in this run's family" in s["naText"], s
        else:
            assert s["href"] == f"#{s['target']}" and s["exists"] and s["shown"], s
            assert not s["naText"], s
    linked = {s["target"] for s in steps if not s["na"]}
    assert {"input", "family"} <= linked
    if family in ("classifier", "seq2seq", "mlm", "lm"):
        assert {"head", "heads", "embed", "residual"} <= linked, linked
    if family in ("bilm", "lstm"):
        assert "residual" not in linked  # no Transformer block: "try a Transformer run"
    # a link goes to its panel
    o.page.click("#tour a.tour-go[href='#family']")
    assert o.page.evaluate("location.hash") == "#family"
    # closed, it stays closed on the next visit (and opens again on a click)
    o.page.click("#tour summary")
    assert not o.page.evaluate("document.getElementById('tour').open")
    # the toggle event (which remembers it) fires after the click returns: wait for it
    for _ in range(100):
        if o.page.evaluate("localStorage.getItem('attnkit-tour')") == "closed":
            break
        o.page.wait_for_timeout(50)
    o.open(pages[family].as_uri())
    assert not o.page.evaluate("document.getElementById('tour').open")
    o.page.click("#tour summary")
    assert o.page.evaluate("document.getElementById('tour').open")
    o.close()


def test_every_note_of_a_trace_reads_in_korean(browser, served_runs, tmp_path: Path) -> None:
    """The notes a trace carries (English, from Python: cuts, padding, dropout, budget
    coarsening, a pretraining run without NSP) each have their Korean on the Korean page."""
    from attnkit.app.explain.families import NO_NSP_HEAD
    from attnkit.app.explain.parts import COARSEN

    made = {
        "clf-pad": write(LEGACY / "classify-transformer", "great", tmp_path / "a.html",
                         "--pad-to", "16"),
        "clf-cut": write(LEGACY / "classify-transformer", "the movie was great fun",
                         tmp_path / "b.html", "--max-tokens", "3"),
        "s2s-pad": write(LEGACY / "translate-transformer", "mann", tmp_path / "c.html",
                         "--pad-to", "5", "--max-tokens", "5"),
        "lm-cut": write(served_runs["verse"], "First Citizen", tmp_path / "d.html",
                        "--max-tokens", "6", "--steps", "2"),
    }  # fmt: skip
    seen = 0
    for name, path in made.items():
        page = Page(browser, path.as_uri(), locale="ko-KR")
        notes = page.page.locator("#notes li").all_inner_texts()
        english = traces_of(path)[0]["notes"]  # (a seq2seq page: greedy first)
        assert len(notes) == len(english) >= 2, (name, notes)
        for shown, original in zip(notes, english, strict=True):
            assert HANGUL.search(shown), f"{name}: {original!r} has no Korean"
            seen += 1
        for other in [*COARSEN.values(), NO_NSP_HEAD]:
            assert HANGUL.search(page.page.evaluate("(n) => noteKo(n)", other)), other
        page.close()
    assert seen >= 9

"""The web page in a real browser: Playwright drives headless Chromium (Debian's `chromium`,
installed by `make test` when it can be) against `attnkit serve` on loopback. It types a
Korean review, clicks, reads the label and the attention highlight, switches layer and head,
translates, chats, streams a generation, shows an error, and saves screenshots.

Skipped, with the reason printed, when Playwright or a Chromium binary is missing."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import attnkit
from browser_support import find_chromium, served

sync_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (make test installs it)"
)
uvicorn = pytest.importorskip("uvicorn")


CHROMIUM, WHY_NOT = find_chromium()
pytestmark = [pytest.mark.skipif(CHROMIUM is None, reason=WHY_NOT), pytest.mark.slow]

REVIEW = "이 영화 정말 재미있어요 최고"


@pytest.fixture(scope="module")
def url(served_runs):
    with served([f"{name}={path}" for name, path in served_runs.items()]) as base:
        yield base


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def page(browser, url):
    page = browser.new_page(viewport={"width": 1000, "height": 1400})
    page.set_default_timeout(30_000)
    page.goto(url)
    page.wait_for_selector("body[data-ready=true]")
    yield page
    page.close()


@pytest.mark.slow
def test_classify_a_korean_review_with_attention(page, served_runs, tmp_path: Path) -> None:
    page.select_option("#classify-model", "sentiment")
    assert not page.is_visible("#classify-pair")  # not a sentence-pair model
    page.fill("#classify-text", REVIEW)
    page.click("#classify-btn")
    page.wait_for_selector("#classify-tokens .tok")
    clf = attnkit.load(served_runs["sentiment"])
    want = clf.predict([REVIEW])[0]
    assert page.inner_text("#classify-label") == want.label
    assert page.inner_text("#classify-prob") == f"{100 * want.probability:.1f}%"
    tokens, weights = clf.attention(REVIEW)
    spans = page.locator("#classify-tokens .tok")
    assert spans.count() == len(tokens)
    shown = "".join(spans.all_inner_texts()).replace(" ", "")
    assert "재미있어요" in shown  # Hangul came through the whole way
    # layer / head pickers: every layer, "mean" + every head; a head changes the highlight
    assert page.locator("#attn-layer option").count() == len(weights)
    assert page.locator("#attn-head option").count() == 1 + weights[0].size(0)

    # each token's tooltip: its attention received (mean over queries) in the shown map
    def shown_weights() -> list[float]:
        return [float(spans.nth(i).get_attribute("title").rsplit(": ", 1)[1])
                for i in range(len(tokens))]  # fmt: skip

    last = weights[-1]  # (H, T, T): the last layer is shown first, mean of heads
    assert shown_weights() == pytest.approx(last.mean(1).mean(0).tolist(), abs=2e-3)
    page.select_option("#attn-head", "1")
    assert shown_weights() == pytest.approx(last[1].mean(0).tolist(), abs=2e-3)
    page.select_option("#attn-layer", "0")
    assert shown_weights() == pytest.approx(weights[0][1].mean(0).tolist(), abs=2e-3)
    # Korean renders with a real font even without Korean system fonts (served NanumGothic)
    loaded = page.evaluate(
        "document.fonts.load('16px \"attnkit-ko\"', '한국어').then(f => f.length)"
    )
    assert loaded >= 1
    shot = tmp_path / "classify.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000


def test_an_empty_review_shows_the_error(page) -> None:
    page.select_option("#classify-model", "ngram")
    page.fill("#classify-text", "   ")
    page.click("#classify-btn")
    page.wait_for_selector("#error:not([hidden])")
    assert "422" in page.inner_text("#error") and "empty" in page.inner_text("#error")


def test_translate_shows_the_alignment(page, served_runs) -> None:
    page.fill("#translate-text", "ein mann")
    page.click("#translate-btn")
    page.wait_for_selector("#translate-align tbody tr")
    a = attnkit.load(served_runs["translator"]).alignment("ein mann")
    assert page.inner_text("#translate-output") == a.text
    assert page.locator("#translate-align tbody tr").count() == len(a.output)
    assert page.locator("#translate-align tbody tr").first.locator("td").count() == len(a.source)


def test_chat_and_streamed_generation(page, served_runs, tmp_path: Path) -> None:
    page.fill("#chat-text", "안녕 hello")
    page.press("#chat-text", "Enter")
    page.wait_for_selector("#chat-log .bot")
    assert page.locator("#chat-log .user").count() == 1  # sent once
    assert page.inner_text("#chat-log .user") == "안녕 hello"
    page.fill("#generate-prompt", "First")
    page.fill("#generate-n", "12")
    page.fill("#generate-temp", "0")  # greedy: the same text as the Python API's
    page.click("#generate-btn")
    deadline = time.monotonic() + 30  # (polled from here: the page's CSP forbids eval)
    while page.is_disabled("#generate-btn") or len(page.text_content("#generate-output")) <= 5:
        assert time.monotonic() < deadline, "the generation did not finish"
        time.sleep(0.1)
    want = attnkit.load(served_runs["verse"]).generate("First", max_new_tokens=12, temperature=0)
    assert page.text_content("#generate-output") == "First" + want[0].text
    page.screenshot(path=str(tmp_path / "page.png"), full_page=True)


@pytest.mark.slow
def test_docs_renders_the_openapi_document(browser, url) -> None:
    """/docs in the browser: Swagger UI (5.x, from fastapi-offline) renders FastAPI's OpenAPI
    3.1 document with every operation listed; Swagger UI 4 answered "Unable to render this
    definition" here, with a 200. Nothing is fetched from anywhere but this server."""
    docs = browser.new_page(viewport={"width": 1200, "height": 1400})
    docs.set_default_timeout(30_000)
    fetched: list[str] = []
    errors: list[str] = []
    docs.on("request", lambda r: fetched.append(r.url))
    docs.on("pageerror", lambda e: errors.append(str(e)))
    try:
        docs.goto(url + "/docs")
        # operations, or Swagger UI's "cannot read it" box: whichever comes, no timeout
        docs.wait_for_selector(".swagger-ui .opblock, .swagger-ui .version-pragma")
        body = docs.inner_text("body")
        assert "Unable to render this definition" not in body
        assert not docs.locator(".swagger-ui .version-pragma").count()
        assert "OAS 3.1" in docs.inner_text(".swagger-ui .info")  # the version it read
        for path in ("/v1/classify", "/v1/translate", "/v1/chat", "/v1/generate"):
            summary = docs.locator(f'.opblock-summary-path[data-path="{path}"]')
            assert summary.first.is_visible(), path
        assert "/v1/classify" in body.replace("\u200b", "")
        assert not errors, errors
        assert fetched and all(u.startswith(url) for u in fetched), fetched  # no CDN
    finally:
        docs.close()

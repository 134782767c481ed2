"""The explorer's sections 3 "One head" and 4 "All heads" (issue 39): padding made visible
with ``pad_to`` (CLI ``--pad-to``, ``attnkit.explain(..., pad_to=)``, /v1/explain's
``pad_to``), a typed [PAD] shown as what the model does with it, soft vs hard attention at
an inverse temperature β, the five score functions of lecture 002 side by side on a
seq2seq query, one numbering from 0, and every note of the two sections in both languages.

The trace tests run on the tiny runs of tests/fixtures; the browser tests (marked slow)
drive headless Chromium through pages written by ``attnkit explain --html`` and the served
page, and are skipped with the reason when Playwright or Chromium is missing."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

import attnkit
from attnkit.app.cli import main
from attnkit.app.explain import decode_array, trace
from attnkit.app.explain.page import render_page
from attnkit.core.errors import InputError

LEGACY = Path(__file__).parents[2] / "fixtures" / "legacy_runs"
CLF = LEGACY / "classify-transformer"
TEXT = "최악 영화"
TYPED = "정말 최고 [PAD] [PAD]"


def attentions(t: dict) -> list[dict]:
    return [a for s in t["stacks"] for layer in s["layers"] for a in layer["attention"]]


def first_attention(t: dict) -> dict:
    return t["stacks"][0]["layers"][0]["attention"][0]


# --------------------------------------------------------------------------------------
# pad_to: the text padded as in a batch
# --------------------------------------------------------------------------------------
def test_pad_to_shows_the_padding_masked_and_keeps_the_prediction() -> None:
    clf = attnkit.load(CLF, precision="fp32")
    alone = trace(clf, TEXT, precision="float32")
    n = len(alone["inputs"][0]["ids"])
    t = trace(clf, TEXT, pad_to=n + 3, precision="float32")
    inp = t["inputs"][0]
    assert inp["tokens"][:n] == alone["inputs"][0]["tokens"]
    assert inp["tokens"][n:] == ["[PAD]"] * 3 and inp["ids"][n:] == [inp["pad_id"]] * 3
    assert inp["padded"] == 3 and alone["inputs"][0]["padded"] == 0
    for a in attentions(t):
        mask = decode_array(a["mask"]["array"])
        assert "padding" in a["mask"]["kinds"]
        assert (mask[:, n:] == 0).all() and (mask[:, :n] == 1).all()
        w = decode_array(a["weights"])
        assert (w[..., n:] == 0).all()  # exactly 0, not small
        np.testing.assert_allclose(w.sum(-1), 1, atol=1e-6)
        # the real tokens' rows attend as they do alone
        w0 = decode_array(
            next(x for x in attentions(alone) if x["module"] == a["module"])["weights"]
        )
        np.testing.assert_allclose(w[:, :n, :n], w0, atol=1e-5)
    want = clf.predict([TEXT])[0]
    assert t["view"]["predicted"] == want.label
    np.testing.assert_allclose(t["view"]["probabilities"], list(want.probabilities.values()),
                               atol=1e-6)  # fmt: skip
    assert any("padded with 3 [PAD]" in note for note in t["notes"])
    assert any("equal the text's own" in note for note in t["notes"])


def test_pad_to_mlm_masks_the_padding_and_fills_in_the_same() -> None:
    run = attnkit.load(LEGACY / "mlm", precision="fp32")
    text = "the [MASK] was"
    alone = trace(run, text, precision="float32")
    n = len(alone["inputs"][0]["ids"])
    t = trace(run, text, pad_to=n + 2, precision="float32")
    assert t["inputs"][0]["padded"] == 2
    a = first_attention(t)
    assert "padding" in a["mask"]["kinds"]
    assert (decode_array(a["mask"]["array"])[:, n:] == 0).all()
    assert (decode_array(a["weights"])[..., n:] == 0).all()
    for got, want in zip(t["view"]["masks"], alone["view"]["masks"], strict=True):
        assert [c["token"] for c in got["top"]] == [c["token"] for c in want["top"]]
        np.testing.assert_allclose([c["probability"] for c in got["top"]],
                                   [c["probability"] for c in want["top"]], atol=1e-5)  # fmt: skip


def test_pad_to_tagger_masks_the_padding_and_tags_the_same() -> None:
    from attnkit.models.bert import BertConfig
    from attnkit.tasks.tag import TagPredictor

    base = attnkit.load(CLF, precision="fp32")  # its tokenizer and run config
    tags = ["O", "B-PER", "I-PER"]
    tk = base.tokenizer
    cfg = BertConfig(arch="bert-tagger", max_len=24, d_model=16, num_heads=2, d_ff=32,
                     num_layers=1, num_classes=len(tags), vocab_size=tk.vocab_size,
                     pad_id=tk.pad_id)  # fmt: skip
    torch.manual_seed(0)
    data = dataclasses.replace(base.config.data, max_len=cfg.max_len)
    config = dataclasses.replace(base.config, task="tag", model=cfg, data=data)
    pred = TagPredictor(cfg.build().eval(), tk, config, tags, word_unit="word")
    alone = trace(pred, "the movie", precision="float32")
    n = len(alone["inputs"][0]["ids"])
    t = trace(pred, "the movie", pad_to=n + 4, precision="float32")
    assert t["inputs"][0]["padded"] == 4
    assert (decode_array(first_attention(t)["weights"])[..., n:] == 0).all()
    assert t["view"]["words"] == alone["view"]["words"]
    np.testing.assert_allclose(decode_array(t["view"]["probabilities"])[:n],
                               decode_array(alone["view"]["probabilities"]), atol=1e-5)  # fmt: skip
    with pytest.raises(InputError, match="at most 24"):
        trace(pred, "the movie", pad_to=25)


@pytest.mark.parametrize(("run", "text"), [("translate-transformer", "ein mann"),
                                           ("chat-lstm", "안녕 hello")])  # fmt: skip
def test_pad_to_a_seq2seq_source(run: str, text: str) -> None:
    pred = attnkit.load(LEGACY / run, precision="fp32")
    alone = trace(pred, text, beam=1, precision="float32")
    n = len(alone["inputs"][0]["ids"])
    t = trace(pred, text, beam=1, pad_to=n + 3, precision="float32")
    source = t["inputs"][0]
    assert source["name"] == "source" and source["padded"] == 3
    assert source["tokens"][n:] == ["[PAD]"] * 3
    assert t["view"]["output_text"] == alone["view"]["output_text"]
    assert any("is the source's own, alone" in note for note in t["notes"])
    assert (decode_array(t["view"]["alignment"])[:, n:] == 0).all()
    keyed = [a for a in attentions(t) if a["key"] == "source"]
    assert keyed
    for a in keyed:
        assert "padding" in a["mask"]["kinds"]
        assert (decode_array(a["mask"]["array"])[:, n:] == 0).all()
        assert (decode_array(a["weights"])[..., n:] == 0).all()
    for f in t["view"]["score_functions"]["functions"]:
        assert (decode_array(f["weights"])[..., n:] == 0).all()


@pytest.mark.parametrize(
    ("run", "text", "pad_to", "message"),
    [
        (CLF, TEXT, 3, "shorter than the text's 5 tokens"),
        (CLF, TEXT, 17, "at most 16"),
        (CLF, TEXT, 0, "pad_to must be an integer >= 1"),
        (CLF, TEXT, True, "pad_to must be an integer >= 1"),
        (LEGACY / "translate-transformer", "ein mann", 4, "shorter than the text's 5 tokens"),
        (LEGACY / "mlm", "the [MASK]", 17, "at most 16"),
    ],
)
def test_pad_to_refusals_are_clear(run, text, pad_to, message) -> None:
    with pytest.raises(InputError, match=re.escape(message)):
        trace(run, text, pad_to=pad_to)


def test_pad_to_an_lm_run_is_refused_with_why(served_runs) -> None:
    with pytest.raises(InputError, match="lm .*look-ahead mask"):
        trace(served_runs["verse"], "First", pad_to=8)


def test_cli_and_inline_pad_to(tmp_path: Path, capsys) -> None:
    out = tmp_path / "pad.html"
    assert main(["explain", str(CLF), TEXT, "--html", str(out), "--pad-to", "8"]) == 0
    found = re.search(r'id="trace-data">(.*?)</script>', out.read_text(encoding="utf-8"), re.S)
    (item,) = json.loads(found.group(1))["traces"]
    assert item["trace"]["inputs"][0]["padded"] == 3
    assert attnkit.explain(CLF, TEXT, pad_to=8).trace["inputs"][0]["tokens"][-3:] == ["[PAD]"] * 3
    capsys.readouterr()
    bad = tmp_path / "bad.html"
    assert main(["explain", str(CLF), TEXT, "--html", str(bad), "--pad-to", "2"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "shorter than the text's 5 tokens" in lines[0], lines
    assert not bad.exists()
    assert main(["explain", str(CLF), TEXT, "--html", str(bad), "--pad-to", "0"]) == 2
    assert "--pad-to must be >= 1" in capsys.readouterr().err


def test_served_explain_takes_pad_to() -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from attnkit.app.serve import Limits, create_app

    client = TestClient(create_app([f"clf={CLF}"], Limits()))
    got = client.post("/v1/explain", json={"model": "clf", "text": TEXT, "pad_to": 7})
    assert got.status_code == 200, got.text
    assert got.json()["traces"][0]["trace"]["inputs"][0]["padded"] == 2
    for value, message in [(0, "pad_to"), (5000, "pad_to"), ("7", "pad_to"), (3, "shorter"),
                           (16 + 1, "at most 16")]:  # fmt: skip
        bad = client.post("/v1/explain", json={"model": "clf", "text": TEXT, "pad_to": value})
        assert bad.status_code == 422, (value, bad.text)
        assert message in bad.json()["error"]["message"], bad.json()


def test_a_typed_pad_is_read_like_any_token_as_the_model_reads_it() -> None:
    """The mask comes from each text's length in its batch (pad_batch), not from the id: a
    [PAD] typed in the text is attended, in the trace as in the predictor's own batch."""
    clf = attnkit.load(CLF, precision="fp32")
    text = "최악 영화 [PAD] [PAD]"
    t = trace(clf, text, precision="float32")
    inp = t["inputs"][0]
    typed = [i for i, x in enumerate(inp["ids"]) if x == inp["pad_id"]]
    assert len(typed) == 2 and inp["padded"] == 0
    a = first_attention(t)
    assert (decode_array(a["mask"]["array"])[:, typed] == 1).all()
    assert (decode_array(a["weights"])[..., typed] > 0).all()
    _, weights = clf.attention(text)  # the predictor's own forward pass
    np.testing.assert_allclose(decode_array(a["weights"]), weights[0].numpy(), atol=1e-6)
    want = clf.predict([text])[0]
    np.testing.assert_allclose(t["view"]["probabilities"], list(want.probabilities.values()),
                               atol=1e-6)  # fmt: skip


# --------------------------------------------------------------------------------------
# the five score functions
# --------------------------------------------------------------------------------------
def test_score_functions_of_an_lstm_run() -> None:
    run = LEGACY / "chat-lstm"
    pred = attnkit.load(run, precision="fp32")
    state = torch.get_rng_state()
    t = trace(pred, "안녕 hello", beam=1, precision="float32")
    assert torch.equal(state, torch.get_rng_state())  # the fixed seed is drawn aside
    sf = t["view"]["score_functions"]
    own = pred.config.model.attention
    assert sf["own"] == own and sf["query"] == "target" and sf["key"] == "source"
    names = [f["name"] for f in sf["functions"]]
    assert names == ["dot", "scaled_dot", "general", "concat", "location"]
    att = first_attention(t)
    for f in sf["functions"]:
        scores, w = decode_array(f["scores"]), decode_array(f["weights"])
        assert scores.shape == decode_array(att["scores"]).shape
        np.testing.assert_allclose(w.sum(-1), 1, atol=1e-6)
        if f["name"] == own:  # the run's own function: its trained parameters, the stack's numbers
            assert f["own"] and f["parameters"] == "trained"
            np.testing.assert_allclose(scores, decode_array(att["scores"]), atol=1e-6)
            np.testing.assert_allclose(w, decode_array(att["weights"]), atol=1e-6)
        else:
            assert not f["own"]
            want = "none" if f["name"] in ("dot", "scaled_dot") else "untrained"
            assert f["parameters"] == want
    # dot and scaled dot of the run's own s_t and h_i
    q = decode_array(att["q"])[0]
    v = decode_array(att["v"])[0]  # h_i: the keys and the values
    dot = next(f for f in sf["functions"] if f["name"] == "dot")
    np.testing.assert_allclose(decode_array(dot["scores"])[0], q @ v.T, atol=1e-5)
    again = trace(pred, "안녕 hello", beam=1, precision="float32")["view"]["score_functions"]
    assert again == sf  # the untrained illustrations are the same every time (seed)


def test_score_functions_of_a_transformer_run() -> None:
    t = trace(LEGACY / "translate-transformer", "ein mann", beam=1, precision="float32")
    sf = t["view"]["score_functions"]
    cross = [a for a in attentions(t) if a["role"] == "cross"][-1]
    assert sf["module"] == cross["module"] and sf["own"] == "scaled_dot"
    assert sf["heads"] == sf["num_heads"] == cross["num_heads"]
    by = {f["name"]: f for f in sf["functions"]}
    assert by["scaled_dot"]["own"] and not by["dot"]["own"]
    np.testing.assert_allclose(decode_array(by["scaled_dot"]["scores"]),
                               decode_array(cross["scores"]), atol=1e-5)  # fmt: skip
    np.testing.assert_allclose(decode_array(by["scaled_dot"]["weights"]),
                               decode_array(cross["weights"]), atol=1e-6)  # fmt: skip
    d = cross["d_head"]
    np.testing.assert_allclose(decode_array(by["dot"]["scores"]),
                               decode_array(cross["scores"]) * np.sqrt(d), atol=1e-4)  # fmt: skip
    assert {by[n]["parameters"] for n in ("general", "concat", "location")} == {"untrained"}
    # a classifier has none (no decoder query)
    assert "score_functions" not in trace(CLF, TEXT)["view"]


# --------------------------------------------------------------------------------------
# in the browser
# --------------------------------------------------------------------------------------
def _page_tools():
    pytest.importorskip("playwright.sync_api", reason="playwright is not installed (make test "
                        "installs it)")  # fmt: skip
    import explain_support

    if explain_support.CHROMIUM is None:
        pytest.skip(explain_support.WHY_NOT)
    return explain_support


def _cells(o, table: str, row: int) -> list[str]:
    return o.page.locator(f"{table} tbody tr").nth(row).locator("td").all_inner_texts()


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()


@pytest.mark.slow
def test_padding_page_shows_masked_pads(browser, tmp_path: Path) -> None:
    ex = _page_tools()
    path = ex.write(CLF, TEXT, tmp_path / "pad.html", "--pad-to", "8")
    (t,) = ex.traces_of(path)
    o = ex.Opened(browser, path.as_uri())
    page = o.page
    note = o.text("#padding #mask-note")
    assert "padding mask: the last 3 keys (positions 5-7)" in note and "exactly 0" in note
    assert page.locator("#input .chip .t").all_inner_texts()[-3:] == ["[PAD]"] * 3
    assert o.column("#query-table", "mask")[:8] == ["✓"] * 5 + ["✗"] * 3
    w = decode_array(first_attention(t)["weights"])
    ex.assert_shown(o.column("#query-table", "weight α")[:8], w[0, 0])
    assert o.column("#query-table", "weight α")[5:8] == ["0.000"] * 3
    # the head picker, the layers and the model view count from 0
    assert page.locator("#pick-head option").first.inner_text() == "head 0"
    assert page.input_value("#pick-head") == "0"
    assert page.locator("#pick-layer option").first.inner_text() == "layer 0"
    assert page.locator("#model-view .lbl").nth(0).inner_text() == "head 0"
    assert page.locator("#model-view canvas.thumb").first.get_attribute("title").endswith("head 0")
    o.close()


@pytest.mark.slow
def test_typed_pad_in_a_served_page_agrees_with_the_model(browser, served_runs) -> None:
    """Typing "정말 최고 [PAD] [PAD]" into a tiny classifier's page: the note says what the
    model does (a typed [PAD] is read, the mask comes from the length), the marks are ✓ and
    the weights are the model's (not 0)."""
    ex = _page_tools()
    from browser_support import served

    run = served_runs["sentiment"]
    with served([f"sentiment={run}"]) as base:
        index = ex.Opened(browser, base)  # the served index page counts from 0 too
        index.page.fill("#classify-text", "정말 최고")
        index.page.click("#classify-btn")
        index.page.wait_for_selector("#classify-attn:not([hidden])")
        assert index.page.locator("#attn-layer option").all_inner_texts() == ["0"]
        heads = index.page.locator("#attn-head option").all_inner_texts()
        assert [h for h in heads if h.isdigit()] == ["0", "1"]
        index.close()
        o = ex.Opened(browser, f"{base}/explain/sentiment")
        page = o.page
        page.fill("#ask-text", TYPED)
        page.click("#ask-btn")
        page.wait_for_selector("body[data-renders='2'][data-ready=true]")
        clf = attnkit.load(run, precision="fp32")
        tokens, weights = clf.attention(TYPED)
        assert tokens[-2:] == ["[PAD]", "[PAD]"]
        note = o.text("#mask-note")
        assert "typed in the text (positions 3, 4) is not padding" in note
        assert "hidden from every query" not in note
        assert page.get_attribute("#mask-note", "data-typed") == "3,4"
        assert o.column("#query-table", "mask")[: len(tokens)] == ["✓"] * len(tokens)
        got = o.column("#query-table", "weight α")[: len(tokens)]
        ex.assert_shown(got, weights[0][0][0])
        assert all(float(x) > 0 for x in got[-2:])
        # the same text padded to 8 as in a batch: typed [PAD]s read, added ones masked
        assert page.is_visible("#pad-form")
        page.fill("#pad-to", "8")
        page.click("#pad-btn")
        page.wait_for_selector("body[data-renders='3'][data-ready=true]")
        note = o.text("#mask-note")
        assert "the last 3 keys (positions 5-7)" in note and "positions 3, 4" in note
        assert o.column("#query-table", "mask")[:8] == ["✓"] * 5 + ["✗"] * 3
        assert o.column("#query-table", "weight α")[5:8] == ["0.000"] * 3
        o.close()


@pytest.mark.slow
def test_soft_and_hard_attention_with_beta(browser, tmp_path: Path) -> None:
    ex = _page_tools()
    path = ex.write(CLF, TEXT, tmp_path / "sh.html", "--pad-to", "7")
    (t,) = ex.traces_of(path)
    att = first_attention(t)
    scores, w = decode_array(att["scores"]), decode_array(att["weights"])
    v = decode_array(att["v"])
    n, T = 5, 7
    o = ex.Opened(browser, path.as_uri())
    page = o.page
    page.select_option("#pick-head", "1")
    page.select_option("#pick-query", "2")
    assert "[soft](arg)max" in o.text("#sh-formula")
    # β = 1, soft: the page's own softmax of the scores is the model's weights
    computed = _cells(o, "#sh-table", 1)[1:]
    ex.assert_shown(computed, w[1, 2])
    ex.assert_shown(_cells(o, "#sh-table", 0)[1:], w[1, 2])
    assert "model's α" not in page.locator("#query-table thead th").all_inner_texts()
    # β = 3: softmax(3 · scores) over the visible keys, and the weighted sum follows
    page.fill("#sh-beta-num", "3")
    want = np.zeros(T)
    want[:n] = _softmax(3 * scores[1, 2, :n])
    ex.assert_shown(_cells(o, "#sh-table", 1)[1:], want)
    ex.assert_shown(o.column("#query-table", "weight α")[:T], want)
    ex.assert_shown(o.column("#query-table", "model's α")[:T], w[1, 2])
    total = _cells(o, "#query-table", T)
    ex.assert_shown(total[-6:], (want @ v[1])[:6])
    # β = 0: a plain average of the visible keys (the padding stays at 0)
    page.fill("#sh-beta-num", "0")
    ex.assert_shown(o.column("#query-table", "weight α")[:T], [0.2] * n + [0.0] * 2)
    # hard: one-hot on the argmax; the weighted sum is that key's value
    page.check("#sh-hard")
    best = int(np.argmax(scores[1, 2, :n]))
    one_hot = np.eye(T)[best]
    ex.assert_shown(o.column("#query-table", "weight α")[:T], one_hot)
    ex.assert_shown(_cells(o, "#query-table", T)[-6:], v[1, best, :6])
    assert "one-hot" in o.text("#sh-note")
    assert "With hard attention instead" in o.text("#head-out")
    assert page.is_disabled("#sh-beta")
    page.check("#sh-soft")
    page.fill("#sh-beta-num", "1")
    ex.assert_shown(o.column("#query-table", "weight α")[:T], w[1, 2])
    o.close()


@pytest.mark.slow
def test_soft_hard_without_scores_or_values(browser, tmp_path: Path) -> None:
    """Scores not stored (a coarsened layer): computed from the weights, α^β / Σ α^β, and
    the note says so; V only as norms: the note says so and hard gives ‖v_argmax‖."""
    ex = _page_tools()
    t = trace(CLF, TEXT, qkv="norms", precision="float32")
    att = first_attention(t)
    w = decode_array(att["weights"])
    vn = decode_array(att["v_norms"])
    att["scores"] = None
    path = tmp_path / "coarse.html"
    path.write_text(render_page(t), encoding="utf-8")
    o = ex.Opened(browser, path.as_uri())
    page = o.page
    note = o.text("#sh-note")
    assert "scores are not stored" in note and "α^β" in note and "norms of V" in note
    page.fill("#sh-beta-num", "2")
    want = w[0, 0] ** 2 / (w[0, 0] ** 2).sum()
    ex.assert_shown(_cells(o, "#sh-table", 1)[1:], want)
    page.check("#sh-hard")
    best = int(np.argmax(w[0, 0]))
    assert f"‖v‖ = {vn[0, best]:.3f}" in o.text("#head-out")
    o.close()


@pytest.mark.slow
@pytest.mark.parametrize("run", ["translate-transformer", "chat-lstm"])
def test_five_score_functions_side_by_side(browser, tmp_path: Path, run: str) -> None:
    ex = _page_tools()
    text = "ein mann" if run.startswith("translate") else "안녕 hello"
    path = ex.write(LEGACY / run, text, tmp_path / "sf.html", "--beam", "1")
    (t,) = ex.traces_of(path)
    sf = t["view"]["score_functions"]
    o = ex.Opened(browser, path.as_uri())
    page = o.page
    rows = page.locator("#score-functions .sf-row")
    assert [r.get_attribute("data-name") for r in rows.all()] == [
        "dot", "scaled_dot", "general", "concat", "location"]  # fmt: skip
    for r, f in zip(rows.all(), sf["functions"], strict=True):
        text_shown = r.inner_text()
        assert (f["parameters"] == "untrained") == ("untrained illustration" in text_shown)
        assert (r.get_attribute("data-own") == "1") == f["own"]
    page.select_option("#lang", "ko")
    assert (
        "학습되지 않은 예시"
        in page.locator('#score-functions .sf-row[data-parameters="untrained"]').first.inner_text()
    )
    page.select_option("#lang", "en")
    S = decode_array(sf["functions"][0]["weights"]).shape[2]
    for step in (0, 1):  # the query follows the decoding step
        for k, f in enumerate(sf["functions"]):
            ex.assert_shown(_cells(o, "#sf-table", 2 * k)[2:], decode_array(f["scores"])[0, step])
            ex.assert_shown(
                _cells(o, "#sf-table", 2 * k + 1)[2:], decode_array(f["weights"])[0, step]
            )
            assert len(_cells(o, "#sf-table", 2 * k)) == S + 2
        page.click("#s2s-next")
    o.close()


@pytest.mark.slow
def test_sections_3_and_4_notes_are_bilingual(browser, tmp_path: Path) -> None:
    ex = _page_tools()
    path = ex.write(CLF, TEXT, tmp_path / "ko.html", "--pad-to", "7")
    o = ex.Opened(browser, path.as_uri())
    page = o.page
    missing = page.evaluate("""() => [...document.querySelectorAll(
        '#head .note, #heads .note, #head .result-line, #sum-formula')]
      .filter((n) => n.textContent.trim() && !(n.querySelector('[data-l=en]') && n.querySelector('[data-l=ko]')))
      .map((n) => n.id || n.textContent.slice(0, 40))""")
    assert missing == []
    page.select_option("#lang", "ko")
    for selector in (
        "#mask-note",
        "#qkv-note",
        "#sh-note",
        "#head-out",
        "#dropout-note",
        "#sf-note",
    ):
        shown = o.text(selector)
        assert re.search("[가-힣]", shown), (selector, shown)
    assert "패딩 마스크" in o.text("#mask-note")
    o.close()


def test_png_titles_count_from_0(tmp_path: Path) -> None:
    import matplotlib.pyplot as plt

    fig = attnkit.load(CLF).explain(TEXT, None, layer=0, head=1)
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    plt.close(fig)
    assert any(t.startswith("layer 0, head 1") for t in titles), titles


@pytest.mark.slow
def test_padded_source_of_a_translator_page(browser, tmp_path: Path) -> None:
    ex = _page_tools()
    path = ex.write(LEGACY / "translate-transformer", "ein mann", tmp_path / "mt.html",
                    "--beam", "1", "--pad-to", "7")  # fmt: skip
    o = ex.Opened(browser, path.as_uri())
    page = o.page
    assert page.input_value("#pick-attn") == "1"  # the decoder's cross-attention: source keys
    assert "the last 2 keys (positions 5-6)" in o.text("#mask-note")
    assert o.column("#query-table", "mask")[:7] == ["✓"] * 5 + ["✗"] * 2
    assert o.column("#query-table", "weight α")[5:7] == ["0.000"] * 2
    assert _cells(o, "#sf-table", 1)[-2:] == ["0.000"] * 2  # the score functions mask them too
    o.close()

"""The explorer page (issue 34) in a real browser: Playwright drives headless Chromium
(Debian's ``chromium``, as tests/app/serve/test_serve_browser.py) through each family's page, written by
``attnkit explain RUN TEXT --html`` and opened from disk, and through the served page of
``attnkit serve``. It types, steps, picks layers and heads, and checks what is displayed
against the Python API (``attnkit.load(...)``'s predictions, the trace's numbers) at the
page's display precision; no page makes a request beyond its own file (or its own server).

Every panel is screenshot (into tmp_path). Of docs/explain.md's images this test owns only
``TEST_OWNED`` (ELMo: from its tiny runs), written to docs/img/explain-*.png when
ATTNKIT_SCREENSHOTS=1 or when one is missing; the others come from real trained runs and are
made by ``python tools/explain_screenshots.py``, never by this test.

Skipped, with the reason printed, when Playwright or a Chromium binary is missing."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
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

from explain_support import (  # noqa: E402
    CHROMIUM,
    WHY_NOT,
    Heatmap,
    Opened,
    assert_shown,
    offline,
    pct,
    shown,
    traces_of,
    write,
)

pytestmark = [pytest.mark.skipif(CHROMIUM is None, reason=WHY_NOT), pytest.mark.slow]

LEGACY = Path(__file__).parents[2] / "fixtures" / "legacy_runs"
IMG = Path(__file__).parents[3] / "docs" / "img"
REVIEW = "이 영화 정말 재미있어요 최고"


TEST_OWNED = frozenset({"elmo"})  # docs/img/explain-NAME.png made here


def shoot(locator, name: str, tmp_path: Path) -> None:
    """Save a screenshot of ``locator``: as docs/img/explain-NAME.png if NAME is test-owned
    and asked for (ATTNKIT_SCREENSHOTS=1) or missing; else into tmp_path (still drawn)."""
    target = IMG / f"explain-{name}.png"
    wanted = os.environ.get("ATTNKIT_SCREENSHOTS") == "1" or not target.exists()
    if not (name in TEST_OWNED and wanted):
        target = tmp_path / target.name
    locator.screenshot(path=str(target))
    assert target.stat().st_size > 5_000


def test_every_docs_screenshot_has_one_owner(monkeypatch) -> None:
    """Each explain-*.png of docs/explain.md (and .ko.md) is made by exactly one of this test
    and tools/explain_screenshots.py, so that neither overwrites the other's."""
    import importlib.util

    path = Path(__file__).parents[3] / "tools" / "explain_screenshots.py"
    spec = importlib.util.spec_from_file_location("explain_screenshots", path)
    tool = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, tool)  # its dataclass looks itself up there
    spec.loader.exec_module(tool)
    assert not TEST_OWNED & set(tool.OWNED)
    for doc in ("explain.md", "explain.ko.md"):
        text = (IMG.parent / doc).read_text(encoding="utf-8")
        used = set(re.findall(r"\(img/explain-([a-z0-9-]+)\.png\)", text))
        assert used == TEST_OWNED | set(tool.OWNED), doc


# --------------------------------------------------------------------------------------
# runs and pages
# --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def elmo_runs(tmp_path_factory) -> dict[str, Path]:
    """A tiny biLM and an ELMo classifier on it (seconds)."""
    from conftest import make_sentiment_rows, tiny_recipe, write_tiny_data

    root = tmp_path_factory.mktemp("explain-elmo")
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(r["text"] for r in make_sentiment_rows(300, seed=5)) + "\n",
                      encoding="utf-8")  # fmt: skip
    bilm = {
        "task": "bilm",
        "data": {"name": "file", "train": str(corpus), "val_fraction": 0.1, "max_len": 12},
        "tokenizer": {"kind": "wordpiece", "vocab_size": 120, "min_frequency": 1},
        "model": {"arch": "elmo", "d_model": 16, "hidden_size": 16, "num_layers": 2,
                  "dropout": 0.0},
        "training": {"epochs": 1, "batch_size": 16, "lr": 1e-2, "log_every": 5,
                     "progress": False, "num_threads": 1},
    }  # fmt: skip
    (root / "bilm.yaml").write_text(yaml.safe_dump(bilm), encoding="utf-8")
    attnkit.train(root / "bilm.yaml", out=root / "bilm", log=lambda *_: None)
    recipe = tiny_recipe(write_tiny_data(root / "data"), epochs=2, lr=1e-2)
    recipe["model"] = {"arch": "elmo", "init_from": str(root / "bilm"), "token_dim": 8,
                       "task_hidden_size": 8, "dropout": 0.0, "bilm_d_model": 64}  # fmt: skip
    (root / "elmo.yaml").write_text(yaml.safe_dump(recipe), encoding="utf-8")
    attnkit.train(root / "elmo.yaml", out=root / "elmo", log=lambda *_: None)
    return {"bilm": root / "bilm", "elmo": root / "elmo"}


# --------------------------------------------------------------------------------------
# each family's page
# --------------------------------------------------------------------------------------
def test_classifier_page(browser, served_runs, tmp_path: Path) -> None:
    run = served_runs["sentiment"]
    path = write(run, REVIEW, tmp_path / "clf.html")
    (t,) = traces_of(path)
    clf = attnkit.load(run)
    want = clf.predict([REVIEW])[0]
    tokens, weights = clf.attention(REVIEW)  # per layer (H, T, T)
    o = Opened(browser, path.as_uri())
    page = o.page
    # 1 input: one chip per token, with its id; Hangul with the inline font
    assert page.locator("#input .chip .t").all_inner_texts() == tokens
    assert page.locator("#input .chip small").all_inner_texts() == [
        str(i) for i in t["inputs"][0]["ids"]
    ]
    loaded = page.evaluate("[...document.fonts].filter(f => f.family === 'attnkit-ko' "
                           "&& f.status === 'loaded').length")  # fmt: skip
    assert loaded == 1
    # 6 the output: the label and each class's probability
    assert o.text("#cls-pred") == f"predicted: {want.label} ({pct(want.probability)})"
    bars = {r.locator(".lab").inner_text(): r.locator(".val").inner_text()
            for r in page.locator("#cls-bars .bar-row").all()}  # fmt: skip
    assert bars == {label: pct(p) for label, p in want.probabilities.items()}
    # 3 one head: the chosen query's row of weights is the model's attention
    assert page.locator("#pick-head option").count() == weights[0].size(0)
    assert o.column("#query-table", "weight α")[: len(tokens)] == shown(weights[0][0][0])
    page.select_option("#pick-head", "1")
    page.select_option("#pick-query", "3")
    assert o.column("#query-table", "weight α")[: len(tokens)] == shown(weights[0][1][3])
    att = t["stacks"][0]["layers"][0]["attention"][0]
    scores = decode_array(att["scores"])[1, 3]
    assert o.column("#query-table", "score")[: len(tokens)] == shown(scores)
    assert "sqrt(d_k)" in o.text("#formula") or "√" in o.text("#formula")
    assert "dropout: off at inference" in o.text("#dropout-note")
    # the weighted sum computed from the shown weights and values equals the head's output
    rows = page.locator("#query-table tbody tr")
    total = rows.nth(len(tokens)).locator("td").all_inner_texts()[6:]
    captured = rows.nth(len(tokens) + 1).locator("td").all_inner_texts()[6:]
    assert total == captured and total
    assert captured == shown(decode_array(att["head_out"])[1, 3][: len(captured)])
    # 4 all heads: a thumbnail per layer and head; a click opens it in section 3
    thumbs = page.locator("#model-view canvas.thumb")
    assert thumbs.count() == len(weights) * weights[0].size(0)
    thumbs.nth(0).click()
    assert page.input_value("#pick-head") == "0"
    heads = {page.locator("#head-view line").nth(i).get_attribute("data-head")
             for i in range(page.locator("#head-view line").count())}  # fmt: skip
    assert heads == {"0", "1"}
    page.uncheck('#hv-heads input[data-head="0"]')
    assert {x.get_attribute("data-head") for x in page.locator("#head-view line").all()} == {"1"}
    # 2 embeddings: the sum row of the chosen position is the trace's, PE row outlined
    page.locator("#input .chip").nth(2).click()
    assert page.input_value("#emb-pos") == "2"
    emb = t["embeddings"][0]
    sum_row = page.locator("#emb-table tbody tr.chosen td").all_inner_texts()[1:]
    assert sum_row == shown(decode_array(emb["sum"])[2][: len(sum_row)])
    assert "sin(pos / 10000^(2i/d_model))" in o.text("#pe-note")
    # 5 residual stream: after each Add & Norm, the chosen token's norm
    res = t["stacks"][0]["layers"][0]["residual"]
    after = o.column("#res-table", "‖stream after Add & Norm‖")
    assert after == shown([decode_array(s["after"])[0] for s in res["sublayers"]])
    offline(o, path)
    shoot(page.locator("#input"), "input", tmp_path)
    shoot(page.locator("#embed"), "embeddings", tmp_path)
    page.select_option("#pick-query", "1")
    shoot(page.locator("#head"), "head", tmp_path)
    shoot(page.locator("#heads"), "heads", tmp_path)
    shoot(page.locator("#residual"), "residual", tmp_path)
    shoot(page.locator("#family"), "classifier", tmp_path)
    o.close()


def test_gpt_page_steps_one_token_at_a_time(browser, served_runs, tmp_path: Path) -> None:
    run = served_runs["verse"]
    path = write(run, "First", tmp_path / "lm.html", "--steps", "6", "--temperature", "0")
    (t,) = traces_of(path)
    lm = attnkit.load(run)
    want = lm.generate("First", max_new_tokens=6, temperature=0)[0]
    o = Opened(browser, path.as_uri())
    page = o.page
    chosen = []
    for k in range(6):
        assert o.text("#lm-step-label").startswith(f"step {k + 1} of 6")
        chosen.append(page.text_content("#lm-chosen"))
        # the head panel follows: its query is the position that predicts this token
        assert page.input_value("#pick-query") == str(t["view"]["steps"][k]["position"])
        if k < 5:
            page.click("#lm-next")
    assert "".join(chosen) == want.text  # greedy: the Python API's continuation
    assert page.is_disabled("#lm-next")
    assert "look-ahead" in o.text("#mask-note")
    step = t["view"]["steps"][-1]
    vals = page.locator("#lm-bars .val").all_inner_texts()
    assert vals == [pct(c["filtered"]) for c in step["top"]]  # as generated (greedy)
    page.fill("#lm-temp", "1")  # temperature 1, top-k off: the model's own softmax
    want_p = [pct(c["probability"]) for c in step["top"]]
    assert page.locator("#lm-bars .val").all_inner_texts() == want_p
    logits = np.array([c["logit"] for c in step["top"]])
    page.fill("#lm-topk", "2")  # top-k 2: exactly the two best keep all the mass
    p2 = np.exp(logits[:2] - logits[:2].max())
    assert page.locator("#lm-bars .val").all_inner_texts()[:2] == [pct(x) for x in p2 / p2.sum()]
    assert set(page.locator("#lm-bars .val").all_inner_texts()[2:]) == {"0.0%"}
    page.click("#lm-prev")
    assert o.text("#lm-step-label").startswith("step 5 of 6")
    offline(o, path)
    shoot(page.locator("#family"), "gpt", tmp_path)
    o.close()


def test_seq2seq_page_greedy_and_beam(browser, served_runs, tmp_path: Path) -> None:
    run = served_runs["translator"]
    text = "ein mann"
    path = write(run, text, tmp_path / "mt.html", "--beam", "3")
    mt = attnkit.load(run)
    a = mt.alignment(text)
    o = Opened(browser, path.as_uri())
    page = o.page
    assert o.text("#s2s-output") == f"output (greedy): {a.text}"
    assert page.input_value("#pick-attn") == "1"  # the decoder's cross-attention
    assert page.locator("#pick-attn option").nth(1).inner_text() == "encoder-decoder attention"
    page.click("#s2s-next")
    assert page.input_value("#pick-query") == "1"  # step 2 reads the target's row 1
    assert page.locator("#s2s-bars .bar-row.chosen .lab").inner_text() == a.output[1]
    # the query table of step 2 is the alignment's row (last layer, mean of heads: per head)
    (t, beam) = traces_of(path)
    att = t["stacks"][1]["layers"][-1]["attention"][1]
    w = decode_array(att["weights"])  # (H, T_out, S)
    np.testing.assert_allclose(w.mean(0)[: len(a.output)], a.weights.numpy(), atol=1e-6)
    assert o.column("#query-table", "weight α")[: w.shape[2]] == shown(w[0, 1])
    shoot(page.locator("#family"), "seq2seq", tmp_path)
    page.select_option("#pick-trace", "1")
    assert o.text("#s2s-output") == f"output (beam 3): {mt.translate([text], beam=3)[0]}"
    offline(o, path)
    o.close()


def test_lstm_seq2seq_shows_its_score_function(browser, served_runs, tmp_path: Path) -> None:
    run = served_runs["bot"]
    path = write(run, "안녕 hello", tmp_path / "bot.html", "--beam", "1")
    (t,) = traces_of(path)
    o = Opened(browser, path.as_uri())
    score = t["stacks"][0]["layers"][0]["attention"][0]["score"]
    assert score["name"] == attnkit.load(run).config.model.attention
    assert o.text("#formula").startswith(f"{score['name']}: {score['formula']}")
    assert "s_t" in o.text("#qkv-note") and "h_i" in o.text("#qkv-note")
    assert "c_t" in o.text("#sum-formula")
    assert o.page.locator("#res-none").is_visible()  # an LSTM has no Add & Norm
    offline(o, path)
    o.close()


def test_lstm_seq2seq_alignment_is_the_apis(browser, served_runs, tmp_path: Path) -> None:
    """Every weight of the LSTM's alignment map (its cells' tooltips) and of each decoding
    step's query table is ``alignment()``'s, at the page's display precision."""
    run = served_runs["bot"]
    text = "안녕 hello"
    a = attnkit.load(run).alignment(text)
    path = write(run, text, tmp_path / "bot.html", "--beam", "1")
    o = Opened(browser, path.as_uri())
    page = o.page
    assert o.text("#s2s-output") == f"output (greedy): {a.text}"
    rows, cols = a.weights.shape
    assert (rows, cols) == (len(a.output), len(a.source))
    grid = Heatmap(page, "#s2s-align", rows, cols)
    inputs = traces_of(path)[0]["inputs"][1]["tokens"]  # decoder rows: "input ⇒ output"
    for i in range(rows):
        tips = [grid.tip(i, j) for j in range(cols)]
        assert [tip.rsplit(": ", 1)[0] for tip in tips] == [
            f"{inputs[i]} ⇒ {a.output[i]} ← {src}" for src in a.source
        ]
        assert_shown([tip.rsplit(": ", 1)[1] for tip in tips], a.weights[i])
    for step in range(1, rows + 1):  # the head panel follows the step: query = its row
        assert o.text("#s2s-step-label").startswith(f"step {step} of ")
        assert page.input_value("#pick-query") == str(step - 1)
        assert_shown(o.column("#query-table", "weight α")[:cols], a.weights[step - 1])
        if step < rows:
            page.click("#s2s-next")
    assert page.is_disabled("#s2s-next")
    grid.click(0, 0)  # a click on a row of the map goes back to that step
    assert o.text("#s2s-step-label").startswith("step 1 of ")
    offline(o, path)
    o.close()


def test_bert_mlm_fills_in_the_mask(browser, tmp_path: Path) -> None:
    run = LEGACY / "mlm"
    text = "the [MASK] was great"
    path = write(run, text, tmp_path / "mlm.html")
    want = attnkit.load(run).fill_mask(text, top_k=10)
    o = Opened(browser, path.as_uri())
    boxes = o.page.locator("#mlm-masks .mask-box")
    assert boxes.count() == len(want)
    for box, fills in zip(boxes.all(), want, strict=True):
        assert box.locator(".lab").all_inner_texts() == [tok for tok, _ in fills]
        assert box.locator(".val").all_inner_texts() == [pct(p) for _, p in fills]
    assert o.page.locator("#input .chip.mask").count() == len(want)
    # pick head 2 and the [MASK] as the query: the row of weights the model had there
    (t,) = traces_of(path)
    tokens = t["inputs"][0]["tokens"]
    where = tokens.index("[MASK]")
    w = decode_array(t["stacks"][0]["layers"][0]["attention"][0]["weights"])  # (H, T, T)
    o.page.locator("#input .chip.mask").first.click()
    assert o.page.input_value("#pick-query") == str(where)
    o.page.select_option("#pick-head", "1")
    assert o.column("#query-table", "weight α")[: len(tokens)] == shown(w[1, where])
    o.page.select_option("#pick-head", "0")
    assert o.column("#query-table", "weight α")[: len(tokens)] == shown(w[0, where])
    offline(o, path)
    shoot(o.page.locator("#family"), "mlm", tmp_path)
    o.close()


def test_elmo_layer_mix_and_bilm(browser, elmo_runs, tmp_path: Path) -> None:
    text = "the movie was great"
    path = write(elmo_runs["elmo"], text, tmp_path / "elmo.html")
    clf = attnkit.load(elmo_runs["elmo"])
    weights, gamma = clf.model.mix_weights()
    want = clf.predict([text])[0]
    o = Opened(browser, path.as_uri())
    assert o.text("#cls-pred") == f"predicted: {want.label} ({pct(want.probability)})"
    assert o.text("#elmo-gamma") == f"γ = {gamma:.4f}"
    assert o.column("#elmo-table", "softmax(s)_j") == shown(weights, 4)
    assert o.page.locator("#fam-elmo").is_visible()
    # step through the tokens on the layer-mix map: the table follows the clicked column
    (t,) = traces_of(path)
    tokens = t["inputs"][0]["tokens"]
    mix = t["view"]["elmo"]
    norms, parts = decode_array(mix["layer_norms"]), decode_array(mix["contributions"])  # (L, T)
    names = o.column("#elmo-table", "layer j")
    grid = Heatmap(o.page, "#elmo-map", len(names), len(tokens))
    for i in range(len(tokens)):
        grid.click(0, i)
        assert o.column("#elmo-table", f'‖h_j‖ "{tokens[i]}"') == shown(norms[:, i])
        assert o.column("#elmo-table", f'‖γ softmax(s)_j h_j‖ "{tokens[i]}"') == shown(parts[:, i])
        (last,) = shown([parts[-1, i]])
        assert grid.tip(len(names) - 1, i) == f"{names[-1]} · {tokens[i]}: {last}"
    assert o.page.locator("#no-attention").is_visible()  # no head to pick: a biLSTM
    offline(o, path)
    shoot(o.page.locator("#family"), "elmo", tmp_path)
    o.close()
    path = write(elmo_runs["bilm"], text, tmp_path / "bilm.html")
    (t,) = traces_of(path)
    o = Opened(browser, path.as_uri())
    rows = o.page.locator("#bilm-table tbody tr")
    assert rows.count() == len(t["inputs"][0]["tokens"])

    def top3(row: dict) -> str:
        return ", ".join(f"{c['token']} {pct(c['probability'])}" for c in row["top"][:3])

    for side in ("forward", "backward"):
        want = {r["position"]: top3(r) for r in t["view"][side]}
        got = o.column(
            "#bilm-table", f"{side} LM: {'next' if side == 'forward' else 'previous'} token"
        )
        assert got == [want.get(i, "") for i in range(rows.count())]
    assert o.page.locator("#no-attention").is_visible()
    offline(o, path)
    o.close()


def test_bert_pair_shows_its_segments(browser, tmp_path: Path) -> None:
    """A BERT sentence-pair classifier (built in memory: only the display is tested here)."""
    import dataclasses

    import torch

    from attnkit.app.explain import trace
    from attnkit.app.explain.page import render_page, write_page
    from attnkit.models.bert import BertConfig
    from attnkit.tasks.classify import ClassifierPredictor

    base = attnkit.load(LEGACY / "classify-transformer")
    tk = base.tokenizer
    cfg = BertConfig(arch="bert-classifier", max_len=32, d_model=16, num_heads=2, d_ff=32,
                     num_layers=2, num_classes=3, vocab_size=tk.vocab_size, pad_id=tk.pad_id)  # fmt: skip
    torch.manual_seed(0)
    data = dataclasses.replace(base.config.data, max_len=32)
    config = dataclasses.replace(base.config, model=cfg, data=data)
    pred = ClassifierPredictor(cfg.build().eval(), tk, config, ["a", "b", "c"], pairs=True)
    t = trace(pred, "the movie was great", pair="boring film")
    path = write_page(tmp_path / "pair.html", render_page(t))
    o = Opened(browser, path.as_uri())
    segments = t["inputs"][0]["segments"]
    chips = o.page.locator("#input .chip")
    assert [("seg1" in (c.get_attribute("class") or "")) for c in chips.all()] == [
        s == 1 for s in segments
    ]
    assert "sentence B (segment 1)" in o.text("#input")
    caption = o.page.locator("#emb-maps figcaption").all_inner_texts()
    assert "segment embedding rows" in caption and "sum, after LayerNorm" in caption
    assert "+ segment embedding" in o.text("#emb-formula")
    want = pred.predict(["the movie was great"], pairs=["boring film"])[0]
    assert o.text("#cls-pred") == f"predicted: {want.label} ({pct(want.probability)})"
    assert o.page.locator("#pick-layer option").count() == 2
    offline(o, path)
    o.close()


def test_a_long_input_is_cut_with_a_visible_note(browser, served_runs, tmp_path: Path) -> None:
    long = " ".join(["정말 재미있어요"] * 40)
    path = write(served_runs["sentiment"], long, tmp_path / "long.html", "--max-tokens", "8")
    o = Opened(browser, path.as_uri())
    note = o.page.locator("#notes li.cut")
    assert note.is_visible() and "cut to 8 tokens" in note.inner_text()
    assert o.page.locator("#input .chip").count() == 8
    o.close()


# --------------------------------------------------------------------------------------
# the served page: type a new text
# --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def url(served_runs):
    with served([f"{n}={served_runs[n]}" for n in ("sentiment", "verse")]) as base:
        yield base


def test_served_explorer_takes_a_new_text(browser, url, served_runs) -> None:
    index = Opened(browser, url)
    links = index.page.locator("#explain-links a")
    assert links.all_inner_texts() == ["explain sentiment", "explain verse"]
    index.page.select_option("#classify-model", "sentiment")
    index.page.fill("#classify-text", "정말 최고")
    with index.page.expect_navigation():
        links.first.click()
    index.page.wait_for_selector("body[data-ready=true]")
    assert index.page.locator("#input .chip .t").all_inner_texts()[:2] == ["정말", "최"]
    index.close()
    o = Opened(browser, f"{url}/explain/sentiment?text=" + "재미있어요")
    page = o.page
    assert not page.is_visible("#fixed-note") and page.is_visible("#ask")
    new = "지루해요 최악"
    page.fill("#ask-text", new)
    page.click("#ask-btn")
    page.wait_for_selector("body[data-renders='2'][data-ready=true]")
    want = attnkit.load(served_runs["sentiment"]).predict([new])[0]
    assert o.text("#cls-pred") == f"predicted: {want.label} ({pct(want.probability)})"
    assert all(u.startswith(url) for u in o.requests), o.requests  # its own server only
    page.fill("#ask-text", "x" * 2001)  # over the server's limit: its JSON error, shown
    page.click("#ask-btn")
    page.wait_for_selector("#error:not([hidden])")
    assert "413" in o.text("#error")
    o.close()
    o = Opened(browser, f"{url}/explain/verse?text=First&steps=3")
    assert o.page.is_visible("#ask-steps-label")
    assert o.text("#lm-step-label").startswith("step 1 of 3")
    o.close()


def test_served_gpt_page_generates_from_a_new_prompt(browser, url, served_runs) -> None:
    """Typed on the served GPT page, a new prompt is sent to the server, which generates
    again (temperature 1, seed 0): the page steps through what ``generate`` gives."""
    o = Opened(browser, f"{url}/explain/verse?text=First&steps=3")
    page = o.page
    prompt, steps = "Before we", 5
    page.fill("#ask-text", prompt)
    page.fill("#ask-steps", str(steps))
    page.click("#ask-btn")
    page.wait_for_selector("body[data-renders='2'][data-ready=true]")
    assert f"{url}/v1/explain" in o.requests  # a new trace, from the server
    assert all(u.startswith(url) for u in o.requests), o.requests  # its own server only
    lm = attnkit.load(served_runs["verse"])
    want = lm.generate(prompt, max_new_tokens=steps, temperature=1.0, top_k=0, seed=0)[0]
    assert "".join(page.locator("#lm-text .prompt").all_text_contents()) == prompt
    chosen = []
    for k in range(steps):
        assert o.text("#lm-step-label").startswith(f"step {k + 1} of {steps}")
        chosen.append(page.text_content("#lm-chosen"))
        if k < steps - 1:
            page.click("#lm-next")
    assert "".join(chosen) == want.text
    # the last step's bars are the server's trace (what the page asked for) at temperature 1
    request = {"model": "verse", "text": prompt, "max_new_tokens": steps}
    with urlopen(Request(f"{url}/v1/explain", data=json.dumps(request).encode(),
                         headers={"Content-Type": "application/json"})) as answer:  # fmt: skip
        (t,) = [x["trace"] for x in json.load(answer)["traces"]]
    step = t["view"]["steps"][-1]
    assert "".join(s["chosen"]["token"] for s in t["view"]["steps"]) == want.text
    assert page.input_value("#lm-temp") == "1"
    assert page.locator("#lm-bars .val").all_inner_texts() == [
        pct(c["filtered"]) for c in step["top"]
    ]  # the distribution the token was drawn from ([PAD] ... left out)
    o.close()

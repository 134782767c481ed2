"""The explorer's sections 5 and 6 (issue 39): the FFN and Add & Norm drawn from the run's own
config (activation, pre/post-norm) with each LayerNorm's mu, sigma, gamma, beta checked
against ``torch.nn.LayerNorm``; teacher forcing for a seq2seq run given a reference target;
next-sentence prediction for a bert-pretrain run given a pair; the seq2seq decoder rows
labelled alike in sections 3 and 6.

The trace tests run everywhere; the page tests drive headless Chromium (skipped, with the
reason, without Playwright or a Chromium binary)."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from torch import nn

import attnkit
from attnkit.app.cli import main
from attnkit.app.explain import decode_array, trace
from attnkit.app.explain.page import explain_traces
from attnkit.core.errors import InputError
from attnkit.models.bert import BertConfig
from attnkit.models.classifier import TransformerClassifierConfig
from attnkit.models.gpt import GPTConfig
from attnkit.nn.layers import AddNorm
from attnkit.tasks.bert_pretrain import BertPretrainPredictor
from attnkit.tasks.classify import ClassifierPredictor
from attnkit.tasks.lm import LMPredictor
from conftest import pretraining_documents
from explain_support import CHROMIUM, WHY_NOT, Heatmap, Opened, traces_of, write

LEGACY = Path(__file__).parents[2] / "fixtures" / "legacy_runs"
TEXT = "the movie was great"
SOURCE, REFERENCE = "red sun", "blue moon"


def arr(a: dict) -> np.ndarray:
    return decode_array(a).astype(np.float64)


@pytest.fixture(scope="module")
def base() -> ClassifierPredictor:
    return attnkit.load(LEGACY / "classify-transformer", precision="fp32")


def _config(pred, task: str, model_cfg):
    data = dataclasses.replace(pred.config.data, max_len=model_cfg.max_len)
    return dataclasses.replace(pred.config, task=task, model=model_cfg, data=data)


def _sizes(pred) -> dict:
    return {"vocab_size": pred.tokenizer.vocab_size, "pad_id": pred.tokenizer.pad_id}


def _gpt(base, activation: str = "gelu") -> LMPredictor:
    cfg = GPTConfig(max_len=32, d_model=16, num_heads=2, d_ff=32, num_layers=2,
                    activation=activation, **_sizes(base))  # fmt: skip
    torch.manual_seed(0)
    return LMPredictor(cfg.build().eval(), base.tokenizer, _config(base, "lm", cfg))


def _classifier(base, activation: str = "relu") -> ClassifierPredictor:
    cfg = TransformerClassifierConfig(max_len=32, d_model=16, num_heads=2, d_ff=32, num_layers=2,
                                      activation=activation, **_sizes(base))  # fmt: skip
    torch.manual_seed(0)
    return ClassifierPredictor(cfg.build().eval(), base.tokenizer,
                               _config(base, "classify", cfg), ["neg", "pos"])  # fmt: skip


def _bert_pretrain(base, arch: str = "bert-pretraining") -> BertPretrainPredictor:
    cfg = BertConfig(arch=arch, max_len=32, d_model=16, num_heads=2, d_ff=32, num_layers=1,
                     **_sizes(base))  # fmt: skip
    torch.manual_seed(0)
    return BertPretrainPredictor(cfg.build().eval(), base.tokenizer,
                                 _config(base, "bert-pretrain", cfg))  # fmt: skip


def _layer_norm_calls(model: nn.Module):
    """{AddNorm module name: (input, output)} of each AddNorm's own nn.LayerNorm, recorded by
    forward hooks (independent of the explainer's capture)."""
    seen: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    hooks = []
    for name, module in model.named_modules():
        if isinstance(module, AddNorm):

            def hook(mod, args, out, name=name):  # noqa: ANN001, ANN202
                seen.setdefault(name, (args[0].detach(), out.detach()))

            hooks.append(module.norm.register_forward_hook(hook))
    return seen, hooks


# --------------------------------------------------------------------------------------
# 1. FFN and Add & Norm from the run's config; LayerNorm statistics
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["gpt", "classifier"])
def test_layer_norm_statistics_are_torch_layer_norms(base, kind: str) -> None:
    """mu, sigma, gamma, beta and the normalised values of every LayerNorm, per token, are
    torch.nn.LayerNorm's own (to 1e-5); the activation and pre/post-norm are the config's."""
    pred = _gpt(base, "gelu") if kind == "gpt" else _classifier(base, "relu")
    model = pred.model
    seen, hooks = _layer_norm_calls(model)
    try:
        t = trace(pred, TEXT, steps=1, temperature=0.0, precision="float32")
        # the last forward pass is the one the trace shows: keep only its calls
        seen.clear()
        if kind == "gpt":
            with torch.no_grad():
                model(torch.tensor([t["inputs"][0]["ids"]]))
        else:
            with torch.no_grad():
                model(torch.tensor([t["inputs"][0]["ids"]]),
                      torch.ones(1, len(t["inputs"][0]["ids"]), dtype=torch.bool))  # fmt: skip
    finally:
        for h in hooks:
            h.remove()
    (stack,) = t["stacks"]
    norm_first = kind == "gpt"
    assert stack["norm_first"] is norm_first
    modules = dict(model.named_modules())
    checked = 0
    for layer in stack["layers"]:
        r = layer["residual"]
        assert r["activation"] == pred.config.model.activation
        assert r["norm_first"] is norm_first
        prefix = layer["attention"][0]["module"].rsplit(".", 1)[0]
        for i, sub in enumerate(r["sublayers"]):
            name = f"{prefix}.add_norm{i + 1}"
            ln = modules[name].norm
            z, out = seen[name]
            z, out = z[0].double(), out[0].double()
            n = sub["norm"]
            assert n["eps"] == ln.eps
            var, mean = torch.var_mean(z, dim=-1, unbiased=False)
            np.testing.assert_allclose(arr(n["mean"]), mean.numpy(), atol=1e-5)
            np.testing.assert_allclose(arr(n["std"]), var.sqrt().numpy(), atol=1e-5)
            np.testing.assert_allclose(arr(n["gamma"]), ln.weight.detach().numpy(), atol=1e-6)
            np.testing.assert_allclose(arr(n["beta"]), ln.bias.detach().numpy(), atol=1e-6)
            assert n["gamma_norm"] == pytest.approx(float(ln.weight.detach().norm()), abs=1e-5)
            assert n["beta_norm"] == pytest.approx(float(ln.bias.detach().norm()), abs=1e-5)
            k = arr(n["x"]).shape[1]
            assert k == min(8, z.shape[-1])
            np.testing.assert_allclose(arr(n["x"]), z[:, :k].numpy(), atol=1e-5)
            np.testing.assert_allclose(arr(n["normalized"]), out[:, :k].numpy(), atol=1e-5)
            # the page's formula from the stored numbers gives torch's output
            hat = (arr(n["x"]) - arr(n["mean"])[:, None]) / np.sqrt(
                arr(n["std"])[:, None] ** 2 + n["eps"]
            )
            formula = arr(n["gamma"])[:k] * hat + arr(n["beta"])[:k]
            np.testing.assert_allclose(formula, out[:, :k].numpy(), atol=1e-5)
            checked += 1
    assert checked == 2 * len(stack["layers"]) == 4


def test_residual_records_each_activation(base) -> None:
    for activation in ("relu", "gelu"):
        t = trace(_classifier(base, activation), TEXT, precision="float32")
        assert {layer["residual"]["activation"] for layer in t["stacks"][0]["layers"]} == {
            activation
        }
    t = trace(_gpt(base, "gelu_tanh"), TEXT, steps=1, precision="float32")
    assert t["stacks"][0]["layers"][0]["residual"]["activation"] == "gelu_tanh"


# --------------------------------------------------------------------------------------
# 2. teacher forcing
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("run", ["translate-transformer", "chat-lstm"])
def test_teacher_forcing_is_the_reference_shifted_right(run: str) -> None:
    pred = attnkit.load(LEGACY / run, precision="fp32")
    tk = pred.tokenizer
    t = trace(pred, SOURCE, target=REFERENCE, precision="float32")
    tf = t["view"]["teacher_forcing"]
    ref = tk.encode(REFERENCE, max_len=pred.max_len - 1)
    gold = [*ref, tk.eos_id]
    assert tf["reference_ids"] == gold and tf["reference_text"] == REFERENCE
    assert tf["ratio"] == pred.config.training.teacher_forcing_ratio
    # the training-time input: [BOS] y_1 .. y_{t-1}; P(y_t) from the teacher-forced pass
    src, mask = pred._batch([pred._one(SOURCE)])
    with torch.no_grad():
        logits = pred.model(src, torch.tensor([[tk.bos_id, *ref]]), mask).logits[0]
    probs = logits.float().softmax(-1)
    assert [s["input_train"]["id"] for s in tf["steps"]] == [tk.bos_id, *ref]
    np.testing.assert_allclose([s["reference"]["probability"] for s in tf["steps"]],
                               probs[torch.arange(len(gold)), gold].numpy(), atol=1e-6)  # fmt: skip
    loss = torch.nn.functional.cross_entropy(logits.float(), torch.tensor(gold))
    assert tf["loss"] == pytest.approx(float(loss), abs=1e-5)
    # the inference-time input: the model's own previous output, as decoded freely
    free = [s["chosen"]["id"] for s in t["view"]["steps"]]
    for s in tf["steps"]:
        k = s["step"] - 1
        if k < len(free):
            assert s["input_free"]["id"] == (tk.bos_id if k == 0 else free[k - 1])
            assert s["free"]["id"] == free[k]
            assert s["free"]["probability"] == pytest.approx(
                t["view"]["steps"][k]["top"][0]["probability"], abs=1e-6
            )
        else:
            assert s["input_free"] is None and s["free"] is None
    # the free decoding is the same as without a target
    plain = trace(pred, SOURCE, precision="float32")
    assert plain["view"]["output_tokens"] == t["view"]["output_tokens"]
    assert "teacher_forcing" not in plain["view"]


def test_target_is_for_seq2seq_runs_only(base) -> None:
    with pytest.raises(InputError, match="translate / chat"):
        trace(base, TEXT, target="x")
    with pytest.raises(InputError, match="translate / chat"):
        explain_traces(base, TEXT, target="x")
    pred = attnkit.load(LEGACY / "translate-transformer", precision="fp32")
    with pytest.raises(InputError, match="empty"):
        trace(pred, SOURCE, target="   ")


def test_target_in_cli_inline_and_server(tmp_path: Path) -> None:
    run = LEGACY / "translate-transformer"
    path = tmp_path / "tf.html"
    assert main(["explain", str(run), SOURCE, "--target", REFERENCE, "--beam", "1",
                 "--html", str(path)]) == 0  # fmt: skip
    (t,) = traces_of(path)
    assert t["view"]["teacher_forcing"]["reference_text"] == REFERENCE
    ex = attnkit.explain(run, SOURCE, target=REFERENCE, beam=1)
    assert (
        ex.trace["view"]["teacher_forcing"]["reference_ids"]
        == (t["view"]["teacher_forcing"]["reference_ids"])
    )
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from attnkit.app.serve import Limits, create_app

    app = create_app([str(run)], limits=Limits(max_chars=40))
    with TestClient(app) as client:
        ok = client.post("/v1/explain", json={"text": SOURCE, "target": REFERENCE, "beam": 1})
        assert ok.status_code == 200, ok.text
        (item,) = ok.json()["traces"]
        assert item["trace"]["view"]["teacher_forcing"]["reference_text"] == REFERENCE
        long = client.post("/v1/explain", json={"text": SOURCE, "target": "x " * 40})
        assert long.status_code == 413, long.text
        assert "target" in long.json()["error"]["message"]


def test_cli_serves_the_page_with_its_target(monkeypatch, capsys) -> None:
    """Without --html, the served first page carries the teacher forcing of --target; a
    --target over the server's character limit is refused before any model is loaded."""
    pytest.importorskip("fastapi")
    import re

    from fastapi.testclient import TestClient

    import attnkit.app.serve.server as server

    served = {}

    class Fake:
        def __init__(self, app, limits):  # noqa: ANN001
            served["app"] = app

        def run(self, sockets):  # noqa: ANN001
            served["sockets"] = sockets

    monkeypatch.setattr(server, "make_server", Fake)
    monkeypatch.setattr(server, "bind", lambda host, port: [])
    run = f"mt={LEGACY / 'translate-transformer'}"
    assert main(["explain", run, SOURCE, "--target", REFERENCE, "--port", "8123"]) == 0
    client = TestClient(served["app"], base_url="http://127.0.0.1:8123")
    page = client.get("/explain/mt")
    data = re.search(r'id="trace-data">(.*?)</script>', page.text, re.S).group(1)
    for item in json.loads(data)["traces"]:  # greedy and beam
        assert item["trace"]["view"]["teacher_forcing"]["reference_text"] == REFERENCE
    capsys.readouterr()
    assert main(["explain", run, SOURCE, "--target", "x" * 5000, "--port", "8123"]) == 2
    assert "--target's characters must be at most" in capsys.readouterr().err


# --------------------------------------------------------------------------------------
# 3. next-sentence prediction
# --------------------------------------------------------------------------------------
def test_nsp_of_a_pair_is_the_heads(base) -> None:
    pred = _bert_pretrain(base)
    a, b = "the movie was great", "the [MASK] was bad"
    t = trace(pred, a, pair=b, precision="float32")
    (inp,) = t["inputs"]
    tk = pred.tokenizer
    want = [tk.cls_id, *tk.encode(a), tk.sep_id, *tk.encode(b), tk.sep_id]
    assert inp["ids"] == want
    n_a = len(tk.encode(a)) + 2
    assert inp["segments"] == [0] * n_a + [1] * (len(want) - n_a)
    nsp = t["view"]["nsp"]
    assert nsp["available"] is True
    assert nsp["is_next"] == pytest.approx(pred.next_sentence(a, b).probability, abs=1e-6)
    assert nsp["is_next"] + nsp["not_next"] == pytest.approx(1.0, abs=1e-6)
    # the MLM fills of the pair: the model's own, with the segments
    x, types = torch.tensor([want]), torch.tensor([inp["segments"]])
    where = x == tk.mask_id
    with torch.no_grad():
        probs = pred.model(x, None, types, positions=where).logits.softmax(-1)[0]
    (mask,) = t["view"]["masks"]
    assert mask["position"] == int(where[0].nonzero()[0])
    np.testing.assert_allclose([c["probability"] for c in mask["top"]],
                               probs.topk(len(mask["top"])).values.numpy(), atol=1e-6)  # fmt: skip
    assert t["embeddings"][0]["segment"] is not None
    # a pair with no [MASK] is fine: NSP alone
    assert trace(pred, a, pair="the movie was bad")["view"]["masks"] == []


def test_nsp_without_a_head_says_so(base) -> None:
    t = trace(_bert_pretrain(base, "bert-mlm"), TEXT, pair="the movie was bad")
    nsp = t["view"]["nsp"]
    assert nsp["available"] is False and nsp["is_next"] is None
    assert "no next-sentence (NSP) head" in nsp["note"]
    assert any("no next-sentence" in note for note in t["notes"])


def test_pair_is_still_refused_by_a_plain_mlm_run() -> None:
    pred = attnkit.load(LEGACY / "mlm", precision="fp32")
    with pytest.raises(InputError, match="second sentence"):
        explain_traces(pred, "the [MASK] was great", pair="b")
    with pytest.raises(InputError, match="second sentence"):
        trace(pred, "the [MASK] was great", pair="b")


@pytest.fixture(scope="module")
def pretrain_run(tmp_path_factory) -> Path:
    """A tiny bert-pretrain run (NSP head), trained for a few steps."""
    root = tmp_path_factory.mktemp("pretrain")
    words = ["the", "a", "cat", "dog", "sat", "ran", "on", "mat", "big", "small"]
    corpus = root / "corpus.txt"
    corpus.write_text("\n\n".join(pretraining_documents(words, n=30)) + "\n", encoding="utf-8")
    recipe = {
        "task": "bert-pretrain",
        "data": {"name": "file", "train": str(corpus), "max_len": 24, "val_fraction": 0.2},
        "tokenizer": {"vocab_size": 40, "min_frequency": 1},
        "model": {"arch": "bert-pretraining", "d_model": 16, "num_heads": 2, "d_ff": 32,
                  "num_layers": 1},
        "training": {"max_steps": 3, "batch_size": 8, "lr": 1e-3, "progress": False,
                     "log_every": 1, "eval_every": 3, "num_threads": 1},
    }  # fmt: skip
    (root / "pre.yaml").write_text(yaml.safe_dump(recipe), encoding="utf-8")
    attnkit.train(root / "pre.yaml", out=root / "pre", log=lambda *_: None)
    return root / "pre"


def test_cli_pair_on_a_pretraining_run(pretrain_run: Path, tmp_path: Path) -> None:
    path = tmp_path / "nsp.html"
    assert main(["explain", str(pretrain_run), "the cat sat", "--pair", "the dog ran",
                 "--html", str(path)]) == 0  # fmt: skip
    (t,) = traces_of(path)
    pred = attnkit.load(pretrain_run, precision="fp32")
    assert t["view"]["nsp"]["is_next"] == pytest.approx(
        pred.next_sentence("the cat sat", "the dog ran").probability, abs=1e-6
    )
    assert t["inputs"][0]["tokens"].count("[SEP]") == 2


# --------------------------------------------------------------------------------------
# the pages (headless Chromium)
# --------------------------------------------------------------------------------------
browser_only = pytest.mark.skipif(CHROMIUM is None, reason=WHY_NOT or "no Chromium")


def _playwright() -> None:
    pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed (make test installs it)"
    )


def _stats(o: Opened) -> dict[str, float]:
    spans = o.page.locator("#an-stats [data-stat]")
    return {
        spans.nth(k).get_attribute("data-stat"): float(spans.nth(k).get_attribute("data-value"))
        for k in range(spans.count())
    }


def _check_add_norm(o: Opened, t: dict, norm_first: bool) -> None:
    """The first LayerNorm's numbers for token 1, as the page shows them, are the trace's."""
    page = o.page
    page.select_option("#res-token", "1")
    n = t["stacks"][0]["layers"][0]["residual"]["sublayers"][0]["norm"]
    stats = _stats(o)
    assert stats["mean"] == pytest.approx(arr(n["mean"])[1], abs=1e-6)
    assert stats["std"] == pytest.approx(arr(n["std"])[1], abs=1e-6)
    assert stats["gamma-norm"] == pytest.approx(n["gamma_norm"], abs=1e-6)
    assert stats["eps"] == n["eps"]
    formula = o.text("#an-formula")
    if norm_first:
        assert formula.startswith("pre-norm: x + Sublayer(LayerNorm(x))")
    else:
        assert formula.startswith("post-norm: LayerNorm(x + Sublayer(x))")
    assert "γ ⊙ " in formula and "√(σ² + ε)" in formula
    # each row: the formula from the shown numbers, and the LayerNorm's captured output
    computed = o.column("#an-table", "γ ⊙ (x − μ)/√(σ²+ε) + β")
    captured = o.column("#an-table", "LayerNorm (captured)")
    want = arr(n["normalized"])[1]
    assert len(captured) == len(want)
    for a, b, w in zip(computed, captured, want, strict=True):
        assert abs(float(a) - w) <= 2e-4 and abs(float(b) - w) <= 6e-5


@browser_only
@pytest.mark.slow
def test_gpt_page_is_pre_norm_gelu(browser, served_runs, tmp_path: Path) -> None:
    _playwright()
    run = served_runs["verse"]
    path = write(run, "First", tmp_path / "gpt.html", "--steps", "2")
    (t,) = traces_of(path)
    activation = attnkit.load(run).config.model.activation
    assert activation.startswith("gelu")
    o = Opened(browser, path.as_uri())
    ffn = o.text("#ffn-formula")
    assert ffn.startswith("FFN(x) = GELU(xW1 + b1) W2 + b2") and "max(0" not in ffn
    assert "tanh" in ffn if activation == "gelu_tanh" else "erf" in ffn
    assert "max(0" not in o.text("#res-note") and "pre-norm" in o.text("#res-note")
    assert "GELU > 0" in o.text("#res-table thead")
    _check_add_norm(o, t, norm_first=True)
    o.page.select_option("#lang", "ko")
    assert "포지션 와이즈" in o.text("#ffn-note") and "층 정규화" in o.text("#an-note")
    o.close()


@browser_only
@pytest.mark.slow
def test_classifier_page_is_post_norm_relu(browser, tmp_path: Path) -> None:
    _playwright()
    run = tmp_path / "relu-run"
    shutil.copytree(LEGACY / "classify-transformer", run)
    config = json.loads((run / "config.json").read_text())
    config["model"]["activation"] = "relu"  # the same weights, read with ReLU
    (run / "config.json").write_text(json.dumps(config))
    path = write(run, TEXT, tmp_path / "cls.html")
    (t,) = traces_of(path)
    assert t["stacks"][0]["layers"][0]["residual"]["activation"] == "relu"
    o = Opened(browser, path.as_uri())
    assert o.text("#ffn-formula").startswith("FFN(x) = max(0, xW1 + b1) W2 + b2")
    assert "GELU" not in o.text("#ffn-formula")
    assert "FFN units > 0 (ReLU)" in o.text("#res-table thead")
    assert "post-norm" in o.text("#res-note")
    active = arr(t["stacks"][0]["layers"][0]["residual"]["ffn_active"])
    o.page.select_option("#res-token", "1")
    cell = o.column("#res-table", o.page.locator("#res-table thead th").last.inner_text())[-1]
    assert cell == f"{100 * active[1]:.1f}%"
    _check_add_norm(o, t, norm_first=False)
    o.close()


@browser_only
@pytest.mark.slow
@pytest.mark.parametrize("name", ["translator", "bot"])
def test_teacher_forcing_panel(browser, served_runs, tmp_path: Path, name: str) -> None:
    _playwright()
    path = write(served_runs[name], SOURCE, tmp_path / "tf.html", "--beam", "1",
                 "--target", REFERENCE)  # fmt: skip
    (t,) = traces_of(path)
    tf = t["view"]["teacher_forcing"]
    o = Opened(browser, path.as_uri())
    page = o.page
    assert page.locator("#teacher-forcing").is_visible()
    train_in = o.column("#tf-table", "training input")
    assert train_in == ["[BOS]", *tf["reference"][:-1]]
    assert o.column("#tf-table", "reference y_t") == tf["reference"]
    assert o.column("#tf-table", "P(y_t) forced") == [
        f"{100 * s['reference']['probability']:.1f}%" for s in tf["steps"]
    ]
    free_in = o.column("#tf-table", "inference input")
    out = t["view"]["output_tokens"]
    assert free_in == (["[BOS]", *out[:-1]] + ["—"] * len(free_in))[: len(free_in)]
    chosen = o.column("#tf-table", "chosen")
    assert chosen == (out + ["—"] * len(chosen))[: len(chosen)]
    assert "teacher_forcing_ratio = 1" in o.text("#tf-note")
    page.select_option("#lang", "ko")
    assert "교사 강요" in o.text("#tf-note")
    o.close()


@browser_only
@pytest.mark.slow
def test_teacher_forcing_hint_without_a_target(browser, served_runs, tmp_path: Path) -> None:
    _playwright()
    path = write(served_runs["translator"], SOURCE, tmp_path / "plain.html", "--beam", "1")
    o = Opened(browser, path.as_uri())
    assert "--target" in o.text("#tf-note")
    assert o.page.locator("#tf-table tbody tr").count() == 0
    o.close()


@browser_only
@pytest.mark.slow
def test_nsp_panel(browser, base, tmp_path: Path) -> None:
    _playwright()
    pred = _bert_pretrain(base)
    ex = attnkit.explain(pred, "the movie was great", pair="the [MASK] was bad")
    path = ex.save(tmp_path / "nsp.html")
    nsp = ex.trace["view"]["nsp"]
    o = Opened(browser, path.as_uri())
    page = o.page
    assert page.locator("#nsp").is_visible()
    labels = page.locator("#nsp-bars .lab").all_inner_texts()
    values = page.locator("#nsp-bars .val").all_inner_texts()
    assert labels == ["IsNext", "NotNext"]
    assert values == [f"{100 * nsp['is_next']:.1f}%", f"{100 * nsp['not_next']:.1f}%"]
    segments = page.locator("#nsp-pair .chip").evaluate_all(
        "cs => cs.map(c => Number(c.dataset.segment))"
    )
    assert segments == ex.trace["inputs"][0]["segments"]
    assert page.locator("#mlm-masks .mask-box").count() == 1  # the fills beside it
    o.close()
    # no NSP head: a clear note, no bars
    ex = attnkit.explain(_bert_pretrain(base, "bert-mlm"), TEXT, pair="the movie was bad")
    o = Opened(browser, ex.save(tmp_path / "mlm.html").as_uri())
    assert "no NSP head" in o.text("#nsp-note")
    assert o.page.locator("#nsp-bars .bar-row").count() == 0
    o.close()


@browser_only
@pytest.mark.slow
@pytest.mark.parametrize("name", ["translator", "bot"])
def test_decoder_rows_are_labelled_alike(browser, served_runs, tmp_path: Path, name: str) -> None:
    """Section 3's query row and section 6's alignment row of a step carry the same label,
    "input ⇒ predicted output"."""
    _playwright()
    path = write(served_runs[name], SOURCE, tmp_path / "rows.html", "--beam", "1")
    (t,) = traces_of(path)
    inputs = t["inputs"][1]["tokens"]
    outputs = t["view"]["output_tokens"]
    o = Opened(browser, path.as_uri())
    page = o.page
    rows = len(outputs)
    cols = len(t["inputs"][0]["tokens"])
    grid = Heatmap(page, "#s2s-align", rows, cols)
    for step in range(1, min(rows, 3) + 1):
        label = f"{inputs[step - 1]} ⇒ {outputs[step - 1]}"
        grid.click(step - 1, 0)
        assert o.text("#s2s-step-label") == f"step {step} of {rows}: {label}"
        assert grid.tip(step - 1, 0).startswith(f"{label} ← ")
        selected = page.locator("#pick-query option:checked").inner_text()
        assert selected == f"{step - 1}: {label}"  # section 3: the same row, the same label
        assert o.text("#query-name").startswith(f'"{label}"')
    assert "input ⇒ predicted output" in o.text("#s2s-rows-note")
    page.select_option("#lang", "ko")
    assert "입력 ⇒ 예측한 출력" in o.text("#s2s-rows-note")
    o.close()


@browser_only
@pytest.mark.slow
def test_served_page_takes_a_target(browser, served_runs) -> None:
    """The served explorer of a seq2seq run has a reference-target field; what it posts
    comes back as the teacher-forcing table (its own server only)."""
    _playwright()
    pytest.importorskip("uvicorn")
    from browser_support import served

    with served([f"translator={served_runs['translator']}"]) as url:
        o = Opened(browser, f"{url}/explain/translator?text=red%20sun")
        page = o.page
        assert page.is_visible("#ask-target")
        assert page.locator("#tf-table tbody tr").count() == 0
        page.fill("#ask-target", REFERENCE)
        page.click("#ask-btn")
        page.wait_for_selector("body[data-renders='2'][data-ready=true]")
        assert o.column("#tf-table", "reference y_t")[:2] == ["blue", "moon"]
        assert all(u.startswith(url) for u in o.requests), o.requests
        o.close()


@browser_only
@pytest.mark.slow
def test_new_panels_fit_a_phone(browser, served_runs, base, tmp_path: Path) -> None:
    _playwright()
    pages = [
        write(served_runs["translator"], SOURCE, tmp_path / "tf.html", "--target", REFERENCE),
        attnkit.explain(_bert_pretrain(base), TEXT, pair="the [MASK] was bad").save(
            tmp_path / "nsp.html"
        ),
        write(served_runs["verse"], "First", tmp_path / "gpt.html", "--steps", "2"),
    ]
    for path in pages:
        page = browser.new_page(viewport={"width": 390, "height": 900})
        page.goto(path.as_uri())
        page.wait_for_selector("body[data-ready=true]")
        assert page.evaluate("document.documentElement.scrollWidth") <= 390, path.name
        page.close()

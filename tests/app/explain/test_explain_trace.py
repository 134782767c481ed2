"""The explainer's data (issue 34): ``attnkit.nn.capture`` and ``attnkit.app.explain.trace``.

The numbers in a trace are the model's own: each family's trace is compared, to 1e-6, with
what the predictor reports (probabilities, fill-ins, alignments, generated tokens) and with
the model's forward pass (attention weights by ``MultiHeadAttention``'s ``need_weights``,
tests/attention_support.py); the explicit attention
computed under capture equals the fused kernel's output; with capture off nothing is
recorded and the fused kernel runs. Runs: the legacy fixtures (trained tiny runs), the
session's tiny classify run, and tiny models built in memory with a legacy run's tokenizer
(GPT, BERT, ELMo, biLM, LSTM with every score function)."""

from __future__ import annotations

import dataclasses
import json
import shutil
import threading
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import attnkit
from attention_support import weights_by_need_weights
from attnkit.app.explain import decode_array, families, trace
from attnkit.app.explain.page import render_page
from attnkit.app.explain.schema import SCHEMA_VERSION, Trace
from attnkit.core.errors import InputError
from attnkit.models.bert import BertConfig
from attnkit.models.classifier import TransformerClassifierConfig
from attnkit.models.elmo import ELMoConfig
from attnkit.models.elmo_classifier import ELMoClassifierConfig
from attnkit.models.gpt import GPTConfig
from attnkit.models.gpt_classifier import GPTClassifierConfig
from attnkit.nn import capture as capture_module
from attnkit.nn.attention import SCORE_NAMES, KVCache, MultiHeadAttention
from attnkit.nn.capture import Recorder, capture
from attnkit.nn.layers import BlockConfig, Encoder
from attnkit.tasks.bert_pretrain import BertPretrainPredictor
from attnkit.tasks.bilm import BiLMPredictor
from attnkit.tasks.classify import ClassifierPredictor
from attnkit.tasks.lm import LMPredictor
from attnkit.tasks.qa import QAPredictor
from attnkit.tasks.seq2seq import Seq2SeqPredictor
from attnkit.tasks.tag import TagPredictor

LEGACY = Path(__file__).parents[2] / "fixtures" / "legacy_runs"
ATOL = 1e-6


def arr(a: dict) -> np.ndarray:
    return decode_array(a).astype(np.float64)


def _np(x) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        x = x.detach().float().cpu().numpy()
    return np.asarray(x, dtype=np.float64)


def close(got, want, atol: float = ATOL) -> None:
    np.testing.assert_allclose(_np(got), _np(want), atol=atol, rtol=0)


def check_schema(t: dict, family: str) -> None:
    """Top-level keys as the schema's ``Trace``, JSON-serialisable, arrays decodable."""
    assert set(t) == set(Trace.__annotations__)
    assert t["schema"] == SCHEMA_VERSION and t["family"] == family
    assert t["view"]["kind"] == family
    assert any("dropout is off" in note for note in t["notes"])
    assert t["dropout"]["active"] is False
    json.loads(json.dumps(t))
    for stack in t["stacks"]:
        for layer in stack["layers"]:
            for att in layer["attention"]:
                check_attention(att, stack["kind"])


def _tolerance(*arrays: dict) -> float:
    """What the stored precision allows: float32 1e-5, float16 (or uint8 steps of 1/255,
    which come only with float16 elsewhere) 3e-3."""
    return 1e-5 if {a["dtype"] for a in arrays} == {"float32"} else 3e-3


def check_attention(att: dict, kind: str) -> None:
    """The captured steps agree with each other: weights = softmax of the scores with the
    masked keys left out (so the scores really are before the mask: masked entries hold
    what Q K^T gave, not -inf), and, where the full Q and K are kept, scores = Q K^T x
    scale (Transformer) or = s_t . h_i (LSTM, dot score)."""
    w = arr(att["weights"])
    mask = decode_array(att["mask"]["array"]).astype(bool)
    assert (w[:, ~mask] == 0).all()  # masked keys get exactly 0
    rows = w.sum(-1)[:, mask.any(-1)]
    dtype = att["weights"]["dtype"]
    row_tol = {"float32": 1e-5, "float16": 1e-3}.get(dtype, 0.5 / 255 * w.shape[-1])
    np.testing.assert_allclose(rows, 1.0, atol=row_tol)
    if att["scores"] is None:  # coarsened: only the first layer of a stack keeps them
        return
    s = arr(att["scores"])
    assert w.shape == s.shape and np.isfinite(s).all()  # before the mask: no -inf in it
    z = np.where(mask, s, -np.inf)
    z = z - z.max(-1, keepdims=True)
    e = np.where(mask, np.exp(z), 0.0)
    soft = e / e.sum(-1, keepdims=True)
    np.testing.assert_allclose(w, soft, atol=_tolerance(att["scores"], att["weights"]), rtol=0)
    if "q" not in att:
        return
    q, k = arr(att["q"]), arr(att["k"])
    tol = _tolerance(att["scores"], att["q"], att["k"])
    name = att["score"]["name"]
    if kind == "transformer":
        want = q @ k.swapaxes(-1, -2) * att["score"]["scale"]
    elif name == "dot":  # LSTM: e_t,i = s_t . h_i
        want = q @ k.swapaxes(-1, -2)
    else:  # the other score functions are not a product of what is stored
        return
    np.testing.assert_allclose(s, want, atol=tol, rtol=tol)


# --------------------------------------------------------------------------------------
# the capture mechanism
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs", [{}, {"padding": True}, {"is_causal": True}, {"padding": True, "is_causal": True}]
)
def test_captured_explicit_attention_equals_fused(kwargs: dict) -> None:
    torch.manual_seed(0)
    mha = MultiHeadAttention(32, 4).eval()
    x = torch.randn(2, 7, 32)
    call = {"is_causal": kwargs.get("is_causal", False)}
    if kwargs.get("padding"):
        pad = torch.ones(2, 7, dtype=torch.bool)
        pad[1, 4:] = False
        call["key_padding_mask"] = pad
    with torch.no_grad():
        fused, none = mha(x, x, x, **call)
        _, weights = mha(x, x, x, need_weights=True, **call)
        with capture(mha) as rec:
            explicit, kept = mha(x, x, x, **call)
    assert none is None and kept is None  # need_weights=False still returns no weights
    close(explicit, fused)
    (r,) = rec.of("attention")
    close(r["weights"], weights)
    close(r["head_out"].transpose(1, 2).reshape(2, 7, 32) @ mha.out_proj.weight.T
          + mha.out_proj.bias, fused)  # fmt: skip
    assert r["role"] == ("causal_self" if call["is_causal"] else "self")
    # scores are before the mask: softmax of the unmasked scores differs where masked
    assert r["scores"].shape == (2, 4, 7, 7)


def test_captured_cross_attention_and_cache_equal_fused() -> None:
    torch.manual_seed(1)
    mha = MultiHeadAttention(16, 2, kdim=12, vdim=12).eval()
    y, memory = torch.randn(1, 3, 16), torch.randn(1, 5, 12)
    with torch.no_grad():
        fused, _ = mha(y, memory, memory)
        with capture(mha) as rec:
            explicit, _ = mha(y, memory, memory)
    close(explicit, fused)
    assert rec.of("attention")[0]["role"] == "cross"
    self_attn = MultiHeadAttention(16, 2).eval()  # incremental decoding with a KV cache
    x = torch.randn(1, 4, 16)
    with torch.no_grad():
        whole, _ = self_attn(x, x, x, is_causal=True)
        cache = KVCache()
        self_attn(x[:, :3], x[:, :3], x[:, :3], is_causal=True, cache=cache)
        with capture(self_attn) as rec:
            last, _ = self_attn(x[:, 3:], x[:, 3:], x[:, 3:], is_causal=True, cache=cache)
    close(last, whole[:, 3:])
    assert rec.of("attention")[0]["weights"].shape == (1, 2, 1, 4)


def test_capture_off_records_nothing_and_runs_the_fused_kernel(monkeypatch) -> None:
    torch.manual_seed(0)
    encoder = Encoder(BlockConfig(d_model=16, num_heads=2, d_ff=32, dropout=0.0), 2).eval()
    fused_calls = []
    sdpa = F.scaled_dot_product_attention

    def counting(*args, **kwargs):
        fused_calls.append(1)
        return sdpa(*args, **kwargs)

    def refuse(*args, **kwargs):
        raise AssertionError("recorded with capture off")

    monkeypatch.setattr(F, "scaled_dot_product_attention", counting)
    monkeypatch.setattr(capture_module, "record", refuse)
    monkeypatch.setattr(Recorder, "add", refuse)
    assert capture_module.ACTIVE is False and capture_module.current() is None
    with torch.no_grad():
        encoder(torch.randn(1, 5, 16))
    assert len(fused_calls) == 2  # one per layer: the fused kernel, as before


def test_a_capture_in_one_thread_leaves_other_threads_alone() -> None:
    torch.manual_seed(0)
    encoder = Encoder(BlockConfig(d_model=16, num_heads=2, d_ff=32, dropout=0.0), 1).eval()
    x = torch.randn(1, 5, 16)
    seen: dict[str, object] = {}

    def other() -> None:
        seen["recorder"] = capture_module.current()
        with torch.no_grad():
            seen["out"] = encoder(x)[0]

    with capture(encoder) as rec:
        worker = threading.Thread(target=other)
        worker.start()
        worker.join()
        assert capture_module.ACTIVE
    assert seen["recorder"] is None and rec.records == []  # the thread recorded nothing
    assert capture_module.ACTIVE is False
    with capture(encoder) as rec, torch.no_grad():
        close(encoder(x)[0], seen["out"])
    kinds = {r.kind for r in rec.records}
    assert {"attention", "add_norm", "ffn"} <= kinds
    assert [r.module for r in rec.of("attention")] == ["layers.0.self_attn"]


# --------------------------------------------------------------------------------------
# predictors: legacy runs and tiny models built in memory with a legacy run's tokenizer
# --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def base() -> ClassifierPredictor:
    return attnkit.load(LEGACY / "classify-transformer", precision="fp32")


def _config(pred, task: str, model_cfg):
    """``pred``'s run config for ``task`` and ``model_cfg`` (data.max_len: the model's)."""
    data = dataclasses.replace(pred.config.data, max_len=model_cfg.max_len)
    return dataclasses.replace(pred.config, task=task, model=model_cfg, data=data)


def _sizes(pred, **extra) -> dict:
    tk = pred.tokenizer
    return {"vocab_size": tk.vocab_size, "pad_id": tk.pad_id, **extra}


def _classifier(base, model_cfg, pairs: bool = False, labels=("neg", "pos")):
    torch.manual_seed(0)
    model = model_cfg.build().eval()
    return ClassifierPredictor(model, base.tokenizer, _config(base, "classify", model_cfg),
                               list(labels), pairs=pairs)  # fmt: skip


def check_classifier(pred, text: str, pair: str | None = None) -> dict:
    t = trace(pred, text, pair=pair, precision="float32")
    check_schema(t, "classifier")
    kwargs = {} if pair is None else {"pairs": [pair]}
    want = pred.predict([text], **kwargs)[0]
    close(t["view"]["probabilities"], list(want.probabilities.values()))
    assert t["view"]["predicted"] == want.label
    return t


def test_transformer_classifier_run(tiny_run_once: Path, tmp_path: Path) -> None:
    run = shutil.copytree(tiny_run_once, tmp_path / "run")
    text = "the movie was great 정말 최고"
    t = trace(run, text, precision="float32")  # a run directory: loaded here
    pred = attnkit.load(run, precision="fp32")
    check_schema(t, "classifier")
    close(t["view"]["probabilities"], list(pred.predict([text])[0].probabilities.values()))
    tokens, weights = pred.attention(text)
    assert t["inputs"][0]["tokens"] == tokens and "정말" in tokens  # Korean as strings
    (stack,) = t["stacks"]
    assert stack["name"] == "encoder" and len(stack["layers"]) == len(weights)
    for layer, w in zip(stack["layers"], weights, strict=True):
        (att,) = layer["attention"]
        close(arr(att["weights"]), w)
        assert att["mask"]["kinds"] == ["padding"] and decode_array(att["mask"]["array"]).all()
        assert att["score"]["name"] == "scaled_dot"
    # embeddings: token x sqrt(d_model) + the PE rows = what the first layer read
    (emb,) = t["embeddings"]
    model = pred.model
    ids = torch.tensor([t["inputs"][0]["ids"]])
    close(arr(emb["token"]), model.embed(ids)[0])
    assert emb["token_scale"] == pytest.approx(model.embed.scale)
    n = ids.size(1)
    close(arr(emb["position"]["rows"]), model.pos.pe[:n])
    close(arr(emb["sum"]), arr(emb["token"]) + arr(emb["position"]["rows"]))
    # residual stream and pooled vector from the model's own encoder
    with torch.no_grad():
        hidden, mask = model.encode(ids)
    residual = stack["layers"][-1]["residual"]
    close(arr(residual["output"]), hidden[0].norm(dim=-1), atol=1e-5)
    close(arr(t["view"]["pooled"]), hidden[0].mean(0))  # mean pooling
    assert [s["name"] for s in residual["sublayers"]] == ["attention", "ffn"]


def test_legacy_classifiers_gru_ngram_cls_pooling() -> None:
    text = "최악 영화 정말"
    for name in ("classify-transformer", "classify-gru", "classify-ngram"):
        pred = attnkit.load(LEGACY / name, precision="fp32")
        t = check_classifier(pred, text)
        if name == "classify-transformer":
            assert t["view"]["pooling"] == "cls" and t["inputs"][0]["tokens"][0] == "[CLS]"
            assert t["stacks"]
        else:
            assert t["stacks"] == []
        assert (t["view"]["pooled"] is None) == (name == "classify-ngram")


def test_bert_pair_classifier(base) -> None:
    cfg = BertConfig(arch="bert-classifier", max_len=64, d_model=16, num_heads=2, d_ff=32,
                     num_layers=2, num_classes=3, **_sizes(base))  # fmt: skip
    pred = _classifier(base, cfg, pairs=True, labels=("a", "b", "c"))
    t = check_classifier(pred, "the movie was great", pair="boring film story")
    inp = t["inputs"][0]
    assert inp["tokens"][0] == "[CLS]" and inp["tokens"].count("[SEP]") == 2
    assert set(inp["segments"]) == {0, 1}
    (emb,) = t["embeddings"]
    assert emb["layer_norm"] and emb["segment"] is not None
    ids, types = torch.tensor([inp["ids"]]), torch.tensor([inp["segments"]])
    with torch.no_grad():
        out, weights = weights_by_need_weights(
            pred.model, lambda: pred.model.bert(ids, None, types)
        )
    for layer, w in zip(t["stacks"][0]["layers"], weights, strict=True):
        close(arr(layer["attention"][0]["weights"]), w[0])
    close(arr(t["view"]["pooled"]), out.pooler_output[0])


def test_frozen_bert_classifier_shows_its_layer_mix(base) -> None:
    cfg = BertConfig(arch="bert-classifier", max_len=32, d_model=16, num_heads=2, d_ff=32,
                     num_layers=2, freeze_encoder=True, pooling="mean", **_sizes(base))  # fmt: skip
    pred = _classifier(base, cfg)
    with torch.no_grad():
        pred.model.mix.scalars.copy_(torch.tensor([1.0, 0.0, -1.0]))
    t = check_classifier(pred, "the movie was great")
    close(t["view"]["mix"]["weights"], torch.tensor([1.0, 0.0, -1.0]).softmax(0))
    assert len(t["stacks"][0]["layers"]) == 2


def test_gpt_classifier_has_causal_masks(base) -> None:
    cfg = GPTClassifierConfig(max_len=32, d_model=16, num_heads=2, d_ff=32, num_layers=2,
                              **_sizes(base))  # fmt: skip
    t = check_classifier(_classifier(base, cfg), "the movie was great")
    (stack,) = t["stacks"]
    assert stack["name"] == "decoder" and stack["norm_first"]
    att = stack["layers"][0]["attention"][0]
    assert att["role"] == "causal_self" and "look_ahead" in att["mask"]["kinds"]
    mask = decode_array(att["mask"]["array"]).astype(bool)
    assert (mask == np.tril(np.ones_like(mask))).all()
    assert t["embeddings"][0]["position"]["kind"] == "learned"


def test_elmo_classifier_mix(base) -> None:
    tk = base.tokenizer
    cfg = ELMoClassifierConfig(max_len=16, bilm_d_model=8, bilm_hidden_size=8, bilm_num_layers=2,
                               bos_id=tk.bos_id, eos_id=tk.eos_id, token_dim=4,
                               task_hidden_size=8, **_sizes(base))  # fmt: skip
    pred = _classifier(base, cfg)
    with torch.no_grad():
        pred.model.elmo.mix.scalars.copy_(torch.tensor([0.5, -1.0, 2.0]))
        pred.model.elmo.mix.gamma.fill_(1.7)
    text = "the movie was great"
    t = check_classifier(pred, text)
    mix = t["view"]["elmo"]
    weights, gamma = pred.model.mix_weights()
    close(mix["weights"], weights)
    assert mix["gamma"] == pytest.approx(gamma)
    ids = torch.tensor([t["inputs"][0]["ids"]])
    with torch.no_grad():
        features = pred.model.features(ids, torch.ones_like(ids, dtype=torch.bool))[0]
    close(arr(mix["output_norms"]), features.norm(dim=-1), atol=1e-5)
    assert arr(mix["contributions"]).shape == (3, ids.size(1))


def test_gpt_lm_steps(base) -> None:
    cfg = GPTConfig(max_len=32, d_model=16, num_heads=2, d_ff=32, num_layers=2, **_sizes(base))
    torch.manual_seed(0)
    model = cfg.build().eval()
    pred = LMPredictor(model, base.tokenizer, _config(base, "lm", cfg))
    prompt = "the movie"
    t = trace(pred, prompt, steps=3, temperature=0.0, precision="float32")
    check_schema(t, "lm")
    view = t["view"]
    ids = pred._prompt_ids(prompt)
    generated = [s["chosen"]["id"] for s in view["steps"]]
    assert view["prompt_length"] == len(ids) and len(generated) == 3
    assert t["inputs"][0]["ids"] == ids + generated[:-1]
    with torch.no_grad():
        for k, step in enumerate(view["steps"]):
            probs = model(torch.tensor([ids + generated[:k]])).logits[0, -1].softmax(-1)
            close([c["probability"] for c in step["top"]], probs[[c["id"] for c in step["top"]]])
            assert step["position"] == len(ids) - 1 + k
        _, weights = weights_by_need_weights(
            model, lambda: model(torch.tensor([t["inputs"][0]["ids"]]))
        )
    for layer, w in zip(t["stacks"][0]["layers"], weights, strict=True):
        close(arr(layer["attention"][0]["weights"]), w[0])
    # greedy: the same continuation as the predictor's own generation
    want = pred.generate(prompt, max_new_tokens=3, temperature=0.0)[0].text
    tk = pred.tokenizer
    assert tk.decode(ids + generated)[len(tk.decode(ids)) :] == want
    sampled = trace(pred, prompt, steps=2, temperature=0.8, top_k=5, seed=3)
    again = trace(pred, prompt, steps=2, temperature=0.8, top_k=5, seed=3)
    assert sampled["view"]["generated"] == again["view"]["generated"]
    for step in sampled["view"]["steps"]:  # top-k: at most 5 tokens could be drawn
        assert sum(c["filtered"] > 0 for c in step["top"]) <= 5
        assert step["chosen"]["id"] in [c["id"] for c in step["top"][:5]]


def test_gpt_lm_steps_store_the_distribution(base, monkeypatch) -> None:
    """Every logit of a small vocabulary (the page's temperature / top-k controls are then
    exact), else the best 64 (here: a lower bound, to take that path) with their mass."""
    cfg = GPTConfig(max_len=32, d_model=16, num_heads=2, d_ff=32, num_layers=1, **_sizes(base))
    torch.manual_seed(0)
    model = cfg.build().eval()
    pred = LMPredictor(model, base.tokenizer, _config(base, "lm", cfg))
    t = trace(pred, "the movie", steps=2, temperature=0.0, precision="float32")
    ids = t["inputs"][0]["ids"]
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0]
    assert t["view"]["banned"] == pred.banned.tolist() and pred.banned.numel()
    for step in t["view"]["steps"]:
        d = step["distribution"]
        assert d["complete"] and d["ids"] is None and d["mass"] == 1.0
        close(arr(d["logits"]), logits[step["position"]])  # all of them: the page is exact
    monkeypatch.setattr(families.lm_bilm, "FULL_VOCAB", 16)  # (the lm family's module)
    monkeypatch.setattr(families.lm_bilm, "STORED_TOP", 20)
    t = trace(pred, "the movie", steps=1, temperature=0.0, top=5, precision="float32")
    (step,) = t["view"]["steps"]
    d = step["distribution"]
    row = logits[step["position"]]
    assert not d["complete"] and d["ids"] == row.topk(20).indices.tolist()
    close(arr(d["logits"]), row[d["ids"]])
    close(d["mass"], row.softmax(-1)[d["ids"]].sum())
    assert {c["id"] for c in step["top"]} <= set(d["ids"])


def test_seq2seq_source_cut_to_the_runs_max_len_is_marked() -> None:
    legacy = attnkit.load(LEGACY / "translate-transformer", precision="fp32")
    cfg = dataclasses.replace(legacy.config,
                              data=dataclasses.replace(legacy.config.data, max_len=4))  # fmt: skip
    pred = Seq2SeqPredictor(legacy.model, legacy.tokenizer, cfg)
    with pytest.warns(UserWarning, match="longer than max_len=4"):  # the predictor's own
        t = trace(pred, "red cat sun red cat sun")
    source = t["inputs"][0]
    assert source["truncated"] and source["bound"] == 4 and len(source["ids"]) == 4
    assert any("cut to the run's data.max_len = 4" in note for note in t["notes"])
    short = trace(pred, "red cat")
    assert not short["inputs"][0]["truncated"]
    assert not any("cut" in note for note in short["notes"])


def test_transformer_seq2seq_alignment_and_steps() -> None:
    pred = attnkit.load(LEGACY / "translate-transformer", precision="fp32")
    text = "red cat sun"
    t = trace(pred, text, precision="float32")
    check_schema(t, "seq2seq")
    view = t["view"]
    a = pred.alignment(text)
    assert view["output_tokens"] == a.output
    close(arr(view["alignment"]), a.weights)
    assert view["output_text"] == pred.translate(text)[0]
    enc, dec = t["stacks"]
    assert (enc["name"], dec["name"]) == ("encoder", "decoder")
    roles = [att["role"] for att in dec["layers"][0]["attention"]]
    assert roles == ["causal_self", "cross"]
    src = torch.tensor([t["inputs"][0]["ids"]])
    tgt = torch.tensor([t["inputs"][1]["ids"]])
    with torch.no_grad():
        memory, enc_w = weights_by_need_weights(pred.model, lambda: pred.model.encode(src))
        logits, dec_w = weights_by_need_weights(
            pred.model, lambda: pred.model.decode(tgt, memory, src != pred.tokenizer.pad_id)
        )  # per layer: self, then cross
    close(arr(enc["layers"][0]["attention"][0]["weights"]), enc_w[0][0])
    close(arr(dec["layers"][0]["attention"][0]["weights"]), dec_w[0][0])
    close(arr(dec["layers"][0]["attention"][1]["weights"]), dec_w[1][0])
    probs = logits[0].softmax(-1)
    for step in view["steps"]:
        close([c["probability"] for c in step["top"]],
              probs[step["step"] - 1, [c["id"] for c in step["top"]]])  # fmt: skip
    beam = trace(pred, text, beam=2)
    assert beam["view"]["search"] == "beam"
    assert beam["view"]["output_text"] == pred.translate(text, beam=2)[0]


@pytest.mark.parametrize("score", SCORE_NAMES)
def test_lstm_seq2seq_every_score_function(score: str) -> None:
    legacy = attnkit.load(LEGACY / "chat-lstm", precision="fp32")
    cfg = legacy.config.model.replace(attention=score)
    torch.manual_seed(0)
    pred = Seq2SeqPredictor(cfg.build().eval(), legacy.tokenizer,
                            dataclasses.replace(legacy.config, model=cfg))  # fmt: skip
    text = "red cat"
    t = trace(pred, text, precision="float32")
    check_schema(t, "seq2seq")
    view = t["view"]
    assert view["score"]["name"] == score and view["score"]["formula"]
    a = pred.alignment(text)
    assert view["output_tokens"] == a.output
    close(arr(view["alignment"]), a.weights)
    assert view["output_text"] == pred.translate(text)[0]
    (stack,) = t["stacks"]
    (att,) = stack["layers"][0]["attention"]
    assert stack["kind"] == "lstm" and att["score"]["name"] == score
    close(arr(att["weights"])[0], a.weights)
    assert t["embeddings"][0]["input"] == "source"


def test_masked_lm_runs(base) -> None:
    text = "the [MASK] was great"
    for name in ("mlm", "mlm-electra"):
        pred = attnkit.load(LEGACY / name, precision="fp32")
        t = trace(pred, text, precision="float32")
        check_schema(t, "mlm")
        want = pred.fill_mask(text, top_k=10)
        for got, fills in zip(t["view"]["masks"], want, strict=True):
            assert [c["token"] for c in got["top"]] == [tok for tok, _ in fills]
            close([c["probability"] for c in got["top"]], [p for _, p in fills])
        assert t["stacks"][0]["layers"]
    cfg = BertConfig(arch="bert-pretraining", max_len=32, d_model=16, num_heads=2, d_ff=32,
                     num_layers=1, **_sizes(base))  # fmt: skip
    torch.manual_seed(0)
    pred = BertPretrainPredictor(cfg.build().eval(), base.tokenizer,
                                 _config(base, "bert-pretrain", cfg))  # fmt: skip
    t = trace(pred, text, precision="float32")
    check_schema(t, "mlm")
    assert t["inputs"][0]["tokens"][0] == "[CLS]" and t["embeddings"][0]["layer_norm"]
    for got, fills in zip(t["view"]["masks"], pred.fill_mask(text, top_k=10), strict=True):
        close([c["probability"] for c in got["top"]], [p for _, p in fills])
    with pytest.raises(InputError, match="no \\[MASK\\]"):
        trace(pred, "no mask here")


def test_bilm(base) -> None:
    cfg = ELMoConfig(max_len=32, d_model=8, hidden_size=8, num_layers=2, **_sizes(base))
    torch.manual_seed(0)
    pred = BiLMPredictor(cfg.build().eval(), base.tokenizer, _config(base, "bilm", cfg))
    text = "the movie was great"
    t = trace(pred, text, precision="float32")
    check_schema(t, "bilm")
    mix = t["view"]["elmo"]
    close(mix["weights"], [1 / 3] * 3)
    close(arr(mix["output_norms"]), pred.embed(text)[0].norm(dim=-1), atol=1e-5)
    assert len(t["view"]["forward"]) == len(t["inputs"][0]["ids"])


TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


@pytest.mark.parametrize("unit", ["word", "char", "piece"])
def test_tagger_labels_every_word_as_the_predictor(base, unit: str) -> None:
    cfg = BertConfig(arch="bert-tagger", max_len=24, d_model=16, num_heads=2, d_ff=32,
                     num_layers=2, num_classes=len(TAGS), **_sizes(base))  # fmt: skip
    torch.manual_seed(0)
    model = cfg.build().eval()
    pred = TagPredictor(model, base.tokenizer, _config(base, "tag", cfg), TAGS, word_unit=unit)
    for text in ("the movie was great 정말 최고, paris", "the movie was great " * 8):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the long one: the predictor warns, the page notes
            t = trace(pred, text, precision="float32")
            want = pred.tag(text)[0]
        check_schema(t, "tag")
        view = t["view"]
        assert [w["word"] for w in view["words"]] == want.words
        assert [w["label"] for w in view["words"]] == want.labels
        got = [(e["type"], e["text"], e["start"], e["end"]) for e in view["entities"]]
        assert got == [(e.type, e.text, e.start, e.end) for e in want.entities]
        assert t["inputs"][0]["truncated"] == want.truncated
        assert any("labelled O" in note for note in t["notes"]) == want.truncated
        ids = torch.tensor([t["inputs"][0]["ids"]])
        with torch.no_grad():
            logits = model(ids).logits[0]
        close(arr(view["probabilities"]), logits.softmax(-1))
        assert view["predicted"] == [TAGS[k] for k in logits.argmax(-1).tolist()]
        with torch.no_grad():
            _, weights = weights_by_need_weights(model, lambda ids=ids: model.bert(ids, None, None))
        for layer, w in zip(t["stacks"][0]["layers"], weights, strict=True):
            close(arr(layer["attention"][0]["weights"]), w[0])


def test_qa_answer_span_as_the_predictor(base) -> None:
    cfg = BertConfig(arch="bert-qa", max_len=32, d_model=16, num_heads=2, d_ff=32, num_layers=2,
                     **_sizes(base))  # fmt: skip
    torch.manual_seed(0)
    model = cfg.build().eval()
    pred = QAPredictor(model, base.tokenizer, _config(base, "qa", cfg), scorer="squad")
    question = "who was great"
    for context, windows in (("the movie 정말 최고", 1),
                             ("the story was boring but the actor 배우 was great " * 4, 9)):  # fmt: skip
        t = trace(pred, question, pair=context, precision="float32")
        check_schema(t, "qa")
        view, want = t["view"], pred.answer(question, context)
        answer = view["answer"]
        assert (answer["text"], answer["start"], answer["end"]) == (want.text, want.start,
                                                                     want.end)  # fmt: skip
        close(answer["score"], want.score, atol=1e-5)
        assert view["windows"] == windows and view["candidates"][0]["score"] == answer["score"]
        assert any(f"{windows} windows" in note for note in t["notes"]) == (windows > 1)
        inp = t["inputs"][0]
        assert set(inp["segments"]) == {0, 1} and inp["tokens"][0] == "[CLS]"
        ids, types = torch.tensor([inp["ids"]]), torch.tensor([inp["segments"]])
        with torch.no_grad():
            out = model(ids, None, types)
        close(arr(view["start_probabilities"]), out.start_logits[0].softmax(-1))
        close(arr(view["end_logits"]), out.end_logits[0])
        s, e = answer["start_token"], answer["end_token"]
        close(out.start_logits[0, s] + out.end_logits[0, e], answer["score"], atol=1e-5)
        assert t["embeddings"][0]["segment"] is not None
    with pytest.raises(InputError, match="context"):
        trace(pred, question)


# --------------------------------------------------------------------------------------
# bounds, budget, refusals
# --------------------------------------------------------------------------------------
def test_long_input_is_cut_with_a_note(base) -> None:
    cfg = GPTClassifierConfig(max_len=64, d_model=16, num_heads=2, d_ff=32, num_layers=1,
                              **_sizes(base))  # fmt: skip
    pred = _classifier(base, cfg)
    with pytest.warns(UserWarning, match="longer than max_len=64"):  # the predictor's own
        t = trace(pred, "the movie was great " * 20, max_tokens=12)
    assert len(t["inputs"][0]["ids"]) == 12 and t["inputs"][0]["truncated"]
    assert any("cut to 12 tokens" in note for note in t["notes"])
    att = t["stacks"][0]["layers"][0]["attention"][0]
    assert decode_array(att["weights"]).shape == (2, 12, 12)


def test_input_cut_by_the_runs_max_len_names_that_bound(base) -> None:
    cfg = GPTClassifierConfig(max_len=16, d_model=16, num_heads=2, d_ff=32, num_layers=1,
                              **_sizes(base))  # fmt: skip
    pred = _classifier(base, cfg)
    with pytest.warns(UserWarning, match="longer than max_len=16"):
        t = trace(pred, "the movie was great " * 10)  # max_tokens 128: the run's bound cuts
    inp = t["inputs"][0]
    assert inp["truncated"] and inp["bound"] == 16 and len(inp["ids"]) == 16
    assert any("data.max_len = 16" in note for note in t["notes"])


def test_budget_stores_large_matrices_as_float16(base) -> None:
    full = trace(base, "the movie", precision="float32", qkv="full")
    small = trace(base, "the movie", budget_bytes=2_000, qkv="full")
    assert full["encoding"]["float16"] == [] and full["encoding"]["qkv"] == "full"
    assert "q" in small["encoding"]["float16"] and "scores" in small["encoding"]["float16"]
    a = full["stacks"][0]["layers"][0]["attention"][0]
    b = small["stacks"][0]["layers"][0]["attention"][0]
    assert b["scores"]["dtype"] == "float16" and a["scores"]["dtype"] == "float32"
    close(arr(b["weights"]), arr(a["weights"]), atol=1e-3)
    norms_only = trace(base, "the movie", qkv="norms")
    att = norms_only["stacks"][0]["layers"][0]["attention"][0]
    assert "q" not in att and "q_norms" in att and norms_only["encoding"]["qkv"] == "norms"
    assert len(json.dumps(small)) < len(json.dumps(full))


@pytest.mark.slow
@pytest.mark.parametrize("heads", [8, 16])
def test_many_heads_stay_under_the_page_ceiling(base, heads: int) -> None:
    """6 layers reading 128 tokens: the arrays grow as layers x heads x T^2; past float16 the
    trace keeps the scores of the first layer only and stores the later layers' weights as
    uint8, saying so, and the page stays under 5 MB (a tiny d_model: the size is the
    heads')."""
    cfg = TransformerClassifierConfig(max_len=128, d_model=2 * heads, num_heads=heads, d_ff=32,
                                      num_layers=6, **_sizes(base))  # fmt: skip
    pred = _classifier(base, cfg)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # longer than max_len: the predictor's warning
        t = trace(pred, "the movie was great and the story 정말 재미있어요 " * 30)
    page = render_page(t)
    assert len(page.encode("utf-8")) < 5_000_000
    assert t["encoding"]["bytes"] <= t["encoding"]["budget_bytes"]
    want = ["scores"] if heads == 8 else ["scores", "weights"]
    assert t["encoding"]["coarsened"] == want
    assert sum("size budget" in note for note in t["notes"]) == len(want)
    check_schema(t, "classifier")  # softmax(scores) = weights where the scores are kept
    layers = t["stacks"][0]["layers"]
    first = layers[0]["attention"][0]
    assert first["scores"]["shape"] == [heads, 128, 128] and "scale" not in first["weights"]
    for layer in layers[1:]:
        att = layer["attention"][0]
        assert att["scores"] is None
        assert ("scale" in att["weights"]) == (heads == 16)
    with torch.no_grad():  # the coarsened weights are still the model's, to 1/255
        ids = torch.tensor([t["inputs"][0]["ids"]])
        _, weights = weights_by_need_weights(
            pred.model, lambda: pred.model(ids, torch.ones_like(ids, dtype=torch.bool))
        )
    for layer, w in zip(layers, weights, strict=True):
        close(arr(layer["attention"][0]["weights"]), w[0], atol=0.5 / 255 + 1e-3)


def test_refusals(base) -> None:
    with pytest.raises(InputError, match="ensemble"):
        trace(attnkit.load([LEGACY / "classify-gru", LEGACY / "classify-ngram"]), "good")
    with pytest.raises(InputError, match="qkv"):
        trace(base, "good", qkv="all")
    with pytest.raises(InputError, match="max_tokens"):
        trace(base, "good", max_tokens=0)

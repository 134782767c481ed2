"""benchmarks/speed.py (issue 17: attnkit vs transformers / torch.nn) and its table in
docs/results.md: a sample record renders; the timing core of every section runs at a tiny
shape and gives positive ratios; the peers get attnkit's weights (same outputs, same greedy
tokens). Nothing is written outside tmp_path."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("transformers")
# torch.nn.TransformerEncoder's inference fast path (the peer, as it is) says this once
pytestmark = pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
TINY = [
    "--iters", "1", "--warmup", "1", "--batch", "2", "--seq", "8", "--shapes", "L1-H32-A2",
    "--vocab", "100", "--s2s-batch", "2", "--s2s-len", "6", "--gen-batches", "1", "2",
    "--new-tokens", "5", "--prompt-tokens", "3", "--gpt-shape", "L1-H32-A2",
    "--gpt-vocab", "100", "--matmul-n", "64", "--threads", "1",
]  # fmt: skip

_ROW = {
    "section": "train",
    "what": "encoder training step",
    "shape": "L4 H256 A4, seq 128",
    "dtype": "bf16",
    "batch": 32,
    "attnkit": "attnkit",
    "attnkit_settings": "attnkit.models.bert.BertModel(L4 H256 A4, ...)",
    "attnkit_ms": 812.25,
    "peer": "transformers.BertModel",
    "peer_settings": "BertModel(BertConfig(...), attn_implementation='sdpa')",
    "peer_ms": 1218.4,
    "ratio": 1.5,
    "target": 1.4,
    "met": True,
    "iters": 5,
    "warmup": 1,
    "flops": 112_500_000_000,
    "attnkit_peak_fraction": 0.3456,
    "peer_peak_fraction": 0.2304,
}
SPEED = {
    "kind": "speed_ratios",
    "name": "speed",
    "command": "python benchmarks/speed.py",
    "date": "2026-12-01",
    "machine": "x86_64, cpu, 2 threads, torch 2.13.0+cpu, attnkit 0.2.0",
    "threads": 2,
    "cpu": "AMD EPYC",
    "cpu_flags": {"avx2": True, "avx512f": True, "avx512_bf16": True, "amx_bf16": False},
    "cpu_native_bf16": True,
    "peak_gflops": {"fp32": 180.5, "bf16": 420.0},
    "matmul": "2048 x 2048 x 2048, best of 5",
    "sections": ["train", "generate"],
    "common": "train mode and dropout 0.1",
    "minutes": 9.5,
    "plot": "docs/speed_ratios.png",
    "rows": [
        _ROW,
        {
            **_ROW,
            "section": "generate",
            "what": "greedy generation, 16 + 128 tokens",
            "shape": "GPT L4 H256 A4, vocab 50257",
            "dtype": "fp32",
            "batch": 8,
            "peer": "transformers.GPT2LMHeadModel.generate",
            "peer_settings": "GPT2LMHeadModel(...).generate(...)",
            "ratio": 2.25,
            "target": None,
            "met": None,
            "same_tokens": True,
            "note": "a note",
        },
    ],
}


MODULES = ("report", "speed", "speed_peers", "speed_runners")


@pytest.fixture
def bench(monkeypatch):
    """benchmarks/ importable (report, speed and its speed_peers / speed_runners) for one
    test."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    for name in MODULES:
        monkeypatch.delitem(sys.modules, name, raising=False)
    yield importlib.import_module("report"), importlib.import_module("speed")
    for name in MODULES:
        sys.modules.pop(name, None)


def test_report_renders_the_speed_ratios(bench):
    report, _ = bench
    text = report.render([SPEED])
    assert text.count("## Speed against the peers (transformers, torch.nn)") == 1
    assert "avx512_bf16 yes, amx_bf16 no; native bf16: yes; matmul peak fp32 180.5" in text
    assert (
        "| encoder training step | L4 H256 A4, seq 128 | bf16 | 32 | attnkit | 812.2 "
        "| transformers.BertModel | 1,218.4 | **1.50x** | 1.4x | yes | 34.6% | 23.0% | |"
    ) in text
    assert "| greedy generation, 16 + 128 tokens (same tokens: yes) |" in text
    assert "| **2.25x** | - | - | 34.6% | 23.0% | a note |" in text
    assert (
        "- transformers.BertModel: BertModel(BertConfig(...), attn_implementation='sdpa')" in text
    )
    assert "![attnkit / peer time ratios, speed](speed_ratios.png)" in text
    assert "`python benchmarks/speed.py`" in text
    assert "Speed against the peers" not in report.render([])


@pytest.mark.slow
def test_every_section_times_both_contenders_at_a_tiny_shape(bench):
    _, speed = bench
    args = speed.parse_args(TINY)
    peak = {"fp32": 1e6, "bf16": 1e6}
    sections = ("train", "infer", "classify", "seq2seq")
    rows = {name: speed.RUNNERS[name](args, peak) for name in sections}
    assert len(rows["train"]) == 6  # 2 dtypes x (transformers, torch, attention_dropout=0)
    # 2 dtypes x batches 1, 2 x 2 peers, + attnkit int8 and attnkit's ONNX export in
    # onnxruntime vs transformers fp32 at batches 1, 2
    assert len(rows["infer"]) == 12
    int8 = [r for r in rows["infer"] if r["dtype"] == "int8"]
    assert [r["batch"] for r in int8] == [1, 2]
    for r in int8:  # labelled, no target, closeness to fp32 measured
        assert r["target"] is None and r["attnkit"] == "attnkit int8" and "flops" not in r
        assert 0.99 < r["int8_min_cosine"] <= 1.0 and "not like for like" in r["note"]
    onnx = [r for r in rows["infer"] if r["attnkit"] == "attnkit ONNX"]
    assert [r["batch"] for r in onnx] == [1, 2]
    for r in onnx:  # labelled, no target; the export matched PyTorch
        assert r["target"] is None and "another runtime" in r["note"]
        assert "onnxruntime" in r["attnkit_settings"] and r["attnkit_pytorch_ms"] > 0
        assert speed.row_label(r).startswith("infer") and "(attnkit ONNX) vs" in speed.row_label(r)
    assert [(r["dtype"], r["batch"], r["target"]) for r in rows["classify"]] == [
        ("fp32", 1, 2.0),
        ("bf16", 1, 2.0),
    ]
    assert rows["classify"][0]["max_logit_difference"] < 1e-5  # the same weights, fp32
    assert rows["classify"][0]["peer"] == "transformers.BertForSequenceClassification"
    assert len(rows["seq2seq"]) == 2
    args.gen_batches = [1]
    rows["generate"] = speed.RUNNERS["generate"](args, peak)
    for row in (r for section in rows.values() for r in section):
        assert row["ratio"] > 0 and row["attnkit_ms"] > 0 and row["peer_ms"] > 0, row
        if row["dtype"] != "int8":
            assert row["flops"] > 0 and row["attnkit_peak_fraction"] > 0, row
        assert (row["met"] is None) == (row["target"] is None)
    gen, gen8 = rows["generate"]  # fp32, then int8 (labelled, no target)
    assert gen8["attnkit"] == "attnkit int8" and gen8["target"] is None
    assert 0.5 < gen8["int8_token_agreement"] <= 1.0 and gen8["attnkit_fp32_ms"] > 0
    assert 0.0 <= gen8["int8_same_greedy_tokens"] <= 1.0
    assert gen["same_tokens"] is True and gen["target"] == 3.0


@pytest.mark.slow
def test_the_peers_get_attnkits_weights(bench):
    peers = importlib.import_module("speed_peers")  # the contenders of speed.py
    encs = peers.build_encoders(peers.Shape(2, 32, 4), vocab=100, seq=12, with_ad0=False)
    b = peers.encoder_batch(3, 12, 100)
    assert not b.mask.all() and b.mask[:, 0].all()  # padded rows
    outs = {k: peers.encoder_infer(e, b, "fp32")() for k, e in encs.items()}
    for key in ("transformers", "torch"):
        diff = (outs["attnkit"] - outs[key])[b.mask].abs().max()
        assert diff < 1e-5, (key, diff)
    runners = importlib.import_module("speed_runners")
    flops = {k: runners.count_flops(peers.encoder_infer(e, b, "fp32")) for k, e in encs.items()}
    # attnkit's inference products go through oneDNN (attnkit.nn.fast_paths): counted too
    assert flops["attnkit"] == flops["transformers"] > 0
    classifiers = peers.build_classifiers(peers.Shape(2, 32, 4), vocab=100, seq=12)
    logits = {k: peers.encoder_infer(m, b, "fp32")() for k, m in classifiers.items()}
    assert logits["attnkit"].shape == (3, 2)
    assert (logits["attnkit"] - logits["transformers"]).abs().max() < 1e-5

    ours, peer = peers.build_s2s(peers.s2s_config())
    s = peers.s2s_batch(2, 6, ours.config.vocab_size)
    ours.eval(), peer.eval()
    with torch.no_grad():
        a = ours(s.src, s.tgt_in, s.src_mask, s.tgt_mask).logits
        p = peer(s.src, s.tgt_in, s.src_mask, s.tgt_mask)
    assert (a - p)[s.tgt_mask].abs().max() < 1e-4

    gpt, hf = peers.build_gpts(peers.Shape(1, 32, 2), vocab=100, max_len=32)
    prompt = torch.randint(1, 100, (2, 4), generator=torch.Generator().manual_seed(0))
    calls = peers.generate_calls(gpt, hf, prompt, new_tokens=6)
    mine, theirs = calls["attnkit"](), calls["transformers"]()
    assert mine.shape == (2, 6) and torch.equal(mine, theirs)


@pytest.mark.slow
def test_cli_writes_only_where_it_is_told(bench, tmp_path):
    _, speed = bench
    path = tmp_path / "speed.json"
    assert speed.main([*TINY, "--only", "generate", "--dtype", "fp32", "--json", str(path)]) == 0
    record = json.loads(path.read_text())
    assert record["kind"] == "speed_ratios" and record["sections"] == ["generate"]
    assert [(r["batch"], r["dtype"]) for r in record["rows"]] == [
        (1, "fp32"), (1, "int8"), (2, "fp32"), (2, "int8")
    ]  # fmt: skip
    # an fp32-only run times no bf16 cube (emulated bf16, e.g. held to AVX2, takes minutes)
    assert set(record["peak_gflops"]) == {"fp32"} and "avx2" in record["cpu_flags"]
    assert Path(record["plot"]) == tmp_path / "speed.png" and (tmp_path / "speed.png").is_file()


@pytest.mark.slow
def test_device_is_checked_and_recorded(bench, tmp_path, capsys):
    _, speed = bench
    assert speed.parse_args(["--device", "cpu"]).device == torch.device("cpu")
    if not torch.cuda.is_available():
        assert speed.parse_args([]).device == torch.device("cpu")  # auto
        with pytest.raises(SystemExit):
            speed.parse_args(["--device", "cuda"])
        assert "this machine has no CUDA device" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        speed.parse_args(["--device", "tpu"])
    path = tmp_path / "s.json"
    args = [*TINY, "--only", "seq2seq", "--dtype", "fp32", "--device", "cpu", "--json", str(path)]
    assert speed.main(args) == 0
    record = json.loads(path.read_text())
    assert record["device"] == "cpu" and record["gpu"] is None


def test_contenders_take_turns_of_calls_in_a_row(bench):
    _, speed = bench
    runners = importlib.import_module("speed_runners")
    calls: list[str] = []
    contenders = {name: (lambda name=name: calls.append(name)) for name in ("a", "b")}
    times = runners.interleave(contenders, iters=2, warmup=1, in_a_row=3)
    assert {k: len(v) for k, v in times.items()} == {"a": 6, "b": 6}  # every call timed
    assert "".join(calls) == "ab" + "aaabbb" + "bbbaaa"  # warm-up, then rotating turns
    assert speed.parse_args([]).in_a_row == 1  # by default the contenders alternate
    with pytest.raises(SystemExit):
        speed.parse_args(["--in-a-row", "0"])

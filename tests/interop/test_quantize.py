"""int8 dynamic quantization: the export format (safetensors, int8 weights + per-row scales),
loading it back for every command, closeness to the float model, and bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from torch import nn
from torch.ao.nn.quantized.dynamic import Linear as QuantizedLinear

from attnkit.app.api import RunError, export, load, train
from attnkit.app.cli import main
from attnkit.core.checkpoint import save_tensors
from attnkit.interop.quantize import INT8_WEIGHTS, int8_state, load_int8, quantize_int8
from attnkit.models.bert import BertConfig, BertModel
from attnkit.tasks.run_config import RunConfig
from conftest import tiny_recipe

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

TEXTS = ["the movie was great", "boring and awful film", "최고 영화", "지루해요 정말"]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    from conftest import make_sentiment_rows, write_csv

    d = tmp_path_factory.mktemp("q8")
    write_csv(d / "train.csv", make_sentiment_rows(320, seed=0))
    write_csv(d / "test.csv", make_sentiment_rows(80, seed=1))
    cfg = RunConfig.from_dict(tiny_recipe(d, epochs=3))
    train(cfg, out=d / "run", log=lambda *_: None)
    return d / "run"


@pytest.mark.slow
def test_export_writes_int8_weights_and_loads_for_prediction(tiny_run, tmp_path):
    out = export(tiny_run, tmp_path / "q", fmt="attnkit", quantize="int8")
    assert sorted(p.name for p in out.iterdir()) == ["config.json", INT8_WEIGHTS, "tokenizer.json"]
    raw = json.loads((out / "config.json").read_text())
    assert raw["quantization"] == "int8-dynamic"
    tensors = load_file(str(out / INT8_WEIGHTS))
    ints = [k for k in tensors if k.endswith(".weight.int8")]
    assert ints and all(tensors[k].dtype == torch.int8 for k in ints)
    for k in ints:  # one scale per output row, zero points 0 (symmetric)
        base = k.removesuffix(".int8")
        assert tensors[f"{base}.scales"].shape == (tensors[k].shape[0],)
        assert not tensors[f"{base}.zero_points"].any()
    float_bytes = (tiny_run / "model.safetensors").stat().st_size
    assert (out / INT8_WEIGHTS).stat().st_size < float_bytes

    fp, q8 = load(tiny_run), load(out)
    assert any(isinstance(m, QuantizedLinear) for m in q8.model.modules())
    a, b = fp.predict(TEXTS), q8.predict(TEXTS)
    for x, y in zip(a, b, strict=True):  # the same labels, nearly the same probabilities
        assert x.label == y.label
        for label, p in x.probabilities.items():
            assert abs(p - y.probabilities[label]) < 0.05
    # loading the export = quantizing the float run in memory (the same int8 weights)
    on_the_fly = load(tiny_run, quantize="int8")
    assert on_the_fly.predict(TEXTS) == b


def test_quantized_bert_stays_close_to_float(tmp_path):
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=300, d_model=64, num_heads=4, d_ff=256, num_layers=2, max_len=32)
    model = BertModel(cfg).eval()
    ids = torch.randint(5, 300, (3, 20))
    mask = torch.ones(3, 20, dtype=torch.bool)
    mask[1, 12:] = False
    with torch.no_grad():
        ref = model(ids, mask).last_hidden_state
        save_tensors(int8_state(model), tmp_path / "q.safetensors")
        assert not any(isinstance(m, QuantizedLinear) for m in model.modules())  # unchanged
        in_memory = quantize_int8(model)(ids, mask).last_hidden_state
        from_file = load_int8(BertModel(cfg), tmp_path / "q.safetensors")(ids, mask)
    cos = nn.functional.cosine_similarity(ref[mask], in_memory[mask], dim=-1)
    assert cos.min() > 0.999, cos.min()
    torch.testing.assert_close(from_file.last_hidden_state, in_memory, rtol=0, atol=0)


def test_load_int8_refuses_weights_of_another_model(tiny_run, tmp_path):
    out = export(tiny_run, tmp_path / "q", fmt="attnkit", quantize="int8")
    cfg = BertConfig(vocab_size=300, d_model=64, num_heads=4, d_ff=256, num_layers=2, max_len=32)
    with pytest.raises(RunError, match="does not match the model's config"):
        load_int8(BertModel(cfg), out / INT8_WEIGHTS)


def test_export_bad_input(tiny_run, tmp_path):
    with pytest.raises(RunError, match="--format attnkit"):
        export(tiny_run, tmp_path / "a", fmt="hf", quantize="int8")
    with pytest.raises(RunError, match="--format attnkit"):
        export(tiny_run, tmp_path / "b", fmt="attnkit")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("keep me")
    with pytest.raises(RunError, match="not empty"):
        export(tiny_run, tmp_path / "full", fmt="attnkit", quantize="int8")
    assert (tmp_path / "full" / "x").read_text() == "keep me"
    with pytest.raises(RunError, match="quantize must be int8"):
        load(tiny_run, quantize="int4")
    out = export(tiny_run, tmp_path / "q", fmt="attnkit", quantize="int8")
    with pytest.raises(RunError, match="int8 models run on the CPU"):
        load(out, map_location="meta")


@pytest.mark.slow
def test_cli_export_quantize(tiny_run, tmp_path, capsys):
    """The CLI verbs in this process (a real process per verb is test_first_run's)."""
    assert main(["export", str(tiny_run), "--quantize", "int8", "-o", str(tmp_path / "q")]) == 0
    assert (tmp_path / "q" / INT8_WEIGHTS).is_file()
    capsys.readouterr()
    assert main(["predict", str(tmp_path / "q"), "the movie was great"]) == 0
    out = capsys.readouterr().out
    assert "pos" in out or "neg" in out
    bad = [
        "export",
        str(tiny_run),
        "--format",
        "hf",
        "--quantize",
        "int8",
        "-o",
        str(tmp_path / "h"),
    ]
    assert main(bad) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


@pytest.mark.slow
def test_quantize_benchmark_measures_both_and_renders(tiny_run, tmp_path):
    import shutil

    from report import render

    run = tmp_path / "tiny"
    shutil.copytree(tiny_run, run)
    out = tmp_path / "record.json"
    bench = Path(__file__).resolve().parents[2] / "benchmarks" / "quantize.py"
    done = subprocess.run(
        [sys.executable, str(bench), str(run), "--latency", "8", "--json", str(out)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads(out.read_text())
    assert (tmp_path / "tiny-int8" / INT8_WEIGHTS).is_file()
    for label in ("fp32", "int8"):
        assert 0 <= record[label]["accuracy"] <= 1 and record[label]["latency_ms_batch1"] > 0
        assert record[label]["examples"] == 80  # the tiny test split
    assert record["int8"]["weights_mb"] <= record["fp32"]["weights_mb"]
    assert record["accuracy_change"] == pytest.approx(
        record["int8"]["accuracy"] - record["fp32"]["accuracy"], abs=1e-4
    )
    assert "## int8 quantization" in render([record])

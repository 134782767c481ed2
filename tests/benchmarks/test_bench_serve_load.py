"""benchmarks/serve_load.py's table in docs/results.md (benchmarks/report.py) and its
percentile helper. No server is started here."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

SERVE = {
    "name": "serve-load",
    "kind": "serve",
    "command": "python benchmarks/serve_load.py",
    "run": "runs/bench-serve-nsmc-quick",
    "model": "transformer (classify, nsmc), 1,234,567 parameters",
    "endpoint": "/v1/classify",
    "texts": "NSMC test reviews",
    "requests": 2000,
    "texts_per_request": 1,
    "concurrency": 16,
    "errors": 0,
    "first_errors": [],
    "wall_s": 10.5,
    "requests_per_s": 190.5,
    "latency_ms_p50": 80.1,
    "latency_ms_p90": 95.0,
    "latency_ms_p99": 120.3,
    "latency_ms_max": 150.0,
    "server_rss_mb_before": 400.2,
    "server_rss_mb_after": 410.9,
    "machine": "x86_64, cpu, 2 threads, torch 2.13.0+cpu, attnkit 0.2.0",
}


@pytest.fixture
def modules(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    for name in ("report", "serve_load"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    yield importlib.import_module("report"), importlib.import_module("serve_load")
    for name in ("report", "serve_load"):
        sys.modules.pop(name, None)


def test_report_renders_the_load_test(modules) -> None:
    report, _ = modules
    text = report.render([SERVE])
    assert text.count("## Serving (attnkit serve) under load") == 1
    assert (
        "| serve-load | transformer (classify, nsmc), 1,234,567 parameters | /v1/classify "
        "| 2,000 | 1 | 16 | 0 | 190.5 | 80.1 | 95.0 | 120.3 | 150.0 | 400.2 -> 410.9 "
        "| `python benchmarks/serve_load.py` |" in text
    )
    assert "Serving" not in report.render([])


def test_percentiles(modules) -> None:
    _, load = modules
    values = [float(i) for i in range(1, 101)]
    assert load._percentile(values, 50) in (50.0, 51.0)
    assert load._percentile(values, 99) == 99.0
    assert load._percentile(values, 100) == 100.0
    assert load._percentile([3.0], 99) == 3.0


def test_avx2_server_precision_and_cell(modules, monkeypatch) -> None:
    """--avx2: the server's environment holds it to fp32 (ATTNKIT_CPU_BF16=0), and the
    record says so, whatever this CPU is; the client's own environment is left as it was."""
    report, load = modules
    monkeypatch.setenv("ATTNKIT_CPU_BF16", "1")  # as on a CPU with native bf16
    assert load._precision("auto", {"ATTNKIT_CPU_BF16": "1"}) == "bf16"
    assert load._precision("auto", report.AVX2) == "fp32"
    assert load._precision("bf16", report.AVX2) == "bf16"  # asked for: emulated, still bf16
    assert load._precision("fp32", {}) == "fp32"
    assert os.environ["ATTNKIT_CPU_BF16"] == "1"
    info = {"arch": "gpt", "task": "classify", "dataset": "nsmc", "parameters": 1000}
    cpu = {"cpu": "Some CPU", "avx512_bf16": True}
    cell = load._served(info, "fp32", cpu, 2, avx2=True)
    assert cell.endswith("Some CPU (avx512_bf16), PyTorch held to AVX2 kernels")
    assert "AVX2" not in load._served(info, "bf16", cpu, 2)


def test_a_generation_load_reports_tokens_per_second(modules) -> None:
    report, load = modules
    record = {**SERVE, "name": "serve-load-generate", "endpoint": "/v1/generate",
              "new_tokens": 64, "requests_per_s": 20.5, "tokens_per_s": 1312.0}  # fmt: skip
    text = report.render([record])
    assert (
        "| serve-load-generate | transformer (classify, nsmc), 1,234,567 parameters "
        "| /v1/generate (64 tokens) | 2,000 | 1 | 16 | 0 | 20.5 (1,312 tokens/s) |" in text
    )
    # what counts as an answer, for each endpoint
    assert load._answered({"texts": ["a", "b"]}, {"predictions": [{}, {}]}) == 2
    assert load._answered({"texts": ["a", "b"]}, {"predictions": [{}]}) is None
    assert load._answered({"prompt": "x"}, {"text": "abc", "tokens": 3}) == 3
    assert load._answered({"prompt": "x"}, {"error": {"status": 422}}) is None
    prompts, source = load._prompts(5, chars=8)
    assert len(prompts) == 5 and all(p.strip() and len(p) <= 8 for p in prompts) and source
    # --vary-tokens: a fixed spread of 1/8 to 8/8 of --new-tokens, every eighth in 8 requests
    varied = argparse.Namespace(new_tokens=48, vary_tokens=True)
    assert sorted(load._new_tokens(varied, i) for i in range(8)) == list(range(6, 49, 6))
    assert load._new_tokens(argparse.Namespace(new_tokens=48, vary_tokens=False), 3) == 48
    record = {**record, "new_tokens": 48, "new_tokens_varied": "1/8 to 8/8 of it"}
    assert "| /v1/generate (6-48 tokens) |" in report.render([record])
    # --rate: an open loop of Poisson arrivals (seeded), shown in the clients' column
    times = load._arrivals(4000, rate=20.0)
    assert times[0] == 0.0 and times == sorted(times) and times == load._arrivals(4000, 20.0)
    assert 4000 / times[-1] == pytest.approx(20.0, rel=0.05)
    record = {**record, "arrivals_per_s": 20.0}
    assert "| /v1/generate (6-48 tokens) | 2,000 | 1 | open loop, 20/s | 0 |" in report.render(
        [record]
    )

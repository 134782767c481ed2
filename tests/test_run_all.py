"""benchmarks/run_all.py (``make bench``): the list is consistent with the scripts, recipes
and recorded results, and bad input fails fast. No benchmark runs here."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "run_all.py"


@pytest.fixture(scope="module")
def run_all():
    spec = importlib.util.spec_from_file_location("run_all", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["run_all"] = module  # dataclasses look their module up while it loads
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop("run_all", None)


def test_list_names_every_benchmark(run_all):
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--list"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    for bench in run_all.BENCHMARKS:
        assert bench.name in proc.stdout and " ".join(bench.args) in proc.stdout


def test_every_benchmark_script_and_recipe_exists(run_all):
    names = [b.name for b in run_all.BENCHMARKS]
    assert len(names) == len(set(names))
    for bench in run_all.BENCHMARKS:
        assert bench.script.is_file(), bench.script
        for arg in bench.args:
            if arg.startswith("configs/"):
                assert (ROOT / arg).is_file(), f"{bench.name}: {arg}"
        if "results/" in bench.writes:  # a row of docs/results.md: it has been run, unless
            # registered as pending (not run yet; drop `pending` once its result is in)
            recorded = (ROOT / "benchmarks" / "results" / f"{bench.name}.json").is_file()
            assert recorded != bench.pending, f"{bench.name}: pending={bench.pending}"


def test_default_set_is_quick(run_all):
    quick = [b for b in run_all.BENCHMARKS if b.quick]
    assert quick and sum(b.minutes for b in quick) <= 5


def test_unknown_name_exits_2_with_one_line():
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "nsmc-ngram", "no-such-benchmark"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr == ("run_all.py: error: unknown benchmark no-such-benchmark (see --list)\n")
    assert proc.stdout == ""


def test_missing_data_skips_without_running(run_all, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ATTNKIT_DATA", str(tmp_path))
    monkeypatch.setattr(run_all.subprocess, "call", lambda *a, **k: pytest.fail("ran"))
    assert run_all.main([]) == 0  # the default set: skipping is not a failure
    out = capsys.readouterr().out
    assert out.count(": skipped: dataset ") == sum(b.quick for b in run_all.BENCHMARKS)
    assert run_all.main(["chatbot-ko"]) == 1  # asked for by name: it did not run
    assert "=== chatbot-ko: skipped: dataset 'chatbot-ko'" in capsys.readouterr().out


def test_a_run_need_skips_until_the_run_exists(run_all, tmp_path, monkeypatch):
    bench = run_all.Benchmark("x", ("benchmarks/lm.py",), 1, ("run:runs/x",))
    monkeypatch.setattr(run_all, "ROOT", tmp_path)
    assert "run runs/x not found" in run_all.missing_data(bench)
    (tmp_path / "runs" / "x").mkdir(parents=True)
    (tmp_path / "runs" / "x" / "model.safetensors").write_bytes(b"")
    assert run_all.missing_data(bench) is None

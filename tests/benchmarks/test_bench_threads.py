"""benchmarks/threads.py: 1 vs 2 torch threads, quiet and with a busy core; its table."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import tiny_recipe

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))


@pytest.mark.slow
def test_threads_benchmark_measures_four_cells_and_renders(tmp_path, tiny_data):
    recipe = tmp_path / "tiny.yaml"
    recipe.write_text(yaml.safe_dump(tiny_recipe(tiny_data)), encoding="utf-8")
    out = tmp_path / "record.json"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks/threads.py"),
            str(recipe),
            "--steps",
            "20",
            "--runs",
            str(tmp_path / "runs"),
            "--json",
            str(out),
        ],  # fmt: skip
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads(out.read_text())
    cells = {(r["condition"], r["threads"]) for r in record["rows"]}
    assert cells == {("quiet", 1), ("quiet", 2), ("busy", 1), ("busy", 2)}
    assert all(r["tokens_per_s"] > 0 for r in record["rows"])
    for threads in (1, 2):  # each cell trained its steps with that many threads
        run = tmp_path / "runs" / f"threads-tiny-{threads}"
        saved = json.loads((run / "config.json").read_text())
        assert saved["training"]["num_threads"] == threads and saved["precision"] == "fp32"
        assert '"step": 20' in (run / "metrics.jsonl").read_text()
    from report import render

    table = render([record])
    assert "## Threads: " in table and "| busy |" in table and "| quiet |" in table

"""benchmarks/startup.py: whole-process start-up of `attnkit predict` beside `import torch`,
its record and its table in docs/results.md."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))


@pytest.mark.slow
def test_startup_benchmark_times_both_commands_and_renders(tmp_path):
    out = tmp_path / "startup.json"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks/startup.py"), "--repeats", "1",
                           "--json", str(out)], capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads(out.read_text())
    assert record["kind"] == "startup" and record["heavy_imports"] == []
    # both timed (one process each here: on a busy machine either can be the slower one;
    # the benchmark itself takes the median of 7)
    assert record["import_torch_s"] > 0 and record["predict_s"] > 0
    assert record["over_torch_s"] == pytest.approx(record["predict_s"] - record["import_torch_s"],
                                                   abs=2e-3)  # fmt: skip
    import report

    assert report.check_record(record) == []
    text = report.render([record])
    assert "## Start-up: one sentence through `attnkit predict`" in text
    assert f"`{record['command']}`" in text

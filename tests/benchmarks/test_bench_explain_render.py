"""benchmarks/explain_render.py: the explorer page's cost per head count, and its table."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))


@pytest.mark.slow
def test_explain_render_measures_each_head_count_and_renders(tmp_path) -> None:
    out = tmp_path / "record.json"
    script = ROOT / "benchmarks" / "explain_render.py"
    args = ["--repeats", "1", "--heads", "8", "--json", str(out)]
    done = subprocess.run([sys.executable, script, *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads(out.read_text())
    assert [run["heads"] for run in record["runs"]] == [8]
    for run in record["runs"]:
        for name in ("classifier", "lm"):
            m = run[name]
            assert m["tokens"] == 128 and m["html_bytes"] > m["payload_bytes"] > 0
            assert m["capture_and_render_s"] == pytest.approx(m["trace_s"] + m["render_s"])
    import report
    import report_speed

    assert report.check_record({**record, "name": "explain-render"}) == []
    text = "\n".join(report_speed._explain([record]))
    assert "## Explainer" in text and "| GPT (task lm) | 8 |" in text

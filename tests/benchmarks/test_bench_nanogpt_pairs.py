"""benchmarks/nanogpt_pairs.py: nanoGPT's own train.py beside ``attnkit train`` on its CPU
recipe, whole processes, the record and its table in docs/results.md."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PEER = ROOT.parent / "shared" / "peers" / "nanoGPT"
TEXT = ROOT.parent / "shared" / "data" / "tinyshakespeare" / "input.txt"
sys.path.insert(0, str(ROOT / "benchmarks"))

SAMPLE = {
    "name": "nanogpt-pairs",
    "kind": "nanogpt_pairs",
    "command": "python benchmarks/nanogpt_pairs.py",
    "date": "2026-12-01",
    "machine": "test machine",
    "kernels": "default",
    "steps": 500,
    "rounds": 1,
    "auto_precision": "bf16",
    "seconds": {"nanogpt": [30.0], "attnkit_fp32": [25.0], "attnkit_auto": [20.0]},
    "validation_loss": {"nanogpt": [2.31], "attnkit_fp32": [2.36], "attnkit_auto": [2.35]},
    "median_s": {"nanogpt": 30.0, "attnkit_fp32": 25.0, "attnkit_auto": 20.0},
    "speedup_fp32": 1.2,
    "speedup_auto": 1.5,
}


def test_a_record_renders_its_row():
    import report

    assert report.check_record(SAMPLE) == []
    text = report.render([SAMPLE])
    assert "## Small models: nanoGPT's CPU recipe, whole processes" in text
    row = next(line for line in text.splitlines() if line.startswith("| default"))
    assert "30.0" in row and "25.0" in row and "20.0 (bf16)" in row
    assert "1.20x / 1.50x" in row and "2.310 / 2.360 / 2.350" in row


@pytest.mark.slow
@pytest.mark.skipif(not (PEER.is_dir() and TEXT.is_file()), reason="no ../shared peers/data")
def test_both_trainers_run_and_their_losses_are_read(tmp_path):
    out = tmp_path / "pairs.json"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks/nanogpt_pairs.py"), "--steps",
                           "3", "--rounds", "1", "--json", str(out)], capture_output=True,
                          text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads(out.read_text())
    assert record["steps"] == 3
    for name in ("nanogpt", "attnkit_fp32", "attnkit_auto"):
        assert len(record["seconds"][name]) == 1 and record["seconds"][name][0] > 0
        assert 0 < record["validation_loss"][name][0] < 10  # a character LM's loss, read back

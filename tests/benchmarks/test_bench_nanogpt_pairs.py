"""benchmarks/nanogpt_pairs.py: nanoGPT's own train.py beside ``attnkit train`` on its CPU
recipe, whole processes, the record and its table in docs/results.md."""

from __future__ import annotations

import json
import os
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
def test_nanogpt_runs_from_its_prepared_copy_and_its_loss_is_read(tmp_path):
    import nanogpt_pairs

    peer = nanogpt_pairs.prepare_peer(tmp_path)  # its own prepare.py, nothing downloaded
    assert (peer / "data" / "shakespeare_char" / "train.bin").stat().st_size > 1_000_000
    seconds, loss = nanogpt_pairs.run_nanogpt(peer, 2, tmp_path / "out", dict(os.environ))
    assert seconds > 0 and 3 < loss < 5  # step 0's estimate: ~ln(65)


def test_attnkits_last_validation_loss_is_read_from_its_run(tmp_path, monkeypatch):
    import nanogpt_pairs

    def fake_run(argv, **kwargs):
        out = Path(argv[argv.index("--out") + 1])
        out.mkdir()
        rows = [{"step": 250, "val_loss": 2.5}, {"step": 300, "train_loss": 2.4},
                {"step": 500, "val_loss": 2.3}]  # fmt: skip
        (out / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        assert ("training.bf16=false" in argv) == fp32
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(nanogpt_pairs.subprocess, "run", fake_run)
    for i, fp32 in enumerate((True, False)):
        seconds, loss = nanogpt_pairs.run_attnkit(500, tmp_path / f"r{i}", {}, fp32=fp32)
        assert seconds >= 0 and loss == 2.3

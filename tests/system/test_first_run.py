"""An honest first run on any machine: progress in a log file is plain lines, Ctrl-C is one
line and exit code 130 (for training: how to resume), ``--threads`` sets torch's threads."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from attnkit.app import cli, demo
from attnkit.runtime.training import LineProgress
from conftest import tiny_recipe

ROOT = Path(__file__).resolve().parents[2]


def test_line_progress_prints_plain_lines(capsys, monkeypatch):
    monkeypatch.setattr(LineProgress, "interval", 0.0)
    bar = LineProgress(total=4)
    for step in range(4):
        bar.set_postfix(loss=f"{1.0 / (step + 1):.4f}", tok_s="1,000")
        bar.update(1)
    bar.close()
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert "\r" not in captured.err and len(lines) == 4
    assert lines[0].startswith("train: step 1/4 (25%), loss 1.0000, tok_s 1,000")
    assert lines[-1].startswith("train: step 4/4 (100%), loss 0.2500") and "ETA 0s" in lines[-1]
    assert captured.out == ""  # (evaluation lines are logged by the Trainer, not the bar)


def test_line_progress_waits_for_its_interval(capsys):
    bar = LineProgress(total=1000)  # a line after the first step, the next 5 s later
    for _ in range(10):
        bar.update(1)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("train: step 1/1000 (0%)")
    LineProgress(total=5, disable=True).update(5)
    assert capsys.readouterr().err == ""


def _recipe(tmp_path: Path, tiny_data: Path, **training) -> Path:
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(tiny_recipe(tiny_data, **training)), encoding="utf-8")
    return path


def test_training_into_a_log_file_has_no_redrawn_bars(tmp_path, tiny_data, capsys, monkeypatch):
    monkeypatch.setattr(LineProgress, "interval", 0.0)
    recipe = _recipe(tmp_path, tiny_data, progress=True, max_steps=3)
    assert cli.main(["train", str(recipe), "--out", str(tmp_path / "run")]) == 0
    err = capsys.readouterr().err
    assert "\r" not in err
    assert [line for line in err.splitlines() if line.startswith("train: step")][-1].startswith(
        "train: step 3/3 (100%)"
    )


def test_ctrl_c_in_training_is_one_line_and_130(tmp_path, tiny_data, capsys, monkeypatch):
    import attnkit.app.api

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(attnkit.app.api, "train", interrupted)
    recipe = _recipe(tmp_path, tiny_data)
    assert cli.main(["train", str(recipe), "--out", str(tmp_path / "new")]) == 130
    err = capsys.readouterr().err.splitlines()
    assert err == ["attnkit: interrupted; no checkpoint was written yet: start again with the "
                   "same command"]  # fmt: skip


@pytest.mark.slow
def test_ctrl_c_mid_training_says_how_to_resume(tmp_path, tiny_data):
    """A real SIGINT to a real ``attnkit train`` after its first checkpoint."""
    recipe = _recipe(tmp_path, tiny_data, max_steps=100000, save_every=1, eval_every=1000)
    run = tmp_path / "run"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "attnkit.app.cli", "train", str(recipe), "--out", str(run)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        # a background job (nohup, CI) may inherit SIGINT ignored; a terminal's Ctrl-C is not
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 120
        while not (run / "last" / "state.json").is_file() and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130
    assert err.splitlines() == [
        f"attnkit: interrupted; continue with: attnkit train --resume --out {run}"
    ], err


def test_ctrl_c_in_the_demo_is_one_line(monkeypatch, capsys):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(demo, "run_demo", interrupted)
    assert demo.main([]) == 130
    assert capsys.readouterr().err.splitlines() == [
        "attnkit demo: interrupted (run `make demo` again to start over)"
    ]


def test_threads_option_on_every_command(monkeypatch, tmp_path, tiny_data, capsys):
    import attnkit.runtime.device

    parser = cli.build_parser()
    for command in (["predict", "RUN", "x"], ["evaluate", "RUN"], ["serve", "RUN"], ["env"]):
        assert parser.parse_args([*command, "--threads", "1"]).threads == 1
    with pytest.raises(SystemExit):
        parser.parse_args(["env", "--threads", "0"])
    seen = []
    monkeypatch.setattr(attnkit.runtime.device, "apply_threads", lambda n=None: seen.append(n) or 1)
    assert cli.main(["env", "--threads", "1"]) == 0
    assert seen == [1]
    before = torch.get_num_threads()
    try:
        recipe = _recipe(tmp_path, tiny_data, max_steps=1)
        args = ["train", str(recipe), "--out", str(tmp_path / "run"), "--threads", "1"]
        assert cli.main(args) == 0
        assert "threads: 1 (training.num_threads" in capsys.readouterr().out
    finally:
        torch.set_num_threads(before)

"""make demo's building blocks: the toy run draws both figures and learns something; without
the data and the network, the demo ends in one `attnkit: error:` line."""

import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from attnkit.app.demo import main, train_reverser
from attnkit.data.catalogue import get_dataset


@pytest.mark.slow
def test_toy_demo_writes_figures(tmp_path, capsys):
    assert main(["--toy", "--steps", "30", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "positional_encoding.png").is_file()
    assert (tmp_path / "cross_attention.png").is_file()
    assert "token accuracy" in capsys.readouterr().out


@pytest.mark.slow
def test_reverser_learns_beyond_chance():
    _, acc = train_reverser(steps=150, log_every=0)
    assert acc > 0.3  # chance is 0.1 (ten digits)


# --------------------------------------------------------------- offline: one error line
ROOT = Path(__file__).resolve().parent.parent


def _offline(monkeypatch, data_dir: Path) -> None:
    def refuse(*args, **kwargs):
        raise urllib.error.URLError("no network in this test")

    monkeypatch.setenv("ATTNKIT_DATA", str(data_dir))
    monkeypatch.delenv("ATTNKIT_MIRROR", raising=False)
    monkeypatch.delenv("ATTNKIT_DEBUG", raising=False)
    monkeypatch.setattr(urllib.request, "urlopen", refuse)


def test_demo_offline_is_one_error_line(tmp_path, monkeypatch, capsys):
    data = tmp_path / "data"
    data.mkdir()
    _offline(monkeypatch, data)
    monkeypatch.chdir(ROOT)  # the demo's recipes are configs/*-quick.yaml
    assert main(["--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    url = get_dataset("nsmc").files[0].url
    assert err == (
        f"attnkit: error: cannot download nsmc from {url}: no network in this test; put its "
        f"files in {data / 'nsmc'} or run `attnkit data fetch nsmc` when online\n"
    )
    assert not any(data.rglob("*"))  # nothing half-written, no training started
    assert not (tmp_path / "out" / "nsmc-quick").exists()


@pytest.mark.slow
def test_demo_module_offline_exits_2_without_traceback(tmp_path):
    """``python -m attnkit.app.demo`` with an empty data folder and a mirror that is not there
    (no network needed: the download fails on a missing file:// URL)."""
    env = {k: v for k, v in os.environ.items() if k != "ATTNKIT_DEBUG"}
    env.update(ATTNKIT_DATA=str(tmp_path / "data"), ATTNKIT_MIRROR=str(tmp_path / "no-mirror"))
    proc = subprocess.run(
        [sys.executable, "-m", "attnkit.app.demo", "--out", str(tmp_path / "out")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith("attnkit: error: cannot download nsmc from file://")
    assert "attnkit data fetch nsmc" in lines[0]


def test_demo_outside_the_repository_is_one_error_line(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("ATTNKIT_DEBUG", raising=False)
    monkeypatch.chdir(tmp_path)
    assert main(["--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err == (
        "attnkit: error: configs/nsmc-quick.yaml not found: run the demo from the repository "
        "root (or use --toy)\n"
    )
    assert not (tmp_path / "out").exists()

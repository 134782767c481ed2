"""The attnkit command: help, version, plots, and one-line errors with exit code 2."""

import shutil
import subprocess
import sys

import pytest
from PIL import Image

from attnkit import __version__
from attnkit.app.cli import main


def test_version_and_help(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"attnkit {__version__}"
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    assert "plot" in capsys.readouterr().out


def test_plot_positional_encoding(tmp_path, capsys):
    out = tmp_path / "pe.png"
    assert (
        main(["plot", "positional-encoding", "--max-len", "50", "--d-model", "128", "-o", str(out)])
        == 0
    )
    assert out.is_file() and "wrote" in capsys.readouterr().out
    with Image.open(out) as img:
        assert img.width > 400 and img.height > 200
    assert not list(tmp_path.glob(".*tmp"))  # no temp file left behind


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["bogus"],
        ["plot", "positional-encoding", "--max-len", "x"],
        ["plot", "positional-encoding", "--d-model", "0"],
        ["plot", "positional-encoding", "--d-model", "1"],
        ["plot", "curves", "/nonexistent/run"],
    ],
)
def test_bad_arguments_one_line_exit_2(argv, capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        code = main(argv)
        raise SystemExit(code)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "error" in err
    assert not list(tmp_path.iterdir())


def test_console_script_installed():
    exe = shutil.which("attnkit") or str(
        __import__("pathlib").Path(sys.executable).with_name("attnkit")
    )
    proc = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and __version__ in proc.stdout
    proc = subprocess.run([exe, "plot", "nope"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1


def test_python_dash_m_attnkit(monkeypatch, capsys):
    """``python -m attnkit`` (what torchrun runs) is the CLI."""
    import runpy

    monkeypatch.setattr(sys, "argv", ["attnkit", "--version"])
    with pytest.raises(SystemExit) as exc:
        runpy.run_module("attnkit", run_name="__main__")
    assert exc.value.code == 0 and capsys.readouterr().out.startswith("attnkit ")

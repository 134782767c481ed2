"""make demo's building blocks: the toy run draws both figures and learns something; without
the data and the network, the demo ends in one `attnkit: error:` line; it reads the bundled
recipes, so it runs from any folder, as `attnkit demo` too."""

import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from attnkit.app import cli
from attnkit.app.demo import build_parser, main, train_reverser
from attnkit.data.catalogue import get_dataset


@pytest.mark.slow
def test_reverser_learns_beyond_chance():
    _, acc = train_reverser(steps=150, log_every=0)
    assert acc > 0.3  # chance is 0.1 (ten digits)


# --------------------------------------------------------------- offline: one error line


def _offline(monkeypatch, data_dir: Path) -> None:
    def refuse(*args, **kwargs):
        raise urllib.error.URLError("no network in this test")

    monkeypatch.setenv("ATTNKIT_DATA", str(data_dir))
    monkeypatch.delenv("ATTNKIT_MIRROR", raising=False)
    monkeypatch.delenv("ATTNKIT_DEBUG", raising=False)
    monkeypatch.setattr(urllib.request, "urlopen", refuse)


@pytest.mark.parametrize("command", ["module", "cli"])
def test_demo_offline_is_one_error_line(command, tmp_path, monkeypatch, capsys):
    data = tmp_path / "data"
    data.mkdir()
    _offline(monkeypatch, data)
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.chdir(empty)  # any folder: the recipes are the bundled ones
    if command == "module":
        assert main(["--out", str(tmp_path / "out")]) == 2
    else:
        assert cli.main(["demo", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    url = get_dataset("nsmc").files[0].url
    assert err == (
        f"attnkit: error: cannot download nsmc from {url}: no network in this test; put its "
        f"files in {data / 'nsmc'} or run `attnkit data fetch nsmc` when online\n"
    )
    assert not any(data.rglob("*"))  # nothing half-written, no training started
    assert not (tmp_path / "out" / "nsmc-quick").exists()
    assert not any(empty.iterdir())


@pytest.mark.slow
def test_demo_module_offline_exits_2_without_traceback(tmp_path):
    """``python -m attnkit.app.demo`` with an empty data folder and a mirror that is not there
    (no network needed: the download fails on a missing file:// URL)."""
    env = {k: v for k, v in os.environ.items() if k != "ATTNKIT_DEBUG"}
    env.update(ATTNKIT_DATA=str(tmp_path / "data"), ATTNKIT_MIRROR=str(tmp_path / "no-mirror"))
    proc = subprocess.run(
        [sys.executable, "-m", "attnkit.app.demo", "--out", str(tmp_path / "out")],
        cwd=tmp_path,  # not the repository: the demo's recipes are bundled
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


def test_attnkit_demo_has_the_flags_of_the_module():
    """`attnkit demo` repeats the flags of `python -m attnkit.app.demo` (so that `attnkit
    --help` loads no torch): the same options, defaults and types."""

    def flags(parser):
        return {
            tuple(a.option_strings): (a.dest, a.default, a.type, a.nargs, a.help)
            for a in parser._actions
            if a.option_strings and a.dest not in ("help", "threads")
        }

    sub = next(a for a in cli.build_parser()._actions if hasattr(a, "choices") and a.choices)
    assert flags(sub.choices["demo"]) == flags(build_parser())


@pytest.mark.slow  # (python -m attnkit.app.demo runs the same run_demo: its flags are checked above)
def test_attnkit_demo_toy_from_an_empty_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["demo", "--toy", "--steps", "5"]) == 0
    assert sorted(p.name for p in (tmp_path / "demo_out").iterdir()) == [
        "cross_attention.png",
        "positional_encoding.png",
    ]
    assert "token accuracy" in capsys.readouterr().out


def test_attnkit_demo_shows_its_training_as_attnkit_train_does(tmp_path, monkeypatch):
    """`attnkit demo` trains two recipes for minutes: their progress and evaluation lines
    (attnkit's INFO messages) are shown, as under `attnkit train`, not hidden as the quiet
    commands' are."""
    import attnkit.app.demo as demo
    from attnkit.core.logs import shows_info, verbosity

    seen = []

    def fake_demo(out, toy=False, steps=600):
        with verbosity(True):  # as train() sets it
            seen.append(shows_info("attnkit.runtime.training"))
        return 0

    monkeypatch.setattr(demo, "run_demo", fake_demo)
    assert cli.main(["demo", "--out", str(tmp_path / "out")]) == 0
    assert seen == [True]

"""Values bounded where they enter (issue 40, item 4, first part): ``--beam`` from the same
table as the server (``core.params``), ``--threads`` / ``training.num_threads`` / ``threads=``
at most a few per core, each refused in one line with exit 2 before any model is loaded or
any file written."""

from __future__ import annotations

from pathlib import Path

import pytest

from attnkit.app.cli import main
from attnkit.core.errors import ConfigError
from attnkit.core.params import MAX_BEAM
from attnkit.runtime.device import THREADS_PER_CORE, apply_threads, check_threads, usable_cores

RUN = Path(__file__).parents[1] / "fixtures" / "legacy_runs" / "translate-transformer"


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


@pytest.mark.parametrize("command", ["translate", "explain"])
def test_a_huge_beam_is_refused_at_the_command_line(command: str, capsys) -> None:
    with pytest.raises(SystemExit) as done:
        main([command, "/nonexistent/run", "ein mann", "--beam", "100000"])
    assert done.value.code == 2
    assert f"beam must be in 1..{MAX_BEAM}, got 100000" in _one_line_error(capsys)


def test_the_largest_beam_is_accepted(capsys) -> None:
    assert main(["translate", str(RUN), "ein mann", "--beam", str(MAX_BEAM)]) == 0


def test_threads_past_a_few_per_core_are_refused(tmp_path: Path, capsys) -> None:
    most = THREADS_PER_CORE * usable_cores()
    with pytest.raises(SystemExit) as done:
        main(["predict", "/nonexistent/run", "good", "--threads", "50000"])
    assert done.value.code == 2 and f"from 1 to {most}" in _one_line_error(capsys)
    assert main(["train", "nsmc-quick", "--set", "training.num_threads=50000",
                 "--out", str(tmp_path / "run")]) == 2  # fmt: skip
    assert "training.num_threads must be at most" in _one_line_error(capsys)
    assert not (tmp_path / "run").exists()
    for bad in (0, most + 1, 50_000, True, 2.0):
        with pytest.raises(ConfigError, match="threads must be an integer"):
            check_threads(bad)
    with pytest.raises(ConfigError):
        apply_threads(50_000)
    assert check_threads(most) == most and check_threads(1) == 1

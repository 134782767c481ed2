"""Issue 40's replay, a full and a read-only disk: every writer (train's first checkpoint,
export int8 / hf, explain --html, calibrate, pseudo-label's file, plots) gives one line and
exit 2 and leaves nothing half-written, on a real file system that is full or read-only
(a small tmpfs, mounted where this process may: root with CAP_SYS_ADMIN; else skipped).
safetensors' own error type for a failed write is covered without a mount too."""

from __future__ import annotations

import contextlib
import errno
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from attnkit.app.cli import main
from conftest import LEGACY_RUNS, tiny_recipe

FORMAT2 = Path(__file__).parents[1] / "fixtures" / "format2_runs"


def _run(argv, capsys):
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


def _one_line(code, err, *parts):
    assert code == 2, err
    assert err.startswith("attnkit: error: ") and err.count("\n") == 1, err
    for part in parts:
        assert part in err, err


@pytest.fixture
def small_disk(tmp_path: Path):
    """A 2 MiB tmpfs at tmp_path/disk (unmounted afterwards)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)],
                          capture_output=True, text=True)  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()[:100]}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def _fill(disk: Path) -> None:
    """Take every free byte of ``disk``."""
    with contextlib.suppress(OSError), open(disk / "fill", "wb") as f:
        while True:
            f.write(b"\0" * 65536)
            f.flush()


def _read_only(disk: Path) -> None:
    done = subprocess.run(["mount", "-o", "remount,ro", str(disk)], capture_output=True)
    if done.returncode != 0:
        pytest.skip("cannot remount read-only here")


def _entries(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.name != "fill")


@pytest.mark.parametrize("state", ["full", "read-only"])
def test_train_on_a_full_or_read_only_disk(small_disk, tiny_data, tmp_path, capsys, state):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump(tiny_recipe(tiny_data, max_steps=2)), encoding="utf-8")
    out = small_disk / "run"
    if state == "full":
        _fill(small_disk)
        code, _, err = _run(["train", recipe, "--out", out], capsys)
        _one_line(code, err, f"cannot write {out}", "No space left on device")
    else:
        _read_only(small_disk)
        code, _, err = _run(["train", recipe, "--out", out], capsys)
        _one_line(code, err, f"cannot write {out}", "read-only file system")
    assert _entries(small_disk) == []  # nothing half-made


def test_writers_on_a_full_disk(small_disk, tiny_run_once, capsys):
    run = small_disk / "run"
    shutil.copytree(tiny_run_once, run)
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    entries = _entries(small_disk)
    _fill(small_disk)
    cases = [
        (["calibrate", run], f"cannot write {run / 'config.json'}"),
        (["explain", run, "good movie", "--html", small_disk / "x.html"],
         f"cannot write {small_disk / 'x.html'}"),
        (["export", run, "--quantize", "int8", "--format", "attnkit", "-o", small_disk / "e"],
         f"cannot write {small_disk / 'e'}"),
        (["plot", "positional-encoding", "-o", small_disk / "pe.png"],
         f"cannot write {small_disk / 'pe.png'}"),
    ]  # fmt: skip
    for argv, message in cases:
        if argv[0] == "plot":
            pytest.importorskip("matplotlib")
        code, _, err = _run(argv, capsys)
        _one_line(code, err, message, "No space left on device")
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before
    assert _entries(small_disk) == entries  # nothing new, nothing half-written


def test_hf_export_on_a_full_disk(small_disk, capsys):
    pytest.importorskip("transformers")
    out = small_disk / "hf"
    _fill(small_disk)
    code, _, err = _run(["export", FORMAT2 / "bert-classifier", "--format", "hf", "-o", out],
                        capsys)  # fmt: skip
    _one_line(code, err, f"cannot write {out}", "No space left on device")
    assert _entries(small_disk) == []


def test_safetensors_own_write_error_is_an_os_error(tmp_path, monkeypatch, capsys):
    """safetensors raises SafetensorError ("... (os error 28)") for a full disk: it is
    read as the OSError it wraps, so every writer reports it in one line."""
    from safetensors import SafetensorError

    import attnkit.core.checkpoint as checkpoint

    def full(*args, **kwargs):
        raise SafetensorError(
            "Error while serializing: I/O error: No space left on device (os error 28)"
        )

    monkeypatch.setattr(checkpoint, "save_file", full)
    out = tmp_path / "e"
    run = LEGACY_RUNS / "classify-transformer"
    code, _, err = _run(["export", run, "--quantize", "int8", "--format", "attnkit", "-o", out],
                        capsys)  # fmt: skip
    _one_line(code, err, f"cannot write {out}", "No space left on device")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(OSError) as caught:
        checkpoint.save_tensors({}, tmp_path / "w.safetensors")
    assert caught.value.errno == errno.ENOSPC
    assert caught.value.filename == str(tmp_path / "w.safetensors")
    assert list(tmp_path.iterdir()) == []

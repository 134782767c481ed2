"""Issue 40's replay, runs and outputs: each example of the hostile probe that lost data
(one definition of a run, the output guard at any depth, temporary files removed only by
their maker, SIGTERM, bounds on training values) gives one line and exit 2, and no file
outside attnkit's own temporary files changes."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from attnkit.app.cli import main
from attnkit.core.run_layout import RUN_ENTRIES, is_run, is_unfinished
from attnkit.runtime.run import RunDir
from conftest import tiny_recipe

SRC = Path(__file__).resolve().parents[2] / "src"


def _run(argv, capsys):
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


def _one_line(code: int, err: str, *parts: str) -> None:
    assert code == 2, err
    assert err.startswith("attnkit: error: ") and err.count("\n") == 1, err
    for part in parts:
        assert part in err, err


def _tree(root: Path) -> dict[str, str]:
    """Every file under ``root`` and a digest of its bytes (the lock file aside)."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


@pytest.fixture
def cls(tiny_run_once: Path, tmp_path: Path) -> Path:
    out = tmp_path / "runs" / "cls"
    shutil.copytree(tiny_run_once, out)
    return out


@pytest.fixture
def recipe(tmp_path: Path, tiny_data: Path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(tiny_recipe(tiny_data, max_steps=2)), encoding="utf-8")
    return path


# ----------------------------------------------------------------------------- a run
def test_what_a_run_is(tmp_path: Path) -> None:
    folder = tmp_path / "f"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    assert not is_run(folder) and not is_unfinished(folder)  # a config alone
    for weights in ("model.safetensors", "model.int8.safetensors", "model.onnx"):
        (folder / weights).write_bytes(b"w")
        assert is_run(folder) and not is_unfinished(folder)
        (folder / weights).unlink()
    (folder / "last").mkdir()
    assert not is_run(folder)  # an empty last/ is no checkpoint
    (folder / "last" / "state.json").write_text("{}")
    assert is_run(folder)
    shutil.rmtree(folder / "last")
    (folder / ".unfinished").write_text("started")
    assert is_run(folder) and is_unfinished(folder)
    (folder / "config.json").unlink()  # killed between the mark and the config
    assert is_unfinished(folder)


@pytest.mark.parametrize("kind", ["int8", "onnx"])
def test_train_never_replaces_an_export_without_force(cls, recipe, tmp_path, capsys, kind):
    export = tmp_path / "exports" / f"cls-{kind}"
    if kind == "int8":
        code, _, err = _run(
            ["export", cls, "--quantize", "int8", "--format", "attnkit", "-o", export], capsys
        )
        assert code == 0, err
    else:  # what an ONNX export holds (the graph itself does not matter here)
        export.mkdir(parents=True)
        for name in ("config.json", "tokenizer.json"):
            shutil.copy(cls / name, export / name)
        (export / "model.onnx").write_bytes(b"graph")
    before = _tree(export)
    code, _, err = _run(["train", recipe, "--out", export], capsys)
    _one_line(code, err, f"{export} already holds a run", "--force")
    assert _tree(export) == before


@pytest.mark.parametrize("force", [False, True])
def test_a_folder_with_a_copied_config_is_not_a_run(cls, recipe, tmp_path, capsys, force):
    mine = tmp_path / "thesis"
    (mine / "data").mkdir(parents=True)
    shutil.copy(cls / "config.json", mine / "config.json")
    (mine / "thesis.tex").write_text("years of work")
    (mine / "data" / "survey.csv").write_text("a,b\n")
    before = _tree(mine)
    code, _, err = _run(["train", recipe, "--out", mine, *(["--force"] if force else [])], capsys)
    _one_line(code, err, "holds a config.json but no weights (not a run")
    assert _tree(mine) == before


def test_force_removes_only_what_a_run_consists_of(cls, recipe, capsys):
    (cls / "notes.md").write_text("my notes")
    (cls / "plots").mkdir()
    (cls / "plots" / "mine.png").write_bytes(b"png")
    code, _, err = _run(["train", recipe, "--out", cls, "--force"], capsys)
    assert code == 0, err
    assert (cls / "notes.md").read_text() == "my notes"
    assert (cls / "plots" / "mine.png").read_bytes() == b"png"
    assert RunDir(cls).has_weights() and not (cls / ".unfinished").exists()
    assert {p.name for p in cls.iterdir()} <= {*RUN_ENTRIES, ".lock", "notes.md", "plots"}


def test_an_unfinished_run_is_one_attnkit_marked(cls, recipe, tmp_path, capsys):
    killed = tmp_path / "killed"  # what a SIGKILL before the first checkpoint leaves
    killed.mkdir()
    for name in ("config.json", "tokenizer.json", "metrics.jsonl"):
        shutil.copy(cls / name, killed / name)
    (killed / ".unfinished").write_text("started by attnkit train")
    (killed / "mine.txt").write_text("kept")
    code, _, err = _run(["train", recipe, "--out", killed], capsys)  # no --force needed
    assert code == 0, err
    assert (killed / "mine.txt").read_text() == "kept"
    assert RunDir(killed).has_weights()


# ----------------------------------------------------------------------------- exports
def test_export_never_deletes_a_file_named_like_ours(cls, tmp_path, capsys):
    out = tmp_path / "dir"
    out.mkdir()
    backup = out / ".backup.20241128.tmp"
    backup.write_text("the user's backup")
    code, _, err = _run(
        ["export", cls, "--quantize", "int8", "--format", "attnkit", "-o", out], capsys
    )
    _one_line(code, err, "is not empty", ".backup.20241128.tmp")
    assert backup.read_text() == "the user's backup"
    assert [p.name for p in out.iterdir()] == [backup.name]


# ----------------------------------------------------------------------------- the guard
def test_no_writer_replaces_a_runs_curves(cls, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    curves = cls / "curves.png"
    before = _tree(cls)
    for argv in (
        ["explain", cls, "hi", "--html", curves],
        ["plot", "positional-encoding", "-o", curves],
        ["predict", cls, "good movie", "--explain", curves],
        ["plot", "curves", cls, "-o", curves],
    ):
        code, _, err = _run(argv, capsys)
        _one_line(code, err, "is a run directory")
    assert _tree(cls) == before
    os.chdir(tmp_path)  # plot curves draws a run's curves into a new place by default
    code, out, err = _run(["plot", "curves", cls], capsys)
    assert code == 0, err
    assert (tmp_path / "cls-curves.png").is_file() and _tree(cls) == before


def test_the_guard_holds_at_any_depth(cls, recipe, capsys):
    (cls / "last" / "a").mkdir()
    before = _tree(cls)
    deep = cls / "last" / "a" / "b"
    code, _, err = _run(
        ["export", cls, "--quantize", "int8", "--format", "attnkit", "-o", deep], capsys
    )
    _one_line(code, err, f"{cls} is a run directory")
    code, _, err = _run(["train", recipe, "--out", cls / "last" / "x" / "y"], capsys)
    _one_line(code, err, f"{cls} is a run directory")
    code, _, err = _run(["plot", "positional-encoding", "-o", cls / "last" / "a" / "pe.png"],
                        capsys)  # fmt: skip
    _one_line(code, err, "is a run directory")
    assert _tree(cls) == before and not deep.exists()


# ----------------------------------------------------------------------------- SIGTERM
def test_sigterm_while_curves_are_drawn_leaves_no_temporary_file(tmp_path, tiny_data):
    """SIGTERM arrives while curves.png is being written (the figure's savefig sends it):
    the temporary file is removed, exit status 143."""
    pytest.importorskip("matplotlib")
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump(tiny_recipe(tiny_data, epochs=1)), encoding="utf-8")
    out = tmp_path / "run"
    script = textwrap.dedent(f"""
        import os, signal, sys
        from matplotlib.figure import Figure
        original = Figure.savefig
        def savefig(self, *a, **k):
            original(self, *a, **k)  # the temporary file is written ...
            os.kill(os.getpid(), signal.SIGTERM)  # ... and the job is stopped
        Figure.savefig = savefig
        from attnkit.app.cli import main
        sys.exit(main(["train", {str(recipe)!r}, "--out", {str(out)!r}]))
    """)
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=300)  # fmt: skip
    assert done.returncode == 128 + signal.SIGTERM, done.stderr
    assert "attnkit: terminated" in done.stderr.splitlines()[-1], done.stderr
    left = [p.name for p in out.rglob("*.tmp")]
    assert left == [], left
    # a run stopped before it saved anything leaves nothing; after, what it saved stays
    assert not out.exists() or RunDir(out).has_weights() or RunDir(out).has_checkpoint()


# ----------------------------------------------------------------------------- bounds
@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("training.batch_size=99999999999999", "training.batch_size must be at most"),
        ("training.seed=-1", "training.seed must be an integer in [0, 2**32)"),
        ("training.max_tokens=99999999999999", "training.max_tokens must be at most"),
    ],
)
def test_training_values_are_bounded_where_they_enter(recipe, tmp_path, capsys, setting, message):
    out = tmp_path / "run"
    code, _, err = _run(["train", recipe, "--out", out, "--set", setting], capsys)
    _one_line(code, err, message)
    assert not out.exists()


def test_a_batch_that_cannot_fit_is_refused_before_training(recipe, tmp_path, capsys, monkeypatch):
    import attnkit.models.sizes as sizes

    monkeypatch.setattr(sizes, "available_memory", lambda: 50 * 2**20)  # a 50 MiB machine
    out = tmp_path / "run"
    code, _, err = _run(["train", recipe, "--out", out, "--set", "model.d_model=512",
                         "--set", "model.d_ff=2048", "--set", "training.batch_size=256"],
                        capsys)  # fmt: skip
    _one_line(code, err, "a training step on batches of 256 sequences", "lower training.batch_size")
    assert not out.exists()


def test_a_setting_that_means_nothing_here_is_refused(recipe, tmp_path, capsys):
    out = tmp_path / "run"
    code, _, err = _run(["train", recipe, "--out", out, "--set",
                         "training.teacher_forcing_ratio=0.5"], capsys)  # fmt: skip
    _one_line(code, err, "training.teacher_forcing_ratio applies to a seq2seq LSTM decoder",
              "a classify run")  # fmt: skip
    code, _, err = _run(["train", recipe, "--out", out, "--set",
                         "training.teacher_forcing_ratio=5"], capsys)  # fmt: skip
    _one_line(code, err, "training.teacher_forcing_ratio must be in [0, 1]")
    assert not out.exists()


def test_the_cpu_has_one_index(cls, capsys):
    code, _, err = _run(["predict", cls, "good movie", "--device", "cpu:5"], capsys)
    _one_line(code, err, "unknown device 'cpu:5': there is one cpu")
    code, out, err = _run(["predict", cls, "good movie", "--device", "cpu:0"], capsys)
    assert code == 0 and out.endswith("good movie\n"), err


def test_a_lone_surrogate_from_python_is_an_input_error(cls):
    import attnkit
    from attnkit.core.errors import InputError

    predictor = attnkit.load(cls)
    with pytest.raises(InputError, match="text 2 is not valid Unicode .a lone surrogate"):
        predictor.predict(["fine", "bad \ud800"])
    assert predictor.predict(["좋은 영화"])[0].label in predictor.labels

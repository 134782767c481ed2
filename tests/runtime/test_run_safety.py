"""No data loss, no two trainings in one run directory, no half-written runs, and damaged
run directories named in one line (reliability issue, items 1-3 and 6)."""

from __future__ import annotations

import json
import os
import pickle
import shutil
from pathlib import Path

import pytest
import yaml

import attnkit
from attnkit.app.cli import main
from attnkit.core.checkpoint import save_training_state
from attnkit.core.errors import AttnkitError, DataError, RunError
from attnkit.runtime.run import RunDir
from attnkit.runtime.training import Trainer
from attnkit.tasks.run_config import RunConfig
from conftest import tiny_recipe

QUIET = {"log": lambda *_: None}


def _cfg(tiny_data: Path, **training) -> RunConfig:
    return RunConfig.from_dict(tiny_recipe(tiny_data, **{"epochs": 1, **training}))


@pytest.fixture
def finished(tmp_path: Path, tiny_run_once: Path) -> Path:
    """A finished run of the tiny recipe (1 epoch): a copy of the one trained per session."""
    out = tmp_path / "run"
    shutil.copytree(tiny_run_once, out)
    return out


def _snapshot(folder: Path) -> dict[str, bytes]:
    """Every file of a run and its bytes (the lock file says who last trained: left out)."""
    files = [p for p in folder.rglob("*") if p.is_file() and p.name != ".lock"]
    return {str(p.relative_to(folder)): p.read_bytes() for p in files}


# ----------------------------------------------------------------------------- 1. --force
def test_force_never_removes_a_folder_that_is_not_a_run(tmp_path: Path, tiny_data: Path) -> None:
    mine = tmp_path / "my-project"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work", encoding="utf-8")
    (mine / "config.json").write_text('{"not": "attnkit"}', encoding="utf-8")
    with pytest.raises(RunError, match="holds a config.json but no weights .not a run"):
        attnkit.train(_cfg(tiny_data), out=mine, force=True, **QUIET)
    assert (mine / "thesis.tex").read_text(encoding="utf-8") == "years of work"
    assert sorted(p.name for p in mine.iterdir()) == ["config.json", "thesis.tex"]


def test_force_replaces_a_run_only_once_the_new_inputs_are_ready(
    tmp_path: Path, tiny_data: Path, finished: Path
) -> None:
    before = _snapshot(finished)
    broken = tiny_recipe(tiny_data)
    broken["data"]["train"] = str(tmp_path / "missing.csv")
    with pytest.raises(DataError):
        attnkit.train(RunConfig.from_dict(broken), out=finished, force=True, **QUIET)
    assert _snapshot(finished) == before  # the old run is intact
    assert main(["train", "--force", "--out", str(finished), "--device", "nope"]) == 2
    assert _snapshot(finished) == before
    attnkit.train(_cfg(tiny_data, seed=1), out=finished, force=True, **QUIET)
    assert RunDir(finished).read_config()["training"]["seed"] == 1


def test_out_that_is_a_file_is_refused(tmp_path: Path, tiny_data: Path) -> None:
    target = tmp_path / "notes.txt"
    target.write_text("keep me", encoding="utf-8")
    with pytest.raises(RunError, match="is a file, not a folder"):
        attnkit.train(_cfg(tiny_data), out=target, force=True, **QUIET)
    assert target.read_text(encoding="utf-8") == "keep me"


# ----------------------------------------------------------------------------- 2. the lock
def test_a_second_training_into_a_locked_run_is_refused(
    tmp_path: Path, tiny_data: Path, finished: Path, capsys
) -> None:
    before = _snapshot(finished)
    with RunDir(finished).lock():  # as if another process were training there
        with pytest.raises(RunError, match=r"is in use by pid \d+ on .* since"):
            attnkit.train(_cfg(tiny_data), out=finished, force=True, **QUIET)
        with pytest.raises(RunError, match="is in use by"):
            attnkit.train(out=finished, resume=True, **QUIET)
        recipe = tmp_path / "r.yaml"
        recipe.write_text(yaml.safe_dump(tiny_recipe(tiny_data)), encoding="utf-8")
        assert main(["train", str(recipe), "--out", str(finished), "--force"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "is in use by pid" in err[0]
        empty = tmp_path / "fresh"
        with RunDir(empty).lock(), pytest.raises(RunError, match="in use"):
            attnkit.train(_cfg(tiny_data), out=empty, **QUIET)
    assert _snapshot(finished) == before
    attnkit.train(out=finished, resume=True, **QUIET)  # free again once released


def test_the_lock_is_held_for_the_whole_training(
    tmp_path: Path, tiny_data: Path, monkeypatch
) -> None:
    seen = []
    fit = Trainer.fit

    def checking_fit(self, resume=False):
        with pytest.raises(RunError, match="in use"), RunDir(self.run.path).lock():
            pass
        seen.append(True)
        return fit(self, resume)

    monkeypatch.setattr(Trainer, "fit", checking_fit)
    attnkit.train(_cfg(tiny_data), out=tmp_path / "run", **QUIET)
    assert seen == [True]


# ----------------------------------------------------------------------------- 3. no half runs
def test_a_failure_before_the_first_checkpoint_leaves_nothing(
    tmp_path: Path, tiny_data: Path, monkeypatch
) -> None:
    def broken_fit(self, resume=False):
        assert (self.run.path / "config.json").is_file()  # written, then the failure
        raise RuntimeError("the machine fell over")

    monkeypatch.setattr(Trainer, "fit", broken_fit)
    out = tmp_path / "run"
    with pytest.raises(RuntimeError, match="fell over"):
        attnkit.train(_cfg(tiny_data), out=out, **QUIET)
    assert not out.exists()
    monkeypatch.undo()
    attnkit.train(_cfg(tiny_data), out=out, **QUIET)  # no --force needed
    assert RunDir(out).has_weights()


@pytest.mark.slow
def test_a_run_killed_before_its_first_checkpoint_restarts_without_force(
    tmp_path: Path, tiny_data: Path, finished: Path
) -> None:
    killed = tmp_path / "killed"  # what SIGKILL right after the start leaves
    killed.mkdir()
    for name in ("config.json", "tokenizer.json"):
        shutil.copy(finished / name, killed / name)
    (killed / "metrics.jsonl").write_text('{"step": 1, "train_loss": 0.7}\n', encoding="utf-8")
    assert not RunDir(killed).is_unfinished()  # a config alone: not provably attnkit's
    with pytest.raises(RunError, match="holds a config.json but no weights .not a run"):
        attnkit.train(_cfg(tiny_data), out=killed, force=True, **QUIET)
    (killed / ".unfinished").write_text("started by attnkit train")  # what train writes first
    assert RunDir(killed).is_unfinished()
    lines = []
    attnkit.train(_cfg(tiny_data), out=killed, log=lines.append)
    assert any("replacing the unfinished run" in line for line in lines)
    assert RunDir(killed).has_weights() and not (killed / ".unfinished").exists()
    with pytest.raises(RunError, match="already holds a run"):  # a finished run needs --force
        attnkit.train(_cfg(tiny_data), out=killed, **QUIET)


# ----------------------------------------------------------------------------- 6. damage
def _damage(run: Path, tmp_path: Path, case: str) -> None:
    weights = run / "model.safetensors"
    config = run / "config.json"
    if case == "truncated weights":
        weights.write_bytes(weights.read_bytes()[:-100])
    elif case == "pickle as weights":
        weights.write_bytes(pickle.dumps({"embed.weight": [1, 2, 3]}))
    elif case == "weights of another model":
        other = tmp_path / "other"
        data = Path(json.loads(config.read_text(encoding="utf-8"))["data"]["train"]).parent
        recipe = tiny_recipe(data, epochs=1)
        recipe["model"]["d_model"] = 16
        attnkit.train(RunConfig.from_dict(recipe), out=other, **QUIET)
        shutil.copy(other / "model.safetensors", weights)
    elif case == "config not json":
        config.write_text('{"task": "classify", ', encoding="utf-8")
    elif case == "config a list":
        config.write_text("[1, 2]", encoding="utf-8")
    elif case == "config lacks model":
        raw = json.loads(config.read_text(encoding="utf-8"))
        del raw["model"]
        config.write_text(json.dumps(raw), encoding="utf-8")
    elif case == "config bad value":
        raw = json.loads(config.read_text(encoding="utf-8"))
        raw["model"]["d_model"] = "wide"
        config.write_text(json.dumps(raw), encoding="utf-8")
    elif case == "labels missing":
        raw = json.loads(config.read_text(encoding="utf-8"))
        del raw["labels"]
        config.write_text(json.dumps(raw), encoding="utf-8")
    elif case.startswith("temperature"):
        raw = json.loads(config.read_text(encoding="utf-8"))
        raw["temperature"] = float("nan") if case.endswith("nan") else -1.0
        config.write_text(json.dumps(raw), encoding="utf-8")


DAMAGE = [
    ("truncated weights", "model.safetensors is damaged or not a safetensors file"),
    ("pickle as weights", "model.safetensors is damaged or not a safetensors file"),
    # (checked from the weights' header before anything is built: attnkit.models.sizes)
    ("weights of another model", "model.d_model is 32 but model.safetensors was saved with 16"),
    ("config not json", "config.json is damaged"),
    ("config a list", "config.json must hold a JSON object, not list"),
    ("config lacks model", "config.json lacks model: not an attnkit run"),
    ("config bad value", "config.json: model.d_model must be int"),
    ("labels missing", "config.json: labels are missing or do not match the model"),
    ("temperature -1", "config.json: temperature must be a number > 0, got -1.0"),
    ("temperature nan", "config.json: temperature must be a number > 0, got nan"),
]


@pytest.mark.parametrize(("case", "message"), DAMAGE, ids=[c for c, _ in DAMAGE])
def test_a_damaged_run_is_one_line_naming_the_file(
    tmp_path: Path, finished: Path, case: str, message: str, capsys
) -> None:
    _damage(finished, tmp_path, case)
    with pytest.raises(AttnkitError, match=message):
        attnkit.load(finished)
    capsys.readouterr()
    assert main(["predict", str(finished), "great movie"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("attnkit: error: ") and message in err[0]


def test_a_truncated_optimizer_checkpoint_is_named_on_resume(finished: Path, capsys) -> None:
    optimizer = finished / "last" / "optimizer.safetensors"
    optimizer.write_bytes(optimizer.read_bytes()[:200])
    with pytest.raises(RunError, match="optimizer.safetensors is damaged"):
        attnkit.train(out=finished, resume=True, **QUIET)
    assert main(["train", "--resume", "--out", str(finished)]) == 2
    assert "optimizer.safetensors is damaged" in capsys.readouterr().err


def test_checkpoints_are_fsynced_before_they_are_renamed(tmp_path: Path, monkeypatch) -> None:
    import torch

    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd)))
    model = torch.nn.Linear(2, 2)
    save_training_state(
        tmp_path / "last", model, torch.optim.AdamW(model.parameters()), {"step": 1}
    )
    assert len(synced) >= 4  # the three files and the folders they were renamed in


def test_a_run_is_as_readable_as_any_file_written_there(finished: Path) -> None:
    """Atomic writes go through private temp files (mkstemp: 0600, mkdtemp: 0700); what is
    renamed into place gets the umask's mode, like a plain open() (a shared server's other
    users can read a run they are allowed to)."""
    umask = os.umask(0)
    os.umask(umask)
    names = ["model.safetensors", "config.json", "tokenizer.json", "last/state.json"]
    for name in [*names, "last/model.safetensors", "last/optimizer.safetensors"]:
        assert (finished / name).stat().st_mode & 0o777 == 0o666 & ~umask, name
    assert (finished / "last").stat().st_mode & 0o777 == 0o777 & ~umask


def test_save_pretrained_never_overwrites_a_run(finished: Path) -> None:
    from attnkit.core.errors import ConfigError
    from attnkit.models import from_pretrained

    before = _snapshot(finished)
    model = from_pretrained(finished)
    with pytest.raises(ConfigError, match="is a training run: save_pretrained would replace"):
        model.save_pretrained(finished)
    assert _snapshot(finished) == before
    export = finished.parent / "export"
    model.save_pretrained(export)
    model.save_pretrained(export)  # a bare model folder may be written again


def test_a_cut_metrics_line_does_not_break_the_curves_plot(finished: Path, capsys) -> None:
    with (finished / "metrics.jsonl").open("a", encoding="utf-8") as f:
        f.write('{"step": 99, "train_lo')  # what SIGKILL mid-write leaves
    out = finished.parent / "curves.png"
    assert main(["plot", "curves", str(finished), "-o", str(out)]) == 0
    assert out.is_file()


def test_inference_on_a_device_this_machine_lacks_is_one_error(finished: Path, capsys) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    for verb in (["predict", str(finished), "great"], ["evaluate", str(finished)]):
        assert main([*verb, "--device", "cuda"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err == ["attnkit: error: --device is 'cuda' but CUDA is not available here"]

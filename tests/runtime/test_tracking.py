"""Tracking and what training says: ``training.report_to`` (metrics.csv, TensorBoard
events), callbacks (``attnkit.Callback``, duck typing), logging instead of print (the
``attnkit`` loggers, ``verbose=False``), and the progress display each place gets."""

from __future__ import annotations

import contextlib
import csv
import logging
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import yaml
from test_training import ToyModel, ToyObjective, make_items

import attnkit
from attnkit.core.config import ConfigError
from attnkit.core.extras import MissingExtraError
from attnkit.core.logs import console_logging
from attnkit.runtime import training, viz
from attnkit.runtime.run import RunDir
from attnkit.runtime.tracking import check_trackers, scalar_tag
from attnkit.runtime.training import LineProgress, Trainer
from attnkit.runtime.training_config import TrainingConfig
from attnkit.tasks.run_config import RunConfig
from conftest import tiny_recipe


@pytest.fixture(autouse=True)
def _no_curves(monkeypatch):
    """curves.png is not under test here (and matplotlib costs seconds per figure)."""
    monkeypatch.setattr(viz, "draw_run_curves", lambda *args, **kwargs: None)


@contextlib.contextmanager
def no_logging_configured(level: int = logging.NOTSET) -> Iterator[None]:
    """As in a plain script or a notebook: no handler on the root logger nor on ``attnkit``
    (pytest's capture handlers, which it attaches to both at the start of each test phase,
    set aside inside the test) and attnkit's level ``level``; all put back afterwards."""
    root, ours = logging.getLogger(), logging.getLogger("attnkit")
    handlers, own, before = root.handlers[:], ours.handlers[:], ours.level
    root.handlers.clear()
    ours.handlers.clear()
    ours.setLevel(level)  # (setLevel: it clears the loggers' caches)
    try:
        yield
    finally:
        root.handlers[:] = handlers
        ours.handlers[:] = own
        ours.setLevel(before)


def toy_trainer(run: Path, callbacks=(), on_best=None, **training_options) -> Trainer:
    torch.manual_seed(0)
    train, val = make_items(32, seed=0), make_items(16, seed=1)
    options = {"batch_size": 8, "lr": 1e-2, "log_every": 1, "progress": False}
    config = TrainingConfig(**{**options, **training_options})
    return Trainer(
        ToyModel(),
        ToyObjective(),
        train,
        [1] * len(train),
        val,
        [1] * len(val),
        config,
        run,
        on_best=on_best,
        callbacks=callbacks,
    )


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def assert_csv_matches_jsonl(run: Path) -> None:
    rows = RunDir(run).read_metrics()
    table = read_csv(run / "metrics.csv")
    columns = list(dict.fromkeys(k for row in rows for k in row))
    assert list(table[0]) == columns  # the union of the keys, in order of appearance
    assert len(table) == len(rows)
    for row, line in zip(rows, table, strict=True):
        assert {k: float(v) for k, v in line.items() if v != ""} == pytest.approx(row)
        assert {k for k, v in line.items() if v == ""} == set(columns) - set(row)


def scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder))
    events.Reload()
    return {
        tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]
    }


# ---------------------------------------------------------------------- report_to
class StopAt:
    """A callback that fails at one step: the user's bug stops training."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_log(self, row: dict) -> None:
        if row["step"] == self.step:
            raise RuntimeError(f"tracker bug at step {row['step']}")


def test_csv_and_tensorboard_copy_every_row_and_follow_resume(tmp_path):
    run = tmp_path / "run"
    trackers = {"report_to": ["csv", "tensorboard"], "eval_every": 2, "save_every": 2}
    # a user's callback fails at step 3: its error propagates (after the trackers got the
    # row), the checkpoint of step 2 stays, and the trackers' files are closed
    with pytest.raises(RuntimeError, match="tracker bug at step 3"):
        toy_trainer(run, callbacks=[StopAt(3)], max_steps=6, **trackers).fit()
    assert [r["step"] for r in RunDir(run).read_metrics()] == [1, 2, 2, 3]
    assert_csv_matches_jsonl(run)

    result = toy_trainer(run, max_steps=6, **trackers).fit(resume=True)
    assert result.step == 6
    rows = RunDir(run).read_metrics()
    assert [r["step"] for r in rows if "train_loss" in r] == [1, 2, 3, 4, 5, 6]
    assert_csv_matches_jsonl(run)  # the dropped row of step 3 is gone from the CSV too

    tags = scalars(run / "tensorboard")
    assert {"train/loss", "train/lr", "train/tokens_per_s", "val/accuracy", "val/loss"} <= set(tags)
    train = [(r["step"], r["train_loss"]) for r in rows if "train_loss" in r]
    assert [s for s, _ in tags["train/loss"]] == [1, 2, 3, 4, 5, 6]  # step 3 once (purged)
    assert [v for _, v in tags["train/loss"]] == pytest.approx([v for _, v in train])
    evals = [(r["step"], r["val_accuracy"]) for r in rows if "val_accuracy" in r]
    assert tags["val/accuracy"] == [(s, pytest.approx(v)) for s, v in evals]


def test_a_fresh_run_starts_the_trackers_over(tmp_path):
    run = tmp_path / "run"
    options = {"report_to": "csv", "max_steps": 2, "eval_every": 2}
    toy_trainer(run, **options).fit()
    toy_trainer(run, **options).fit()  # not resumed: metrics.jsonl and metrics.csv anew
    assert [r["step"] for r in read_csv(run / "metrics.csv")] == ["1", "2", "2"]
    assert_csv_matches_jsonl(run)
    assert not (run / "tensorboard").exists()  # only what report_to names


def test_scalar_tags():
    assert scalar_tag("val_accuracy") == "val/accuracy"
    assert scalar_tag("train_loss") == "train/loss"
    assert scalar_tag("lr") == "train/lr"


@pytest.mark.parametrize(
    ("value", "shown"),
    [("wandb", "'wandb'"), (["csv", "mlflow"], "'mlflow'"), (3, "3"), ([["csv"]], "['csv']")],
)
def test_report_to_is_checked_in_one_line(value, shown):
    with pytest.raises(ConfigError) as caught:
        TrainingConfig(report_to=value).validate()
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("training.report_to must be tensorboard | csv or a list of them")
    assert f"got {shown}" in message


def test_report_to_accepts_a_name_a_list_or_none(tiny_data):
    for value, names in [(None, ()), ("none", ()), ([], ()), ("csv", ("csv",))]:
        config = TrainingConfig(report_to=value)
        config.validate()
        assert config.trackers == names
    recipe = tiny_recipe(tiny_data, report_to=["tensorboard", "csv"])
    assert RunConfig.from_dict(recipe).training.trackers == ("tensorboard", "csv")


def test_missing_tensorboard_is_one_line_before_training(tmp_path, tiny_data, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # as if not installed
    with pytest.raises(MissingExtraError, match=r'pip install "attnkit\[tensorboard\]"'):
        check_trackers(["tensorboard"])
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump(tiny_recipe(tiny_data, report_to="tensorboard")))
    with pytest.raises(MissingExtraError) as caught:
        attnkit.train(recipe, out=tmp_path / "run", verbose=False)
    assert str(caught.value).startswith("training.report_to: tensorboard needs the tensorboard")
    assert not (tmp_path / "run").exists()  # before anything was written


# ---------------------------------------------------------------------- callbacks
class Recorder(attnkit.Callback):
    """Overrides some of the methods; the others are the base class's no-ops."""

    def __init__(self, events: list) -> None:
        self.events = events

    def on_start(self, run_dir, step):
        self.events.append(("start", run_dir, step))

    def on_eval(self, metrics):
        self.events.append(("eval", metrics))

    def on_best(self, run_dir, metrics):
        self.events.append(("best", run_dir, metrics["step"]))

    def on_end(self, result):
        self.events.append(("end", result.step))


class LogsOnly:  # duck typing: no base class, one method
    def __init__(self, events: list) -> None:
        self.events = events

    def on_log(self, row):
        self.events.append(("log", row))


def test_callbacks_are_called_in_order_with_their_payloads(tmp_path):
    events: list = []
    legacy: list = []
    trainer = toy_trainer(
        tmp_path,
        callbacks=[LogsOnly(events), Recorder(events)],
        on_best=legacy.append,  # the Trainer's own on_best argument still works
        max_steps=4,
        eval_every=2,
    )
    result = trainer.fit()
    rows = RunDir(tmp_path).read_metrics()
    logged = [e[1] for e in events if e[0] == "log"]
    assert logged == rows  # every metrics.jsonl row, as written
    assert [e[0] for e in events] == (
        ["start", "log", "log", "log", "eval", "best", "log", "log", "log", "eval"]
        + (["best"] if result.best_step == 4 else [])
        + ["end"]
    )
    assert events[0] == ("start", tmp_path, 0)
    eval_rows = [r for r in rows if "val_accuracy" in r]
    assert [e[1] for e in events if e[0] == "eval"] == eval_rows
    assert eval_rows[0]["step"] == 2 and {"epoch", "val_accuracy", "val_loss"} <= set(eval_rows[0])
    bests = [e for e in events if e[0] == "best"]
    assert all(run_dir == tmp_path for _, run_dir, _ in bests)
    assert [step for *_, step in bests][-1] == result.best_step
    assert legacy == [tmp_path] * len(bests)
    assert events[-1] == ("end", 4)


def test_a_callback_gets_copies_of_the_rows(tmp_path):
    class Vandal:
        def on_log(self, row):
            row.clear()

    toy_trainer(tmp_path, callbacks=[Vandal()], report_to="csv", max_steps=2).fit()
    assert_csv_matches_jsonl(tmp_path)
    assert all("step" in row for row in RunDir(tmp_path).read_metrics())


def test_each_callback_gets_its_own_copy_of_a_row(tmp_path):
    """One callback keeping the rows, the next one changing them: the kept rows stay."""
    kept: list = []

    class Keeper:
        def on_log(self, row):
            kept.append(row)

    class Vandal:
        def on_log(self, row):
            row.clear()

    toy_trainer(tmp_path, callbacks=[Keeper(), Vandal()], max_steps=2).fit()
    assert kept == RunDir(tmp_path).read_metrics()


def test_fit_puts_torch_threads_back(tmp_path):
    """training.num_threads holds while training only: a notebook's torch is not left on it."""
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(3)
        toy_trainer(tmp_path, max_steps=1, num_threads=1).fit()
        assert torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(before)


# ---------------------------------------------------------------------- logging, verbosity
def test_training_progress_false_says_nothing(tmp_path, capsys):
    with no_logging_configured():
        toy_trainer(tmp_path / "quiet", max_steps=2, eval_every=1, progress=False).fit()
        assert capsys.readouterr() == ("", "")
        toy_trainer(tmp_path / "shown", max_steps=2, eval_every=1, progress=True).fit()
        out, err = capsys.readouterr()
        assert not logging.getLogger("attnkit").handlers  # nothing left behind
    assert [line.split(":")[0] for line in out.splitlines()] == ["step 1", "step 2"]
    assert "train: step 2/2 (100%)" in err  # progress lines (not a terminal here)


def _tiny_train(tmp_path: Path, tiny_data: Path, **options):
    recipe = tiny_recipe(tiny_data, max_steps=2, eval_every=2, progress=True)
    return attnkit.train(RunConfig.from_dict(recipe), out=tmp_path / "run", **options)


def test_the_python_api_logs_through_logging(tmp_path, tiny_data, caplog, capsys):
    with caplog.at_level(logging.INFO, logger="attnkit"):
        _tiny_train(tmp_path, tiny_data)
    lines = [(r.name, r.getMessage()) for r in caplog.records]
    assert lines[0][0] == "attnkit.app.api" and lines[0][1].startswith("device: cpu;")
    assert any(m.startswith("data: ") for _, m in lines)
    assert ("attnkit.runtime.training", "step 2: ") in [(n, m[:8]) for n, m in lines]
    assert capsys.readouterr().out == ""  # pytest's handlers are configured: none of ours


def test_without_logging_configured_train_shows_its_lines(tmp_path, tiny_data, capsys):
    with no_logging_configured():
        _tiny_train(tmp_path, tiny_data)
        assert not logging.getLogger("attnkit").handlers  # removed after the call
        assert logging.getLogger("attnkit").level == logging.NOTSET
    out, err = capsys.readouterr()
    assert out.splitlines()[0].startswith("device: cpu;")
    assert any(line.startswith("step 2: val accuracy") for line in out.splitlines())
    assert "train: step 2/2 (100%)" in err


@pytest.mark.parametrize("how", ["verbose=False", "logger level"])
def test_verbose_false_or_a_warning_level_silences_everything(tmp_path, tiny_data, capsys, how):
    if how == "verbose=False":
        with no_logging_configured():
            _tiny_train(tmp_path, tiny_data, verbose=False)
    else:
        with no_logging_configured(logging.WARNING):
            _tiny_train(tmp_path, tiny_data)
    assert capsys.readouterr() == ("", "")
    assert (tmp_path / "run" / "model.safetensors").is_file()


def test_warnings_still_show_with_verbose_false(tmp_path, tiny_data, capsys):
    recipe = tiny_recipe(tiny_data, max_steps=1, bf16=True)  # emulated on this CPU: a warning
    if training.cpu_has_native_bf16():
        pytest.skip("this CPU computes bf16 natively: no warning to show")
    with no_logging_configured():
        attnkit.train(RunConfig.from_dict(recipe), out=tmp_path / "run", verbose=False)
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("attnkit: warning: training.bf16 is true but cpu has no native bf16")


# ---------------------------------------------------------------------- progress display
def test_in_a_notebook_the_bar_is_tqdm_auto(tmp_path, monkeypatch):
    made = []

    class FakeAutoBar:
        def __init__(self, **options):
            made.append(options)

    monkeypatch.setattr(training, "auto_tqdm", FakeAutoBar)
    monkeypatch.setattr(training, "in_notebook", lambda: True)
    trainer = toy_trainer(tmp_path, progress=True)
    assert training.progress_kind() == "notebook"
    assert isinstance(trainer._progress_bar(0), FakeAutoBar)
    assert made[0]["total"] == trainer.total_steps and made[0]["desc"] == "train"
    monkeypatch.setattr(training, "in_notebook", lambda: False)  # a pipe, here
    assert isinstance(trainer._progress_bar(0), LineProgress)


def test_notebook_detection(monkeypatch):
    assert not training.in_notebook()  # pytest: no kernel
    shell = types.SimpleNamespace(kernel=None)
    ipython = types.SimpleNamespace(get_ipython=lambda: shell)
    monkeypatch.setitem(sys.modules, "IPython", ipython)
    monkeypatch.setitem(sys.modules, "ipykernel", types.ModuleType("ipykernel"))
    assert not training.in_notebook()  # a terminal IPython
    shell.kernel = object()
    assert training.in_notebook()  # Jupyter, Colab, VS Code
    monkeypatch.delitem(sys.modules, "ipykernel")
    assert not training.in_notebook()


def test_line_progress_speaks_early_then_less_often(capsys, monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(training.time, "perf_counter", lambda: clock[0])
    bar = LineProgress(total=1000)
    shown = []
    for step in range(1, 200):
        clock[0] = 100.0 + 0.5 * step  # a step every half second
        bar.update(1)
        if capsys.readouterr().err:
            shown.append(clock[0] - 100.0)
    # the first step, then as the elapsed time doubles, then every 30 s
    assert shown == [0.5, 5.5, 11.0, 22.0, 44.0, 74.0]


def test_importing_attnkit_installs_no_handler():
    import attnkit.app.api
    import attnkit.app.cli  # noqa: F401

    logger = logging.getLogger("attnkit")
    assert not [h for h in logger.handlers if type(h).__module__.startswith("attnkit")]
    assert logger.level == logging.NOTSET


def test_the_cli_prints_training_as_before(tmp_path, tiny_data, capsys):
    from attnkit.app import cli

    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump(tiny_recipe(tiny_data, max_steps=2, eval_every=2,
                                                 progress=True)))  # fmt: skip
    assert cli.main(["train", str(recipe), "--out", str(tmp_path / "run")]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0].startswith("device: cpu;") and lines[-1].startswith("done: 2 steps")
    assert any(line.startswith("step 2: val accuracy") for line in lines)
    assert err.splitlines()[-1].startswith("train: step 2/2 (100%)")
    assert not logging.getLogger("attnkit").handlers  # the CLI's handler is gone again
    # its warnings: one line on stderr, as the CLI's own
    with console_logging(logging.WARNING):
        logging.getLogger("attnkit.data.fetch").info("not shown")
        logging.getLogger("attnkit.data.fetch").warning("cannot remove %s", "x.part")
    assert capsys.readouterr() == ("", "attnkit: warning: cannot remove x.part\n")

"""The bundled recipes (src/attnkit/recipes/, read through importlib.resources): every one
describes itself and loads; `attnkit recipes [show NAME]`; `attnkit train NAME` and
`attnkit.train(NAME)` from any folder, a file always winning over a name."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

import attnkit
from attnkit.app.cli import main
from attnkit.core.config import read_recipe
from attnkit.core.errors import ConfigError
from attnkit.core.recipes import bundled_names, bundled_recipe, bundled_text, close_names
from attnkit.tasks.run_config import RunConfig, load_config

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "src" / "attnkit" / "recipes"
NAMES = bundled_names()


def test_the_recipes_folder_is_the_bundled_recipes_and_data_only():
    assert len(NAMES) >= 30 and "nsmc-quick" in NAMES and "imdb-quick" in NAMES
    assert sorted(p.stem for p in FOLDER.glob("*.yaml")) == NAMES
    assert not list(FOLDER.glob("*.py"))  # data only: no module of the import contract
    # configs/NAME.yaml (benchmark records, docs, experiments) link to them in a checkout;
    # configs/experiments/ (benchmark variants) is not shipped
    links = sorted((ROOT / "configs").glob("*.yaml"))
    assert sorted(p.stem for p in links) == NAMES
    for link in links:
        assert link.is_symlink() and link.resolve() == (FOLDER / link.name).resolve()
    assert not (FOLDER / "experiments").exists()


@pytest.mark.parametrize("name", NAMES)
def test_every_bundled_recipe_describes_itself_and_loads(name):
    recipe = bundled_recipe(name)
    raw = yaml.safe_load(bundled_text(name))
    assert recipe.name == name and recipe.task == raw["task"]
    assert recipe.trains and "\n" not in recipe.trains and len(recipe.trains) <= 80
    assert recipe.data.split(", ")[0] == raw["data"]["name"]
    cfg = load_config(name)  # by name: the bundled text, every key checked
    assert cfg.task == recipe.task and cfg.data.name == raw["data"]["name"]


def test_measured_minutes_are_the_recorded_ones():
    """A recipe's minutes are a number recorded in benchmarks/results (the file and key its
    ``about.measured`` names), never written by hand; without a record, "not measured"."""
    measured = 0
    for name in NAMES:
        recipe = bundled_recipe(name)
        if recipe.minutes is None:
            assert recipe.measured is None and recipe.minutes_text == "not measured"
            continue
        source, key = recipe.measured.split()
        assert source.startswith("benchmarks/results/"), (name, source)
        value = json.loads((ROOT / source).read_text(encoding="utf-8"))
        for part in key.split("."):
            value = value[part]
        assert recipe.minutes == value, (name, recipe.minutes, source, key)
        measured += 1
    assert measured >= 20


def test_about_is_ignored_by_training_but_other_keys_are_not():
    raw = yaml.safe_load(bundled_text("nsmc-quick"))
    assert "about" in raw
    assert (
        RunConfig.from_dict(raw).to_dict()
        == RunConfig.from_dict({k: v for k, v in raw.items() if k != "about"}).to_dict()
    )
    with pytest.raises(ConfigError, match="unknown config key 'abuot'"):
        RunConfig.from_dict({**raw, "abuot": {}})


# ----------------------------------------------------------------------------- resolution
def test_a_name_reads_the_bundled_recipe_from_any_folder(tmp_path, monkeypatch):
    in_checkout = read_recipe(ROOT / "configs" / "nsmc-quick.yaml", ["training.epochs=3"])
    monkeypatch.chdir(tmp_path)  # an empty folder: no configs/ here
    assert read_recipe("nsmc-quick", ["training.epochs=3"]) == in_checkout
    assert in_checkout["training"]["epochs"] == 3


def test_a_file_always_wins_over_a_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    raw = yaml.safe_load(bundled_text("nsmc-quick"))
    raw["training"]["epochs"] = 7
    Path("nsmc-quick").write_text(yaml.safe_dump(raw), encoding="utf-8")
    assert load_config("nsmc-quick").training.epochs == 7
    assert load_config("imdb-quick").training.epochs != 7  # no such file: the bundled one


def test_unknown_names_and_missing_files_are_one_line_errors(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as exc:
        load_config("nsmc-quik")
    assert str(exc.value) == (
        "'nsmc-quik' is neither a recipe file nor a bundled recipe; did you mean nsmc-quick? "
        "(`attnkit recipes` lists them)"
    )
    # a path that is not there is a missing file, with the bundled recipe of that name
    with pytest.raises(ConfigError) as exc:
        load_config("configs/nsmc-quick.yaml")
    assert str(exc.value) == (
        "config file not found: configs/nsmc-quick.yaml (the bundled recipe of that name: "
        "attnkit train nsmc-quick)"
    )
    with pytest.raises(ConfigError, match=r"^config file not found: my\.yaml$"):
        load_config("my.yaml")
    for name in ("../nsmc-quick", "nsmc-quick/", "", "recipes/nsmc-quick"):
        with pytest.raises(ConfigError):
            bundled_text(name)
    assert close_names("gpt") == ["imdb-gpt", "nsmc-gpt", "nsmc-gpt-classifier"]
    assert close_names("zzzz") == []


# ----------------------------------------------------------------------------- CLI
def test_recipes_lists_every_recipe_in_a_table(capsys):
    assert main(["recipes"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["NAME", "TASK", "TRAINS", "DATA", "MINUTES"]
    rows = {line.split()[0]: line for line in lines[1 : 1 + len(NAMES)]}
    assert list(rows) == NAMES
    for name, line in rows.items():
        recipe = bundled_recipe(name)
        for cell in (recipe.task, recipe.trains, recipe.data):
            assert f"  {cell}  " in line, (name, cell)
        assert line.endswith(f"  {recipe.minutes_text}")
    assert rows["nsmc-transformer"].endswith("  15.91")
    assert rows["nsmc-quick"].endswith("  0.9")
    assert rows["bert-pretrain-en"].endswith("  not measured")
    # what a recipe starts from: a run (model.init_from, tokenizer.path) or imported weights
    assert "  nsmc, runs/bert-pretrain-ko  " in rows["nsmc-bert"]
    assert "  nsmc, runs/nsmc-bilm  " in rows["nsmc-elmo-baseline"]
    assert "  imdb, all-MiniLM-L6-v2  " in rows["imdb-minilm"]
    assert lines[1 + len(NAMES)].startswith("MINUTES: ")


def test_recipes_show_prints_the_file_verbatim(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["recipes", "show", "nsmc-quick"]) == 0
    shown = capsys.readouterr().out
    assert shown == (FOLDER / "nsmc-quick.yaml").read_text(encoding="utf-8")
    Path("my.yaml").write_text(shown, encoding="utf-8")  # copy, edit, train: it loads
    assert load_config("my.yaml").to_dict() == load_config("nsmc-quick").to_dict()


def test_recipes_show_unknown_names_the_closest(capsys):
    assert main(["recipes", "show", "nsmc-quik"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "attnkit: error: no bundled recipe named 'nsmc-quik' (did you mean nsmc-quick?); "
        "`attnkit recipes` lists them\n"
    )


def test_train_an_unknown_name_is_one_line(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["train", "shakespeare"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "attnkit: error: 'shakespeare' is neither a recipe file nor a bundled recipe; did you "
        "mean shakespeare-bpe / shakespeare-char / shakespeare-nanogpt-cpu? (`attnkit recipes` "
        "lists them)\n"
    )
    assert not Path("runs").exists()


TINY = [  # nsmc-quick made tiny: the conftest's synthetic reviews, a 32-wide model
    "data.name=file",
    "data.max_len=16",
    "tokenizer.vocab_size=120",
    "tokenizer.min_frequency=1",
    "model.d_model=32",
    "model.num_heads=2",
    "model.d_ff=64",
    "training.epochs=1",
    "training.batch_size=32",
    "training.progress=false",
    "training.num_threads=1",
]


@pytest.mark.slow  # ~3.5 s on a busy 2-core machine: a real (tiny) training
def test_train_a_bundled_recipe_by_name_from_an_empty_folder(tiny_data, tmp_path, monkeypatch):
    work = tmp_path / "empty"
    work.mkdir()
    monkeypatch.chdir(work)
    data = [f"data.train={tiny_data / 'train.csv'}", f"data.test={tiny_data / 'test.csv'}"]
    argv = ["train", "nsmc-quick", "--threads", "1"]
    for item in TINY + data:
        argv += ["--set", item]
    assert main(argv) == 0
    run = work / "runs" / "nsmc-quick"  # the default --out: runs/<name>
    saved = json.loads((run / "config.json").read_text(encoding="utf-8"))
    assert saved["model"]["d_model"] == 32 and saved["training"]["schedule"] == "linear"
    assert saved["data"]["val_fraction"] == 0.05  # the rest is the bundled recipe's
    assert (run / "model.safetensors").is_file()
    assert attnkit.load(run).predict(["great movie"])[0].label in ("pos", "neg")


def test_python_api_exports_the_recipes():
    assert [r.name for r in attnkit.recipes()] == NAMES
    quick = attnkit.recipe("nsmc-quick")
    assert quick.task == "classify" and quick.data == "nsmc" and quick.minutes == 0.9
    assert quick.text == bundled_text("nsmc-quick")
    with pytest.raises(ConfigError, match="did you mean nsmc-quick"):
        attnkit.recipe("nsmc-quik")


def test_recipes_loads_no_torch():
    """`attnkit recipes` is a listing: it starts without torch (as `data list` does)."""
    import subprocess
    import sys

    code = (
        "import sys; from attnkit.app.cli import main; main(['recipes']); "
        "assert 'torch' not in sys.modules, 'torch loaded'"
    )
    env = {k: v for k, v in os.environ.items() if k != "ATTNKIT_DEBUG"}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env
    )
    assert proc.returncode == 0, proc.stderr


def test_train_without_a_recipe_is_an_error_not_the_defaults(tmp_path) -> None:
    """``attnkit.train(None)`` once ran the defaults' full NSMC training, silently."""
    import attnkit
    from attnkit.core.config import ConfigError

    with pytest.raises(ConfigError, match="train needs a recipe"):
        attnkit.train(None, out=tmp_path / "run")
    assert not (tmp_path / "run").exists()

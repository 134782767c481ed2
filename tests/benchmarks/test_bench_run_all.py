"""benchmarks/run_all.py (``make bench``): the list is consistent with the scripts, recipes
and recorded results; every experiment is files (no --set), and each file under
configs/experiments/ resolves to the config its benchmark trained; bad input fails fast. No
benchmark runs here."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from attnkit.tasks.run_config import load_config

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "run_all.py"
EXPERIMENT_DIR = ROOT / "configs" / "experiments"
EXPERIMENTS_REL = "configs/experiments/"

# Each recipe file under configs/experiments/ (by its stem): the recipe and the overrides
# benchmarks/run_all.py gave before issue 33 (--set, --pretrain-set, --ensemble-set; --init RUN
# and the run a --pretrain stage trains into are model.init_from, as bert.py passes them).
KO = "model.init_from=runs/bench-bert-pretrain-ko"
BERT_3EP = ("training.epochs=3", "training.lr=2e-4")
EXPERIMENTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "nsmc-ngram-bf16": ("nsmc-ngram", ("training.bf16=true",)),
    "imdb-ngram-bf16": ("imdb-ngram", ("training.bf16=true",)),
    "nsmc-pretrain-2800": ("nsmc-pretrain", ("training.max_steps=2800",)),
    "nsmc-gru-h128": ("nsmc-gru", ("model.hidden_size=128",)),
    "imdb-transformer-max_len512": ("imdb-transformer", ("data.max_len=512",)),
    "nsmc-pretrain-dropout0.1-limit100000": (
        "nsmc-pretrain",
        ("model.dropout=0.1", "data.limit=100000"),
    ),
    "conll2003-minilm-3ep": ("conll2003-minilm", ("training.epochs=3",)),
    "nsmc-bert-3ep": ("nsmc-bert", (KO, "training.epochs=3")),
    "nsmc-bert-lr2e-4": ("nsmc-bert", (KO, *BERT_3EP)),
    "nsmc-bert-lr3e-4": ("nsmc-bert", (KO, "training.epochs=3", "training.lr=3e-4")),
    "bert-pretrain-ko-12500": ("bert-pretrain-ko", ("training.max_steps=12500",)),
    "nsmc-bert-12500": ("nsmc-bert", (f"{KO}-12500", *BERT_3EP)),
    "nsmc-bert-12500-ls": ("nsmc-bert", (f"{KO}-12500", *BERT_3EP, "training.label_smoothing=0.1")),
    "bert-pretrain-ko-wwm": (
        "bert-pretrain-ko",
        ("training.max_steps=15000", "data.whole_word_mask=true"),
    ),
    "nsmc-bert-wwm": ("nsmc-bert", (f"{KO}-wwm", *BERT_3EP)),
    "nsmc-bert-wwm-4ep": ("nsmc-bert", (f"{KO}-wwm", "training.epochs=4", "training.lr=2e-4")),
    "nsmc-bert-wwm-seed1": ("nsmc-bert", (f"{KO}-wwm", *BERT_3EP, "training.seed=1")),
    "bert-pretrain-ko-6l": (
        "bert-pretrain-ko",
        ("model.num_layers=6", "training.max_steps=18000", "data.whole_word_mask=true"),
    ),
    "nsmc-bert-6l-mean": ("nsmc-bert", (f"{KO}-6l", *BERT_3EP, "model.pooling=mean")),
    "nsmc-bert-6l": ("nsmc-bert", (f"{KO}-6l", *BERT_3EP)),
    "nsmc-bert-6l-self": ("nsmc-bert", (f"{KO}-6l", *BERT_3EP, "model.pooling=mean")),
    "nsmc-bert-6l-distill": (
        "nsmc-bert",
        (f"{KO}-6l", "training.epochs=2", "training.lr=2e-4", "model.pooling=mean"),
    ),
    "klue-nli-bert": ("klue-nli-bert", (KO,)),
    "klue-ner-bert": ("klue-ner-bert", (KO,)),
    "korquad-bert-1ep": ("korquad-bert", (KO, "training.epochs=1")),
    "klue-nli-bert-frozen": (
        "klue-nli-bert",
        (KO, "model.freeze_encoder=true", "training.lr=1e-3"),
    ),
    "klue-ner-bert-frozen": (
        "klue-ner-bert",
        (KO, "model.freeze_encoder=true", "training.lr=1e-3"),
    ),
}
# options that change a recipe: the registry names recipe files instead. (recipe_speed.py's
# --after-set stays: the setting is what that benchmark measures, on the "after" runs only.)
RECIPE_OPTIONS = ("--set", "--pretrain-set", "--ensemble-set", "--bilm-set", "--init")


@pytest.fixture(scope="module")
def run_all():
    spec = importlib.util.spec_from_file_location("run_all", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["run_all"] = module  # dataclasses look their module up while it loads
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop("run_all", None)


def test_list_names_every_benchmark(run_all):
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--list"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    for bench in run_all.BENCHMARKS:
        assert bench.name in proc.stdout and " ".join(bench.args) in proc.stdout


def test_every_benchmark_script_and_recipe_exists(run_all):
    names = [b.name for b in run_all.BENCHMARKS]
    assert len(names) == len(set(names))
    for bench in run_all.BENCHMARKS:
        assert bench.script.is_file(), bench.script
        for arg in bench.args:
            if arg.startswith("configs/"):
                assert (ROOT / arg).is_file(), f"{bench.name}: {arg}"
        if "results/" in bench.writes:  # a row of docs/results.md: it has been run, unless
            # registered as pending (not run yet; drop `pending` once its result is in)
            recorded = (ROOT / "benchmarks" / "results" / f"{bench.name}.json").is_file()
            assert recorded != bench.pending, f"{bench.name}: pending={bench.pending}"


@pytest.mark.parametrize("stem", sorted(EXPERIMENTS))
def test_experiment_file_resolves_to_the_config_trained_before(stem):
    """configs/experiments/STEM.yaml == its old recipe + overrides, setting for setting.

    Should a shipped recipe change later, this fails for the experiments written from it:
    leave the experiment file as it is (it is what ran) and add the old values to its
    overrides here."""
    recipe, overrides = EXPERIMENTS[stem]
    before = load_config(ROOT / "configs" / f"{recipe}.yaml", list(overrides)).to_dict()
    assert load_config(EXPERIMENT_DIR / f"{stem}.yaml").to_dict() == before


def test_benchmarks_run_recipe_files_without_overrides(run_all):
    used = set()
    for bench in run_all.BENCHMARKS:
        assert not set(bench.args) & set(RECIPE_OPTIONS), f"{bench.name}: {bench.run}"
        for recipe in bench.recipes:
            load_config(ROOT / recipe)  # exists and is a valid recipe
            used.add(recipe)
    experiments = {f"configs/experiments/{p.name}" for p in EXPERIMENT_DIR.glob("*.yaml")}
    assert experiments == {r for r in used if r.startswith("configs/experiments/")}
    assert {f"configs/experiments/{s}.yaml" for s in EXPERIMENTS} <= experiments


def test_a_run_a_recipe_starts_from_is_a_need(run_all):
    """A recipe whose model.init_from is a benchmark's run (runs/bench-*) waits for it, unless
    the same command's --pretrain stage trains it (bert.py: into runs/bench-<its stem>); an
    experiment file fine-tuned after bert.py's --pretrain names that run."""
    for bench in run_all.BENCHMARKS:
        args = bench.args
        pretrained = {
            f"runs/bench-{Path(args[i + 1]).stem}" for i, a in enumerate(args) if a == "--pretrain"
        }
        for recipe in bench.recipes:
            start = getattr(load_config(ROOT / recipe).model, "init_from", None)
            if start and start.startswith("runs/bench-") and start not in pretrained:
                assert f"run:{start}" in bench.needs, f"{bench.name}: {start}"
        if pretrained and args[0] == "benchmarks/bert.py" and args[1].startswith(EXPERIMENTS_REL):
            assert load_config(ROOT / args[1]).model.init_from in pretrained, bench.name


def test_default_set_is_quick(run_all):
    quick = [b for b in run_all.BENCHMARKS if b.quick]
    assert quick and sum(b.minutes for b in quick) <= 5


def test_unknown_name_exits_2_with_one_line():
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "nsmc-ngram", "no-such-benchmark"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr == ("run_all.py: error: unknown benchmark no-such-benchmark (see --list)\n")
    assert proc.stdout == ""


def test_missing_data_skips_without_running(run_all, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ATTNKIT_DATA", str(tmp_path))
    monkeypatch.setattr(run_all.subprocess, "call", lambda *a, **k: pytest.fail("ran"))
    assert run_all.main([]) == 0  # the default set: skipping is not a failure
    out = capsys.readouterr().out
    assert out.count(": skipped: dataset ") == sum(b.quick for b in run_all.BENCHMARKS)
    assert run_all.main(["chatbot-ko"]) == 1  # asked for by name: it did not run
    assert "=== chatbot-ko: skipped: dataset 'chatbot-ko'" in capsys.readouterr().out


def test_a_run_need_skips_until_the_run_exists(run_all, tmp_path, monkeypatch):
    bench = run_all.Benchmark("x", "lm.py", 1, ("run:runs/x",))
    monkeypatch.setattr(run_all, "ROOT", tmp_path)
    assert "run runs/x not found" in run_all.missing_data(bench)
    (tmp_path / "runs" / "x").mkdir(parents=True)
    (tmp_path / "runs" / "x" / "model.safetensors").write_bytes(b"")
    assert run_all.missing_data(bench) is None

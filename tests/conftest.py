"""Shared fixtures: a tiny synthetic sentiment dataset (English + Korean) and a tiny recipe,
so that training tests run in seconds and never need the shared datasets. Hypothesis tests
draw the same examples every run (derandomized, always when CI is set); ATTNKIT_FUZZ=1 draws
new random examples each run, locally, for exploring."""

from __future__ import annotations

import csv
import os
import random
from pathlib import Path

import pytest
import yaml
from hypothesis import settings

# every hypothesis test (explicit @settings inherit it): a gate in CI, not a lottery
_FUZZ = bool(os.environ.get("ATTNKIT_FUZZ")) and not os.environ.get("CI")
settings.register_profile("attnkit", derandomize=not _FUZZ)
settings.load_profile("attnkit")

# The suite behaves alike on every CPU: `training.bf16: auto` and `precision="auto"` take the
# path of a CPU without native bf16 (fp32), as on a laptop with AVX2 only; the tests of the
# bf16 path set ATTNKIT_CPU_BF16=1 themselves (tests/runtime/test_device_precision.py). Set before any
# test starts, so that subprocesses (torchrun, the CLI) inherit it.
os.environ.setdefault("ATTNKIT_CPU_BF16", "0")

# The tests listed in tests/slow_tests.txt (by tools/tier_tests.py, from their measured
# time) leave the fast tier too: marked slow, as the integration tests are in their files.
_SLOW_LIST = Path(__file__).with_name("slow_tests.txt")
_SLOW = {
    line.strip()
    for line in _SLOW_LIST.read_text(encoding="utf-8").splitlines()
    if line.strip() and not line.startswith("#")
}


def _cores_per_worker() -> int:
    """The usable cores shared out among the pytest-xdist workers (``-n``): 1 each for
    ``make test``'s two workers on 2 cores; all of them without xdist."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, cores // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))


_THREADS = _cores_per_worker()


@pytest.fixture(autouse=True)
def _torch_threads_per_worker():
    """Each test starts with torch's intra-op threads at the worker's share of the cores.
    torch's default (every core) in each of two workers puts 4 OpenMP threads on 2 cores,
    and threads that lose their core spin waiting for each other: a tiny in-process training
    ran 3-30x slower so (docs/results.md "Threads"). An in-process CLI call sets the count
    as a user's would (apply_threads), so it is set again before every test."""
    import torch

    if torch.get_num_threads() != _THREADS:
        torch.set_num_threads(_THREADS)
    yield


def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        if item.nodeid in _SLOW:
            item.add_marker(pytest.mark.slow)


POS = ["great", "wonderful", "loved", "excellent", "최고", "재미있어요", "감동"]
NEG = ["awful", "boring", "hated", "terrible", "최악", "지루해요", "실망"]
FILLER = ["the", "movie", "was", "really", "film", "story", "이", "영화", "정말", "배우"]


def make_sentiment_rows(n: int, seed: int) -> list[dict[str, str]]:
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        label = rng.choice(["pos", "neg"])
        words = rng.choices(FILLER, k=rng.randint(3, 8))
        words.insert(rng.randrange(len(words) + 1), rng.choice(POS if label == "pos" else NEG))
        rows.append({"text": " ".join(words), "label": label})
    return rows


def write_csv(path: Path, rows: list[dict[str, str]], columns=("text", "label")) -> Path:
    with path.open("w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(columns))
        writer.writeheader()
        for row in rows:
            writer.writerow({c: row[c] for c in columns})
    return path


def pretraining_documents(words: list[str], n: int = 60, seed: int = 0) -> list[str]:
    """``n`` documents of 1-4 lines ("sentences") of 3-8 random ``words`` each: a corpus for
    bert-pretrain (documents separated by blank lines, one sentence per line)."""
    rng = random.Random(seed)
    return [
        "\n".join(
            " ".join(rng.choice(words) for _ in range(rng.randint(3, 8)))
            for _ in range(rng.randint(1, 4))
        )
        for _ in range(n)
    ]


def tiny_recipe(data_dir: Path, **training) -> dict:
    return {
        "task": "classify",
        "data": {
            "name": "file",
            "train": str(data_dir / "train.csv"),
            "test": str(data_dir / "test.csv"),
            "val_fraction": 0.1,
            "max_len": 16,
        },
        "tokenizer": {"kind": "wordpiece", "vocab_size": 120, "min_frequency": 1},
        "model": {
            "arch": "transformer",
            "d_model": 32,
            "num_heads": 2,
            "d_ff": 64,
            "num_layers": 1,
            "dropout": 0.1,
        },
        "training": {
            "epochs": 2,
            "batch_size": 16,
            "lr": 3e-3,
            "log_every": 1,
            "progress": False,
            "num_threads": 1,
            **training,
        },
    }


def write_tiny_data(folder: Path) -> Path:
    """``folder`` (created) with the tiny sentiment train.csv (320 rows) and test.csv (80)."""
    folder.mkdir()
    write_csv(folder / "train.csv", make_sentiment_rows(320, seed=0))
    write_csv(folder / "test.csv", make_sentiment_rows(80, seed=1))
    return folder


@pytest.fixture
def tiny_data(tmp_path: Path) -> Path:
    return write_tiny_data(tmp_path / "data")


@pytest.fixture
def tiny_config(tmp_path: Path, tiny_data: Path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(tiny_recipe(tiny_data)), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def tiny_run_once(tmp_path_factory) -> Path:
    """The tiny recipe (1 epoch) trained once per session: tests copy it
    (``shutil.copytree``) instead of training the same run again; never change it."""
    import attnkit

    root = tmp_path_factory.mktemp("tiny-once")
    data = write_tiny_data(root / "data")
    recipe = root / "tiny.yaml"
    recipe.write_text(yaml.safe_dump(tiny_recipe(data, epochs=1)), encoding="utf-8")
    attnkit.train(recipe, out=root / "run", log=lambda *_: None)
    return root / "run"


# --------------------------------------------------------------------------- served runs
LEGACY_RUNS = Path(__file__).parent / "fixtures" / "legacy_runs"
SERVE_LM_TEXT = "First Citizen:\nBefore we proceed any further, hear me speak.\n\n" * 20


@pytest.fixture(scope="session")
def served_runs(tmp_path_factory) -> dict[str, Path]:
    """One run per endpoint for the serving tests (``NAME=RUN`` specs by name): a tiny
    Transformer sentiment classifier (English + Korean), an n-gram one, a tiny character
    GPT, and the legacy translate / chat runs of tests/fixtures."""
    import attnkit

    root = tmp_path_factory.mktemp("served")
    data = write_tiny_data(root / "data")
    recipe = root / "sentiment.yaml"
    recipe.write_text(yaml.safe_dump(tiny_recipe(data, epochs=3)), encoding="utf-8")
    attnkit.train(recipe, out=root / "sentiment", log=lambda *_: None)
    corpus = root / "verse.txt"
    corpus.write_text(SERVE_LM_TEXT, encoding="utf-8")
    lm_recipe = {
        "task": "lm",
        "data": {"name": "file", "train": str(corpus), "val_fraction": 0.1, "max_len": 24},
        "tokenizer": {"kind": "char", "min_frequency": 1},
        "model": {"arch": "gpt", "num_layers": 1, "d_model": 32, "num_heads": 2, "d_ff": 64,
                  "dropout": 0.0},
        "training": {"max_steps": 10, "batch_size": 8, "lr": 3e-3, "eval_every": 10,
                     "log_every": 5, "progress": False, "num_threads": 1},
    }  # fmt: skip
    (root / "lm.yaml").write_text(yaml.safe_dump(lm_recipe), encoding="utf-8")
    attnkit.train(root / "lm.yaml", out=root / "verse", log=lambda *_: None)
    return {
        "sentiment": root / "sentiment",
        "ngram": LEGACY_RUNS / "classify-ngram",
        "translator": LEGACY_RUNS / "translate-transformer",
        "bot": LEGACY_RUNS / "chat-lstm",
        "verse": root / "verse",
    }


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium through Playwright, one per test module (the explorer's browser
    tests; skipped with the reason when Playwright or a Chromium binary is missing)."""
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed (make test installs it)"
    )
    from browser_support import find_chromium

    path, why = find_chromium()
    if path is None:
        pytest.skip(why)
    with sync_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=path, args=["--no-sandbox"])
        yield launched
        launched.close()

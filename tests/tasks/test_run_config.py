"""Recipes: typed loading, overrides, and one-line errors for typos and bad values."""

from pathlib import Path

import pytest

from attnkit.core.config import ConfigError, apply_overrides
from attnkit.data.settings import DataConfig
from attnkit.tasks.run_config import RunConfig, load_config


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


RECIPES = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.yaml"))


@pytest.mark.parametrize("path", RECIPES, ids=[p.stem for p in RECIPES])
def test_every_shipped_recipe_loads(path):
    cfg = load_config(path)  # every key known, every value valid
    if getattr(cfg.model, "objective", "mlm") == "electra":
        assert cfg.task == "mlm" and cfg.model.generator_d_model


# ----------------------------------------------------------------------------- data sections
def _one_line_error(raw: dict, source: str = "recipe") -> str:
    with pytest.raises(ConfigError) as exc:
        RunConfig.from_dict(raw, source=source)
    message = str(exc.value)
    assert "\n" not in message and len(message) < 200, message
    return message


def test_each_task_reads_its_own_data_settings():
    qa = RunConfig.from_dict(
        {"task": "qa", "data": {"name": "korquad", "doc_stride": 64}, "model": {"arch": "bert-qa"}}
    )
    assert type(qa.data).__name__ == "QAData" and qa.data.doc_stride == 64
    assert isinstance(qa.data, DataConfig)  # the shared settings are every task's
    classify = RunConfig.from_dict({"data": {"text_column": "review"}})
    assert classify.data.text_column == "review" and not hasattr(classify.data, "doc_stride")
    lm = RunConfig.from_dict({"task": "lm", "data": {"name": "tinyshakespeare"}})
    assert type(lm.data) is DataConfig  # a task without settings of its own
    saved = qa.to_dict()["data"]
    assert "doc_stride" in saved and "mask_prob" not in saved and "text_column" not in saved
    assert RunConfig.from_dict(qa.to_dict(), source="run") == qa


def test_a_data_key_is_checked_against_the_task():
    # a typo: the closest key of this task's section
    assert _one_line_error({"task": "qa", "data": {"name": "korquad", "doc_strid": 3}}) == (
        "unknown config key 'data.doc_strid' (did you mean 'doc_stride'?)"
    )
    # another task's key: named as such, whichever tasks have it
    assert _one_line_error({"data": {"doc_stride": 64}}) == (
        "data.doc_stride is a setting of task qa, not classify: remove it (or choose task qa)"
    )
    assert _one_line_error({"task": "lm", "data": {"mask_prob": 0.2}}) == (
        "data.mask_prob is a setting of task bert-pretrain / mlm, not lm: remove it "
        "(or choose task bert-pretrain)"
    )
    message = _one_line_error({"task": "tag", "data": {"name": "conll2003", "src_lang": "en"}})
    assert message.startswith("data.src_lang is a setting of task chat / translate, not tag")


def test_an_override_of_another_tasks_data_key_is_refused(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("task: classify\n")
    with pytest.raises(ConfigError, match=r"data.whole_word_mask is a setting of task bert-pre"):
        load_config(path, ["data.whole_word_mask=true"])


def test_a_run_saved_with_the_flat_data_section_loads():
    """Runs were saved with one data section holding every task's settings: reading a run
    ignores the keys of other tasks (a recipe refuses them), and refuses unknown ones."""
    flat = {
        "name": "korquad", "train": None, "validation": None, "test": None,
        "text_column": "text", "pair_column": None, "label_column": "label",
        "val_fraction": 0.05, "val_split": "random", "max_len": 128, "truncation": "head",
        "limit": None, "extra_train": None, "data_dir": None, "mask_prob": 0.15,
        "whole_word_mask": False, "doc_stride": 96, "max_question_len": 64,
        "max_answer_len": 30, "label_unit": None, "src_lang": "de", "tgt_lang": "en",
    }  # fmt: skip
    cfg = RunConfig.from_dict({"task": "qa", "data": flat}, source="run")
    assert cfg.data.doc_stride == 96 and not hasattr(cfg.data, "mask_prob")
    first = RunConfig.from_dict({"task": "qa", "data": flat}, source="first-format run")
    assert first.data == cfg.data
    assert _one_line_error({"task": "qa", "data": flat}).startswith(
        "data.text_column is a setting of task"
    )
    assert "'data.nonsense'" in _one_line_error(
        {"task": "qa", "data": {**flat, "nonsense": 1}}, source="run"
    )


def test_task_data_settings_are_checked():
    for raw, message in [
        ({"task": "qa", "data": {"doc_stride": 0}}, "data.doc_stride must be >= 1, got 0"),
        ({"task": "tag", "data": {"label_unit": "x"}}, "data.label_unit must be word|piece|char"),
        ({"task": "mlm", "data": {"mask_prob": 1.0}}, "data.mask_prob must be in (0, 1)"),
    ]:
        assert message in _one_line_error(raw)

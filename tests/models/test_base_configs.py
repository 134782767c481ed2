"""Per-family model configs: every field documented and checked, every registered model
builds from its config alone, and save_pretrained / from_pretrained round-trip it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from attnkit.app.cli import main
from attnkit.core.config import ConfigError
from attnkit.models import MODEL_CONFIGS, archs_exporting, config_class, from_pretrained
from attnkit.models.classifier import TransformerClassifier, TransformerClassifierConfig
from attnkit.models.hf_bert import BERT_ARCHS
from attnkit.nn.layers import BlockConfig
from attnkit.tasks.run_config import RunConfig

SMALL = {"d_model": 16, "num_heads": 2, "d_ff": 32, "num_layers": 1, "hidden_size": 8,
         "emb_dim": 8, "num_buckets": 64, "generator_d_model": 16}  # fmt: skip
ALL = sorted({(family, arch) for family, archs in MODEL_CONFIGS.items() for arch in archs})


def _small(family: str, arch: str):
    cls = config_class(family, arch)
    names = {f.name for f in dataclasses.fields(cls)}
    sizes = {k: v for k, v in SMALL.items() if k in names}
    return cls(arch=arch, vocab_size=30, max_len=12, **sizes)


@pytest.mark.parametrize(("family", "arch"), ALL, ids=[f"{f}-{a}" for f, a in ALL])
def test_every_model_builds_from_its_config_and_round_trips(
    tmp_path: Path, family: str, arch: str
) -> None:
    config = _small(family, arch)
    docs = type(config).docs()
    assert all(docs.values()), [k for k, v in docs.items() if not v]  # one line each
    assert type(config).from_dict(config.to_dict()) == config
    torch.manual_seed(0)
    model = config.build()
    assert model.config is config
    model.save_pretrained(tmp_path)
    again = from_pretrained(tmp_path)
    assert type(again) is type(model) and again.config == config
    for (name, a), b in zip(model.state_dict().items(), again.state_dict().values(), strict=True):
        assert torch.equal(a, b), name


def test_recipe_errors_name_the_key_and_the_arch() -> None:
    cases = [
        (
            {"model": {"arch": "gru", "num_heads": 2}},
            "model.num_heads is a setting of arch transformer / bert-classifier / "
            "gpt-classifier, not gru",
        ),
        (
            {"model": {"arch": "ngram", "hidden_size": 8}},
            "setting of arch rnn / lstm / gru, not ngram",
        ),
        ({"model": {"arch": "gru", "num_hidden": 2}}, "unknown config key 'model.num_hidden'"),
        ({"model": {"arch": "gru", "pooling": "cls"}}, "model.pooling must be one of mean, max"),
        ({"model": {"objective": "electra"}}, "model.objective is for task mlm"),
        ({"model": {"vocab_size": 100}}, "model.vocab_size is set by the task"),
        ({"model": {"d_model": 30, "num_heads": 4}}, "divisible"),
        ({"model": {"arch": "cnn"}}, "task classify needs model.arch transformer, rnn, lstm"),
    ]
    for raw, message in cases:
        with pytest.raises(ConfigError, match=message):
            RunConfig.from_dict(raw)


def test_models_take_a_config_or_its_keywords() -> None:
    config = TransformerClassifierConfig(vocab_size=30, d_model=16, num_heads=2, d_ff=32)
    a = TransformerClassifier(config)
    b = TransformerClassifier(vocab_size=30, d_model=16, num_heads=2, d_ff=32)
    assert a.config == b.config
    assert a.encoder.layers[0].ffn.linear1.out_features == 32
    assert config.block() == BlockConfig(16, 2, 32, 0.1, None, "gelu", False)
    with pytest.raises(TypeError, match="needs a TransformerClassifierConfig"):
        TransformerClassifier(config_class("classifier", "gru")())
    with pytest.raises(ConfigError, match="divisible"):
        TransformerClassifier(vocab_size=30, d_model=15, num_heads=2)


def test_the_cli_reports_user_errors_in_one_line_but_not_bugs(monkeypatch, capsys) -> None:
    import attnkit.app.api

    assert main(["predict", "/nonexistent/run", "text"]) == 2
    assert capsys.readouterr().err.startswith("attnkit: error: /nonexistent/run is not a run")

    def bug(*args, **kwargs):
        raise KeyError("a bug, not bad input")

    monkeypatch.setattr(attnkit.app.api, "load", bug)
    with pytest.raises(KeyError):  # a traceback, not "attnkit: error:" and exit 2
        main(["predict", "/nonexistent/run", "text"])


def test_a_saved_run_is_not_refused_by_task_checks_added_later(tmp_path: Path) -> None:
    """A run's config.json passed the task's checks when it started; loading it must not
    depend on checks added since (today a Transformer recipe with teacher_forcing_ratio < 1
    is refused, but first-format runs saved it, and the Transformer ignores it)."""
    raw = {"task": "translate", "data": {"name": "file", "train": "x"},
           "training": {"teacher_forcing_ratio": 0.5}}  # fmt: skip
    with pytest.raises(ConfigError, match="teacher_forcing_ratio < 1 needs a decoder"):
        RunConfig.from_dict(raw)
    cfg = RunConfig.from_dict(raw, source="run")
    assert cfg.training.teacher_forcing_ratio == 0.5 and cfg.model.describe().startswith("transf")


@pytest.mark.slow  # (alone: the process's first meta-device build, ~1.5 s)
def test_the_archs_with_an_export_are_those_whose_models_declare_it() -> None:
    """``attnkit export``'s refusal lists these: each registered model's export_formats."""
    hf = archs_exporting("hf")
    assert set(BERT_ARCHS) <= set(hf) and "gpt" in hf  # BERT's heads, GPT-2
    assert not {"transformer", "gru", "ngram", "elmo", "gpt-classifier"} & set(hf)
    assert {"transformer", "bert-classifier", "gpt-classifier"} <= set(archs_exporting("onnx"))
    assert "lstm" not in archs_exporting("onnx") and "ngram" in archs_exporting("int8")

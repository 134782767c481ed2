"""Task bilm (ELMo's biLM trained on unlabelled text) and the feature-based ELMo classifier
(task classify, model.arch elmo): tiny corpus, tiny models, CPU, seconds."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

import attnkit
from attnkit.app.api import RunError
from attnkit.core.config import ConfigError
from attnkit.models.elmo_classifier import ELMoClassifier, ELMoClassifierConfig, add_boundaries
from attnkit.nn.capture import capture
from attnkit.tasks.run_config import RunConfig
from conftest import make_sentiment_rows, tiny_recipe

QUIET = {"log": lambda *_: None}


def _bilm_recipe(corpus: Path, **training) -> dict:
    return {
        "task": "bilm",
        "data": {"name": "file", "train": str(corpus), "val_fraction": 0.1, "max_len": 12},
        "tokenizer": {"kind": "wordpiece", "vocab_size": 120, "min_frequency": 1},
        "model": {
            "arch": "elmo",
            "d_model": 16,
            "hidden_size": 16,
            "num_layers": 2,
            "dropout": 0.0,
        },  # fmt: skip
        "training": {
            "epochs": 3,
            "batch_size": 16,
            "lr": 1e-2,
            "log_every": 5,
            "progress": False,
            "num_threads": 1,
            **training,
        },  # fmt: skip
    }


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """A trained biLM and an ELMo classifier on it (shared: training is the slow part)."""
    root = tmp_path_factory.mktemp("bilm")
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(r["text"] for r in make_sentiment_rows(400, seed=5)) + "\n",
                      encoding="utf-8")  # fmt: skip
    data = root / "data"
    data.mkdir()
    from conftest import write_csv

    write_csv(data / "train.csv", make_sentiment_rows(320, seed=0))
    write_csv(data / "test.csv", make_sentiment_rows(80, seed=1))
    out: dict[str, Path] = {"root": root, "corpus": corpus, "data": data}
    logs: list[str] = []
    out["bilm"] = root / "bilm"
    attnkit.train(RunConfig.from_dict(_bilm_recipe(corpus)), out=out["bilm"], log=logs.append)
    out["bilm_logs"] = logs  # type: ignore[assignment]
    recipe = tiny_recipe(data, epochs=4, lr=1e-2)
    recipe["model"] = {"arch": "elmo", "init_from": str(out["bilm"]), "token_dim": 8,
                       "task_hidden_size": 8, "dropout": 0.0, "bilm_d_model": 64}  # fmt: skip
    clf_logs: list[str] = []
    out["clf"] = root / "clf"
    attnkit.train(RunConfig.from_dict(recipe), out=out["clf"], log=clf_logs.append)
    out["clf_logs"] = clf_logs  # type: ignore[assignment]
    return out


@pytest.mark.slow
def test_bilm_trains_and_reports_both_perplexities(runs, capsys) -> None:
    run = runs["bilm"]
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in rows if "val_loss" in r]
    assert len(evals) == 3
    first, last = evals[0], evals[-1]
    assert {"val_forward_perplexity", "val_backward_perplexity", "val_perplexity"} <= set(last)
    assert last["val_loss"] < first["val_loss"]
    # loss = forward NLL + backward NLL; perplexity = exp of their mean
    f, b = math.log(last["val_forward_perplexity"]), math.log(last["val_backward_perplexity"])
    assert last["val_loss"] == pytest.approx(f + b, rel=1e-5)
    assert last["val_perplexity"] == pytest.approx(math.exp((f + b) / 2), rel=1e-5)
    assert any("[BOS] text [EOS]" in line for line in runs["bilm_logs"])
    saved = json.loads((run / "config.json").read_text())
    assert saved["task"] == "bilm" and saved["model"]["model_type"] == "bilm"


def test_trainer_line_shows_both_directions(tmp_path: Path, caplog) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(r["text"] for r in make_sentiment_rows(60, seed=2)))
    recipe = _bilm_recipe(corpus, epochs=1, progress=True)  # (false: no evaluation lines)
    attnkit.train(RunConfig.from_dict(recipe), out=tmp_path / "run", **QUIET)
    line = next(x for x in caplog.messages if x.startswith("step "))  # (logged, INFO)
    assert "val loss" in line and "forward_perplexity" in line and "backward_perplexity" in line


@pytest.mark.slow
def test_load_perplexity_and_embed(runs) -> None:
    lm = attnkit.load(runs["bilm"])
    assert lm.task == "bilm" and lm.boundaries == (5, 6)
    texts = ["the movie was great", "정말 영화 최악"]
    report = lm.perplexity(texts)
    assert report["num_texts"] == 2 and report["num_predictions"] > 0
    assert 1.0 < report["forward_perplexity"] < 120 and report["backward_perplexity"] > 1.0
    # the predictor's sums are BiLM.loss's means, times the positions
    ids = lm.tokenizer.encode(texts[0], add_bos=True, add_eos=True)
    f, b = lm.model.loss(torch.tensor([ids]))
    one = lm.predict(texts[0])[0]
    assert one.num_predictions == len(ids) - 1
    assert one.forward_perplexity == pytest.approx(math.exp(f.item()), rel=1e-4)
    assert one.backward_perplexity == pytest.approx(math.exp(b.item()), rel=1e-4)
    assert one.format().startswith("forward ") and one.format().endswith("\tthe movie was great")

    vectors = lm.embed(texts)
    width = 2 * lm.model.config.hidden_size
    assert [v.shape for v in vectors] == [(len(lm.tokens(t)), width) for t in texts]
    # equal weights: the mean of the layers of [BOS] text [EOS], boundaries dropped
    layers, _ = lm.model.encode(torch.tensor([ids]))
    expected = torch.stack(layers).mean(0)[0, 1:-1]
    torch.testing.assert_close(vectors[0], expected)
    # evaluation: the held-out texts only; no test split in an unlabelled corpus
    report = attnkit.evaluate(runs["bilm"], "validation")
    assert report["split"] == "validation" and report["num_texts"] == 40
    with pytest.raises(RunError, match="has no test split"):
        attnkit.evaluate(runs["bilm"], "test")
    with pytest.raises(ValueError, match="empty"):
        lm.predict([" "])


@pytest.mark.slow
def test_elmo_classifier_keeps_the_bilm_frozen_and_learns_the_mix(runs) -> None:
    bilm_weights = load_file(runs["bilm"] / "model.safetensors")
    clf_weights = load_file(runs["clf"] / "model.safetensors")
    frozen = {k.removeprefix("elmo.bilm."): v for k, v in clf_weights.items()
              if k.startswith("elmo.bilm.")}  # fmt: skip
    assert frozen.keys() == bilm_weights.keys()
    assert all(torch.equal(v, bilm_weights[k]) for k, v in frozen.items())
    scalars, gamma = clf_weights["elmo.mix.scalars"], clf_weights["elmo.mix.gamma"]
    assert not torch.equal(scalars, torch.zeros(3)) and float(gamma) != 1.0

    saved = json.loads((runs["clf"] / "config.json").read_text())
    assert saved["model"]["bilm_hidden_size"] == 16 and saved["model"]["bilm_d_model"] == 16
    assert (saved["model"]["bos_id"], saved["model"]["eos_id"]) == (5, 6)
    assert (runs["clf"] / "tokenizer.json").read_text() == (
        runs["bilm"] / "tokenizer.json"
    ).read_text()
    logs = runs["clf_logs"]
    assert any("biLM sizes taken from it: bilm_d_model=16, bilm_hidden_size=16" in x for x in logs)
    assert any(x.startswith("frozen biLM from") for x in logs)
    mix = [x for x in logs if x.startswith("ELMo layer mix")]
    assert len(mix) == 1 and "s_0" in mix[0] and "s_2" in mix[0] and "gamma" in mix[0]

    clf = attnkit.load(runs["clf"])
    weights, g = clf.model.mix_weights()
    assert len(weights) == 3 and sum(weights) == pytest.approx(1.0)
    assert g == pytest.approx(float(gamma))
    assert f"gamma {g:.3f}" in mix[0]
    assert attnkit.evaluate(runs["clf"], "test")["accuracy"] > 0.7


def test_the_classifier_reads_the_biLM_s_boundaries() -> None:
    ids = torch.tensor([[7, 8, 9], [7, 0, 0]])
    wrapped, mask = add_boundaries(ids, ids != 0, bos_id=5, eos_id=6, pad_id=0)
    assert wrapped.tolist() == [[5, 7, 8, 9, 6], [5, 7, 6, 0, 0]]
    assert mask.tolist() == [[True] * 5, [True] * 3 + [False] * 2]
    torch.manual_seed(0)
    sizes = {"bilm_d_model": 4, "bilm_hidden_size": 4, "bilm_num_layers": 1}
    config = ELMoClassifierConfig(
        vocab_size=12, task_hidden_size=3, bos_id=5, eos_id=6, init_from="x", **sizes
    )
    model = ELMoClassifier(config).eval()
    with capture(model) as rec:
        logits = model(ids, ids != 0).logits
    assert logits.shape == (2, 2) and rec.attention_weights() == []
    # padding changes nothing: the row alone gives the same logits
    alone = model(ids[1:, :1], None).logits
    torch.testing.assert_close(alone, logits[1:])
    assert all(not p.requires_grad for p in model.bilm.parameters())
    model.train()
    assert not model.bilm.training


@pytest.mark.slow
def test_init_from_errors(runs, tmp_path: Path) -> None:
    recipe = tiny_recipe(runs["data"])
    recipe["model"] = {"arch": "elmo"}
    with pytest.raises(ConfigError, match="arch elmo needs a task bilm run") as err:
        RunConfig.from_dict(recipe)
    assert "\n" not in str(err.value)
    recipe["model"]["hidden_size"] = 8
    with pytest.raises(ConfigError, match="the frozen biLM's sizes come from model.init_from"):
        RunConfig.from_dict(recipe)
    del recipe["model"]["hidden_size"]
    recipe["model"]["init_from"] = str(tmp_path / "nope")
    with pytest.raises(ConfigError, match="not a finished run"):
        attnkit.train(RunConfig.from_dict(recipe), out=tmp_path / "x", **QUIET)
    recipe["model"]["init_from"] = str(runs["clf"])
    with pytest.raises(ConfigError, match=r"model \(classifier\); arch elmo needs a task bilm"):
        attnkit.train(RunConfig.from_dict(recipe), out=tmp_path / "y", **QUIET)
    bad = _bilm_recipe(runs["corpus"])
    bad["model"]["arch"] = "lstm"
    with pytest.raises(ConfigError, match="task bilm trains model.arch elmo"):
        RunConfig.from_dict(bad)
    bad = _bilm_recipe(runs["corpus"])
    bad["data"]["name"] = "multi30k"
    with pytest.raises(ConfigError, match="task bilm reads data.name"):
        RunConfig.from_dict(bad)
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


@pytest.mark.slow
def test_cli_predict_and_evaluate_both_runs(runs, capsys) -> None:
    from attnkit.app.cli import main

    capsys.readouterr()
    assert main(["predict", str(runs["bilm"]), "the movie was great", "최고 영화"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and all(x.startswith("forward ") for x in lines)
    assert "\tbackward " in lines[0]
    assert main(["predict", str(runs["bilm"]), "great", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert {"forward_perplexity", "backward_perplexity", "num_predictions"} <= set(row)
    assert main(["predict", str(runs["clf"]), "loved this wonderful movie"]) == 0
    label, prob, text = capsys.readouterr().out.rstrip("\n").split("\t")
    assert label in ("pos", "neg") and 0.5 <= float(prob) <= 1 and text.startswith("loved")
    assert main(["evaluate", str(runs["bilm"]), "--split", "validation"]) == 0
    assert "forward_perplexity" in capsys.readouterr().out
    assert main(["evaluate", str(runs["bilm"])]) == 2
    assert "has no test split" in capsys.readouterr().err


def test_recipes_parse() -> None:
    root = Path(__file__).resolve().parents[2] / "configs"
    lm = RunConfig.from_dict(yaml.safe_load((root / "nsmc-bilm.yaml").read_text()))
    assert lm.task == "bilm" and lm.model.num_layers == 2
    elmo = yaml.safe_load((root / "nsmc-elmo.yaml").read_text())
    base = RunConfig.from_dict(yaml.safe_load((root / "nsmc-elmo-baseline.yaml").read_text()))
    cfg = RunConfig.from_dict(elmo)
    assert cfg.model.arch == "elmo" and cfg.model.init_from == "runs/nsmc-bilm"
    # the same task model, data and budget: only the ELMo features differ
    assert base.model.arch == "lstm" and base.model.num_layers == 1 and base.model.bidirectional
    assert (cfg.model.token_dim, cfg.model.task_hidden_size) == (
        base.model.d_model,
        base.model.hidden_size,
    )
    assert (cfg.model.pooling, cfg.model.dropout) == (base.model.pooling, base.model.dropout)
    assert cfg.data == base.data and cfg.training == base.training

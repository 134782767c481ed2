"""Fine-tuning GPT for classification (task classify, model.arch gpt-classifier): last-token
and mean pooling, padding and causality, init_from an lm run (a character-level one of a
text file and a WordPiece one of packed reviews), end-to-end training, load, predict,
resume, and one-line errors. Tiny models, CPU, seconds."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

import attnkit
from attnkit.core.config import ConfigError
from attnkit.models import GPTClassifier, GPTClassifierConfig
from attnkit.nn.capture import capture
from attnkit.tasks import get_task
from attnkit.tasks.classify import encode_texts
from attnkit.tasks.lm import LMPredictor
from attnkit.tasks.run_config import RunConfig, adopt_pretrained
from conftest import make_sentiment_rows, tiny_recipe, write_csv

QUIET = {"log": lambda *_: None}
TINY = {"num_layers": 1, "d_model": 32, "num_heads": 2, "d_ff": 64, "dropout": 0.0}
LM_TRAINING = {"max_steps": 30, "batch_size": 16, "lr": 3e-3, "log_every": 10,
               "eval_every": 30, "progress": False, "num_threads": 1}  # fmt: skip


def _lm_recipe(data: dict, kind: str) -> dict:
    tokenizer = {"kind": kind, "min_frequency": 1}
    if kind == "wordpiece":
        tokenizer["vocab_size"] = 120
    return {"task": "lm", "data": {"val_fraction": 0.1, "max_len": 24, **data},
            "tokenizer": tokenizer, "model": {"arch": "gpt", **TINY},
            "training": LM_TRAINING}  # fmt: skip


def _write_nsmc(root: Path) -> Path:
    """A stand-in for the NSMC folder: unlabelled reviews (for the lm run) and labelled
    train / test splits (for the classifier), in NSMC's file formats."""
    folder = root / "nsmc"
    folder.mkdir(parents=True)
    with gzip.open(folder / "unlabeled.txt.gz", "wt", encoding="utf-8") as f:
        f.write("\n".join(r["text"] for r in make_sentiment_rows(400, seed=5)) + "\n")
    for split, n, seed in (("train", 320, 0), ("test", 80, 1)):
        rows = make_sentiment_rows(n, seed=seed)
        lines = ["id\tdocument\tlabel"]
        lines += [f"{i}\t{r['text']}\t{int(r['label'] == 'pos')}" for i, r in enumerate(rows)]
        with gzip.open(folder / f"ratings_{split}.txt.gz", "wt", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
    return root


def _classifier_recipe(init_from: Path | None, data: dict, **model) -> dict:
    recipe = tiny_recipe(Path("."), epochs=4, lr=3e-3)
    recipe["data"] = {"val_fraction": 0.1, "max_len": 16, **data}
    recipe["model"] = {"arch": "gpt-classifier", "dropout": 0.0, **model}
    if init_from is not None:
        recipe["model"]["init_from"] = str(init_from)
    return recipe


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """Two lm runs (characters of a text file; WordPiece over packed reviews) and a
    classifier fine-tuned from the second (training is the slow part: shared)."""
    root = tmp_path_factory.mktemp("gptclf")
    out: dict[str, Path] = {"root": root}
    out["csv"] = root / "csv"
    out["csv"].mkdir()
    write_csv(out["csv"] / "train.csv", make_sentiment_rows(320, seed=0))
    write_csv(out["csv"] / "test.csv", make_sentiment_rows(80, seed=1))
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(r["text"] for r in make_sentiment_rows(300, seed=5)) + "\n",
                      encoding="utf-8")  # fmt: skip
    out["data"] = _write_nsmc(root / "data")
    out["char_lm"] = root / "char-lm"
    recipe = _lm_recipe({"name": "file", "train": str(corpus)}, "char")
    attnkit.train(RunConfig.from_dict(recipe), out=out["char_lm"], **QUIET)
    out["doc_lm"] = root / "doc-lm"
    recipe = _lm_recipe({"name": "nsmc", "data_dir": str(out["data"])}, "wordpiece")
    attnkit.train(RunConfig.from_dict(recipe), out=out["doc_lm"], **QUIET)
    out["clf"] = root / "clf"
    recipe = _classifier_recipe(out["doc_lm"], {"name": "nsmc", "data_dir": str(out["data"])})
    logs: list[str] = []
    attnkit.train(RunConfig.from_dict(recipe), out=out["clf"], log=logs.append)
    out["clf_logs"] = logs  # type: ignore[assignment]
    return out


def _model(pooling: str = "last", **changes) -> GPTClassifier:
    torch.manual_seed(0)
    config = GPTClassifierConfig(vocab_size=20, max_len=12, num_classes=3, pooling=pooling,
                                 **{**TINY, "dropout": 0.1, **changes})  # fmt: skip
    return GPTClassifier(config).eval()


def _batch() -> tuple[torch.Tensor, torch.Tensor, list[list[int]]]:
    rows = [[5, 6, 7, 8, 9], [10, 11], [12, 13, 14]]
    ids = torch.zeros(3, 5, dtype=torch.long)  # pad_id 0, right padding
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.tensor(row)
    return ids, ids != 0, rows


# ----------------------------------------------------------------------------- the model
@pytest.mark.parametrize("pooling", ["last", "mean"])
def test_pooling_reads_the_real_tokens_and_padding_changes_nothing(pooling: str) -> None:
    model = _model(pooling)
    ids, mask, rows = _batch()
    with torch.no_grad():
        pooled = model.representation(ids, mask)
        with capture(model) as rec:
            logits = model(ids, mask).logits
        weights = rec.attention_weights()
        for i, row in enumerate(rows):
            alone = torch.tensor([row])
            h = model.gpt(alone).last_hidden_state[0]  # GPT's own forward, no padding
            expected = h[-1] if pooling == "last" else h.mean(0)
            torch.testing.assert_close(pooled[i], expected)
            torch.testing.assert_close(logits[i : i + 1], model(alone).logits)  # alone == batched
        # left padding too: positions count real tokens only
        left = torch.tensor([[0, 0, 10, 11]])
        torch.testing.assert_close(model(left, left != 0).logits, logits[1:2])
    assert logits.shape == (3, 3)
    assert len(weights) == 1 and weights[0].shape == (3, 2, 5, 5)  # (B, H, T, T): causal
    assert torch.all(weights[0].triu(1) == 0)


def test_causal_a_pad_never_changes_the_logits() -> None:
    model = _model("last")
    ids, mask, _ = _batch()
    with torch.no_grad():
        logits = model(ids, mask).logits
        for seed in range(3):  # whatever the padded positions hold
            g = torch.Generator().manual_seed(seed)
            noise = torch.randint(1, 20, ids.shape, generator=g)
            torch.testing.assert_close(model(torch.where(mask, ids, noise), mask).logits, logits)
        # and even unmasked: position t reads positions <= t only, so tokens after the
        # last real one change nothing before it
        full = torch.ones_like(mask)
        a = model.gpt.hidden_states(ids, full)
        b = model.gpt.hidden_states(torch.where(mask, ids, noise), full)
        for i, n in enumerate(mask.sum(1).tolist()):
            torch.testing.assert_close(a[i, :n], b[i, :n])
            assert not torch.allclose(a[i, n:], b[i, n:]) or n == ids.size(1)


def test_config_keys_and_errors() -> None:
    config = GPTClassifierConfig.from_dict({"preset": "tiny", "pooling": "mean"}, False)
    assert (config.d_model, config.num_layers, config.arch) == (64, 2, "gpt-classifier")
    assert config.model_type == "classifier" and config.prefix_ids == ()
    assert config.replace(start_id=6).prefix_ids == (6,)
    assert config.lm_config().arch == "gpt" and config.lm_config().d_model == 64
    assert "last-token pooling" in _model().config.describe()
    for raw, message in [
        ({"pooling": "cls"}, "model.pooling must be one of last, mean for arch gpt-classifier"),
        ({"classifier_dropout": 1.5}, "model.classifier_dropout must be in [0, 1)"),
        ({"start_id": 3}, "model.start_id is set by the task"),
        ({"num_heads": 3}, "divisible"),
    ]:
        recipe = tiny_recipe(Path("."))
        recipe["model"] = {"arch": "gpt-classifier", **raw}
        with pytest.raises(ConfigError, match=re.escape(message)):
            RunConfig.from_dict(recipe)
    untied = _model(tie_embeddings=False)
    assert not untied.gpt.lm_head.weight.requires_grad  # (no gradient ever reaches it)
    assert untied.gpt.lm_head.weight is not untied.gpt.tok_embed.weight


# ----------------------------------------------------------------------------- init_from
def _prepared(recipe: dict):
    """What ``attnkit.train`` does before the first step: (config, data, built model)."""
    spec = get_task("classify")
    cfg = RunConfig.from_dict(recipe)
    cfg, tokenizer = adopt_pretrained(cfg, None, lambda *_: None)
    data = spec.prepare_data(cfg, tokenizer, lambda *_: None)
    cfg.model = cfg.model.replace(**spec.model_inputs(cfg, data.tokenizer, data.run_info))
    model = cfg.model.build()
    spec.init_model(model, cfg, data, lambda *_: None)
    return cfg, data, model


@pytest.mark.slow
@pytest.mark.parametrize("lm", ["char_lm", "doc_lm"])
def test_init_from_copies_the_lm_run_exactly_and_reads_text_as_it_did(runs, lm: str) -> None:
    data = {"name": "file", "train": str(runs["csv"] / "train.csv")}
    if lm == "doc_lm":
        data = {"name": "nsmc", "data_dir": str(runs["data"])}
    recipe = _classifier_recipe(runs[lm], data, d_model=8, num_heads=1, d_ff=16, num_layers=3)
    cfg, prepared, model = _prepared(recipe)
    saved = json.loads((runs[lm] / "config.json").read_text())["model"]
    for key in ("d_model", "num_heads", "d_ff", "num_layers", "vocab_size", "max_len"):
        assert getattr(cfg.model, key) == saved[key], key  # the run's, not the recipe's
    weights = load_file(runs[lm] / "model.safetensors")
    own = model.gpt.state_dict()
    assert own.keys() == weights.keys()
    assert all(torch.equal(own[k], v) for k, v in weights.items())
    # the lm run's tokenizer, and for a text exactly the tokens the language model reads
    lm_predictor: LMPredictor = attnkit.load(runs[lm])
    tk = prepared.tokenizer
    assert tk.backend.to_str() == lm_predictor.tokenizer.backend.to_str()
    text = "great film"  # (shorter than data.max_len: not cut)
    start = [tk.eos_id] if lm == "doc_lm" else []
    assert lm_predictor._prompt_ids(text) == start + tk.encode(text)
    assert encode_texts(tk, [text], cfg)[0][0] == lm_predictor._prompt_ids(text)
    first = prepared.train[0][0]
    if lm == "doc_lm":  # reviews: read after [EOS], as the lm run packed them
        assert cfg.model.start_id == prepared.tokenizer.eos_id == first[0]
        assert all(item[0][0] == cfg.model.start_id for item in prepared.train)
        assert max(len(item[0]) for item in prepared.train) <= cfg.data.max_len
    else:  # one continuous text: no start token
        assert cfg.model.start_id is None
        assert prepared.tokenizer.eos_id not in first


@pytest.mark.slow
def test_fine_tuning_learns_and_the_run_loads_predicts_and_resumes(runs) -> None:
    run = runs["clf"]
    logs = runs["clf_logs"]
    assert any("texts read as [EOS] text" in line for line in logs)
    assert any(line.startswith("initialised the GPT from") for line in logs)
    saved = json.loads((run / "config.json").read_text())
    assert saved["model"]["arch"] == "gpt-classifier" and saved["model"]["start_id"] == 6
    assert (run / "tokenizer.json").read_text() == (runs["doc_lm"] / "tokenizer.json").read_text()
    report = attnkit.evaluate(run, "test")
    assert report["accuracy"] > 0.8  # chance: ~0.5
    clf = attnkit.load(run)
    preds = clf.predict(["the movie was great wonderful", "boring awful film", "정말 최악"])
    assert [p.label for p in preds] == ["positive", "negative", "negative"]
    assert all(0.5 <= p.probability <= 1 for p in preds)
    tokens, weights = clf.attention("the movie was great")  # --explain's heatmap
    assert tokens[0] == "[EOS]" and weights[0].shape[-1] == len(tokens)
    # resuming the finished run: its checkpoint fits the saved config, nothing changes
    before = (run / "model.safetensors").read_bytes()
    steps = json.loads((run / "last" / "state.json").read_text())["step"]
    assert attnkit.train(out=run, resume=True, **QUIET).step == steps
    assert (run / "model.safetensors").read_bytes() == before


@pytest.mark.slow
def test_cli_predicts_explains_and_evaluates(runs, tmp_path: Path, capsys) -> None:
    from attnkit.app.cli import main

    run = str(runs["clf"])
    capsys.readouterr()
    heat = tmp_path / "heat.png"
    assert main(["predict", run, "wonderful film", "--explain", str(heat)]) == 0
    label, prob, text = capsys.readouterr().out.splitlines()[0].split("\t")
    assert label == "positive" and float(prob) > 0.5 and text == "wonderful film"
    assert heat.stat().st_size > 0
    assert main(["evaluate", run, "--split", "test"]) == 0
    assert "accuracy" in capsys.readouterr().out


@pytest.mark.slow
def test_char_level_lm_run_fine_tunes_too(runs, tmp_path: Path) -> None:
    data = {"name": "file", "train": str(runs["csv"] / "train.csv"),
            "test": str(runs["csv"] / "test.csv"), "max_len": 24}  # fmt: skip
    recipe = _classifier_recipe(runs["char_lm"], data, pooling="mean")
    attnkit.train(RunConfig.from_dict(recipe), out=tmp_path / "clf", **QUIET)
    assert attnkit.evaluate(tmp_path / "clf", "test")["accuracy"] > 0.7
    pred = attnkit.load(tmp_path / "clf").predict("excellent film")[0]
    assert pred.label == "pos"


@pytest.mark.slow
def test_from_scratch_without_init_from(runs, tmp_path: Path) -> None:
    data = {"name": "file", "train": str(runs["csv"] / "train.csv"),
            "test": str(runs["csv"] / "test.csv")}  # fmt: skip
    recipe = _classifier_recipe(None, data, **TINY)
    recipe["training"]["epochs"] = 1
    attnkit.train(RunConfig.from_dict(recipe), out=tmp_path / "clf", **QUIET)
    saved = json.loads((tmp_path / "clf" / "config.json").read_text())["model"]
    assert saved["max_len"] == 16 and saved["start_id"] is None and saved["d_model"] == 32
    assert attnkit.load(tmp_path / "clf").predict("great")[0].label in ("pos", "neg")


# ----------------------------------------------------------------------------- errors
@pytest.mark.slow
def test_a_bad_init_from_is_one_line(runs, tmp_path: Path) -> None:
    data = {"name": "file", "train": str(runs["csv"] / "train.csv")}
    cases = [
        (tmp_path / "nope", "is not a finished run"),
        (
            runs["clf"],
            r"is a 'classify' run of a 'gpt-classifier' model \(classifier\); arch gpt-classifier "
            "starts from a task lm run with a GPT",
        ),
    ]
    for init_from, message in cases:
        with pytest.raises(ConfigError, match=message) as err:
            attnkit.train(RunConfig.from_dict(_classifier_recipe(init_from, data)),
                          out=tmp_path / "x", **QUIET)  # fmt: skip
        assert "\n" not in str(err.value)
    too_long = _classifier_recipe(runs["char_lm"], {**data, "max_len": 25})
    with pytest.raises(ConfigError, match="data.max_len=25 exceeds the 24 positions"):
        attnkit.train(RunConfig.from_dict(too_long), out=tmp_path / "x", **QUIET)
    with_path = _classifier_recipe(runs["char_lm"], data)
    with_path["tokenizer"] = {"path": str(runs["char_lm"] / "tokenizer.json")}
    with pytest.raises(ConfigError, match="model.init_from brings its tokenizer"):
        RunConfig.from_dict(with_path)
    assert not (tmp_path / "x").exists()


def test_the_recipe_fine_tunes_the_nsmc_gpt_run() -> None:
    root = Path(__file__).resolve().parents[2] / "configs"
    cfg = RunConfig.from_dict(yaml.safe_load((root / "nsmc-gpt-classifier.yaml").read_text()))
    lm = RunConfig.from_dict(yaml.safe_load((root / "nsmc-gpt.yaml").read_text()))
    assert cfg.task == "classify" and cfg.model.arch == "gpt-classifier"
    assert cfg.model.init_from == "runs/nsmc-gpt" and cfg.data.name == lm.data.name == "nsmc"
    assert cfg.data.max_len <= lm.data.max_len  # (the GPT's positions)

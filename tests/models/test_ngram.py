"""The bag-of-n-grams classifier (NBSVM with hashed n-grams): features, Naive Bayes ratios,
padding, what bigrams can learn that tokens cannot, and a full train -> load -> ensemble run."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
import yaml

import attnkit
from attnkit.core.config import ConfigError
from attnkit.models import NgramClassifier, build_classifier
from attnkit.tasks.run_config import RunConfig
from conftest import tiny_recipe

M, P = 2**31 - 1, 1_000_003  # the documented hash: (h * P + token + 1) mod M, h0 = n


def reference_features(ids: list[int], vocab: int, buckets: int, n_max: int) -> set[int]:
    """The model's feature set of one text, written out with Python integers."""
    feats = set(ids)
    for n in range(2, n_max + 1):
        for i in range(len(ids) - n + 1):
            h = n
            for tok in ids[i : i + n]:
                h = (h * P + tok + 1) % M
            feats.add(vocab + h % buckets)
    return feats


def present(model: NgramClassifier, ids: torch.Tensor, mask=None) -> list[set[int]]:
    return [{int(f) for f in row if f >= 0} for row in model.features(ids, mask)]


def test_features_are_the_binarised_hashed_ngrams_of_real_tokens():
    model = NgramClassifier(vocab_size=50, num_classes=2, ngram_max=3, num_buckets=997)
    ids = torch.tensor([[5, 6, 5, 6, 7, 0, 0], [9, 9, 9, 0, 0, 0, 0]])  # 0 = [PAD]
    got = present(model, ids)
    assert got[0] == reference_features([5, 6, 5, 6, 7], 50, 997, 3)
    assert got[1] == reference_features([9, 9, 9], 50, 997, 3)
    # binarised: a feature appears once in a row however often it occurs in the text
    row = model.features(ids)[0]
    kept = row[row >= 0]
    assert len(kept) == len(set(kept.tolist())) == len(got[0])
    # a different order of the same tokens is a different text for n >= 2
    assert present(model, torch.tensor([[6, 5, 6, 5, 7]]))[0] != got[0]


def test_logits_ignore_padding_and_the_explicit_mask_agrees():
    torch.manual_seed(0)
    model = NgramClassifier(vocab_size=30, num_classes=3, ngram_max=2, num_buckets=101)
    torch.nn.init.normal_(model.weight.weight)
    short = torch.tensor([[3, 4, 5]])
    padded = torch.tensor([[3, 4, 5, 0, 0, 0]])
    mask = padded != 0
    a = model(short).logits
    b = model(padded).logits
    c = model(padded, mask).logits
    torch.testing.assert_close(a, b)
    torch.testing.assert_close(a, c)
    assert a.shape == (1, 3)


def test_naive_bayes_ratio_matches_the_formula():
    model = NgramClassifier(vocab_size=10, num_classes=2, ngram_max=1)
    texts = [[1, 2], [1, 3], [2, 2, 4], [3]]  # token 2 twice in one text: counted once
    labels = [1, 1, 0, 0]
    ids = torch.zeros(4, 3, dtype=torch.long)
    for i, t in enumerate(texts):
        ids[i, : len(t)] = torch.tensor(t)
    model.fit_nb([(ids, ids != 0, torch.tensor(labels))])
    pairs = list(zip(texts, labels, strict=True))
    for c in (0, 1):
        n_c = [sum(1 for t, y in pairs if y == c and f in t) for f in range(10)]
        n_o = [sum(1 for t, y in pairs if y != c and f in t) for f in range(10)]
        p = [1 + v for v in n_c]
        q = [1 + v for v in n_o]
        for f in range(10):
            want = math.log(p[f] / sum(p)) - math.log(q[f] / sum(q))
            assert model.nb_ratio[f, c].item() == pytest.approx(want, abs=1e-5)
    # two classes: "c against the rest" is the same contrast with the sign flipped
    torch.testing.assert_close(model.nb_ratio[:, 0], -model.nb_ratio[:, 1])
    assert model.nb_ratio[1, 1] > 0 > model.nb_ratio[4, 1]  # 1 only positive, 4 only negative


def test_without_nb_weighting_it_is_logistic_regression_on_binary_features():
    model = NgramClassifier(vocab_size=10, num_classes=2, ngram_max=1, nb_weighting=False)
    ids = torch.tensor([[1, 2, 2]])
    model.fit_nb([(ids, ids != 0, torch.tensor([1]))])  # a no-op
    assert torch.equal(model.nb_ratio, torch.ones_like(model.nb_ratio))
    with torch.no_grad():
        model.weight.weight[1] = torch.tensor([0.5, -1.0])
        model.weight.weight[2] = torch.tensor([2.0, 3.0])
        model.bias.copy_(torch.tensor([0.1, 0.2]))
    logits = model(ids).logits
    torch.testing.assert_close(logits, torch.tensor([[2.6, 2.2]]))  # token 2 counted once


def _fit(ngram_max: int) -> float:
    """Train on a sentiment XOR ("good" / "not good" / "bad" / "not bad"); train accuracy."""
    good, not_, bad, film = 1, 2, 3, 4
    texts = [[film, good], [film, not_, bad], [film, not_, good], [film, bad]]
    labels = torch.tensor([1, 1, 0, 0])
    ids = torch.tensor([t + [0] * (3 - len(t)) for t in texts])
    torch.manual_seed(0)
    model = NgramClassifier(vocab_size=5, num_classes=2, ngram_max=ngram_max, num_buckets=64)
    model.fit_nb([(ids, ids != 0, labels)])
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    for _ in range(200):
        loss = torch.nn.functional.cross_entropy(model(ids).logits, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return (model(ids).logits.argmax(-1) == labels).float().mean().item()


def test_bigrams_learn_negation_that_a_bag_of_tokens_cannot():
    assert _fit(ngram_max=2) == 1.0
    assert _fit(ngram_max=1) < 1.0  # not linearly separable from single tokens


def test_build_classifier_knows_ngram_and_rejects_foreign_hyperparameters():
    model = build_classifier("ngram", 20, 2, 0, ngram_max=3, num_buckets=7)
    assert isinstance(model, NgramClassifier) and model.num_features == 27
    assert build_classifier("ngram", 20, 2, 0, ngram_max=1).num_features == 20
    with pytest.raises(ValueError, match="unknown hyperparameter.*d_model"):
        build_classifier("ngram", 20, 2, 0, d_model=8)


def test_config_checks_for_the_ngram_arch(tmp_path: Path):
    raw = tiny_recipe(tmp_path)
    raw["model"] = {"arch": "ngram", "ngram_max": 0}
    with pytest.raises(ConfigError, match="ngram_max"):
        RunConfig.from_dict(raw)
    raw["model"] = {"arch": "ngram", "init_from": "runs/some-mlm"}
    with pytest.raises(ConfigError, match="init_from does not apply to arch ngram"):
        RunConfig.from_dict(raw)


@pytest.mark.slow
def test_train_load_predict_and_ensemble(tmp_path: Path, tiny_data: Path):
    raw = tiny_recipe(tiny_data, epochs=3, batch_size=32, lr=0.05, weight_decay=0.0)
    raw["model"] = {"arch": "ngram", "ngram_max": 2, "num_buckets": 4096}
    cfg = tmp_path / "ngram.yaml"
    cfg.write_text(yaml.safe_dump(raw), encoding="utf-8")
    result = attnkit.train(cfg, out=tmp_path / "run")
    assert result.best_metric >= 0.95  # the keyword decides the label
    clf = attnkit.load(tmp_path / "run")
    assert isinstance(clf.model, NgramClassifier)
    assert clf.model.nb_ratio.abs().sum() > 0 and not torch.all(clf.model.nb_ratio == 1)
    preds = clf.predict(["the movie was wonderful", "정말 지루해요 영화"])
    assert [p.label for p in preds] == ["pos", "neg"]
    # the explanation is exact: contributions + bias give the logit margin of the prediction
    text = "the movie was really wonderful 정말"
    parts = clf.ngram_contributions(text)
    assert parts and abs(parts[0][1]) >= abs(parts[-1][1])
    top, value = parts[0]  # the tiny vocabulary splits "wonderful" into pieces
    assert top.replace("##", "") in "wonderful" and value > 0
    assert abs(dict(parts)["the"]) < value  # a filler word matters less
    ids, _, _ = clf.encode([text])
    logits = clf.model(torch.tensor(ids)).logits[0].detach()
    k = int(logits.argmax())
    bias = clf.model.bias.detach()
    margin = sum(v for _, v in parts) + float(bias[k] - bias.mean())
    assert margin == pytest.approx(float(logits[k] - logits.mean()), abs=1e-4)
    png = clf.explain(text, tmp_path / "why.png")
    assert png.is_file() and png.stat().st_size > 1000
    report = attnkit.evaluate(tmp_path / "run", split="test")
    assert report["accuracy"] >= 0.95

    # an ensemble with a recurrent run reads each text with each member's tokenizer
    raw["model"] = {"arch": "gru", "d_model": 16, "hidden_size": 16}
    raw["training"]["lr"] = 1e-2
    cfg.write_text(yaml.safe_dump(raw), encoding="utf-8")
    attnkit.train(cfg, out=tmp_path / "gru")
    both = attnkit.evaluate([tmp_path / "run", tmp_path / "gru"], split="test")
    assert [m["accuracy"] for m in both["members"]][0] == pytest.approx(report["accuracy"])

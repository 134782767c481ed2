"""Ensembles of classifiers (averaged probabilities) and length-sorted batched prediction."""

from pathlib import Path

import pytest
import torch

from attnkit.data.tokenization import train_tokenizer
from attnkit.models import build_classifier
from attnkit.tasks.classify import ClassifierPredictor, EnsemblePredictor
from attnkit.tasks.run_config import RunConfig
from conftest import make_sentiment_rows, tiny_recipe

# two of the texts are longer than the tiny models' max_len on purpose (truncation warnings)
pytestmark = pytest.mark.filterwarnings("ignore:input .* is longer than max_len")

TEXTS = [
    "great",
    "the movie was really boring and the story was awful , 정말 지루해요",
    "이 영화 최고",
    "film",
    "loved the film , the story was wonderful and 배우 정말 감동",
]


@pytest.fixture(scope="module")
def tokenizer():
    rows = make_sentiment_rows(200, seed=0)
    return train_tokenizer([r["text"] for r in rows], vocab_size=120, min_frequency=1)


def _predictor(tokenizer, arch, seed, labels=("neg", "pos")) -> ClassifierPredictor:
    cfg = RunConfig.from_dict(tiny_recipe(Path("data")))
    cfg.model.arch = arch
    torch.manual_seed(seed)
    hp = {"d_model": 16, "max_len": 16} if arch == "transformer" else {"d_model": 16}
    if arch == "transformer":
        hp |= {"num_heads": 2, "d_ff": 32, "num_layers": 2}
    model = build_classifier(arch, tokenizer.vocab_size, len(labels), tokenizer.pad_id, **hp)
    return ClassifierPredictor(model, tokenizer, cfg, list(labels), run_dir=f"{arch}-{seed}")


def test_batched_prediction_keeps_order_and_ignores_padding(tokenizer):
    """Texts are batched by length; the result must not depend on the batching."""
    for arch in ("transformer", "gru"):
        clf = _predictor(tokenizer, arch, seed=1)
        batched = clf.predict(TEXTS, batch_size=2)
        for text, pred in zip(TEXTS, batched, strict=True):
            alone = clf.predict([text])[0]
            assert pred.text == text and pred.label == alone.label
            assert pred.probability == pytest.approx(alone.probability, abs=1e-5)


def test_ensemble_averages_member_probabilities(tokenizer):
    members = [_predictor(tokenizer, "transformer", 1), _predictor(tokenizer, "gru", 2)]
    ensemble = EnsemblePredictor(members)
    got = ensemble.predict(TEXTS)
    singles = [m.predict(TEXTS) for m in members]
    for i, pred in enumerate(got):
        for label in ("neg", "pos"):
            mean = sum(s[i].probabilities[label] for s in singles) / 2
            assert pred.probabilities[label] == pytest.approx(mean, abs=1e-6)
        assert pred.label == max(pred.probabilities, key=pred.probabilities.get)
    # the members disagree somewhere, else this test could not tell averaging from copying
    assert any(abs(a.probability - b.probability) > 1e-3 for a, b in zip(*singles, strict=True))


def test_ensemble_needs_two_members_with_the_same_labels(tokenizer):
    a = _predictor(tokenizer, "gru", 1)
    with pytest.raises(ValueError, match="at least two"):
        EnsemblePredictor([a])
    b = _predictor(tokenizer, "gru", 2, labels=("pos", "neg"))
    with pytest.raises(ValueError, match="different labels"):
        EnsemblePredictor([a, b])

"""models/classifier.py: shapes, padding invariance, masked pooling, attention weights on
pads, a tiny overfit check, and the build_classifier factory."""

import pytest
import torch

from attnkit.models import RNNClassifier, TransformerClassifier, build_classifier
from attnkit.models.classifier import masked_max, masked_mean
from attnkit.nn.capture import capture

VOCAB, CLASSES, PAD = 20, 3, 0
SMALL_TF = dict(d_model=16, num_heads=2, d_ff=32, num_layers=2, max_len=32)
SMALL_RNN = dict(d_model=8, hidden_size=12)

CONFIGS = [
    ("transformer", {**SMALL_TF, "pooling": p, "positional": pos, "norm_first": nf})
    for p in ("mean", "max", "cls")
    for pos, nf in (("sinusoidal", False), ("learned", True))
] + [
    (cell, {**SMALL_RNN, "pooling": p, "bidirectional": bi, "num_layers": n})
    for cell in ("rnn", "lstm", "gru")
    for p in ("mean", "max", "last")
    for bi, n in ((True, 1), (False, 2))
]
IDS = [
    f"{arch}-{'-'.join(str(v) for k, v in hp.items() if k not in SMALL_TF)}" for arch, hp in CONFIGS
]


def make(arch: str, hp: dict) -> torch.nn.Module:
    torch.manual_seed(0)
    return build_classifier(arch, VOCAB, CLASSES, PAD, **hp).eval()


def batch() -> torch.Tensor:
    """(3, 6) ids, right-padded, lengths 6, 4, 1."""
    return torch.tensor([[1, 5, 7, 3, 9, 2], [1, 4, 4, 8, PAD, PAD], [1, PAD, PAD, PAD, PAD, PAD]])


@pytest.mark.parametrize(("arch", "hp"), CONFIGS, ids=IDS)
def test_shapes_and_padding_invariance(arch, hp):
    model = make(arch, hp)
    ids = batch()
    with capture(model) as rec:
        logits = model(ids).logits
    assert logits.shape == (3, CLASSES)
    assert bool(rec.attention_weights()) == (arch == "transformer") == model.returns_attention
    # Appending pads changes nothing, with the mask derived or given explicitly.
    longer = torch.cat([ids, torch.full((3, 4), PAD)], dim=1)
    logits_longer = model(longer, attention_mask=longer != PAD).logits
    torch.testing.assert_close(logits_longer, logits, atol=1e-5, rtol=0)
    # Each row alone (no padding at all) gives the same logits as in the padded batch.
    for i, n in enumerate((6, 4, 1)):
        alone = model(ids[i : i + 1, :n]).logits
        torch.testing.assert_close(alone, logits[i : i + 1], atol=1e-5, rtol=0)


def test_needs_cls_flag():
    assert TransformerClassifier(
        vocab_size=VOCAB, num_classes=2, **SMALL_TF, pooling="cls"
    ).needs_cls
    assert not TransformerClassifier(
        vocab_size=VOCAB, num_classes=2, **SMALL_TF, pooling="mean"
    ).needs_cls
    assert not RNNClassifier(vocab_size=VOCAB, num_classes=2, **SMALL_RNN).needs_cls


def test_masked_mean_equals_manual_mean():
    torch.manual_seed(0)
    x = torch.randn(2, 5, 4)
    mask = torch.tensor([[True, True, True, False, False], [True] * 5])
    pooled = masked_mean(x, mask)
    torch.testing.assert_close(pooled[0], x[0, :3].mean(0))
    torch.testing.assert_close(pooled[1], x[1].mean(0))
    assert torch.equal(masked_mean(x, torch.zeros(2, 5, dtype=torch.bool)), torch.zeros(2, 4))


def test_masked_mean_in_model_equals_manual_mean():
    model = TransformerClassifier(
        vocab_size=VOCAB, num_classes=CLASSES, **SMALL_TF, dropout=0.0
    ).eval()
    ids = batch()
    seen = {}
    model.head.register_forward_hook(lambda m, inp, out: seen.update(pooled=inp[0]))
    enc = {}
    model.encoder.register_forward_hook(lambda m, inp, out: enc.update(x=out))
    model(ids)
    for i, n in enumerate((6, 4, 1)):
        torch.testing.assert_close(seen["pooled"][i], enc["x"][i, :n].mean(0))


def test_max_pooling_ignores_larger_pad_vectors():
    x = torch.tensor([[[1.0, -2.0], [0.5, -1.0], [100.0, 100.0]]])  # last position is a pad
    mask = torch.tensor([[True, True, False]])
    assert torch.equal(masked_max(x, mask), torch.tensor([[1.0, -1.0]]))
    # All-negative real values still beat a huge pad; an empty row gives zeros.
    x2 = torch.tensor([[[-5.0], [-3.0], [7.0]], [[9.0], [9.0], [9.0]]])
    mask2 = torch.tensor([[True, True, False], [False, False, False]])
    assert torch.equal(masked_max(x2, mask2), torch.tensor([[-3.0], [0.0]]))


def test_attention_weights_zero_on_pad_keys():
    model = make("transformer", {**SMALL_TF, "num_layers": 3})
    ids = batch()
    with capture(model) as rec:
        model(ids)
    weights = rec.attention_weights()
    assert len(weights) == 3
    mask = ids != PAD
    for w in weights:
        assert w.shape == (3, 2, 6, 6)
        assert torch.all(w.masked_select(~mask[:, None, None, :]) == 0)
        torch.testing.assert_close(w.sum(-1), torch.ones(3, 2, 6))


def test_too_long_input_raises():
    model = make("transformer", SMALL_TF)
    with pytest.raises(ValueError, match="max_len=32"):
        model(torch.ones(1, 33, dtype=torch.long))


def test_tiny_overfit_order_patterns():
    """Same tokens, different order: only attention + positions can separate them."""
    torch.manual_seed(0)
    a, b = [5, 6, 7, 8], [8, 7, 6, 5]
    ids = torch.tensor([a, b] * 4)
    labels = torch.tensor([0, 1] * 4)
    model = TransformerClassifier(
        vocab_size=VOCAB,
        num_classes=2,
        d_model=32,
        num_heads=2,
        d_ff=64,
        num_layers=1,
        dropout=0.0,
        max_len=8,
    )
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(100):
        loss = torch.nn.functional.cross_entropy(model(ids).logits, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if loss.item() < 0.05:
            break
    model.eval()
    assert torch.equal(model(ids).logits.argmax(-1), labels)
    assert loss.item() < 0.1


def test_build_classifier():
    tf = build_classifier("transformer", VOCAB, CLASSES, pad_id=3, **SMALL_TF)
    assert isinstance(tf, TransformerClassifier) and tf.pad_id == 3
    assert isinstance(tf.head, torch.nn.Linear) and tf.head.out_features == CLASSES
    for cell, cls in (("rnn", torch.nn.RNN), ("lstm", torch.nn.LSTM), ("gru", torch.nn.GRU)):
        m = build_classifier(cell, VOCAB, CLASSES, pad_id=0, **SMALL_RNN)
        assert isinstance(m, RNNClassifier) and type(m.rnn) is cls
    with pytest.raises(ValueError, match=r"'cnn'.*transformer, rnn, lstm, gru"):
        build_classifier("cnn", VOCAB, CLASSES, pad_id=0)
    with pytest.raises(ValueError, match=r"'hidden_size'.*valid: d_model, num_heads"):
        build_classifier("transformer", VOCAB, CLASSES, pad_id=0, hidden_size=8)
    with pytest.raises(ValueError, match=r"'num_heads'.*hidden_size"):
        build_classifier("lstm", VOCAB, CLASSES, pad_id=0, num_heads=2)
    with pytest.raises(ValueError, match="pooling"):
        build_classifier("gru", VOCAB, CLASSES, pad_id=0, pooling="cls")

"""Tests for ELMo's biLM and layer mix (attnkit.models.elmo): tiny models, CPU, seconds."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from attnkit.core.config import ConfigError
from attnkit.models.elmo import (
    BiLM,
    BiLMOutput,
    ELMoConfig,
    ELMoEmbedder,
    bilm_loss,
    reverse_padded,
)

V = 20


def tiny(**changes) -> BiLM:
    torch.manual_seed(0)
    sizes = {"d_model": 8, "hidden_size": 12, "num_layers": 2, "dropout": 0.0}
    return BiLM(ELMoConfig(vocab_size=V, pad_id=0, **{**sizes, **changes})).eval()


def random_ids(b: int, t: int, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(1, V, (b, t), generator=g)


def test_shapes_and_layers() -> None:
    model = tiny()
    ids = random_ids(3, 7)
    out = model(ids)
    assert isinstance(out, BiLMOutput)
    assert out.forward_logits.shape == out.backward_logits.shape == (3, 7, V)
    assert len(out.layers) == model.config.num_layers + 1
    assert all(h.shape == (3, 7, 2 * 12) for h in out.layers)
    x = out.layers[0]
    assert torch.equal(x[..., :12], x[..., 12:])  # the token layer is [x; x]
    layers, mask = model.encode(ids)
    assert all(torch.equal(a, b) for a, b in zip(layers, out.layers, strict=True))
    assert mask.all()


@pytest.mark.parametrize(
    "changes",
    [{}, {"hidden_size": 8}, {"tie_embeddings": False}, {"residual": False, "num_layers": 3}],
)
def test_variants_build_and_round_trip(tmp_path, changes) -> None:
    model = tiny(**changes)
    ids = random_ids(2, 5)
    model.save_pretrained(tmp_path)
    again = BiLM.from_pretrained(tmp_path)
    assert again.config == model.config
    torch.testing.assert_close(again(ids).forward_logits, model(ids).forward_logits)
    if model.config.tie_embeddings:
        assert not any("softmax.weight" in n for n, _ in model.named_parameters())


def test_no_future_leakage_forward_no_past_leakage_backward() -> None:
    model = tiny()
    ids = random_ids(2, 8)
    base = model(ids)
    for t in range(ids.size(1)):
        changed = ids.clone()
        changed[:, t] = (changed[:, t] % (V - 1)) + 1  # another real token
        out = model(changed)
        # forward LM: logits at positions < t (they predict tokens <= t) never see token t
        torch.testing.assert_close(out.forward_logits[:, :t], base.forward_logits[:, :t])
        # backward LM: logits at positions > t never see token t
        torch.testing.assert_close(
            out.backward_logits[:, t + 1 :], base.backward_logits[:, t + 1 :]
        )
        # ... but the position itself and the other side do see it
        assert not torch.allclose(out.forward_logits[:, t:], base.forward_logits[:, t:])
        assert not torch.allclose(out.backward_logits[:, : t + 1], base.backward_logits[:, : t + 1])


def test_reverse_padded() -> None:
    x = torch.tensor([[1, 2, 3, 0, 0], [4, 5, 6, 7, 8], [9, 0, 0, 0, 0], [0, 0, 0, 0, 0]])
    lengths = torch.tensor([3, 5, 1, 0])
    want = torch.tensor([[3, 2, 1, 0, 0], [8, 7, 6, 5, 4], [9, 0, 0, 0, 0], [0, 0, 0, 0, 0]])
    assert torch.equal(reverse_padded(x, lengths), want)
    assert torch.equal(reverse_padded(want, lengths), x)
    feats = torch.randn(4, 5, 3)
    assert torch.equal(reverse_padded(reverse_padded(feats, lengths), lengths), feats)
    assert torch.equal(reverse_padded(feats, lengths)[1], feats[1].flip(0))


def test_backward_lm_is_the_forward_computation_on_the_reversed_text() -> None:
    model = tiny()
    model.backward_lstm.load_state_dict(model.forward_lstm.state_dict())  # same weights
    seqs = [[3, 4, 5, 6, 7], [8, 9, 10], [11]]
    ids = torch.zeros(3, 6, dtype=torch.long)  # right padding (pad_id 0)
    for b, s in enumerate(seqs):
        ids[b, : len(s)] = torch.tensor(s)
    out = model(ids)
    for b, s in enumerate(seqs):
        rev = model(torch.tensor([s[::-1]]))
        n = len(s)
        torch.testing.assert_close(out.backward_logits[b, :n], rev.forward_logits[0].flip(0))
        for j in range(1, len(out.layers)):
            h = out.layers[j][b, :n]  # [forward; backward]
            torch.testing.assert_close(h[:, 12:], rev.layers[j][0, :, :12].flip(0))


def test_padding_invariance() -> None:
    model = tiny()
    seqs = [random_ids(1, n, seed=n)[0] for n in (5, 2, 7, 1)]
    t = 9
    ids = torch.randint(
        1, V, (len(seqs), t)
    )  # padding holds real-looking tokens: only the mask counts
    mask = torch.zeros(len(seqs), t, dtype=torch.bool)
    for b, s in enumerate(seqs):
        ids[b, : len(s)] = s
        mask[b, : len(s)] = True
    batched = model(ids, mask)
    for b, s in enumerate(seqs):
        alone = model(s[None])
        n = len(s)
        for name in ("forward_logits", "backward_logits"):
            torch.testing.assert_close(
                getattr(batched, name)[b, :n], getattr(alone, name)[0], atol=1e-5, rtol=1e-5
            )
        for h_batched, h_alone in zip(batched.layers, alone.layers, strict=True):
            torch.testing.assert_close(h_batched[b, :n], h_alone[0], atol=1e-5, rtol=1e-5)
            assert not h_batched[b, n:].any()  # zeros at padding
    # the default mask is input_ids != pad_id
    padded = ids.masked_fill(~mask, 0)
    torch.testing.assert_close(model(padded).forward_logits, batched.forward_logits)
    # the loss of the batch is the token-weighted mean of the sequences' losses
    fwd, bwd = model.loss(ids, mask)
    per = [model.loss(s[None]) for s in seqs]
    counts = [len(s) - 1 for s in seqs]
    torch.testing.assert_close(
        fwd, sum(c * f for c, (f, _) in zip(counts, per, strict=True)) / sum(counts)
    )
    torch.testing.assert_close(
        bwd, sum(c * b for c, (_, b) in zip(counts, per, strict=True)) / sum(counts)
    )


def test_left_padding_is_refused() -> None:
    model = tiny()
    ids = torch.tensor([[0, 3, 4]])
    with pytest.raises(ValueError, match="right padding"):
        model(ids, ids != 0)
    with pytest.raises(ValueError, match="shape"):
        model(ids, torch.ones(1, 2, dtype=torch.bool))


def test_loss_targets_on_hand_built_logits() -> None:
    # one sequence a b a [pad] with V = 4: forward predicts b a at positions 0 1, backward
    # a b at positions 1 2; every position without a target predicts a wrong token.
    a, b, wrong, v = 2, 3, 1, 4
    ids = torch.tensor([[a, b, a, 0]])
    mask = torch.tensor([[True, True, True, False]])
    big = 30.0
    fwd = torch.zeros(1, 4, v)
    bwd = torch.zeros(1, 4, v)
    for t, target in enumerate([b, a, wrong, wrong]):
        fwd[0, t, target] = big
    for t, target in enumerate([wrong, a, b, wrong]):
        bwd[0, t, target] = big
    lf, lb = bilm_loss(fwd, bwd, ids, mask)
    assert lf < 1e-6 and lb < 1e-6
    # shifting either set of logits by one position puts every target on a wrong token
    lf, lb = bilm_loss(fwd.roll(1, 1), bwd.roll(-1, 1), ids, mask)
    assert lf > 10 and lb > 10
    # uniform logits: log V per target
    lf, lb = bilm_loss(torch.zeros(1, 4, v), torch.zeros(1, 4, v), ids, mask)
    torch.testing.assert_close(lf, torch.tensor(math.log(v)))
    torch.testing.assert_close(lb, torch.tensor(math.log(v)))
    # no target at all (a one-token sequence): 0, not NaN
    lf, lb = bilm_loss(fwd[:, :1], bwd[:, :1], ids[:, :1], mask[:, :1])
    assert lf == 0 and lb == 0


def test_loss_equals_cross_entropy_on_shifted_targets() -> None:
    model = tiny()
    ids = torch.tensor([[5, 6, 7, 8, 9], [10, 11, 12, 0, 0], [13, 0, 0, 0, 0]])
    lengths = [5, 3, 1]
    out = model(ids)
    f_terms, b_terms = [], []
    for row, n in enumerate(lengths):
        for t in range(n - 1):  # forward: at t, token t + 1
            f_terms.append(F.cross_entropy(out.forward_logits[row, t], ids[row, t + 1]))
        for t in range(1, n):  # backward: at t, token t - 1
            b_terms.append(F.cross_entropy(out.backward_logits[row, t], ids[row, t - 1]))
    fwd, bwd = model.loss(ids)
    torch.testing.assert_close(fwd, torch.stack(f_terms).mean())
    torch.testing.assert_close(bwd, torch.stack(b_terms).mean())


def test_elmo_mix_math() -> None:
    model = tiny()
    embedder = ELMoEmbedder(model)
    ids = torch.tensor([[5, 6, 7, 8], [9, 10, 0, 0]])
    layers, _ = model.encode(ids)
    # s = 0 and gamma = 1 (the initial values): the mean of the layers
    torch.testing.assert_close(embedder(ids), torch.stack(layers).mean(0))
    weights, gamma = embedder.weights()
    assert weights == pytest.approx([1 / 3] * 3) and gamma == 1.0
    with torch.no_grad():
        embedder.mix.scalars.copy_(torch.tensor([0.5, -1.0, 2.0]))
        embedder.mix.gamma.fill_(1.7)
    s = torch.softmax(torch.tensor([0.5, -1.0, 2.0]), 0)
    want = 1.7 * sum(s[j] * layers[j] for j in range(3))
    torch.testing.assert_close(embedder(ids), want)
    weights, gamma = embedder.weights()
    assert weights == pytest.approx(s.tolist()) and gamma == pytest.approx(1.7)
    assert embedder(ids).shape == (2, 4, embedder.output_dim)
    assert not embedder(ids)[1, 2:].any()  # padding stays zero


def test_embedder_trains_only_the_mix() -> None:
    model = tiny(dropout=0.5)
    embedder = ELMoEmbedder(model).train()
    assert not model.training  # the biLM stays in eval mode: no dropout in the features
    trainable = {n for n, p in embedder.named_parameters() if p.requires_grad}
    assert trainable == {"mix.scalars", "mix.gamma"}
    ids = random_ids(2, 5)
    torch.testing.assert_close(embedder(ids), embedder(ids))  # deterministic
    embedder(ids).pow(2).mean().backward()
    assert embedder.mix.scalars.grad is not None and embedder.mix.gamma.grad is not None
    assert all(p.grad is None for p in model.parameters())


def test_tiny_bilm_learns_a_repetitive_corpus() -> None:
    torch.manual_seed(0)
    model = BiLM(ELMoConfig(vocab_size=V, pad_id=0, d_model=16, hidden_size=32, dropout=0.0))
    pattern = [3, 4, 5, 6, 7, 8, 4, 9]
    rows = [(pattern * 4)[k : k + 12] for k in range(8)]  # every shift of the cycle
    ids = torch.tensor(rows)
    ids[::2, 9:] = 0  # some rows padded
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    with torch.no_grad():
        before = [float(x) for x in model.eval().loss(ids)]
    model.train()
    for _ in range(50):
        fwd, bwd = model.loss(ids)
        opt.zero_grad()
        (fwd + bwd).backward()
        opt.step()
    with torch.no_grad():
        after = [float(x) for x in model.eval().loss(ids)]
    for b, a in zip(before, after, strict=True):
        assert math.exp(a) < 0.5 * math.exp(b), (before, after)  # perplexity at least halved
    assert math.exp(after[0]) < 2.0 and math.exp(after[1]) < 2.0


def test_config_errors_name_the_key() -> None:
    cases = [
        ({"hidden_size": 0}, "model.hidden_size must be > 0"),
        ({"d_model": -1}, "model.d_model must be > 0"),
        ({"num_layers": 0}, "model.num_layers must be > 0"),
        ({"dropout": 1.0}, "model.dropout must be in [0, 1)"),
    ]
    for changes, message in cases:
        with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace(")", r"\)")):
            BiLM(ELMoConfig(vocab_size=V, **changes))
    with pytest.raises(ConfigError, match="model.hiden_size"):
        ELMoConfig.from_dict({"hiden_size": 8})
    with pytest.raises(ConfigError, match="model.num_heads sizes a Transformer"):
        ELMoConfig.from_dict({"num_heads": 2})
    with pytest.raises(ConfigError, match="model.emb_dim"):
        ELMoConfig.from_dict({"emb_dim": 2})
    with pytest.raises(ConfigError, match="model.vocab_size is set by the task"):
        ELMoConfig.from_dict({"vocab_size": 100}, allow_derived=False)
    config = ELMoConfig.from_dict({"hidden_size": 8, "tie_embeddings": False})
    assert config.arch == "elmo" and config.model_type == "bilm" and config.output_dim == 16
    assert ELMoConfig.from_dict(config.to_dict()) == config
    assert all(ELMoConfig.docs().values())

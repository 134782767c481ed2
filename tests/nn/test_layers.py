"""layers.py: positional encodings against the formula, and the encoder/decoder layers
against torch.nn.TransformerEncoderLayer / TransformerDecoderLayer with copied weights."""

import math

import pytest
import torch
from torch import nn

from attnkit.nn.attention import causal_mask
from attnkit.nn.capture import capture
from attnkit.nn.layers import (
    AddNorm,
    BlockConfig,
    Decoder,
    DecoderLayer,
    Encoder,
    EncoderLayer,
    FeedForward,
    LearnedPositionalEmbedding,
    SegmentEmbedding,
    SinusoidalPositionalEncoding,
    TokenEmbedding,
    sinusoidal_encoding,
)

ATOL = 1e-5


def test_sinusoidal_encoding_formula():
    pe = sinusoidal_encoding(50, 128)
    assert pe.shape == (50, 128)
    assert torch.equal(pe[0, 0::2], torch.zeros(64)) and torch.equal(pe[0, 1::2], torch.ones(64))
    for pos in (1, 7, 49):
        for i in (0, 1, 10, 63):
            angle = pos / 10000 ** (2 * i / 128)
            assert pe[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert pe[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)
    odd = sinusoidal_encoding(4, 5)
    assert odd.shape == (4, 5)
    assert odd[3, 4].item() == pytest.approx(math.sin(3 / 10000 ** (4 / 5)), abs=1e-6)


def test_positional_modules_add_and_offset():
    x = torch.zeros(2, 3, 8)
    pe = SinusoidalPositionalEncoding(8, max_len=10)
    assert torch.equal(pe(x), sinusoidal_encoding(10, 8)[:3].expand(2, 3, 8))
    assert torch.equal(pe(x, offset=4)[0], sinusoidal_encoding(10, 8)[4:7])
    assert "pe" not in pe.state_dict()  # rebuilt, not stored
    with pytest.raises(ValueError, match="max_len=10"):
        pe(torch.zeros(1, 11, 8))
    learned = LearnedPositionalEmbedding(10, 8)
    assert torch.equal(learned(x, offset=2)[1], learned.embedding.weight[2:5])
    with pytest.raises(ValueError, match="max_len=10"):
        learned(x, offset=8)


def test_token_and_segment_embedding():
    emb = TokenEmbedding(20, 16, padding_idx=0)
    ids = torch.tensor([[3, 0]])
    torch.testing.assert_close(emb(ids)[0, 0], emb.weight[3] * 4.0)
    assert torch.equal(emb(ids)[0, 1], torch.zeros(16))
    unscaled = TokenEmbedding(20, 16, scale=False)
    assert torch.equal(unscaled(ids)[0, 0], unscaled.weight[3])
    seg = SegmentEmbedding(16)
    assert seg(torch.tensor([[0, 1, 1]])).shape == (1, 3, 16)


def test_feed_forward_and_add_norm():
    ff = FeedForward(4, 8, dropout=0.0, activation="relu")
    x = torch.randn(2, 3, 4)
    ref = ff.linear2(torch.relu(ff.linear1(x)))
    torch.testing.assert_close(ff(x), ref)
    with pytest.raises(ValueError, match="activation"):
        FeedForward(4, 8, activation="swishy")
    post = AddNorm(4, dropout=0.0)  # LayerNorm(x + Sublayer(x))
    torch.testing.assert_close(post(x, ff(post.sublayer_input(x))), post.norm(x + ff(x)))
    pre = AddNorm(4, dropout=0.0, norm_first=True)  # x + Sublayer(LayerNorm(x))
    torch.testing.assert_close(pre(x, ff(pre.sublayer_input(x))), x + ff(pre.norm(x)))


def _copy_mha(ours, ref):
    ref.in_proj_weight.copy_(
        torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight])
    )
    ref.in_proj_bias.copy_(torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias]))
    ref.out_proj.weight.copy_(ours.out_proj.weight)
    ref.out_proj.bias.copy_(ours.out_proj.bias)


def _copy_common(ours, ref, norms):
    ref.linear1.load_state_dict(ours.ffn.linear1.state_dict())
    ref.linear2.load_state_dict(ours.ffn.linear2.state_dict())
    for i, name in enumerate(norms, start=1):
        getattr(ref, f"norm{i}").load_state_dict(getattr(ours, name).norm.state_dict())


def _check_grads(ours_out, ref_out, ours_inputs, ref_inputs):
    g = torch.randn_like(ours_out)
    ga = torch.autograd.grad(ours_out, ours_inputs, g)
    gb = torch.autograd.grad(ref_out, ref_inputs, g)
    for a, b in zip(ga, gb, strict=True):
        torch.testing.assert_close(a, b, atol=ATOL, rtol=0)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_layer_parity(norm_first, activation):
    torch.manual_seed(0)
    d, h, d_ff = 16, 4, 32
    ours = EncoderLayer(
        BlockConfig(d, h, d_ff, dropout=0.0, activation=activation, norm_first=norm_first)
    )
    ref = nn.TransformerEncoderLayer(
        d, h, d_ff, dropout=0.0, activation=activation, batch_first=True, norm_first=norm_first
    )
    with torch.no_grad():
        _copy_mha(ours.self_attn, ref.self_attn)
        _copy_common(ours, ref, ["add_norm1", "add_norm2"])
    x = torch.randn(3, 6, d, requires_grad=True)
    kpm = torch.arange(6)[None] < torch.tensor([6, 4, 2])[:, None]
    with capture(ours) as rec:
        captured = ours(x, key_padding_mask=kpm)
    out = ours(x, key_padding_mask=kpm)  # (the fused kernel: no capture)
    ref_out = ref(x, src_key_padding_mask=~kpm)
    torch.testing.assert_close(out, ref_out, atol=ATOL, rtol=0)
    torch.testing.assert_close(captured, ref_out, atol=ATOL, rtol=0)
    (w,) = rec.attention_weights()
    assert w.shape == (3, h, 6, 6)
    params = list(ours.parameters())
    ref_params = [
        ref.self_attn.in_proj_weight,
        ref.linear1.weight,
        ref.linear2.weight,
        ref.norm1.weight,
        ref.norm2.weight,
    ]
    ours_params = [
        ours.self_attn.q_proj.weight,
        ours.ffn.linear1.weight,
        ours.ffn.linear2.weight,
        ours.add_norm1.norm.weight,
        ours.add_norm2.norm.weight,
    ]
    assert len(params) == len(list(ref.parameters())) + 4  # q/k/v kept separate (+4 tensors)
    g = torch.randn_like(out)
    ga = torch.autograd.grad(out, [x, *ours_params], g)
    gb = torch.autograd.grad(ref_out, [x, *ref_params], g)
    torch.testing.assert_close(ga[0], gb[0], atol=ATOL, rtol=0)
    torch.testing.assert_close(ga[1], gb[1][:d], atol=ATOL, rtol=0)  # W^Q rows of in_proj
    for a, b in zip(ga[2:], gb[2:], strict=True):
        torch.testing.assert_close(a, b, atol=ATOL, rtol=0)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_parity(norm_first):
    torch.manual_seed(0)
    d, h, d_ff = 16, 4, 32
    ours = DecoderLayer(BlockConfig(d, h, d_ff, dropout=0.0, norm_first=norm_first))
    ref = nn.TransformerDecoderLayer(
        d, h, d_ff, dropout=0.0, batch_first=True, norm_first=norm_first
    )
    with torch.no_grad():
        _copy_mha(ours.self_attn, ref.self_attn)
        _copy_mha(ours.cross_attn, ref.multihead_attn)
        _copy_common(ours, ref, ["add_norm1", "add_norm2", "add_norm3"])
    y = torch.randn(3, 5, d, requires_grad=True)
    mem = torch.randn(3, 7, d, requires_grad=True)
    tkpm = torch.arange(5)[None] < torch.tensor([5, 3, 1])[:, None]
    mkpm = torch.arange(7)[None] < torch.tensor([7, 2, 5])[:, None]
    kw = {"tgt_key_padding_mask": tkpm, "memory_key_padding_mask": mkpm}
    with capture(ours) as rec:
        out = ours(y, mem, **kw)
    (self_w,), (cross_w,) = rec.attention_weights("causal_self"), rec.attention_weights("cross")
    ref_out = ref(
        y,
        mem,
        tgt_mask=~causal_mask(5),
        tgt_key_padding_mask=~tkpm,
        memory_key_padding_mask=~mkpm,
    )
    torch.testing.assert_close(out, ref_out, atol=ATOL, rtol=0)
    assert self_w.shape == (3, h, 5, 5) and cross_w.shape == (3, h, 5, 7)
    assert torch.all(self_w.triu(1) == 0)  # no look-ahead
    assert torch.all(cross_w[1, :, :, 2:] == 0)  # encoder padding ignored
    _check_grads(out, ref_out, [y, mem], [y, mem])
    ga = torch.autograd.grad(ours(y, mem, **kw).sum(), ours.cross_attn.k_proj.weight)
    gb = torch.autograd.grad(
        ref(
            y,
            mem,
            tgt_mask=~causal_mask(5),
            tgt_key_padding_mask=~tkpm,
            memory_key_padding_mask=~mkpm,
        ).sum(),
        ref.multihead_attn.in_proj_weight,
    )
    torch.testing.assert_close(ga[0], gb[0][d : 2 * d], atol=ATOL, rtol=0)


@pytest.mark.parametrize("norm_first", [False, True])
def test_stacks_parity(norm_first):
    torch.manual_seed(0)
    d, h, d_ff, n = 8, 2, 16, 2
    enc = Encoder(BlockConfig(d, h, d_ff, dropout=0.0, norm_first=norm_first), n)
    layer = nn.TransformerEncoderLayer(d, h, d_ff, 0.0, batch_first=True, norm_first=norm_first)
    ref = nn.TransformerEncoder(
        layer, n, norm=nn.LayerNorm(d) if norm_first else None, enable_nested_tensor=False
    )
    with torch.no_grad():
        for ours_l, ref_l in zip(enc.layers, ref.layers, strict=True):
            _copy_mha(ours_l.self_attn, ref_l.self_attn)
            _copy_common(ours_l, ref_l, ["add_norm1", "add_norm2"])
        if norm_first:
            ref.norm.load_state_dict(enc.norm.state_dict())
    x = torch.randn(2, 4, d)
    kpm = torch.tensor([[True, True, True, False], [True, True, True, True]])
    states = []
    with capture(enc) as rec:
        out = enc(x, key_padding_mask=kpm, hidden_states=states)
    torch.testing.assert_close(out, ref(x, src_key_padding_mask=~kpm), atol=ATOL, rtol=0)
    assert len(rec.attention_weights()) == n and len(states) == n + 1
    torch.testing.assert_close(states[0], x)
    torch.testing.assert_close(enc.norm(states[-1]), out)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_cache_matches_full_recomputation(norm_first):
    torch.manual_seed(0)
    dec = Decoder(BlockConfig(16, 4, 32, dropout=0.1, norm_first=norm_first), 2, d_memory=12)
    dec.eval()
    y = torch.randn(2, 6, 16)
    mem = torch.randn(2, 5, 12)
    mkpm = torch.tensor([[True] * 5, [True, True, True, False, False]])
    full = dec(y, mem, memory_key_padding_mask=mkpm)
    cache = dec.init_cache()
    steps = [dec(y[:, t : t + 1], mem, memory_key_padding_mask=mkpm, cache=cache) for t in range(6)]
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=ATOL, rtol=0)
    assert len(cache[0]["self"]) == 6 and len(cache[1]["cross"]) == 5


def test_dropout_is_active_in_training_only():
    layer = EncoderLayer(BlockConfig(8, 2, 16, dropout=0.5))
    x = torch.randn(2, 4, 8)
    layer.train()
    assert not torch.equal(layer(x), layer(x))
    layer.eval()
    assert torch.equal(layer(x), layer(x))


def test_attention_dropout_is_separate_from_hidden_dropout():
    """attention_dropout defaults to dropout; set on its own it reaches every attention
    (self and cross), and at 0 with dropout 0 the layer is deterministic in training."""
    assert EncoderLayer(BlockConfig(8, 2, 16, dropout=0.3)).self_attn.dropout == 0.3
    enc = Encoder(BlockConfig(8, 2, 16, dropout=0.3, attention_dropout=0.0), 2)
    assert [layer.self_attn.dropout for layer in enc.layers] == [0.0, 0.0]
    assert enc.layers[0].add_norm1.dropout.p == 0.3
    dec = Decoder(BlockConfig(8, 2, 16, dropout=0.1, attention_dropout=0.2), 1)
    assert (dec.layers[0].self_attn.dropout, dec.layers[0].cross_attn.dropout) == (0.2, 0.2)
    layer = EncoderLayer(BlockConfig(8, 2, 16, dropout=0.0, attention_dropout=0.5)).train()
    x = torch.randn(2, 4, 8)
    assert not torch.equal(layer(x), layer(x))  # only the attention weights drop
    layer = EncoderLayer(BlockConfig(8, 2, 16, dropout=0.0, attention_dropout=0.0)).train()
    assert torch.equal(layer(x), layer(x))

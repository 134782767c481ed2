"""attention.py: score functions, masks, soft/hard attention, SDPA and multi-head attention,
checked against hand-computed values and against torch.nn equivalents with copied weights."""

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from attnkit.nn.attention import (
    ConcatScore,
    GeneralScore,
    KVCache,
    LocationScore,
    MultiHeadAttention,
    attend,
    causal_mask,
    hard_attention,
    make_score,
    masked_softmax,
    merge_masks,
    padding_mask,
    scaled_dot_product_attention,
    soft_attention,
)

ATOL = 1e-5


# ------------------------------------------------------------------ score functions
def test_dot_and_scaled_dot_hand_computed():
    q = torch.tensor([[[1.0, 2.0]]])  # (1, 1, 2): s_t
    k = torch.tensor([[[3.0, 4.0], [1.0, -1.0]]])  # (1, 2, 2): h_1, h_2
    assert torch.equal(make_score("dot")(q, k), torch.tensor([[[11.0, -1.0]]]))
    expected = torch.tensor([[[11.0, -1.0]]]) / math.sqrt(2)
    torch.testing.assert_close(make_score("scaled_dot")(q, k), expected)


def test_general_score_hand_computed():
    score = GeneralScore(2, 3)
    with torch.no_grad():
        score.W_a.weight.copy_(torch.tensor([[1.0, 0.0, 2.0], [0.0, 1.0, 0.0]]))  # W_a (2, 3)
    q = torch.tensor([[[1.0, 2.0]]])
    k = torch.tensor([[[1.0, 1.0, 1.0]]])
    # s^T W_a h = [1, 2] . [1 + 2, 1] = 5
    assert torch.equal(score(q, k), torch.tensor([[[5.0]]]))


def test_concat_score_hand_computed():
    score = ConcatScore(d_query=2, d_key=2, d_attn=2)
    with torch.no_grad():
        score.W_b.weight.copy_(torch.eye(2))
        score.W_c.weight.copy_(2 * torch.eye(2))
        score.v_a.weight.copy_(torch.tensor([[1.0, -1.0]]))
    q = torch.tensor([[[0.5, 0.0]]])
    k = torch.tensor([[[0.0, 0.25], [0.1, 0.0]]])
    # v^T tanh(s + 2h): h1 -> tanh(.5) - tanh(.5); h2 -> tanh(.7) - tanh(0)
    expected = torch.tensor([[[0.0, math.tanh(0.7)]]])
    torch.testing.assert_close(score(q, k), expected)


def test_location_score_uses_positions_only_and_checks_length():
    score = LocationScore(d_query=2, max_len=4)
    with torch.no_grad():
        score.W_a.weight.copy_(torch.arange(8.0).view(4, 2))
    q = torch.tensor([[[1.0, 1.0]]])
    k1 = torch.randn(1, 3, 5)
    k2 = torch.randn(1, 3, 5)
    assert torch.equal(score(q, k1), torch.tensor([[[1.0, 5.0, 9.0]]]))
    assert torch.equal(score(q, k1), score(q, k2))
    with pytest.raises(ValueError, match="max_len=4"):
        score(q, torch.randn(1, 5, 5))


@pytest.mark.parametrize("name", ["dot", "scaled_dot", "general", "concat", "location"])
def test_make_score_shapes(name):
    score = make_score(name, d_query=6, d_key=6, d_attn=5, max_len=10)
    out = score(torch.randn(2, 3, 6), torch.randn(2, 7, 6))
    assert out.shape == (2, 3, 7)


@pytest.mark.parametrize("name", ["dot", "scaled_dot", "general", "concat", "location"])
def test_prepared_keys_give_the_same_scores(name):
    # a decoder prepares the keys once per source and scores each step against them
    torch.manual_seed(0)
    score = make_score(name, d_query=6, d_key=4 if name in ("general", "concat") else 6,
                       d_attn=5, max_len=10)  # fmt: skip
    keys = torch.randn(2, 7, 4 if name in ("general", "concat") else 6)
    prepared = score.prepare(keys)
    for _ in range(3):
        q = torch.randn(2, 1, 6)
        torch.testing.assert_close(score.score(q, prepared), score(q, keys))


def test_make_score_errors():
    with pytest.raises(ValueError, match="unknown score"):
        make_score("cosine")
    with pytest.raises(ValueError, match="max_len"):
        make_score("location", d_query=4)
    assert isinstance(make_score("bahdanau", d_query=4), ConcatScore)


# ------------------------------------------------------------------ masks
def test_padding_and_causal_masks():
    ids = torch.tensor([[5, 6, 0, 0], [7, 0, 0, 0]])
    assert padding_mask(ids, 0).tolist() == [
        [True, True, False, False],
        [True, False, False, False],
    ]
    assert causal_mask(3).tolist() == [
        [True, False, False],
        [True, True, False],
        [True, True, True],
    ]
    # bottom-right aligned when there are cached keys: the one new query sees all 4 keys
    assert causal_mask(1, 4).tolist() == [[True, True, True, True]]
    assert causal_mask(2, 3).tolist() == [[True, True, False], [True, True, True]]
    combined = merge_masks(padding_mask(ids, 0), causal_mask(4))
    assert combined.shape == (2, 4, 4)
    assert combined[0].tolist() == [
        [True, False, False, False],
        [True, True, False, False],
        [True, True, False, False],
        [True, True, False, False],
    ]


def test_masks_must_be_bool():
    with pytest.raises(TypeError):
        merge_masks(torch.ones(2, 3))


# ------------------------------------------------------------------ soft / hard attention
def test_masked_softmax_zeros_and_no_nan():
    scores = torch.randn(2, 3, 4)
    mask = torch.tensor([[True, True, False, False]]).expand(3, 4).clone()
    mask[2] = False  # a fully masked row
    w = masked_softmax(scores, mask)
    assert not torch.isnan(w).any()
    assert torch.equal(w[:, :2, 2:], torch.zeros(2, 2, 2))
    torch.testing.assert_close(w[:, :2].sum(-1), torch.ones(2, 2))
    assert torch.equal(w[:, 2], torch.zeros(2, 4))


def test_soft_attention_temperature():
    scores = torch.tensor([[[1.0, 2.0, 3.0]]])
    torch.testing.assert_close(soft_attention(scores), scores.softmax(-1))
    torch.testing.assert_close(soft_attention(scores, beta=2.0), (2 * scores).softmax(-1))
    assert soft_attention(scores, beta=100.0)[0, 0, 2] > 0.999
    torch.testing.assert_close(soft_attention(scores, beta=0.0), torch.full((1, 1, 3), 1 / 3))


def test_hard_attention_one_hot_and_straight_through():
    scores = torch.tensor([[[1.0, 3.0, 2.0], [5.0, 0.0, 9.0]]], requires_grad=True)
    mask = torch.tensor([[[True, True, True], [True, True, False]]])
    w = hard_attention(scores, mask)
    assert w.tolist() == [[[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]]
    assert not w.requires_grad  # argmax has no gradient path
    st_w = hard_attention(scores, mask, straight_through=True)
    torch.testing.assert_close(st_w, w)  # same forward value
    values = torch.randn(1, 3, 4)
    attend(st_w, values).sum().backward()
    assert scores.grad is not None and scores.grad.abs().sum() > 0
    assert torch.equal(
        hard_attention(scores, torch.zeros(1, 2, 3, dtype=torch.bool)), torch.zeros(1, 2, 3)
    )


def test_attend_is_weighted_sum():
    w = torch.tensor([[[0.25, 0.75]]])
    v = torch.tensor([[[4.0, 0.0], [0.0, 8.0]]])
    assert torch.equal(attend(w, v), torch.tensor([[[1.0, 6.0]]]))


# ------------------------------------------------------------------ scaled dot-product attention
def _random_mask(b, tq, tk, gen):
    mask = torch.rand(b, 1, tq, tk, generator=gen) > 0.3
    mask[..., 0] = True  # every row keeps a key (torch's reference returns NaN otherwise)
    return mask


@pytest.mark.parametrize("need_weights", [False, True])
def test_sdpa_matches_torch(need_weights):
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(2, 3, 5, 8, generator=gen, requires_grad=True)
    k = torch.randn(2, 3, 7, 8, generator=gen, requires_grad=True)
    v = torch.randn(2, 3, 7, 4, generator=gen, requires_grad=True)
    mask = _random_mask(2, 5, 7, gen)
    out, w = scaled_dot_product_attention(q, k, v, mask, need_weights=need_weights)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(out, ref, atol=ATOL, rtol=0)
    grads = torch.autograd.grad(out.square().sum(), (q, k, v))
    ref_grads = torch.autograd.grad(ref.square().sum(), (q, k, v))
    for g, r in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(g, r, atol=ATOL, rtol=0)
    if need_weights:
        manual = ((q @ k.transpose(-2, -1)) / math.sqrt(8)).masked_fill(~mask, -math.inf)
        torch.testing.assert_close(w, manual.softmax(-1), atol=ATOL, rtol=0)
    else:
        assert w is None


@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("tq,tk", [(4, 4), (2, 5)])
def test_sdpa_causal(need_weights, tq, tk):
    q, k, v = torch.randn(1, 2, tq, 4), torch.randn(1, 2, tk, 4), torch.randn(1, 2, tk, 4)
    out, _ = scaled_dot_product_attention(q, k, v, is_causal=True, need_weights=need_weights)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=causal_mask(tq, tk))
    torch.testing.assert_close(out, ref, atol=ATOL, rtol=0)


@pytest.mark.parametrize("need_weights", [False, True])
def test_sdpa_fully_masked_rows_are_zero_with_finite_grads(need_weights):
    q = torch.randn(1, 1, 3, 4, requires_grad=True)
    k = torch.randn(1, 1, 3, 4, requires_grad=True)
    v = torch.randn(1, 1, 3, 4, requires_grad=True)
    mask = torch.tensor([[True, True, False], [False, False, False], [True, False, False]])
    out, _ = scaled_dot_product_attention(q, k, v, mask, need_weights=need_weights)
    assert torch.equal(out[0, 0, 1], torch.zeros(4))
    out.sum().backward()
    for t in (q, k, v):
        assert torch.isfinite(t.grad).all()


def test_sdpa_in_bf16_on_the_cpu_matches_fp32(monkeypatch):
    # bf16 on the CPU takes the explicit formula (faster than the fused CPU kernel there):
    # outputs and gradients agree with the fp32 kernel to bf16 precision, fully masked rows
    # are zeros, and the fused kernel is not called
    gen = torch.Generator().manual_seed(0)
    q32, k32, v32 = (torch.randn(4, 2, 9, 16, generator=gen) for _ in range(3))
    mask = _random_mask(4, 9, 9, gen)
    mask[1, 0, 3] = False  # a query that sees no key
    q, k, v = (t.bfloat16().requires_grad_() for t in (q32, k32, v32))
    fused = F.scaled_dot_product_attention
    monkeypatch.setattr(F, "scaled_dot_product_attention", None)  # would fail if called
    out, _ = scaled_dot_product_attention(q, k, v, mask)
    monkeypatch.setattr(F, "scaled_dot_product_attention", fused)
    assert out.dtype == torch.bfloat16 and torch.equal(out[1, 0, 3].float(), torch.zeros(16))
    qr, kr, vr = (t.clone().requires_grad_() for t in (q32, k32, v32))
    ref, _ = scaled_dot_product_attention(qr, kr, vr, mask)
    torch.testing.assert_close(out.float(), ref, atol=0.05, rtol=0.02)
    out.float().square().sum().backward()
    ref.square().sum().backward()
    for ours, theirs in ((q, qr), (k, kr), (v, vr)):
        torch.testing.assert_close(ours.grad.float(), theirs.grad, atol=0.1, rtol=0.05)


def test_sdpa_in_bf16_inference_takes_the_fused_kernel_for_few_scores(monkeypatch):
    # without gradients and for at most FEW_SCORES scores (a short sentence) the fused
    # kernel is the faster one, on a CPU with AMX tiles for any number; with a fully
    # masked row it still gives zeros
    from attnkit.nn import fast_paths
    from attnkit.nn.fast_paths import FEW_SCORES

    monkeypatch.setattr(fast_paths, "_AMX", False)

    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 4, 16, 16, generator=gen).bfloat16() for _ in range(3))
    mask = _random_mask(1, 16, 16, gen)  # (1, 1, 16, 16)
    mask[0, 0, 3] = False
    calls = []
    fused = F.scaled_dot_product_attention
    monkeypatch.setattr(
        F, "scaled_dot_product_attention", lambda *a, **k: calls.append(1) or fused(*a, **k)
    )
    with torch.no_grad():
        out, _ = scaled_dot_product_attention(q, k, v, mask)
        assert calls == [1] and torch.equal(out[0, 0, 3].float(), torch.zeros(16))
        ref, _ = scaled_dot_product_attention(q.float(), k.float(), v.float(), mask)
        torch.testing.assert_close(out.float(), ref, atol=0.05, rtol=0.02)
        calls.clear()  # (fp32 took the fused kernel too)
        big = torch.randn(1, 4, FEW_SCORES // 64 + 1, 16).bfloat16()  # > FEW_SCORES: explicit
        scaled_dot_product_attention(big, k.expand(1, 4, 16, 16), v, None)
        assert big.numel() // 16 * 16 > FEW_SCORES and calls == []
        monkeypatch.setattr(fast_paths, "_AMX", True)
        scaled_dot_product_attention(big, k.expand(1, 4, 16, 16), v, None)
        assert calls == [1]  # AMX: the fused kernel for any number of scores
        calls.clear()
    scaled_dot_product_attention(q.requires_grad_(), k, v, mask)  # gradients: explicit
    assert calls == []


# ------------------------------------------------------------------ multi-head attention
def _to_torch_mha(ours: MultiHeadAttention, kdim=None, vdim=None) -> nn.MultiheadAttention:
    ref = nn.MultiheadAttention(
        ours.d_model, ours.num_heads, bias=True, batch_first=True, kdim=kdim, vdim=vdim
    )
    with torch.no_grad():
        if ref._qkv_same_embed_dim:
            ref.in_proj_weight.copy_(
                torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight])
            )
        else:
            ref.q_proj_weight.copy_(ours.q_proj.weight)
            ref.k_proj_weight.copy_(ours.k_proj.weight)
            ref.v_proj_weight.copy_(ours.v_proj.weight)
        ref.in_proj_bias.copy_(torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias]))
        ref.out_proj.weight.copy_(ours.out_proj.weight)
        ref.out_proj.bias.copy_(ours.out_proj.bias)
    return ref


def _param_grads(module):
    return {n: p.grad.clone() for n, p in module.named_parameters()}


@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("kind", ["self", "self_causal", "cross"])
def test_mha_parity_with_torch(kind, need_weights):
    torch.manual_seed(0)
    b, tq, d, h = 3, 5, 16, 4
    kdim = 12 if kind == "cross" else None
    tk = 7 if kind == "cross" else tq
    ours = MultiHeadAttention(d, h, kdim=kdim, vdim=kdim)
    ref = _to_torch_mha(ours, kdim, kdim)
    x = torch.randn(b, tq, d, requires_grad=True)
    mem = torch.randn(b, tk, kdim or d, requires_grad=True) if kind == "cross" else x
    lengths = torch.tensor([tk, tk - 2, 1])
    kpm = torch.arange(tk)[None, :] < lengths[:, None]  # True = real
    am = causal_mask(tq) if kind == "self_causal" else None

    out, w = ours(x, mem, mem, key_padding_mask=kpm, attn_mask=am, need_weights=need_weights)
    ref_out, ref_w = ref(
        x,
        mem,
        mem,
        key_padding_mask=~kpm,
        attn_mask=None if am is None else ~am,
        need_weights=True,
        average_attn_weights=False,
    )
    torch.testing.assert_close(out, ref_out, atol=ATOL, rtol=0)
    if need_weights:
        torch.testing.assert_close(w, ref_w, atol=ATOL, rtol=0)
    # gradients: inputs and every projection
    g_out = torch.randn_like(out)
    gx = torch.autograd.grad(out, x, g_out, retain_graph=True)[0]
    out.backward(g_out)
    ref_gx = torch.autograd.grad(ref_out, x, g_out, retain_graph=True)[0]
    ref_out.backward(g_out)
    torch.testing.assert_close(gx, ref_gx, atol=ATOL, rtol=0)
    g = _param_grads(ours)
    rg = _param_grads(ref)
    if kdim is None:
        ours_in = torch.cat([g["q_proj.weight"], g["k_proj.weight"], g["v_proj.weight"]])
        torch.testing.assert_close(ours_in, rg["in_proj_weight"], atol=ATOL, rtol=0)
    else:
        torch.testing.assert_close(g["k_proj.weight"], rg["k_proj_weight"], atol=ATOL, rtol=0)
    ours_b = torch.cat([g["q_proj.bias"], g["k_proj.bias"], g["v_proj.bias"]])
    torch.testing.assert_close(ours_b, rg["in_proj_bias"], atol=ATOL, rtol=0)
    torch.testing.assert_close(g["out_proj.weight"], rg["out_proj.weight"], atol=ATOL, rtol=0)


def test_mha_rejects_indivisible_heads():
    with pytest.raises(ValueError, match="divisible"):
        MultiHeadAttention(10, 3)


def test_mha_kv_cache_matches_full_recomputation():
    torch.manual_seed(1)
    mha = MultiHeadAttention(16, 4).eval()
    x = torch.randn(2, 6, 16)
    full, _ = mha(x, x, x, is_causal=True)
    cache = KVCache()
    steps = [
        mha(x[:, t : t + 1], x[:, t : t + 1], x[:, t : t + 1], cache=cache, is_causal=True)[0]
        for t in range(6)
    ]
    assert len(cache) == 6
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=ATOL, rtol=0)
    # a 2-token chunk after a 4-token prefix (bottom-right causal alignment)
    cache = KVCache()
    a, _ = mha(x[:, :4], x[:, :4], x[:, :4], cache=cache, is_causal=True)
    b, _ = mha(x[:, 4:], x[:, 4:], x[:, 4:], cache=cache, is_causal=True)
    torch.testing.assert_close(torch.cat([a, b], 1), full, atol=ATOL, rtol=0)


def test_static_cache_projects_memory_once_and_reorders():
    mha = MultiHeadAttention(8, 2).eval()
    mem = torch.randn(3, 5, 8)
    cache = KVCache(static=True)
    q = torch.randn(3, 1, 8)
    o1, _ = mha(q, mem, mem, cache=cache)
    o2, _ = mha(q, torch.zeros_like(mem), torch.zeros_like(mem), cache=cache)  # memory ignored
    torch.testing.assert_close(o1, o2)
    cache.reorder(torch.tensor([2, 2, 0]))
    o3, _ = mha(q[[2, 2, 0]], mem, mem, cache=cache)
    torch.testing.assert_close(o3, o1[[2, 2, 0]], atol=ATOL, rtol=0)


# ------------------------------------------------------------------ properties
@settings(max_examples=40, deadline=None)
@given(
    b=st.integers(1, 3),
    tq=st.integers(1, 6),
    tk=st.integers(1, 6),
    num_heads=st.sampled_from([1, 2, 4]),
    d_head=st.sampled_from([1, 3, 8]),
    seed=st.integers(0, 2**16),
)
def test_mha_properties(b, tq, tk, num_heads, d_head, seed):
    gen = torch.Generator().manual_seed(seed)
    d = num_heads * d_head
    mha = MultiHeadAttention(d, num_heads).eval()
    q = torch.randn(b, tq, d, generator=gen)
    kv = torch.randn(b, tk, d, generator=gen)
    kpm = torch.rand(b, tk, generator=gen) > 0.4  # may mask every key of a row
    am = torch.rand(tq, tk, generator=gen) > 0.3
    out, w = mha(q, kv, kv, key_padding_mask=kpm, attn_mask=am, need_weights=True)
    fused, _ = mha(q, kv, kv, key_padding_mask=kpm, attn_mask=am)
    assert out.shape == (b, tq, d) and w.shape == (b, num_heads, tq, tk)
    assert torch.isfinite(out).all() and torch.isfinite(fused).all()
    torch.testing.assert_close(out, fused, atol=1e-5, rtol=1e-4)
    allowed = (kpm[:, None, :] & am)[:, None]  # (b, 1, tq, tk)
    assert torch.all(w.masked_select(~allowed.expand_as(w)) == 0)
    row_sums = w.sum(-1)
    has_key = allowed.any(-1).expand_as(row_sums)
    torch.testing.assert_close(row_sums[has_key], torch.ones_like(row_sums[has_key]))
    assert torch.all(row_sums[~has_key] == 0)

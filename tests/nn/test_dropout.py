"""attnkit.nn.dropout: a Bernoulli mask from 16-bit pieces of 64-bit draws (the CPU's cheaper
dropout), statistically checked, and where the models and attention use it."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attnkit.models.bert import BertConfig, BertModel
from attnkit.nn.attention import scaled_dot_product_attention
from attnkit.nn.dropout import Dropout, dropout, keep_mask

N = 1 << 20  # draws per statistical check: 4 sigma of a proportion is < 0.004


@pytest.mark.parametrize("p", [0.1, 0.25, 0.5, 0.9])
def test_keep_mask_is_bernoulli_with_the_rounded_rate(p):
    torch.manual_seed(0)
    keep = keep_mask((N,), p, torch.device("cpu"))
    rate = 1 - round(p * 65536) / 65536
    sigma = math.sqrt(rate * (1 - rate) / N)
    assert abs(keep.float().mean().item() - rate) < 4 * sigma
    # the four entries cut from one 64-bit draw are independent of each other (and of the
    # neighbouring draw's): P(both kept) = rate^2 for entries 0-1, 1-2, 2-3 and 3-4 apart
    pairs = keep.view(-1, 8)
    for a, b in ((0, 1), (1, 2), (2, 3), (3, 4), (0, 3)):
        both = (pairs[:, a] & pairs[:, b]).float().mean().item()
        n = pairs.size(0)
        assert abs(both - rate**2) < 4 * math.sqrt(rate**2 * (1 - rate**2) / n), (a, b)


def test_dropout_scales_so_the_expectation_is_kept_and_the_gradient_is_the_mask():
    torch.manual_seed(1)
    x = torch.randn(N // 4, 4, requires_grad=True)
    y = dropout(x, 0.1)
    scale = 1 / (1 - round(0.1 * 65536) / 65536)
    kept = y != 0
    torch.testing.assert_close(y[kept], x[kept] * scale)  # kept values scaled by 1/(1-p)
    y.sum().backward()
    torch.testing.assert_close(x.grad, kept.float() * scale)  # d y / d x = mask / (1 - p)
    ones = dropout(torch.ones(N), 0.3)
    assert abs(ones.mean().item() - 1.0) < 4 * math.sqrt(0.3 / 0.7 / N)


def test_dropout_is_the_identity_where_it_should_be_and_keeps_dtype_and_shape():
    x = torch.randn(3, 5, 7)
    assert dropout(x, 0.5, training=False) is x
    assert dropout(x, 0.0) is x
    assert dropout(x, 1e-9) is x  # rounds to p = 0
    assert torch.equal(dropout(x, 1.0), torch.zeros_like(x))
    bf = dropout(x.bfloat16(), 0.2)
    assert bf.dtype == torch.bfloat16 and bf.shape == x.shape
    torch.manual_seed(3)
    a = dropout(x, 0.5)
    torch.manual_seed(3)
    assert torch.equal(a, dropout(x, 0.5))  # reproducible from the seed (resume is exact)


def test_dropout_module_is_an_nn_dropout():
    m = Dropout(0.2)
    assert isinstance(m, nn.Dropout) and repr(m) == repr(nn.Dropout(0.2))
    assert m.state_dict() == {}
    m.eval()
    x = torch.randn(4, 4)
    assert torch.equal(m(x), x)


def test_attention_dropout_on_the_cpu_drops_weights_and_rescales_the_rest():
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 64, 16) for _ in range(3))
    mask = torch.ones(2, 1, 1, 64, dtype=torch.bool)
    mask[1, ..., 50:] = False
    out, w = scaled_dot_product_attention(q, k, v, mask, dropout_p=0.5, need_weights=True)
    clean = torch.softmax((q @ k.transpose(-2, -1) / 4).masked_fill(~mask, -1e9), -1)
    dropped = w == 0
    assert 0.45 < dropped[0].float().mean().item() < 0.55
    torch.testing.assert_close(w[~dropped], 2 * clean[~dropped])  # scale 1 / (1 - p)
    torch.testing.assert_close(out, w @ v)
    # without weights requested, the same explicit path (same draws from the same seed)
    torch.manual_seed(0)
    q2, k2, v2 = (torch.randn(2, 4, 64, 16) for _ in range(3))
    torch.manual_seed(7)
    a, _ = scaled_dot_product_attention(q2, k2, v2, mask, dropout_p=0.5)
    torch.manual_seed(7)
    b, _ = scaled_dot_product_attention(q2, k2, v2, mask, dropout_p=0.5, need_weights=True)
    torch.testing.assert_close(a, b)


def test_bert_layers_have_no_dropout_inside_the_feed_forward():
    """As BERT and Hugging Face's BertLayer: dropout on embeddings, attention weights and
    sublayer outputs only (13 dropouts in a 4-layer BERT's forward, not 17)."""
    cfg = BertConfig(vocab_size=50, d_model=32, num_heads=2, d_ff=64, num_layers=4, max_len=16)
    model = BertModel(cfg).train()
    calls = []
    for m in model.modules():
        if isinstance(m, nn.Dropout) and m.p > 0:
            m.register_forward_hook(lambda *_: calls.append(1))
    model(torch.randint(5, 50, (2, 8)), torch.ones(2, 8, dtype=torch.bool))
    assert len(calls) == 1 + 4 * 2  # embeddings + 2 sublayer outputs per layer
    assert all(layer.ffn.dropout.p == 0 for layer in model.encoder.layers)


def test_cuda_uses_torch_dropout():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device here")
    x = torch.ones(1000, device="cuda")
    torch.manual_seed(0)
    a = dropout(x, 0.5)
    torch.manual_seed(0)
    torch.testing.assert_close(a, F.dropout(x, 0.5, True))


def test_fused_qkv_copy_follows_weight_changes_without_gradients():
    """The Q/K/V weights concatenated once for inference: replaced or changed in place, the
    next call sees the new weights (same outputs as three separate products)."""
    from attnkit.nn.attention import MultiHeadAttention
    from attnkit.nn.fast_paths import fused_qkv

    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 2).eval()
    x = torch.randn(2, 5, 16)

    def fused() -> tuple[torch.Tensor, ...]:
        return fused_qkv(mha, (mha.q_proj, mha.k_proj, mha.v_proj), x)

    def separate() -> torch.Tensor:
        return torch.cat([mha.q_proj(x), mha.k_proj(x), mha.v_proj(x)], -1)

    with torch.no_grad():
        torch.testing.assert_close(torch.cat(fused(), -1), separate())
        mha.k_proj.weight.mul_(2.0)  # in place
        torch.testing.assert_close(torch.cat(fused(), -1), separate())
        mha.v_proj.weight = nn.Parameter(torch.randn(16, 16))  # replaced
        torch.testing.assert_close(torch.cat(fused(), -1), separate())
    assert "_qkv_cache" in mha.__dict__
    mha.train()
    torch.cat(fused(), -1).sum().backward()  # with gradients: no cached copy kept
    assert "_qkv_cache" not in mha.__dict__ and mha.q_proj.weight.grad is not None

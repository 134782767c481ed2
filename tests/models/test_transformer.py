"""The encoder-decoder Transformer: masks, cache equivalence in decoding, and that it learns."""

import time

import pytest
import torch
import torch.nn.functional as F

from attnkit.models.transformer import PRESETS, Transformer
from attnkit.nn.generation import beam_search, greedy

PAD, BOS, EOS = 0, 1, 2


def _tiny(**kw):
    torch.manual_seed(0)
    return Transformer(
        vocab_size=20,
        d_model=32,
        num_heads=4,
        d_ff=64,
        num_layers=2,
        num_decoder_layers=2,
        dropout=0.0,
        max_len=32,
        **kw,
    ).eval()


def test_shapes_tying_and_presets():
    model = _tiny(share_embeddings=True)
    src = torch.randint(3, 20, (2, 7))
    tgt = torch.randint(3, 20, (2, 5))
    assert model(src, tgt).logits.shape == (2, 5, 20)
    assert model.generator.weight is model.src_embed.embedding.weight
    assert PRESETS["base"] == {
        "d_model": 512,
        "num_heads": 8,
        "d_ff": 2048,
        "num_encoder_layers": 6,
        "num_decoder_layers": 6,
    }
    with pytest.raises(ValueError, match="max_len"):
        model(torch.randint(3, 20, (1, 40)), tgt[:1])


def test_decoder_cannot_look_ahead_and_ignores_padding():
    model = _tiny()
    src = torch.randint(3, 20, (1, 6))
    tgt = torch.randint(3, 20, (1, 5))
    base = model(src, tgt).logits
    changed = tgt.clone()
    changed[0, 3:] = 7  # change the future
    torch.testing.assert_close(model(src, changed).logits[:, :3], base[:, :3])
    padded_src = torch.cat([src, torch.zeros(1, 4, dtype=torch.long)], 1)
    torch.testing.assert_close(model(padded_src, tgt).logits, base, atol=1e-5, rtol=0)


def test_cached_and_uncached_decoding_give_identical_tokens():
    model = _tiny()
    src = torch.randint(3, 20, (3, 6))
    src[2, 4:] = PAD
    start = torch.full((3,), BOS)
    a = greedy(model.stepper(src, use_cache=True), start, 12, eos_id=EOS)
    b = greedy(model.stepper(src, use_cache=False), start, 12, eos_id=EOS)
    assert torch.equal(a, b)
    ba = beam_search(model.stepper(src), start, beam_size=3, max_new_tokens=10, eos_id=EOS)
    bb = beam_search(model.stepper(src, use_cache=False), start, 3, 10, eos_id=EOS)
    assert ba.tokens == bb.tokens


@pytest.mark.slow
def test_learns_to_copy_with_teacher_forcing():
    torch.manual_seed(0)
    model = Transformer(
        vocab_size=12,
        d_model=64,
        num_heads=4,
        d_ff=128,
        num_layers=1,
        num_decoder_layers=1,
        dropout=0.0,
        max_len=16,
    )
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(0)
    start = time.perf_counter()
    for _ in range(250):
        src = torch.randint(3, 12, (32, 6), generator=gen)
        tgt_in = torch.cat([torch.full((32, 1), BOS), src], 1)
        tgt_out = torch.cat([src, torch.full((32, 1), EOS)], 1)
        loss = F.cross_entropy(model(src, tgt_in).logits.reshape(-1, 12), tgt_out.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    src = torch.randint(3, 12, (16, 6), generator=gen)
    out = greedy(model.stepper(src), torch.full((16,), BOS), 8, eos_id=EOS)
    assert (out[:, :6] == src).float().mean() > 0.9
    assert time.perf_counter() - start < 120

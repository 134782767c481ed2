"""Seq2SeqLSTM: every attention variant, teacher forcing semantics, masks, decoding."""

import pytest
import torch

from attnkit.models.rnn import Seq2SeqLSTM
from attnkit.nn.generation import beam_search, greedy

PAD, BOS, EOS = 0, 1, 2
VARIANTS = [None, "dot", "scaled_dot", "general", "concat", "location"]


def _model(attention, **kw):
    torch.manual_seed(0)
    return Seq2SeqLSTM(
        vocab_size=15,
        tgt_vocab_size=17,
        emb_dim=8,
        hidden_size=12,
        num_layers=2,
        dropout=0.0,
        attention=attention,
        max_len=10,
        **kw,
    ).eval()


@pytest.mark.parametrize("attention", VARIANTS)
@pytest.mark.parametrize("bidirectional", [True, False])
def test_shapes_and_source_padding(attention, bidirectional):
    model = _model(attention, bidirectional=bidirectional)
    src = torch.randint(3, 15, (2, 6))
    tgt = torch.randint(3, 17, (2, 4))
    out = model(src, tgt).logits
    assert out.shape == (2, 4, 17)
    padded = torch.cat([src, torch.zeros(2, 3, dtype=torch.long)], 1)
    torch.testing.assert_close(model(padded, tgt).logits, out, atol=1e-5, rtol=0)


@pytest.mark.parametrize("attention", ["general", "concat"])
def test_attention_weights_are_distributions_over_real_tokens(attention):
    model = _model(attention)
    src = torch.randint(3, 15, (2, 7))
    src[1, 4:] = PAD
    alpha = model(src, torch.randint(3, 17, (2, 5))).cross_attention  # alpha_t: always
    assert alpha.shape == (2, 5, 7)
    torch.testing.assert_close(alpha.sum(-1), torch.ones(2, 5))
    assert torch.all(alpha[1, :, 4:] == 0)


def test_teacher_forcing_ratio():
    model = _model("dot")
    src = torch.randint(3, 15, (3, 6))
    tgt = torch.randint(3, 17, (3, 5))
    other = tgt.clone()
    other[:, 1:] = torch.randint(3, 17, (3, 4))
    # teacher forcing: later gold inputs change later outputs
    assert not torch.allclose(model(src, tgt).logits[:, 1:], model(src, other).logits[:, 1:])
    # no teacher forcing: only the first input (BOS) matters, the model feeds itself
    torch.testing.assert_close(
        model(src, tgt, teacher_forcing_ratio=0.0).logits,
        model(src, other, teacher_forcing_ratio=0.0).logits,
    )


def test_greedy_decoding_matches_free_running_forward():
    model = _model("general")
    src = torch.randint(3, 15, (3, 6))
    start = torch.full((3,), BOS)
    tokens = greedy(model.stepper(src), start, 5)  # no EOS: exactly 5 steps
    free = model(src, torch.full((3, 5), BOS), teacher_forcing_ratio=0.0).logits.argmax(-1)
    assert torch.equal(tokens, free)
    # beam size 1 without length penalty is greedy that stops at EOS
    with_eos = greedy(model.stepper(src), start, 5, eos_id=EOS, pad_id=-1)
    beam = beam_search(
        model.stepper(src), start, beam_size=1, max_new_tokens=5, eos_id=EOS, length_penalty=0.0
    )
    for row, hyp in zip(with_eos.tolist(), beam.tokens, strict=True):
        assert hyp == (row[: row.index(EOS)] if EOS in row else row)


def test_bad_settings():
    with pytest.raises(ValueError, match="attention must be"):
        Seq2SeqLSTM(vocab_size=5, attention="cosine")
    plain = _model(None)(torch.randint(3, 15, (1, 3)), torch.randint(3, 17, (1, 2)))
    assert plain.cross_attention is None  # no attention: no weights

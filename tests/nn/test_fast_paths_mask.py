"""attnkit.nn.fast_paths.without_full_mask: a padding mask with no padding is dropped where
that changes nothing (the Encoder's output), kept where it would (a traced graph, the
explainer's capture, a mask of another type or device)."""

from __future__ import annotations

import warnings

import torch
from torch import nn

from attnkit.nn.capture import capture
from attnkit.nn.fast_paths import without_full_mask
from attnkit.nn.layers import BlockConfig, Encoder


def test_only_a_cpu_bool_mask_without_padding_is_dropped() -> None:
    full = torch.ones(2, 5, dtype=torch.bool)
    padded = full.clone()
    padded[1, 3:] = False
    assert without_full_mask(full) is None and without_full_mask(None) is None
    assert without_full_mask(padded) is padded
    ints = full.long()
    assert without_full_mask(ints) is ints  # (MultiHeadAttention refuses it, as before)


class _Masked(nn.Module):
    def __init__(self, enc: Encoder) -> None:
        super().__init__()
        self.enc = enc

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.enc(x, key_padding_mask=mask)


def test_the_encoder_computes_the_same_and_a_trace_keeps_the_mask() -> None:
    torch.manual_seed(0)
    enc = Encoder(BlockConfig(d_model=16, num_heads=2, d_ff=32, dropout=0.0), 2).eval()
    x = torch.randn(2, 5, 16)
    full = torch.ones(2, 5, dtype=torch.bool)
    padded = full.clone()
    padded[1, 3:] = False
    with torch.no_grad():
        torch.testing.assert_close(enc(x, key_padding_mask=full), enc(x), atol=1e-6, rtol=0)
        with capture() as rec:  # the explainer sees the mask it was given
            enc(x, key_padding_mask=full)
        assert [r["padding"] for r in rec.of("attention")] == [True, True]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (the tracer's notes on Python values)
            traced = torch.jit.trace(_Masked(enc), (x, full))
        # traced on a full mask, the graph still applies a padded one
        torch.testing.assert_close(traced(x, padded), enc(x, key_padding_mask=padded))

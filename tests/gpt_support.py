"""Test helper: a tiny random GPT whose biases and LayerNorms are moved away from their
0 / 1 initial values (so that a test comparing two paths sees every parameter act)."""

from __future__ import annotations

import torch

from attnkit.models.gpt import GPT, GPTConfig

V = 50  # its vocabulary


def tiny_gpt(**changes) -> GPT:
    """GPTConfig's fields in ``changes`` override the tiny sizes (``seed``: the init's)."""
    torch.manual_seed(changes.pop("seed", 0))
    sizes = dict(vocab_size=V, max_len=32, d_model=32, num_heads=4, d_ff=64, num_layers=2)
    model = GPT(GPTConfig(**{**sizes, "dropout": 0.0, **changes})).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or name.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.1)
    return model

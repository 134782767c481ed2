"""Dropout (Srivastava et al., 2014), with a cheaper random mask on the CPU.

    dropout(x)_i = x_i * m_i / (1 - p),   m_i ~ Bernoulli(1 - p), independently

On the CPU, PyTorch draws one random number per element (``bernoulli_``), and in profiles of
training steps that is the largest cost after the matrix products (issue 17: ~30% of a BERT
step). Here one 64-bit draw gives four 16-bit integers u, and an element is dropped when
u < round(p * 2^16): still an independent Bernoulli per element, with p rounded to a
multiple of 2^-16 (0.1 -> 0.100006; the scale uses that same p, so E[dropout(x)] = x). A
(32, 128, 1024) tensor: 14.3 ms forward + backward instead of 37.9 (one thread, quiet machine:
``python benchmarks/profile_ops.py dropout``). On other
devices ``F.dropout`` is already one fused kernel and is used as it is.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["Dropout", "dropout", "keep_mask"]

_LEVELS = 1 << 16  # p is rounded to a multiple of 1 / 65536


def keep_mask(shape: torch.Size | tuple[int, ...], p: float, device: torch.device) -> Tensor:
    """A bool tensor of ``shape``, each entry True with probability 1 - round(p * 2^16) / 2^16,
    independently (four entries per 64-bit random draw)."""
    n = math.prod(shape)
    words = torch.randint(-(2**63), 2**63 - 1, ((n + 3) // 4,), dtype=torch.int64, device=device)
    u = words.view(torch.int16)[:n].view(shape)  # uniform on [-32768, 32767]
    return u >= round(p * _LEVELS) - _LEVELS // 2


def dropout(x: Tensor, p: float, training: bool = True) -> Tensor:
    """``F.dropout(x, p, training)``; on the CPU with the cheaper mask of ``keep_mask``."""
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu" or not 0.0 < p < 1.0:
        return F.dropout(x, p, training)
    p_used = round(p * _LEVELS) / _LEVELS
    if p_used == 0.0:
        return x
    if p_used == 1.0:
        return F.dropout(x, p, training)
    scale = keep_mask(x.shape, p, x.device).to(x.dtype).mul_(1.0 / (1.0 - p_used))
    return x * scale


class Dropout(nn.Dropout):
    """``nn.Dropout`` (same argument, same repr, nothing saved) computed by ``dropout``."""

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p, self.training)

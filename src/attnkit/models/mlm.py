"""Masked-language-model pretraining of the classifier's encoder (BERT's MLM objective).

    ids (B, T) with ~15% of positions corrupted (80% [MASK] / 10% random / 10% kept)
        -> TransformerEncoderModel (the same body as TransformerClassifier)   (B, T, d_model)
        -> hidden states at the N masked positions only                       (N, d_model)
        -> Linear + GELU + LayerNorm (BERT's "transform")                     (N, d_model)
        -> x @ E^T + b, E = the token embedding matrix (tied, as in BERT)     (N, vocab)

Only the masked positions are projected onto the vocabulary, so the (B, T, vocab) logits
that dominate a naive implementation's cost are never built. The encoder's parameter names
match ``TransformerClassifier``'s, so a classifier starts from these weights with
``model.init_from: RUN`` (see ``attnkit.tasks.mlm.init_classifier``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnkit.models.classifier import TransformerEncoderModel

__all__ = ["TransformerMLM"]


class TransformerMLM(TransformerEncoderModel):
    """``TransformerEncoderModel`` + BERT's masked-LM head with the output tied to the
    input embedding. Same constructor arguments as the encoder."""

    def __init__(self, vocab_size: int, **encoder_kwargs) -> None:
        super().__init__(vocab_size, **encoder_kwargs)
        d = self.d_model
        self.mlm_dense = nn.Linear(d, d)
        self.mlm_norm = nn.LayerNorm(d)
        self.mlm_bias = nn.Parameter(torch.zeros(vocab_size))

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        positions: Tensor | None = None,
    ) -> Tensor:
        """input_ids (B, T); attention_mask (B, T), True = real token; positions (B, T) bool,
        the positions to predict (None: all). Returns logits (N, vocab) for the N selected
        positions in row-major order, or (B, T, vocab) when ``positions`` is None."""
        x, _, _ = self.encode(input_ids, attention_mask)  # (B, T, d_model)
        if positions is not None:
            x = x[positions]  # (N, d_model)
        h = self.mlm_norm(F.gelu(self.mlm_dense(x)))
        return F.linear(h, self.embed.weight, self.mlm_bias)  # (..., vocab)

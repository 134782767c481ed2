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

``ElectraPretrainer`` (``model.objective: electra``) trains the same encoder by ELECTRA's
replaced-token detection instead, with a small ``TransformerMLM`` as its generator.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnkit.models.classifier import TransformerEncoderModel

__all__ = ["ElectraPretrainer", "TransformerMLM"]


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


class ElectraPretrainer(TransformerEncoderModel):
    """ELECTRA's replaced-token detection (Clark et al. 2020) on a Transformer encoder.

        ids with ~15% of positions masked (B, T)
            -> generator: a small TransformerMLM (d_model / 4)  -> logits (N, vocab)
            -> sample a replacement for each masked position    (N,)      (no gradient)
        original ids with the N positions replaced (B, T)
            -> this encoder, the discriminator                  (B, T, d_model)
            -> Linear + GELU + Linear                           (B, T)   "replaced?" logits

    The discriminator learns from every token, not only from the 15% that masked-LM
    predicts, and never sees [MASK]; the paper found it learns more per unit of compute than
    a masked LM of the same size (over 16 CPU minutes on NSMC it did not:
    benchmarks/notes-sentiment.md). It keeps the parameter names
    ``embed.*``, ``pos.*``, ``encoder.*`` (what ``model.init_from`` copies into a
    classifier); the generator lives under ``generator.*`` and is discarded after
    pretraining. ``generator_d_model``: the generator's width (ELECTRA: 1/4 to 1/2 of the
    discriminator's); its heads are 64 wide and its d_ff is 4 x its width.
    """

    def __init__(self, vocab_size: int, generator_d_model: int | None = None, **encoder_kwargs):
        super().__init__(vocab_size, **encoder_kwargs)
        d = self.d_model
        g = generator_d_model or max(d // 4, 16)
        self.rtd_dense = nn.Linear(d, d)
        self.rtd_head = nn.Linear(d, 1)
        generator_kwargs = dict(encoder_kwargs, d_model=g, num_heads=max(g // 64, 1), d_ff=4 * g)
        self.generator = TransformerMLM(vocab_size, **generator_kwargs)

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        """input_ids (B, T) (original text with some tokens replaced); attention_mask (B, T),
        True = real token. Returns logits (B, T): > 0 means "this token was replaced"."""
        x, _, _ = self.encode(input_ids, attention_mask)  # (B, T, d_model)
        return self.rtd_head(F.gelu(self.rtd_dense(x))).squeeze(-1)  # (B, T)

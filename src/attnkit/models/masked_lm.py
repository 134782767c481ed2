"""Masked-language-model pretraining of the classifier's encoder (BERT's MLM objective).

    ids (B, T) with ~15% of positions corrupted (80% [MASK] / 10% random / 10% kept)
        -> TransformerEncoderModel (the same body as TransformerClassifier)   (B, T, d_model)
        -> hidden states at the N masked positions only                       (N, d_model)
        -> Linear + GELU + LayerNorm (BERT's "transform")                     (N, d_model)
        -> x @ E^T + b, E = the token embedding matrix (tied, as in BERT)     (N, vocab)

Only the masked positions are projected onto the vocabulary, so the (B, T, vocab) logits
that dominate a naive implementation's cost are never built. The encoder's parameter names
match ``TransformerClassifier``'s, so a classifier starts from these weights with
``model.init_from: RUN`` (``TransformerClassifier.load_pretrained``).

``ElectraPretrainer`` (``model.objective: electra``) trains the same encoder by ELECTRA's
replaced-token detection instead, with a small ``TransformerMLM`` as its generator.

Both return a ``MaskedLMOutput``: ``logits`` (the masked LM) or ``replaced_logits``
(ELECTRA's discriminator); the config's ``detects_replaced_tokens`` says which the model
trains.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnkit.core.config import check, positive, short_repr
from attnkit.models.base import ModelConfig, param
from attnkit.models.classifier import TransformerEncoderConfig, TransformerEncoderModel
from attnkit.models.outputs import MaskedLMOutput
from attnkit.nn.fast_paths import Linear, linear

__all__ = ["ElectraPretrainer", "MaskedLMConfig", "TransformerMLM"]

OBJECTIVES = ("mlm", "electra")


@dataclass
class MaskedLMConfig(TransformerEncoderConfig):
    """``arch: transformer`` for task mlm: the encoder plus a pretraining objective."""

    model_type: ClassVar[str] = "masked_lm"
    KEY_HINTS: ClassVar[dict[str, str]] = {
        "init_from": "model.init_from is for task classify",
        "pooling": "model.pooling is for task classify (pretraining predicts every position)",
    }

    arch: str = param("transformer", "transformer")
    objective: str = param("mlm", "mlm (BERT's masked LM) | electra (replaced-token detection)")
    generator_d_model: int | None = param(None, "electra: the generator's width (d_model // 4)")
    rtd_weight: float = param(50.0, "electra: weight of the discriminator's loss (lambda)")

    OUTPUT: ClassVar[type | None] = MaskedLMOutput

    def validate(self) -> None:
        super().validate()
        g = self.generator_d_model
        check(
            (
                self.objective in OBJECTIVES,
                f"model.objective must be one of {', '.join(OBJECTIVES)}, "
                f"got {short_repr(self.objective)}",
            ),
            positive("model.rtd_weight", self.rtd_weight),
            positive("model.generator_d_model", g, optional=True),
        )
        check(  # (a positive width now)
            (
                g is None or g % max(g // 64, 1) == 0,
                f"model.generator_d_model must be divisible by its heads (width // 64), got {g}",
            ),
        )

    @property
    def detects_replaced_tokens(self) -> bool:
        """True for ELECTRA: the model's ``forward`` gives ``replaced_logits`` (B, T) and its
        ``generator`` the masked-LM ``logits``; False: ``forward`` gives the ``logits``."""
        return self.objective == "electra"

    def describe(self) -> str:
        head = (
            "ELECTRA generator + replaced-token detection head"
            if self.detects_replaced_tokens
            else "masked-LM head"
        )
        return f"transformer encoder + {head}"

    def build(self) -> TransformerMLM | ElectraPretrainer:
        """A masked LM, or ELECTRA's discriminator with its generator."""
        if self.detects_replaced_tokens:
            return ElectraPretrainer(self)
        return TransformerMLM(self)


class TransformerMLM(TransformerEncoderModel):
    """``TransformerEncoderModel`` + BERT's masked-LM head with the output tied to the
    input embedding."""

    config_class: ClassVar[type[ModelConfig]] = MaskedLMConfig
    config: MaskedLMConfig

    def __init__(self, config: MaskedLMConfig | None = None, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        vocab_size = self.config.vocab_size
        d = self.d_model
        self.mlm_dense = Linear(d, d)
        self.mlm_norm = nn.LayerNorm(d)
        self.mlm_bias = nn.Parameter(torch.zeros(vocab_size))

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        positions: Tensor | None = None,
    ) -> MaskedLMOutput:
        """input_ids (B, T); attention_mask (B, T), True = real token; positions (B, T) bool,
        the positions to predict (None: all). Returns ``MaskedLMOutput`` with logits
        (N, vocab) for the N selected positions in row-major order, or (B, T, vocab) when
        ``positions`` is None."""
        x, _ = self.encode(input_ids, attention_mask)  # (B, T, d_model)
        if positions is not None:
            x = x[positions]  # (N, d_model)
        h = self.mlm_norm(F.gelu(self.mlm_dense(x)))
        return MaskedLMOutput(
            linear(h, self.embed.weight, self.mlm_bias, owner=self)
        )  # (..., vocab)

    def masked_lm(self) -> TransformerMLM:
        """The model that fills in [MASK] (itself)."""
        return self


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

    config_class: ClassVar[type[ModelConfig]] = MaskedLMConfig
    config: MaskedLMConfig

    def __init__(self, config: MaskedLMConfig | None = None, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        d = self.d_model
        g = self.config.generator_d_model or max(d // 4, 16)
        self.rtd_dense = Linear(d, d)
        self.rtd_head = Linear(d, 1)
        self.generator = TransformerMLM(
            self.config.replace(objective="mlm", d_model=g, num_heads=max(g // 64, 1), d_ff=4 * g)
        )

    def masked_lm(self) -> TransformerMLM:
        """The model that fills in [MASK]: the generator (a small masked LM)."""
        return self.generator

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> MaskedLMOutput:
        """input_ids (B, T) (original text with some tokens replaced); attention_mask (B, T),
        True = real token. Returns ``MaskedLMOutput`` with replaced_logits (B, T): > 0 means
        "this token was replaced"."""
        x, _ = self.encode(input_ids, attention_mask)  # (B, T, d_model)
        scores = self.rtd_head(F.gelu(self.rtd_dense(x))).squeeze(-1)  # (B, T)
        return MaskedLMOutput(replaced_logits=scores)

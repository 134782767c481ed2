"""A bag of token n-grams and a linear layer: NBSVM (Wang & Manning 2012) with fastText's
hashing trick (Joulin et al. 2016) -- the strong pre-neural baseline for sentiment.

    ids (B, T) -> features: every token (id < vocab_size) and every n-gram of 2..ngram_max
                  consecutive tokens, hashed into num_buckets ids after the vocabulary;
                  each feature counted once per text (binarised)          (B, F)
               -> logits_c = sum_f W[f, c] * r[f, c] + b_c                (B, num_classes)

r is the Naive Bayes log-count ratio, fixed before training from the training set
(``fit_nb``); for class c against the rest, with n[f, c] = number of class-c texts that
contain feature f and alpha = 1:

    p_c = alpha + n[:, c]          q_c = alpha + sum_{c' != c} n[:, c']
    r[:, c] = log(p_c / |p_c|_1) - log(q_c / |q_c|_1)

Scaling each feature by r lets words and phrases that Naive Bayes finds telling move the
logit faster; with ``nb_weighting=False`` r stays 1 and the model is plain logistic
regression on binary n-gram features. The model sees token ids only, so it reads the
same tokenizer output as the Transformer and the RNNs; a small subword vocabulary makes
its n-grams close to character n-grams (what works for Korean).

Same forward signature and output as the other classifiers:
    model(input_ids (B, T) long, attention_mask (B, T) bool | None)
        -> ClassifierOutput(logits (B, num_classes))
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from attnkit.core.config import check, positive
from attnkit.models.base import AttnkitModel, ClassifierOutput, ModelConfig, param
from attnkit.nn.attention import padding_mask

__all__ = ["NgramClassifier", "NgramConfig"]

# Rolling polynomial hash mod a Mersenne prime: h < 2**31 and P < 2**20 keep every product
# inside int64, so the hash is exact (no overflow) and identical on every device.
_PRIME_MOD = 2**31 - 1
_BASE = 1_000_003


@dataclass
class NgramConfig(ModelConfig):
    """``arch: ngram`` for task classify: NBSVM over hashed token n-grams."""

    model_type: ClassVar[str] = "classifier"
    KEY_HINTS: ClassVar[dict[str, str]] = {
        "init_from": "model.init_from does not apply to arch ngram (no embedding)",
        "objective": "model.objective is for task mlm (pretraining)",
    }

    OUTPUT: ClassVar[type | None] = ClassifierOutput

    arch: str = param("ngram", "ngram")
    num_classes: int = param(2, "output classes (the labels in the training data)", True)
    ngram_max: int = param(2, "longest token n-gram (1: a bag of tokens)")
    num_buckets: int = param(4194304, "hash buckets for the n-grams of 2+ tokens (2**22)")
    nb_weighting: bool = param(True, "Naive Bayes feature scaling (NBSVM); false: logistic")

    def validate(self) -> None:
        super().validate()
        check(
            positive("model.ngram_max", self.ngram_max),
            positive("model.num_buckets", self.num_buckets),
            positive("model.num_classes", self.num_classes),
        )

    @property
    def hidden_width(self) -> int:
        """No d_model here; the Noam schedule keeps the width it used for this model before
        per-model configs (the flat config's default d_model, 256)."""
        return 256

    def build(self) -> NgramClassifier:
        return NgramClassifier(self)


class NgramClassifier(AttnkitModel):
    """Linear classifier over binarised, hashed token n-grams (NBSVM / fastText style).

    ngram_max: the longest n-gram (1: bag of tokens). num_buckets: hash table size for the
    n-grams of length >= 2 (collisions share a weight). nb_weighting: scale features by
    the Naive Bayes ratio r (set by ``fit_nb``); False gives logistic regression.
    Padding is expected on the right (the data pipeline's layout).
    """

    config_class: ClassVar[type[ModelConfig]] = NgramConfig
    config: NgramConfig
    explains_by_contributions = True

    def __init__(self, config: NgramConfig | None = None, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        c = self.config
        self.vocab_size, self.num_classes = c.vocab_size, c.num_classes
        self.ngram_max, self.num_buckets = c.ngram_max, c.num_buckets
        self.nb_weighting, self.pad_id = c.nb_weighting, c.pad_id
        num_features = c.vocab_size + (c.num_buckets if c.ngram_max > 1 else 0)
        self.weight = nn.Embedding(num_features, c.num_classes)  # W (num_features, C)
        nn.init.zeros_(self.weight.weight)
        self.bias = nn.Parameter(torch.zeros(c.num_classes))
        # r (num_features, C): saved with the weights, so a loaded model needs no data
        self.nb_ratio: Tensor
        self.register_buffer("nb_ratio", torch.ones(num_features, c.num_classes))

    @property
    def fits_from_data(self) -> bool:  # type: ignore[override]
        """The Naive Bayes ratios must be counted before training (``fit_from_data``)."""
        return self.nb_weighting

    def fit_from_data(self, batches: Iterable[tuple[Tensor, Tensor, Tensor]]) -> None:
        """The capability tasks call before training: ``fit_nb``."""
        self.fit_nb(batches)

    @property
    def num_features(self) -> int:
        return self.weight.num_embeddings

    def ngram_ids(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> list[Tensor]:
        """Feature id of the n-gram starting at each position, one tensor per n = 1..ngram_max:
        (B, T - n + 1) long, -1 where the n-gram would reach into the padding.

        n = 1: the token id; n >= 2: vocab_size + hash(tokens) mod num_buckets."""
        mask = (
            padding_mask(input_ids, self.pad_id)
            if attention_mask is None
            else attention_mask.bool()
        )
        out = [input_ids.masked_fill(~mask, -1)]
        t = input_ids.size(1)
        for n in range(2, min(self.ngram_max, t) + 1):
            h = torch.full_like(input_ids[:, : t - n + 1], n)  # salt: the order n
            for k in range(n):  # h = (h * P + token + 1) mod M over the n tokens
                h = (h * _BASE + input_ids[:, k : t - n + 1 + k] + 1) % _PRIME_MOD
            ids = self.vocab_size + h % self.num_buckets  # (B, T - n + 1)
            out.append(ids.masked_fill(~mask[:, n - 1 :], -1))  # its last token must be real
        return out

    def features(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        """The feature ids of each text, sorted, each once; -1 fills the rest of a row.

        input_ids (B, T) long -> (B, F) long with F = sum over n of (T - n + 1)."""
        flat, _ = torch.cat(self.ngram_ids(input_ids, attention_mask), dim=1).sort(dim=1)
        repeated = torch.zeros_like(flat, dtype=torch.bool)
        repeated[:, 1:] = flat[:, 1:] == flat[:, :-1]
        return flat.masked_fill(repeated, -1)  # binarised: each feature once per text

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> ClassifierOutput:
        """input_ids (B, T) long; attention_mask (B, T), True = real token. Returns
        ``ClassifierOutput`` with logits (B, num_classes) and no attention weights."""
        feats = self.features(input_ids, attention_mask)  # (B, F)
        present = (feats >= 0).unsqueeze(-1)  # (B, F, 1)
        idx = feats.clamp(min=0)
        scaled = self.weight(idx) * self.nb_ratio[idx]  # (B, F, C): W[f] * r[f]
        return ClassifierOutput((scaled * present).sum(dim=1) + self.bias)  # (B, C)

    @torch.no_grad()
    def contributions(self, input_ids: Tensor) -> list[tuple[int, int, Tensor]]:
        """Why one text (T,) got its logits, exactly (the model is linear): one
        ``(start, n, W[f] * r[f] (num_classes,))`` per distinct feature f of the text, at
        its first occurrence. Summed over the list, plus the bias, they give the logits."""
        seen: set[int] = set()
        out = []
        for n, ids in enumerate(self.ngram_ids(input_ids[None]), start=1):
            for start, f in enumerate(ids[0].tolist()):
                if f >= 0 and f not in seen:
                    seen.add(f)
                    out.append((start, n, self.weight.weight[f] * self.nb_ratio[f]))
        return out

    @torch.no_grad()
    def fit_nb(self, batches: Iterable[tuple[Tensor, Tensor, Tensor]], alpha: float = 1.0) -> None:
        """Set the Naive Bayes ratio r from training batches of (input_ids (B, T), attention
        mask (B, T), labels (B,)); a no-op with ``nb_weighting=False``."""
        if not self.nb_weighting:
            return
        counts = torch.zeros(self.num_features + 1, self.num_classes)  # last row: the -1s
        for input_ids, mask, labels in batches:
            feats = self.features(input_ids, mask)  # (B, F)
            rows = feats.masked_fill(feats < 0, self.num_features).flatten()
            cls = labels[:, None].expand_as(feats).flatten()
            counts.index_put_((rows, cls), torch.ones(len(rows)), accumulate=True)
        n = counts[:-1]  # (num_features, C): texts of class c that contain f
        p = alpha + n
        q = alpha + (n.sum(dim=1, keepdim=True) - n)  # the other classes
        ratio = torch.log(p / p.sum(dim=0)) - torch.log(q / q.sum(dim=0))
        self.nb_ratio.copy_(ratio.to(self.nb_ratio.dtype))

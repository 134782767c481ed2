"""BERT's task heads, as in Hugging Face (``BertForMaskedLM``, ``BertForPreTraining``,
``BertForSequenceClassification``, ``BertForTokenClassification``,
``BertForQuestionAnswering``), each a ``BertModel`` under ``bert`` plus its head.

    BertForMaskedLM               last_hidden_state -> dense, act, LayerNorm -> h E^T + b
                                  (E the word embedding, tied)            (B, T, V) | (N, V)
    BertForPreTraining            the same + Linear(d, 2) on pooler_output (B, 2) "is next"
    BertForSequenceClassification Dropout + Linear(d, num_classes) on pooler_output
    BertForTokenClassification    Dropout + Linear(d, num_classes) at every position
    BertForQuestionAnswering      Linear(d, 2) at every position -> start, end (B, T) each

One ``BertConfig`` describes them all; its ``arch`` (bert-mlm, bert-pretraining,
bert-classifier, bert-tagger, bert-qa) picks the head and ``num_classes`` sizes the
classifiers. ``save_pretrained`` writes a Hugging Face directory the matching
``transformers`` class reads (``attnkit.interop.hf_bert`` knows the names).
"""

from __future__ import annotations

from functools import partial
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnkit.models.bert import BertConfig, BertModel, BertOutput, HfBertFiles
from attnkit.nn.dropout import Dropout
from attnkit.nn.layers import ScalarMix

__all__ = [
    "BertForMaskedLM",
    "BertForPreTraining",
    "BertForQuestionAnswering",
    "BertForSequenceClassification",
    "BertForTokenClassification",
    "BertLMHead",
]

_ACT = {"gelu": F.gelu, "relu": F.relu, "gelu_tanh": partial(F.gelu, approximate="tanh")}
_LM_KEYS = {
    "lm_head.dense.weight": "cls.predictions.transform.dense.weight",
    "lm_head.dense.bias": "cls.predictions.transform.dense.bias",
    "lm_head.norm.weight": "cls.predictions.transform.LayerNorm.weight",
    "lm_head.norm.bias": "cls.predictions.transform.LayerNorm.bias",
    "lm_head.bias": "cls.predictions.bias",
}


def _real(input_ids: Tensor, attention_mask: Tensor | None) -> Tensor:
    """(B, T) float: 1 at real tokens (every token when there is no mask)."""
    if attention_mask is None:
        return torch.ones_like(input_ids, dtype=torch.float)
    return attention_mask.float()


class BertLMHead(nn.Module):
    """BERT's masked-LM head: LayerNorm(act(W h + b)) E^T + bias, with E the (tied) word
    embedding matrix passed in (B, T, d) | (N, d) -> (..., vocab)."""

    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(c.d_model, c.d_model)
        self.act = _ACT[c.activation]
        self.norm = nn.LayerNorm(c.d_model, eps=c.layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(c.vocab_size))

    def forward(self, x: Tensor, embedding: Tensor) -> Tensor:
        return F.linear(self.norm(self.act(self.dense(x))), embedding, self.bias)


class _BertWithHead(HfBertFiles):
    """A ``BertModel`` (``self.bert``) and a head; the config's ``arch`` is the head's."""

    needs_cls = True
    takes_token_types = True
    exports_onnx = True

    def __init__(self, config: BertConfig | None = None, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        if self.config.arch != self.ARCH:  # BertForMaskedLM(BertConfig(...)) is a bert-mlm
            self.config = self.config.replace(arch=self.ARCH)
        c = self.config
        self.bert = BertModel(
            c.replace(arch="bert", freeze_encoder=False), add_pooling_layer=self.HAS_POOLER
        )

    def _init_head(self) -> None:
        """BERT's initialisation for every module but the (already initialised) encoder;
        in feature-based mode (``freeze_encoder``) the encoder is frozen and a ``ScalarMix``
        of its num_layers + 1 outputs is what the head reads."""
        if self.config.freeze_encoder:
            self.mix = ScalarMix(self.config.num_layers + 1)
            self.bert.requires_grad_(False)
            self.bert.eval()
        for name, module in self.named_children():
            if name not in ("bert", "mix"):
                module.apply(self.bert._init_weights)

    def train(self, mode: bool = True) -> _BertWithHead:
        """As ``nn.Module.train``, but a frozen encoder stays in eval mode (no dropout)."""
        super().train(mode)
        if self.config.freeze_encoder:
            self.bert.eval()
        return self

    def features(
        self, input_ids: Tensor, attention_mask: Tensor | None, token_type_ids: Tensor | None
    ) -> BertOutput:
        """The encoder's output as the head reads it: fine-tuning, ``BertModel``'s own;
        feature-based, the frozen encoder run without gradients and ``last_hidden_state``
        replaced by the learned mix gamma * sum_j softmax(s)_j h_j of its layers."""
        if not self.config.freeze_encoder:
            return self.bert(input_ids, attention_mask, token_type_ids)
        with torch.no_grad():
            out = self.bert(input_ids, attention_mask, token_type_ids, output_hidden_states=True)
        out.last_hidden_state = self.mix(out.hidden_states)  # (B, T, d_model)
        return out

    def decoder_weight(self) -> Tensor:
        """The output projection of the masked-LM head: the word embedding itself."""
        return self.bert.embeddings.word.weight


class BertForMaskedLM(_BertWithHead):
    """BERT + the masked-LM head (decoder tied to the word embedding)."""

    ARCH: ClassVar[str] = "bert-mlm"
    HAS_POOLER: ClassVar[bool] = False
    HEAD_KEYS: ClassVar[dict[str, str]] = dict(_LM_KEYS)

    def __init__(self, config: BertConfig | None = None, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self.lm_head = BertLMHead(self.config)
        self._init_head()

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        positions: Tensor | None = None,
    ) -> Tensor:
        """input_ids, attention_mask, token_type_ids (B, T) as ``BertModel``'s; positions
        (B, T) bool: the positions to predict (None: all). Returns logits (B, T, vocab), or
        (N, vocab) for the N chosen positions in row-major order (only those projected)."""
        x = self.bert(input_ids, attention_mask, token_type_ids).last_hidden_state
        if positions is not None:
            x = x[positions]  # (N, d_model)
        return self.lm_head(x, self.decoder_weight())


class BertForPreTraining(_BertWithHead):
    """BERT + the masked-LM head + next-sentence prediction on the pooled [CLS] vector."""

    ARCH: ClassVar[str] = "bert-pretraining"
    HEAD_KEYS: ClassVar[dict[str, str]] = {
        **_LM_KEYS,
        "nsp_head.weight": "cls.seq_relationship.weight",
        "nsp_head.bias": "cls.seq_relationship.bias",
    }

    def __init__(self, config: BertConfig | None = None, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self.lm_head = BertLMHead(self.config)
        self.nsp_head = nn.Linear(self.config.d_model, 2)
        self._init_head()

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        positions: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """As ``BertForMaskedLM.forward``; returns (masked-LM logits (B, T, vocab) or
        (N, vocab), next-sentence logits (B, 2): index 0 = "B follows A")."""
        out = self.bert(input_ids, attention_mask, token_type_ids)
        x = out.last_hidden_state if positions is None else out.last_hidden_state[positions]
        return self.lm_head(x, self.decoder_weight()), self.nsp_head(out.pooler_output)


class BertForSequenceClassification(_BertWithHead):
    """BERT + Dropout + Linear(d_model, num_classes) on the pooled [CLS] vector."""

    ARCH: ClassVar[str] = "bert-classifier"
    returns_attention = True  # (through its encoder: self.bert(..., need_weights=True))
    HEAD_KEYS: ClassVar[dict[str, str]] = {
        "classifier.weight": "classifier.weight",
        "classifier.bias": "classifier.bias",
    }

    def __init__(self, config: BertConfig | None = None, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self.dropout = Dropout(self.config.dropout)
        self.classifier = nn.Linear(self.config.d_model, self.config.num_classes)
        self._init_head()

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
    ) -> Tensor:
        """Returns logits (B, num_classes) from the pooled vector ``config.pooling_used``:
        pooler (BERT's tanh layer on [CLS], Hugging Face's), mean (over real tokens of the
        states the head reads: the last layer, or the layer mix when ``freeze_encoder``) or
        cls (those states at [CLS])."""
        out = self.features(input_ids, attention_mask, token_type_ids)
        pooling, h = self.config.pooling_used, out.last_hidden_state  # (B, T, d)
        if pooling == "pooler":
            pooled = out.pooler_output
        elif pooling == "cls":
            pooled = h[:, 0]
        else:
            real = _real(input_ids, attention_mask).to(h.dtype)  # (B, T)
            pooled = (h * real.unsqueeze(-1)).sum(1) / real.sum(1, keepdim=True).clamp_min(1)
        return self.classifier(self.dropout(pooled))


class BertForTokenClassification(BertForSequenceClassification):
    """BERT + Dropout + Linear(d_model, num_classes) at every position (tagging): the
    sequence classifier's head, applied to each position instead of the pooled [CLS]."""

    ARCH: ClassVar[str] = "bert-tagger"
    HAS_POOLER: ClassVar[bool] = False

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
    ) -> Tensor:
        """Returns logits (B, T, num_classes)."""
        x = self.features(input_ids, attention_mask, token_type_ids).last_hidden_state
        return self.classifier(self.dropout(x))


class BertForQuestionAnswering(_BertWithHead):
    """BERT + Linear(d_model, 2) at every position: span start and end scores."""

    ARCH: ClassVar[str] = "bert-qa"
    HAS_POOLER: ClassVar[bool] = False
    HEAD_KEYS: ClassVar[dict[str, str]] = {
        "qa_outputs.weight": "qa_outputs.weight",
        "qa_outputs.bias": "qa_outputs.bias",
    }

    def __init__(self, config: BertConfig | None = None, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self.qa_outputs = nn.Linear(self.config.d_model, 2)
        self._init_head()

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Returns (start_logits, end_logits), each (B, T)."""
        x = self.features(input_ids, attention_mask, token_type_ids).last_hidden_state
        start, end = self.qa_outputs(x).unbind(-1)
        return start, end

"""Fine-tuning GPT for classification (Radford et al. 2018, sec. 3.2 and figure 1): the
decoder of ``attnkit.models.gpt`` with a linear head on one vector per text
(``model.arch: gpt-classifier``, task classify).

    ids (B, T), right-padded -> GPT: embeddings, num_layers causal pre-norm blocks, final
                                LayerNorm (``GPT.hidden_states``)          (B, T, d_model)
       -> pooling: last (the vector at each row's last real token) |
                   mean (masked mean over the real tokens)                (B, d_model)
       -> Dropout -> Linear                                               (B, num_classes)

The paper reads the last token: in a causal model it is the only position that has seen the
whole text (``last``, the default). Position t never attends to a later one, so with right
padding the real tokens' vectors, hence both poolings, are exactly those of the text alone:
padding never changes a prediction (``tests/tasks/test_classify_gpt.py``).

``model.init_from`` names a task-lm run (``arch: gpt``): the classifier takes its sizes,
tokenizer and every weight of its GPT (``GPTClassifierConfig.adopt`` /
``GPTClassifier.load_pretrained``); only the head is new, and everything is then trained on
the labels. The classifier reads text as the language model did: an lm run trained on
reviews packed as ``[EOS] review [EOS] review ...`` saw every review after an [EOS], so
``start_id`` is that [EOS] and the data puts it before every text (``prefix_ids``, counted
in ``data.max_len``); a model of one continuous text (Tiny Shakespeare, a file) reads the
text bare. The GPT inside keeps its LM head (tied to the token embedding: no extra weights;
an untied one is carried along frozen and unused), so ``model.gpt`` is the lm run's model,
tensor for tensor.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from attnkit.core.checkpoint import load_model_weights
from attnkit.core.config import ConfigError, check, positive, short_repr
from attnkit.data.tokenization import Tokenizer
from attnkit.models.base import (
    AttnkitModel,
    ClassifierOutput,
    Log,
    ModelConfig,
    PretrainedSource,
    param,
)
from attnkit.models.classifier import _real_token_mask, masked_mean
from attnkit.models.gpt import GPT, GPTConfig
from attnkit.nn.dropout import Dropout
from attnkit.nn.fast_paths import Linear

__all__ = ["GPTClassifier", "GPTClassifierConfig", "last_token"]

# what a task-lm run reads its data as, preferred first (``attnkit.tasks.lm.READS``): one
# continuous text, or documents (reviews packed as [EOS] review [EOS] ...)
LM_READS = ("text", "documents")


@dataclass
class GPTClassifierConfig(GPTConfig):
    """``arch: gpt-classifier`` for task classify: a GPT (every ``arch: gpt`` key) with a
    pooled linear head."""

    model_type: ClassVar[str] = "classifier"
    OUTPUT: ClassVar[type | None] = ClassifierOutput
    # what init_from's lm run decides: its GPT's sizes and ids (the positions included)
    PRETRAINED_KEYS: ClassVar[tuple[str, ...]] = (
        "vocab_size",
        "pad_id",
        "max_len",
        "eos_id",
        "d_model",
        "num_heads",
        "d_ff",
        "num_layers",
        "activation",
        "layer_norm_eps",
        "tie_embeddings",
        "preset",
    )
    POOLINGS: ClassVar[tuple[str, ...]] = ("last", "mean")

    arch: str = param("gpt-classifier", "gpt-classifier")
    eos_id: int | None = param(
        None, "the language model's end-of-text id (from model.init_from; unused here)", True
    )
    num_classes: int = param(2, "output classes (the labels in the training data)", True)
    start_id: int | None = param(
        None,
        "id the data puts before every text: [EOS] when the init_from lm run read reviews "
        "([EOS] review [EOS] ...); None: the text alone",
        True,
    )
    pooling: str = param(
        "last", "last (the last real token's vector, the GPT paper's) | mean (over real tokens)"
    )
    classifier_dropout: float | None = param(
        None, "dropout before the linear head (None: model.dropout)"
    )
    init_from: str | None = param(
        None,
        "a task-lm run (arch gpt) whose weights, sizes and tokenizer the classifier starts "
        "from; None: a GPT of this section's sizes, trained from scratch",
    )

    def validate(self) -> None:
        super().validate()
        check(
            positive("model.num_classes", self.num_classes),
            (
                self.pooling in self.POOLINGS,
                f"model.pooling must be one of {', '.join(self.POOLINGS)} for arch "
                f"gpt-classifier, got {short_repr(self.pooling)}",
            ),
            (
                self.classifier_dropout is None or 0.0 <= self.classifier_dropout < 1.0,
                f"model.classifier_dropout must be in [0, 1), got {self.classifier_dropout!r}",
            ),
            (
                self.vocab_size == 0
                or self.start_id is None
                or 0 <= self.start_id < self.vocab_size,
                f"model.start_id must be null or in [0, vocab_size), got "
                f"{short_repr(self.start_id)}",
            ),
        )

    @property
    def prefix_ids(self) -> tuple[int, ...]:
        return () if self.start_id is None else (self.start_id,)

    def lm_config(self) -> GPTConfig:
        """The config of the GPT inside (``arch: gpt``, the shared keys' values)."""
        shared = {f.name for f in dataclasses.fields(GPTConfig)} - {"arch"}
        return GPTConfig(**{name: getattr(self, name) for name in shared})

    def describe(self) -> str:
        pooling = "last-token" if self.pooling == "last" else "mean"
        return (
            f"GPT classifier ({self.num_layers} layers, d_model {self.d_model}, context "
            f"{self.max_len}), {pooling} pooling"
        )

    # (every GPT key, hence a GPTConfig, but it builds the classifier, which holds a GPT)
    def build(self) -> GPTClassifier:  # type: ignore[override]
        return GPTClassifier(self)

    # ------------------------------------------------------------------ model.init_from
    def check_source(self, source: PretrainedSource) -> None:
        """A finished run of a GPT (task lm)."""
        source.require_model(
            GPTConfig.model_type,
            "arch gpt-classifier starts from a task lm run with a GPT (e.g. runs/nsmc-gpt)",
        )

    def adopt(
        self, source: PretrainedSource, max_len: int, log: Log
    ) -> tuple[GPTClassifierConfig, Tokenizer]:
        """The lm run's GPT sizes and ids (``PRETRAINED_KEYS``, positions included), the
        ``start_id`` it read every text after, and its tokenizer (the classifier reads text
        exactly as the language model did)."""
        self.check_source(source)
        lm = source.config
        tokenizer = source.tokenizer()
        source.check_vocabulary(tokenizer)
        if max_len > lm.max_len:
            raise ConfigError(
                f"data.max_len={max_len} exceeds the {lm.max_len} positions of the GPT "
                f"in {source.path}; lower data.max_len"
            )
        # what the lm run read its data as (the first of LM_READS its dataset offers; the
        # task that opened the source looked that up in the catalogue)
        read_as = next((kind for kind in LM_READS if kind in source.data_kinds), None)
        documents = read_as == "documents"
        start = tokenizer.token_to_id("[EOS]") if documents else None
        changed = source.changed_keys(self, {k: k for k in self.PRETRAINED_KEYS})
        sizes = ("d_model", "num_heads", "d_ff", "num_layers", "max_len", "vocab_size")
        listed = ", ".join(f"{k}={getattr(lm, k)}" for k in sizes)
        read = "[EOS] text (as it read its reviews)" if start is not None else "the text alone"
        log(
            f"model.init_from {source.path}: its GPT ({listed}) and tokenizer; texts read as {read}"
        )
        return self.replace(**changed, start_id=start), tokenizer

    def data_sizes(self, tokenizer: Tokenizer, max_len: int) -> dict[str, Any]:
        """From an lm run: its vocabulary, ids and positions (``adopt``), nothing else."""
        return {} if self.init_from else super().data_sizes(tokenizer, max_len)


def last_token(x: Tensor, mask: Tensor) -> Tensor:
    """x (B, T, D) at each row's last real token (mask (B, T) True = real) -> (B, D).
    Any padding side; a row without a real token gives its position 0."""
    t = mask.size(1)
    index = (torch.arange(t, device=mask.device) * mask.long()).argmax(dim=1)  # (B,)
    return x[torch.arange(x.size(0), device=x.device), index]


class GPTClassifier(AttnkitModel):
    """``GPT`` (``self.gpt``) + pooling + Dropout + Linear (module docstring).

    model(input_ids (B, T), attention_mask (B, T) | None)
        -> ClassifierOutput(logits (B, num_classes))
    model.representation(input_ids, attention_mask) -> the pooled vectors (B, d_model)
    """

    config_class: ClassVar[type[ModelConfig]] = GPTClassifierConfig
    config: GPTClassifierConfig
    returns_attention = True
    export_formats = ("int8", "onnx")

    def __init__(self, config: GPTClassifierConfig | None = None, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        c = self.config
        self.pad_id, self.num_classes, self.pooling = c.pad_id, c.num_classes, c.pooling
        self.gpt = GPT(c.lm_config())
        if not c.tie_embeddings:  # an untied LM head is carried along, never trained
            self.gpt.lm_head.weight.requires_grad_(False)
        self.head_dropout = Dropout(c.dropout if c.classifier_dropout is None
                                       else c.classifier_dropout)  # fmt: skip
        self.head = Linear(c.d_model, c.num_classes)
        nn.init.normal_(self.head.weight, 0.0, c.init_std)  # (GPT-2's initialisation)
        nn.init.zeros_(self.head.bias)

    def representation(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        """The vector the head reads (B, d_model): GPT's final hidden state at the last real
        token (``pooling: last``) or its mean over the real tokens (``mean``)."""
        mask = _real_token_mask(input_ids, attention_mask, self.pad_id)  # (B, T)
        h = self.gpt.hidden_states(input_ids, mask)  # (B, T, d_model)
        return last_token(h, mask) if self.pooling == "last" else masked_mean(h, mask)

    def load_pretrained(self, source: PretrainedSource, log: Log) -> int:
        """Copy every weight of a finished lm run's GPT into ``self.gpt`` (the head stays
        new); returns the number of tensors copied."""
        self.config.check_source(source)
        load_model_weights(self.gpt, source.weights_path)
        copied = len(self.gpt.state_dict())
        log(f"initialised the GPT from {source.given} ({copied} tensors); new: the "
            "classification head")  # fmt: skip
        return copied

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> ClassifierOutput:
        """input_ids (B, T) long; attention_mask (B, T), True = real token (None:
        ``input_ids != pad_id``). Returns ``ClassifierOutput``: logits (B, num_classes)."""
        pooled = self.representation(input_ids, attention_mask)  # (B, d_model)
        return ClassifierOutput(self.head(self.head_dropout(pooled)))

"""The feature-based use of ELMo in the sentiment classifier (``model.arch: elmo``, task
classify): a frozen biLM (a task-bilm run, ``model.init_from``), its layers mixed by a
learned ``ScalarMix``, and a small task model trained on top.

    ids (B, T) -> [BOS] ids [EOS] -> frozen BiLM -> layers h_{k,0..L}          (B, T+2, 2H)
               -> ELMo_k = gamma * sum_j softmax(s)_j h_{k,j}, boundaries dropped (B, T, 2H)
               -> [x_k; ELMo_k] (x_k: a trainable token embedding, token_dim > 0) -> Dropout
               -> task model: 1-layer BiLSTM (encoder: lstm) or nothing (encoder: none)
               -> masked mean | max over real tokens -> Dropout -> Linear    (B, num_classes)

The task model is the paper's recipe for its classifiers (Peters et al. 2018, sec. 3.3):
concatenate the ELMo vector with the context-independent token vector x_k and feed the
task's own RNN. With ``token_dim`` = an LSTM baseline's ``d_model`` and ``task_hidden_size``
= its ``hidden_size``, the model is exactly that baseline (``arch: lstm``, 1 bidirectional
layer, same pooling and dropout) plus the ELMo features, so the two compare like with like
(configs/nsmc-elmo.yaml vs configs/nsmc-elmo-baseline.yaml). ``encoder: none`` pools the
ELMo vectors directly (a linear probe of the representation).

Only s, gamma and the task model train: the biLM runs in eval mode without gradients. Its
weights are part of this model's state (a classify run is self-contained) and come from the
bilm run when training starts (``ELMoClassifier.load_pretrained``). The biLM read
``[BOS] text [EOS]`` when it was trained; the classifier's data is the bare text, so the
boundaries are added here (``bos_id`` / ``eos_id``, taken from the biLM's tokenizer) and
their vectors dropped, as ELMo does with <S> and </S>.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

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
from attnkit.models.classifier import _real_token_mask, masked_max, masked_mean
from attnkit.models.elmo import BiLM, ELMoConfig, ELMoEmbedder, boundary_ids
from attnkit.nn.dropout import Dropout
from attnkit.nn.fast_paths import Linear

__all__ = [
    "ELMoClassifier",
    "ELMoClassifierConfig",
    "add_boundaries",
    "elmo_vectors",
    "format_mix",
]


@dataclass
class ELMoClassifierConfig(ModelConfig):
    """``arch: elmo`` for task classify: frozen ELMo features + a small task model."""

    model_type: ClassVar[str] = "classifier"
    KEY_HINTS: ClassVar[dict[str, str]] = {
        **{
            key: f"arch elmo: the frozen biLM's sizes come from model.init_from (bilm_{key}); "
            "the task model has token_dim, task_hidden_size, encoder, pooling and dropout"
            for key in ("d_model", "hidden_size", "num_layers")
        },
        "bidirectional": "the task model's LSTM is always bidirectional",
        "num_heads": "model.num_heads sizes a Transformer; arch elmo has token_dim, "
        "task_hidden_size and encoder",
    }

    arch: str = param("elmo", "elmo")
    num_classes: int = param(2, "output classes (the labels in the training data)", True)
    init_from: str | None = param(
        None, "the task-bilm run whose biLM (frozen) and tokenizer the classifier uses (required)"
    )
    # the frozen biLM's sizes: taken from the init_from run (PRETRAINED_KEYS)
    bilm_d_model: int = param(256, "the biLM's token embedding width (from model.init_from)")
    bilm_hidden_size: int = param(256, "the biLM's LSTM size per direction (from init_from)")
    bilm_num_layers: int = param(2, "the biLM's LSTM layers (from model.init_from)")
    bilm_residual: bool = param(True, "the biLM's residual connections (from model.init_from)")
    bilm_tie_embeddings: bool = param(True, "the biLM's tied softmax (from model.init_from)")
    bos_id: int | None = param(None, "[BOS] id the biLM read first (its tokenizer's)", True)
    eos_id: int | None = param(None, "[EOS] id the biLM read last (its tokenizer's)", True)
    # the task model
    token_dim: int = param(
        0, "a trainable token embedding concatenated with ELMo ([x_k; ELMo_k]); 0: ELMo only"
    )
    encoder: str = param("lstm", "task model over the vectors: lstm (1-layer BiLSTM) | none")
    task_hidden_size: int = param(256, "the task BiLSTM's state size per direction")
    pooling: str = param("mean", "mean | max over real tokens")
    dropout: float = param(0.2, "dropout on the input vectors and before the linear head")

    OUTPUT: ClassVar[type | None] = ClassifierOutput
    ENCODERS: ClassVar[tuple[str, ...]] = ("lstm", "none")
    POOLINGS: ClassVar[tuple[str, ...]] = ("mean", "max")
    # bilm_<key> <- the init_from run's model.<key>
    PRETRAINED_KEYS: ClassVar[tuple[str, ...]] = (
        "bilm_d_model",
        "bilm_hidden_size",
        "bilm_num_layers",
        "bilm_residual",
        "bilm_tie_embeddings",
    )

    def validate(self) -> None:
        super().validate()  # (init_from is required of a recipe: validate_recipe)
        check(
            positive("model.num_classes", self.num_classes),
            positive("model.bilm_d_model", self.bilm_d_model),
            positive("model.bilm_hidden_size", self.bilm_hidden_size),
            positive("model.bilm_num_layers", self.bilm_num_layers),
            positive("model.task_hidden_size", self.task_hidden_size),
            (self.token_dim >= 0, f"model.token_dim must be >= 0, got {self.token_dim!r}"),
            (0.0 <= self.dropout < 1.0, f"model.dropout must be in [0, 1), got {self.dropout!r}"),
            (
                self.encoder in self.ENCODERS,
                f"model.encoder must be one of {', '.join(self.ENCODERS)} for arch elmo, "
                f"got {short_repr(self.encoder)}",
            ),
            (
                self.pooling in self.POOLINGS,
                f"model.pooling must be one of {', '.join(self.POOLINGS)} for arch elmo, "
                f"got {short_repr(self.pooling)}",
            ),
            (
                (self.bos_id is None) == (self.eos_id is None),
                "model.bos_id and model.eos_id are both set or both unset",
            ),
        )

    def bilm_config(self) -> ELMoConfig:
        """The config of the frozen biLM inside (dropout off: it never trains)."""
        return ELMoConfig(
            vocab_size=self.vocab_size,
            pad_id=self.pad_id,
            max_len=self.max_len + 2,
            d_model=self.bilm_d_model,
            hidden_size=self.bilm_hidden_size,
            num_layers=self.bilm_num_layers,
            dropout=0.0,
            residual=self.bilm_residual,
            tie_embeddings=self.bilm_tie_embeddings,
        )

    @property
    def hidden_width(self) -> int:
        return self.task_hidden_size

    def describe(self) -> str:
        task = f"BiLSTM {self.task_hidden_size}" if self.encoder == "lstm" else "no task encoder"
        tokens = f", + token embedding {self.token_dim}" if self.token_dim else ""
        return (
            f"elmo classifier: frozen biLM ({self.bilm_num_layers} x {self.bilm_hidden_size} LSTM per "
            f"direction) + learned layer mix{tokens} -> {task} -> {self.pooling} pooling"
        )

    def build(self) -> ELMoClassifier:
        return ELMoClassifier(self)

    # ------------------------------------------------------------------ model.init_from
    def validate_recipe(self) -> None:
        """The biLM is not trained here: a recipe names the bilm run it comes from."""
        if self.init_from is None:
            raise ConfigError("model.init_from: arch elmo needs a task bilm run (its frozen "
                              "biLM and tokenizer), e.g. runs/nsmc-bilm")  # fmt: skip

    def check_source(self, source: PretrainedSource) -> None:
        source.require_model(ELMoConfig.model_type, "arch elmo needs a task bilm run (a biLM)")

    def adopt(
        self, source: PretrainedSource, max_len: int, log: Log
    ) -> tuple[ELMoClassifierConfig, Tokenizer]:
        """The biLM's sizes (``bilm_<key>`` <- the run's ``model.<key>``), the [BOS] / [EOS]
        ids it read each text between, and its tokenizer (the classifier reads text exactly
        as the biLM did)."""
        self.check_source(source)
        keys = {key: key.removeprefix("bilm_") for key in self.PRETRAINED_KEYS}
        config = self.replace(**source.changed_keys(self, keys))
        source.log_taken(self, config, "biLM sizes", log)
        tokenizer = source.tokenizer()
        bos, eos = boundary_ids(tokenizer) or (None, None)
        return config.replace(bos_id=bos, eos_id=eos), tokenizer


def add_boundaries(
    input_ids: Tensor, mask: Tensor, bos_id: int, eos_id: int, pad_id: int
) -> tuple[Tensor, Tensor]:
    """Right-padded ids (B, T) and mask -> ([BOS] ids [EOS] (B, T + 2), its mask): [EOS]
    goes right after each row's last real token."""
    b, t = input_ids.shape
    lengths = mask.sum(1)  # (B,)
    out = input_ids.new_full((b, t + 2), pad_id)
    out[:, 1 : t + 1] = input_ids.masked_fill(~mask, pad_id)
    out[:, 0] = bos_id
    out[torch.arange(b, device=out.device), lengths + 1] = eos_id
    new_mask = torch.arange(t + 2, device=mask.device)[None, :] < (lengths + 2)[:, None]
    return out, new_mask


def elmo_vectors(
    embedder: ELMoEmbedder,
    input_ids: Tensor,
    mask: Tensor,
    bos_id: int | None,
    eos_id: int | None,
    pad_id: int,
) -> Tensor:
    """ELMo vectors (B, T, 2 * hidden) of right-padded ids (B, T) without boundaries: the
    biLM reads ``[BOS] ids [EOS]`` (when ``bos_id`` is given) and the boundaries' vectors are
    dropped; zeros at padding."""
    if bos_id is None or eos_id is None:
        return embedder(input_ids, mask)
    ids, wide_mask = add_boundaries(input_ids, mask, bos_id, eos_id, pad_id)
    vectors = embedder(ids, wide_mask)[:, 1:-1]  # (B, T, 2H): [BOS] and the last column cut
    return vectors * mask[..., None]  # (zeros where each row's [EOS] fell)


class ELMoClassifier(AttnkitModel):
    """Frozen biLM + ``ScalarMix`` (``ELMoEmbedder``) + the task model (module docstring).

    model(input_ids (B, T), attention_mask (B, T) | None)
        -> (logits (B, num_classes), None)
    model.mix_weights() -> (softmax(s) per layer, token layer first; gamma)
    """

    config_class: ClassVar[type[ModelConfig]] = ELMoClassifierConfig
    config: ELMoClassifierConfig

    def __init__(self, config: ELMoClassifierConfig | None = None, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        c = self.config
        self.pad_id, self.num_classes = c.pad_id, c.num_classes
        self.elmo = ELMoEmbedder(BiLM(c.bilm_config()))
        width = self.elmo.output_dim + c.token_dim
        self.embed = (
            nn.Embedding(c.vocab_size, c.token_dim, padding_idx=c.pad_id) if c.token_dim else None
        )
        self.input_dropout = Dropout(c.dropout)
        self.rnn = (
            nn.LSTM(width, c.task_hidden_size, batch_first=True, bidirectional=True)
            if c.encoder == "lstm"
            else None
        )
        self.head_dropout = Dropout(c.dropout)
        self.head = Linear(2 * c.task_hidden_size if self.rnn else width, c.num_classes)

    @property
    def bilm(self) -> BiLM:
        return self.elmo.bilm

    def mix_weights(self) -> tuple[list[float], float]:
        """(softmax(s), one weight per biLM layer, token layer first; gamma)."""
        return self.elmo.weights()

    def features(self, input_ids: Tensor, mask: Tensor) -> Tensor:
        """The ELMo vectors (B, T, 2 * hidden) of right-padded ids, zeros at padding."""
        c = self.config
        return elmo_vectors(self.elmo, input_ids, mask, c.bos_id, c.eos_id, self.pad_id)

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> ClassifierOutput:
        """input_ids (B, T) long; attention_mask (B, T), True = real token (None:
        ``input_ids != pad_id``), right padding. Returns ``ClassifierOutput`` with logits
        (B, num_classes)."""
        mask = _real_token_mask(input_ids, attention_mask, self.pad_id)  # (B, T)
        x = self.features(input_ids, mask)  # (B, T, 2H)
        if self.embed is not None:
            x = torch.cat([self.embed(input_ids), x], dim=-1)  # [x_k; ELMo_k]
        x = self.input_dropout(x)
        if self.rnn is not None:
            t = input_ids.size(1)
            lengths = mask.sum(1).clamp(min=1).cpu()  # (an empty row reads one pad)
            packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
            out, _ = self.rnn(packed)
            x, _ = pad_packed_sequence(out, batch_first=True, total_length=t)  # (B, T, 2h)
        pooled = masked_mean(x, mask) if self.config.pooling == "mean" else masked_max(x, mask)
        return ClassifierOutput(self.head(self.head_dropout(pooled)))

    def load_pretrained_bilm(self, weights: dict[str, Tensor], source: str) -> int:
        """Copy a task-bilm run's weights into the frozen biLM; returns the tensors copied."""
        own = self.bilm.state_dict()
        missing = [k for k in own if k not in weights]
        if missing:
            raise ConfigError(f"model.init_from: {source} lacks {', '.join(missing[:3])}")
        for k, value in own.items():
            if weights[k].shape != value.shape:
                raise ConfigError(
                    f"model.init_from: {k} has shape {tuple(weights[k].shape)} in {source}, "
                    f"{tuple(value.shape)} in the classifier's biLM"
                )
        self.bilm.load_state_dict({k: weights[k] for k in own})
        return len(own)

    def load_pretrained(self, source: PretrainedSource, log: Log) -> int:
        """Copy a finished bilm run's weights into the frozen biLM."""
        self.config.check_source(source)
        copied = self.load_pretrained_bilm(source.state_dict(), source.given)
        log(f"frozen biLM from {source.given} ({copied} tensors); the layer mix s, gamma and "
            "the task model train")  # fmt: skip
        return copied

    def training_note(self) -> str:
        """The learned layer mix s_j, gamma (``format_mix``)."""
        return format_mix(*self.mix_weights())


def format_mix(weights: list[float], gamma: float) -> str:
    """The log line of a learned layer mix: ``s_j`` per layer (0 = token layer), gamma."""
    parts = "  ".join(f"s_{j} {w:.3f}" for j, w in enumerate(weights))
    return f"ELMo layer mix (softmax-normalised s_j, token layer 0): {parts}; gamma {gamma:.3f}"

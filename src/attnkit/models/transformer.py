"""The encoder-decoder Transformer of "Attention Is All You Need", built from attnkit.nn.layers.

    memory = Encoder(Embed(src) * sqrt(d_model) + PE)                      (B, S, d_model)
    y      = Decoder(Embed(tgt_in) * sqrt(d_model) + PE, memory)           (B, T, d_model)
    logits = y W_out^T                                                     (B, T, tgt_vocab)

Padding masks are applied in every attention (encoder self, decoder self, cross), the
look-ahead mask in decoder self-attention. Embeddings can be shared between source and
target (joint vocabulary) and tied to the output projection (paper section 3.4).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from attnkit.core.config import ConfigError, check, positive, short_repr
from attnkit.models.base import AttnkitModel, ModelConfig, Seq2SeqOutput, TransformerSizes, param
from attnkit.nn.attention import KVCache
from attnkit.nn.dropout import Dropout
from attnkit.nn.fast_paths import Linear
from attnkit.nn.layers import (
    Decoder,
    Encoder,
    LearnedPositionalEmbedding,
    SinusoidalPositionalEncoding,
    TokenEmbedding,
)

__all__ = ["PRESETS", "Transformer", "TransformerConfig", "TransformerStepper"]

# d_model / num_heads / d_ff / layers: "base" is the paper's model, "small" fits a CPU.
PRESETS: dict[str, dict[str, int]] = {
    "small": {
        "d_model": 256,
        "num_heads": 4,
        "d_ff": 1024,
        "num_encoder_layers": 3,
        "num_decoder_layers": 3,
    },
    "base": {
        "d_model": 512,
        "num_heads": 8,
        "d_ff": 2048,
        "num_encoder_layers": 6,
        "num_decoder_layers": 6,
    },
}


@dataclass
class TransformerConfig(TransformerSizes):
    """``arch: transformer`` for tasks translate and chat: the paper's encoder-decoder."""

    model_type: ClassVar[str] = "seq2seq"
    KEY_HINTS: ClassVar[dict[str, str]] = {
        "attention": "model.attention selects the LSTM's attention score (the Transformer "
        "always attends)",
        "emb_dim": "model.emb_dim sizes an LSTM's embeddings; the Transformer's width is d_model",
        "hidden_size": "model.hidden_size sizes an LSTM; the Transformer's width is d_model",
    }

    arch: str = param("transformer", "transformer")
    preset: str | None = param(None, "small | base: fills d_model/num_heads/d_ff/layers not set")
    num_decoder_layers: int | None = param(None, "decoder layers (None: num_layers)")
    share_embeddings: bool = param(False, "one embedding for source and target (joint vocab)")
    tie_output: bool = param(True, "output projection = target embedding (paper 3.4)")
    tgt_vocab_size: int | None = param(None, "target vocabulary if not the joint one", True)

    @classmethod
    def from_dict(
        cls,
        raw: dict[str, Any],
        allow_derived: bool = True,
        ignore: frozenset[str] = frozenset(),
    ) -> TransformerConfig:
        """``preset`` fills the sizes the section does not set (an explicit ``d_model``
        etc. wins); the saved config holds the filled values."""
        name = raw.get("preset")
        if name is not None:
            if not isinstance(name, str) or name not in PRESETS:
                raise ConfigError(
                    f"model.preset must be null or one of {', '.join(PRESETS)}, "
                    f"got {short_repr(name)}"
                )
            raw = {**_preset_sizes(name), **raw}
        return super().from_dict(raw, allow_derived=allow_derived, ignore=ignore)

    def validate(self) -> None:
        super().validate()
        check(
            positive("model.num_decoder_layers", self.num_decoder_layers, optional=True),
            (
                not self.share_embeddings or self.tgt_vocab_size in (None, self.vocab_size),
                "share_embeddings needs one joint vocabulary (equal vocab sizes)",
            ),
        )

    def describe(self) -> str:
        return f"transformer {self.num_layers}+{self.num_decoder_layers or self.num_layers} layers"

    def build(self) -> Transformer:
        return Transformer(self)


def _preset_sizes(name: str) -> dict[str, int]:
    preset = PRESETS[name]
    return {
        "d_model": preset["d_model"],
        "num_heads": preset["num_heads"],
        "d_ff": preset["d_ff"],
        "num_layers": preset["num_encoder_layers"],
        "num_decoder_layers": preset["num_decoder_layers"],
    }


class Transformer(AttnkitModel):
    """The encoder-decoder Transformer, built from a ``TransformerConfig``."""

    config_class: ClassVar[type[ModelConfig]] = TransformerConfig
    config: TransformerConfig
    returns_attention = True
    has_cross_attention = True
    attention_description = "Transformer, last layer, mean of heads"

    def __init__(self, config: TransformerConfig | None = None, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        c = self.config
        tgt_vocab_size = c.tgt_vocab_size or c.vocab_size
        self.pad_id, self.max_len, self.d_model = c.pad_id, c.max_len, c.d_model
        self.max_target_len: int | None = c.max_len  # the positional table's size
        self.src_embed = TokenEmbedding(c.vocab_size, c.d_model, padding_idx=c.pad_id)
        self.tgt_embed = (
            self.src_embed
            if c.share_embeddings
            else TokenEmbedding(tgt_vocab_size, c.d_model, padding_idx=c.pad_id)
        )
        self.pos: SinusoidalPositionalEncoding | LearnedPositionalEmbedding
        if c.positional == "sinusoidal":
            self.pos = SinusoidalPositionalEncoding(c.d_model, c.max_len)
        else:
            self.pos = LearnedPositionalEmbedding(c.max_len, c.d_model)
        self.dropout = Dropout(c.dropout)
        self.encoder = Encoder(c.block(), c.num_layers)
        self.decoder = Decoder(c.block(), c.num_decoder_layers or c.num_layers)
        self.generator = Linear(c.d_model, tgt_vocab_size, bias=not c.tie_output)
        if c.tie_output:
            self.generator.weight = self.tgt_embed.embedding.weight
        self._init_weights()

    def _init_weights(self) -> None:
        """Xavier for matrices; embeddings N(0, d_model^-0.5) (as fairseq), so that after the
        sqrt(d_model) scaling they have unit variance and, tied to the output projection,
        the initial logits stay small."""
        for name, p in self.named_parameters():
            if "embedding" in name:
                nn.init.normal_(p, mean=0.0, std=self.d_model**-0.5)
                with torch.no_grad():
                    p[self.pad_id].zero_()
            elif p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def _check_len(self, t: int, what: str) -> None:
        if t > self.max_len:
            raise ValueError(f"{what} of length {t} exceeds max_len={self.max_len}")

    def encode(self, src: Tensor, src_mask: Tensor | None = None) -> Tensor:
        """src (B, S) ids; src_mask (B, S) True = real token. Returns memory (B, S, d)."""
        self._check_len(src.size(1), "source")
        src_mask = src != self.pad_id if src_mask is None else src_mask
        x = self.dropout(self.pos(self.src_embed(src)))
        return self.encoder(x, key_padding_mask=src_mask)

    def decode(
        self,
        tgt_in: Tensor,
        memory: Tensor,
        src_mask: Tensor,
        tgt_mask: Tensor | None = None,
        cache: list[dict[str, KVCache]] | None = None,
    ) -> Tensor:
        """tgt_in (B, T) ids (shifted right: [BOS] y_1 ... y_{T-1}); with ``cache`` only the new
        positions. tgt_mask: (B, T_total) True = real token. Returns logits (B, T, V)."""
        offset = 0 if cache is None else len(cache[0]["self"])
        self._check_len(offset + tgt_in.size(1), "target")
        y = self.dropout(self.pos(self.tgt_embed(tgt_in), offset=offset))
        y = self.decoder(
            y, memory, tgt_key_padding_mask=tgt_mask, memory_key_padding_mask=src_mask, cache=cache
        )
        return self.generator(y)

    def forward(
        self,
        src: Tensor,
        tgt_in: Tensor,
        src_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
        teacher_forcing_ratio: float = 1.0,
    ) -> Seq2SeqOutput:
        """Teacher-forced pass: src (B, S), tgt_in (B, T) -> ``Seq2SeqOutput`` with logits
        (B, T, tgt_vocab) (the cross-attention weights: ``attnkit.nn.capture``). The decoder
        reads every gold token in parallel: ``teacher_forcing_ratio`` (there for one seq2seq
        signature) has no effect (a new recipe that sets it < 1 for a Transformer is
        refused)."""
        src_mask = src != self.pad_id if src_mask is None else src_mask
        tgt_mask = tgt_in != self.pad_id if tgt_mask is None else tgt_mask
        memory = self.encode(src, src_mask)
        return Seq2SeqOutput(self.decode(tgt_in, memory, src_mask, tgt_mask))

    def stepper(
        self, src: Tensor, src_mask: Tensor | None = None, use_cache: bool = True
    ) -> TransformerStepper:
        """An object for ``attnkit.nn.generation`` (greedy / beam / sampling) over ``src``."""
        src_mask = src != self.pad_id if src_mask is None else src_mask
        memory = self.encode(src, src_mask)
        return TransformerStepper(self, memory, src_mask, use_cache)


class TransformerStepper:
    """Feeds one target token per row per call. With the KV cache each step costs one
    position; without it the whole prefix is recomputed (for tests and benchmarks)."""

    def __init__(
        self, model: Transformer, memory: Tensor, src_mask: Tensor, use_cache: bool = True
    ) -> None:
        self.model, self.memory, self.src_mask = model, memory, src_mask
        self.cache = model.decoder.init_cache() if use_cache else None
        self.prefix: Tensor | None = None  # (N, t) tokens so far, used without cache

    def step(self, tokens: Tensor) -> Tensor:
        """tokens (N,) -> next-token logits (N, V)."""
        new = tokens[:, None]
        self.prefix = new if self.prefix is None else torch.cat([self.prefix, new], 1)
        inp = new if self.cache is not None else self.prefix
        logits = self.model.decode(inp, self.memory, self.src_mask, cache=self.cache)
        return logits[:, -1]

    def reorder(self, index: Tensor) -> None:
        self.memory = self.memory.index_select(0, index)
        self.src_mask = self.src_mask.index_select(0, index)
        if self.prefix is not None:
            self.prefix = self.prefix.index_select(0, index)
        if self.cache is not None:
            for layer in self.cache:
                layer["self"].reorder(index)
                layer["cross"].reorder(index)

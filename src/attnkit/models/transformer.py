"""The encoder-decoder Transformer of "Attention Is All You Need", built from attnkit.layers.

    memory = Encoder(Embed(src) * sqrt(d_model) + PE)                      (B, S, d_model)
    y      = Decoder(Embed(tgt_in) * sqrt(d_model) + PE, memory)           (B, T, d_model)
    logits = y W_out^T                                                     (B, T, tgt_vocab)

Padding masks are applied in every attention (encoder self, decoder self, cross), the
look-ahead mask in decoder self-attention. Embeddings can be shared between source and
target (joint vocabulary) and tied to the output projection (paper section 3.4).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnkit.attention import KVCache
from attnkit.layers import (
    Decoder,
    Encoder,
    LearnedPositionalEmbedding,
    SinusoidalPositionalEncoding,
    TokenEmbedding,
)

__all__ = ["PRESETS", "Transformer", "TransformerStepper"]

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


class Transformer(nn.Module):
    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        d_model: int = 512,
        num_heads: int = 8,
        d_ff: int = 2048,
        num_encoder_layers: int = 6,
        num_decoder_layers: int = 6,
        dropout: float = 0.1,
        max_len: int = 256,
        pad_id: int = 0,
        share_embeddings: bool = False,
        tie_output: bool = True,
        norm_first: bool = False,
        activation: str = "relu",
        positional: str = "sinusoidal",
        attention_dropout: float | None = None,
    ) -> None:
        super().__init__()
        if share_embeddings and src_vocab_size != tgt_vocab_size:
            raise ValueError("share_embeddings needs one joint vocabulary (equal vocab sizes)")
        self.pad_id, self.max_len, self.d_model = pad_id, max_len, d_model
        self.src_embed = TokenEmbedding(src_vocab_size, d_model, padding_idx=pad_id)
        self.tgt_embed = (
            self.src_embed
            if share_embeddings
            else TokenEmbedding(tgt_vocab_size, d_model, padding_idx=pad_id)
        )
        if positional == "sinusoidal":
            self.pos = SinusoidalPositionalEncoding(d_model, max_len)
        elif positional == "learned":
            self.pos = LearnedPositionalEmbedding(max_len, d_model)
        else:
            raise ValueError(f"positional must be 'sinusoidal' or 'learned', got {positional!r}")
        self.dropout = nn.Dropout(dropout)
        self.encoder = Encoder(
            num_encoder_layers,
            d_model,
            num_heads,
            d_ff,
            dropout,
            activation,
            norm_first,
            attention_dropout=attention_dropout,
        )
        self.decoder = Decoder(
            num_decoder_layers,
            d_model,
            num_heads,
            d_ff,
            dropout,
            activation,
            norm_first,
            attention_dropout=attention_dropout,
        )
        self.generator = nn.Linear(d_model, tgt_vocab_size, bias=not tie_output)
        if tie_output:
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

    def encode(
        self, src: Tensor, src_mask: Tensor | None = None, need_weights: bool = False
    ) -> tuple[Tensor, list[Tensor] | None]:
        """src (B, S) ids; src_mask (B, S) True = real token. Returns (memory (B, S, d), weights)."""
        self._check_len(src.size(1), "source")
        src_mask = src != self.pad_id if src_mask is None else src_mask
        x = self.dropout(self.pos(self.src_embed(src)))
        return self.encoder(x, key_padding_mask=src_mask, need_weights=need_weights)

    def decode(
        self,
        tgt_in: Tensor,
        memory: Tensor,
        src_mask: Tensor,
        tgt_mask: Tensor | None = None,
        cache: list[dict[str, KVCache]] | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, list | None]:
        """tgt_in (B, T) ids (shifted right: [BOS] y_1 ... y_{T-1}); with ``cache`` only the new
        positions. tgt_mask: (B, T_total) True = real token. Returns (logits (B, T, V), weights
        [(self (B,H,T,T_total), cross (B,H,T,S))] per layer if need_weights)."""
        offset = 0 if cache is None else len(cache[0]["self"])
        self._check_len(offset + tgt_in.size(1), "target")
        y = self.dropout(self.pos(self.tgt_embed(tgt_in), offset=offset))
        y, weights = self.decoder(
            y,
            memory,
            tgt_key_padding_mask=tgt_mask,
            memory_key_padding_mask=src_mask,
            cache=cache,
            need_weights=need_weights,
        )
        return self.generator(y), weights

    def forward(
        self,
        src: Tensor,
        tgt_in: Tensor,
        src_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
    ) -> Tensor:
        """Teacher-forced training pass: (B, S), (B, T) -> logits (B, T, tgt_vocab)."""
        src_mask = src != self.pad_id if src_mask is None else src_mask
        tgt_mask = tgt_in != self.pad_id if tgt_mask is None else tgt_mask
        memory, _ = self.encode(src, src_mask)
        return self.decode(tgt_in, memory, src_mask, tgt_mask)[0]

    def stepper(
        self, src: Tensor, src_mask: Tensor | None = None, use_cache: bool = True
    ) -> TransformerStepper:
        """An object for ``attnkit.generation`` (greedy / beam / sampling) over ``src``."""
        src_mask = src != self.pad_id if src_mask is None else src_mask
        memory, _ = self.encode(src, src_mask)
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
        logits, _ = self.model.decode(inp, self.memory, self.src_mask, cache=self.cache)
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

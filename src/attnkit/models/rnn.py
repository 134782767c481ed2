"""Sequence to sequence with LSTMs (Sutskever et al. 2014), with or without attention
(Bahdanau et al. 2015 / Luong et al. 2015) -- the course's path to the Transformer.

Encoder: embedding + (bi)LSTM over the source -> outputs h_1..h_S and a final state.
Decoder, one step t:
    s_t       = LSTM([emb(y_{t-1}); a_{t-1}], s_{t-1})     (input feeding: previous attention vector)
    alpha_t   = softmax(score(s_t, h_1..h_S))               any score from attnkit.nn.attention
                                                            (key side prepared once per source)
    c_t       = sum_i alpha_t,i h_i                         the attention value (context vector)
    a_t       = tanh(W_c [c_t; s_t])                        attentional hidden state
    P(y_t)    = softmax(W_out a_t)
Without attention the decoder sees only the encoder's final state (the "context vector"),
fed as its initial state and concatenated to every input.

Teacher forcing: at training time the decoder input is the gold token y_{t-1} with
probability ``teacher_forcing_ratio``, else its own previous prediction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from attnkit.core.config import check, positive
from attnkit.models.base import AttnkitModel, ModelConfig, Seq2SeqOutput, param
from attnkit.nn.attention import SCORE_NAMES, attend, make_score, masked_softmax
from attnkit.nn.dropout import Dropout
from attnkit.nn.fast_paths import Linear

__all__ = ["LSTMStepper", "Seq2SeqLSTM", "Seq2SeqLSTMConfig"]


@dataclass
class Seq2SeqLSTMConfig(ModelConfig):
    """``arch: lstm`` for tasks translate and chat (``max_len``: the longest source, which
    the location score needs)."""

    model_type: ClassVar[str] = "seq2seq"
    KEY_HINTS: ClassVar[dict[str, str]] = {
        "preset": "model.preset sizes a Transformer; set emb_dim / hidden_size for an LSTM",
        "d_model": "model.d_model sizes a Transformer; an LSTM has emb_dim and hidden_size",
    }

    arch: str = param("lstm", "lstm")
    emb_dim: int = param(256, "token embedding size")
    hidden_size: int = param(256, "decoder state size (the encoder's two directions together)")
    num_layers: int = param(2, "stacked LSTM layers in the encoder and the decoder")
    dropout: float = param(0.1, "dropout on embeddings, between layers and before the output")
    bidirectional: bool = param(True, "bidirectional encoder")
    attention: str | None = param(
        None, "None (the context vector only) | dot | scaled_dot | general | concat | location"
    )
    share_embeddings: bool = param(False, "one embedding for source and target (joint vocab)")
    tgt_vocab_size: int | None = param(None, "target vocabulary if not the joint one", True)

    def validate(self) -> None:
        super().validate()
        check(
            (
                self.attention is None or self.attention in SCORE_NAMES,
                f"model.attention must be null or one of {', '.join(SCORE_NAMES)}",
            ),
            positive("model.num_layers", self.num_layers),
            positive("model.emb_dim", self.emb_dim),
            positive("model.hidden_size", self.hidden_size),
            (
                not self.bidirectional or self.hidden_size % 2 == 0,
                "model.hidden_size must be even for a bidirectional LSTM encoder",
            ),
            (0.0 <= self.dropout < 1.0, f"model.dropout must be in [0, 1), got {self.dropout!r}"),
            (
                not self.share_embeddings or self.tgt_vocab_size in (None, self.vocab_size),
                "share_embeddings needs one joint vocabulary (equal vocab sizes)",
            ),
        )

    @property
    def hidden_width(self) -> int:
        return self.hidden_size

    SCHEDULED_SAMPLING: ClassVar[bool] = True  # decodes step by step: can read its own output

    def describe(self) -> str:
        return f"lstm, attention: {self.attention or 'none'}"

    def build(self) -> Seq2SeqLSTM:
        return Seq2SeqLSTM(self)


class Seq2SeqLSTM(AttnkitModel):
    """Encoder-decoder LSTM (see the module docstring), built from a ``Seq2SeqLSTMConfig``."""

    config_class: ClassVar[type[ModelConfig]] = Seq2SeqLSTMConfig
    config: Seq2SeqLSTMConfig
    max_target_len: int | None = None  # a recurrent decoder has no positional table

    def __init__(self, config: Seq2SeqLSTMConfig | None = None, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        c = self.config
        emb_dim, hid_dim, n_layers, dropout = c.emb_dim, c.hidden_size, c.num_layers, c.dropout
        self.pad_id, self.hid_dim, self.n_layers = c.pad_id, hid_dim, n_layers
        self.attention_name = c.attention
        self.has_cross_attention = c.attention is not None
        self.returns_attention = self.has_cross_attention
        self.attention_description = f"LSTM, {c.attention} attention"
        self.src_embed = nn.Embedding(c.vocab_size, emb_dim, padding_idx=c.pad_id)
        self.tgt_embed = nn.Embedding(
            c.tgt_vocab_size or c.vocab_size, emb_dim, padding_idx=c.pad_id
        )
        enc_hid = hid_dim // 2 if c.bidirectional else hid_dim
        self.bidirectional = c.bidirectional
        inter = dropout if n_layers > 1 else 0.0
        self.encoder = nn.LSTM(
            emb_dim,
            enc_hid,
            n_layers,
            batch_first=True,
            bidirectional=c.bidirectional,
            dropout=inter,
        )
        self.decoder = nn.LSTM(
            emb_dim + hid_dim, hid_dim, n_layers, batch_first=True, dropout=inter
        )
        self.dropout = Dropout(dropout)
        if c.attention is not None:
            self.score = make_score(
                c.attention, d_query=hid_dim, d_key=hid_dim, d_attn=hid_dim, max_len=c.max_len
            )
            self.W_c = Linear(2 * hid_dim, hid_dim, bias=False)
        self.out = Linear(hid_dim, c.tgt_vocab_size or c.vocab_size)
        if c.share_embeddings:
            self.tgt_embed = self.src_embed

    # ------------------------------------------------------------------ encoder
    def encode(
        self, src: Tensor, src_mask: Tensor | None = None
    ) -> tuple[Tensor, tuple[Tensor, Tensor], Tensor]:
        """src (B, S) -> (outputs (B, S, hid_dim), (h, c) each (n_layers, B, hid_dim), mask)."""
        src_mask = src != self.pad_id if src_mask is None else src_mask
        lengths = src_mask.sum(1).clamp(min=1).cpu()
        packed = pack_padded_sequence(
            self.dropout(self.src_embed(src)), lengths, batch_first=True, enforce_sorted=False
        )
        out, (h, c) = self.encoder(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=src.size(1))
        if self.bidirectional:  # (2L, B, H/2) -> (L, B, H): concat both directions per layer
            h = h.view(self.n_layers, 2, *h.shape[1:]).transpose(1, 2).flatten(2)
            c = c.view(self.n_layers, 2, *c.shape[1:]).transpose(1, 2).flatten(2)
        return out, (h.contiguous(), c.contiguous()), src_mask

    # ------------------------------------------------------------------ decoder
    def decode_step(
        self,
        y_prev: Tensor,
        state: tuple[Tensor, Tensor],
        feed: Tensor,
        enc_out: Tensor,
        src_mask: Tensor,
        context0: Tensor,
        keys: Tensor | None = None,
    ) -> tuple[Tensor, tuple[Tensor, Tensor], Tensor, Tensor | None]:
        """One step. y_prev (B,), feed (B, hid) previous attentional vector (or the fixed
        context without attention); keys = ``self.score.prepare(enc_out)``, made once per
        source by ``_start`` (None without attention).
        Returns (logits (B, V), state, new feed, alpha (B, S))."""
        x = torch.cat([self.dropout(self.tgt_embed(y_prev)), feed], -1)[:, None]  # (B, 1, E+H)
        out, state = self.decoder(x, state)
        s_t = out[:, 0]  # (B, H)
        if self.attention_name is None:
            return self.out(self.dropout(s_t)), state, context0, None
        if keys is None:
            raise ValueError("decode_step with attention needs keys (self.score.prepare(enc_out))")
        scores = self.score.score(s_t[:, None], keys)  # (B, 1, S)
        alpha = masked_softmax(scores, src_mask[:, None])  # (B, 1, S)
        c_t = attend(alpha, enc_out)[:, 0]  # (B, H)
        a_t = torch.tanh(self.W_c(torch.cat([c_t, s_t], -1)))  # attentional hidden state
        return self.out(self.dropout(a_t)), state, a_t, alpha[:, 0]

    def _start(
        self, src: Tensor, src_mask: Tensor | None
    ) -> tuple[Tensor, tuple[Tensor, Tensor], Tensor, Tensor, Tensor, Tensor | None]:
        enc_out, state, src_mask = self.encode(src, src_mask)
        context0 = state[0][-1]  # the "context vector": last layer's final state (B, H)
        feed = context0 if self.attention_name is None else torch.zeros_like(context0)
        keys = None if self.attention_name is None else self.score.prepare(enc_out)
        return enc_out, state, src_mask, context0, feed, keys

    def forward(
        self,
        src: Tensor,
        tgt_in: Tensor,
        src_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
        teacher_forcing_ratio: float = 1.0,
    ) -> Seq2SeqOutput:
        """src (B, S), tgt_in (B, T) = [BOS] y_1 .. y_{T-1} -> ``Seq2SeqOutput`` with logits
        (B, T, V) and, with attention, its weights alpha_t (B, T, S): an explicit output,
        since every decoding step computes them anyway (None without). With ratio < 1
        some inputs are the model's own previous predictions instead of the gold tokens.
        ``tgt_mask`` is accepted for one seq2seq signature (padding only follows the real
        target tokens, whose loss the task masks)."""
        enc_out, state, src_mask, context0, feed, keys = self._start(src, src_mask)
        logits: list[Tensor] = []
        alphas: list[Tensor] = []  # (none without attention)
        y_prev = tgt_in[:, 0]
        for t in range(tgt_in.size(1)):
            step_logits, state, feed, alpha = self.decode_step(
                y_prev, state, feed, enc_out, src_mask, context0, keys
            )
            logits.append(step_logits)
            if alpha is not None:
                alphas.append(alpha)
            if t + 1 < tgt_in.size(1):
                if teacher_forcing_ratio >= 1.0:
                    y_prev = tgt_in[:, t + 1]
                else:
                    use_gold = torch.rand(tgt_in.size(0), device=src.device) < teacher_forcing_ratio
                    y_prev = torch.where(use_gold, tgt_in[:, t + 1], step_logits.argmax(-1))
        out = torch.stack(logits, 1)
        if self.attention_name is None:
            return Seq2SeqOutput(out)
        return Seq2SeqOutput(out, torch.stack(alphas, 1))  # (B, T, V), (B, T, S)

    def stepper(
        self, src: Tensor, src_mask: Tensor | None = None, use_cache: bool = True
    ) -> LSTMStepper:
        """An object for ``attnkit.nn.generation`` over ``src``. The recurrent state is the
        LSTM's cache, so ``use_cache`` (there for a common stepper signature) changes nothing."""
        return LSTMStepper(self, *self._start(src, src_mask))


class LSTMStepper:
    """``attnkit.nn.generation`` adaptor: the LSTM state plays the role of the KV cache."""

    def __init__(
        self,
        model: Seq2SeqLSTM,
        enc_out: Tensor,
        state: tuple[Tensor, Tensor],
        src_mask: Tensor,
        context0: Tensor,
        feed: Tensor,
        keys: Tensor | None,
    ) -> None:
        self.model = model
        self.enc_out, self.state, self.src_mask = enc_out, state, src_mask
        self.context0, self.feed, self.keys = context0, feed, keys
        self.attention: list[Tensor] = []  # alpha per step (N, S), for alignment plots

    def step(self, tokens: Tensor) -> Tensor:
        logits, self.state, self.feed, alpha = self.model.decode_step(
            tokens, self.state, self.feed, self.enc_out, self.src_mask, self.context0, self.keys
        )
        if alpha is not None:
            self.attention.append(alpha)
        return logits

    def reorder(self, index: Tensor) -> None:
        self.enc_out = self.enc_out.index_select(0, index)
        self.src_mask = self.src_mask.index_select(0, index)
        self.context0 = self.context0.index_select(0, index)
        self.feed = self.feed.index_select(0, index)
        if self.keys is not None:
            self.keys = self.keys.index_select(0, index)
        h, c = self.state
        self.state = (h.index_select(1, index), c.index_select(1, index))
        self.attention = [a.index_select(0, index) for a in self.attention]

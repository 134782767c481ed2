"""Sequence to sequence with LSTMs (Sutskever et al. 2014), with or without attention
(Bahdanau et al. 2015 / Luong et al. 2015) -- the course's path to the Transformer.

Encoder: embedding + (bi)LSTM over the source -> outputs h_1..h_S and a final state.
Decoder, one step t:
    s_t       = LSTM([emb(y_{t-1}); a_{t-1}], s_{t-1})     (input feeding: previous attention vector)
    alpha_t   = softmax(score(s_t, h_1..h_S))               any score from attnkit.attention
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

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from attnkit.attention import SCORE_NAMES, attend, make_score, masked_softmax

__all__ = ["Seq2SeqLSTM", "LSTMStepper"]


class Seq2SeqLSTM(nn.Module):
    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        emb_dim: int = 256,
        hid_dim: int = 512,
        n_layers: int = 2,
        dropout: float = 0.3,
        bidirectional: bool = True,
        attention: str | None = "general",
        max_src_len: int = 128,
        pad_id: int = 0,
    ) -> None:
        super().__init__()
        if attention is not None and attention not in SCORE_NAMES:
            raise ValueError(f"attention must be None or one of {SCORE_NAMES}, got {attention!r}")
        self.pad_id, self.hid_dim, self.n_layers = pad_id, hid_dim, n_layers
        self.attention_name = attention
        self.src_embed = nn.Embedding(src_vocab_size, emb_dim, padding_idx=pad_id)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, emb_dim, padding_idx=pad_id)
        enc_hid = hid_dim // 2 if bidirectional else hid_dim
        if bidirectional and hid_dim % 2:
            raise ValueError("hid_dim must be even for a bidirectional encoder")
        self.bidirectional = bidirectional
        inter = dropout if n_layers > 1 else 0.0
        self.encoder = nn.LSTM(
            emb_dim, enc_hid, n_layers, batch_first=True, bidirectional=bidirectional, dropout=inter
        )
        self.decoder = nn.LSTM(
            emb_dim + hid_dim, hid_dim, n_layers, batch_first=True, dropout=inter
        )
        self.dropout = nn.Dropout(dropout)
        if attention is not None:
            self.score = make_score(
                attention, d_query=hid_dim, d_key=hid_dim, d_attn=hid_dim, max_len=max_src_len
            )
            self.W_c = nn.Linear(2 * hid_dim, hid_dim, bias=False)
        self.out = nn.Linear(hid_dim, tgt_vocab_size)

    # ------------------------------------------------------------------ encoder
    def encode(self, src: Tensor, src_mask: Tensor | None = None) -> tuple[Tensor, tuple, Tensor]:
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
        scores = self.score.score(s_t[:, None], keys)  # (B, 1, S)
        alpha = masked_softmax(scores, src_mask[:, None])  # (B, 1, S)
        c_t = attend(alpha, enc_out)[:, 0]  # (B, H)
        a_t = torch.tanh(self.W_c(torch.cat([c_t, s_t], -1)))  # attentional hidden state
        return self.out(self.dropout(a_t)), state, a_t, alpha[:, 0]

    def _start(self, src: Tensor, src_mask: Tensor | None):
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
        teacher_forcing_ratio: float = 1.0,
        return_attention: bool = False,
    ) -> Tensor | tuple[Tensor, Tensor]:
        """src (B, S), tgt_in (B, T) = [BOS] y_1 .. y_{T-1} -> logits (B, T, V)
        (+ attention (B, T, S) if asked). With ratio < 1 some inputs are the model's own
        previous predictions instead of the gold tokens."""
        enc_out, state, src_mask, context0, feed, keys = self._start(src, src_mask)
        logits, alphas = [], []
        y_prev = tgt_in[:, 0]
        for t in range(tgt_in.size(1)):
            step_logits, state, feed, alpha = self.decode_step(
                y_prev, state, feed, enc_out, src_mask, context0, keys
            )
            logits.append(step_logits)
            alphas.append(alpha)
            if t + 1 < tgt_in.size(1):
                if teacher_forcing_ratio >= 1.0:
                    y_prev = tgt_in[:, t + 1]
                else:
                    use_gold = torch.rand(tgt_in.size(0), device=src.device) < teacher_forcing_ratio
                    y_prev = torch.where(use_gold, tgt_in[:, t + 1], step_logits.argmax(-1))
        out = torch.stack(logits, 1)
        if return_attention:
            if self.attention_name is None:
                raise ValueError("this model has no attention (attention: null)")
            return out, torch.stack(alphas, 1)
        return out

    def stepper(
        self, src: Tensor, src_mask: Tensor | None = None, use_cache: bool = True
    ) -> LSTMStepper:
        """An object for ``attnkit.generation`` over ``src``. The recurrent state is the
        LSTM's cache, so ``use_cache`` (there for a common stepper signature) changes nothing."""
        return LSTMStepper(self, *self._start(src, src_mask))


class LSTMStepper:
    """``attnkit.generation`` adaptor: the LSTM state plays the role of the KV cache."""

    def __init__(self, model: Seq2SeqLSTM, enc_out, state, src_mask, context0, feed, keys) -> None:
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
        self.state = tuple(s.index_select(1, index) for s in self.state)
        self.attention = [a.index_select(0, index) for a in self.attention]

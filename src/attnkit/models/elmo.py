"""ELMo (Peters et al. 2018, "Deep contextualized word representations"): a bidirectional
LSTM language model whose layers, mixed by learned softmax weights, are the features.

Two language models share the token representation and the softmax, but not their LSTMs:

    x_k          = Proj(E[t_k])                      context-independent token vector (hidden)
    forward LM:  h->_{k,j} = LSTM->_j(h->_{k,j-1})    reads t_1 .. t_k,   predicts t_{k+1}
    backward LM: h<-_{k,j} = LSTM<-_j(h<-_{k,j-1})    reads t_k .. t_n,   predicts t_{k-1}
    P(t | h)     = softmax(W_s Proj_out(h_{k,L}) + b)  one softmax for both directions
                                                      (W_s = E when ``tie_embeddings``)

trained jointly: loss = NLL(forward) + NLL(backward). The backward LM is the forward
computation run over each sequence reversed *within its real length* (padding stays at the
end), so padding never enters either direction. From layer 2 on, each layer adds its input
to its output (ELMo's residual connection, ``residual``).

The representation of token k is the list of its L + 1 layers, each (2 * hidden):

    h_{k,0} = [x_k; x_k],   h_{k,j} = [h->_{k,j}; h<-_{k,j}]

and ``ELMoEmbedder`` (the feature-based use: the biLM frozen) collapses them with
``attnkit.nn.layers.ScalarMix`` into ELMo_k = gamma * sum_j softmax(s)_j h_{k,j}.

Padding is expected on the right (the data pipeline's layout); the mask must be a prefix of
each row. Models know only tensors: which tokens surround a sentence ([BOS]/[EOS], as
ELMo's <S> </S>) is the task's choice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from attnkit.core.config import check, positive
from attnkit.data.tokenization import Tokenizer
from attnkit.models.base import AttnkitModel, ModelConfig, param
from attnkit.nn.attention import padding_mask
from attnkit.nn.dropout import Dropout
from attnkit.nn.fast_paths import Linear, linear
from attnkit.nn.layers import ScalarMix

__all__ = ["BiLM", "BiLMOutput", "ELMoConfig", "ELMoEmbedder", "boundary_ids", "reverse_padded"]


def boundary_ids(tokenizer: Tokenizer) -> tuple[int, int] | None:
    """([BOS] id, [EOS] id) a biLM reads each text between, when the tokenizer has both
    (attnkit's always do), else None: the texts are then read bare."""
    bos, eos = tokenizer.token_to_id("[BOS]"), tokenizer.token_to_id("[EOS]")
    return None if bos is None or eos is None else (bos, eos)


@dataclass
class ELMoConfig(ModelConfig):
    """``arch: elmo`` for task bilm: the two LSTM language models of ELMo."""

    model_type: ClassVar[str] = "bilm"
    KEY_HINTS: ClassVar[dict[str, str]] = {
        "emb_dim": "model.emb_dim is an LSTM translator's; a biLM's token width is model.d_model",
        "num_heads": "model.num_heads sizes a Transformer; a biLM has d_model, hidden_size "
        "and num_layers",
        "d_ff": "model.d_ff sizes a Transformer; a biLM has d_model, hidden_size and num_layers",
        "bidirectional": "a biLM is always bidirectional (two LSTM language models, "
        "one per direction)",
    }

    arch: str = param("elmo", "elmo")
    d_model: int = param(256, "token embedding width (also the tied softmax's width)")
    hidden_size: int = param(512, "LSTM state size of each direction (a layer is 2 x this)")
    num_layers: int = param(2, "stacked LSTM layers in each direction")
    dropout: float = param(
        0.1, "dropout on the token vectors, between layers and before the softmax"
    )
    residual: bool = param(True, "add each LSTM layer's input to its output from layer 2 on")
    tie_embeddings: bool = param(
        True, "the softmax reuses the input embedding (one softmax for both directions anyway)"
    )

    def validate(self) -> None:
        super().validate()
        check(
            positive("model.d_model", self.d_model),
            positive("model.hidden_size", self.hidden_size),
            positive("model.num_layers", self.num_layers),
            (0.0 <= self.dropout < 1.0, f"model.dropout must be in [0, 1), got {self.dropout!r}"),
        )

    @property
    def hidden_width(self) -> int:
        return self.hidden_size

    @property
    def output_dim(self) -> int:
        """Width of every layer of the representation (and of the ELMo vector)."""
        return 2 * self.hidden_size

    def describe(self) -> str:
        return f"elmo biLM, {self.num_layers} x {self.hidden_size} LSTM per direction"

    def build(self) -> BiLM:
        return BiLM(self)


@dataclass
class BiLMOutput:
    """What ``BiLM.forward`` returns.

    forward_logits: (B, T, V) at position t, scores for token t + 1 (from tokens <= t).
    backward_logits: (B, T, V) at position t, scores for token t - 1 (from tokens >= t).
    layers: num_layers + 1 tensors (B, T, 2 * hidden): [x; x], then [forward h_j; backward
        h_j] for each LSTM layer j (zeros at padding).
    mask: (B, T) bool, True on real tokens.
    """

    forward_logits: Tensor
    backward_logits: Tensor
    layers: list[Tensor]
    mask: Tensor


def reverse_padded(x: Tensor, lengths: Tensor) -> Tensor:
    """Reverse each row of x (B, T, ...) within its first ``lengths[b]`` positions; the
    positions after them (padding) stay where they are. Its own inverse."""
    b, t = x.shape[:2]
    pos = torch.arange(t, device=x.device).expand(b, t)
    lengths = lengths.to(x.device)[:, None]
    index = torch.where(pos < lengths, lengths - 1 - pos, pos)  # (B, T)
    index = index.reshape(b, t, *([1] * (x.dim() - 2))).expand_as(x)
    return x.gather(1, index)


class _LSTMStack(nn.Module):
    """``num_layers`` one-layer LSTMs (hidden -> hidden) over a packed sequence, with dropout
    between layers and ELMo's residual connection from the second layer on. Returns every
    layer's output (before dropout), packed."""

    def __init__(self, hidden: int, num_layers: int, dropout: float, residual: bool) -> None:
        super().__init__()
        self.layers = nn.ModuleList(
            nn.LSTM(hidden, hidden, batch_first=True) for _ in range(num_layers)
        )
        self.dropout = Dropout(dropout)
        self.residual = residual

    def forward(self, packed: PackedSequence) -> list[PackedSequence]:
        outputs = []
        inp = packed
        for j, lstm in enumerate(self.layers):
            out, _ = lstm(inp)
            data = out.data + inp.data if self.residual and j > 0 else out.data
            outputs.append(_with_data(packed, data))
            inp = _with_data(packed, self.dropout(data))  # (dropout between layers)
        return outputs


def _with_data(packed: PackedSequence, data: Tensor) -> PackedSequence:
    return PackedSequence(data, packed.batch_sizes, packed.sorted_indices, packed.unsorted_indices)


class BiLM(AttnkitModel):
    """ELMo's bidirectional language model (see the module docstring), built from an
    ``ELMoConfig``.

        model(input_ids (B, T), attention_mask (B, T) | None) -> BiLMOutput
        model.loss(input_ids, attention_mask) -> (forward NLL, backward NLL)
        model.encode(input_ids, attention_mask) -> (layers, mask)   (no softmax)
    """

    config_class: ClassVar[type[ModelConfig]] = ELMoConfig
    config: ELMoConfig

    def __init__(self, config: ELMoConfig | None = None, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        c = self.config
        self.pad_id, self.num_layers, self.hidden_size = c.pad_id, c.num_layers, c.hidden_size
        self.output_dim = 2 * c.hidden_size
        self.embed = nn.Embedding(c.vocab_size, c.d_model, padding_idx=c.pad_id)
        nn.init.normal_(self.embed.weight, std=c.d_model**-0.5)  # unit-size rows (tied softmax)
        with torch.no_grad():
            self.embed.weight[c.pad_id].zero_()
        widths_differ = c.hidden_size != c.d_model
        # the token vector x_k the LSTMs read, as wide as their states
        self.input_proj = Linear(c.d_model, c.hidden_size) if widths_differ else nn.Identity()
        self.dropout = Dropout(c.dropout)
        self.forward_lstm = _LSTMStack(c.hidden_size, c.num_layers, c.dropout, c.residual)
        self.backward_lstm = _LSTMStack(c.hidden_size, c.num_layers, c.dropout, c.residual)
        # one softmax for both directions
        if c.tie_embeddings:
            self.output_proj = Linear(c.hidden_size, c.d_model) if widths_differ else nn.Identity()
            self.softmax_bias = nn.Parameter(torch.zeros(c.vocab_size))
        else:
            self.output_proj = nn.Identity()
            self.softmax = Linear(c.hidden_size, c.vocab_size)

    # ------------------------------------------------------------------ pieces
    def real_token_mask(self, input_ids: Tensor, attention_mask: Tensor | None) -> Tensor:
        """(B, T) bool, True = real token; checked to be a prefix of each row."""
        if attention_mask is None:
            mask = padding_mask(input_ids, self.pad_id)
        else:
            if attention_mask.shape != input_ids.shape:
                raise ValueError(
                    f"attention_mask shape {tuple(attention_mask.shape)} does not match "
                    f"input_ids shape {tuple(input_ids.shape)}"
                )
            mask = attention_mask.bool()
        lengths = mask.sum(1, keepdim=True)
        if not torch.equal(mask, torch.arange(mask.size(1), device=mask.device) < lengths):
            raise ValueError("the biLM needs right padding: each mask row must be 1..1 0..0")
        return mask

    def token_vectors(self, input_ids: Tensor) -> Tensor:
        """x (B, T, hidden): the context-independent token representation (layer 0)."""
        return self.input_proj(self.embed(input_ids))

    def logits(self, states: Tensor) -> Tensor:
        """The shared softmax's scores (..., V) for top-layer states (..., hidden)."""
        h = self.output_proj(self.dropout(states))
        if self.config.tie_embeddings:
            return linear(h, self.embed.weight, self.softmax_bias, owner=self)
        return self.softmax(h)

    def _directions(
        self, input_ids: Tensor, attention_mask: Tensor | None
    ) -> tuple[Tensor, list[Tensor], list[Tensor], Tensor]:
        """(x, forward states per layer, backward states per layer, mask); every tensor
        (B, T, hidden) in the original order, zeros at padding."""
        mask = self.real_token_mask(input_ids, attention_mask)
        t = input_ids.size(1)
        lengths = mask.sum(1)
        x = self.token_vectors(input_ids) * mask[..., None]  # (B, T, hidden)
        x_in = self.dropout(x)
        cpu_lengths = lengths.clamp(min=1).cpu()  # (an empty row reads one pad, then is zeroed)

        def run(stack: _LSTMStack, inputs: Tensor) -> list[Tensor]:
            packed = pack_padded_sequence(
                inputs, cpu_lengths, batch_first=True, enforce_sorted=False
            )
            outs = [
                pad_packed_sequence(p, batch_first=True, total_length=t)[0] for p in stack(packed)
            ]
            return [o * mask[..., None] for o in outs]

        forward_states = run(self.forward_lstm, x_in)
        backward_states = [
            reverse_padded(h, lengths)
            for h in run(self.backward_lstm, reverse_padded(x_in, lengths))
        ]
        return x, forward_states, backward_states, mask

    @staticmethod
    def _layers(x: Tensor, fwd: list[Tensor], bwd: list[Tensor]) -> list[Tensor]:
        """[x; x], then [forward h_j; backward h_j] per layer: num_layers + 1 x (B, T, 2H)."""
        return [torch.cat([x, x], -1)] + [torch.cat(fb, -1) for fb in zip(fwd, bwd, strict=True)]

    # ------------------------------------------------------------------ API
    def encode(
        self, input_ids: Tensor, attention_mask: Tensor | None = None
    ) -> tuple[list[Tensor], Tensor]:
        """The representation without the softmax: (layers, mask) as in ``BiLMOutput``."""
        x, fwd, bwd, mask = self._directions(input_ids, attention_mask)
        return self._layers(x, fwd, bwd), mask

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> BiLMOutput:
        """input_ids (B, T) long; attention_mask (B, T), True = real token (None:
        ``input_ids != pad_id``), right padding."""
        x, fwd, bwd, mask = self._directions(input_ids, attention_mask)
        layers = self._layers(x, fwd, bwd)
        return BiLMOutput(self.logits(fwd[-1]), self.logits(bwd[-1]), layers, mask)

    def loss(
        self, input_ids: Tensor, attention_mask: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """(forward NLL, backward NLL), each the mean over the positions that have a target:
        the forward LM predicts token t + 1 at every real t but the last, the backward LM
        token t - 1 at every real t but the first. exp of each is its perplexity."""
        out = self(input_ids, attention_mask)
        return bilm_loss(out.forward_logits, out.backward_logits, input_ids, out.mask)


def bilm_loss(
    forward_logits: Tensor, backward_logits: Tensor, input_ids: Tensor, mask: Tensor
) -> tuple[Tensor, Tensor]:
    """Mean NLL of each direction over the real positions with a real target (see
    ``BiLM.loss``); 0 for a direction with no target in the batch."""
    pairs = mask[:, 1:] & mask[:, :-1]  # (B, T-1): real position t and real t + 1
    count = pairs.sum().clamp(min=1)

    def nll(logits: Tensor, targets: Tensor) -> Tensor:
        per_token = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")
        return (per_token * pairs).sum() / count

    forward = nll(forward_logits[:, :-1], input_ids[:, 1:])  # at t, token t + 1
    backward = nll(backward_logits[:, 1:], input_ids[:, :-1])  # at t + 1, token t
    return forward, backward


class ELMoEmbedder(nn.Module):
    """The feature-based use of ELMo: a frozen ``BiLM`` and a learned ``ScalarMix``,

        ELMo_k = gamma * sum_j softmax(s)_j * h_{k,j}          (B, T, 2 * hidden)

    Only s and gamma train; the biLM stays in eval mode (no dropout) whatever ``train()``
    says, and runs without gradients."""

    def __init__(self, bilm: BiLM) -> None:
        super().__init__()
        self.bilm = bilm.requires_grad_(False).eval()
        self.mix = ScalarMix(bilm.num_layers + 1)
        self.output_dim = bilm.output_dim

    def train(self, mode: bool = True) -> ELMoEmbedder:
        super().train(mode)
        self.bilm.eval()
        return self

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        """input_ids (B, T), attention_mask (B, T) | None -> ELMo vectors (B, T, 2 * hidden)
        (zeros at padding)."""
        with torch.no_grad():
            layers, _ = self.bilm.encode(input_ids, attention_mask)
        return self.mix(layers)

    def weights(self) -> tuple[list[float], float]:
        """(softmax(s) as a list, one weight per layer, token layer first; gamma)."""
        return self.mix.scalars.detach().softmax(0).tolist(), float(self.mix.gamma.detach())

"""GPT (Radford et al., 2018; GPT-2, 2019): a decoder-only Transformer language model, built
from attnkit's own layers.

    input_ids (B, T)
      -> token embedding + learned position embedding, Dropout        (B, T, d_model)
      -> num_layers pre-norm blocks (``attnkit.nn.layers.EncoderLayer`` with the look-ahead
         mask): x = x + Attn(LN(x)); x = x + FFN(LN(x))               (B, T, d_model)
      -> final LayerNorm                                               (B, T, d_model)
      -> LM head, tied to the token embedding: logits = h E^T         (B, T, vocab_size)

logits[:, t] scores token t + 1 given tokens 0..t: position t never sees a later token.

Padding. ``attention_mask`` (B, T) is True at real tokens (Hugging Face's convention);
position ids come from its cumulative sum (``cumsum - 1``, as Hugging Face's generation
does), so a row's first real token is at position 0 whether the batch is right-padded (as
for training: the padded positions' logits are ignored) or left-padded. ``generate`` takes
either and left-pads the prompts itself, so that every row's last prompt token is real and
new tokens follow it directly.

Caching. ``forward(..., cache=model.init_cache())`` fills a per-layer ``KVCache``; a later
call then passes only the new tokens (and an attention_mask covering cached + new ones).
``stepper(prompt)`` wraps that for ``attnkit.nn.generation`` (greedy, sampling, beam search).

On disk. ``save_pretrained`` writes a Hugging Face GPT-2 directory (config.json with
``n_embd``, ``n_layer``, ... and model.safetensors under GPT-2's names, attention as
fused ``Conv1D`` ``c_attn``) that ``transformers.GPT2LMHeadModel.from_pretrained`` reads;
``from_pretrained`` reads such a directory (or an attnkit training run). The one place that
knows GPT-2's names is ``attnkit.models.hf_gpt2``.

    model = GPT(GPTConfig.from_dict({"preset": "tiny", "vocab_size": 65, "max_len": 256}))
    logits = model(ids).logits                                  # (B, T, 65)
    new = model.eval().generate(prompt, max_new_tokens=100, top_k=40)
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnkit.core.config import ConfigError, check, positive, short_repr
from attnkit.models.base import AttnkitModel, ModelConfig, block_checks, param
from attnkit.models.hf_gpt2 import (
    check_hf_gpt2,
    gpt_config_from_hf,
    is_hf_gpt2_config,
    load_hf_gpt2,
    save_hf_gpt2,
)
from attnkit.models.saved import CONFIG_FILE
from attnkit.nn.attention import KVCache
from attnkit.nn.dropout import Dropout
from attnkit.nn.fast_decode import DecodePlan
from attnkit.nn.fast_paths import Linear
from attnkit.nn.generation import StepCallback, beam_search, sample
from attnkit.nn.layers import BlockConfig, Encoder, EncoderLayer, LearnedPositionalEmbedding

__all__ = [
    "PRESETS",
    "GPT",
    "GPTConfig",
    "GPTOutput",
    "GPTStepper",
    "left_pad",
    "positions_from_mask",
]

ACTIVATIONS = ("gelu_tanh", "gelu", "relu")
# model.preset -> sizes; small is GPT-2 small (124M parameters with its 50257 tokens)
PRESETS: dict[str, dict[str, int]] = {
    "tiny": {"num_layers": 2, "d_model": 64, "num_heads": 2, "d_ff": 256},
    "mini": {"num_layers": 4, "d_model": 128, "num_heads": 4, "d_ff": 512},
    "small": {"num_layers": 12, "d_model": 768, "num_heads": 12, "d_ff": 3072, "max_len": 1024},
}


@dataclass
class GPTConfig(ModelConfig):
    """``arch: gpt`` (task lm): a decoder-only Transformer, GPT-2's layout, in attnkit's
    names; ``attnkit.models.hf_gpt2`` maps them to GPT-2's config.json keys."""

    model_type: ClassVar[str] = "gpt"

    arch: str = param("gpt", "gpt")
    vocab_size: int = param(0, "token embedding rows (the tokenizer's vocabulary)", True)
    pad_id: int = param(0, "id that fills padded positions (never attended to)", True)
    max_len: int = param(256, "longest context: position embedding rows (n_positions)", True)
    eos_id: int | None = param(None, "end-of-text id: generation stops there (None: never)", True)
    d_model: int = param(128, "width of every position's vector (n_embd)")
    num_heads: int = param(4, "attention heads (d_model must be divisible by it)")
    d_ff: int = param(512, "inner width of the feed-forward network (n_inner; 4 d_model)")
    num_layers: int = param(4, "Transformer blocks (n_layer)")
    dropout: float = param(0.1, "dropout on embeddings and sublayer outputs")
    attention_dropout: float | None = param(None, "dropout on attention weights (None: dropout)")
    activation: str = param(
        "gelu_tanh", "feed-forward activation: gelu_tanh (GPT-2's) | gelu | relu"
    )
    layer_norm_eps: float = param(1e-5, "LayerNorm epsilon")
    bias: bool = param(
        True,
        "biases in the blocks' Linear and LayerNorm layers (false: none, nanoGPT's bias=False)",
    )
    tie_embeddings: bool = param(True, "the LM head is the token embedding (GPT's)")
    init_std: float = param(0.02, "std of the normal initialisation (initializer_range)")
    preset: str | None = param(
        None, "tiny (2 layers, d_model 64) | mini (4, 128) | small (GPT-2 small: 12, 768)"
    )

    @classmethod
    def from_dict(
        cls, raw: dict[str, Any], allow_derived: bool = True, ignore: frozenset[str] = frozenset()
    ) -> GPTConfig:
        """As ``ModelConfig.from_dict``; ``preset`` fills the sizes the section does not set
        (an explicit ``d_model`` etc. wins; small's max_len 1024 not in a recipe, where the
        task sets max_len). The keyword form ``GPTConfig(preset=...)`` does not apply it."""
        preset = raw.get("preset")
        if preset is not None:
            if not isinstance(preset, str) or preset not in PRESETS:
                raise ConfigError(
                    f"model.preset must be one of {', '.join(PRESETS)}, got {short_repr(preset)}"
                )
            sizes = dict(PRESETS[preset])
            if not allow_derived:  # a recipe: max_len is the task's (from data.max_len)
                sizes.pop("max_len", None)
            raw = {**sizes, **raw}
        return super().from_dict(raw, allow_derived=allow_derived, ignore=ignore)

    def validate(self) -> None:
        super().validate()
        filled = self.vocab_size != 0  # 0: a recipe's, before the task sets it from the data
        arch = type(self).__dataclass_fields__["arch"].default  # (a subclass names its own)
        check(
            positive("model.vocab_size", self.vocab_size) if filled else (True, ""),
            *block_checks(self),
        )
        check(
            positive("model.layer_norm_eps", self.layer_norm_eps),
            positive("model.init_std", self.init_std),
        )
        check(
            (arch == self.arch, f"model.arch must be {arch}, got {short_repr(self.arch)}"),
            (
                not filled or 0 <= self.pad_id < self.vocab_size,
                f"model.pad_id must be in [0, vocab_size), got {short_repr(self.pad_id)}",
            ),
            (
                not filled or self.eos_id is None or 0 <= self.eos_id < self.vocab_size,
                f"model.eos_id must be null or in [0, vocab_size), got {short_repr(self.eos_id)}",
            ),
            (
                self.activation in ACTIVATIONS,
                f"model.activation must be one of {', '.join(ACTIVATIONS)}, "
                f"got {short_repr(self.activation)}",
            ),
            (
                self.preset is None or self.preset in PRESETS,
                f"model.preset must be one of {', '.join(PRESETS)}, got {short_repr(self.preset)}",
            ),
        )

    def block(self) -> BlockConfig:
        """One pre-norm block, as GPT-2's."""
        return BlockConfig(
            d_model=self.d_model,
            num_heads=self.num_heads,
            d_ff=self.d_ff,
            dropout=self.dropout,
            attention_dropout=self.attention_dropout,
            activation=self.activation,
            norm_first=True,
            eps=self.layer_norm_eps,
            ffn_dropout=0.0,  # GPT-2 has no dropout inside the feed-forward (Hugging Face's neither)
            bias=self.bias,
        )

    def describe(self) -> str:
        return f"GPT ({self.num_layers} layers, d_model {self.d_model}, context {self.max_len})"

    def build(self) -> GPT:
        return GPT(self)

    @classmethod
    def is_foreign(cls, raw: Any) -> bool:
        """A Hugging Face GPT-2 config.json (``"model_type": "gpt2"``)."""
        return is_hf_gpt2_config(raw)

    @classmethod
    def read_foreign(cls, directory: Path, raw: Any) -> GPTConfig | None:
        """The config of a Hugging Face GPT-2 directory (its config.json's contents ``raw``),
        its sizes checked against its weights and the memory; None: not one."""
        if not cls.is_foreign(raw):
            return None
        config = gpt_config_from_hf(raw, GPTConfig, where=str(directory / CONFIG_FILE))
        check_hf_gpt2(directory, config)
        return config


@dataclass
class GPTOutput:
    """What ``GPT.forward`` returns (like Hugging Face's ``CausalLMOutputWithPast``).

    logits: (B, T, vocab_size) scores of the next token after each position.
    last_hidden_state: (B, T, d_model) the final LayerNorm's output (a classifier head
        reads it at the last real token, or its mean over real tokens).
    cache: the per-layer ``KVCache`` passed in, now holding these positions too (None
        without one).
    (The attention weights: ``attnkit.nn.capture``.)
    """

    logits: Tensor
    last_hidden_state: Tensor
    cache: list[KVCache] | None = None


def positions_from_mask(attention_mask: Tensor) -> Tensor:
    """(B, T) bool, True = real token -> (B, T) long: each real token's index among its
    row's real tokens (padding gets 0). Left and right padding alike."""
    positions = attention_mask.long().cumsum(-1) - 1
    return positions.clamp(min=0).masked_fill(~attention_mask, 0)


def left_pad(input_ids: Tensor, attention_mask: Tensor, pad_id: int) -> tuple[Tensor, Tensor]:
    """Move each row's real tokens to the end (left padding). input_ids, attention_mask
    (B, T) -> the same shapes; the real tokens keep their order (any padding side in)."""
    order = (~attention_mask).long().argsort(dim=1, descending=True, stable=True)  # pads first
    ids = input_ids.gather(1, order)
    mask = attention_mask.gather(1, order)
    return ids.masked_fill(~mask, pad_id), mask


class GPT(AttnkitModel):
    """Decoder-only Transformer language model (GPT-2's layout), from a ``GPTConfig``.

    Parameter names are attnkit's: ``tok_embed.weight``, ``pos.embedding.weight``,
    ``blocks.layers.{i}.self_attn.q_proj.weight`` ... ``blocks.norm.weight`` (the final
    LayerNorm), ``lm_head.weight`` (the token embedding itself when tied).
    """

    config_class: ClassVar[type[ModelConfig]] = GPTConfig
    config: GPTConfig
    returns_attention = True
    export_formats = ("int8", "hf")

    def __init__(self, config: GPTConfig | None = None, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        c = self.config
        self.pad_id, self.max_len, self.d_model = c.pad_id, c.max_len, c.d_model
        self.tok_embed = nn.Embedding(c.vocab_size, c.d_model)  # (GPT-2's wte; no pad row)
        self.pos = LearnedPositionalEmbedding(c.max_len, c.d_model)  # wpe
        self.dropout = Dropout(c.dropout)
        self.blocks = Encoder(c.block(), c.num_layers)  # pre-norm: ends in LayerNorm (ln_f)
        self.lm_head = Linear(c.d_model, c.vocab_size, bias=False)
        if c.tie_embeddings:
            self.lm_head.weight = self.tok_embed.weight
        self.apply(self._init_weights)
        # GPT-2: the projections into the residual stream scaled by 1/sqrt(2 num_layers)
        for module in self.blocks.layers:
            layer = cast(EncoderLayer, module)  # (an Encoder's ModuleList holds EncoderLayers)
            for linear in (layer.self_attn.out_proj, layer.ffn.linear2):
                nn.init.normal_(linear.weight, 0.0, c.init_std / math.sqrt(2 * c.num_layers))

    def _init_weights(self, module: nn.Module) -> None:
        """GPT-2's initialisation: N(0, init_std) weights, zero biases, LayerNorm 1 / 0."""
        std = self.config.init_std
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, 0.0, std)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            if module.bias is not None:
                nn.init.zeros_(module.bias)

    def init_cache(self) -> list[KVCache]:
        """An empty per-layer key/value cache for ``forward(..., cache=...)``."""
        return self.blocks.init_cache()

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        cache: list[KVCache] | None = None,
        position_ids: Tensor | None = None,
    ) -> GPTOutput:
        """input_ids (B, T) -> ``GPTOutput`` with logits (B, T, vocab_size).

        attention_mask: (B, T_total) True (or 1) = real token, T_total = cached + T; None:
            every token is real. position_ids: (B, T) (None: from attention_mask's
            cumulative sum, else cached + 0..T-1). cache: from ``init_cache()``; updated in
            place with these positions' keys/values (then pass only new tokens next time).
        """
        h = self.hidden_states(input_ids, attention_mask, cache, position_ids)
        return GPTOutput(self.lm_head(h), h, cache)

    def hidden_states(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        cache: list[KVCache] | None = None,
        position_ids: Tensor | None = None,
    ) -> Tensor:
        """``forward`` without the LM head: the final LayerNorm's output (B, T, d_model).
        What a classifier head reads (``attnkit.models.gpt_classifier``); the arguments are
        ``forward``'s."""
        b, t = input_ids.shape
        past = 0 if cache is None else len(cache[0])
        mask = None
        if attention_mask is not None:
            mask = attention_mask.bool()
            if mask.shape != (b, past + t):
                raise ValueError(
                    f"attention_mask must be (batch, cached + new) = {(b, past + t)}, "
                    f"got {tuple(mask.shape)}"
                )
            if not torch.compiler.is_exporting() and bool(mask.all()):
                mask = None  # no padding: the fused causal kernel (ONNX: always the mask)
        if position_ids is None:
            if mask is not None:
                position_ids = positions_from_mask(mask)[:, past:]
            else:
                position_ids = torch.arange(past, past + t, device=input_ids.device)[None, :]
        exporting = torch.compiler.is_exporting()  # a graph checks no values
        if not exporting and position_ids.numel() and int(position_ids.max()) >= self.max_len:
            raise ValueError(
                f"position {int(position_ids.max())} is past the context length "
                f"max_len={self.max_len}"
            )
        x = self.tok_embed(input_ids) + self.pos.embedding(position_ids)  # (B, T, d_model)
        x = self.dropout(x)
        return self.blocks(x, key_padding_mask=mask, is_causal=True, cache=cache)

    # ------------------------------------------------------------------ generation
    def stepper(
        self, input_ids: Tensor, attention_mask: Tensor | None = None, use_cache: bool = True
    ) -> GPTStepper:
        """An object for ``attnkit.nn.generation`` (greedy / sampling / beam search) that has
        read the prompt ``input_ids`` (B, T) except its last column, which the search then
        feeds as ``start``. The prompts must be left-padded (``left_pad``) so that the last
        column is real in every row."""
        return GPTStepper(self, input_ids, attention_mask, use_cache)

    @torch.no_grad()
    def generate(
        self,
        input_ids: Tensor,
        max_new_tokens: int = 50,
        attention_mask: Tensor | None = None,
        temperature: float = 1.0,
        top_k: int = 0,
        top_p: float = 1.0,
        repetition_penalty: float = 1.0,
        eos_id: int | None = None,
        stop: Sequence[Sequence[int]] | None = None,
        num_beams: int = 1,
        length_penalty: float = 1.0,
        use_cache: bool = True,
        generator: torch.Generator | None = None,
        on_step: StepCallback | None = None,
    ) -> Tensor:
        """Continue each prompt: input_ids (B, T) (or (T,)) -> the new tokens (B, <=
        max_new_tokens), ``pad_id`` after a row's EOS or stop sequence.

        attention_mask (B, T): True = real token; right or left padding (re-padded to the
        left here). temperature 0 is greedy; top_k / top_p filter before sampling;
        repetition_penalty > 1 discourages tokens already in the prompt or output.
        eos_id: None = the config's. stop: token sequences that end a row. num_beams > 1:
        beam search (needs an EOS id; temperature, top-k/p, repetition penalty and stop do
        not apply). Past max_len the context slides (the oldest tokens are dropped, the
        positions renumbered, the window recomputed). The model's train/eval mode is left
        as it is (call ``model.eval()`` first to switch dropout off). ``on_step(t, tokens
        so far, probs)`` sees each step (for streaming)."""
        if input_ids.dim() == 1:
            input_ids = input_ids[None, :]
        if input_ids.size(1) == 0:
            raise ValueError("generate needs a prompt of at least one token")
        eos_id = self.config.eos_id if eos_id is None else eos_id
        mask = None
        if attention_mask is not None:
            mask = attention_mask.bool().reshape(input_ids.shape)
            if not bool(mask.any(1).all()):
                raise ValueError("every prompt needs at least one real token")
            input_ids, mask = left_pad(input_ids, mask, self.pad_id)
        step = self.stepper(input_ids, mask, use_cache=use_cache)
        start = input_ids[:, -1]
        if num_beams > 1:
            if eos_id is None:
                raise ValueError("beam search needs an EOS id (eos_id or the config's eos_id)")
            result = beam_search(step, start, num_beams, max_new_tokens, eos_id, length_penalty)
            width = max((len(toks) for toks in result.tokens), default=0)
            out = torch.full((len(result.tokens), width), self.pad_id, dtype=torch.long)
            for i, toks in enumerate(result.tokens):
                out[i, : len(toks)] = torch.tensor(toks, dtype=torch.long)
            return out.to(input_ids.device)
        return sample(
            step,
            start,
            max_new_tokens,
            eos_id=eos_id,
            pad_id=self.pad_id,
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            generator=generator,
            on_step=on_step,
            repetition_penalty=repetition_penalty,
            context=input_ids[:, :-1],
            context_mask=None if mask is None else mask[:, :-1],
            stop=stop,
        )

    # ------------------------------------------------------------------ files
    def save_pretrained(self, directory: str | Path, labels: list[str] | None = None) -> Path:
        """Write a Hugging Face GPT-2 directory (config.json + model.safetensors under
        GPT-2's names) that ``transformers.GPT2LMHeadModel.from_pretrained`` reads (a
        language model has no ``labels``)."""
        if labels:
            raise ConfigError("a GPT language model has no class labels to save")
        return save_hf_gpt2(self, directory)

    @classmethod
    def from_pretrained(cls, directory: str | Path, map_location: str = "cpu") -> GPT:
        """Load a Hugging Face GPT-2 directory (config.json with ``"model_type": "gpt2"``,
        model.safetensors or pytorch_model.bin) or one in attnkit's format (a training
        run). In eval mode."""
        try:
            raw = json.loads((Path(directory) / CONFIG_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            raw = None
        if is_hf_gpt2_config(raw):
            model = load_hf_gpt2(directory, cls.config_class, map_location=map_location)
            if not isinstance(model, GPT):  # (what config_class builds)
                raise TypeError(f"{cls.config_class.__name__} does not build a GPT")
            return model
        return super().from_pretrained(directory, map_location=map_location)


class GPTStepper:
    """Feeds one new token per row per call (``attnkit.nn.generation``'s ``Stepper``).

    Made from the left-padded prompt (B, T): with the KV cache its first T - 1 tokens are
    read at once here, and each ``step`` costs one position; without the cache every step
    recomputes the whole sequence (for tests and benchmarks). Once the sequence outgrows
    ``max_len`` both keep only the last ``max_len`` tokens and recompute that window."""

    def __init__(
        self,
        model: GPT,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        use_cache: bool = True,
    ) -> None:
        self.model = model
        if attention_mask is None:
            mask = torch.ones_like(input_ids, dtype=torch.bool)
        else:
            mask = attention_mask.bool()
        if not bool(mask[:, -1].all()):
            raise ValueError("prompts must be left-padded: every row's last token must be real")
        # tokens and mask so far, without the last prompt token (the search's ``start``); a
        # prompt longer than the context keeps its last max_len tokens
        keep = model.max_len - 1
        self.ids, self.mask = input_ids[:, :-1][:, -keep:], mask[:, :-1][:, -keep:]
        if keep == 0:
            self.ids, self.mask = input_ids[:, :0], mask[:, :0]
        self.use_cache = use_cache
        self.cache: list[KVCache] | None = None
        # the decoding step without module calls (attnkit.nn.fast_decode), where it computes
        # what the modules do; next_pos (B, 1): the next token's position, None: count it
        self.plan = DecodePlan.build(model.blocks, model) if use_cache else None
        self.next_pos: Tensor | None = None
        self.all_real = bool(self.mask.all())
        if use_cache and self.ids.size(1):
            self._refill()

    def _refill(self) -> None:
        """A fresh cache holding ``self.ids`` (at most max_len - 1 of them)."""
        self.cache = self.model.init_cache()
        self.model.hidden_states(self.ids, self.mask, cache=self.cache)  # no logits needed
        self.next_pos = None
        self.all_real = bool(self.mask.all())  # (a slid window may have lost its padding)

    def step(self, tokens: Tensor) -> Tensor:
        """tokens (N,) -> next-token logits (N, V)."""
        new_mask = torch.ones_like(tokens, dtype=torch.bool)[:, None]
        ids = torch.cat([self.ids, tokens[:, None]], 1)
        mask = torch.cat([self.mask, new_mask], 1)
        max_len = self.model.max_len
        if ids.size(1) > max_len:  # slide the window: the cache no longer fits it
            ids, mask = ids[:, -max_len:], mask[:, -max_len:]
            self.cache = None
        if self.use_cache and self.cache is None and ids.size(1) > 1:
            self.ids, self.mask = ids[:, :-1], mask[:, :-1]
            self._refill()
        if self.use_cache:
            if self.cache is None:
                self.cache = self.model.init_cache()
            if self.plan is not None and self.plan.usable():
                logits = self._fast_step(tokens, mask, self.cache)
            else:
                logits = self.model(tokens[:, None], mask, cache=self.cache).logits
                self.next_pos = None
        else:
            logits = self.model(ids, mask).logits
        self.ids, self.mask = ids, mask
        return logits[:, -1]

    def _fast_step(self, tokens: Tensor, mask: Tensor, cache: list[KVCache]) -> Tensor:
        """``model(tokens[:, None], mask, cache=cache).logits`` (N, 1, V) by the model's
        ``DecodePlan``: the same positions (each row's count of real tokens so far), mask
        (None when every token is real, as ``hidden_states`` drops it) and layers."""
        assert self.plan is not None
        model = self.model
        if self.next_pos is None:  # the real tokens before the new one, per row
            self.next_pos = self.mask.sum(1, keepdim=True)
        position = self.next_pos  # (N, 1) (< max_len: the window slides before that)
        x = model.tok_embed(tokens[:, None]) + model.pos.embedding(position)  # (N, 1, d_model)
        h = self.plan.step(model.dropout(x), cache, None if self.all_real else mask)
        self.next_pos = position + 1
        return model.lm_head(h)

    def extend(self, other: GPTStepper) -> None:
        """Append ``other``'s rows (prompts another stepper of this model has read) after
        these: a prompt joins a running decoding between two tokens (continuous batching).
        Both histories are left-padded to the longer one (their cached keys/values with
        zeros, masked out) and positions count real tokens only, so each row goes on as it
        would alone (up to float rounding)."""
        if other.model is not self.model or other.use_cache != self.use_cache:
            raise ValueError("extend takes a stepper of the same model (and cache setting)")
        width = max(self.ids.size(1), other.ids.size(1))

        def pad(t: Tensor) -> Tensor:  # (B, T) -> (B, width); (B, H, T, d) -> (B, H, width, d)
            dims = (width - t.size(1), 0) if t.dim() == 2 else (0, 0, width - t.size(2), 0)
            return F.pad(t, dims)

        if self.use_cache and width:
            mine, theirs = self._kv(other), other._kv(self)
            self.cache = self.model.init_cache()
            for layer, (k, v), (k2, v2) in zip(self.cache, mine, theirs, strict=True):
                layer.key = torch.cat([pad(k), pad(k2)])
                layer.value = torch.cat([pad(v), pad(v2)])
        self.ids = torch.cat([pad(self.ids), pad(other.ids)])
        self.mask = torch.cat([pad(self.mask), pad(other.mask)])
        self.next_pos = None
        self.all_real = bool(self.mask.all())

    def _kv(self, other: GPTStepper) -> list[tuple[Tensor, Tensor]]:
        """Each layer's cached (key, value) (B, H, T, d_head), T the history's length; with
        nothing cached yet (a one-token prompt), empty ones shaped as ``other``'s."""
        if self.ids.size(1):
            assert self.cache is not None
            return [
                (c.key, c.value) for c in self.cache if c.key is not None and c.value is not None
            ]
        n = self.ids.size(0)
        return [
            (k.new_zeros(n, k.size(1), 0, k.size(3)), v.new_zeros(n, v.size(1), 0, v.size(3)))
            for k, v in other._kv(self)
        ]

    def reorder(self, index: Tensor) -> None:
        self.ids = self.ids.index_select(0, index)
        self.mask = self.mask.index_select(0, index)
        self.next_pos = None if self.next_pos is None else self.next_pos.index_select(0, index)
        if self.cache is not None:
            for layer in self.cache:
                layer.reorder(index)
        # the left columns that are padding in every row left (the longest one's history
        # may have gone, or a row that joined had a longer one): dropped, so that a batch
        # that rows keep joining is as wide as its longest history, never wider (past
        # max_len the window would slide and every step recompute it)
        real = self.mask.any(0)  # (T,)
        if real.numel() and not bool(real[0]):
            first = int(real.int().argmax()) if bool(real.any()) else real.numel()
            self.ids, self.mask = self.ids[:, first:], self.mask[:, first:]
            if self.cache is not None:
                for layer in self.cache:
                    layer.drop_front(first)
            self.all_real = bool(self.mask.all())

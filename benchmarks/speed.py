"""Speed against the peers (issue 17): attnkit vs transformers and torch.nn, interleaved.

    python benchmarks/speed.py                                 # everything (~10 min, 2 cores)
    python benchmarks/speed.py --only train --only infer --dtype fp32
    python benchmarks/speed.py --device cuda --name speed-cuda   # on a GPU (default: auto)
    python benchmarks/speed.py --iters 2 --batch 2 --seq 16 --shapes L1-H32-A2 \\
        --s2s-batch 2 --s2s-len 8 --gen-batches 1 --new-tokens 4 --json /tmp/speed.json

Each section builds attnkit's model and the peer's with the same shape and, where the
names map (``attnkit.models.hf_bert`` / ``hf_gpt2``, or by hand for ``torch.nn``), the same
weights; then, after warm-up, it alternates their timed iterations in one run (the order
rotates every iteration, so each goes first as often as the others) and reports median
milliseconds and ratio = peer ms / attnkit ms (> 1: attnkit is faster).

Sections (``--only``; all by default):

  peak      this machine's matmul peak: a ``--matmul-n`` cube (2048^3), fp32 and bf16, best
            of 5 (always measured: the FLOP/s fractions below divide by it).
  train     encoder training step (``--shapes``, default L4 H256 A4 and L6 H512 A8; seq 128,
            batch 32, vocab 30522): attnkit ``BertModel`` vs ``transformers.BertModel``
            (``attn_implementation="sdpa"``, same weights through ``models.hf_bert``) and vs
            BERT's embeddings + ``torch.nn.TransformerEncoder`` (batch_first, post-norm, gelu,
            dim_feedforward 4 d, same weights). Step = zero_grad, forward, MLM-like loss
            (15% of the real positions -> tied word embedding -> cross-entropy on random
            targets), backward, ``AdamW(lr=1e-4)`` step; train mode, dropout 0.1 (attention
            dropout too) where each model puts it: attnkit and transformers as BERT (13
            dropouts in 4 layers: embeddings, attention weights, sublayer outputs),
            torch.nn also inside every feed-forward (its fixed placement). One extra, labelled row: attnkit with
            attention_dropout=0 (what its recipes use: the fused kernel) against the same
            peer timings, which keep 0.1 -- not like for like.
  infer     encoder inference (same shapes, batch 1 and ``--batch``): eval mode,
            ``torch.inference_mode``, the last hidden state. On the CPU two labelled extra
            rows per batch: attnkit with int8 Linear layers, and attnkit's encoder exported
            to ONNX and run by onnxruntime (when installed), each against the peer's fp32.
  seq2seq   encoder-decoder training step, the multi30k-transformer recipe's model
            (configs/multi30k-transformer.yaml: 3+3 layers, d 256, 4 heads, d_ff 512, relu,
            joint vocabulary 10000 shared and tied), batch 64, source and target
            ``--s2s-len`` (24) tokens: attnkit ``Transformer`` vs the same embeddings around
            ``torch.nn.Transformer`` (batch_first; its final encoder/decoder LayerNorms
            removed, as the post-norm paper model has none); label-smoothed (0.1)
            cross-entropy, backward, AdamW.
  generate  greedy generation of ``--new-tokens`` (128) after a ``--prompt-tokens`` (16)
            random prompt, batch 1 and 8: ``GPT.generate`` (KV cache) vs
            ``transformers.GPT2LMHeadModel.generate`` (sdpa, use_cache) on the same random
            weights (``models.hf_gpt2``); whether both produced the same tokens is recorded.
            GPT ``--gpt-shape`` L4 H256 A4, ``--gpt-vocab`` 8000 (benchmarks/lm.py's
            generation default): with GPT-2's 50257 tokens the step at batch 1 is dominated
            by the LM head's memory-bound matrix-vector product, the same work in both.
            On the CPU a labelled extra row: attnkit with int8 Linear layers (LM head too).

``--device``: where models and batches go: ``auto`` (the default: ``cuda`` where PyTorch
sees a GPU, else ``cpu``), ``cpu``, ``cuda`` or ``cuda:N``. On a GPU every timed call ends
with ``torch.cuda.synchronize`` and bf16 autocasts on ``cuda``; the int8 / ONNX rows are
CPU-only. The record names the device and GPU.

``--dtype fp32|bf16|both``: bf16 = ``torch.autocast(device, torch.bfloat16)`` around the
forward and the loss, fp32 weights (as the Trainer's ``training.bf16``); generation runs in
fp32 only (torch.nn's inference fast path fails under CPU autocast, so with bf16 its
encoder infers with the fast path off, noted on those rows). Padding, the same for every
contender: every second row's last 10% of positions are padding (batch 1: none). Timed
iterations (+ warm-up): train 5 (+1), infer 30 (+3) at batch 1 and 6 (+1) at 32, seq2seq
8 (+1), generate 3 (+1); ``--iters`` / ``--warmup`` set them all.

FLOP/s: the model FLOPs of one timed call are counted once per configuration with
``torch.utils.flop_counter.FlopCounterMode`` on attnkit's model (forward + backward for a
training step, the optimizer's elementwise work not counted; the CPU fused attention kernel
counted with torch's SDPA formulas), and each contender's achieved FLOP/s = those FLOPs /
its median time, as a fraction of the measured matmul peak of the dtype. (For comparison,
the usual estimate of a training step is 6 x parameters in matmuls x tokens + attention.)

Writes benchmarks/results/speed.json (kind "speed_ratios": every row with attnkit's and
the peer's exact settings, ms, ratio, target, met), docs/speed_ratios.png (the ratios,
horizontal bars, targets marked) and rebuilds docs/results.md. ``--json PATH`` writes the
record to PATH and the plot beside it (PATH with .png) instead, touching neither results/
nor docs/; ``--no-publish`` only prints.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
import yaml
from torch import Tensor, nn
from torch.utils import flop_counter

from attnkit.interop.quantize import quantize_int8
from attnkit.models.bert import BertConfig, BertModel
from attnkit.models.gpt import GPT, GPTConfig
from attnkit.models.hf_bert import bert_config_to_hf
from attnkit.models.hf_bert import to_hf_state_dict as bert_to_hf
from attnkit.models.hf_gpt2 import gpt_config_to_hf
from attnkit.models.hf_gpt2 import to_hf_state_dict as gpt2_to_hf
from attnkit.models.transformer import Transformer, TransformerConfig
from attnkit.nn.attention import MultiHeadAttention
from attnkit.nn.layers import DecoderLayer, EncoderLayer, sinusoidal_encoding

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import ROOT, command_line, cpu_native_bf16, machine, publish  # noqa: E402

SECTIONS = ("peak", "train", "infer", "seq2seq", "generate")
CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")
S2S_RECIPE = "configs/multi30k-transformer.yaml"
PLOT = ROOT / "docs" / "speed_ratios.png"
LR = 1e-4
DROPOUT = 0.1
MLM_FRACTION = 0.15
PAD_FRACTION = 0.1
# (iterations, warm-up iterations) per section; --iters / --warmup override them all
ITERS = {"train": (5, 1), "infer1": (30, 3), "infer": (6, 1), "seq2seq": (8, 1), "generate": (3, 1)}
# targets of issue 17 (None: no target, the row is for information)
TARGETS = {"train_fp32": 1.2, "train_bf16": 1.4, "train_torch": 1.2, "infer1": 2.0, "gen1": 3.0}

PEER_BERT = "transformers.BertModel"
PEER_ENCODER = "torch.nn.TransformerEncoder"
PEER_S2S = "torch.nn.Transformer"
PEER_GPT2 = "transformers.GPT2LMHeadModel.generate"
# where every model and batch goes (--device; main() sets it): cpu, or cuda where there is one
DEVICE = torch.device("cpu")


def _sync() -> None:
    """Wait for the GPU's queued work (CUDA runs asynchronously); nothing on the CPU."""
    if DEVICE.type == "cuda":
        torch.cuda.synchronize(DEVICE)


# --------------------------------------------------------------------------------------
# Machine: flags, matmul peak
# --------------------------------------------------------------------------------------
def cpu_info() -> dict[str, Any]:
    """The CPU's model name and which of ``CPU_FLAGS`` /proc/cpuinfo lists."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        text = ""
    flags: set[str] = set()
    name = "unknown"
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags" and not flags:
            flags = set(value.split())
        elif key.strip() == "model name" and name == "unknown":
            name = value.strip()
    return {"model": name, "flags": {f: f in flags for f in CPU_FLAGS}}


def matmul_peak(dtype: torch.dtype, n: int = 2048, reps: int = 5) -> float:
    """FLOP/s of the fastest of ``reps`` (n x n) @ (n x n) products in ``dtype``."""
    g = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=g).to(DEVICE, dtype)
    b = torch.randn(n, n, generator=g).to(DEVICE, dtype)
    a @ b  # warm-up
    _sync()
    best = math.inf
    for _ in range(reps):
        start = time.perf_counter()
        a @ b
        _sync()
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best


# --------------------------------------------------------------------------------------
# Timing and FLOP counting
# --------------------------------------------------------------------------------------
def interleave(
    contenders: dict[str, Callable[[], object]], iters: int, warmup: int
) -> dict[str, list[float]]:
    """Milliseconds of ``iters`` calls of each contender, after ``warmup`` untimed ones;
    iteration i runs them in the order rotated by i (each goes first equally often)."""
    names = list(contenders)
    for _ in range(warmup):
        for name in names:
            contenders[name]()
    times: dict[str, list[float]] = {name: [] for name in names}
    for i in range(iters):
        k = i % len(names)
        for name in names[k:] + names[:k]:
            _sync()
            start = time.perf_counter()
            contenders[name]()
            _sync()  # a GPU's work is timed when it is done, not when it is queued
            times[name].append((time.perf_counter() - start) * 1e3)
    return times


def _sdpa_cpu(q, k, v, *args, out_shape=None, **kwargs) -> int:
    return flop_counter.sdpa_flop_count(q, k, v)


def _sdpa_cpu_backward(grad, q, k, v, *args, out_shape=None, **kwargs) -> int:
    return flop_counter.sdpa_backward_flop_count(grad, q, k, v)


# FlopCounterMode knows the CUDA attention kernels, not the CPU one: the same formulas
_CPU_SDPA = {
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: _sdpa_cpu,
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward: _sdpa_cpu_backward,
}


def count_flops(fn: Callable[[], object]) -> int:
    """FLOPs of one call of ``fn`` (matmuls and attention, forward and backward)."""
    with flop_counter.FlopCounterMode(display=False, custom_mapping=_CPU_SDPA) as counter:
        fn()
    return counter.get_total_flops()


def autocast(dtype: str) -> contextlib.AbstractContextManager:
    if dtype == "bf16":
        return torch.autocast(DEVICE.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def _transformers():
    try:
        import transformers
    except ImportError:
        raise SystemExit(
            "speed.py: error: the peers need transformers: pip install 'transformers>=4.40' "
            "(or pip install -e '.[dev]')"
        ) from None
    return transformers


# --------------------------------------------------------------------------------------
# Shapes and inputs
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Shape:
    """Turc et al.'s naming: L layers, H width, A heads; the feed-forward is 4 H wide."""

    layers: int
    d_model: int
    heads: int

    @classmethod
    def parse(cls, text: str) -> Shape:
        parts = dict((p[0].upper(), p[1:]) for p in text.replace(" ", "-").split("-") if p)
        try:
            return cls(int(parts["L"]), int(parts["H"]), int(parts["A"]))
        except (KeyError, ValueError):
            raise argparse.ArgumentTypeError(
                f"a shape is L<layers>-H<width>-A<heads>, got {text!r}"
            ) from None

    @property
    def d_ff(self) -> int:
        return 4 * self.d_model

    def __str__(self) -> str:
        return f"L{self.layers} H{self.d_model} A{self.heads}"


def padding_mask(batch: int, seq: int) -> Tensor:
    """(batch, seq) bool, True = real token: every second row ends in 10% padding."""
    mask = torch.ones(batch, seq, dtype=torch.bool)
    pads = max(1, math.ceil(PAD_FRACTION * seq)) if seq > 1 else 0
    if pads:
        mask[1::2, seq - pads :] = False
    return mask


@dataclass
class EncoderBatch:
    ids: Tensor  # (B, T), pad id 0 at padding
    mask: Tensor  # (B, T) bool, True = real
    mask_long: Tensor  # the same as 0/1 (Hugging Face's attention_mask)
    positions: Tensor  # (N,) flat indices of the MLM positions (real tokens only)
    targets: Tensor  # (N,) random target ids


def encoder_batch(batch: int, seq: int, vocab: int, seed: int = 0) -> EncoderBatch:
    g = torch.Generator().manual_seed(seed)
    mask = padding_mask(batch, seq)
    ids = torch.randint(1, vocab, (batch, seq), generator=g).masked_fill(~mask, 0)
    real = mask.flatten().nonzero().squeeze(1)
    n = max(1, round(MLM_FRACTION * real.numel()))
    positions = real[torch.randperm(real.numel(), generator=g)[:n]].sort().values
    targets = torch.randint(1, vocab, (n,), generator=g)
    parts = (ids, mask, mask.long(), positions, targets)
    return EncoderBatch(*(t.to(DEVICE) for t in parts))


# --------------------------------------------------------------------------------------
# Weight copies into torch.nn modules
# --------------------------------------------------------------------------------------
@torch.no_grad()
def copy_attention(ours: MultiHeadAttention, theirs: nn.MultiheadAttention) -> None:
    projections = (ours.q_proj, ours.k_proj, ours.v_proj)
    theirs.in_proj_weight.copy_(torch.cat([p.weight for p in projections]))
    theirs.in_proj_bias.copy_(torch.cat([p.bias for p in projections]))
    theirs.out_proj.load_state_dict(ours.out_proj.state_dict())


def copy_encoder_layer(ours: EncoderLayer, theirs: nn.TransformerEncoderLayer) -> None:
    copy_attention(ours.self_attn, theirs.self_attn)
    theirs.linear1.load_state_dict(ours.ffn.linear1.state_dict())
    theirs.linear2.load_state_dict(ours.ffn.linear2.state_dict())
    theirs.norm1.load_state_dict(ours.add_norm1.norm.state_dict())
    theirs.norm2.load_state_dict(ours.add_norm2.norm.state_dict())


def copy_decoder_layer(ours: DecoderLayer, theirs: nn.TransformerDecoderLayer) -> None:
    copy_attention(ours.self_attn, theirs.self_attn)
    copy_attention(ours.cross_attn, theirs.multihead_attn)
    theirs.linear1.load_state_dict(ours.ffn.linear1.state_dict())
    theirs.linear2.load_state_dict(ours.ffn.linear2.state_dict())
    theirs.norm1.load_state_dict(ours.add_norm1.norm.state_dict())
    theirs.norm2.load_state_dict(ours.add_norm2.norm.state_dict())
    theirs.norm3.load_state_dict(ours.add_norm3.norm.state_dict())


# --------------------------------------------------------------------------------------
# Encoders: attnkit BertModel, transformers BertModel, torch.nn.TransformerEncoder
# --------------------------------------------------------------------------------------
class TorchBert(nn.Module):
    """BERT's embeddings and pooler around ``torch.nn.TransformerEncoder`` (plain torch)."""

    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.word = nn.Embedding(c.vocab_size, c.d_model, padding_idx=c.pad_id)
        self.pos = nn.Embedding(c.max_len, c.d_model)
        self.segment = nn.Embedding(c.type_vocab_size, c.d_model)
        self.norm = nn.LayerNorm(c.d_model, eps=c.layer_norm_eps)
        self.dropout = nn.Dropout(c.dropout)
        layer = nn.TransformerEncoderLayer(**torch_layer_settings(c))
        self.encoder = nn.TransformerEncoder(layer, c.num_layers, enable_nested_tensor=True)
        self.pooler = nn.Linear(c.d_model, c.d_model)

    def forward(self, ids: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        t = ids.size(1)
        x = self.word(ids) + self.segment(torch.zeros_like(ids)) + self.pos.weight[:t]
        x = self.dropout(self.norm(x))
        x = self.encoder(x, src_key_padding_mask=~mask)
        return x, torch.tanh(self.pooler(x[:, 0]))

    @classmethod
    def like(cls, model: BertModel) -> TorchBert:
        """A ``TorchBert`` with ``model``'s weights."""
        peer = cls(model.config)
        e = model.embeddings
        peer.word.load_state_dict(e.word.state_dict())
        peer.pos.load_state_dict(e.pos.embedding.state_dict())
        peer.segment.load_state_dict(e.segment.embedding.state_dict())
        peer.norm.load_state_dict(e.norm.state_dict())
        for ours, theirs in zip(model.encoder.layers, peer.encoder.layers, strict=True):
            copy_encoder_layer(ours, theirs)
        peer.pooler.load_state_dict(model.pooler.state_dict())
        return peer


def torch_layer_settings(c: BertConfig) -> dict[str, Any]:
    return {
        "d_model": c.d_model,
        "nhead": c.num_heads,
        "dim_feedforward": c.d_ff,
        "dropout": c.dropout,
        "activation": "gelu",
        "layer_norm_eps": c.layer_norm_eps,
        "batch_first": True,
        "norm_first": False,
    }


def bert_config(shape: Shape, vocab: int, seq: int, attention_dropout: float) -> BertConfig:
    return BertConfig(
        vocab_size=vocab,
        max_len=max(512, seq),
        d_model=shape.d_model,
        num_heads=shape.heads,
        d_ff=shape.d_ff,
        num_layers=shape.layers,
        dropout=DROPOUT,
        attention_dropout=attention_dropout,
    )


def hf_bert_like(model: BertModel) -> nn.Module:
    """``transformers.BertModel`` (SDPA attention) with ``model``'s config and weights."""
    transformers = _transformers()
    config = transformers.BertConfig(**bert_config_to_hf(model.config), attn_implementation="sdpa")
    peer = transformers.BertModel(config)
    peer.load_state_dict(bert_to_hf(model), strict=True)
    return peer


@dataclass
class Encoderish:
    """One contender: the model, how it gives the last hidden state, its word embedding."""

    label: str
    settings: str
    model: nn.Module
    hidden: Callable[[EncoderBatch], Tensor]
    word: Callable[[], Tensor]


def build_encoders(shape: Shape, vocab: int, seq: int, with_ad0: bool) -> dict[str, Encoderish]:
    """attnkit's BERT, transformers' and torch.nn's with the same weights (and attnkit's
    with attention_dropout=0, same weights, with ``with_ad0``)."""
    torch.manual_seed(0)
    ours = BertModel(bert_config(shape, vocab, seq, DROPOUT))
    c = ours.config
    hf = hf_bert_like(ours)
    peer = TorchBert.like(ours)
    sizes = f"{shape}, d_ff {shape.d_ff}, vocab {vocab}, max_len {c.max_len}"
    layer = ", ".join(f"{k}={v!r}" for k, v in torch_layer_settings(c).items())
    found = {
        "attnkit": Encoderish(
            "attnkit",
            f"attnkit.models.bert.BertModel({sizes}, dropout={c.dropout}, "
            f"attention_dropout={c.attention_dropout}, layer_norm_eps={c.layer_norm_eps})",
            ours,
            lambda b: ours(b.ids, b.mask).last_hidden_state,
            lambda: ours.embeddings.word.weight,
        ),
        "transformers": Encoderish(
            PEER_BERT,
            f"transformers {_transformers().__version__}: BertModel(BertConfig({sizes}, "
            f"hidden_dropout_prob={c.dropout}, attention_probs_dropout_prob="
            f"{c.attention_dropout}, layer_norm_eps={c.layer_norm_eps}, hidden_act='gelu'), "
            "attn_implementation='sdpa'), called with input_ids and attention_mask (0/1 long)",
            hf,
            lambda b: hf(input_ids=b.ids, attention_mask=b.mask_long).last_hidden_state,
            lambda: hf.embeddings.word_embeddings.weight,
        ),
        "torch": Encoderish(
            PEER_ENCODER,
            f"BERT's embeddings + nn.TransformerEncoder(nn.TransformerEncoderLayer({layer}), "
            f"num_layers={shape.layers}, enable_nested_tensor=True) + pooler, "
            "src_key_padding_mask = ~mask",
            peer,
            lambda b: peer(b.ids, b.mask)[0],
            lambda: peer.word.weight,
        ),
    }
    if with_ad0:
        ad0 = BertModel(c.replace(attention_dropout=0.0))
        ad0.load_state_dict(ours.state_dict())
        found["attnkit_ad0"] = Encoderish(
            "attnkit attention_dropout=0",
            found["attnkit"].settings.replace("attention_dropout=0.1", "attention_dropout=0.0"),
            ad0,
            lambda b: ad0(b.ids, b.mask).last_hidden_state,
            lambda: ad0.embeddings.word.weight,
        )
    for enc in found.values():
        enc.model.to(DEVICE)  # (in place: the lambdas above see the moved modules)
    return found


def mlm_loss(hidden: Tensor, word: Tensor, b: EncoderBatch) -> Tensor:
    """Cross-entropy of the tied-embedding logits at the MLM positions vs random targets."""
    h = hidden.flatten(0, 1)[b.positions]  # (N, d)
    return F.cross_entropy((h @ word.t()).float(), b.targets)


def encoder_train_step(
    enc: Encoderish, b: EncoderBatch, dtype: str
) -> tuple[Callable[[], None], Callable[[], None]]:
    """(one training step, the same step's forward + backward without the optimizer)."""
    enc.model.train()
    opt = torch.optim.AdamW(enc.model.parameters(), lr=LR)

    def forward_backward() -> None:
        with autocast(dtype):
            loss = mlm_loss(enc.hidden(b), enc.word(), b)
        loss.backward()

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        forward_backward()
        opt.step()

    def counted() -> None:
        forward_backward()
        opt.zero_grad(set_to_none=True)

    return step, counted


# torch.nn's inference fast path (torch._transformer_encoder_layer_fwd) is not switched off
# by CPU autocast and then fails ("expected scalar type Float but found BFloat16"): with
# bf16 the peer runs with it off, as torch.backends.mha.set_fastpath_enabled(False) does
TORCH_BF16_INFER_NOTE = (
    "bf16: torch.nn's fast path off (torch.backends.mha.set_fastpath_enabled(False)); under "
    "CPU autocast it fails with 'expected scalar type Float but found BFloat16'"
)


@contextlib.contextmanager
def mha_fastpath(enabled: bool) -> Iterator[None]:
    before = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(enabled)
    try:
        yield
    finally:
        torch.backends.mha.set_fastpath_enabled(before)


def encoder_infer(enc: Encoderish, b: EncoderBatch, dtype: str) -> Callable[[], Tensor]:
    enc.model.eval()
    fastpath = not (dtype == "bf16" and isinstance(enc.model, TorchBert))

    def run() -> Tensor:
        with torch.inference_mode(), autocast(dtype), mha_fastpath(fastpath):
            return enc.hidden(b)

    return run


# --------------------------------------------------------------------------------------
# Encoder-decoder: attnkit Transformer vs torch.nn.Transformer
# --------------------------------------------------------------------------------------
def s2s_config(recipe: str = S2S_RECIPE) -> TransformerConfig:
    """The recipe's model (its vocabulary: the tokenizer's size; max_len: data.max_len)."""
    raw = yaml.safe_load((ROOT / recipe).read_text(encoding="utf-8"))
    model = {
        **raw["model"],
        "vocab_size": raw["tokenizer"]["vocab_size"],
        "max_len": raw["data"]["max_len"],
        "pad_id": 0,
    }
    return TransformerConfig.from_dict(model)


class TorchSeq2Seq(nn.Module):
    """The same embeddings (shared, x sqrt(d), sinusoidal positions, dropout) and tied
    output projection around ``torch.nn.Transformer``."""

    def __init__(self, c: TransformerConfig) -> None:
        super().__init__()
        self.embed = nn.Embedding(c.vocab_size, c.d_model, padding_idx=c.pad_id)
        self.register_buffer("pe", sinusoidal_encoding(c.max_len, c.d_model), persistent=False)
        self.scale = math.sqrt(c.d_model)
        self.dropout = nn.Dropout(c.dropout)
        self.transformer = nn.Transformer(**torch_s2s_settings(c))
        # post-norm: the paper's model (and attnkit's) has no LayerNorm after each stack
        self.transformer.encoder.norm = None
        self.transformer.decoder.norm = None

    def forward(self, src: Tensor, tgt: Tensor, src_mask: Tensor, tgt_mask: Tensor) -> Tensor:
        x = self.dropout(self.embed(src) * self.scale + self.pe[: src.size(1)])
        y = self.dropout(self.embed(tgt) * self.scale + self.pe[: tgt.size(1)])
        t = tgt.size(1)
        causal = torch.ones(t, t, dtype=torch.bool, device=tgt.device).triu(1)  # True = hidden
        out = self.transformer(
            x,
            y,
            tgt_mask=causal,
            src_key_padding_mask=~src_mask,
            tgt_key_padding_mask=~tgt_mask,
            memory_key_padding_mask=~src_mask,
            tgt_is_causal=True,
        )
        return F.linear(out, self.embed.weight)

    @classmethod
    def like(cls, model: Transformer) -> TorchSeq2Seq:
        peer = cls(model.config)
        peer.embed.load_state_dict(model.src_embed.embedding.state_dict())
        enc, dec = peer.transformer.encoder.layers, peer.transformer.decoder.layers
        for ours, theirs in zip(model.encoder.layers, enc, strict=True):
            copy_encoder_layer(ours, theirs)
        for ours, theirs in zip(model.decoder.layers, dec, strict=True):
            copy_decoder_layer(ours, theirs)
        return peer


def torch_s2s_settings(c: TransformerConfig) -> dict[str, Any]:
    return {
        "d_model": c.d_model,
        "nhead": c.num_heads,
        "num_encoder_layers": c.num_layers,
        "num_decoder_layers": c.num_decoder_layers or c.num_layers,
        "dim_feedforward": c.d_ff,
        "dropout": c.dropout,
        "activation": c.activation,
        "batch_first": True,
        "norm_first": c.norm_first,
    }


@dataclass
class Seq2SeqBatch:
    src: Tensor
    src_mask: Tensor
    tgt_in: Tensor
    tgt_mask: Tensor
    tgt_out: Tensor


def s2s_batch(batch: int, length: int, vocab: int, seed: int = 0) -> Seq2SeqBatch:
    g = torch.Generator().manual_seed(seed)
    src_mask, tgt_mask = padding_mask(batch, length), padding_mask(batch, length)
    src = torch.randint(4, vocab, (batch, length), generator=g).masked_fill(~src_mask, 0)
    tgt_in = torch.randint(4, vocab, (batch, length), generator=g).masked_fill(~tgt_mask, 0)
    tgt_out = torch.randint(4, vocab, (batch, length), generator=g).masked_fill(~tgt_mask, 0)
    parts = (src, src_mask, tgt_in, tgt_mask, tgt_out)
    return Seq2SeqBatch(*(t.to(DEVICE) for t in parts))


def s2s_train_step(
    model: nn.Module, logits: Callable[[Seq2SeqBatch], Tensor], b: Seq2SeqBatch, dtype: str
) -> tuple[Callable[[], None], Callable[[], None]]:
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=LR)

    def forward_backward() -> None:
        with autocast(dtype):
            out = logits(b)
            loss = F.cross_entropy(
                out.flatten(0, 1).float(), b.tgt_out.flatten(), ignore_index=0, label_smoothing=0.1
            )
        loss.backward()

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        forward_backward()
        opt.step()

    def counted() -> None:
        forward_backward()
        opt.zero_grad(set_to_none=True)

    return step, counted


def build_s2s(config: TransformerConfig) -> tuple[Transformer, TorchSeq2Seq]:
    torch.manual_seed(0)
    ours = Transformer(config)
    peer = TorchSeq2Seq.like(ours)  # (copied on the CPU, then both moved)
    return ours.to(DEVICE), peer.to(DEVICE)


# --------------------------------------------------------------------------------------
# Generation: attnkit GPT (KV cache) vs transformers GPT2LMHeadModel.generate
# --------------------------------------------------------------------------------------
def build_gpts(shape: Shape, vocab: int, max_len: int) -> tuple[GPT, nn.Module]:
    """A random attnkit GPT and ``transformers.GPT2LMHeadModel`` with its weights."""
    transformers = _transformers()
    torch.manual_seed(0)
    config = GPTConfig(
        vocab_size=vocab,
        max_len=max_len,
        d_model=shape.d_model,
        num_heads=shape.heads,
        d_ff=shape.d_ff,
        num_layers=shape.layers,
        dropout=DROPOUT,
    )
    ours = GPT(config).eval()
    peer = transformers.GPT2LMHeadModel(
        transformers.GPT2Config(**gpt_config_to_hf(config), attn_implementation="sdpa")
    )
    result = peer.load_state_dict(gpt2_to_hf(ours), strict=False)
    assert result.missing_keys == ["lm_head.weight"] and not result.unexpected_keys, result
    assert peer.lm_head.weight.data_ptr() == peer.transformer.wte.weight.data_ptr()  # tied
    return ours.to(DEVICE), peer.eval().to(DEVICE)


def generate_calls(
    ours: GPT, peer: nn.Module, prompt: Tensor, new_tokens: int
) -> dict[str, Callable[[], Tensor]]:
    """Each contender's greedy generation of exactly ``new_tokens`` tokens (B, new_tokens)."""
    ones = torch.ones_like(prompt)
    p = prompt.size(1)

    def attnkit() -> Tensor:
        return ours.generate(prompt, max_new_tokens=new_tokens, temperature=0.0)

    def transformers() -> Tensor:
        out = peer.generate(
            prompt,
            attention_mask=ones,
            max_new_tokens=new_tokens,
            do_sample=False,
            num_beams=1,
            use_cache=True,
            pad_token_id=0,
            eos_token_id=None,
        )
        return out[:, p:]

    return {"attnkit": attnkit, "transformers": transformers}


GEN_PEER_SETTINGS = (
    "GPT2LMHeadModel(GPT2Config(same sizes, n_inner 4 d, activation gelu_new, dropout 0.1), "
    "attn_implementation='sdpa').eval().generate(input_ids, attention_mask=ones, "
    "max_new_tokens=N, do_sample=False, num_beams=1, use_cache=True, pad_token_id=0, "
    "eos_token_id=None)"
)


# --------------------------------------------------------------------------------------
# Rows
# --------------------------------------------------------------------------------------
def median(xs: list[float]) -> float:
    return statistics.median(xs)


def make_row(
    section: str,
    what: str,
    shape: str,
    dtype: str,
    batch: int,
    ours: tuple[str, str, list[float]],
    peer: tuple[str, str, list[float]],
    target: float | None,
    flops: int | None,
    peak: dict[str, float],
    warmup: int,
    **extra: Any,
) -> dict[str, Any]:
    """One comparison: (label, settings, ms list) of attnkit and of the peer."""
    a_ms, p_ms = median(ours[2]), median(peer[2])
    ratio = p_ms / a_ms
    row: dict[str, Any] = {
        "section": section,
        "what": what,
        "shape": shape,
        "dtype": dtype,
        "batch": batch,
        "attnkit": ours[0],
        "attnkit_settings": ours[1],
        "attnkit_ms": round(a_ms, 3),
        "peer": peer[0],
        "peer_settings": peer[1],
        "peer_ms": round(p_ms, 3),
        "ratio": round(ratio, 3),
        "target": target,
        "met": None if target is None else bool(ratio >= target),
        "iters": len(ours[2]),
        "warmup": warmup,
    }
    if flops:
        row["flops"] = flops  # one call, counted on attnkit's model
        row["attnkit_peak_fraction"] = round(flops / (a_ms / 1e3) / peak[dtype], 4)
        row["peer_peak_fraction"] = round(flops / (p_ms / 1e3) / peak[dtype], 4)
    row.update(extra)
    return row


def _log(*parts: Any) -> None:
    print(*parts, flush=True)


def _print_row(row: dict[str, Any]) -> None:
    met = "" if row["met"] is None else (" (met)" if row["met"] else " (below target)")
    _log(
        f"  {row['section']:8} {row['shape']:>28} {row['dtype']} b{row['batch']:<3} "
        f"{row['attnkit']} {row['attnkit_ms']:.1f} ms vs {row['peer']} {row['peer_ms']:.1f} ms "
        f"-> {row['ratio']:.2f}x"
        + (f", target {row['target']}x{met}" if row["target"] is not None else "")
    )


def _iters(args: argparse.Namespace, key: str) -> tuple[int, int]:
    iters, warmup = ITERS[key]
    return (args.iters or iters, warmup if args.warmup is None else args.warmup)


# --------------------------------------------------------------------------------------
# Sections
# --------------------------------------------------------------------------------------
def run_train(args: argparse.Namespace, peak: dict[str, float]) -> list[dict]:
    rows = []
    iters, warmup = _iters(args, "train")
    for shape in args.shapes:
        encs = build_encoders(shape, args.vocab, args.seq, with_ad0=args.attention_dropout_row)
        b = encoder_batch(args.batch, args.seq, args.vocab)
        flops = None
        for dtype in args.dtypes:
            steps = {}
            for key, enc in encs.items():
                steps[key], counted = encoder_train_step(enc, b, dtype)
                if key == "attnkit" and flops is None:
                    flops = count_flops(counted)  # (the same in fp32 and bf16)
            times = interleave(steps, iters, warmup)
            where = f"{shape}, seq {args.seq}"
            what = "encoder training step"
            ours = (encs["attnkit"].label, encs["attnkit"].settings, times["attnkit"])
            for key, target in (
                ("transformers", TARGETS[f"train_{dtype}"]),
                ("torch", TARGETS["train_torch"]),
            ):
                peer = (encs[key].label, encs[key].settings, times[key])
                emulated = dtype == "bf16" and DEVICE.type == "cpu" and not cpu_native_bf16()
                note = {"note": "this CPU has no native bf16 (emulated)"} if emulated else {}
                rows.append(
                    make_row(
                        "train",
                        what,
                        where,
                        dtype,
                        args.batch,
                        ours,
                        peer,
                        target,
                        flops,
                        peak,
                        warmup,
                        **note,
                    )
                )
                _print_row(rows[-1])
            if "attnkit_ad0" in encs:
                e, hf = encs["attnkit_ad0"], encs["transformers"]
                rows.append(
                    make_row(
                        "train",
                        what,
                        where,
                        dtype,
                        args.batch,
                        (e.label, e.settings, times["attnkit_ad0"]),
                        (hf.label, hf.settings, times["transformers"]),
                        None,
                        flops,
                        peak,
                        warmup,
                        note="not like for like: attnkit without attention dropout (its "
                        "recipes' setting, the fused attention kernel) vs the peer with 0.1",
                    )
                )
                _print_row(rows[-1])
    return rows


def int8_encoder(enc: Encoderish) -> Encoderish:
    """A copy of attnkit's encoder with every Linear dynamically quantized to int8."""
    model = quantize_int8(copy.deepcopy(enc.model))
    return Encoderish(
        "attnkit int8",
        enc.settings + " with attnkit.interop.quantize.quantize_int8 (dynamic int8 Linear layers, "
        "weights per output channel)",
        model,
        lambda b: model(b.ids, b.mask).last_hidden_state,
        lambda: model.embeddings.word.weight,
    )


def int8_row(
    shape: Shape,
    args: argparse.Namespace,
    batch: int,
    int8: Encoderish,
    times: dict[str, list[float]],
    encs: dict[str, Encoderish],
    b: EncoderBatch,
    warmup: int,
) -> dict[str, Any]:
    """attnkit int8 against the peer in fp32: a labelled extra row, no target (another
    precision), with how close int8's hidden states stay to attnkit's fp32 ones."""
    with torch.inference_mode():
        ref, got = encs["attnkit"].hidden(b)[b.mask], int8.hidden(b)[b.mask]
    cos = F.cosine_similarity(ref, got, dim=-1).min().item()
    peer = encs["transformers"]
    return make_row(
        "infer",
        "encoder inference (eval, inference_mode)",
        f"{shape}, seq {args.seq}",
        "int8",
        batch,
        (int8.label, int8.settings, times["int8"]),
        (peer.label, peer.settings + " (fp32)", times["transformers"]),
        None,
        None,
        {},
        warmup,
        note=f"int8 vs the peer's fp32, not like for like; per-token cosine to attnkit fp32 "
        f">= {cos:.5f}",
        int8_min_cosine=round(cos, 6),
    )


class _Hidden(nn.Module):
    """BertModel's last hidden state from (input_ids, attention_mask 0/1): what is traced."""

    def __init__(self, model: BertModel) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: Tensor, attention_mask: Tensor) -> tuple[Tensor]:
        return (self.model(input_ids, attention_mask.bool()).last_hidden_state,)


def onnx_encoder(enc: Encoderish, b: EncoderBatch, folder: Path) -> Encoderish | None:
    """attnkit's encoder exported with ``attnkit.interop.onnx.trace_to_onnx`` (what `attnkit
    export --format onnx` does) and run by onnxruntime; None without onnxruntime."""
    try:
        import onnxruntime  # noqa: F401

        from attnkit.interop.onnx import OnnxModel, trace_to_onnx
    except ImportError:
        _log("no onnxruntime: the ONNX rows are skipped (pip install 'attnkit[onnx]')")
        return None
    path = folder / "encoder.onnx"
    example = {"input_ids": b.ids, "attention_mask": b.mask_long}
    diff = trace_to_onnx(_Hidden(enc.model).eval(), example, ["hidden"], path, enc.model.max_len)
    model = OnnxModel(path, list(example), ["hidden"])
    return Encoderish(
        "attnkit ONNX",
        f"{enc.settings} exported by attnkit.interop.onnx.trace_to_onnx (torch.onnx dynamo "
        f"exporter, opset 18) and run by onnxruntime {_onnxruntime_version()} "
        f"(CPUExecutionProvider, {torch.get_num_threads()} intra-op threads); largest "
        f"difference from PyTorch's output {diff:.1e}",
        model,
        lambda b: model.run({"input_ids": b.ids, "attention_mask": b.mask_long})[0],
        lambda: enc.model.embeddings.word.weight,
    )


def _onnxruntime_version() -> str:
    import onnxruntime

    return onnxruntime.__version__


def run_infer(args: argparse.Namespace, peak: dict[str, float]) -> list[dict]:
    rows = []
    tmp = tempfile.TemporaryDirectory(prefix="attnkit-speed-onnx-")
    for shape in args.shapes:
        encs = build_encoders(shape, args.vocab, args.seq, with_ad0=False)
        on_cpu = DEVICE.type == "cpu"  # int8 and onnxruntime rows: CPU inference
        int8 = int8_encoder(encs["attnkit"]) if on_cpu else None
        onnx = None
        if on_cpu:
            example = encoder_batch(2, args.seq, args.vocab)
            onnx = onnx_encoder(encs["attnkit"], example, Path(tmp.name))
        for batch in dict.fromkeys((1, args.batch)):
            iters, warmup = _iters(args, "infer1" if batch == 1 else "infer")
            b = encoder_batch(batch, args.seq, args.vocab)
            flops = count_flops(encoder_infer(encs["attnkit"], b, "fp32"))
            for dtype in args.dtypes:
                calls = {k: encoder_infer(e, b, dtype) for k, e in encs.items()}
                if int8 is not None and dtype == "fp32":  # + attnkit int8, timed alongside
                    calls["int8"] = encoder_infer(int8, b, "fp32")
                    if onnx is not None:  # + attnkit's ONNX export in onnxruntime
                        calls["onnx"] = encoder_infer(onnx, b, "fp32")
                times = interleave(calls, iters, warmup)
                ours = (encs["attnkit"].label, encs["attnkit"].settings, times["attnkit"])
                if int8 is not None and dtype == "fp32":
                    rows.append(int8_row(shape, args, batch, int8, times, encs, b, warmup))
                    _print_row(rows[-1])
                    if onnx is not None:
                        rows.append(onnx_row(shape, args, batch, onnx, times, encs, flops, peak))
                        _print_row(rows[-1])
                for key in ("transformers", "torch"):
                    e = encs[key]
                    bf16_torch = key == "torch" and dtype == "bf16"
                    note = {"note": TORCH_BF16_INFER_NOTE} if bf16_torch else {}
                    rows.append(
                        make_row(
                            "infer",
                            "encoder inference (eval, inference_mode)",
                            f"{shape}, seq {args.seq}",
                            dtype,
                            batch,
                            ours,
                            (e.label, e.settings, times[key]),
                            TARGETS["infer1"] if batch == 1 else None,
                            flops,
                            peak,
                            warmup,
                            **note,
                        )
                    )
                    _print_row(rows[-1])
    tmp.cleanup()
    return rows


def onnx_row(
    shape: Shape,
    args: argparse.Namespace,
    batch: int,
    onnx: Encoderish,
    times: dict[str, list[float]],
    encs: dict[str, Encoderish],
    flops: int,
    peak: dict[str, float],
) -> dict[str, Any]:
    """attnkit's ONNX export in onnxruntime against the peer in PyTorch, both fp32: a
    labelled extra row (another runtime), no target."""
    peer = encs["transformers"]
    return make_row(
        "infer",
        "encoder inference (eval, inference_mode)",
        f"{shape}, seq {args.seq}",
        "fp32",
        batch,
        (onnx.label, onnx.settings, times["onnx"]),
        (peer.label, peer.settings, times["transformers"]),
        None,
        flops,
        peak,
        _iters(args, "infer1" if batch == 1 else "infer")[1],
        note="another runtime: attnkit's ONNX export in onnxruntime vs the peer in PyTorch",
        attnkit_pytorch_ms=round(median(times["attnkit"]), 3),
    )


def run_seq2seq(args: argparse.Namespace, peak: dict[str, float]) -> list[dict]:
    rows = []
    iters, warmup = _iters(args, "seq2seq")
    config = s2s_config(args.s2s_recipe)
    ours, peer = build_s2s(config)
    b = s2s_batch(args.s2s_batch, args.s2s_len, config.vocab_size)
    logits = {
        "attnkit": lambda x: ours(x.src, x.tgt_in, x.src_mask, x.tgt_mask).logits,
        "torch": lambda x: peer(x.src, x.tgt_in, x.src_mask, x.tgt_mask),
    }
    c = config
    sizes = (
        f"{c.num_layers}+{c.num_decoder_layers} layers, d_model {c.d_model}, {c.num_heads} "
        f"heads, d_ff {c.d_ff}, {c.activation}, vocab {c.vocab_size} shared + tied"
    )
    settings = {
        "attnkit": f"attnkit.models.transformer.Transformer({sizes}, dropout {c.dropout}, "
        f"sinusoidal positions) from {args.s2s_recipe}",
        "torch": "the same embeddings + nn.Transformer("
        + ", ".join(f"{k}={v!r}" for k, v in torch_s2s_settings(c).items())
        + ") with encoder.norm = decoder.norm = None, tgt_mask = bool causal mask, "
        "tgt_is_causal=True, src/tgt/memory key padding masks",
    }
    flops = None
    for dtype in args.dtypes:
        steps = {}
        for key, model in (("attnkit", ours), ("torch", peer)):
            steps[key], counted = s2s_train_step(model, logits[key], b, dtype)
            if key == "attnkit" and flops is None:
                flops = count_flops(counted)
        times = interleave(steps, iters, warmup)
        rows.append(
            make_row(
                "seq2seq",
                "encoder-decoder training step (multi30k-transformer)",
                f"{c.num_layers}+{c.num_decoder_layers} x H{c.d_model} A{c.num_heads} "
                f"ff{c.d_ff}, src/tgt {args.s2s_len}",
                dtype,
                args.s2s_batch,
                ("attnkit", settings["attnkit"], times["attnkit"]),
                (PEER_S2S, settings["torch"], times["torch"]),
                None,
                flops,
                peak,
                warmup,
            )
        )
        _print_row(rows[-1])
    return rows


def run_generate(args: argparse.Namespace, peak: dict[str, float]) -> list[dict]:
    rows = []
    iters, warmup = _iters(args, "generate")
    warmup = max(1, warmup)  # the first call of each is untimed: it gives the tokens compared
    shape = args.gpt_shape
    max_len = max(256, args.prompt_tokens + args.new_tokens)
    ours, peer = build_gpts(shape, args.gpt_vocab, max_len)
    settings = (
        f"attnkit.models.gpt.GPT({shape}, d_ff {shape.d_ff}, vocab {args.gpt_vocab}, max_len "
        f"{max_len}, gelu_tanh).eval().generate(input_ids, max_new_tokens=N, temperature=0.0) "
        "(KV cache)"
    )
    # fewer weight bytes per token (dynamic int8 Linear layers run on the CPU only)
    int8 = quantize_int8(copy.deepcopy(ours)) if DEVICE.type == "cpu" else None
    for batch in args.gen_batches:
        g = torch.Generator().manual_seed(batch)
        prompt = torch.randint(1, args.gpt_vocab, (batch, args.prompt_tokens), generator=g)
        prompt = prompt.to(DEVICE)
        calls = generate_calls(ours, peer, prompt, args.new_tokens)
        if int8 is not None:
            calls["int8"] = generate_calls(int8, peer, prompt, args.new_tokens)["attnkit"]
            int8_tokens = calls["int8"]()  # (its first warm-up)
        a, p = calls["attnkit"](), calls["transformers"]()  # (also the first warm-up)
        same = torch.equal(a, p)
        differ = (a != p).any(0).nonzero()
        flops = count_flops(calls["attnkit"])
        times = interleave(calls, iters, warmup - 1)
        rows.append(
            make_row(
                "generate",
                f"greedy generation, {args.prompt_tokens} + {args.new_tokens} tokens",
                f"GPT {shape}, vocab {args.gpt_vocab}",
                "fp32",
                batch,
                ("attnkit", settings, times["attnkit"]),
                (
                    PEER_GPT2,
                    GEN_PEER_SETTINGS.replace("=N", f"={args.new_tokens}"),
                    times["transformers"],
                ),
                TARGETS["gen1"] if batch == 1 else None,
                flops,
                peak,
                warmup,
                same_tokens=same,
                first_different_token=None if same else int(differ[0]),
                tokens_per_s={
                    "attnkit": round(batch * args.new_tokens / median(times["attnkit"]) * 1e3, 1),
                    "peer": round(batch * args.new_tokens / median(times["transformers"]) * 1e3, 1),
                },
            )
        )
        _print_row(rows[-1])
        _log(f"  same greedy tokens: {'yes' if same else 'NO'}")
        if int8 is None:
            continue
        # fidelity: next-token argmax of int8 vs fp32 on the same text (prompt + fp32's tokens),
        # teacher-forced (free-running greedy texts part at the first near-tie and never meet)
        with torch.inference_mode():
            text = torch.cat([prompt, a], 1)
            agree = float(
                (ours(text).logits.argmax(-1) == int8(text).logits.argmax(-1)).float().mean()
            )
        same8 = float((int8_tokens == a).float().mean())
        rows.append(
            make_row(
                "generate",
                f"greedy generation, {args.prompt_tokens} + {args.new_tokens} tokens",
                f"GPT {shape}, vocab {args.gpt_vocab}",
                "int8",
                batch,
                (
                    "attnkit int8",
                    settings + " with attnkit.interop.quantize.quantize_int8 (dynamic int8 Linear "
                    "layers, LM head included)",
                    times["int8"],
                ),
                (
                    PEER_GPT2,
                    GEN_PEER_SETTINGS.replace("=N", f"={args.new_tokens}") + " (fp32)",
                    times["transformers"],
                ),
                None,
                None,
                {},
                warmup,
                note=f"int8 vs the peer's fp32, not like for like; next-token choice equal to "
                f"attnkit fp32's at {agree:.1%} of positions (teacher-forced); free-running, "
                f"{same8:.0%} of the greedy tokens equal (random weights: near-ties flip, then "
                "the texts part)",
                int8_token_agreement=round(agree, 4),
                int8_same_greedy_tokens=round(same8, 4),
                attnkit_fp32_ms=round(median(times["attnkit"]), 3),
            )
        )
        _print_row(rows[-1])
    return rows


RUNNERS = {"train": run_train, "infer": run_infer, "seq2seq": run_seq2seq, "generate": run_generate}


# --------------------------------------------------------------------------------------
# Plot and record
# --------------------------------------------------------------------------------------
def row_label(row: dict[str, Any]) -> str:
    peer = {
        PEER_BERT: "transformers BERT",
        PEER_ENCODER: "nn.TransformerEncoder",
        PEER_S2S: "nn.Transformer",
        PEER_GPT2: "GPT-2 generate",
    }.get(row["peer"], row["peer"])
    ours = {"attnkit": "", "attnkit attention_dropout=0": " (attnkit attn dropout 0)"}.get(
        row["attnkit"], f" ({row['attnkit']})"
    )
    shape = row["shape"].replace(", seq ", " s").replace(", src/tgt ", " s").replace(", ", " ")
    return f"{row['section']} {shape} {row['dtype']} b{row['batch']}{ours} vs {peer}"


def plot_ratios(rows: list[dict[str, Any]], path: Path) -> Path:
    """Horizontal bars of the ratios: green = target met, red = missed, grey = no target;
    the target as a black tick on its bar, 1x (as fast as the peer) as a dashed line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = list(reversed(rows))  # the first row at the top
    labels = [row_label(r) for r in rows]
    width = max(len(label) for label in labels) * 0.075  # inches of tick labels (fontsize 7)
    fig, ax = plt.subplots(figsize=(width + 7, 0.3 * len(rows) + 1.4))
    colors = [
        "#9e9e9e" if r["met"] is None else ("#4caf50" if r["met"] else "#e57373") for r in rows
    ]
    y = range(len(rows))
    ax.barh(y, [r["ratio"] for r in rows], color=colors, height=0.7)
    for i, r in enumerate(rows):
        if r["target"] is not None:
            ax.plot([r["target"]] * 2, [i - 0.42, i + 0.42], color="black", linewidth=2)
        ax.text(r["ratio"], i, f" {r['ratio']:.2f}x", va="center", fontsize=7)
    ax.axvline(1.0, color="black", linestyle="--", linewidth=0.8)
    ax.set_yticks(list(y), labels, fontsize=7)
    ax.set_xlabel("peer time / attnkit time (> 1: attnkit faster); black tick: target")
    ax.set_title("attnkit vs peers, one interleaved run per row (median times)")
    ax.set_xlim(0, max([r["ratio"] for r in rows] + [r["target"] or 0 for r in rows]) * 1.15)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def measure_peak(n: int) -> dict[str, float]:
    peak = {"fp32": matmul_peak(torch.float32, n), "bf16": matmul_peak(torch.bfloat16, n)}
    _log(
        f"matmul peak ({n}^3, best of 5): fp32 {peak['fp32'] / 1e9:.1f} GFLOP/s, "
        f"bf16 {peak['bf16'] / 1e9:.1f} GFLOP/s"
    )
    return peak


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every chosen section -> the record (kind "speed_ratios")."""
    global DEVICE
    DEVICE = args.device
    torch.set_num_threads(args.threads)
    started = time.perf_counter()
    cpu = cpu_info()
    gpu = torch.cuda.get_device_name(DEVICE) if DEVICE.type == "cuda" else None
    _log(
        f"device {DEVICE}{f' ({gpu})' if gpu else ''}; threads {args.threads}; CPU {cpu['model']}; flags {cpu['flags']}"
    )
    peak = measure_peak(args.matmul_n)
    rows: list[dict] = []
    for section in args.sections:
        if section in RUNNERS:
            _log(f"== {section}")
            t0 = time.perf_counter()
            rows += RUNNERS[section](args, peak)
            _log(f"   ({(time.perf_counter() - t0) / 60:.1f} min)")
    return {
        "kind": "speed_ratios",
        "name": args.name,
        "command": command_line("speed.py", skip=("--no-publish",)),
        "date": time.strftime("%Y-%m-%d"),
        "machine": machine(),
        "threads": args.threads,
        "device": str(DEVICE),
        "gpu": gpu,
        "cpu": cpu["model"],
        "cpu_flags": cpu["flags"],
        "cpu_native_bf16": cpu_native_bf16(),
        "peak_gflops": {k: round(v / 1e9, 1) for k, v in peak.items()},
        "matmul": f"{args.matmul_n} x {args.matmul_n} x {args.matmul_n}, best of 5",
        "sections": [s for s in args.sections if s in RUNNERS],
        "common": (
            "train mode and dropout 0.1 (attention dropout too) for training steps, placed as "
            "BERT does (attnkit, transformers; torch.nn's layer also inside its feed-forward); "
            "AdamW(lr=1e-4) with torch's defaults; every second row ends in 10% padding; "
            f"bf16 = torch.autocast('{DEVICE.type}', bfloat16) around forward and loss, fp32 "
            "weights; "
            "encoder step loss: cross-entropy of 15% of the real positions through the tied "
            "word embedding against random targets; FLOPs counted on attnkit's model "
            "(FlopCounterMode, forward + backward, optimizer not counted)"
        ),
        "minutes": round((time.perf_counter() - started) / 60, 1),
        "rows": rows,
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", action="append", choices=SECTIONS, help="sections (default: all)")
    p.add_argument("--dtype", choices=("fp32", "bf16", "both"), default="both")
    p.add_argument(
        "--iters",
        type=int,
        help="timed iterations of every section (default: each "
        "section's own: " + ", ".join(f"{k} {v[0]}" for k, v in ITERS.items()) + ")",
    )
    p.add_argument("--warmup", type=int, help="untimed iterations first (default 1, infer b1 3)")
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument(
        "--device",
        default="auto",
        help="cpu, cuda, cuda:N, or auto (default: cuda where there is one, else cpu)",
    )
    p.add_argument(
        "--shapes",
        type=Shape.parse,
        nargs="+",
        metavar="L4-H256-A4",
        default=[Shape(4, 256, 4), Shape(6, 512, 8)],
        help="encoder shapes",
    )
    p.add_argument("--seq", type=int, default=128, help="encoder sequence length")
    p.add_argument("--batch", type=int, default=32, help="encoder batch (inference: 1 and it)")
    p.add_argument("--vocab", type=int, default=30522, help="encoder vocabulary (BERT's)")
    p.add_argument(
        "--no-attention-dropout-row",
        dest="attention_dropout_row",
        action="store_false",
        help="leave out attnkit's attention_dropout=0 row",
    )
    p.add_argument("--s2s-recipe", default=S2S_RECIPE)
    p.add_argument("--s2s-batch", type=int, default=64)
    p.add_argument("--s2s-len", type=int, default=24, help="source and target tokens")
    p.add_argument("--gpt-shape", type=Shape.parse, default=Shape(4, 256, 4))
    p.add_argument("--gpt-vocab", type=int, default=8000, help="(GPT-2's: 50257)")
    p.add_argument("--prompt-tokens", type=int, default=16)
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--gen-batches", type=int, nargs="+", default=[1, 8])
    p.add_argument("--matmul-n", type=int, default=2048)
    p.add_argument("--name", default="speed")
    p.add_argument("--json", type=Path, help="write the record (and plot beside it) here")
    p.add_argument("--no-publish", action="store_true", help="print the record, write nothing")
    args = p.parse_args(argv)
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        args.device = torch.device(args.device)
    except RuntimeError:
        p.error(f"--device must be cpu, cuda, cuda:N or auto, got {args.device!r}")
    if args.device.type not in ("cpu", "cuda"):
        p.error(f"--device must be cpu, cuda, cuda:N or auto, got {args.device}")
    if args.device.type == "cuda" and not torch.cuda.is_available():
        p.error(f"--device {args.device}: this machine has no CUDA device")
    args.sections = [s for s in SECTIONS if s in (args.only or SECTIONS)]
    args.dtypes = ["fp32", "bf16"] if args.dtype == "both" else [args.dtype]
    return args


@contextlib.contextmanager
def _quiet_warnings() -> Iterator[None]:
    import warnings

    with warnings.catch_warnings():
        # nn.TransformerEncoder's nested-tensor notice and similar, once per model
        warnings.filterwarnings("ignore", message=".*nested.*")
        yield


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    hf_logging = _transformers().logging  # (fails early without transformers)
    threads, verbosity = torch.get_num_threads(), hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        with _quiet_warnings():
            record = run(args)
    finally:
        torch.set_num_threads(threads)
        hf_logging.set_verbosity(verbosity)
    if args.no_publish:
        print(json.dumps(record, indent=2, ensure_ascii=False))
        return 0
    if args.json:
        plot = (
            plot_ratios(record["rows"], args.json.with_suffix(".png")) if record["rows"] else None
        )
        record["plot"] = str(plot) if plot else None
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n")
        print(f"wrote {args.json}" + (f" and {plot}" if plot else ""))
        return 0
    if record["rows"]:  # another --name gets its own plot, next to the default one
        where = PLOT if args.name == "speed" else PLOT.with_name(f"{args.name}_ratios.png")
        record["plot"] = str(plot_ratios(record["rows"], where).relative_to(ROOT))
    publish(record)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

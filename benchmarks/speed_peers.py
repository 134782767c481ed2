"""The contenders of benchmarks/speed.py: attnkit's models and their peers, built with the
same shapes and (where the names map) the same weights, the random batches they read, and
the calls the runners (benchmarks/speed_runners.py) time.

- encoders: attnkit ``BertModel`` vs ``transformers.BertModel`` (SDPA) and vs BERT's
  embeddings around ``torch.nn.TransformerEncoder`` (``TorchBert``); attnkit's int8 and
  ONNX variants (CPU only);
- sentence classifiers: attnkit ``BertForSequenceClassification`` vs transformers' (same
  weights);
- encoder-decoder: attnkit ``Transformer`` vs the same embeddings around
  ``torch.nn.Transformer`` (``TorchSeq2Seq``);
- generation: attnkit ``GPT.generate`` (KV cache) vs ``transformers.GPT2LMHeadModel``.

Every model and batch goes to ``DEVICE`` (the CPU unless ``speed.run`` sets it from
``--device``).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import math
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
import yaml
from torch import Tensor, nn

from attnkit.interop.quantize import quantize_int8
from attnkit.models.bert import BertConfig, BertForSequenceClassification, BertModel
from attnkit.models.gpt import GPT, GPTConfig
from attnkit.models.hf_bert import bert_config_to_hf
from attnkit.models.hf_bert import to_hf_state_dict as bert_to_hf
from attnkit.models.hf_gpt2 import gpt_config_to_hf
from attnkit.models.hf_gpt2 import to_hf_state_dict as gpt2_to_hf
from attnkit.models.transformer import Transformer, TransformerConfig
from attnkit.nn.attention import MultiHeadAttention
from attnkit.nn.layers import DecoderLayer, EncoderLayer, sinusoidal_encoding

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import ROOT  # noqa: E402

S2S_RECIPE = "configs/multi30k-transformer.yaml"
LR = 1e-4
DROPOUT = 0.1
MLM_FRACTION = 0.15
PAD_FRACTION = 0.1

PEER_BERT = "transformers.BertModel"
PEER_BERT_CLASSIFIER = "transformers.BertForSequenceClassification"
PEER_ENCODER = "torch.nn.TransformerEncoder"
PEER_S2S = "torch.nn.Transformer"
PEER_GPT2 = "transformers.GPT2LMHeadModel.generate"
# where every model and batch goes (--device; speed.run sets it): cpu, or cuda where there is one
DEVICE = torch.device("cpu")


# --------------------------------------------------------------------------------------
# Precision, and the peers' library
# --------------------------------------------------------------------------------------
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


def build_classifiers(shape: Shape, vocab: int, seq: int) -> dict[str, Encoderish]:
    """attnkit's BertForSequenceClassification (BERT's pooler, a 2-way head) and
    transformers' with the same weights; ``hidden`` gives their logits (B, 2)."""
    torch.manual_seed(0)
    ours = BertForSequenceClassification(bert_config(shape, vocab, seq, DROPOUT))
    transformers = _transformers()
    config = transformers.BertConfig(**bert_config_to_hf(ours.config), attn_implementation="sdpa")
    hf = transformers.BertForSequenceClassification(config)
    hf.load_state_dict(bert_to_hf(ours), strict=True)
    sizes = f"{shape}, d_ff {shape.d_ff}, vocab {vocab}, {ours.config.num_classes} classes"
    found = {
        "attnkit": Encoderish(
            "attnkit",
            f"attnkit.models.bert.BertForSequenceClassification({sizes}, pooling="
            f"{ours.config.pooling_used})",
            ours,
            lambda b: ours(b.ids, b.mask).logits,
            lambda: ours.bert.embeddings.word.weight,
        ),
        "transformers": Encoderish(
            PEER_BERT_CLASSIFIER,
            f"transformers {transformers.__version__}: BertForSequenceClassification(BertConfig("
            f"{sizes}), attn_implementation='sdpa'), called with input_ids and attention_mask "
            "(0/1 long)",
            hf,
            lambda b: hf(input_ids=b.ids, attention_mask=b.mask_long).logits,
            lambda: hf.bert.embeddings.word_embeddings.weight,
        ),
    }
    for enc in found.values():
        enc.model.to(DEVICE)
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
# attnkit's CPU variants: int8 Linear layers, the ONNX export in onnxruntime
# --------------------------------------------------------------------------------------
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
        print("no onnxruntime: the ONNX rows are skipped (pip install 'attnkit[onnx]')", flush=True)
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

"""The runners of benchmarks/speed.py: the machine (CPU flags, matmul peak), the timing
(interleaved iterations, FLOP counting), one row per comparison, and the sections (train,
infer, seq2seq, generate: ``RUNNERS``) that time the contenders of
benchmarks/speed_peers.py against each other."""

from __future__ import annotations

import argparse
import copy
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils import flop_counter

from attnkit.interop.quantize import quantize_int8

sys.path.insert(0, str(Path(__file__).resolve().parent))
import speed_peers as peers  # noqa: E402
from report import cpu_native_bf16  # noqa: E402
from speed_peers import (  # noqa: E402
    GEN_PEER_SETTINGS,
    PEER_GPT2,
    PEER_S2S,
    TORCH_BF16_INFER_NOTE,
    EncoderBatch,
    Encoderish,
    Shape,
    build_classifiers,
    build_encoders,
    build_gpts,
    build_s2s,
    encoder_batch,
    encoder_infer,
    encoder_train_step,
    generate_calls,
    int8_encoder,
    onnx_encoder,
    s2s_batch,
    s2s_config,
    s2s_train_step,
    torch_s2s_settings,
)

CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")
# (iterations, warm-up iterations) per section; --iters / --warmup override them all
ITERS = {
    "train": (5, 1),
    "infer1": (30, 3),
    "classify": (30, 3),
    "infer": (6, 1),
    "seq2seq": (8, 1),
    "generate": (3, 1),
}
# targets of issue 17 (None: no target, the row is for information)
TARGETS = {"train_fp32": 1.2, "train_bf16": 1.4, "train_torch": 1.2, "infer1": 2.0, "gen1": 3.0}


def _sync() -> None:
    """Wait for the GPU's queued work (CUDA runs asynchronously); nothing on the CPU."""
    if peers.DEVICE.type == "cuda":
        torch.cuda.synchronize(peers.DEVICE)


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
    a = torch.randn(n, n, generator=g).to(peers.DEVICE, dtype)
    b = torch.randn(n, n, generator=g).to(peers.DEVICE, dtype)
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
    contenders: dict[str, Callable[[], object]], iters: int, warmup: int, in_a_row: int = 1
) -> dict[str, list[float]]:
    """Milliseconds of ``iters`` turns of each contender, after ``warmup`` untimed ones;
    turn i runs them in the order rotated by i (each goes first equally often). In a turn a
    contender makes ``in_a_row`` calls one after the other, each timed (iters x in_a_row
    times each): with 1, every call follows the other contenders' (their weights have
    pushed its own out of the CPU caches); with more, the later calls of a turn find their
    weights in the caches, as a process serving one model does."""
    names = list(contenders)
    for _ in range(warmup):
        for name in names:
            contenders[name]()
    times: dict[str, list[float]] = {name: [] for name in names}
    for i in range(iters):
        k = i % len(names)
        for name in names[k:] + names[:k]:
            for _ in range(in_a_row):
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


def _onednn_linear(x_shape, weight_shape, *args, out_shape=None, **kwargs) -> int:
    """oneDNN's product (attnkit.nn.fast_paths): 2 x rows x in x out; the weight may be
    re-laid-out by oneDNN, so the sizes come from the input's and the output's shapes."""
    return 2 * math.prod(out_shape[:-1]) * x_shape[-1] * out_shape[-1]


# FlopCounterMode knows the CUDA attention kernels, not the CPU one (the same formulas),
# nor oneDNN's products, which attnkit's inference fast paths call on the CPU
_CPU_SDPA = {
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: _sdpa_cpu,
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward: _sdpa_cpu_backward,
    torch.ops.mkldnn._linear_pointwise: _onednn_linear,
}


def count_flops(fn: Callable[[], object]) -> int:
    """FLOPs of one call of ``fn`` (matmuls and attention, forward and backward)."""
    with flop_counter.FlopCounterMode(display=False, custom_mapping=_CPU_SDPA) as counter:
        fn()
    return counter.get_total_flops()


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
                emulated = dtype == "bf16" and peers.DEVICE.type == "cpu" and not cpu_native_bf16()
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


def run_infer(args: argparse.Namespace, peak: dict[str, float]) -> list[dict]:
    rows = []
    tmp = tempfile.TemporaryDirectory(prefix="attnkit-speed-onnx-")
    for shape in args.shapes:
        encs = build_encoders(shape, args.vocab, args.seq, with_ad0=False)
        on_cpu = peers.DEVICE.type == "cpu"  # int8 and onnxruntime rows: CPU inference
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
                in_a_row = args.in_a_row if batch == 1 else 1  # (a batch: seconds a call)
                times = interleave(calls, iters, warmup, in_a_row)
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


def run_classify(args: argparse.Namespace, peak: dict[str, float]) -> list[dict]:
    """Batch-1 sentence classification (issue 42 names the classifier beside the encoder):
    attnkit's BertForSequenceClassification against transformers', the same weights,
    each dtype; the largest logit difference between the two goes in the row."""
    rows = []
    iters, warmup = _iters(args, "classify")
    for shape in args.shapes:
        models = build_classifiers(shape, args.vocab, args.seq)
        b = encoder_batch(1, args.seq, args.vocab)
        flops = count_flops(encoder_infer(models["attnkit"], b, "fp32"))
        for dtype in args.dtypes:
            calls = {k: encoder_infer(m, b, dtype) for k, m in models.items()}
            gap = (calls["attnkit"]().float() - calls["transformers"]().float()).abs().max()
            times = interleave(calls, iters, warmup, args.in_a_row)
            ours, peer = models["attnkit"], models["transformers"]
            rows.append(
                make_row(
                    "classify",
                    "sentence classifier inference (eval, inference_mode)",
                    f"{shape}, seq {args.seq}",
                    dtype,
                    1,
                    (ours.label, ours.settings, times["attnkit"]),
                    (peer.label, peer.settings, times["transformers"]),
                    TARGETS["infer1"],
                    flops,
                    peak,
                    warmup,
                    max_logit_difference=float(f"{gap.item():.2e}"),
                )
            )
            _print_row(rows[-1])
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
    int8 = quantize_int8(copy.deepcopy(ours)) if peers.DEVICE.type == "cpu" else None
    for batch in args.gen_batches:
        g = torch.Generator().manual_seed(batch)
        prompt = torch.randint(1, args.gpt_vocab, (batch, args.prompt_tokens), generator=g)
        prompt = prompt.to(peers.DEVICE)
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
                    GEN_PEER_SETTINGS.replace(
                        "max_new_tokens=N", f"max_new_tokens={args.new_tokens}"
                    ),
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
                    GEN_PEER_SETTINGS.replace(
                        "max_new_tokens=N", f"max_new_tokens={args.new_tokens}"
                    )
                    + " (fp32)",
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


RUNNERS = {
    "train": run_train,
    "infer": run_infer,
    "classify": run_classify,
    "seq2seq": run_seq2seq,
    "generate": run_generate,
}

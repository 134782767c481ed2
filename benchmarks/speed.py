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

  peak      this machine's matmul peak: a ``--matmul-n`` cube (2048^3), best of 5, in fp32
            and, when bf16 rows are timed, bf16 (always measured: the FLOP/s fractions
            below divide by it).
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
  classify  sentence classifier inference at batch 1 (same shapes, ``--seq`` tokens): attnkit
            ``BertForSequenceClassification`` (BERT's pooler, a 2-way head) vs
            ``transformers.BertForSequenceClassification`` with the same weights, eval mode,
            ``torch.inference_mode``, the logits; the largest logit difference is recorded.
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
iterations (+ warm-up): train 5 (+1), infer 30 (+3) at batch 1 and 6 (+1) at 32, classify
30 (+3), seq2seq
8 (+1), generate 3 (+1); ``--iters`` / ``--warmup`` set them all. Inference contenders
alternate every call by default; ``--in-a-row 10`` lets each make 10 calls in a row per
turn at batch 1: a BERT's weights (12.6 MB at L4 H256) stay in the CPU caches between its
own calls, as in a process serving one model, where five models alternating (54 MB) do
not fit in a 32 MB L3 cache and every call starts by reading its weights from memory.

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

Three files: the contenders (attnkit's models and the peers with the same weights, their
batches, the timed calls) are benchmarks/speed_peers.py; the machine, the timing, the rows
and the sections (``RUNNERS``) benchmarks/speed_runners.py; this file is the command line,
the plot and the record.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import speed_peers as peers  # noqa: E402
from report import ROOT, command_line, cpu_native_bf16, machine, publish  # noqa: E402
from speed_peers import (  # noqa: E402
    PEER_BERT,
    PEER_ENCODER,
    PEER_GPT2,
    PEER_S2S,
    S2S_RECIPE,
    Shape,
    _transformers,
)
from speed_runners import ITERS, RUNNERS, _log, cpu_info, matmul_peak  # noqa: E402

SECTIONS = ("peak", "train", "infer", "classify", "seq2seq", "generate")
PLOT = ROOT / "docs" / "speed_ratios.png"


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


def measure_peak(n: int, dtypes: tuple[str, ...] = ("fp32", "bf16")) -> dict[str, float]:
    """The matmul peak of each dtype timed (a bf16 cube where bf16 is emulated, e.g. held
    to AVX2, takes minutes: an fp32-only run does not measure it)."""
    kinds = {"fp32": torch.float32, "bf16": torch.bfloat16}
    peak = {k: matmul_peak(kinds[k], n) for k in ("fp32", "bf16") if k in dtypes}
    measured = ", ".join(f"{k} {v / 1e9:.1f} GFLOP/s" for k, v in peak.items())
    _log(f"matmul peak ({n}^3, best of 5): {measured}")
    return peak


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every chosen section -> the record (kind "speed_ratios")."""
    device = peers.DEVICE = args.device  # where speed_peers puts every model and batch
    torch.set_num_threads(args.threads)
    started = time.perf_counter()
    cpu = cpu_info()
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else None
    _log(
        f"device {device}{f' ({gpu})' if gpu else ''}; threads {args.threads}; CPU {cpu['model']}; flags {cpu['flags']}"
    )
    peak = measure_peak(args.matmul_n, ("fp32", *args.dtypes))  # (fp32: the record's cell)
    rows: list[dict] = []
    for section in args.sections:
        if section in RUNNERS:
            _log(f"== {section}")
            t0 = time.perf_counter()
            rows += RUNNERS[section](args, peak)
            _log(f"   ({(time.perf_counter() - t0) / 60:.1f} min)")
    regime = ""  # how the inference rows' calls follow one another
    inference = {"infer", "classify"} & set(args.sections)
    if inference and args.in_a_row == 1:
        regime = "; inference: the contenders alternate every call"
    elif inference:
        regime = (
            f"; inference at batch 1: each contender makes {args.in_a_row} calls in a row per "
            "turn, each timed (its weights stay in the CPU caches between them, as in a "
            "process serving one model), the turns rotating"
        )
    return {
        "kind": "speed_ratios",
        "name": args.name,
        "command": command_line("speed.py", skip=("--no-publish",)),
        "date": time.strftime("%Y-%m-%d"),
        "machine": machine(),
        "threads": args.threads,
        "device": str(device),
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
            f"bf16 = torch.autocast('{device.type}', bfloat16) around forward and loss, fp32 "
            "weights; "
            "encoder step loss: cross-entropy of 15% of the real positions through the tied "
            "word embedding against random targets; FLOPs counted on attnkit's model "
            "(FlopCounterMode, forward + backward, optimizer not counted)" + regime
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
    p.add_argument(
        "--in-a-row",
        type=int,
        default=1,
        metavar="N",
        help="inference at batch 1: calls each contender makes one after the other in its "
        "turn, each timed (default 1: the contenders alternate every call, so each starts "
        "with the others' weights in the CPU caches; 10: a process serving one model)",
    )
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
    if args.in_a_row < 1:
        p.error(f"--in-a-row must be at least 1, got {args.in_a_row}")
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

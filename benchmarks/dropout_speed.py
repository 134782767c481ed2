"""Training throughput with dropout as in the recipe, without attention dropout, and without
any dropout: the same recipe, the same batches.

    python benchmarks/dropout_speed.py configs/imdb-transformer.yaml --set data.max_len=512

On the CPU, dropout is not free: every mask is a tensor of fresh random numbers, and dropout
on the attention weights forces the explicit (B, H, T, T) attention instead of the fused
kernel. Trains ``--steps`` optimizer steps per variant, reads the tokens/s the Trainer logged
(median over log windows, first window dropped as warm-up) and stores
benchmarks/results/dropout-<recipe>.json; docs/results.md is rebuilt.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import ROOT, command_line, publish, train_tokens_per_s  # noqa: E402

VARIANTS = {
    "recipe": [],
    "attention_dropout=0": ["model.attention_dropout=0.0"],
    "dropout=0": ["model.dropout=0.0", "model.attention_dropout=0.0"],
}


def measure(config: str, steps: int, overrides: list[str]) -> float:
    out = ROOT / "runs" / f"speed-dropout-{Path(config).stem}"
    overrides = [
        *overrides,
        f"training.max_steps={steps}",
        f"training.log_every={max(steps // 6, 1)}",
        "training.progress=false",
        "data.val_fraction=0.01",
    ]
    return train_tokens_per_s(config, out, overrides)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    speeds = {name: measure(args.config, args.steps, args.set + o) for name, o in VARIANTS.items()}
    base = speeds["recipe"]
    stem = Path(args.config).stem
    suffix = "".join(f"-{s.split('=')[0].split('.')[-1]}{s.split('=')[1]}" for s in args.set)
    record = {
        "kind": "dropout_speed",
        "name": f"dropout-{stem}{suffix}",
        "recipe": " ".join([args.config, *(f"--set {s}" for s in args.set)]),
        "steps": args.steps,
        "tokens_per_s": {name: round(v) for name, v in speeds.items()},
        "speedup": {name: round(v / base, 2) for name, v in speeds.items()},
        "threads": torch.get_num_threads(),
        "command": command_line("dropout_speed.py"),
        "date": time.strftime("%Y-%m-%d"),
    }
    publish(record)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

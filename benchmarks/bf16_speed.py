"""Training throughput with bf16 autocast off and on, same recipe, same batches.

    python benchmarks/bf16_speed.py configs/nsmc-transformer.yaml --steps 200

Trains ``--steps`` optimizer steps twice (fp32, then bf16 autocast), reads the tokens/s the
Trainer logged (median over log windows, first window dropped as warm-up), and stores
benchmarks/results/speed-<recipe>.json; docs/results.md is rebuilt.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from attnkit.runtime.device import cpu_has_native_bf16

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import ROOT, command_line, publish, train_tokens_per_s  # noqa: E402


def measure(config: str, steps: int, bf16: bool) -> float:
    out = ROOT / "runs" / f"speed-{Path(config).stem}-{'bf16' if bf16 else 'fp32'}"
    overrides = [
        f"training.max_steps={steps}",
        f"training.bf16={str(bf16).lower()}",
        "training.log_every=25",
        "training.progress=false",
        "data.val_fraction=0.01",
    ]
    return train_tokens_per_s(config, out, overrides)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config")
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    fp32 = measure(args.config, args.steps, bf16=False)
    bf16 = measure(args.config, args.steps, bf16=True)
    record = {
        "kind": "speed",
        "name": f"speed-{Path(args.config).stem}",
        "recipe": args.config,
        "steps": args.steps,
        "fp32_tokens_per_s": round(fp32),
        "bf16_tokens_per_s": round(bf16),
        "bf16_speedup": round(bf16 / fp32, 3),
        "cpu_native_bf16": cpu_has_native_bf16(),
        "threads": torch.get_num_threads(),
        "command": command_line("bf16_speed.py"),
        "date": time.strftime("%Y-%m-%d"),
    }
    publish(record)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Training speed with 1 and with 2 torch threads, on a quiet machine and with another
process keeping one core busy.

    python benchmarks/threads.py configs/nsmc-quick.yaml --steps 120

For each condition (quiet, busy) and thread count (1, 2), trains ``--steps`` optimizer steps
of the recipe (fp32, as on a CPU without native bf16, so that the figure is the laptop's
path) and reads the median training tokens/s the Trainer logged (first window dropped).
"busy" starts a process that spins on one core (a pure-Python loop, as a second training or
a browser tab would) for the duration of the measurement. Stores
benchmarks/results/threads-<recipe>.json (or ``--json FILE``); docs/results.md is rebuilt.

Why: OpenMP threads wait for each other at every parallel region; when one core is taken,
the thread that shares it is descheduled and the others spin waiting for it, so 2 threads
can be slower than 1 (see the table).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import ROOT, command_line, machine, publish, train_tokens_per_s  # noqa: E402


def _spin(stop_after: float) -> None:
    end = time.monotonic() + stop_after
    x = 0
    while time.monotonic() < end:
        x += 1


def measure(config: str, steps: int, threads: int, runs: Path, extra: list[str]) -> float:
    out = runs / f"threads-{Path(config).stem}-{threads}"
    overrides = [
        f"training.max_steps={steps}",
        f"training.num_threads={threads}",
        "training.bf16=false",
        "training.log_every=10",
        "training.progress=false",
        "training.eval_every=100000",
        *extra,
    ]
    return train_tokens_per_s(config, out, overrides)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config")
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--set", action="append", default=[], help="recipe override")
    parser.add_argument("--runs", default=str(ROOT / "runs"), help="folder for the runs")
    parser.add_argument("--json", help="write the record here instead of publishing it")
    args = parser.parse_args(argv)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    rows = []
    for condition in ("quiet", "busy"):
        for threads in (1, 2):
            spinner = None
            if condition == "busy":
                spinner = multiprocessing.Process(target=_spin, args=(3600.0,), daemon=True)
                spinner.start()
            try:
                tok_s = measure(args.config, args.steps, threads, Path(args.runs), args.set)
            finally:
                if spinner is not None:
                    spinner.terminate()
                    spinner.join()
            rows.append({"condition": condition, "threads": threads, "tokens_per_s": round(tok_s)})
            print(f"{condition:5s} {threads} thread(s): {tok_s:,.0f} tokens/s", flush=True)
    record = {
        "kind": "threads",
        "name": f"threads-{Path(args.config).stem}",
        "recipe": args.config,
        "steps": args.steps,
        "usable_cores": cores,
        "rows": rows,
        "machine": machine(),
        "command": command_line("threads.py"),
        "date": time.strftime("%Y-%m-%d"),
    }
    if args.json:
        Path(args.json).write_text(json.dumps(record, indent=2), encoding="utf-8")
    else:
        publish(record)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

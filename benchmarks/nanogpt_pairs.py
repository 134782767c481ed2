"""attnkit against nanoGPT on nanoGPT's CPU recipe, whole processes in alternating runs
(issue 42: small models >= 1.5x nanoGPT, the same steps and validation quality).

    python benchmarks/nanogpt_pairs.py                 # 500 steps, 3 rounds
    python benchmarks/nanogpt_pairs.py --avx2          # PyTorch held to its AVX2 kernels
    python benchmarks/nanogpt_pairs.py --steps 50 --rounds 1 --json /tmp/x.json  # a trial

nanoGPT's own train.py runs from a copy of ../shared/peers/nanoGPT (its MIT licence and
ORIGIN.txt there; nothing of it is in the package), with its README's CPU command
("I only have a macbook": 4 layers x 128, block 64, batch 12, ``--compile=False``, no
dropout) and ``--max_iters=--lr_decay_iters=STEPS``; its data is prepared by its own
prepare.py from ../shared/data/tinyshakespeare/input.txt (``requests``, which prepare.py
imports to download the file, is stubbed: nothing is downloaded). attnkit runs
``attnkit train configs/shakespeare-nanogpt-cpu.yaml --set training.max_steps=STEPS`` in
fp32 (``training.bf16=false``: the laptop path) and with its automatic precision
(bf16 where the CPU computes it natively). Each round runs the three in a rotated order;
each figure is the median wall time of ``--rounds`` processes. Validation quality: nanoGPT's
last "val loss" (20 random batches) and attnkit's last validation loss (the whole
held-out 10%) are recorded beside the times.

Writes benchmarks/results/nanogpt-pairs[-avx2].json and rebuilds docs/results.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import AVX2, ROOT, cpu_native_bf16, machine, publish  # noqa: E402
from speed_runners import cpu_info  # noqa: E402

SHARED = ROOT.parent / "shared"
PEER = SHARED / "peers" / "nanoGPT"
TEXT = SHARED / "data" / "tinyshakespeare" / "input.txt"
RECIPE = ROOT / "configs" / "shakespeare-nanogpt-cpu.yaml"
NANOGPT_ARGS = [
    *("config/train_shakespeare_char.py", "--device=cpu", "--compile=False"),
    *("--eval_iters=20", "--log_interval=1", "--block_size=64", "--batch_size=12"),
    *("--n_layer=4", "--n_head=4", "--n_embd=128", "--dropout=0.0"),
]


def prepare_peer(work: Path) -> Path:
    """A copy of nanoGPT with its character data prepared by its own prepare.py."""
    peer = work / "nanoGPT"
    shutil.copytree(PEER, peer)
    data = peer / "data" / "shakespeare_char"
    shutil.copy(TEXT, data / "input.txt")
    stub = work / "stub"
    stub.mkdir()
    (stub / "requests.py").write_text("# prepare.py imports requests; input.txt is there\n")
    env = {**os.environ, "PYTHONPATH": str(stub)}
    subprocess.run([sys.executable, "prepare.py"], cwd=data, env=env, check=True,
                   stdout=subprocess.DEVNULL)  # fmt: skip
    return peer


def run_nanogpt(peer: Path, steps: int, out: Path, env: dict[str, str]) -> tuple[float, float]:
    argv = [sys.executable, "train.py", *NANOGPT_ARGS, f"--max_iters={steps}",
            f"--lr_decay_iters={steps}", f"--out_dir={out}"]  # fmt: skip
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=peer, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"nanoGPT failed ({done.returncode}):\n{done.stderr[-3000:]}")
    losses = re.findall(r"step \d+: train loss [\d.]+, val loss ([\d.]+)", done.stdout)
    return seconds, float(losses[-1])


def run_attnkit(steps: int, out: Path, env: dict[str, str], fp32: bool) -> tuple[float, float]:
    argv = [sys.executable, "-m", "attnkit", "train", str(RECIPE), "--out", str(out),
            "--set", f"training.max_steps={steps}"]  # fmt: skip
    if fp32:
        argv += ["--set", "training.bf16=false"]
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"attnkit train failed ({done.returncode}):\n{done.stderr[-3000:]}")
    evals = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    losses = [e["val_loss"] for e in evals if "val_loss" in e]
    return seconds, float(losses[-1])


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=3, help="processes per contender (median)")
    ap.add_argument("--avx2", action="store_true", help="PyTorch held to its AVX2 kernels")
    ap.add_argument("--json", type=Path, help="write the record here (results/ untouched)")
    args = ap.parse_args(argv)
    env = {**os.environ, **(AVX2 if args.avx2 else {})}
    env.setdefault("ATTNKIT_DATA", str(SHARED / "data"))
    times: dict[str, list[float]] = {"nanogpt": [], "attnkit_fp32": [], "attnkit_auto": []}
    losses: dict[str, list[float]] = {k: [] for k in times}
    with tempfile.TemporaryDirectory(prefix="attnkit-nanogpt-") as tmp:
        work = Path(tmp)
        peer = prepare_peer(work)
        order = list(times)
        for r in range(args.rounds):
            for name in order[r % 3 :] + order[: r % 3]:
                out = work / f"{name}-{r}"
                if name == "nanogpt":
                    s, loss = run_nanogpt(peer, args.steps, out, env)
                else:
                    s, loss = run_attnkit(args.steps, out, env, fp32=name == "attnkit_fp32")
                times[name].append(round(s, 2))
                losses[name].append(round(loss, 4))
                print(f"round {r}: {name} {s:.1f} s, val loss {loss:.4f}", flush=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    native = cpu_native_bf16() and not args.avx2
    name = "nanogpt-pairs-avx2" if args.avx2 else "nanogpt-pairs"
    record = {
        "name": name,
        "kind": "nanogpt_pairs",
        "command": "python benchmarks/nanogpt_pairs.py"
        + (" --avx2" if args.avx2 else "")
        + (f" --steps {args.steps}" if args.steps != 500 else "")
        + (f" --rounds {args.rounds}" if args.rounds != 3 else ""),
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{cpu_info()['model']}; {machine()}",
        "kernels": "avx2" if args.avx2 else "default",
        "steps": args.steps,
        "rounds": args.rounds,
        "auto_precision": "bf16" if native else "fp32",
        "seconds": times,
        "validation_loss": losses,
        "median_s": {k: round(v, 2) for k, v in med.items()},
        "speedup_fp32": round(med["nanogpt"] / med["attnkit_fp32"], 2),
        "speedup_auto": round(med["nanogpt"] / med["attnkit_auto"], 2),
    }
    if args.json is not None:
        args.json.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        print(json.dumps(record, indent=2))
    else:
        publish(record)  # benchmarks/results/NAME.json (schema-checked) + docs/results.md
    return record


if __name__ == "__main__":
    main()

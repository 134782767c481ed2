"""End-to-end training throughput of shipped recipes, before and after a change (issue 17).

    python benchmarks/recipe_speed.py                       # the three recipes, --before 1522feb
    python benchmarks/recipe_speed.py configs/nsmc-transformer.yaml --steps 150 --rounds 3

Each recipe trains ``--steps`` optimizer steps with the code of ``--before`` (a git revision,
checked out into a temporary worktree) and with the code of this checkout, alternately
(``--rounds`` times each, the order swapped every round), every run in a fresh process
(``PYTHONPATH`` selects the code) on the same recipe file, data and settings. Tokens/s is
what the Trainer logged: the median over its log windows, the first one dropped as
warm-up (so reading data, tokenizer training and evaluation are not counted); a recipe's
figure is the median over its rounds. Writes benchmarks/results/recipe-speed.json and
rebuilds docs/results.md (``--json PATH``: write there and leave docs alone).

The default baseline, 1522feb, is main before issue 17's optimisations (cheaper dropout
masks, one Q/K/V product, BERT's dropout placement).

A setting instead of a revision: ``--before HEAD --after-set training.compile=true --name
recipe-speed-compile`` measures this checkout with and without ``torch.compile`` (the
``--after-set`` overrides go to the "after" runs only).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import ROOT, command_line, machine, publish  # noqa: E402
from speed_runners import cpu_info  # noqa: E402  (benchmarks/speed.py's)

RECIPES = (
    "configs/nsmc-transformer.yaml",
    "configs/nsmc-pretrain.yaml",
    "configs/multi30k-transformer.yaml",
)
BEFORE = "1522feb"  # main at the start of issue 17's optimisations
CLI = (  # revisions before the layer folders (issue 33) have attnkit.cli
    "import sys\ntry:\n    from attnkit.app.cli import main\n"
    "except ModuleNotFoundError:\n    from attnkit.cli import main\nsys.exit(main(sys.argv[1:]))"
)


def git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.strip()


def tokens_per_s(metrics: Path) -> float:
    """The median tokens/s of a run's log windows, the first (warm-up) dropped."""
    rows = [json.loads(x) for x in metrics.read_text(encoding="utf-8").splitlines()]
    speeds = [r["tokens_per_s"] for r in rows if "tokens_per_s" in r]
    if len(speeds) < 2:
        raise SystemExit(f"{metrics}: fewer than 2 log windows; raise --steps")
    return statistics.median(speeds[1:])


def train(src: Path, recipe: str, out: Path, steps: int, extra: list[str]) -> float:
    """``attnkit train`` of ``recipe`` with the package in ``src``, in a new process."""
    overrides = [
        f"training.max_steps={steps}",
        f"training.log_every={max(steps // 6, 1)}",
        "training.progress=false",
        "data.val_fraction=0.01",  # the end-of-run evaluation is not timed, but keep it short
        *extra,
    ]
    cmd = [sys.executable, "-c", CLI, "train", recipe, "--out", str(out), "--force"]
    for o in overrides:
        cmd += ["--set", o]
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{recipe} with {src}: {done.stderr.strip().splitlines()[-1:]}")
    return tokens_per_s(out / "metrics.jsonl")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("recipes", nargs="*", default=list(RECIPES))
    p.add_argument("--before", default=BEFORE, help="git revision of the 'before' code")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument(
        "--after-set", action="append", default=[], metavar="KEY=VALUE",
        help="overrides for the 'after' runs only (with --before HEAD: a setting's effect)",
    )  # fmt: skip
    p.add_argument("--name", default="recipe-speed", help="the record's name")
    p.add_argument("--runs", type=Path, default=ROOT / "runs", help="where the runs go")
    p.add_argument("--json", type=Path, help="write the record here, leave docs alone")
    args = p.parse_args()
    started = time.perf_counter()
    before_rev = git("rev-parse", "--short", args.before)
    # "+": the package's code (src/) has uncommitted changes, measured as they are
    dirty = git("status", "--porcelain", "--", "src")
    after_rev = git("rev-parse", "--short", "HEAD") + ("+" if dirty else "")
    rows = []
    with tempfile.TemporaryDirectory(prefix="attnkit-before-") as tmp:
        tree = Path(tmp) / "tree"
        git("worktree", "add", "--detach", str(tree), before_rev)
        try:
            trees = {"before": tree / "src", "after": ROOT / "src"}
            for recipe in args.recipes:
                speeds: dict[str, list[float]] = {"before": [], "after": []}
                for r in range(args.rounds):
                    order = ("before", "after") if r % 2 == 0 else ("after", "before")
                    for label in order:
                        out = args.runs / f"speed-recipe-{Path(recipe).stem}-{label}"
                        extra = args.set + (args.after_set if label == "after" else [])
                        tps = train(trees[label], recipe, out, args.steps, extra)
                        speeds[label].append(tps)
                        print(f"{recipe} {label} round {r + 1}: {tps:,.0f} tokens/s", flush=True)
                before, after = (statistics.median(speeds[k]) for k in ("before", "after"))
                rows.append(
                    {
                        "recipe": recipe,
                        "before_tokens_per_s": round(before),
                        "after_tokens_per_s": round(after),
                        "speedup": round(after / before, 2),
                        "runs": {k: [round(v) for v in vs] for k, vs in speeds.items()},
                    }
                )
        finally:
            git("worktree", "remove", "--force", str(tree))
    cpu = cpu_info()
    record = {
        "kind": "recipe_speed",
        "name": args.name,
        "before": before_rev,
        "after": after_rev,
        "steps": args.steps,
        "rounds": args.rounds,
        "overrides": args.set,
        "after_overrides": args.after_set,
        "target": None if args.after_set else 1.5,  # issue 17's target is for code changes
        "rows": rows,
        "cpu": cpu["model"],
        "cpu_flags": cpu["flags"],
        "threads": torch.get_num_threads(),  # what each training process uses too
        "minutes": round((time.perf_counter() - started) / 60, 1),
        "machine": machine(),
        "command": command_line("recipe_speed.py"),
        "date": time.strftime("%Y-%m-%d"),
    }
    if args.json:
        args.json.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        print(json.dumps(record, indent=2))
    else:
        publish(record)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Sentiment benchmark: train a recipe from scratch, evaluate on the test split, record
accuracy, training minutes, tokens/s and peak RSS, and regenerate docs/results.md.

    python benchmarks/sentiment.py configs/nsmc-transformer.yaml
    python benchmarks/sentiment.py configs/experiments/nsmc-ngram-bf16.yaml
    python benchmarks/sentiment.py configs/nsmc-finetune.yaml --pretrain configs/nsmc-pretrain.yaml
    python benchmarks/sentiment.py configs/nsmc-finetune.yaml \
        --pretrain configs/experiments/nsmc-pretrain-2800.yaml \
        --ensemble configs/experiments/nsmc-gru-h128.yaml --name nsmc-ensemble

The result is named after the recipe file (``--name`` otherwise). A benchmark's recipes are
files (configs/experiments/ holds those that differ from a shipped one: benchmarks/run_all.py
runs them); ``--set`` / ``--pretrain-set`` / ``--ensemble-set`` are for trials.

``--ensemble CONFIG`` (repeatable) trains more classifiers after the first and scores the
ensemble of all of them (averaged probabilities, ``attnkit evaluate RUN RUN ...``); the
training minutes are the sum over every stage.

Results are stored as JSON in benchmarks/results/NAME.json (one file per benchmark run, kind
"sentiment"; the schema: benchmarks/report.py) and docs/results.md is rebuilt from all of
them, each row with the command that produced it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from attnkit.app.api import evaluate, train
from report import (
    ROOT,
    command_line,
    machine,
    peak_rss_mb,
    publish,
    run_precision,
    write_results_md,
)


def _sets(overrides: list[str]) -> str:
    return "".join(f" --set {o}" for o in overrides if o != "training.progress=false")


def pretrain(config: str, name: str, overrides: list[str]) -> tuple[Path, dict]:
    """Stage 1 (``--pretrain``): masked-LM or ELECTRA pretraining into runs/bench-NAME-pretrain."""
    out = ROOT / "runs" / f"bench-{name}-pretrain"
    start = time.perf_counter()
    result = train(config, out=out, overrides=["training.progress=false", *overrides], force=True)
    wall = time.perf_counter() - start
    evals = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in evals if "val_loss" in r]
    last = evals[-1] if evals else {}
    objective = json.loads((out / "config.json").read_text())["model"].get("objective", "mlm")
    return out, {
        "pretrain_objective": objective,
        "pretrain_command": f"attnkit train {config}{_sets(overrides)} --out runs/bench-{name}-pretrain",
        "pretrain_steps": result.step,
        "pretrain_minutes": round(result.train_seconds / 60, 2),
        "pretrain_total_minutes": round(wall / 60, 2),
        # masked LM: its loss / accuracy; ELECTRA: the generator's masked-LM loss and
        # accuracy and the discriminator's replaced-token-detection accuracy
        "pretrain_validation": {
            "mlm_loss": round(last.get("val_mlm_loss", last.get("val_loss", 0)), 4),
            "mlm_accuracy": round(last.get("val_mlm_accuracy", last.get("val_accuracy", 0)), 4),
            **(
                {"rtd_accuracy": round(last["val_rtd_accuracy"], 4)}
                if "val_rtd_accuracy" in last
                else {}
            ),
        },
    }


# An ensemble member trains in a fresh process, as a user's separate `attnkit train` would:
# in the process that already pretrained and fine-tuned, a GRU trained 17% slower.
MEMBER = """
import json, sys
from attnkit.app.api import train
r = train(sys.argv[1], out=sys.argv[2], overrides=sys.argv[3:], force=True)
print("RESULT " + json.dumps({"step": r.step, "best": r.best_metric, "seconds": r.train_seconds}))
"""


def member(config: str, name: str, i: int, overrides: list[str]) -> tuple[Path, dict]:
    """An ``--ensemble`` member: another classifier trained into runs/bench-NAME-memberI."""
    out = ROOT / "runs" / f"bench-{name}-member{i}"
    start = time.perf_counter()
    argv = [config, str(out), "training.progress=false", *overrides]
    proc = subprocess.run([sys.executable, "-c", MEMBER, *argv], capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode:
        raise SystemExit(f"ensemble member {config} failed:\n{proc.stderr}")
    print(proc.stdout, end="")
    result = json.loads(proc.stdout.rsplit("RESULT ", 1)[1])
    cfg = json.loads((out / "config.json").read_text())
    return out, {
        "command": f"attnkit train {config}{_sets(overrides)} --out runs/bench-{name}-member{i}",
        "arch": cfg["model"]["arch"],
        "num_parameters": cfg["num_parameters"],
        "best_val_metric": result["best"],
        "steps": result["step"],
        "train_minutes": round(result["seconds"] / 60, 2),
        "total_minutes": round(wall / 60, 2),
    }


def run(
    config: str,
    name: str,
    overrides: list[str],
    pretrain_config: str | None = None,
    pretrain_overrides: list[str] | None = None,
    ensemble: list[str] | None = None,
    ensemble_overrides: list[str] | None = None,
) -> dict:
    extra: dict = {}
    if pretrain_config:
        pre_dir, extra = pretrain(pretrain_config, name, pretrain_overrides or [])
        overrides = [f"model.init_from={pre_dir}", *overrides]
    out = ROOT / "runs" / f"bench-{name}"
    start = time.perf_counter()
    result = train(config, out=out, overrides=overrides, force=True)
    wall = time.perf_counter() - start
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    speeds = [r["tokens_per_s"] for r in rows if "tokens_per_s" in r]
    cfg = json.loads((out / "config.json").read_text())
    record = {
        "arch": cfg["model"]["arch"],
        "num_parameters": cfg["num_parameters"],
        "train_minutes": round(result.train_seconds / 60, 2),
        "total_minutes": round(wall / 60, 2),
    }
    runs, members = [out], []
    for i, member_config in enumerate(ensemble or [], 1):
        member_dir, info = member(member_config, name, i, ensemble_overrides or [])
        runs.append(member_dir)
        members.append(info)
    report = evaluate(runs, "test")
    if members:  # the first classifier is a member too
        parts = [dict(record), *members]
        for info, score in zip(parts, report["members"], strict=True):
            info["test"] = {"accuracy": round(score["accuracy"], 4)}
        record = {
            "arch": " + ".join(m["arch"] for m in parts) + " (ensemble)",
            "num_parameters": sum(m["num_parameters"] for m in parts),
            "train_minutes": round(sum(m["train_minutes"] for m in parts), 2),
            "total_minutes": round(sum(m["total_minutes"] for m in parts), 2),
            "ensemble": parts,
        }
    return {
        "name": name,
        "kind": "sentiment",
        "command": command_line("sentiment.py"),
        "dataset": cfg["data"]["name"],
        "arch": record["arch"],
        "num_parameters": record["num_parameters"],
        "precision": run_precision(cfg),
        "bf16": run_precision(cfg) == "bf16",
        "init_from": cfg["model"].get("init_from") if not pretrain_config else None,
        "test": {
            "accuracy": round(report["accuracy"], 4),
            "macro_f1": round(report["macro_f1"], 4),
        },
        "test_examples": report["num_examples"],
        "best_val_metric": result.best_metric,
        "steps": result.step,
        "train_minutes": record["train_minutes"],
        "total_minutes": record["total_minutes"],
        "tokens_per_s": round(statistics.median(speeds)) if speeds else None,
        **({"ensemble": record["ensemble"]} if members else {}),  # per member
        **extra,
        "peak_rss_mb": peak_rss_mb(),
        "machine": machine(),
        "date": time.strftime("%Y-%m-%d"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?")
    parser.add_argument("--name", help="result name (default: the recipe's file name)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument(
        "--pretrain", metavar="CONFIG", help="pretraining recipe (task mlm) to run first"
    )
    parser.add_argument(
        "--pretrain-set", action="append", default=[], metavar="KEY=VALUE", help="for --pretrain"
    )
    parser.add_argument(
        "--ensemble",
        action="append",
        default=[],
        metavar="CONFIG",
        help="another classifier recipe to train; the test score is the ensemble's (repeatable)",
    )
    parser.add_argument(
        "--ensemble-set", action="append", default=[], metavar="KEY=VALUE", help="for --ensemble"
    )
    parser.add_argument("--only-docs", action="store_true", help="just rebuild docs/results.md")
    args = parser.parse_args()
    if not args.only_docs:
        if not args.config:
            parser.error("give a recipe")
        name = args.name or Path(args.config).stem
        record = run(
            args.config,
            name,
            ["training.progress=false", *args.set],
            args.pretrain,
            args.pretrain_set,
            args.ensemble,
            args.ensemble_set,
        )
        publish(record)
    else:
        print(f"wrote {write_results_md()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Sentiment benchmark: train a recipe from scratch, evaluate on the test split, record
accuracy, training minutes, tokens/s and peak RSS, and regenerate docs/results.md.

    python benchmarks/sentiment.py configs/nsmc-transformer.yaml
    python benchmarks/sentiment.py configs/imdb-transformer.yaml --set training.bf16=true --name imdb-bf16
    python benchmarks/sentiment.py configs/nsmc-finetune.yaml --pretrain configs/nsmc-pretrain.yaml

Results are stored as JSON in benchmarks/results/NAME.json (one file per benchmark run) and
docs/results.md is rebuilt from all of them, each row with the command that produced it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from attnkit.api import evaluate, train
from report import ROOT, command_line, machine, peak_rss_mb, publish, write_results_md


def pretrain(config: str, name: str) -> tuple[Path, dict]:
    """Stage 1 (``--pretrain``): masked-LM or ELECTRA pretraining into runs/bench-NAME-pretrain."""
    out = ROOT / "runs" / f"bench-{name}-pretrain"
    start = time.perf_counter()
    result = train(config, out=out, overrides=["training.progress=false"], force=True)
    wall = time.perf_counter() - start
    evals = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in evals if "val_loss" in r]
    last = evals[-1] if evals else {}
    objective = json.loads((out / "config.json").read_text())["model"].get("objective", "mlm")
    return out, {
        "pretrain_objective": objective,
        "pretrain_command": f"attnkit train {config} --out runs/bench-{name}-pretrain",
        "pretrain_steps": result.step,
        "pretrain_minutes": round(result.train_seconds / 60, 2),
        "pretrain_total_minutes": round(wall / 60, 2),
        # masked LM: its loss / accuracy; ELECTRA: the generator's masked-LM loss and the
        # discriminator's replaced-token-detection accuracy
        "pretrain_val_loss": round(last.get("val_mlm_loss", last.get("val_loss", 0)), 4),
        "pretrain_val_accuracy": round(
            last.get("val_mlm_accuracy", last.get("val_accuracy", 0)), 4
        ),
        **(
            {"pretrain_val_rtd_accuracy": round(last["val_rtd_accuracy"], 4)}
            if "val_rtd_accuracy" in last
            else {}
        ),
    }


def run(config: str, name: str, overrides: list[str], pretrain_config: str | None = None) -> dict:
    extra: dict = {}
    if pretrain_config:
        pre_dir, extra = pretrain(pretrain_config, name)
        overrides = [f"model.init_from={pre_dir}", *overrides]
    out = ROOT / "runs" / f"bench-{name}"
    start = time.perf_counter()
    result = train(config, out=out, overrides=overrides, force=True)
    wall = time.perf_counter() - start
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    speeds = [r["tokens_per_s"] for r in rows if "tokens_per_s" in r]
    report = evaluate(out, "test")
    cfg = json.loads((out / "config.json").read_text())
    return {
        "name": name,
        "command": command_line("sentiment.py"),
        "dataset": cfg["data"]["name"],
        "arch": cfg["model"]["arch"],
        "num_parameters": cfg["num_parameters"],
        "bf16": cfg["training"]["bf16"],
        "test_accuracy": round(report["accuracy"], 4),
        "test_macro_f1": round(report["macro_f1"], 4),
        "test_examples": report["num_examples"],
        "best_val_accuracy": result.best_metric,
        "steps": result.step,
        "train_minutes": round(result.train_seconds / 60, 2),
        "total_minutes": round(wall / 60, 2),
        "tokens_per_s": round(statistics.median(speeds)) if speeds else None,
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
    parser.add_argument("--only-docs", action="store_true", help="just rebuild docs/results.md")
    args = parser.parse_args()
    if not args.only_docs:
        if not args.config:
            parser.error("give a recipe")
        name = args.name or Path(args.config).stem
        record = run(args.config, name, ["training.progress=false", *args.set], args.pretrain)
        publish(record)
    else:
        print(f"wrote {write_results_md()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

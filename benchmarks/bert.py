"""BERT benchmark: (optionally) pretrain a BERT, fine-tune a recipe (classify / tag / qa),
evaluate it on the test split, record the task's metrics, the minutes and the machine, and
regenerate docs/results.md.

    python benchmarks/bert.py configs/conll2003-minilm.yaml
    python benchmarks/bert.py configs/klue-nli-bert.yaml --pretrain configs/bert-pretrain-ko.yaml
    python benchmarks/bert.py configs/experiments/klue-nli-bert-frozen.yaml
    python benchmarks/bert.py configs/experiments/nsmc-bert-6l-mean.yaml \\
        --pretrain configs/experiments/bert-pretrain-ko-6l.yaml
    python benchmarks/bert.py --pretrain configs/bert-pretrain-ko.yaml   # pretraining only

A result is named after its recipe file (``--name`` otherwise), a pretraining run after its
recipe file (``--pretrain-name`` otherwise). A benchmark's recipes are files: those that
differ from a shipped one are in configs/experiments/ (benchmarks/run_all.py runs them);
``--set``, ``--pretrain-set`` and ``--init RUN`` (``model.init_from``) are for trials.

``--resume``: an interrupted pretraining (its runs/bench-NAME/last/) continues where it
stopped instead of starting over; the trainer's exact resume reproduces the uninterrupted
trajectory, so the recorded command leaves ``--resume`` out and the record says
``pretrain_resumed``; its minutes add the interrupted run's time up to its checkpoint (the
steps lost after that checkpoint are not counted).

``--pseudo-from RUN`` (self-training): that classify run first labels ``--pseudo-input``
(default: nsmc's unlabelled reviews) into runs/bench-NAME-pseudo.tsv, keeping the texts it
gives at least ``--pseudo-min-confidence``; those join the fine-tuning's training split
(``data.extra_train``, which drops texts of the dataset's own splits).

``--pretrain CONFIG`` (task bert-pretrain) trains into runs/bench-<its name> (or
runs/bench-<--pretrain-name>) first and starts
the fine-tuning from it (``model.init_from``); ``--init RUN`` starts from an existing run.
Results: benchmarks/results/NAME.json (kind "bert"; the schema: benchmarks/report.py) -> the
"BERT" table of docs/results.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from attnkit.app.api import evaluate, load, train
from attnkit.tasks.pseudo_label import pseudo_label, read_unlabelled, write_pseudo_labels
from report import (
    ROOT,
    command_line,
    cpu_native_bf16,
    machine,
    peak_rss_mb,
    publish,
    run_precision,
    write_results_md,
)

# what the table shows for each task: (metric key in the evaluation, column label)
HEADLINE = {
    "classify": [("accuracy", "accuracy"), ("macro_f1", "macro-F1")],
    "tag": [("f1", "entity F1"), ("precision", "precision"), ("recall", "recall")],
    "qa": [("exact_match", "EM"), ("f1", "F1")],
}


def _rows(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]


def _speed(rows: list[dict]) -> int | None:
    speeds = [r["tokens_per_s"] for r in rows if "tokens_per_s" in r]
    return round(statistics.median(speeds)) if speeds else None


def _seconds_before_resume(out: Path) -> float:
    """Training seconds the interrupted run in ``out`` had spent up to its last/ checkpoint.

    A resumed run restarts its ``elapsed_s`` clock at 0, so after several resumes the log
    holds several segments: their times are added (each up to where the next one resumed)."""
    step = json.loads((out / "last" / "state.json").read_text())["step"]
    times = [r["elapsed_s"] for r in _rows(out) if "elapsed_s" in r and r["step"] <= step]
    done, last = 0.0, 0.0
    for t in times:
        if t < last:  # a new segment began: the previous one ended at ``last``
            done += last
        last = t
    return done + last


def pretrain(
    config: str, overrides: list[str], name: str | None = None, resume: bool = False
) -> tuple[Path, dict]:
    """Train a task bert-pretrain recipe into runs/bench-<name> (default: the recipe's name);
    ``resume``: continue it from its last/ checkpoint if it has one."""
    name = name or Path(config).stem
    out = ROOT / "runs" / f"bench-{name}"
    resume = resume and (out / "last" / "state.json").is_file()
    before = _seconds_before_resume(out) if resume else 0.0
    start = time.perf_counter()
    if resume:
        print(f"resuming {out} from its last/ checkpoint ({before / 60:.1f} minutes done)")
        result = train(out=out, resume=True)
    else:
        overrides = ["training.progress=false", *overrides]
        result = train(config, out=out, overrides=overrides, force=True)
    wall = before + time.perf_counter() - start
    rows = _rows(out)
    last = [r for r in rows if "val_loss" in r][-1]
    cfg = json.loads((out / "config.json").read_text())
    return out, {
        "pretrain_recipe": config,
        "pretrain_overrides": overrides,
        "pretrain_dataset": cfg["data"]["name"],
        "pretrain_arch": cfg["model"]["arch"],
        "pretrain_parameters": cfg["num_parameters"],
        "pretrain_steps": result.step,
        "pretrain_minutes": round((before + result.train_seconds) / 60, 2),
        **({"pretrain_resumed": True} if resume else {}),
        "pretrain_total_minutes": round(wall / 60, 2),
        "pretrain_tokens_per_s": _speed(rows),
        "pretrain_validation": {
            "mlm_accuracy": round(last["val_mlm_accuracy"], 4),
            "mlm_loss": round(last["val_mlm_loss"], 4),
            **(
                {"nsp_accuracy": round(last["val_nsp_accuracy"], 4)}
                if "val_nsp_accuracy" in last
                else {}
            ),
        },
    }


def pseudo_labels(
    teachers: list[str],
    source: str,
    out: Path,
    min_confidence: float,
    balance: bool,
    soft: bool = False,
) -> dict:
    """Self-training's first step: the classify run ``teachers`` (several: their ensemble)
    label the texts of ``source`` (a dataset's unlabelled reviews, or a text file) into the
    TSV ``out`` (``soft``: with their class probabilities)."""
    start = time.perf_counter()
    texts = read_unlabelled(source)
    teacher = load(teachers)
    rows, stats = pseudo_label(
        teacher, texts, min_confidence, balance, soft=soft, log=lambda *_: None
    )
    out.parent.mkdir(parents=True, exist_ok=True)  # (write_pseudo_labels makes no folders)
    write_pseudo_labels(rows, out, teacher.labels)
    return {
        "pseudo_teacher": teachers[0] if len(teachers) == 1 else teachers,
        **({"pseudo_soft": True} if soft else {}),
        "pseudo_input": source,
        "pseudo_min_confidence": min_confidence,
        "pseudo_balance": balance,
        "pseudo_texts": stats["texts"],
        "pseudo_confident": stats["confident"],
        "pseudo_kept": stats["kept"],
        "pseudo_minutes": round((time.perf_counter() - start) / 60, 2),
    }


def finetune(config: str, name: str, overrides: list[str]) -> dict:
    out = ROOT / "runs" / f"bench-{name}"
    start = time.perf_counter()
    result = train(config, out=out, overrides=["training.progress=false", *overrides], force=True)
    wall = time.perf_counter() - start
    cfg = json.loads((out / "config.json").read_text())
    report = evaluate(out, "test")
    task = cfg["task"]
    return {
        "task": task,
        "dataset": cfg["data"]["name"],
        "arch": cfg["model"]["arch"],
        "init_from": cfg["model"].get("init_from"),
        "freeze_encoder": bool(cfg["model"].get("freeze_encoder")),
        "num_parameters": cfg["num_parameters"],
        "precision": run_precision(cfg),
        "bf16": run_precision(cfg) == "bf16",
        "max_len": cfg["data"]["max_len"],
        "test": {k: round(report[k], 4) for k, _ in HEADLINE.get(task, []) if k in report},
        "test_examples": report.get("num_examples", report.get("count")),
        "best_val_metric": result.best_metric,
        "steps": result.step,
        "train_minutes": round(result.train_seconds / 60, 2),
        "total_minutes": round(wall / 60, 2),
        "tokens_per_s": _speed(_rows(out)),
        **(
            {"extra_train_examples": cfg["extra_train_examples"]}
            if "extra_train_examples" in cfg
            else {}
        ),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", help="fine-tuning recipe (classify / tag / qa)")
    parser.add_argument("--name", help="result name (default: the recipe's file name)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--pretrain", metavar="CONFIG", help="a bert-pretrain recipe to run first")
    parser.add_argument("--pretrain-set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument(
        "--pretrain-name", metavar="NAME", help="pretrain into runs/bench-NAME (default: recipe's)"
    )
    parser.add_argument(
        "--resume", action="store_true", help="continue an interrupted pretraining from last/"
    )
    parser.add_argument("--init", metavar="RUN", help="start from this run (model.init_from)")
    parser.add_argument(
        "--pseudo-from",
        metavar="RUN",
        action="append",
        default=[],
        help="self-training: this classify run (repeated: their ensemble) labels "
        "--pseudo-input first; the confident texts are added to the training data "
        "(data.extra_train)",
    )
    parser.add_argument("--pseudo-input", default="nsmc", help="dataset name or text file")
    parser.add_argument("--pseudo-min-confidence", type=float, default=0.9)
    parser.add_argument("--pseudo-balance", action="store_true", help="as many of each class")
    parser.add_argument("--pseudo-soft", action="store_true", help="soft targets (distillation)")
    parser.add_argument("--only-docs", action="store_true", help="just rebuild docs/results.md")
    args = parser.parse_args()
    if args.only_docs:
        print(f"wrote {write_results_md()}")
        return 0
    if not args.config and not args.pretrain:
        parser.error("give a recipe, --pretrain CONFIG, or both")
    if args.resume and not args.pretrain:
        parser.error("--resume continues a --pretrain run")
    record: dict = {"kind": "bert", "command": command_line("bert.py", skip=("--resume",))}
    overrides = list(args.set)
    if args.pretrain:
        pre_dir, info = pretrain(args.pretrain, args.pretrain_set, args.pretrain_name, args.resume)
        record.update(info)
        overrides.insert(0, f"model.init_from={pre_dir}")
    elif args.init:
        overrides.insert(0, f"model.init_from={args.init}")
    if args.pseudo_from and not args.config:
        parser.error("--pseudo-from needs a recipe to fine-tune")
    if args.config:
        name = args.name or Path(args.config).stem
        if args.pseudo_from:
            tsv = ROOT / "runs" / f"bench-{name}-pseudo.tsv"
            record.update(
                pseudo_labels(
                    args.pseudo_from,
                    args.pseudo_input,
                    tsv,
                    args.pseudo_min_confidence,
                    args.pseudo_balance,
                    args.pseudo_soft,
                )
            )
            overrides.append(f"data.extra_train={tsv}")
        record.update(finetune(args.config, name, overrides))
    else:
        name = args.name or args.pretrain_name or Path(args.pretrain).stem
    record.update(
        {
            "name": name,
            "peak_rss_mb": peak_rss_mb(),
            "machine": machine(),
            "cpu_native_bf16": cpu_native_bf16(),
            "date": time.strftime("%Y-%m-%d"),
        }  # fmt: skip
    )
    publish(record)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""``attnkit train``: a recipe (a file or a bundled name) into a run directory, or
``--resume`` one; Ctrl-C and SIGTERM end it with the command that continues."""

from __future__ import annotations

import argparse
import sys

from attnkit.app.cli.common import UsageError


def _cmd_train(args: argparse.Namespace) -> int:
    from attnkit.app.api import train

    if args.config is None and not args.resume:
        raise UsageError(
            "give a recipe file or a bundled recipe's name (e.g. nsmc-quick; `attnkit recipes` "
            "lists them), or --resume --out RUN"
        )
    overrides = list(args.set or [])
    if args.data_dir:
        overrides.append(f"data.data_dir={args.data_dir}")
    if args.resume and overrides:
        raise UsageError("--resume continues a run with its saved config; --set is not allowed")
    out = args.out
    if args.resume and out is None:
        out = args.config  # `attnkit train --resume runs/NAME` is accepted too
    if out is not None:
        _check_run_folder(out)
    from attnkit.core.signals import terminate_as_interrupt

    try:
        with terminate_as_interrupt():  # SIGTERM too: temp files go, checkpoints stay
            result = train(
                args.config if not args.resume else None,
                out,
                overrides,
                args.resume,
                args.force,
                device=args.device,
                threads=args.threads,
            )
    except KeyboardInterrupt as exc:  # Ctrl-C (130) or SIGTERM (Terminated: 143)
        what = "terminated" if hasattr(exc, "exit_status") else "interrupted"
        print(f"attnkit: {what}; {_resume_hint(args, out)}", file=sys.stderr)
        return getattr(exc, "exit_status", 130)
    from attnkit.runtime.distributed import placement

    if not placement().is_main:  # under torchrun: rank 0 reports
        return 0
    best = "n/a" if result.best_metric is None else f"{result.best_metric:.4f}"
    print(
        f"done: {result.step} steps in {result.train_seconds / 60:.1f} min, best validation "
        f"metric {best} (step {result.best_step}); run in {result.run_dir}"
    )
    return 0


def _resume_hint(args: argparse.Namespace, out: str | None) -> str:
    """How to go on after Ctrl-C: the resume command where a checkpoint exists."""
    from pathlib import Path

    from attnkit.runtime.run import RunDir

    if out is None and args.config:
        out = str(Path("runs") / Path(args.config).stem)  # the default --out
    if out is not None and RunDir(out).has_checkpoint():
        return f"continue with: attnkit train --resume --out {out}"
    return "no checkpoint was written yet: start again with the same command"


def _check_run_folder(out: str) -> None:
    """--out must be a folder or a place where one can be made: not a file, not under one,
    not in a run directory, writable (``attnkit.core.output_guard``)."""
    from attnkit.core.output_guard import check_output

    check_output(out, kind="folder", what="--out")


def _add_train(sub: argparse._SubParsersAction) -> None:
    train = sub.add_parser(
        "train", help="train a model from a YAML recipe (a file, or a bundled recipe's name)"
    )
    train.add_argument(
        "config",
        nargs="?",
        help="a recipe file (my.yaml) or the name of a bundled recipe (nsmc-quick; `attnkit "
        "recipes` lists them); a file always wins",
    )
    train.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="override a recipe value, e.g. --set training.lr=3e-4 (repeatable)",
    )
    train.add_argument("--out", help="run directory (default: runs/<recipe name>)")
    train.add_argument("--resume", action="store_true", help="continue the run in --out from last/")
    train.add_argument("--force", action="store_true", help="overwrite an existing run directory")
    train.add_argument("--data-dir", help="data folder (default: $ATTNKIT_DATA, ~/.cache/attnkit)")
    train.add_argument(
        "--device",
        help="auto | cpu | cuda | cuda:N | mps (default: the recipe's training.device, auto)",
    )
    train.set_defaults(func=_cmd_train)

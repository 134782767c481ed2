"""``attnkit env``: machine and version facts for a bug report."""

from __future__ import annotations

import argparse


def _cmd_env(args: argparse.Namespace) -> int:
    import json

    from attnkit.app.env_report import collect, format_report

    info = collect(args.data_dir)
    print(json.dumps(info, indent=2) if args.json else format_report(info))
    return 0


def _add_env(sub: argparse._SubParsersAction) -> None:
    env = sub.add_parser("env", help="machine and version facts for a bug report")
    env.add_argument("--json", action="store_true", help="one JSON object")
    env.add_argument("--data-dir", help="data folder (default: $ATTNKIT_DATA, ~/.cache/attnkit)")
    env.set_defaults(func=_cmd_env)

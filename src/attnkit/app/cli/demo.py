"""``attnkit demo``: the two small sentiment models (or the toy Transformer) of
``attnkit.app.demo``, with its flags repeated here so that ``attnkit --help`` stays light."""

from __future__ import annotations

import argparse


def _cmd_demo(args: argparse.Namespace) -> int:
    from attnkit.app.demo import run_demo

    return run_demo(args.out, toy=args.toy, steps=args.steps)


def _add_demo(sub: argparse._SubParsersAction) -> None:
    # the flags of `python -m attnkit.app.demo` (attnkit.app.demo.build_parser), which
    # imports torch: repeated here so that `attnkit --help` stays light
    demo = sub.add_parser(
        "demo",
        help="train and use two small sentiment models from the bundled recipes (--toy: a "
        "tiny Transformer that needs no data); runs from any folder",
    )
    demo.add_argument("--out", default="demo_out", help="folder for runs and figures")
    demo.add_argument(
        "--toy",
        action="store_true",
        help="only the digit-reversal Transformer (no datasets needed)",
    )
    demo.add_argument("--steps", type=int, default=600, help="toy training steps")
    demo.set_defaults(func=_cmd_demo)

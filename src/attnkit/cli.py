"""The ``attnkit`` command: a thin layer over the Python API.

Every user error ends in one line on stderr, ``attnkit: error: ...``, and exit code 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from attnkit import __version__

EXIT_USAGE = 2


class UsageError(Exception):
    """A user mistake (bad argument, missing file, bad input): one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (no usage dump) and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


# ----------------------------------------------------------------------------- plot
def _cmd_plot_pe(args: argparse.Namespace) -> int:
    from attnkit.viz import plot_positional_encoding

    if args.d_model < 2:
        raise UsageError("--d-model must be at least 2")
    path = plot_positional_encoding(args.max_len, args.d_model, args.output)
    print(f"wrote {path}")
    return 0


def _cmd_plot_curves(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from attnkit.viz import plot_curves

    source = Path(args.run)
    if source.is_dir():
        source = source / "metrics.jsonl"
    if not source.is_file():
        raise UsageError(f"no metrics file at {source}")
    rows = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines() if line]
    out = args.output or str(source.with_name("curves.png"))
    print(f"wrote {plot_curves(rows, out)}")
    return 0


def _add_plot(sub: argparse._SubParsersAction) -> None:
    plot = sub.add_parser("plot", help="draw figures (positional encoding, learning curves)")
    kinds = plot.add_subparsers(dest="kind", required=True, metavar="KIND", parser_class=_Parser)
    pe = kinds.add_parser(
        "positional-encoding", help="heatmap of the sinusoidal positional encoding"
    )
    pe.add_argument("--max-len", type=_positive_int, default=50, help="positions (rows)")
    pe.add_argument("--d-model", type=_positive_int, default=128, help="embedding size (columns)")
    pe.add_argument("-o", "--output", default="positional_encoding.png", help="PNG path")
    pe.set_defaults(func=_cmd_plot_pe)
    curves = kinds.add_parser("curves", help="learning curves of a run (metrics.jsonl)")
    curves.add_argument("run", help="run directory or metrics.jsonl file")
    curves.add_argument("-o", "--output", help="PNG path (default: next to metrics.jsonl)")
    curves.set_defaults(func=_cmd_plot_curves)


# ----------------------------------------------------------------------------- main
COMMANDS: list[Callable[[argparse._SubParsersAction], None]] = [_add_plot]


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="attnkit",
        description="Attention and Transformers from first principles: train, evaluate, "
        "explain and serve models.",
    )
    parser.add_argument("--version", action="version", version=f"attnkit {__version__}")
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=_Parser
    )
    for add in COMMANDS:
        add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except UsageError as exc:
        print(f"attnkit: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("attnkit: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

"""``attnkit plot``: the positional-encoding heatmap and a run's learning curves."""

from __future__ import annotations

import argparse

from attnkit.app.cli.common import UsageError, _bounded, _Parser


def _cmd_plot_pe(args: argparse.Namespace) -> int:
    from attnkit.core.params import check_pe_size
    from attnkit.runtime.viz import check_output_path, plot_positional_encoding

    check_pe_size(args.max_len, args.d_model, cli=True)  # each, and the numbers drawn
    out = check_output_path(args.output)
    path = plot_positional_encoding(args.max_len, args.d_model, out)
    print(f"wrote {path}")
    return 0


def _cmd_plot_curves(args: argparse.Namespace) -> int:
    from pathlib import Path

    from attnkit.runtime.run import RunDir, read_jsonl
    from attnkit.runtime.viz import check_output_path, plot_curves

    source = Path(args.run)
    if source.is_dir():
        source = RunDir(source).metrics_path
    if not source.is_file():
        raise UsageError(f"no metrics file at {source}")
    # a run's own curves.png is its training's: by default the figure goes here, named
    # after the run (the output guard refuses a path inside a run)
    default = Path(f"{source.resolve().parent.name or 'run'}-curves.png")
    out = check_output_path(default if args.output is None else args.output, inputs=[source])
    print(f"wrote {plot_curves(read_jsonl(source), out)}")
    return 0


def _add_plot(sub: argparse._SubParsersAction) -> None:
    plot = sub.add_parser("plot", help="draw figures (positional encoding, learning curves)")
    kinds = plot.add_subparsers(dest="kind", required=True, metavar="KIND", parser_class=_Parser)
    pe = kinds.add_parser(
        "positional-encoding", help="heatmap of the sinusoidal positional encoding"
    )
    pe.add_argument("--max-len", type=_bounded("pe_max_len"), default=50,
                    help="positions (rows; at most 8192)")  # fmt: skip
    pe.add_argument("--d-model", type=_bounded("pe_d_model"), default=128,
                    help="embedding size (columns; at most 8192, and at most 4,194,304 "
                    "numbers in all)")  # fmt: skip
    pe.add_argument("-o", "--output", default="positional_encoding.png", help="PNG path")
    pe.set_defaults(func=_cmd_plot_pe)
    curves = kinds.add_parser("curves", help="learning curves of a run (metrics.jsonl)")
    curves.add_argument("run", help="run directory or metrics.jsonl file")
    curves.add_argument(
        "-o",
        "--output",
        help="PNG path (default: ./RUN-curves.png; a run's own curves.png is its training's)",
    )
    curves.set_defaults(func=_cmd_plot_curves)

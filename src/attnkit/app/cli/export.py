"""``attnkit export``: a run's model as a Hugging Face folder, an int8 run or ONNX."""

from __future__ import annotations

import argparse


def _cmd_export(args: argparse.Namespace) -> int:
    from attnkit.app.api import export

    fmt = args.format or ("attnkit" if args.quantize else "hf")
    path = export(args.run, args.output, fmt=fmt, quantize=args.quantize)
    print(f"wrote {path}")
    return 0


def _add_export(sub: argparse._SubParsersAction) -> None:
    ex = sub.add_parser(
        "export",
        help="write a run's model in another format (hf: Hugging Face; attnkit --quantize "
        "int8: a run with int8 weights for CPU inference; onnx: model.onnx for onnxruntime)",
    )
    ex.add_argument(
        "run", help="run directory (--format hf: a BERT run; a classifier pooled by its pooler)"
    )
    ex.add_argument(
        "--format",
        choices=["hf", "attnkit", "onnx"],
        help="hf: a transformers directory (the default); attnkit: a run (with --quantize); "
        "onnx: a run holding model.onnx, checked against onnxruntime (classify, tag, qa; "
        "needs pip install 'attnkit[onnx]')",
    )
    ex.add_argument(
        "--quantize",
        choices=["int8"],
        help="int8: dynamically quantized Linear layers (their weights 4x smaller; CPU only)",
    )
    ex.add_argument("-o", "--output", required=True, help="folder to write (created)")
    ex.set_defaults(func=_cmd_export)

"""``attnkit generate``: an lm run continues a prompt, the text streamed as it is decoded."""

from __future__ import annotations

import argparse
import sys
import warnings

from attnkit.app.cli.common import (
    UsageError,
    _add_device,
    _load_for,
    _print_warnings,
    _sampling_args,
)
from attnkit.app.cli.inputs import _check_text


def _cmd_generate(args: argparse.Namespace) -> int:
    _sampling_args(args)  # and --max-new-tokens, --repetition-penalty
    if any(not s for s in args.stop):
        raise UsageError("--stop needs a non-empty string")
    prompt = _check_text(args.prompt, 1)
    predictor = _load_for(args.run, "generate", args)
    printed: list[str] = []

    def write(piece: str) -> None:  # each piece of the continuation as soon as it is decoded
        sys.stdout.write(piece)
        sys.stdout.flush()
        printed.append(piece)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = predictor.generate(
            prompt,
            max_new_tokens=args.max_new_tokens,
            temperature=args.temperature,
            top_k=args.top_k,
            top_p=args.top_p,
            repetition_penalty=args.repetition_penalty,
            stop=args.stop,
            seed=args.seed,
            stream=None if args.json else write,
        )
    if args.json:
        print(predictor.to_json(results))
    elif not "".join(printed).endswith("\n"):
        print(flush=True)
    _print_warnings(caught)
    return 0


def _add_generate(sub: argparse._SubParsersAction) -> None:
    ge = sub.add_parser(
        "generate",
        help="continue a prompt with a trained language model (lm run), streaming the text",
    )
    ge.add_argument("run", help="run directory of an lm run")
    ge.add_argument(
        "--prompt",
        default="",
        help="the text to continue (default: empty: a char model starts from a line break, "
        "a review model from the start of a review); only the continuation is printed",
    )
    ge.add_argument(
        "--max-new-tokens", type=int, default=200, help="most tokens to add (default: 200)"
    )
    ge.add_argument(
        "--temperature", type=float, default=1.0, help="sampling temperature (0 = greedy)"
    )
    ge.add_argument("--top-k", type=int, default=0, help="sample from the k best (0 = all)")
    ge.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling mass (1 = off)")
    ge.add_argument(
        "--repetition-penalty",
        type=float,
        default=1.0,
        help="> 1 discourages tokens already in the prompt or output (1 = off)",
    )
    ge.add_argument(
        "--stop",
        action="append",
        default=[],
        metavar="STR",
        help="end the continuation before this string (repeatable; a line break in bash: "
        "--stop $'\\n')",
    )
    ge.add_argument("--seed", type=int, help="random seed (reproducible samples)")
    ge.add_argument("--json", action="store_true", help="one JSON object (no streaming)")
    _add_device(ge)
    ge.set_defaults(func=_cmd_generate)

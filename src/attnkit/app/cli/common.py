"""What the verb modules share: ``UsageError`` (a user mistake: one line, exit code 2), the
parser class, the argument types (``--beam``, ``--threads``, bounded integers), ``--device``
and ``--precision``, loading a run for a verb, warnings as lines, the decoding options."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

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


def _threads(text: str) -> int:
    """--threads: a positive integer, at most a few per core (``check_threads``)."""
    from attnkit.runtime.device import check_threads

    try:
        return check_threads(_positive_int(text))
    except ValueError as err:  # (ConfigError is one)
        raise argparse.ArgumentTypeError(str(err)) from None


def _beam(text: str) -> int:
    """--beam: a positive integer within the table the server uses (``core.params``)."""
    from attnkit.core.params import PARAMS

    value = _positive_int(text)
    problem = PARAMS["beam"].problem(value)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"beam {problem}")
    return value


def _bounded(name: str) -> Callable[[str], int]:
    """An argparse type: an integer in the range of ``PARAMS[name]`` (``core.params``)."""

    def parse(text: str) -> int:
        from attnkit.core.params import PARAMS

        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        problem = PARAMS[name].problem(value)
        if problem is not None:
            raise argparse.ArgumentTypeError(problem)
        return value

    return parse


# the verbs that call a predictor's method of the same name (Predictor.capabilities)
VERBS = ("predict", "translate", "chat", "tag", "answer", "generate")


def _require_verb(predictor, verb: str, run: str) -> None:
    """A verb works on a run whose predictor declares it (``Predictor.can``)."""
    if not predictor.can(verb):
        others = [f"`attnkit {v}`" for v in VERBS if predictor.can(v)]
        hint = f"; use {' or '.join(others)}" if others else ""
        raise UsageError(f"{run} is a {predictor.task} run{hint}")


def _add_device(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--device",
        default="cpu",
        help="where the model runs: cpu (default) | cuda | cuda:N | mps | auto",
    )
    parser.add_argument(
        "--precision",
        choices=("auto", "fp32", "bf16"),
        default="auto",
        help="auto (default): bf16 where the device computes it natively (CUDA >= 8.0, a CPU "
        "with avx512_bf16/amx_bf16), fp32 elsewhere",
    )


def _device(args: argparse.Namespace) -> str:
    """--device, checked (a device this machine lacks is one error line)."""
    from attnkit.runtime.device import resolve_device

    return str(resolve_device(args.device, what="--device"))


def _load_for(run: str, verb: str, args: argparse.Namespace):
    from attnkit.app.api import load

    predictor = load(run, map_location=_device(args), precision=args.precision)
    _require_verb(predictor, verb, run)
    return predictor


def _print_warnings(caught) -> None:
    for w in caught:
        print(f"attnkit: warning: {w.message}", file=sys.stderr)


def _sampling_args(args: argparse.Namespace) -> None:
    """The decoding options in their ranges (attnkit.core.params: the server's too), before any
    model is loaded: ``--seed -1`` or ``--temperature inf`` is one line, exit 2."""
    from attnkit.core.params import PARAMS

    for name in ("temperature", "top_k", "top_p", "seed", "max_new_tokens", "repetition_penalty"):
        value = getattr(args, name, None)
        problem = None if value is None else PARAMS[name].problem(value)
        if problem is not None:
            raise UsageError(f"{PARAMS[name].option} {problem}")

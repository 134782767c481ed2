"""The ``attnkit`` command: a thin layer over the Python API.

Every user error ends in one line on stderr, ``attnkit: error: ...``, and exit code 2.

This package: the parser (``build_parser``: each verb's module adds its subcommands, in
``COMMANDS`` order), ``parse_args`` and ``main`` (the error handling). Its modules::

    common.py    UsageError, the parser class, argument types, --device, a run for a verb
    inputs.py    texts from arguments, stdin and --file; stdout while a command runs
    data.py      data list / fetch, recipes
    train.py     train
    classify.py  predict, evaluate, calibrate, pseudo-label
    seq2seq.py   translate, chat
    tag_qa.py    tag, answer
    generate.py  generate (lm runs)
    export.py    export
    explain.py   explain
    serve.py     serve
    plot.py      plot positional-encoding / curves
    env.py       env
    demo.py      demo

A verb imports what it needs inside its function (``attnkit --help`` loads no torch).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from attnkit.app.cli.classify import _add_evaluate, _add_predict, _add_pseudo_label
from attnkit.app.cli.common import (
    EXIT_USAGE,
    VERBS,
    UsageError,
    _Parser,
    _sampling_args,
    _threads,
)
from attnkit.app.cli.data import _add_data, _add_recipes
from attnkit.app.cli.demo import _add_demo
from attnkit.app.cli.env import _add_env
from attnkit.app.cli.explain import _add_explain
from attnkit.app.cli.export import _add_export
from attnkit.app.cli.generate import _add_generate
from attnkit.app.cli.inputs import (
    _WRITE_ERRNOS,
    EXIT_BROKEN_PIPE,
    _broken_pipe,
    _output_lost,
    _read_inputs,
    _Stdout,
)
from attnkit.app.cli.plot import _add_plot
from attnkit.app.cli.seq2seq import _add_seq2seq
from attnkit.app.cli.serve import _add_serve
from attnkit.app.cli.tag_qa import _add_tag_answer
from attnkit.app.cli.train import _add_train
from attnkit.core.version import __version__

__all__ = [  # what other code and tests import from attnkit.app.cli
    "EXIT_BROKEN_PIPE",
    "EXIT_USAGE",
    "VERBS",
    "UsageError",
    "_read_inputs",
    "_sampling_args",
    "build_parser",
    "main",
    "parse_args",
]


COMMANDS: list[Callable[[argparse._SubParsersAction], None]] = [
    _add_data,
    _add_recipes,
    _add_train,
    _add_evaluate,
    _add_predict,
    _add_pseudo_label,
    _add_seq2seq,
    _add_tag_answer,
    _add_generate,
    _add_export,
    _add_explain,
    _add_serve,
    _add_plot,
    _add_env,
    _add_demo,
]


def _user_errors() -> tuple[type[Exception], ...]:
    """Exceptions that mean "bad input", reported as one line with exit code 2 (any other
    exception is a bug and keeps its traceback)."""
    from attnkit.core.errors import AttnkitError

    return (AttnkitError,)


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
    _add_threads(parser)
    return parser


def _add_threads(parser: argparse.ArgumentParser) -> None:
    """``--threads N`` on every command: torch's intra-op threads (default: the cores this
    process may use; for train, the recipe's training.num_threads first)."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        parser.add_argument(
            "--threads",
            type=_threads,
            help="CPU threads for torch (default: the cores this process may use; on a "
            "machine busy with other work, fewer can be faster)",
        )
        return
    for child in {id(p): p for p in subs[0].choices.values()}.values():
        _add_threads(child)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line as ``main`` reads it, nothing run (the README's docs check parses
    its commands with it). A bad one: argparse's one-line error and ``SystemExit(2)``."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    # argparse binds `RUN TEXT...` in one go, so texts given after an option
    # (`predict RUN --ensemble RUN2 "text"`) come back unrecognised: they are texts too
    texts_only = not any(x.startswith("-") and x != "-" for x in extra)
    if extra and texts_only and isinstance(getattr(args, "text", None), list):
        args.text += extra
        extra = []
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    import logging

    from attnkit.core.logs import console_logging

    args = parse_args(argv)
    out = None
    try:
        if sys.stdout is None:  # closed (`>&-`): every command's output would be lost
            raise UsageError("cannot write the output: stdout is closed")
        out = sys.stdout = _Stdout(sys.stdout)
        # train applies --threads or training.num_threads itself; data, recipes need no torch
        if args.command not in ("train", "data", "recipes"):
            from attnkit.runtime.device import apply_threads

            apply_threads(getattr(args, "threads", None))
        # attnkit's messages: as the CLI's lines (stdout; warnings on stderr), those of
        # training (train, and demo, which trains) from INFO on, the other commands' from
        # WARNING on
        level = logging.INFO if args.command in ("train", "demo") else logging.WARNING
        with console_logging(level):
            code = int(args.func(args) or 0)
            sys.stdout.flush()  # here: a full disk is an error line, not one at exit
        if out.error is not None:  # a failed write someone caught (a logging handler)
            raise out.error
        return code
    except BrokenPipeError:  # the reader went away (`attnkit predict ... | head -1`)
        return _broken_pipe()
    except (UsageError, *_user_errors()) as exc:
        if os.environ.get("ATTNKIT_DEBUG"):
            raise
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"attnkit: error: {message}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:  # stdout's (`> /dev/full`), or a file's a full or read-only disk
        if os.environ.get("ATTNKIT_DEBUG"):  # refused, are the user's; any other is a bug
            raise
        if out is not None and out.error is not None:
            return _output_lost(out.error)
        if exc.errno not in _WRITE_ERRNOS or exc.filename is None:
            raise
        print(f"attnkit: error: cannot write {exc.filename}: {exc.strerror}", file=sys.stderr)
        return EXIT_USAGE
    except ImportError as exc:  # an optional package (an extra) imported outside `needs`
        from attnkit.core.extras import missing_extra

        missing = missing_extra(exc, f"attnkit {args.command}")
        if missing is None or os.environ.get("ATTNKIT_DEBUG"):
            raise
        print(f"attnkit: error: {missing}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("attnkit: interrupted", file=sys.stderr)
        return 130
    finally:
        if out is not None and sys.stdout is out:
            sys.stdout = out.stream

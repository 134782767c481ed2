"""``attnkit translate`` and ``attnkit chat``: the verbs of a seq2seq run (translate or chat
task); chat without texts is a prompt loop on stdin."""

from __future__ import annotations

import argparse
import sys
import warnings

from attnkit.app.cli.common import (
    UsageError,
    _add_device,
    _beam,
    _load_for,
    _positive_int,
    _print_warnings,
    _sampling_args,
)
from attnkit.app.cli.inputs import _read_lines_kept, _stdin


def _cmd_translate(args: argparse.Namespace) -> int:
    from attnkit.core.errors import json_line
    from attnkit.tasks.base import one_line
    from attnkit.tasks.seq2seq import format_trace

    if not args.text:
        raise UsageError("no input text (give TEXT... or - for stdin)")
    if args.trace and args.beam > 1:
        raise UsageError("--trace shows greedy decoding step by step; leave out --beam")
    texts = _read_lines_kept(args)
    figure = None
    if args.show_attention is not None:  # a figure that cannot be written fails before any work
        from attnkit.runtime.viz import check_output_path

        figure = check_output_path(args.show_attention, what="--show-attention")
    predictor = _load_for(args.run, "translate", args)
    for option, asked, capability in (
        ("--trace", args.trace, "trace"),
        ("--show-attention", figure is not None, "show_attention"),
    ):
        if asked and not predictor.can(capability):
            raise UsageError(f"{option}: {args.run} is a {predictor.task} run without it")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if args.trace:
            for text in texts:
                if not text.strip():
                    print("")
                    continue
                output, steps = predictor.trace(text, max_len=args.max_len)
                if args.json:
                    row = {
                        "source": text,
                        "translation": output,
                        "trace": [s.to_dict() for s in steps],
                    }
                    print(json_line(row))
                else:
                    print(format_trace(steps))
                    print(one_line(output))
        else:
            outputs = predictor.translate(texts, beam=args.beam, max_len=args.max_len)
            if args.json:
                if texts:
                    print(predictor.to_json(texts, outputs))
            else:
                for line in outputs:
                    print(one_line(line))
        sys.stdout.flush()
        if figure is not None:
            first = next((t for t in texts if t.strip()), None)
            if first is None:
                raise UsageError("--show-attention needs a non-empty input")
            path = predictor.show_attention(first, figure, beam=args.beam)
            print(f"wrote {path}", file=sys.stderr)
    _print_warnings(caught)
    return 0


def _cmd_chat(args: argparse.Namespace) -> int:

    from attnkit.tasks.base import one_line

    _sampling_args(args)
    texts = _read_lines_kept(args) if args.text else None
    stdin = _stdin() if texts is None else None  # the prompt loop reads it: closed, an error
    predictor = _load_for(args.run, "chat", args)

    def answer(text: str, turn: int) -> str:
        """The answer to ``text`` on one line (the seed of turn n is --seed + n - 1, kept
        in the seed's range)."""
        if not text.strip():
            return ""
        seed = None if args.seed is None else (args.seed + turn - 1) % 2**63
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = predictor.chat(
                text,
                temperature=args.temperature,
                top_k=args.top_k,
                top_p=args.top_p,
                seed=seed,
                max_len=args.max_len,
            )
        _print_warnings(caught)
        return one_line(out)

    if texts is not None:  # one-shot: answer the given texts (and stdin lines for -), exit
        for turn, text in enumerate(texts, 1):
            print(answer(text, turn))
        return 0
    interactive = stdin.isatty()
    if interactive:
        print(f"chatting with {args.run} (Ctrl-D or Ctrl-C to quit)", file=sys.stderr)
    from attnkit.data.lines import decode_line, iter_lines

    binary = getattr(stdin, "buffer", None)  # bytes: a line that is not UTF-8 is skipped
    if binary is not None:  # line by line, each bounded (attnkit.data.lines)
        lines = iter_lines(binary, "on stdin")
    else:  # a text-only stream (tests)
        lines = (
            (text.rstrip("\r\n").encode("utf-8", "surrogateescape"), False)
            for text in iter(stdin.readline, "")
        )
    turn = 0
    try:
        while True:
            if interactive:
                print("> ", end="", file=sys.stderr, flush=True)
            try:
                got = next(lines, None)
            except OSError as exc:  # open for writing only (0>FILE), an I/O error
                raise UsageError(f"cannot read standard input: {exc.strerror or exc}") from None
            if got is None:  # EOF
                break
            raw, cut = got
            turn += 1
            try:
                line = decode_line(raw, cut)
            except UnicodeDecodeError as exc:
                print(
                    f"attnkit: error: input {turn} is not valid UTF-8 (byte "
                    f"0x{raw[exc.start]:02x} at byte {exc.start + 1}); skipped",
                    file=sys.stderr,
                    flush=True,
                )
                continue
            print(answer(line.rstrip("\r\n"), turn), flush=True)
    except KeyboardInterrupt:
        pass
    if interactive:
        print(file=sys.stderr)
    return 0


def _add_seq2seq(sub: argparse._SubParsersAction) -> None:
    tr = sub.add_parser("translate", help="translate with a trained seq2seq run")
    tr.add_argument("run", help="run directory (task translate or chat)")
    tr.add_argument("text", nargs="*", help="sentences; '-' reads one sentence per stdin line")
    tr.add_argument("--beam", type=_beam, default=1, help="beam size (1 = greedy)")
    tr.add_argument("--max-len", type=_positive_int, help="most output tokens (default: the run's)")
    tr.add_argument(
        "--show-attention",
        metavar="PNG",
        help="save the cross-attention alignment of the first sentence",
    )
    tr.add_argument(
        "--trace",
        action="store_true",
        help="print each greedy step: the tokens so far and the top-5 candidates",
    )
    tr.add_argument("--json", action="store_true", help="one JSON object per line")
    _add_device(tr)
    tr.set_defaults(func=_cmd_translate)
    ch = sub.add_parser("chat", help="talk to a trained chatbot run (reads lines from stdin)")
    ch.add_argument("run", help="run directory (task chat or translate)")
    ch.add_argument(
        "text",
        nargs="*",
        help="answer these and exit instead of the prompt loop; '-' reads one per stdin line",
    )
    ch.add_argument(
        "--temperature", type=float, default=0.7, help="sampling temperature (0 = greedy)"
    )
    ch.add_argument("--top-k", type=int, default=0, help="sample from the k best (0 = all)")
    ch.add_argument("--top-p", type=float, default=0.9, help="nucleus sampling mass (1 = off)")
    ch.add_argument("--seed", type=int, help="random seed (reproducible answers)")
    ch.add_argument("--max-len", type=_positive_int, help="most answer tokens (default: the run's)")
    _add_device(ch)
    ch.set_defaults(func=_cmd_chat)

"""``attnkit tag`` (named entities, a tag run) and ``attnkit answer`` (extractive QA, a qa
run: the span of ``--context`` that answers each question)."""

from __future__ import annotations

import argparse
import warnings

from attnkit.app.cli.common import UsageError, _add_device, _load_for, _print_warnings
from attnkit.app.cli.inputs import _check_text, _context_file, _read_inputs, _read_regular_file


def _cmd_tag(args: argparse.Namespace) -> int:
    texts = _read_inputs(args)
    predictor = _load_for(args.run, "tag", args)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = predictor.tag(texts)
    _print_warnings(caught)
    if args.json:
        print(predictor.to_json(results))
    else:
        for r in results:
            print(r.format())
    return 0


def _cmd_answer(args: argparse.Namespace) -> int:
    context = args.context
    if _context_file(context):  # a file's text (UTF-8), else the argument is the context
        from attnkit.data.lines import decode_line
        from attnkit.data.tokenization import MAX_TEXT_CHARS

        # a context is read up to the characters the predictor reads (MAX_TEXT_CHARS; it
        # warns when there are more): 4 bytes a character at most, and one more
        limit = 4 * MAX_TEXT_CHARS + 4
        raw = _read_regular_file(context, limit)
        try:
            context = decode_line(raw.removeprefix(b"\xef\xbb\xbf"), len(raw) == limit)
        except UnicodeDecodeError as exc:
            raise UsageError(f"{args.context} is not UTF-8 text (byte {exc.start + 1})") from None
    else:
        context = _check_text(context, 1)
    questions = [_check_text(q, i) for i, q in enumerate(args.question, 1)]
    predictor = _load_for(args.run, "answer", args)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = predictor.answer_batch([(q, context) for q in questions])
    _print_warnings(caught)
    if args.json:
        print(predictor.to_json(results))
    else:
        for r in results:
            print(r.format())
    return 0


def _add_tag_answer(sub: argparse._SubParsersAction) -> None:
    tg = sub.add_parser("tag", help="named entities: print each word with its label (tag runs)")
    tg.add_argument("run", help="run directory of a tag (NER) run")
    tg.add_argument("text", nargs="*", help="texts; '-' reads lines from stdin")
    tg.add_argument("--file", help="read one text per line from a UTF-8 file")
    tg.add_argument("--json", action="store_true", help="one JSON object per line")
    _add_device(tg)
    tg.set_defaults(func=_cmd_tag)
    an = sub.add_parser(
        "answer", help="extractive QA: the span of the context that answers the question"
    )
    an.add_argument("run", help="run directory of a qa run")
    an.add_argument(
        "--context",
        required=True,
        help="the passage: a UTF-8 text file, or the text itself. Extractive QA always "
        "returns its best span (there is no 'no answer'): a low score means a weak answer",
    )
    an.add_argument("--question", required=True, action="append", help="a question (repeatable)")
    an.add_argument("--json", action="store_true", help="one JSON object per line")
    _add_device(an)
    an.set_defaults(func=_cmd_answer)

"""The ``attnkit`` command: a thin layer over the Python API.

Every user error ends in one line on stderr, ``attnkit: error: ...``, and exit code 2.
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
import warnings
from collections.abc import Callable, Sequence

from attnkit.core.version import __version__

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


# ----------------------------------------------------------------------------- plot
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


# ----------------------------------------------------------------------------- data
def _cmd_data_list(args: argparse.Namespace) -> int:
    """The catalogue, each dataset marked yes / no / bad. By default a quick check (sizes,
    gzip headers and trailers: no file is read through unless it looks damaged); with --verify
    the sha256 of every file. A leftover ``*.part`` of an interrupted download is named, and
    never counted as data."""
    import glob

    from attnkit.data.catalogue import list_datasets
    from attnkit.data.fetch import check_file
    from attnkit.data.paths import resolve_data_dir

    root = resolve_data_dir(args.data_dir)
    print(f"data directory: {root}")
    for info in list_datasets():
        checks = [c for f in info.files for c in check_file(f, root, verify=args.verify)]
        states = {c.status for c in checks}
        mark = "bad" if "bad" in states else "no " if "missing" in states else "yes"
        print(f"  [{mark}] {info.name:16s} {info.language:6s} {info.task:22s} {info.description}")
        for check in checks:
            if check.status == "bad":
                print(
                    f"        {check.path.relative_to(root)}: {check.reason}; "
                    f"`attnkit data fetch {info.name}` downloads it again"
                )
        stored = {root / f.relpath for f in info.files} | {c.path for c in checks}
        parts = sorted(
            str(part.relative_to(root))
            for path in stored
            if path.parent.is_dir()
            for part in path.parent.glob(f"{glob.escape(path.name)}.*")
            if part.name.endswith(".part")
        )
        if parts:
            print(f"        interrupted download, not data (fetch removes it): {', '.join(parts)}")
    if not args.verify:
        print("(quick check of sizes and gzip trailers; --verify compares every sha256)")
    return 0


def _cmd_data_fetch(args: argparse.Namespace) -> int:
    from attnkit.data.fetch import fetch

    for path in fetch(args.name, args.data_dir, base_url=args.mirror, force=args.force):
        print(f"ok {path}")
    return 0


def _add_data(sub: argparse._SubParsersAction) -> None:
    data = sub.add_parser("data", help="list and download datasets")
    actions = data.add_subparsers(
        dest="action", required=True, metavar="ACTION", parser_class=_Parser
    )
    lst = actions.add_parser("list", help="the dataset catalogue and what is present locally")
    lst.add_argument("--data-dir", help="data folder (default: $ATTNKIT_DATA, ~/.cache/attnkit)")
    lst.add_argument(
        "--verify",
        action="store_true",
        help="read every file and compare its sha256 with the catalogue (slower); by default "
        "only sizes and gzip headers/trailers are checked",
    )
    lst.set_defaults(func=_cmd_data_list)
    fetch = actions.add_parser(
        "fetch",
        help="download a dataset (sha256-verified); a missing or damaged file is downloaded "
        "again, an intact one is skipped",
    )
    fetch.add_argument("name")
    fetch.add_argument("--data-dir", help="data folder (default: $ATTNKIT_DATA, ~/.cache/attnkit)")
    fetch.add_argument("--mirror", help="base URL or folder to download from instead of upstream")
    fetch.add_argument("--force", action="store_true", help="download even if present and intact")
    fetch.set_defaults(func=_cmd_data_fetch)


# ----------------------------------------------------------------------------- recipes
def _cmd_recipes_list(args: argparse.Namespace) -> int:
    """The bundled recipes as a table: name, task, what it trains, the data it needs (and a
    run it starts from), training minutes measured on 2 CPU cores."""
    from attnkit.core.recipes import bundled_recipes

    header = ("NAME", "TASK", "TRAINS", "DATA", "MINUTES")
    rows = [(r.name, r.task, r.trains, r.data, r.minutes_text) for r in bundled_recipes()]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header) - 1)]
    for row in [header, *rows]:
        cells = [cell.ljust(width) for cell, width in zip(row[:-1], widths, strict=True)]
        print("  ".join([*cells, row[-1]]))
    print(
        "MINUTES: training time measured on 2 CPU cores (benchmarks/results); `attnkit recipes "
        "show NAME` prints a recipe to copy and edit, `attnkit train NAME` trains it"
    )
    return 0


def _cmd_recipes_show(args: argparse.Namespace) -> int:
    """The bundled recipe's YAML, exactly as shipped."""
    from attnkit.core.recipes import bundled_text

    sys.stdout.write(bundled_text(args.name))
    return 0


def _add_recipes(sub: argparse._SubParsersAction) -> None:
    rec = sub.add_parser(
        "recipes",
        help="the bundled recipes (what each trains, its data, measured minutes); "
        "`recipes show NAME` prints one",
    )
    rec.set_defaults(func=_cmd_recipes_list)
    actions = rec.add_subparsers(dest="action", metavar="ACTION", parser_class=_Parser)
    lst = actions.add_parser("list", help="the table (the default)")
    lst.set_defaults(func=_cmd_recipes_list)
    show = actions.add_parser("show", help="print a bundled recipe's YAML (to copy and edit)")
    show.add_argument("name", help="a bundled recipe's name, e.g. nsmc-quick")
    show.set_defaults(func=_cmd_recipes_show)


# ----------------------------------------------------------------------------- demo
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


# ----------------------------------------------------------------------------- train / evaluate
def _cmd_train(args: argparse.Namespace) -> int:
    from attnkit.app.api import train

    if args.config is None and not args.resume:
        raise UsageError(
            "give a recipe file or a bundled recipe's name (e.g. nsmc-quick; `attnkit recipes` "
            "lists them), or --resume --out RUN"
        )
    overrides = list(args.set or [])
    if args.data_dir:
        overrides.append(f"data.data_dir={args.data_dir}")
    if args.resume and overrides:
        raise UsageError("--resume continues a run with its saved config; --set is not allowed")
    out = args.out
    if args.resume and out is None:
        out = args.config  # `attnkit train --resume runs/NAME` is accepted too
    if out is not None:
        _check_run_folder(out)
    from attnkit.core.signals import terminate_as_interrupt

    try:
        with terminate_as_interrupt():  # SIGTERM too: temp files go, checkpoints stay
            result = train(
                args.config if not args.resume else None,
                out,
                overrides,
                args.resume,
                args.force,
                device=args.device,
                threads=args.threads,
            )
    except KeyboardInterrupt as exc:  # Ctrl-C (130) or SIGTERM (Terminated: 143)
        what = "terminated" if hasattr(exc, "exit_status") else "interrupted"
        print(f"attnkit: {what}; {_resume_hint(args, out)}", file=sys.stderr)
        return getattr(exc, "exit_status", 130)
    from attnkit.runtime.distributed import placement

    if not placement().is_main:  # under torchrun: rank 0 reports
        return 0
    best = "n/a" if result.best_metric is None else f"{result.best_metric:.4f}"
    print(
        f"done: {result.step} steps in {result.train_seconds / 60:.1f} min, best validation "
        f"metric {best} (step {result.best_step}); run in {result.run_dir}"
    )
    return 0


def _resume_hint(args: argparse.Namespace, out: str | None) -> str:
    """How to go on after Ctrl-C: the resume command where a checkpoint exists."""
    from pathlib import Path

    from attnkit.runtime.run import RunDir

    if out is None and args.config:
        out = str(Path("runs") / Path(args.config).stem)  # the default --out
    if out is not None and RunDir(out).has_checkpoint():
        return f"continue with: attnkit train --resume --out {out}"
    return "no checkpoint was written yet: start again with the same command"


def _check_run_folder(out: str) -> None:
    """--out must be a folder or a place where one can be made: not a file, not under one,
    not in a run directory, writable (``attnkit.core.output_guard``)."""
    from attnkit.core.output_guard import check_output

    check_output(out, kind="folder", what="--out")


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from attnkit.app.api import evaluate
    from attnkit.core.errors import json_line

    report = evaluate(
        args.run,
        args.split,
        args.data_dir,
        beam=args.beam,
        map_location=_device(args),
        precision=args.precision,
    )
    line = json_line(report)  # a NaN metric (damaged weights) is an error, in either form
    if args.json:
        print(line)
        return 0
    name = " + ".join(args.run)
    if "confusion_matrix" in report:
        _print_classification(name, report)
    elif "perplexity" in report and "num_examples" in report:
        _print_sequence(name, report)
    else:  # a report of another shape: its scalar metrics, one per line
        print(f"{name} on {report.get('split', args.split)}")
        width = max((len(k) for k in report), default=10) + 2
        for key, value in report.items():
            if isinstance(value, float):
                print(f"{key:<{width}}{value:.4f}")
            elif isinstance(value, int) and not isinstance(value, bool):
                print(f"{key:<{width}}{value:,}")
    return 0


def _print_classification(name: str, report: dict) -> None:
    from attnkit.tasks.metrics import format_confusion_matrix

    print(f"{name} on {report['split']} ({report['num_examples']:,} examples)")
    for m in report.get("members", []):
        print(f"  member {m['run']}: accuracy {m['accuracy']:.4f}")
    if "members" in report:
        print("ensemble (averaged probabilities):")
    print(f"accuracy  {report['accuracy']:.4f}")
    print(f"macro-F1  {report['macro_f1']:.4f}")
    print(f"loss      {report['loss']:.4f}")
    print("confusion matrix (rows = true, columns = predicted):")
    print(format_confusion_matrix(report["confusion_matrix"], report["labels"]))


def _print_sequence(name: str, report: dict) -> None:
    print(
        f"{name} on {report['split']} ({report['num_examples']:,} pairs, "
        f"{report['num_tokens']:,} target tokens)"
    )
    print(f"loss        {report['loss']:.4f}")
    print(f"perplexity  {report['perplexity']:.2f}")
    if "bleu" in report:
        print(f"BLEU        {report['bleu']:.2f}  ({report['decoding']} decoding)")
        print(f"signature   {report['bleu_signature']}")
        print(f"BLEU lc     {report['bleu_lowercase']:.2f}  (lowercased 13a tokens)")


def _cmd_calibrate(args: argparse.Namespace) -> int:
    from attnkit.app.api import calibrate

    for run in args.run:
        calibrate(run, data_dir=args.data_dir, log=lambda line, run=run: print(f"{run}: {line}"))
    return 0


def _add_train(sub: argparse._SubParsersAction) -> None:
    train = sub.add_parser(
        "train", help="train a model from a YAML recipe (a file, or a bundled recipe's name)"
    )
    train.add_argument(
        "config",
        nargs="?",
        help="a recipe file (my.yaml) or the name of a bundled recipe (nsmc-quick; `attnkit "
        "recipes` lists them); a file always wins",
    )
    train.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="override a recipe value, e.g. --set training.lr=3e-4 (repeatable)",
    )
    train.add_argument("--out", help="run directory (default: runs/<recipe name>)")
    train.add_argument("--resume", action="store_true", help="continue the run in --out from last/")
    train.add_argument("--force", action="store_true", help="overwrite an existing run directory")
    train.add_argument("--data-dir", help="data folder (default: $ATTNKIT_DATA, ~/.cache/attnkit)")
    train.add_argument(
        "--device",
        help="auto | cpu | cuda | cuda:N | mps (default: the recipe's training.device, auto)",
    )
    train.set_defaults(func=_cmd_train)
    ev = sub.add_parser(
        "evaluate",
        help="a run's metrics on a split: accuracy/F1/confusion (classify), BLEU (translate), "
        "loss/perplexity (chat)",
    )
    ev.add_argument(
        "run", nargs="+", help="run directory; several classify runs: evaluate their ensemble"
    )
    ev.add_argument("--split", default="test")
    ev.add_argument("--data-dir")
    ev.add_argument("--beam", type=_beam, default=1, help="translate: beam size (1 = greedy)")
    ev.add_argument("--json", action="store_true", help="machine-readable output")
    _add_device(ev)
    ev.set_defaults(func=_cmd_evaluate)
    cal = sub.add_parser(
        "calibrate",
        help="fit a classify run's softmax temperature on its validation split (training "
        "does this; for older runs)",
    )
    cal.add_argument("run", nargs="+", help="classify run directory (or several)")
    cal.add_argument("--data-dir", help="data folder (default: $ATTNKIT_DATA, ~/.cache/attnkit)")
    cal.set_defaults(func=_cmd_calibrate)


# ----------------------------------------------------------------------------- text input
def _check_text(text: str, number: int) -> str:
    """``text`` (input ``number``), unless it came from bytes that are not UTF-8: those reach
    Python as lone surrogates (argv and stdin decode with surrogateescape)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        code = ord(text[exc.start])
        what = f"byte 0x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"U+{code:04X}"
        raise UsageError(
            f"input {number} is not valid UTF-8 ({what} at character {exc.start + 1})"
        ) from None
    return text


def _stdin():
    """``sys.stdin``; none (the shell closed it: ``<&-``, a service without one): one line."""
    if sys.stdin is None:
        raise UsageError("no standard input to read (stdin is closed)")
    return sys.stdin


def _stdin_stream():
    """stdin as a binary stream (read line by line, ``attnkit.data.lines``)."""
    import io

    stdin = _stdin()
    if hasattr(stdin, "buffer"):
        return stdin.buffer
    return io.BytesIO(stdin.read().encode("utf-8", "surrogateescape"))  # text-only (tests)


def _stdin_lines(before: int, keep_blank: bool) -> list[str]:
    """``_decode_lines`` of stdin; a stream that cannot be read (open for writing only:
    ``0>FILE``, an I/O error) is one line."""
    try:
        return _decode_lines(_stdin_stream(), "on stdin", before, keep_blank=keep_blank)
    except OSError as exc:
        raise UsageError(f"cannot read standard input: {exc.strerror or exc}") from None


def _decode_lines(stream, where: str, before: int, keep_blank: bool) -> list[str]:
    """One text per line of the binary ``stream`` (newline, CRLF or CR; a UTF-8 BOM is
    dropped), read line by line in bounded memory (``attnkit.data.lines``: a line longer than
    ``MAX_LINE_BYTES`` is cut, the model then cuts it again and says so; an endless line is
    an error); blank lines dropped unless ``keep_blank``; ``before``: the inputs before
    these, to number them in errors. A line that is not UTF-8 is an error naming its input
    and line."""
    from attnkit.data.lines import decode_line, iter_lines

    texts: list[str] = []
    for number, (line, cut) in enumerate(iter_lines(stream, where), 1):
        if number == 1:
            line = line.removeprefix(b"\xef\xbb\xbf")
        try:
            text = decode_line(line, cut)
        except UnicodeDecodeError as exc:
            raise UsageError(
                f"input {before + len(texts) + 1} is not valid UTF-8 (line {number}) "
                f"{where}: byte 0x{line[exc.start]:02x} at byte {exc.start + 1}"
            ) from None
        if keep_blank or text.strip():
            texts.append(text)
    return texts


# ----------------------------------------------------------------------------- predict
def _read_inputs(args: argparse.Namespace) -> list[str]:
    texts: list[str] = []
    # (kind, value): a text argument ("@user great movie" is a text too), stdin, or --file
    sources = [("stdin" if item == "-" else "text", item) for item in args.text]
    if args.file:
        sources.append(("file", args.file))
    for kind, item in sources:
        if kind == "text":
            texts.append(_check_text(item, len(texts) + 1))
            continue
        where = "on stdin" if kind == "stdin" else f"in {item}"
        if kind == "stdin":
            texts.extend(_stdin_lines(len(texts), keep_blank=False))
            continue
        with _open_input(item) as f:
            try:
                texts.extend(_decode_lines(f, where, len(texts), keep_blank=False))
            except OSError as exc:  # e.g. a folder, an I/O error
                raise UsageError(f"cannot read {item}: {exc.strerror}") from None
    if not texts:
        raise UsageError("no input text (give TEXT..., - for stdin, or --file)")
    for i, text in enumerate(texts, 1):
        if not text.strip():
            raise UsageError(f"input {i} is empty or whitespace only")
    return texts


def _open_input(path: str):
    """``path`` opened for reading bytes; an error is one line."""
    try:
        return open(path, "rb")
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    except ValueError:  # a NUL byte in the path
        raise UsageError(f"cannot read {path!r}: not a valid file name") from None


def _cmd_predict(args: argparse.Namespace) -> int:

    from attnkit.app.api import load

    texts = _read_inputs(args)
    figure = None
    if args.explain is not None:  # a figure that cannot be written fails before any work
        from attnkit.runtime.viz import check_output_path

        figure = check_output_path(args.explain, inputs=[args.file], what="--explain")
    predictor = load(
        [args.run, *args.ensemble], map_location=_device(args), precision=args.precision
    )
    _require_verb(predictor, "predict", args.run)
    if figure is not None and not predictor.can("explain"):
        raise UsageError(f"--explain has nothing to draw for a {predictor.task} run")
    options = {}
    if args.pair:
        if not predictor.can("sentence_pairs"):
            raise UsageError(
                f"--pair: {args.run} is a {predictor.task} run, not a sentence-pair one"
            )
        if len(args.pair) != len(texts):
            raise UsageError(f"{len(texts)} texts but {len(args.pair)} --pair sentences")
        options["pairs"] = [_check_text(t, i) for i, t in enumerate(args.pair, 1)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        predictions = predictor.predict(texts, **options)
    for message in dict.fromkeys(str(w.message) for w in caught):  # once each (ensembles)
        print(f"attnkit: warning: {message}", file=sys.stderr)
    if args.json:
        print(predictor.to_json(predictions))
    else:
        for p in predictions:
            print(p.format())
    if figure is not None:
        path = predictor.explain(texts[0], figure, layer=args.layer, head=args.head)
        print(f"wrote {path}", file=sys.stderr)
    return 0


# the verbs that call a predictor's method of the same name (Predictor.capabilities)
VERBS = ("predict", "translate", "chat", "tag", "answer", "generate")


def _require_verb(predictor, verb: str, run: str) -> None:
    """A verb works on a run whose predictor declares it (``Predictor.can``)."""
    if not predictor.can(verb):
        others = [f"`attnkit {v}`" for v in VERBS if predictor.can(v)]
        hint = f"; use {' or '.join(others)}" if others else ""
        raise UsageError(f"{run} is a {predictor.task} run{hint}")


def _add_predict(sub: argparse._SubParsersAction) -> None:
    pr = sub.add_parser(
        "predict",
        help="label texts with a trained classifier (mlm run: fill in each [MASK])",
    )
    pr.add_argument("run", help="run directory")
    pr.add_argument("text", nargs="*", help="texts; '-' reads lines from stdin")
    pr.add_argument("--file", help="read one text per line from a UTF-8 file")
    pr.add_argument(
        "--ensemble",
        metavar="RUN",
        action="append",
        default=[],
        help="another classify run to average with (repeatable): an ensemble",
    )
    pr.add_argument(
        "--pair",
        metavar="TEXT",
        action="append",
        default=[],
        help="the second sentence of a sentence-pair run (e.g. NLI), one per text, in order",
    )
    pr.add_argument("--json", action="store_true", help="one JSON object per line")
    pr.add_argument(
        "--explain",
        metavar="PNG",
        help="save the attention heatmap of the first text (arch ngram: its n-gram contributions)",
    )
    pr.add_argument("--layer", type=int, default=-1, help="layer for --explain (default: last)")
    pr.add_argument("--head", type=int, default=None, help="head for --explain (default: mean)")
    _add_device(pr)
    pr.set_defaults(func=_cmd_predict)


# ----------------------------------------------------------------------------- pseudo-label
def _probability(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number from 0 to 1, got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number from 0 to 1, got {value}")
    return value


def _cmd_pseudo_label(args: argparse.Namespace) -> int:
    from attnkit.app.api import load
    from attnkit.core.output_guard import check_output
    from attnkit.tasks.pseudo_label import (
        pseudo_label,
        pseudo_label_format,
        read_unlabelled,
        write_pseudo_labels,
    )

    # a bad output (a device, the input itself, a run's file, a read-only folder, a name
    # whose format cannot be written) fails before any work
    check_output(args.output, inputs=[args.input], what="--output")
    pseudo_label_format(args.output)
    texts = read_unlabelled(args.input, args.data_dir)
    predictor = load(
        [args.run, *args.ensemble], map_location=_device(args), precision=args.precision
    )
    if predictor.task != "classify":
        raise UsageError(f"{args.run} is a {predictor.task} run; pseudo-labels come from a "
                         "classify run")  # fmt: skip
    log = (lambda line: print(line, file=sys.stderr)) if not args.quiet else (lambda _: None)
    rows, stats = pseudo_label(
        predictor,
        texts,
        args.min_confidence,
        args.balance,
        args.batch_size,
        soft=args.soft,
        log=log,
    )
    path = write_pseudo_labels(rows, args.output, predictor.labels)
    kept = ", ".join(f"{stats[f'kept_{name}']:,} {name}" for name in predictor.labels)
    print(
        f"wrote {path}: {stats['kept']:,} of {stats['texts']:,} texts ({kept}); "
        f"{stats['confident']:,} had confidence >= {args.min_confidence}"
    )
    return 0


def _add_pseudo_label(sub: argparse._SubParsersAction) -> None:
    ps = sub.add_parser(
        "pseudo-label",
        help="self-training: a classify run labels unlabelled texts; the confident ones "
        "become a TSV for data.extra_train",
    )
    ps.add_argument("run", help="classify run directory (the teacher)")
    ps.add_argument(
        "--ensemble",
        metavar="RUN",
        action="append",
        default=[],
        help="another classify run (repeatable): the teacher is their ensemble",
    )
    ps.add_argument(
        "--input",
        required=True,
        help="a text file (one text per line, .gz too; or CSV/TSV/JSONL with a text column) "
        "or a dataset name whose unlabelled reviews to read (nsmc, imdb)",
    )
    ps.add_argument(
        "-o",
        "--output",
        required=True,
        help="the file to write (text, label, confidence), its format from its name: .tsv, "
        ".csv or .jsonl, each optionally .gz (compressed)",
    )
    ps.add_argument(
        "--min-confidence",
        type=_probability,
        default=0.9,
        help="keep texts whose calibrated probability is at least this (default 0.9)",
    )
    ps.add_argument(
        "--balance",
        action="store_true",
        help="keep the same number of each class (the most confident ones)",
    )
    ps.add_argument(
        "--soft",
        action="store_true",
        help="also write each text's class probabilities (prob_<label>): the student learns "
        "the teacher's distribution (distillation); use with --min-confidence 0",
    )
    ps.add_argument("--batch-size", type=_positive_int, default=256)
    ps.add_argument("--data-dir", help="data folder (default: $ATTNKIT_DATA, ~/.cache/attnkit)")
    ps.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    _add_device(ps)
    ps.set_defaults(func=_cmd_pseudo_label)


# ----------------------------------------------------------------------------- tag / answer
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


def _file_kind(mode: int) -> str:
    """What a file that is not a regular one is, from its ``st_mode``."""
    import stat

    for test, kind in (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return kind
    return "not a regular file"


def _context_file(value: str) -> bool:
    """True if --context ``value`` names a regular file (its text is the passage), False
    if no such file exists (``value`` is the passage itself). A path that exists but is no
    regular file (a folder, ``/dev/zero``, a FIFO, whose open would wait for a writer) is a
    one-line error, found with ``os.stat``: it is never opened."""
    import stat

    try:
        mode = os.stat(value).st_mode
    except (OSError, ValueError):  # no such file, a name too long, a NUL byte: a text
        return False
    if stat.S_ISREG(mode):
        return True
    raise UsageError(f"--context {value} is {_file_kind(mode)}, not a text file")


def _read_regular_file(path: str, limit: int) -> bytes:
    """At most ``limit`` bytes of the regular file ``path``; one line for anything else. It
    is opened without waiting (``O_NONBLOCK``: a FIFO put in its place after the check does
    not block) and checked again once open."""
    import stat

    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise UsageError(f"--context {path} is {_file_kind(mode)}, not a text file")
        try:
            return f.read(limit)
        except OSError as exc:
            raise UsageError(f"cannot read {path}: {exc.strerror}") from None


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


# ----------------------------------------------------------------------------- export
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


# ----------------------------------------------------------------------------- translate / chat
def _read_lines_kept(args: argparse.Namespace) -> list[str]:
    """TEXT arguments and stdin lines ('-'), empty lines kept (one line in -> one line out)."""
    texts: list[str] = []
    for item in args.text:
        if item == "-":
            texts.extend(_stdin_lines(len(texts), keep_blank=True))
        else:
            texts.append(_check_text(item, len(texts) + 1))
    return texts


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


def _sampling_args(args: argparse.Namespace) -> None:
    """The decoding options in their ranges (attnkit.core.params: the server's too), before any
    model is loaded: ``--seed -1`` or ``--temperature inf`` is one line, exit 2."""
    from attnkit.core.params import PARAMS

    for name in ("temperature", "top_k", "top_p", "seed", "max_new_tokens", "repetition_penalty"):
        value = getattr(args, name, None)
        problem = None if value is None else PARAMS[name].problem(value)
        if problem is not None:
            raise UsageError(f"{PARAMS[name].option} {problem}")


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


# ----------------------------------------------------------------------------- generate
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


# ----------------------------------------------------------------------------- explain
def _cmd_explain(args: argparse.Namespace) -> int:
    """Step through one forward pass of a run in the browser: serve the explorer page
    (``attnkit serve``'s server, this run only), or with --html write it as one offline file."""
    text = _check_text(args.text, 1)
    pair = None if args.pair is None else _check_text(args.pair, 2)
    target = None if args.target is None else _check_text(args.target, 2)
    _sampling_args(args)  # --temperature, --top-k, --seed in their ranges
    if args.steps < 0:
        raise UsageError(f"--steps must be >= 0, got {args.steps}")
    from attnkit.core.params import PARAMS

    bound = PARAMS["max_tokens"]  # each run needs at least its layout's (checked once loaded)
    if not bound.low <= args.max_tokens <= bound.high:
        side = f">= {bound.low}" if args.max_tokens < bound.low else f"<= {bound.high}"
        raise UsageError(f"--max-tokens must be {side}, got {args.max_tokens}")
    if args.pad_to is not None and args.pad_to < 1:
        raise UsageError(f"--pad-to must be >= 1, got {args.pad_to}")
    options = {"pair": pair, "beam": args.beam, "steps": args.steps,
               "temperature": args.temperature, "top_k": args.top_k, "seed": args.seed,
               "max_tokens": args.max_tokens, "pad_to": args.pad_to}  # fmt: skip
    if target is not None:
        options["target"] = target
    if args.html is None:
        from attnkit.app.serve import Limits, serve
        from attnkit.core.extras import needs

        with needs("serve", "attnkit explain without --html"):  # --html FILE needs no extra
            from attnkit.app.serve.handlers import EXPLAIN_MAX_STEPS

        if not 0 < args.port < 65536:
            raise UsageError(f"--port must be in 1..65535, got {args.port}")
        limits = Limits()  # the server's: its page is asked for like any other request
        # (a qa run's context may be longer than a text: checked exactly once it is loaded)
        longest_pair = max(limits.max_chars, limits.max_context_chars)
        for option, value, most in (
            ("--steps", args.steps, min(EXPLAIN_MAX_STEPS, limits.max_new_tokens)),
            ("--beam", args.beam, limits.max_beam),
            ("the text's characters", len(text), limits.max_chars),
            ("--pair's characters", len(pair or ""), longest_pair),
            ("--target's characters", len(target or ""), limits.max_chars),
        ):
            if value > most:
                raise UsageError(f"{option} must be at most {most} when served (--html has no "
                                 f"such limit), got {value}")  # fmt: skip
        serve([args.run], host=args.host, port=args.port, limits=limits,
              map_location=_device(args), precision="fp32",
              explain={"text": text, **options})  # fmt: skip
        return 0
    from attnkit.core.output_guard import check_output

    out = check_output(args.html, what="--html")  # a file that cannot be written: no work
    from attnkit.app.api import load
    from attnkit.app.explain.page import explain_traces, render_page, write_page

    predictor = load(args.run, map_location=_device(args), precision="fp32")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        traces = explain_traces(predictor, text, **options)
    _print_warnings(caught)
    print(f"wrote {write_page(out, render_page(traces))}")
    return 0


def _add_explain(sub: argparse._SubParsersAction) -> None:
    ex = sub.add_parser(
        "explain",
        help="step through a run's forward pass in the browser: tokens, embeddings, each "
        "head's Q/K/V, scores, mask and softmax, Add & Norm, the output",
        description="Serve the explorer page of one text at http://HOST:PORT/explain/RUN (type "
        "new texts there), or with --html write it as one self-contained HTML file that works "
        "offline. Every number shown is the run's own, captured during its forward pass.",
    )
    ex.add_argument("run", help="run directory (classify, lm, translate, chat, mlm, bilm, tag, "
                    "qa)")  # fmt: skip
    ex.add_argument("text", help="the text (lm: the prompt; mlm: with [MASK] where to fill in; "
                    "qa: the question)")  # fmt: skip
    ex.add_argument("--html", metavar="FILE", help="write the page to FILE instead of serving it")
    ex.add_argument("--pair", metavar="TEXT", help="the second sentence of a sentence-pair run; "
                    "a qa run's context; a bert-pretrain run's sentence B (next-sentence "
                    "prediction: IsNext)")  # fmt: skip
    ex.add_argument("--target", metavar="TEXT", help="translate/chat runs: a reference output, "
                    "to see teacher forcing (the decoder fed the reference shifted right, as "
                    "in training) beside free decoding")  # fmt: skip
    ex.add_argument("--steps", type=int, default=8, metavar="N",
                    help="lm runs: tokens to generate, one step each (default 8)")  # fmt: skip
    ex.add_argument("--beam", type=_beam, default=4,
                    help="seq2seq runs: the beam shown beside greedy decoding (1: greedy "
                    "only; default 4)")  # fmt: skip
    ex.add_argument("--temperature", type=float, default=1.0,
                    help="lm runs: sampling temperature of the steps (0 = greedy)")  # fmt: skip
    ex.add_argument(
        "--top-k", type=int, default=0, help="lm runs: sample from the k best (0 = all)"
    )
    ex.add_argument("--seed", type=int, default=0, help="lm runs: random seed (default 0)")
    ex.add_argument("--max-tokens", type=int, default=128, metavar="N",
                    help="cut a longer input to N tokens, with a note on the page (default "
                    "128; 2..4096, and at least the run's special tokens and one of text: "
                    "3 for [CLS] text [SEP], 5 for a sentence pair)")  # fmt: skip
    ex.add_argument("--pad-to", type=int, default=None, metavar="N",
                    help="classify, mlm, tag, translate, chat runs: pad the text with [PAD] to "
                    "N tokens, as in a batch beside a longer text, to see the padding mask at "
                    "work")  # fmt: skip
    ex.add_argument("--host", default="127.0.0.1", help="address to listen on (default: this "
                    "machine only)")  # fmt: skip
    ex.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    ex.add_argument(
        "--device",
        default="cpu",
        help="where the model runs: cpu (default) | cuda | cuda:N | mps | auto; always in "
        "float32, so that the numbers shown are the model's own",
    )
    ex.set_defaults(func=_cmd_explain)


# ----------------------------------------------------------------------------- serve
def _cmd_serve(args: argparse.Namespace) -> int:
    from attnkit.app.serve import Limits, serve

    if not 0 < args.port < 65536:
        raise UsageError(f"--port must be in 1..65535, got {args.port}")
    limits = Limits(
        max_chars=args.max_chars,
        max_texts=args.max_texts,
        max_new_tokens=args.max_new_tokens,
        timeout_s=args.timeout,
        body_timeout_s=args.body_timeout,
    )
    serve(
        args.run,
        host=args.host,
        port=args.port,
        limits=limits,
        map_location=_device(args),
        precision=args.precision,
    )
    return 0


def _add_serve(sub: argparse._SubParsersAction) -> None:
    sv = sub.add_parser(
        "serve",
        help="serve runs over HTTP (JSON API + web page) until Ctrl-C",
        description="Serve trained runs: the web page at http://HOST:PORT/, the JSON API under "
        "/v1 (classify, translate, chat, generate, tag, answer; each run is served by its "
        "task's endpoint), OpenAPI docs at /docs.",
    )
    sv.add_argument("run", nargs="+", help="run directories, or NAME=RUN to name one")
    sv.add_argument("--host", default="127.0.0.1", help="address to listen on (default: this "
                    "machine only; 0.0.0.0 exposes the models to the network)")  # fmt: skip
    sv.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    sv.add_argument("--max-chars", type=int, default=2000, help="characters per text (413 above)")
    sv.add_argument("--max-texts", type=int, default=64, help="texts per request (413 above)")
    sv.add_argument("--max-new-tokens", type=int, default=256,
                    help="new tokens one /v1/generate may ask for (422 above)")  # fmt: skip
    sv.add_argument("--timeout", type=float, default=30.0,
                    help="seconds until an unanswered request gets 503")  # fmt: skip
    sv.add_argument("--body-timeout", type=float, default=10.0, metavar="SECONDS",
                    help="seconds a client has to send a request's head, then its body (408 "
                    "and the connection closed after; default 10)")  # fmt: skip
    _add_device(sv)
    sv.set_defaults(func=_cmd_serve)


# ----------------------------------------------------------------------------- env
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


# ----------------------------------------------------------------------------- main
COMMANDS: list[Callable[[argparse._SubParsersAction], None]] = [
    _add_data,
    _add_recipes,
    _add_train,
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


EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what a shell reports for `yes | head -1`'s yes


def _broken_pipe() -> int:
    """Stop quietly when stdout's reader has gone, as Unix tools do: no traceback, no
    message, exit status 141 (128 + SIGPIPE, the status of a tool the signal ends: the
    output is incomplete, and `set -o pipefail` scripts see it as for any such tool).
    stdout is pointed at /dev/null so that flushing it at exit raises nothing again."""
    _stdout_to_devnull()
    return EXIT_BROKEN_PIPE


def _stdout_to_devnull() -> None:
    """Point stdout's descriptor at /dev/null: what is still buffered for it goes there at
    exit, instead of failing again (Python would print the error and exit 120)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file (tests), or none
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


class _Stdout:
    """``sys.stdout`` while a command runs: the same stream, which remembers its first
    failed write or flush (a full disk, ``> /dev/full``, a descriptor not open for writing),
    so that ``main`` tells a lost output from any other ``OSError``, even one that a caller
    caught (logging's handler does). A closed pipe is not one: it ends quietly (141)."""

    def __init__(self, stream) -> None:
        self.stream = stream
        self.error: OSError | None = None

    def _call(self, method: str, *args):
        try:
            return getattr(self.stream, method)(*args)
        except BrokenPipeError:
            raise
        except OSError as exc:
            if self.error is None:
                self.error = exc
            raise

    def write(self, text: str) -> int:
        return self._call("write", text)

    def writelines(self, lines) -> None:
        return self._call("writelines", lines)

    def flush(self) -> None:
        return self._call("flush")

    def __getattr__(self, name: str):
        return getattr(self.stream, name)


# errors only the file system gives a writer (the disk, not the code): one line
_WRITE_ERRNOS = frozenset(
    getattr(errno, name) for name in ("ENOSPC", "EROFS", "EDQUOT", "EFBIG") if hasattr(errno, name)
)


def _output_lost(exc: OSError) -> int:
    """The one line for an output that could not be written (exit code 2)."""
    _stdout_to_devnull()
    print(f"attnkit: error: cannot write the output: {exc.strerror or exc}", file=sys.stderr)
    return EXIT_USAGE


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


if __name__ == "__main__":
    sys.exit(main())

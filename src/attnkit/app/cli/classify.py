"""The verbs of a classify run, and the metrics of any: ``attnkit predict`` (labels; an mlm
run's fills), ``evaluate`` (a run's metrics on a split), ``calibrate`` and ``pseudo-label``."""

from __future__ import annotations

import argparse
import sys
import warnings

from attnkit.app.cli.common import (
    UsageError,
    _add_device,
    _beam,
    _device,
    _positive_int,
    _require_verb,
)
from attnkit.app.cli.inputs import _check_text, _read_inputs


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


def _add_evaluate(sub: argparse._SubParsersAction) -> None:
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

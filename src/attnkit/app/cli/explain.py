"""``attnkit explain``: one forward pass of a run, step by step, in the explorer page (served,
or written with ``--html`` as one offline file)."""

from __future__ import annotations

import argparse
import warnings

from attnkit.app.cli.common import UsageError, _beam, _device, _print_warnings, _sampling_args
from attnkit.app.cli.inputs import _check_text


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

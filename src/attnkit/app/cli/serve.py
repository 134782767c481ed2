"""``attnkit serve``: runs over HTTP (the JSON API and the web page), its limits checked before
FastAPI loads."""

from __future__ import annotations

import argparse

from attnkit.app.cli.common import UsageError, _add_device, _bounded, _device


def _batch_wait_ms(text: str) -> float:
    """--batch-wait-ms: milliseconds in the range of ``PARAMS["batch_wait_ms"]``."""
    from attnkit.core.params import PARAMS

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    problem = PARAMS["batch_wait_ms"].problem(value)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return value


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
        batch_size=args.batch_size,
        batch_wait_ms=args.batch_wait_ms,
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
    sv.add_argument("--batch-size", type=_bounded("batch_size"), default=16, metavar="N",
                    help="texts (prompts) of concurrent /v1/classify, /v1/tag and /v1/generate "
                    "requests answered by one forward pass (whole requests; default 16; 1: "
                    "each request alone); a generation takes in prompts queued while it runs, "
                    "between tokens, up to N")  # fmt: skip
    sv.add_argument("--batch-wait-ms", type=_batch_wait_ms, default=2.0, metavar="MS",
                    help="under load, how long a batch waits for more requests (default 2; a "
                    "lone client never waits)")  # fmt: skip
    _add_device(sv)
    sv.set_defaults(func=_cmd_serve)

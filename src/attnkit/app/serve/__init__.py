"""``attnkit serve``: trained runs behind an HTTP API and a web page (``create_app``)."""

from __future__ import annotations

import gc
from urllib.parse import quote

from attnkit.app.serve.limits import Limits
from attnkit.app.serve.names import parse_spec
from attnkit.core.extras import needs

__all__ = ["Limits", "create_app", "serve"]


def create_app(*args, **kwargs):
    """See ``attnkit.app.serve.app.create_app`` (imported on use: FastAPI loads only here;
    without the serve extra, a one-line ``MissingExtraError``)."""
    with needs("serve", "attnkit's HTTP app"):
        from attnkit.app.serve.app import create_app as _create_app

    return _create_app(*args, **kwargs)


def serve(
    runs,
    host: str = "127.0.0.1",
    port: int = 8000,
    limits: Limits | None = None,
    map_location: str = "cpu",
    log=print,
    precision: str = "auto",
    explain: dict | None = None,
) -> None:
    """Load ``runs`` and serve them until interrupted (uvicorn). The address is taken
    first: a port in use (or not allowed) is a one-line ``InputError`` before any model is
    loaded, and before it a run name that a URL would not carry as it is (``a/b=RUN``:
    ``attnkit.app.serve.names``). ``explain`` (``attnkit explain``): the text and options
    the explorer page of each run opens with (``/explain/NAME``); runs of any task the
    explainer knows (and can step through: not an ONNX export) are served then, also
    those without an endpoint (mlm, bilm). Without the serve extra (FastAPI, uvicorn), a
    one-line ``MissingExtraError`` naming its ``pip install``."""
    what = "attnkit serve" if explain is None else "attnkit explain without --html"
    with needs("serve", what):
        from attnkit.app.serve.app import create_app as _create_app
        from attnkit.app.serve.server import bind, make_server

    limits = limits or Limits()
    if not isinstance(runs, dict):  # the names checked before the address is taken
        for spec in runs:
            parse_spec(spec)
    sockets = bind(host, port)
    try:
        loopback = host in ("127.0.0.1", "localhost", "::1")
        hosts = ["127.0.0.1", "localhost", "[::1]", "::1"] if loopback else None
        app = _create_app(runs, limits, map_location, allowed_hosts=hosts, precision=precision,
                          explain=explain)  # fmt: skip
        served = app.state.server.runs.values()
        if explain is None:
            log("serving " + ", ".join(f"{r.name} (/v1/{r.endpoint})" for r in served))
        if not loopback:
            log(f"warning: listening on {host}, not only this machine: anyone who can reach "
                "it can use the models (there is no authentication)")  # fmt: skip
        shown = "[" + host + "]" if ":" in host else host
        if explain is not None:
            for r in served:
                log(f"explorer page: http://{shown}:{port}/explain/{quote(r.name)}  (Ctrl-C "
                    "stops)")  # fmt: skip
        else:
            log(f"web page: http://{shown}:{port}/   API docs: /docs")
        # what is loaded by now (torch, the models, the app) lives as long as the server:
        # frozen out of the collector's sight, a full collection under load no longer walks
        # it (it took 100-130 ms on the NSMC Transformer's server: its p99 latency)
        gc.collect()
        gc.freeze()
        try:
            make_server(app, limits).run(sockets=sockets)
        finally:  # a process that goes on (a notebook, a test) collects as before
            gc.unfreeze()
    finally:
        for sock in sockets:
            sock.close()

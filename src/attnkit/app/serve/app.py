"""``attnkit serve``: the HTTP API (FastAPI) and the web page, in one process.

    GET  /                  the web page (static HTML/CSS/JS, no CDN: works offline)
    GET  /healthz           {"status": "ok", "models": [...]}
    GET  /v1/models         the served runs, what each answers, and the server's limits
    POST /v1/classify       {"texts": [...], "pairs"?: [...], "attention"?: bool}
    POST /v1/translate      {"texts": [...], "beam"?: int, "alignment"?: bool}
    POST /v1/chat           {"message": "...", "temperature"?, "top_k"?, "top_p"?, "seed"?}
    POST /v1/generate       {"prompt": "...", "max_new_tokens"?, ..., "stream"?: bool}
    POST /v1/tag            {"texts": [...]}
    POST /v1/answer         {"question": "...", "context": "..."}
    POST /v1/explain        {"text": "...", "model"?, "pair"?, "beam"?, "max_new_tokens"?, ...}:
                            every step of one forward pass (attnkit.app.explain.schema)
    GET  /explain/NAME      the explorer page of a run (?text=...), which posts to /v1/explain
    GET  /docs              OpenAPI (Swagger UI 5 from the installed fastapi-offline, no CDN)

Every error is JSON, ``{"error": {"status": 422, "type": "invalid_request", "message":
"..."}}``: 400 a request that is not valid HTTP or names a Host not served (also from the
HTTP layer below the app: ``attnkit.app.serve.server``), 404 unknown model or path, 408 a
request head or body not sent within ``Limits.body_timeout_s``, 413 over a size limit,
422 a bad body or parameter (types are strict), 503 not answered within the timeout.
Inference runs in worker threads, one at a time (the model lock: on a few CPU cores one
batch at a time is fastest, and it keeps warnings per request); a request's texts are one
batch. Concurrent /v1/classify, /v1/tag and /v1/generate requests (streamed or not) to
one run are micro-batched (``attnkit.app.serve.batching``, ``Limits.batch_size`` /
``batch_wait_ms``): answered by one forward pass (a generation: one a token, each prompt
leaving the batch when it is done), each its own answer, stream, warnings and errors, as
it would be alone (a batch one of whose requests fails, or warns about something not of
one input, is answered request by request). Work whose client has gone (closed the
connection) is dropped: skipped if it has not started, and a generation stops at its next
token.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib.util
import io
import ipaddress
import json
import re
import threading
import warnings
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import (
    FileResponse,
    HTMLResponse,
    JSONResponse,
    Response,
    StreamingResponse,
)
from fastapi.staticfiles import StaticFiles
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from attnkit.app.explain.page import served_page
from attnkit.app.explain.trace import family_of
from attnkit.app.serve import handlers
from attnkit.app.serve.batching import Batcher, ModelLock, Pending
from attnkit.app.serve.handlers import PayloadTooLarge
from attnkit.app.serve.limits import Limits
from attnkit.app.serve.runs import ServedRun, load_runs, pick, pick_explainable
from attnkit.app.serve.schemas import (
    AnswerRequest,
    ChatRequest,
    ClassifyRequest,
    ExplainRequest,
    GenerateRequest,
    TagRequest,
    TranslateRequest,
)
from attnkit.core.errors import NON_FINITE, AttnkitError, InputError, NonFiniteError
from attnkit.core.version import __version__
from attnkit.nn.generation import JoinRule
from attnkit.tasks.lm import StopGeneration

STATIC = Path(__file__).parent / "static"
DEFAULT_EXPLAIN_TEXT = "hello 안녕하세요"  # an explorer page opened without ?text=

_TYPES = {
    400: "bad_request",
    404: "not_found",
    405: "method_not_allowed",
    408: "request_timeout",
    413: "payload_too_large",
    422: "invalid_request",
    431: "headers_too_large",
    499: "client_closed_request",  # never read: the client has gone (the access log has it)
    503: "timeout",
    500: "internal_error",
}


def error_body(status: int, message: str, **extra: Any) -> dict[str, Any]:
    """The JSON body of every error response."""
    return {"error": {"status": status, "type": _TYPES.get(status, "error"), "message": message,
                      **extra}}  # fmt: skip


def _error(status: int, message: str, **extra: Any) -> JSONResponse:
    return JSONResponse(error_body(status, message, **extra), status_code=status)


class ApiError(Exception):
    """An error with its HTTP status, raised by the routes."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class _Cancelled(Exception):
    """The request was given up (timeout, client gone): stop working on it."""


class _BodyLimit:
    """ASGI middleware: a request body over ``max_bytes`` gets 413 before it is parsed (by
    its Content-Length, or counted as it arrives when it has none); one not fully received
    ``timeout_s`` seconds after the request began gets 408 and the connection is closed (a
    client trickling its body holds nothing for long)."""

    def __init__(self, app: Any, max_bytes: int, timeout_s: float = 10.0) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_large = _error(413, f"the request body is over {self.max_bytes:,} bytes")
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and not length.isdigit():
            await _error(400, "the Content-Length header is not a number")(scope, receive, send)
            return
        if length is not None and int(length) > self.max_bytes:
            await too_large(scope, receive, send)
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        body, more = b"", True
        while more:  # read it all here (at most max_bytes), then hand it on
            try:
                message = await asyncio.wait_for(receive(), max(deadline - loop.time(), 0))
            except asyncio.TimeoutError:
                slow = _error(408, f"the request body was not received within {self.timeout_s:g} s")
                slow.headers["connection"] = "close"  # the rest of the body is not wanted
                await slow(scope, receive, send)
                return
            if message["type"] != "http.request":
                return  # the client left
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > self.max_bytes:
                await too_large(scope, receive, send)
                return
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # e.g. a streaming response waiting for a disconnect

        await self.app(scope, replay, send)


def _explain_api(run: ServedRun) -> dict[str, Any]:
    """What an explorer page of ``run`` is told about its server: where to post new texts,
    the run's name and family, and whether it reads a second text (a sentence pair; a qa
    run's context)."""
    family = family_of(run.predictor)
    pairs = bool(run.describe().get("pairs")) or family == "qa" or (
        run.predictor.can("next_sentence"))  # fmt: skip
    return {"endpoint": "/v1/explain", "model": run.name, "pairs": pairs, "family": family}


class _Server:
    """The served runs, the limits, the model lock and the batchers, shared by the routes."""

    def __init__(
        self, runs: dict[str, ServedRun], limits: Limits, explain: dict[str, Any] | None = None
    ) -> None:
        self.runs = runs
        self.limits = limits
        self.lock = ModelLock()
        self.explain_defaults = dict(explain or {})  # attnkit explain's text and options
        # (run, endpoint) -> its micro-batcher: the endpoints handlers.BATCHED answers
        self.batchers: dict[tuple[str, str], Batcher] = {}
        if limits.batch_size > 1:
            for run in runs.values():
                if run.endpoint in handlers.BATCHED:
                    self.batchers[(run.name, run.endpoint)] = Batcher(
                        functools.partial(self.run_batch, run, run.endpoint),
                        max_size=limits.batch_size,
                        wait_s=limits.batch_wait_ms / 1000,
                        lock=self.lock,
                        name=f"attnkit-batch-{run.name}",
                    )

    def close(self) -> None:
        """Stop the batchers' threads (the app's shutdown): a request still queued gets 503."""
        for batcher in self.batchers.values():
            batcher.close(ApiError(503, "the server is shutting down; try again later"))

    def pick(self, endpoint: str, name: str | None) -> ServedRun:
        try:
            return pick(self.runs, endpoint, name)
        except LookupError as exc:
            raise ApiError(404, str(exc)) from None

    def check(self, endpoint: str, req: Any, run: ServedRun | None = None) -> None:
        try:
            handlers.check(endpoint, req, self.limits, run)
        except PayloadTooLarge as exc:
            raise ApiError(413, str(exc)) from None

    def job(self, fn: Callable[[], dict[str, Any]], cancelled: threading.Event) -> Callable:
        """``fn`` as a worker-thread job: under the model lock, skipped if the request was
        given up while it waited, with the warnings it raised added to its answer."""

        def job() -> dict[str, Any]:
            with self.lock:
                if cancelled.is_set():
                    raise _Cancelled
                return _with_warnings(fn)

        return job

    def run_batch(self, run: ServedRun, endpoint: str, batch: list[Pending]) -> None:
        """Answer a batch of ``endpoint`` requests to ``run`` (a batcher's worker thread,
        under the model lock): one call of ``handlers.BATCHED``, each request its own part
        of the answer and the warnings about its own inputs. If the call fails (one
        request's text refused, a non-finite output, ...) or warns about anything but an
        input, each request is answered alone, exactly as without batching."""
        handler = handlers.HANDLERS[endpoint]
        results: list[dict[str, Any]] | None = None
        notes: list[list[str]] | None = None
        failed: Exception | None = None
        # a generation is answered as soon as it is done (its own warnings: the handler's),
        # and requests queued meanwhile join it between two tokens (into ``batch``)
        early: dict[str, Any] = {}
        if endpoint == "generate":
            early["on_answer"] = _settle
            batcher = self.batchers.get((run.name, endpoint))
            if batcher is not None:
                early["more"] = _Joiner(batcher, batch)
        if len(batch) > 1 or endpoint == "generate":  # (one too: its stream, its cancel)
            try:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    results = handlers.BATCHED[endpoint](run, batch, self.limits, **early)
                notes = _per_request_notes(caught, [item.size for item in batch])
            except Exception as exc:  # noqa: BLE001 - one request's error: each answered alone
                results, failed = None, exc
        if results is not None and notes is not None:
            for item, result, mine in zip(batch, results, notes, strict=True):
                if not item.future.done():
                    _settle(item, {**result, "warnings": mine} if mine else result)
            return
        for item in batch:
            if item.future.done():  # answered before the batch failed
                continue
            if item.cancelled.is_set():  # given up while the batch ran
                item.future.set_exception(_Cancelled())
                continue
            if item.streamed:  # its pieces went out: it cannot start again
                item.future.set_exception(failed or RuntimeError("the batch gave no answer"))
                continue
            options = {} if item.stream is None else {"stream": item.stream}
            try:
                job = functools.partial(handler, run, item.request, self.limits, **options)
                answer = _with_warnings(job)
            except Exception as exc:  # noqa: BLE001 - its own error, as it would be alone
                item.future.set_exception(exc)
            else:
                item.future.set_result(answer)

    async def await_job(
        self,
        fn: Callable[[], dict[str, Any]],
        cancelled: threading.Event,
        receive: Callable | None = None,
    ) -> Any:
        """``fn``'s answer, or 503 once the request has waited ``timeout_s``. A job given up
        (the timeout, or the client closed the connection: ``receive``, the request's ASGI
        channel, says so) while it waits for the model is skipped; one already running
        finishes (a generation stops at its next token), bounded by the size limits."""
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(None, self.job(fn, cancelled))
        return await self.wait(future, cancelled, receive)

    async def wait(
        self, future: asyncio.Future, cancelled: threading.Event, receive: Callable | None
    ) -> Any:
        """``future``'s result (a job's, a batched request's), or 503 / 499 as ``await_job``
        says; ``cancelled`` is set when the request is given up."""
        future.add_done_callback(_retrieve)
        gone = asyncio.ensure_future(_client_gone(receive)) if receive is not None else None
        try:
            waiting = {future} if gone is None else {future, gone}
            done, _ = await asyncio.wait(
                waiting, timeout=self.limits.timeout_s, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            if gone is not None:
                gone.cancel()
        if future in done:
            return future.result()
        cancelled.set()
        if gone is not None and gone in done:
            raise ApiError(499, "the client closed the connection before the answer")
        raise ApiError(503, f"no answer within {self.limits.timeout_s:g} s; try again later")

    async def answer(self, endpoint: str, req: Any, receive: Callable | None = None) -> dict:
        run = self.pick(endpoint, req.model)
        self.check(endpoint, req)
        cancelled = threading.Event()
        batcher = self.batchers.get((run.name, endpoint))
        key = handlers.batch_key(req) if batcher is not None else None
        if batcher is not None and key is not None:
            item = Pending(req, size=handlers.batch_rows(req), key=key, cancelled=cancelled)
            return await self.wait(asyncio.wrap_future(batcher.submit(item)), cancelled, receive)

        def stop_if_cancelled(_piece: str) -> None:  # a generation stops between tokens
            if cancelled.is_set():
                raise _Cancelled

        options = {"stream": stop_if_cancelled} if endpoint == "generate" else {}
        handler = handlers.HANDLERS[endpoint]
        job = lambda: handler(run, req, self.limits, **options)  # noqa: E731
        return await self.await_job(job, cancelled, receive)

    async def explain(
        self, req: ExplainRequest, receive: Callable | None, page: bool = False
    ) -> dict[str, Any]:
        """/v1/explain's answer (the traces), or with ``page`` the explorer page drawing
        them (``{"html", "csp"}``; a text the run refuses: the page saying why, and
        ``"status": 422``), made in a worker thread under the model lock. A run whose
        outputs are not finite (NaN weights) is a JSON 422 either way (another text would
        not help), as is one the explorer cannot step through (its page: 404, the route's)."""
        try:
            run = pick_explainable(self.runs, req.model)
        except LookupError as exc:
            raise ApiError(404, str(exc)) from None
        self.check("explain", req, run)
        max_tokens = int(self.explain_defaults.get("max_tokens", 128))

        def job() -> dict[str, Any]:
            if not page:
                return handlers.explain(run, req, self.limits, max_tokens=max_tokens)
            try:
                data = handlers.explain(run, req, self.limits, max_tokens=max_tokens)
            except NonFiniteError:  # the model's fault, not the text's: JSON 422
                raise
            except AttnkitError as exc:  # the run refused the text: the page says why
                return {**self.refused_page(req, str(exc)), "status": 422}
            html, csp = served_page([(t["label"], t["trace"]) for t in data["traces"]],
                                    _explain_api(run))  # fmt: skip
            return {"html": html, "csp": csp}

        return await self.await_job(job, threading.Event(), receive)

    def explain_request(
        self,
        name: str,
        text: str | None = None,
        pair: str | None = None,
        beam: int | None = None,
        steps: int | None = None,
    ) -> ExplainRequest:
        """The /v1/explain request an explorer page of run ``name`` makes: the query's
        values, else attnkit explain's (a bad one: ApiError 422)."""
        given = self.explain_defaults
        fields = {
            "model": name,
            "text": text if text is not None else given.get("text", DEFAULT_EXPLAIN_TEXT),
            "pair": pair if pair is not None else given.get("pair"),
            "beam": beam if beam is not None else given.get("beam"),
            "max_new_tokens": steps if steps is not None else given.get("steps"),
            **{
                k: given[k]
                for k in ("temperature", "top_k", "seed", "pad_to", "target")
                if k in given
            },
        }
        try:
            return ExplainRequest(**fields)
        except ValidationError as exc:
            message, _ = _validation_message(exc.errors())
            raise ApiError(422, message) from None

    def check_explain(self) -> None:
        """Build each run's first explorer page's traces now (attnkit explain, before the
        server starts): a text a run refuses is its one-line error (InputError ...), not a
        page that fails later. Warnings are left to the page's notes."""
        for run in self.runs.values():
            if not run.explainable:
                continue
            try:
                req = self.explain_request(run.name)
            except ApiError as exc:
                raise InputError(exc.message) from None
            try:
                self.check("explain", req, run)  # the limits each of its requests meets
            except ApiError as exc:
                raise InputError(f"{exc.message} (when served; --html has no such limit)") from None
            max_tokens = int(self.explain_defaults.get("max_tokens", 128))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                handlers.explain(run, req, self.limits, max_tokens=max_tokens)

    def refused_page(self, req: ExplainRequest, message: str) -> dict[str, str]:
        """The explorer page of a text the run refused: the message and the form."""
        run = pick_explainable(self.runs, req.model)
        api = {**_explain_api(run), "text": req.text, "pair": req.pair, "target": req.target}
        html, csp = served_page([], api, error=message)
        return {"html": html, "csp": csp}

    def stream(self, req: GenerateRequest) -> StreamingResponse:
        """/v1/generate with ``stream``: NDJSON, ``{"token": piece}`` per piece of text as it
        is produced, then ``{"done": true, ...}`` (or ``{"error": ...}``) as the last line.
        The request is checked before the first byte, so a bad one still gets its 4xx."""
        run = self.pick("generate", req.model)
        self.check("generate", req)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue()
        cancelled = threading.Event()
        end = object()

        def push(piece: str) -> None:
            if cancelled.is_set():
                raise StopGeneration  # (the answer is never sent: the client is gone)
            loop.call_soon_threadsafe(queue.put_nowait, {"token": piece})

        batcher = self.batchers.get((run.name, "generate"))
        if batcher is not None:  # with the other generations of the moment
            item = Pending(req, size=1, key=handlers.batch_key(req), cancelled=cancelled,
                           stream=push)  # fmt: skip
            future = asyncio.wrap_future(batcher.submit(item))
        else:
            job = self.job(lambda: handlers.generate(run, req, self.limits, stream=push),
                           cancelled)  # fmt: skip
            future = loop.run_in_executor(None, job)
        future.add_done_callback(lambda f: (_retrieve(f), queue.put_nowait(end)))

        async def lines():
            deadline = loop.time() + self.limits.timeout_s
            try:
                while True:
                    try:
                        item = await asyncio.wait_for(queue.get(), max(deadline - loop.time(), 0))
                    except asyncio.TimeoutError:
                        msg = f"no answer within {self.limits.timeout_s:g} s"
                        yield json.dumps(error_body(503, msg)) + "\n"
                        return
                    if item is end:
                        yield json.dumps(_final(future), ensure_ascii=False) + "\n"
                        return
                    yield json.dumps(item, ensure_ascii=False) + "\n"
            finally:
                cancelled.set()  # done, timed out or the client left: stop generating

        return StreamingResponse(lines(), media_type="application/x-ndjson")


async def _client_gone(receive: Callable) -> None:
    """Return once the client has closed the connection (the request's body already read,
    the ASGI server's next message is ``http.disconnect``)."""
    while True:
        try:
            message = await receive()
        except OSError:  # the connection broke
            return
        if message.get("type") == "http.disconnect":
            return


# A Host header, parsed whole (RFC 3986's host [":" port]): a bracketed IPv6 address, or a
# name / IPv4 address of letters, digits, dots and hyphens; nothing may follow but a port.
_HOST = re.compile(r"(?:\[(?P<v6>[0-9a-f:.]+)\]|(?P<name>[a-z0-9.-]+))(?::\d{1,5})?")


def host_of(header: str) -> str | None:
    """The host a Host header names, lower case and without its port ("[::1]" for an IPv6
    address, as allowed hosts are written), or None when the header is not one host:
    "[::1].evil.com", "a b", "127.0.0.1:80@x" and the like are refused, not cut short."""
    found = _HOST.fullmatch(header.strip().lower())
    if found is None:
        return None
    if found["v6"] is not None:
        try:
            return f"[{ipaddress.IPv6Address(found['v6']).compressed}]"
        except ValueError:
            return None
    return found["name"]


class _AllowedHosts:
    """ASGI middleware: a request whose Host header is not one of ``hosts`` (port left out,
    case ignored) gets 400 with the JSON error body (against DNS rebinding: a page of
    another site must not reach a server on loopback through a name it controls)."""

    def __init__(self, app: Any, hosts: Sequence[str]) -> None:
        self.app = app
        # each allowed host as host_of reads a header ("::1" and "[::1]" alike)
        self.hosts = {host_of(f"[{h}]" if ":" in h and not h.startswith("[") else h) or h.lower()
                      for h in hosts}  # fmt: skip

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        raw = dict(scope["headers"]).get(b"host", b"").decode("latin-1").strip().lower()
        host = host_of(raw)
        if host is not None and host in self.hosts:
            await self.app(scope, receive, send)
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
        else:
            shown = repr(raw) if raw else "none"
            names = ", ".join(sorted(self.hosts))
            await _error(400, f"this server answers only for the hosts {names}; the request's "
                         f"Host header was {shown}")(scope, receive, send)  # fmt: skip


def _retrieve(future: asyncio.Future) -> None:
    """Read a finished job's exception, so that a job given up (timeout, client gone) does
    not log "exception was never retrieved"."""
    if not future.cancelled():
        future.exception()


class _Joiner:
    """Continuous batching for one running generation (``generate_many``'s ``more``): between
    two tokens, the requests of its key queued by then join it when ``JoinRule`` says so
    (``Batcher.take_more``: as many as fit beside the ``going`` rows, while no other work
    waits for the model), added to ``batch`` (which run_batch settles)."""

    def __init__(self, batcher: Batcher, batch: list[Pending]) -> None:
        self.batcher, self.batch, self.key = batcher, batch, batch[0].key
        self.rule = JoinRule()

    def __call__(self, going: int) -> list[Pending]:
        room = self.batcher.max_size - going
        if not self.rule.ready(self.batcher.queued_rows(self.key), room, going):
            return []
        taken = self.batcher.take_more(self.key, room)
        self.batch.extend(taken)
        return taken


def _settle(item: Pending, answer: dict[str, Any]) -> None:
    """A batched request's answer, unless it was given up while its batch ran (it may have
    been cut short, and its client has had its 503 / 499)."""
    if item.cancelled.is_set():
        item.future.set_exception(_Cancelled())
    else:
        item.future.set_result(answer)


def _ours(w: warnings.WarningMessage) -> bool:
    """A warning meant for the user of this input: the predictors' (truncation, unknown
    characters, ...) are UserWarnings; deprecation and resource warnings of the process
    are not."""
    return issubclass(w.category, UserWarning)


def _with_warnings(fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``fn()``'s answer with the warnings it raised (ours, once each) as its "warnings"."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fn()
    # the capture is process-wide, but inference runs one job at a time (the model lock);
    # keep the warnings that speak about the input
    notes = list(dict.fromkeys(str(w.message) for w in caught if _ours(w)))
    return {**result, "warnings": notes} if notes else result


# how a predictor names one of the texts of a call in a warning: "input 3 is longer than ..."
_INPUT_NOTE = re.compile(r"input (\d+)\b(.*)", re.DOTALL)


def _per_request_notes(
    caught: Sequence[warnings.WarningMessage], sizes: Sequence[int]
) -> list[list[str]] | None:
    """The warnings of one call for the texts of several requests (``sizes`` texts each, in
    order), each request's own, with its inputs numbered as in a call of its own ("input 3"
    of the call is the second request's "input 1" when the first has two texts); None when
    one of them is not about one input (then no request can be told which are its own)."""
    starts = [sum(sizes[:i]) for i in range(len(sizes) + 1)]
    notes: list[list[str]] = [[] for _ in sizes]
    for w in caught:
        if not _ours(w):
            continue
        found = _INPUT_NOTE.fullmatch(str(w.message))
        if found is None or not 0 < int(found[1]) <= starts[-1]:
            return None
        number = int(found[1])
        k = next(i for i in range(len(sizes)) if number <= starts[i + 1])
        notes[k].append(f"input {number - starts[k]}{found[2]}")
    return [list(dict.fromkeys(n)) for n in notes]


def _final(future: asyncio.Future) -> dict[str, Any]:
    """The last line of a streamed generation."""
    exc = future.exception()
    if exc is None:
        return {"done": True, **future.result()}
    if isinstance(exc, AttnkitError):
        return error_body(422, str(exc))
    return error_body(500, f"internal error: {type(exc).__name__}")


def _validation_message(errors: Sequence[Any]) -> tuple[str, list[dict[str, Any]]]:
    details = [
        {
            "loc": [str(x) for x in e.get("loc", ())],
            "msg": str(e.get("msg", "")),
            "type": str(e.get("type", "")),
        }  # fmt: skip
        for e in errors
    ]
    if not details:
        return "the request is not valid", details
    first = details[0]
    if first["type"] == "json_invalid":
        return "the request body is not valid JSON", details
    where = ".".join(x for x in first["loc"] if x != "body") or "body"
    more = f" (and {len(details) - 1} more)" if len(details) > 1 else ""
    return f"{where}: {first['msg']}{more}", details


def create_app(
    runs: dict[str, ServedRun] | Sequence[str | Path],
    limits: Limits | None = None,
    map_location: str = "cpu",
    allowed_hosts: Sequence[str] | None = None,
    precision: str = "auto",
    explain: dict[str, Any] | None = None,
) -> FastAPI:
    """The FastAPI app serving ``runs`` (loaded ``ServedRun``s by name, or run directories /
    ``NAME=RUN`` strings to load). ``allowed_hosts``: the Host headers accepted (others get
    400; ``attnkit serve`` on loopback accepts only localhost names, against DNS rebinding);
    None accepts any. ``explain`` (``attnkit explain``): the text and options each run's
    explorer page opens with; then runs of every task the explainer knows are served."""
    limits = limits or Limits()
    if not isinstance(runs, dict):
        runs = load_runs(runs, map_location=map_location, precision=precision,
                         explain_only=explain is not None)  # fmt: skip
    server = _Server(runs, limits, explain)
    if explain is not None:  # attnkit explain: its text refused is an error now, not later
        server.check_explain()

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:  # shutdown (Ctrl-C, the end of a TestClient): the batchers' threads stop
            server.close()

    app = FastAPI(
        lifespan=lifespan,
        title="attnkit",
        version=__version__,
        description="Attention and Transformer models trained with attnkit, served over HTTP.",
        docs_url=None,  # /docs below, with Swagger UI's files from the installed package
        redoc_url=None,
    )
    app.state.server = server

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
        return _error(exc.status, exc.message)

    @app.exception_handler(AttnkitError)
    async def _attnkit_error(request: Request, exc: AttnkitError) -> JSONResponse:
        return _error(422, str(exc))  # a predictor refused the input (InputError, ...)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        message, details = _validation_message(exc.errors())
        return _error(422, message, details=details)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        response = _error(exc.status_code, str(exc.detail))
        response.headers.update(getattr(exc, "headers", None) or {})  # e.g. 405's Allow
        return response

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> JSONResponse:
        return _error(500, f"internal error: {type(exc).__name__}")

    @app.get("/healthz")
    async def healthz() -> dict[str, Any]:
        """Liveness: the server is up and holds these models."""
        return {"status": "ok", "models": list(server.runs)}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        """The served runs (name, task, endpoint, labels, capabilities) and the limits."""
        return {"models": [r.describe() for r in server.runs.values()], "limits": asdict(limits)}

    # each route passes its request's ASGI channel on: work whose client has gone is dropped
    @app.post("/v1/classify")
    async def classify(req: ClassifyRequest, request: Request) -> dict[str, Any]:
        """Label and class probabilities of each text (one batch)."""
        return await server.answer("classify", req, request.receive)

    @app.post("/v1/translate")
    async def translate(req: TranslateRequest, request: Request) -> dict[str, Any]:
        """Translate each text (greedy or beam search)."""
        return await server.answer("translate", req, request.receive)

    @app.post("/v1/chat")
    async def chat(req: ChatRequest, request: Request) -> dict[str, Any]:
        """The chatbot's answer to one message."""
        return await server.answer("chat", req, request.receive)

    @app.post("/v1/generate", response_model=None)
    async def generate(
        req: GenerateRequest, request: Request
    ) -> dict[str, Any] | StreamingResponse:
        """Continue a prompt; ``stream: true`` answers token by token (NDJSON)."""
        if req.stream:
            return server.stream(req)
        return await server.answer("generate", req, request.receive)

    @app.post("/v1/tag")
    async def tag(req: TagRequest, request: Request) -> dict[str, Any]:
        """Named entities: one label per word of each text, and the entities they form."""
        return await server.answer("tag", req, request.receive)

    @app.post("/v1/answer")
    async def answer(req: AnswerRequest, request: Request) -> dict[str, Any]:
        """The answer span of the context for the question, with its score."""
        return await server.answer("answer", req, request.receive)

    @app.post("/v1/explain", response_model=None)
    async def explain(req: ExplainRequest, request: Request) -> Response:
        """Every step of one forward pass of a run, for the explorer page: tokens and ids,
        embeddings and positional encoding, each attention's Q/K/V, scores, mask and softmax,
        the residual stream, and the run's output (layout: ``attnkit.app.explain.schema``)."""
        data = await server.explain(req, request.receive)
        try:
            body = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        except ValueError:  # a NaN the trace's own check missed: still no 500, no bare NaN
            raise NonFiniteError(NON_FINITE) from None
        return Response(body, media_type="application/json")

    @app.get("/explain/{name}", include_in_schema=False)
    async def explain_page(
        name: str,
        request: Request,
        text: str | None = None,
        pair: str | None = None,
        beam: int | None = None,
        steps: int | None = None,
    ) -> HTMLResponse:
        """A run's explorer page for ``text`` (default: attnkit explain's text); a text the
        run refuses (e.g. an mlm text without [MASK]) gets the page showing why (422). A run
        the explorer cannot step through (an ONNX export) has no page: 404, as unlinked."""
        run = server.runs.get(name)
        if run is not None and not run.explainable:
            raise ApiError(404, f"model {name!r} has no explorer page: {run.explain_problem}")
        req = server.explain_request(name, text, pair, beam, steps)
        page = await server.explain(req, request.receive, page=True)
        return HTMLResponse(page["html"], status_code=page.get("status", 200),
                            headers={"Content-Security-Policy": page["csp"]})  # fmt: skip

    @app.get("/", include_in_schema=False)
    async def index() -> FileResponse:
        # everything from this server only (and so offline): no CDN can sneak in
        csp = "default-src 'self'; img-src 'self' data:"
        return FileResponse(STATIC / "index.html", media_type="text/html; charset=utf-8",
                            headers={"Content-Security-Policy": csp})  # fmt: skip

    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.get("/fonts/NanumGothic.ttf", include_in_schema=False)
    async def korean_font() -> Response:
        """A Korean font for the page (NanumGothic, SIL OFL, shipped by koreanize-matplotlib):
        Hangul renders even in a browser without Korean system fonts, offline."""
        return Response(korean_font_bytes(), media_type="font/ttf",
                        headers={"Cache-Control": "max-age=86400"})  # fmt: skip

    _mount_docs(app)
    app.add_middleware(_BodyLimit, max_bytes=limits.max_body_bytes, timeout_s=limits.body_timeout_s)
    if allowed_hosts is not None:
        app.add_middleware(_AllowedHosts, hosts=list(allowed_hosts))
    return app


@functools.cache
def korean_font_bytes() -> bytes:
    """NanumGothic.ttf as browsers accept it. The file koreanize-matplotlib ships carries
    empty VTT source tables (TSI0-TSI5), for which Chromium's font sanitizer (OTS) refuses
    the whole font; they only matter to a font editor, so they are dropped (fontTools,
    which matplotlib already needs)."""
    from fontTools.ttLib import TTFont

    # found, not imported (importing it would reconfigure matplotlib)
    spec = importlib.util.find_spec("koreanize_matplotlib")
    folders = list(spec.submodule_search_locations or []) if spec else []
    path = Path(folders[0]) / "fonts" / "NanumGothic.ttf" if folders else None
    if path is None or not path.is_file():  # pragma: no cover - the package ships it
        raise ApiError(404, "the Korean font is not installed (koreanize-matplotlib)")
    font = TTFont(path)
    for table in [t for t in sorted(font.keys()) if t.startswith("TSI")]:
        del font[table]
    out = io.BytesIO()
    font.save(out)
    return out.getvalue()


def _mount_docs(app: FastAPI) -> None:
    """/docs: Swagger UI 5 (it reads the OpenAPI 3.1 that FastAPI writes) from the files the
    ``fastapi-offline`` package ships (no CDN), if installed; otherwise a page pointing at
    /openapi.json. Only its static files are used, not its FastAPIOffline factory."""
    try:
        import fastapi_offline
    except ImportError:  # pragma: no cover - it is a dependency
        swagger_ui_path = None
    else:
        swagger_ui_path = Path(fastapi_offline.__file__).parent / "static"
        if not (swagger_ui_path / "swagger-ui-bundle.js").is_file():  # pragma: no cover
            swagger_ui_path = None

    if swagger_ui_path is not None:
        app.mount("/docs-assets", StaticFiles(directory=swagger_ui_path), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        if swagger_ui_path is None:
            return HTMLResponse('<a href="/openapi.json">openapi.json</a>')
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title="attnkit API",
            swagger_js_url="/docs-assets/swagger-ui-bundle.js",
            swagger_css_url="/docs-assets/swagger-ui.css",
            swagger_favicon_url="/docs-assets/favicon.png",
        )

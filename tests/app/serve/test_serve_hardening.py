"""attnkit serve under hostile clients (issue 32): work of clients that have gone is dropped,
a request head or body trickled in is cut (408), JSON types are strict, every 4xx (also the
ones from the HTTP layer below the app: h11's 400s, the Host check) has the JSON error body,
the CLI and the server take the same parameter ranges, and a port in use is one line before
any model is loaded. Real servers listen on 127.0.0.1 only, on an ephemeral port."""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from fastapi.testclient import TestClient  # noqa: E402

import attnkit  # noqa: E402
from attnkit.app.cli import main  # noqa: E402
from attnkit.app.cli.common import _sampling_args  # noqa: E402
from attnkit.app.serve import Limits, create_app  # noqa: E402
from attnkit.app.serve.runs import load_runs  # noqa: E402
from attnkit.app.serve.server import bind, make_server  # noqa: E402
from attnkit.core.errors import InputError  # noqa: E402
from attnkit.core.params import PARAMS  # noqa: E402

LEGACY = Path(__file__).parents[2] / "fixtures" / "legacy_runs"
NGRAM = LEGACY / "classify-ngram"
LIMITS = Limits(max_new_tokens=8, body_timeout_s=0.5)


@pytest.fixture(scope="module")
def runs(served_runs):
    return load_runs([f"{name}={path}" for name, path in served_runs.items()])


@pytest.fixture(scope="module")
def client(runs) -> TestClient:
    return TestClient(create_app(runs, LIMITS), raise_server_exceptions=False)


def _json_error(status_line_and_body: bytes, status: int) -> str:
    """The message of a raw HTTP response with the JSON error body."""
    head, _, body = status_line_and_body.partition(b"\r\n\r\n")
    assert head.startswith(f"HTTP/1.1 {status} ".encode()), status_line_and_body[:200]
    assert b"content-type: application/json" in head.lower()
    error = json.loads(body)["error"]
    assert error["status"] == status and "\n" not in error["message"]
    return error["message"]


@contextlib.contextmanager
def live(app, limits: Limits = LIMITS) -> Iterator[int]:
    """``app`` behind the real uvicorn of ``attnkit serve`` (JsonErrorProtocol), in a thread,
    on 127.0.0.1 and an ephemeral port (yielded)."""
    sockets = bind("127.0.0.1", 0)
    server = make_server(app, limits, log_level="error")
    thread = threading.Thread(target=server.run, kwargs={"sockets": sockets}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    try:
        yield sockets[0].getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(20)
        assert not thread.is_alive()


def _exchange(port: int, data: bytes, wait: float = 5.0) -> tuple[bytes, float]:
    """Send ``data``, read until the server closes the connection: (reply, seconds)."""
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as sock:
        start = time.monotonic()
        sock.sendall(data)
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
        return reply, time.monotonic() - start


def _post(path: str, body: dict, close: bool = True) -> bytes:
    payload = json.dumps(body).encode()
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\n{'Connection: close' if close else ''}\r\n\r\n"
    ).encode() + payload


# ----------------------------------------------------------------------------- clients gone
class _Slow:
    """A generation that takes ``seconds`` and never looks back (the worst case: work that
    cannot be stopped once started), counting its runs."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.runs = 0

    def __call__(self, requests, more=None):  # (LMPredictor.generate_batch)
        self.runs += len(requests)
        time.sleep(self.seconds)

        class Done:
            def to_dict(self) -> dict:
                return {"text": "", "tokens": 0, "finish_reason": "length"}

        return [Done() for _ in requests]


@pytest.mark.slow
def test_work_of_clients_that_have_gone_is_dropped(runs, monkeypatch) -> None:
    slow = _Slow(0.4)
    monkeypatch.setattr(runs["verse"].predictor, "generate_batch", slow)
    abandoned = 10  # 4 s of work if each ran
    with live(create_app(runs, LIMITS)) as port:
        for _ in range(abandoned):  # send, let the server queue it, leave
            with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                sock.sendall(_post("/v1/generate", {"model": "verse", "prompt": "a"}))
                time.sleep(0.05)
        reply, seconds = _exchange(
            port, _post("/v1/classify", {"model": "ngram", "texts": ["good"]})
        )
        time.sleep(2 * slow.seconds)  # abandoned work still queued would run meanwhile
    assert reply.startswith(b"HTTP/1.1 200 "), reply[:200]
    assert slow.runs <= 2, f"{slow.runs} of {abandoned} abandoned generations ran"
    assert seconds < 3.0, f"classify waited {seconds:.1f} s behind abandoned work"


# ----------------------------------------------------------------------------- slow clients
@pytest.mark.slow
def test_a_trickled_body_or_head_gets_408_and_is_closed(runs) -> None:
    with live(create_app(runs, LIMITS)) as port:
        # headers with a Content-Length, then nothing: the app's body deadline
        head = b"POST /v1/classify HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{"
        reply, seconds = _exchange(port, head)
        assert "not received within 0.5 s" in _json_error(reply, 408)
        assert 0.4 < seconds < 3
        # half a head: the protocol's head deadline
        reply, seconds = _exchange(port, b"POST /v1/classify HTTP/1.1\r\nHost: 127.")
        assert "request head was not received within 0.5 s" in _json_error(reply, 408)
        assert seconds < 3
        # a connection that sends nothing is closed silently
        reply, seconds = _exchange(port, b"")
        assert reply == b"" and seconds < 3
        # many trickling clients at once are all cut within the deadline
        socks = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(30)]
        try:
            start = time.monotonic()
            for sock in socks:
                sock.sendall(head)
            for sock in socks:
                reply = b""
                while chunk := sock.recv(65536):
                    reply += chunk
                assert _json_error(reply, 408)
            assert time.monotonic() - start < 4
        finally:
            for sock in socks:
                sock.close()
        # and the server still answers
        reply, _ = _exchange(port, _post("/v1/classify", {"model": "ngram", "texts": ["good"]}))
        assert reply.startswith(b"HTTP/1.1 200 ")


def test_the_body_deadline_in_the_app(runs) -> None:
    """The same deadline through the ASGI app alone (any ASGI server)."""
    import asyncio

    app = create_app(runs, Limits(body_timeout_s=0.2))
    sent: list[dict] = []

    async def receive() -> dict:
        await asyncio.sleep(10)  # a client that never sends its body
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": "/v1/classify", "raw_path": b"/v1/classify",
        "query_string": b"", "root_path": "", "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 8000), "headers": [(b"content-length", b"10")],
    }  # fmt: skip
    start = time.monotonic()
    asyncio.run(app(scope, receive, send))
    assert time.monotonic() - start < 2
    assert sent[0]["status"] == 408 and (b"connection", b"close") in sent[0]["headers"]
    assert json.loads(sent[1]["body"])["error"]["type"] == "request_timeout"


# ----------------------------------------------------------------------------- JSON 4xx below
@pytest.mark.slow
def test_errors_below_the_app_are_json(runs) -> None:
    app = create_app(runs, LIMITS, allowed_hosts=["127.0.0.1", "localhost", "[::1]"])
    cases = [
        (b"POST /v1/classify HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: x\r\n\r\n{}", 400,
         "bad Content-Length"),
        (b"GARBAGE\r\n\r\n", 400, "illegal request line"),
        (b"GET /healthz HTTP/1.1\r\nbad header\r\n\r\n", 400, "illegal header line"),
        (b"GET /healthz HTTP/1.1\r\n\r\n", 400, "Host"),
        (b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX: " + b"a" * 20_000, 431,
         "Receive buffer too long"),
        (b"GET /healthz HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n", 400,
         "Host header was 'evil.example'"),
        (b"GET /healthz HTTP/1.1\r\nHost: evil.example:8000\r\nConnection: close\r\n\r\n", 400,
         "only for the hosts"),
    ]  # fmt: skip
    with live(app) as port:
        for raw, status, words in cases:
            reply, _ = _exchange(port, raw)
            assert words in _json_error(reply, status), raw[:60]
        for host in (b"127.0.0.1:1234", b"LOCALHOST", b"[::1]:8000"):
            request = b"GET /healthz HTTP/1.1\r\nHost: " + host + b"\r\nConnection: close\r\n\r\n"
            reply, _ = _exchange(port, request)
            assert reply.startswith(b"HTTP/1.1 200 "), host


@pytest.mark.parametrize(
    "host",
    ["[::1].evil.com", "[::1]evil.com", "[::1]:8000.evil.com", "127.0.0.1.evil.com",
     "127.0.0.1:80@evil.com", "localhost evil.com", "[::2]", "[zz::1]", "[::1", ""],
)  # fmt: skip
def test_a_host_is_parsed_whole_not_by_its_prefix(runs, host: str) -> None:
    """The loopback server's Host check reads the whole header (a bracketed IPv6 address or
    a name, then only a port): a name that merely starts like an allowed host is refused."""
    app = create_app(runs, LIMITS, allowed_hosts=["127.0.0.1", "localhost", "[::1]", "::1"])
    client = TestClient(app)
    refused = client.get("/healthz", headers={"host": host})
    assert refused.status_code == 400, host
    assert "only for the hosts" in refused.json()["error"]["message"]
    for good in ("[::1]", "[0:0:0:0:0:0:0:1]:8000", "localhost:1", "127.0.0.1"):
        assert client.get("/healthz", headers={"host": good}).status_code == 200, good


def test_a_refused_host_is_json_in_the_app(runs) -> None:
    app = create_app(runs, LIMITS, allowed_hosts=["127.0.0.1", "localhost"])
    response = TestClient(app, base_url="http://evil.example:8000").get("/healthz")
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "bad_request"
    assert "evil.example" in response.json()["error"]["message"]


# ----------------------------------------------------------------------------- strict types
@pytest.mark.parametrize(
    "endpoint, body, field",
    [
        ("classify", {"model": "sentiment", "texts": ["a"], "attention": "yes"}, "attention"),
        ("classify", {"model": "sentiment", "texts": ["a"], "attention": 1}, "attention"),
        ("generate", {"prompt": "a", "max_new_tokens": True}, "max_new_tokens"),
        ("generate", {"prompt": "a", "max_new_tokens": 2.0}, "max_new_tokens"),
        ("generate", {"prompt": "a", "temperature": "0.5"}, "temperature"),
        ("generate", {"prompt": "a", "temperature": False}, "temperature"),
        ("generate", {"prompt": "a", "stream": "true"}, "stream"),
        ("generate", {"prompt": "a", "seed": "7"}, "seed"),
        ("translate", {"texts": ["ein mann"], "beam": "3"}, "beam"),
        ("translate", {"texts": ["ein mann"], "alignment": 0}, "alignment"),
        ("chat", {"message": "hi", "top_k": 5.5}, "top_k"),
    ],
)
def test_json_types_are_not_coerced(client, endpoint: str, body: dict, field: str) -> None:
    response = client.post(f"/v1/{endpoint}", json=body)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["message"].startswith(f"{field}: ")


def test_an_integer_is_a_number(client) -> None:
    body = {"prompt": "a", "temperature": 1, "top_p": 1, "max_new_tokens": 2, "seed": 1}
    assert client.post("/v1/generate", json=body).status_code == 200


# ----------------------------------------------------------------------------- ranges
# (parameter, value): the CLI refuses it (one line, exit 2), the server answers 422, the
# Python API raises InputError; or all three take it
RANGE_CASES = [
    ("seed", -1, False),
    ("seed", 99999999999999999999, False),
    ("seed", 2**63, False),
    ("seed", 2**63 - 1, True),
    ("seed", 0, True),
    ("temperature", float("inf"), False),
    ("temperature", float("nan"), False),
    ("temperature", -0.5, False),
    ("temperature", 0.0, True),
    ("temperature", 1e300, True),
    ("top_k", -1, False),
    ("top_k", 2**31, False),
    ("top_k", 2**31 - 1, True),
    ("top_p", 0.0, False),
    ("top_p", 1.5, False),
    ("top_p", 1.0, True),
    ("repetition_penalty", 0.0, False),
    ("repetition_penalty", float("inf"), False),
    ("repetition_penalty", 1.3, True),
    ("max_new_tokens", -1, False),
    ("max_new_tokens", 0, True),
]


def _cli_value(value) -> str:
    return repr(value) if isinstance(value, float) else str(value)  # inf, nan, 1e+300


@pytest.mark.parametrize("name, value, valid", RANGE_CASES)
def test_cli_server_and_api_agree_on_ranges(client, runs, capsys, name, value, valid) -> None:
    assert (PARAMS[name].problem(value) is None) is valid
    # the server
    payload = json.dumps({"prompt": "a", "max_new_tokens": 2, name: value}).encode()
    response = client.post(
        "/v1/generate", content=payload, headers={"content-type": "application/json"}
    )
    if valid:
        assert response.status_code == 200, response.text
    else:
        assert response.status_code == 422, response.text
        assert response.json()["error"]["message"].startswith(f"{name}: ")
    # the CLI, before it loads the model (a missing run would be the next error)
    option = PARAMS[name].option
    code = main(["generate", "/nonexistent/run", option, _cli_value(value)])
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("attnkit: error:"), err
    assert code == 2
    if valid:
        assert option not in err  # it passed the range check, the run is what is missing
    else:
        assert f"{option} must be" in err
    # the Python API
    lm = runs["verse"].predictor
    options = {"max_new_tokens": 1, name: value}
    if valid:
        lm.generate("a", **options)
    else:
        with pytest.raises(InputError, match=f"{name} must be"):
            lm.generate("a", **options)


@pytest.mark.parametrize("value, valid", [(-1, False), (2**63, False), (2**63 - 1, True)])
def test_chat_seed_range_is_the_same(client, runs, capsys, value, valid) -> None:
    response = client.post("/v1/chat", json={"message": "hi", "seed": value})
    assert response.status_code == (200 if valid else 422), response.text
    code = main(["chat", "/nonexistent/run", "hi", "--seed", str(value)])
    err = capsys.readouterr().err
    assert code == 2 and (("--seed must be" in err) is not valid), err
    if not valid:
        with pytest.raises(InputError, match="seed must be"):
            runs["bot"].predictor.chat("hi", seed=value)


def test_beam_range_is_the_same(client, capsys) -> None:
    assert PARAMS["beam"].problem(0) is not None
    response = client.post("/v1/translate", json={"texts": ["ein mann"], "beam": 0})
    assert response.status_code == 422 and "beam: " in response.json()["error"]["message"]
    with pytest.raises(SystemExit) as exit_:  # argparse's type (_positive_int): beam >= 1
        main(["translate", "/nonexistent/run", "ein mann", "--beam", "0"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "argument --beam: expected a positive integer, got 0" in err and err.count("\n") == 1


def test_sampling_args_take_what_params_take() -> None:
    args = argparse.Namespace(temperature=0.0, top_k=0, top_p=1.0, seed=2**63 - 1)
    _sampling_args(args)  # no error
    args.seed = 2**63
    with pytest.raises(Exception, match=r"--seed must be in 0\.\.9223372036854775807"):
        _sampling_args(args)


# ----------------------------------------------------------------------------- the port
def test_a_port_in_use_is_one_line_before_loading(capsys, monkeypatch) -> None:
    def no_loading(*args, **kwargs):
        raise AssertionError("a model was loaded before the port was checked")

    monkeypatch.setattr(attnkit.app.api, "load", no_loading)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        code = main(["serve", str(NGRAM), "--port", str(port)])
    err = capsys.readouterr().err
    assert code == 2
    assert err == f"attnkit: error: cannot listen on 127.0.0.1:{port}: address already in use\n"


def test_an_unknown_host_is_one_line(capsys, monkeypatch) -> None:
    def unknown(*args, **kwargs):  # as the resolver answers, without asking one
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", unknown)
    assert main(["serve", str(NGRAM), "--host", "no-such-host.invalid", "--port", "8123"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("attnkit: error: cannot listen on no-such-host.invalid:8123: ")
    assert err.count("\n") == 1


def test_bad_body_timeout_is_one_line(capsys) -> None:
    for value in ("0", "-1", "inf", "nan"):
        assert main(["serve", str(NGRAM), "--body-timeout", value]) == 2
        assert "body_timeout_s must be a finite number > 0" in capsys.readouterr().err


def test_bind_takes_every_address_and_frees_on_error() -> None:
    sockets = bind("127.0.0.1", 0)
    try:
        port = sockets[0].getsockname()[1]
        sockets[0].listen(1)
        with pytest.raises(InputError, match="address already in use"):
            bind("127.0.0.1", port)
    finally:
        for sock in sockets:
            sock.close()

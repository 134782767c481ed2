"""The HTTP layer under ``attnkit serve``'s app: the listening sockets and uvicorn.

``bind(host, port)`` takes the address before any model is loaded, so a port in use is one
line (``cannot listen on 127.0.0.1:8000: address already in use``), not uvicorn's log after
minutes of loading; its connections have TCP_NODELAY (as uvicorn's own sockets do), so a
response is not held back by Nagle's algorithm. ``make_server(app, limits)`` is uvicorn with ``JsonErrorProtocol``:
what uvicorn answers itself, below the app, also gets the JSON error body of every other
error (``attnkit.app.serve.app.error_body``):

- a request that is not valid HTTP (a malformed request line or header, a bad
  Content-Length, a head over h11's size limit): 400 (or h11's status hint, e.g. 431),
  where uvicorn writes a plain-text "Invalid HTTP request received.";
- a request head (request line and headers) not complete ``Limits.body_timeout_s``
  seconds after its first byte: 408, and the connection is closed (uvicorn has no such
  timeout: a client trickling its headers held the connection forever). A connection
  that sends nothing at all is closed silently after that time (browsers open spare
  connections). The body's deadline is the app's (``_BodyLimit``).

What still comes from uvicorn as plain text: its 500 for an app that fails before answering
(the app answers every exception itself, with JSON) and its 503 for ``limit_concurrency``
(not set here); neither is a 4xx.
"""

from __future__ import annotations

import asyncio
import errno
import json
import socket
import sys
from types import FrameType
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import STATUS_PHRASES, H11Protocol

from attnkit.app.serve.app import error_body
from attnkit.app.serve.limits import Limits
from attnkit.core.errors import InputError

__all__ = ["JsonErrorProtocol", "bind", "make_server"]


def _where(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def bind(host: str, port: int) -> list[socket.socket]:
    """Sockets bound to ``host``:``port`` (every address the name has), not yet listening.

    Raises:
        InputError: one line, ``cannot listen on HOST:PORT: address already in use`` (or
            permission denied, an address not of this machine, an unknown host name).
    """
    where = _where(host, port)
    try:
        infos = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as exc:
        raise InputError(f"cannot listen on {where}: unknown host ({exc.strerror})") from None
    addresses = list(dict.fromkeys((family, address) for family, _, _, _, address in infos))
    sockets: list[socket.socket] = []
    try:
        for family, address in addresses:
            # a TCP socket by name (proto IPPROTO_TCP, not 0): asyncio sets TCP_NODELAY only
            # on connections of such a socket. Without it, Nagle's algorithm held each
            # response's body until the client's delayed ACK of its head: 40 ms a request
            sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # (inherited on accept)
            if family == socket.AF_INET6 and len(addresses) > 1:  # one family per socket
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
    except OSError as exc:
        for sock in sockets:
            sock.close()
        reason = {
            errno.EADDRINUSE: "address already in use",
            errno.EACCES: "permission denied (ports below 1024 need privileges)",
            errno.EADDRNOTAVAIL: "this machine has no such address",
        }.get(exc.errno, (exc.strerror or str(exc)).lower())
        raise InputError(f"cannot listen on {where}: {reason}") from None
    return sockets


class JsonErrorProtocol(H11Protocol):
    """uvicorn's h11 protocol with the JSON error body for what it refuses itself, and a
    deadline (``head_timeout_s``) for a request's head."""

    head_timeout_s: float = Limits.body_timeout_s

    _head_timer: asyncio.TimerHandle | None = None
    _head_bytes = False  # a byte of the awaited request head has arrived

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._awaiting_head():
            self._head_bytes = self._head_bytes or bool(data)
            if self._head_timer is None:  # the next request of a kept-alive connection
                self._arm_head_timer()
        super().data_received(data)
        if not self._awaiting_head():  # its head is in: the body's deadline is the app's
            self._disarm_head_timer()

    def _awaiting_head(self) -> bool:
        return self.conn.their_state is h11.IDLE and self.conn.our_state is h11.IDLE

    def _arm_head_timer(self) -> None:
        self._disarm_head_timer()
        self._head_timer = self.loop.call_later(self.head_timeout_s, self._head_timeout)

    def _disarm_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        if not self._awaiting_head():
            self._head_bytes = False

    def _head_timeout(self) -> None:
        self._head_timer = None
        if self.transport.is_closing() or not self._awaiting_head():
            return
        if not self._head_bytes:  # nothing sent: an idle spare connection
            self.transport.close()
            return
        self._send_json_error(
            408, f"the request head was not received within {self.head_timeout_s:g} s"
        )

    def send_400_response(self, msg: str) -> None:
        """uvicorn calls this for a request h11 refuses (inside its ``except``: the h11
        error is at hand, with its status hint)."""
        exc = sys.exc_info()[1]
        status = getattr(exc, "error_status_hint", 400)
        status = status if isinstance(status, int) and 400 <= status < 500 else 400
        reason = (
            str(exc).split(": bytearray(")[0] if isinstance(exc, h11.RemoteProtocolError) else ""
        )
        detail = f": {reason}" if reason else ""  # h11's words, without the raw bytes
        self._send_json_error(status, f"the request is not valid HTTP/1.1{detail}")

    def _send_json_error(self, status: int, message: str) -> None:
        """Answer ``status`` with the JSON error body, then close the connection."""
        self._disarm_head_timer()
        body = json.dumps(error_body(status, message)).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        try:
            response = h11.Response(
                status_code=status, headers=headers, reason=STATUS_PHRASES[status]
            )
            for event in (response, h11.Data(data=body), h11.EndOfMessage()):
                self.transport.write(self.conn.send(event))
        except h11.LocalProtocolError:  # a response had begun: nothing more can be said
            pass
        self.transport.close()


class _Server(uvicorn.Server):
    """uvicorn's server, whose ``run`` ends in ``KeyboardInterrupt`` once it has shut down
    after Ctrl-C or SIGTERM (the CLI's "attnkit: interrupted", exit status 130). uvicorn
    re-raises the signal it caught after its shutdown, but from inside ``asyncio.run``,
    whose own SIGINT handler it has just restored: under load that ended as a plain return
    (exit status 0; tests/app/serve/test_serve_batching.py saw it)."""

    interrupted = False

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.interrupted = True
        super().handle_exit(sig, frame)

    def run(self, sockets: list[socket.socket] | None = None) -> None:
        super().run(sockets=sockets)
        if self.interrupted:  # (where uvicorn's re-raised signal did not end the process)
            raise KeyboardInterrupt


def make_server(app: Any, limits: Limits | None = None, log_level: str = "info") -> uvicorn.Server:
    """uvicorn serving ``app`` with ``JsonErrorProtocol`` (its head deadline:
    ``limits.body_timeout_s``); run it with ``.run(sockets=bind(host, port))``."""
    limits = limits or Limits()
    protocol = type(
        "AttnkitProtocol", (JsonErrorProtocol,), {"head_timeout_s": limits.body_timeout_s}
    )
    # ws="none": no WebSocket upgrade, so every request meets the app's checks
    config = uvicorn.Config(app, http=protocol, ws="none", log_level=log_level)
    return _Server(config)

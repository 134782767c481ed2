"""SIGTERM as an interruption: a ``kill`` (or a job scheduler stopping a job) ends a command
the way Ctrl-C does, so that every ``finally`` and ``except`` runs on the way out: a
temporary file being written is removed (``attnkit.core.checkpoint`` and the figure
writers delete their own), a training keeps its last checkpoint and a run that saved
nothing is cleared. Without it Python dies at once and leaves ``.curves.png.*.tmp``.

    with terminate_as_interrupt():
        train(...)          # SIGTERM -> Terminated (a KeyboardInterrupt) raised here

A leaf module: the standard library only.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

__all__ = ["Terminated", "terminate_as_interrupt"]


class Terminated(KeyboardInterrupt):
    """Raised in the main thread when the process receives SIGTERM (exit status 143)."""

    exit_status = 128 + signal.SIGTERM


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated("terminated (SIGTERM)")


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM raises ``Terminated`` inside the block (main thread only; elsewhere, and where
    a handler of someone else's is installed, nothing changes); the old handler is put back
    afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous not in (signal.SIG_DFL, None):  # someone else's (a notebook kernel, say)
        yield
        return
    signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)

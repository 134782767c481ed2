"""Logging: the library logs, the application (or the user) decides where it goes.

Every attnkit module logs to a logger under ``"attnkit"`` (``logging.getLogger(__name__)``);
nothing is installed when attnkit is imported (no handler, not even a ``NullHandler``, so
that a warning still reaches Python's last-resort handler on stderr where nothing is
configured). Three places decide what is shown:

* the CLI (``attnkit.app.cli.main``) attaches a ``ConsoleHandler`` to ``"attnkit"`` for the
  command: its messages on stdout, as the CLI has always printed them, and warnings on
  stderr as ``attnkit: warning: ...``;
* ``attnkit.train`` (and the Trainer) in a script or a notebook run inside ``verbosity``:
  the important lines (device, data, evaluations) are shown as ``transformers`` shows its
  own, through the user's logging configuration where there is one, else through a
  ``ConsoleHandler`` attached to ``"attnkit"`` for the duration of the call only;
* the user: ``logging.getLogger("attnkit").setLevel(logging.WARNING)`` (or
  ``attnkit.train(..., verbose=False)``) silences the messages and the progress bar; the
  logging configuration of an application routes them anywhere else.

A leaf module: the standard library only.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["LOGGER", "ConsoleHandler", "console_logging", "shows_info", "verbosity"]

LOGGER = "attnkit"  # the root of attnkit's loggers


class ConsoleHandler(logging.Handler):
    """Records as the CLI prints its lines: INFO and below on stdout, the message alone;
    warnings and errors on stderr, ``attnkit: warning: MESSAGE``. The streams are looked up
    at each record (``sys.stdout`` as it is then: a notebook's, a test's capture)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = self.format(record)
            if record.levelno >= logging.WARNING:
                stream = sys.stderr
                message = f"attnkit: {record.levelname.lower()}: {message}"
            else:
                stream = sys.stdout
            stream.write(message + "\n")
            stream.flush()
        except (RecursionError, OSError):  # BrokenPipeError: as print() did, so that
            raise  # `attnkit train ... | head -1` ends quietly (the CLI's exit status 141);
            # another (`> /dev/full`): the CLI's one error line, not a traceback per line
        except Exception:
            self.handleError(record)


def shows_info(name: str = LOGGER) -> bool:
    """True if an INFO record of logger ``name`` would be handled now (the rule the
    progress bar follows: no messages, no bar)."""
    return logging.getLogger(name).isEnabledFor(logging.INFO)


@contextmanager
def verbosity(verbose: bool = True) -> Iterator[None]:
    """While the block runs, attnkit's messages are shown (``verbose``) or not.

    verbose: the ``"attnkit"`` logger's level is INFO if it was not set (a level the user
    set is kept: WARNING silences the messages and the progress bar). verbose=False: the
    level is WARNING (or the user's, if higher): only warnings are shown. Where no handler
    would receive a record (nothing configured: no handler on ``"attnkit"`` nor on any
    logger above it), a ``ConsoleHandler`` is attached. Everything is restored afterwards,
    so nothing outlives the call; nested blocks change nothing more."""
    logger = logging.getLogger(LOGGER)
    level = logger.level
    if not verbose:
        logger.setLevel(max(level, logging.WARNING))
    elif level == logging.NOTSET:
        logger.setLevel(logging.INFO)
    added = None
    if not logger.hasHandlers():
        added = ConsoleHandler()
        logger.addHandler(added)
    try:
        yield
    finally:
        logger.setLevel(level)
        if added is not None:
            logger.removeHandler(added)


@contextmanager
def console_logging(level: int = logging.INFO) -> Iterator[None]:
    """The CLI's logging while a command runs: a ``ConsoleHandler`` on ``"attnkit"`` and
    its level set to ``level``; both undone afterwards (``main`` may be called many times
    in one process, as the tests do)."""
    logger = logging.getLogger(LOGGER)
    old = logger.level
    handler = ConsoleHandler()
    logger.addHandler(handler)
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old)

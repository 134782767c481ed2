"""Reading one text per line (``--file``, stdin) in bounded memory.

A line is read at most ``MAX_LINE_BYTES`` bytes at a time (``stream.readline(limit)``), so
a huge line, or an endless stream without line breaks (``/dev/zero``), never grows memory:

* a line longer than ``MAX_LINE_BYTES`` is CUT to its first ``MAX_LINE_BYTES`` bytes (at
  a character boundary), as a model cuts a long text anyway: ``MAX_LINE_BYTES`` is
  ``4 * MAX_TEXT_CHARS`` bytes, at least ``MAX_TEXT_CHARS`` characters, more than any
  model reads (``attnkit.data.tokenization.max_text_chars``), so the model cuts it again and
  reports it as truncated (the usual warning); the rest of the line is skipped;
* a line that goes on for more than ``MAX_LINE_SKIP`` bytes is no text: one error line
  (``InputError``), e.g. for ``attnkit tag RUN --file /dev/zero``.

Lines end at ``\\n``, ``\\r\\n`` or ``\\r`` (as ``bytes.splitlines``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import BinaryIO

from attnkit.core.errors import InputError
from attnkit.data.tokenization import MAX_TEXT_CHARS

__all__ = ["MAX_LINE_BYTES", "MAX_LINE_SKIP", "decode_line", "iter_lines"]

MAX_LINE_BYTES = 4 * MAX_TEXT_CHARS  # 1 MiB: at least MAX_TEXT_CHARS characters
MAX_LINE_SKIP = 64 << 20  # bytes of one line beyond the cut: more is not a text
_CHUNK = 1 << 16
_BREAK = re.compile(rb"\r\n|\r|\n")


def iter_lines(stream: BinaryIO, where: str) -> Iterator[tuple[bytes, bool]]:
    """``(line, cut)`` for each line of the binary ``stream``, without its line break;
    ``cut``: the line was longer than ``MAX_LINE_BYTES`` and this is its beginning.
    Reads ``_CHUNK`` bytes at most at a time (interactive input line by line); ``where``
    (e.g. ``in h.txt``) names the stream in the error for an endless line."""
    number = 0
    buf = bytearray()
    kept: bytes | None = None  # the beginning of a line being skipped
    skipped = 0
    pending_cr = False  # the last byte read was \r: a \n right after it belongs to it
    while True:
        piece = stream.readline(_CHUNK)
        if not piece:
            break
        if pending_cr and piece.startswith(b"\n"):
            piece = piece[1:]
        pending_cr = piece.endswith(b"\r")
        parts = _BREAK.split(piece)  # all but the last end a line
        for k, part in enumerate(parts):
            if kept is None:
                buf += part
            else:
                skipped += len(part)
            if k < len(parts) - 1:
                number += 1
                yield _line(buf) if kept is None else (kept, True)
                buf.clear()
                kept, skipped = None, 0
        if kept is None and len(buf) > MAX_LINE_BYTES:
            kept, skipped = bytes(buf[:MAX_LINE_BYTES]), len(buf) - MAX_LINE_BYTES
            buf.clear()
        if skipped > MAX_LINE_SKIP:
            raise InputError(
                f"line {number + 1} {where} goes on for more than {MAX_LINE_SKIP >> 20} MiB "
                "without a line break: not a text file with one text per line"
            )
    if kept is not None:
        yield kept, True
    elif buf:
        yield _line(buf)


def _line(buf: bytearray) -> tuple[bytes, bool]:
    """A whole line read into ``buf``: (it, False), or its beginning if too long."""
    if len(buf) > MAX_LINE_BYTES:
        return bytes(buf[:MAX_LINE_BYTES]), True
    return bytes(buf), False


def decode_line(line: bytes, cut: bool) -> str:
    """``line`` as UTF-8; a ``cut`` line may end inside a character, which is dropped.
    Raises ``UnicodeDecodeError`` for bytes that are not UTF-8."""
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError as exc:
        if cut and exc.reason == "unexpected end of data" and exc.end == len(line):
            return line[: exc.start].decode("utf-8")
        raise

"""The command's streams: texts from arguments, stdin (``-``) and ``--file``, checked as
UTF-8 and read in bounded memory; ``answer``'s ``--context`` file; and stdout while a
command runs (a lost output, a closed pipe)."""

from __future__ import annotations

import argparse
import errno
import os
import sys

from attnkit.app.cli.common import EXIT_USAGE, UsageError


def _check_text(text: str, number: int) -> str:
    """``text`` (input ``number``), unless it came from bytes that are not UTF-8: those reach
    Python as lone surrogates (argv and stdin decode with surrogateescape)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        code = ord(text[exc.start])
        what = f"byte 0x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"U+{code:04X}"
        raise UsageError(
            f"input {number} is not valid UTF-8 ({what} at character {exc.start + 1})"
        ) from None
    return text


def _stdin():
    """``sys.stdin``; none (the shell closed it: ``<&-``, a service without one): one line."""
    if sys.stdin is None:
        raise UsageError("no standard input to read (stdin is closed)")
    return sys.stdin


def _stdin_stream():
    """stdin as a binary stream (read line by line, ``attnkit.data.lines``)."""
    import io

    stdin = _stdin()
    if hasattr(stdin, "buffer"):
        return stdin.buffer
    return io.BytesIO(stdin.read().encode("utf-8", "surrogateescape"))  # text-only (tests)


def _stdin_lines(before: int, keep_blank: bool) -> list[str]:
    """``_decode_lines`` of stdin; a stream that cannot be read (open for writing only:
    ``0>FILE``, an I/O error) is one line."""
    try:
        return _decode_lines(_stdin_stream(), "on stdin", before, keep_blank=keep_blank)
    except OSError as exc:
        raise UsageError(f"cannot read standard input: {exc.strerror or exc}") from None


def _decode_lines(stream, where: str, before: int, keep_blank: bool) -> list[str]:
    """One text per line of the binary ``stream`` (newline, CRLF or CR; a UTF-8 BOM is
    dropped), read line by line in bounded memory (``attnkit.data.lines``: a line longer than
    ``MAX_LINE_BYTES`` is cut, the model then cuts it again and says so; an endless line is
    an error); blank lines dropped unless ``keep_blank``; ``before``: the inputs before
    these, to number them in errors. A line that is not UTF-8 is an error naming its input
    and line."""
    from attnkit.data.lines import decode_line, iter_lines

    texts: list[str] = []
    for number, (line, cut) in enumerate(iter_lines(stream, where), 1):
        if number == 1:
            line = line.removeprefix(b"\xef\xbb\xbf")
        try:
            text = decode_line(line, cut)
        except UnicodeDecodeError as exc:
            raise UsageError(
                f"input {before + len(texts) + 1} is not valid UTF-8 (line {number}) "
                f"{where}: byte 0x{line[exc.start]:02x} at byte {exc.start + 1}"
            ) from None
        if keep_blank or text.strip():
            texts.append(text)
    return texts


def _read_inputs(args: argparse.Namespace) -> list[str]:
    texts: list[str] = []
    # (kind, value): a text argument ("@user great movie" is a text too), stdin, or --file
    sources = [("stdin" if item == "-" else "text", item) for item in args.text]
    if args.file:
        sources.append(("file", args.file))
    for kind, item in sources:
        if kind == "text":
            texts.append(_check_text(item, len(texts) + 1))
            continue
        where = "on stdin" if kind == "stdin" else f"in {item}"
        if kind == "stdin":
            texts.extend(_stdin_lines(len(texts), keep_blank=False))
            continue
        with _open_input(item) as f:
            try:
                texts.extend(_decode_lines(f, where, len(texts), keep_blank=False))
            except OSError as exc:  # e.g. a folder, an I/O error
                raise UsageError(f"cannot read {item}: {exc.strerror}") from None
    if not texts:
        raise UsageError("no input text (give TEXT..., - for stdin, or --file)")
    for i, text in enumerate(texts, 1):
        if not text.strip():
            raise UsageError(f"input {i} is empty or whitespace only")
    return texts


def _open_input(path: str):
    """``path`` opened for reading bytes; an error is one line."""
    try:
        return open(path, "rb")
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    except ValueError:  # a NUL byte in the path
        raise UsageError(f"cannot read {path!r}: not a valid file name") from None


def _read_lines_kept(args: argparse.Namespace) -> list[str]:
    """TEXT arguments and stdin lines ('-'), empty lines kept (one line in -> one line out)."""
    texts: list[str] = []
    for item in args.text:
        if item == "-":
            texts.extend(_stdin_lines(len(texts), keep_blank=True))
        else:
            texts.append(_check_text(item, len(texts) + 1))
    return texts


def _file_kind(mode: int) -> str:
    """What a file that is not a regular one is, from its ``st_mode``."""
    import stat

    for test, kind in (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return kind
    return "not a regular file"


def _context_file(value: str) -> bool:
    """True if --context ``value`` names a regular file (its text is the passage), False
    if no such file exists (``value`` is the passage itself). A path that exists but is no
    regular file (a folder, ``/dev/zero``, a FIFO, whose open would wait for a writer) is a
    one-line error, found with ``os.stat``: it is never opened."""
    import stat

    try:
        mode = os.stat(value).st_mode
    except (OSError, ValueError):  # no such file, a name too long, a NUL byte: a text
        return False
    if stat.S_ISREG(mode):
        return True
    raise UsageError(f"--context {value} is {_file_kind(mode)}, not a text file")


def _read_regular_file(path: str, limit: int) -> bytes:
    """At most ``limit`` bytes of the regular file ``path``; one line for anything else. It
    is opened without waiting (``O_NONBLOCK``: a FIFO put in its place after the check does
    not block) and checked again once open."""
    import stat

    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise UsageError(f"--context {path} is {_file_kind(mode)}, not a text file")
        try:
            return f.read(limit)
        except OSError as exc:
            raise UsageError(f"cannot read {path}: {exc.strerror}") from None


EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what a shell reports for `yes | head -1`'s yes


def _broken_pipe() -> int:
    """Stop quietly when stdout's reader has gone, as Unix tools do: no traceback, no
    message, exit status 141 (128 + SIGPIPE, the status of a tool the signal ends: the
    output is incomplete, and `set -o pipefail` scripts see it as for any such tool).
    stdout is pointed at /dev/null so that flushing it at exit raises nothing again."""
    _stdout_to_devnull()
    return EXIT_BROKEN_PIPE


def _stdout_to_devnull() -> None:
    """Point stdout's descriptor at /dev/null: what is still buffered for it goes there at
    exit, instead of failing again (Python would print the error and exit 120)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file (tests), or none
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


class _Stdout:
    """``sys.stdout`` while a command runs: the same stream, which remembers its first
    failed write or flush (a full disk, ``> /dev/full``, a descriptor not open for writing),
    so that ``main`` tells a lost output from any other ``OSError``, even one that a caller
    caught (logging's handler does). A closed pipe is not one: it ends quietly (141)."""

    def __init__(self, stream) -> None:
        self.stream = stream
        self.error: OSError | None = None

    def _call(self, method: str, *args):
        try:
            return getattr(self.stream, method)(*args)
        except BrokenPipeError:
            raise
        except OSError as exc:
            if self.error is None:
                self.error = exc
            raise

    def write(self, text: str) -> int:
        return self._call("write", text)

    def writelines(self, lines) -> None:
        return self._call("writelines", lines)

    def flush(self) -> None:
        return self._call("flush")

    def __getattr__(self, name: str):
        return getattr(self.stream, name)


# errors only the file system gives a writer (the disk, not the code): one line
_WRITE_ERRNOS = frozenset(
    getattr(errno, name) for name in ("ENOSPC", "EROFS", "EDQUOT", "EFBIG") if hasattr(errno, name)
)


def _output_lost(exc: OSError) -> int:
    """The one line for an output that could not be written (exit code 2)."""
    _stdout_to_devnull()
    print(f"attnkit: error: cannot write the output: {exc.strerror or exc}", file=sys.stderr)
    return EXIT_USAGE

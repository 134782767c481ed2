"""One guard for every path attnkit writes to: nothing the user had is destroyed.

Every verb that writes a path the user chose (``plot -o``, ``predict --explain``,
``translate --show-attention``, ``pseudo-label -o``, ``export -o``, ``train --out``) asks
``check_output`` first, before any expensive work, and gets the path to write or a one-line
``InputError`` naming the path and the reason. The rules:

* an empty path is refused;
* a file output is a new name or an existing *regular* file: a device node (``/dev/null``,
  even as root), a FIFO, a socket or a folder is never replaced;
* a symbolic link is followed only when it stays in its own folder (the rules then apply to
  its target, which is what gets written, so the link keeps pointing at the new file); a
  link out of its folder (``x.png -> /etc/passwd``, ``-> ../y``) is refused. A folder output
  may be a link to a folder anywhere (``runs/big -> /mnt/disk/big``);
* an output that *is* one of the command's inputs (the same file: device and inode) is
  refused, e.g. ``pseudo-label --input u.tsv -o u.tsv``;
* nothing is written into a run (``attnkit.core.run_layout``: config.json with weights of
  any format, a checkpoint or the unfinished mark) at any depth (``runs/cls/last/a/b``
  too): only the training that owns a run writes in it (its curves.png included;
  ``plot curves`` draws a run's curves into a new place);
* the folder that receives the output must exist (it is not created for a file) and be
  writable (a read-only file system is named as such); a folder output is created where
  its nearest existing parent is a writable folder; ``empty=True`` (exports) refuses a
  folder that holds anything.

Writing itself goes through a temporary name renamed into place (``attnkit.core.checkpoint`` for
files, ``staged_folder`` here for folders), and an ``OSError`` while writing becomes
``cannot_write``'s one line (``cannot write X: No space left on device``) with nothing
half-written left behind. Temporary files and folders are removed only by the process
that made them (it knows their names); a name that merely looks like one of attnkit's
temporary names is never touched.

A leaf module: the standard library, ``attnkit.core.errors`` and ``attnkit.core.run_layout``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from attnkit.core.errors import AttnkitError, InputError
from attnkit.core.run_layout import enclosing_run

__all__ = [
    "cannot_write",
    "check_output",
    "run_directory",
    "staged_folder",
]


def cannot_write(path: str | os.PathLike[str], exc: OSError) -> InputError:
    """The one-line error for an ``OSError`` met while writing ``path`` (read-only file
    system, no space left, permission denied, not a directory, ...)."""
    reason = exc.strerror or str(exc).strip() or type(exc).__name__
    return InputError(f"cannot write {path}: {reason}")


def _kind_of(mode: int) -> str:
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    return "a regular file" if stat.S_ISREG(mode) else "not a regular file"


def _lstat(path: Path, shown: Path) -> os.stat_result | None:
    """``os.lstat(path)``; None where nothing is there (or a parent is not a folder: the
    caller names that parent); any other failure is an ``InputError``."""
    try:
        return os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:  # too long a name, no permission to look, ...
        raise cannot_write(shown, exc) from None


def _blocker(path: Path) -> Path | None:
    """The nearest existing ancestor of ``path`` that is not a folder, if any."""
    for p in path.parents:
        if os.path.lexists(p):
            return None if os.path.isdir(p) else p
    return None


def _inside(target: Path, folder: Path) -> bool:
    try:
        return os.path.commonpath([target, folder]) == str(folder)
    except ValueError:  # other drives (Windows)
        return False


def run_directory(folder: str | os.PathLike[str]) -> Path | None:
    """The run (or model export) that ``folder`` is or lies in, at any depth, else None
    (``attnkit.core.run_layout.enclosing_run``)."""
    return enclosing_run(folder)


def _check_writable(folder: Path, shown: Path) -> None:
    """``folder`` (existing) accepts new entries, else an ``InputError`` saying why."""
    if os.access(folder, os.W_OK | os.X_OK):
        return
    read_only = False
    with contextlib.suppress(OSError, AttributeError):
        read_only = bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    if read_only:
        raise InputError(f"cannot write {shown}: folder {folder} is on a read-only file system")
    raise InputError(f"cannot write {shown}: folder {folder} is not writable")


def _same_as_input(
    target: Path, st: os.stat_result, inputs: Iterable[str | os.PathLike[str] | None], shown: Path
) -> None:
    for item in inputs:
        if item is None or item == "":
            continue
        try:
            other = os.stat(item)
        except (OSError, ValueError):
            continue  # not a file (a dataset name, say)
        if (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino):
            raise InputError(
                f"cannot write {shown}: it is also an input of this command ({item}); "
                "choose another name"
            )


def _resolve_link(path: Path, what: str) -> Path:
    """The final target of the link ``path`` (which may not exist: a dangling link)."""
    try:
        return Path(os.path.realpath(path, strict=True))
    except FileNotFoundError:
        return Path(os.path.realpath(path))
    except OSError as exc:  # a loop of links
        raise InputError(f"cannot write {path}: {exc.strerror or exc}") from None


def _as_path(path: str | os.PathLike[str], what: str, noun: str) -> tuple[str, Path]:
    raw = os.fspath(path)
    raw = os.fsdecode(raw) if isinstance(raw, bytes) else raw
    if not raw:
        raise InputError(f"{what} is empty: give a {noun} name")
    if "\0" in raw:
        raise InputError(f"{what} {raw!r} is not a valid {noun} name (it holds a NUL byte)")
    return raw, Path(raw).expanduser()


def check_output(
    path: str | os.PathLike[str],
    *,
    inputs: Iterable[str | os.PathLike[str] | None] = (),
    kind: str = "file",
    what: str = "output",
    empty: bool = False,
) -> Path:
    """The path to write for the output ``path`` (``kind`` "file" or "folder"), after the
    rules of this module; else an ``InputError`` naming ``path`` (``what`` names the
    option: "--output", "--explain", ...). ``inputs``: the command's input files, which
    the output must not be. ``empty`` (folders): the folder must hold nothing (left-over
    temporary files of ours aside). A symbolic link that stays in its folder comes back
    resolved. Nothing is created or changed here."""
    if kind not in ("file", "folder"):
        raise ValueError(f"kind must be 'file' or 'folder', got {kind!r}")
    if kind == "folder":
        return _check_folder(path, inputs, what, empty)
    raw, p = _as_path(path, what, "file")
    st = _lstat(p, p)
    if st is not None and stat.S_ISLNK(st.st_mode):
        target = _resolve_link(p, what)
        folder = Path(os.path.realpath(p.parent))
        if not _inside(target, folder):
            raise InputError(
                f"cannot write {p}: it is a symbolic link to {target}, outside its folder "
                "(give the target itself, or another name)"
            )
        p, st = target, _lstat(target, p)
        if st is not None and stat.S_ISLNK(st.st_mode):
            raise InputError(f"cannot write {path}: too many levels of symbolic links")
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise InputError(f"{what} {p} is a folder; give a file name")
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise InputError(
            f"cannot write {p}: it is {_kind_of(st.st_mode)}, not a regular file "
            "(attnkit writes files only)"
        )
    if st is None and raw.endswith(("/", os.sep)):
        raise InputError(f"{what} {raw} ends with '/': give a file name")
    folder = p.parent
    if st is None and not os.path.isdir(folder):
        blocker = folder if os.path.lexists(folder) else _blocker(folder)
        if blocker is not None and not os.path.isdir(blocker):
            raise InputError(f"cannot write {p}: {blocker} is a file, not a folder")
        raise InputError(f"cannot write {p}: folder {folder} does not exist (create it first)")
    if st is not None:
        _same_as_input(p, st, inputs, p)
    run = run_directory(folder)
    if run is not None:
        raise InputError(
            f"cannot write {p}: {run} is a run directory (its files are the model's); "
            "write outside it"
        )
    _check_writable(folder, p)
    return p


def _check_folder(
    path: str | os.PathLike[str],
    inputs: Iterable[str | os.PathLike[str] | None],
    what: str,
    empty: bool,
) -> Path:
    raw, p = _as_path(path, what, "folder")
    st = _lstat(p, p)
    if st is not None and stat.S_ISLNK(st.st_mode):
        target = _resolve_link(p, what)
        st = _lstat(target, p)
        if st is None:
            raise InputError(f"{what} {p} is a symbolic link to {target}, which does not exist")
        p = target
    if st is not None and not stat.S_ISDIR(st.st_mode):
        kind = "a file" if stat.S_ISREG(st.st_mode) else _kind_of(st.st_mode)
        raise InputError(f"{what} {p} is {kind}, not a folder")
    if st is None:
        blocker = _blocker(p)
        if blocker is not None:
            raise InputError(f"{what} {p}: {blocker} is a file, not a folder")
    else:
        _same_as_input(p, st, inputs, p)
    run = run_directory(Path(os.path.realpath(p)).parent)
    if run is not None:
        raise InputError(
            f"cannot write {p}: {run} is a run directory (its files are the model's); "
            "write outside it"
        )
    if st is not None:
        if empty:
            found = sorted(entry.name for entry in os.scandir(p))
            if found:
                raise InputError(
                    f"{what} {p} is not empty (it holds {found[0]!r}"
                    f"{f' and {len(found) - 1} more' if len(found) > 1 else ''}): "
                    "choose a new or empty folder"
                )
        _check_writable(p, p)
    else:
        nearest = next(a for a in p.absolute().parents if os.path.isdir(a))
        _check_writable(nearest, p)
    return p


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _remove(entry: Path) -> None:
    if entry.is_dir() and not entry.is_symlink():
        shutil.rmtree(entry, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            entry.unlink()


def _fsync_folder(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    with contextlib.suppress(OSError):
        os.fsync(fd)
    os.close(fd)


@contextlib.contextmanager
def staged_folder(path: str | os.PathLike[str], last: str = "config.json") -> Iterator[Path]:
    """Write a folder output (checked by ``check_output(kind="folder")``) all at once: the
    body writes into a hidden staging folder (its name holds this process's id), which is
    then renamed to ``path`` (a new folder), or whose entries are moved into ``path`` (an
    existing empty one), ``last`` (config.json: what makes it a run) last. On any error
    nothing is left: the staging folder is removed, and with it whatever was written; an
    ``OSError`` becomes ``cannot_write``'s one line. Only what this call made is ever
    removed (a killed process's staging folder stays, for its owner to delete)."""
    path = Path(path)
    existed = path.is_dir()
    made: list[Path] = []  # parent folders created here (removed again on failure)
    try:
        if existed:
            stage = Path(
                tempfile.mkdtemp(dir=path, prefix=f".export.{os.getpid()}.", suffix=".tmp")
            )
        else:
            for parent in reversed(path.absolute().parents):
                if not parent.exists():
                    parent.mkdir()
                    made.append(parent)
            stage = Path(
                tempfile.mkdtemp(
                    dir=path.parent, prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp"
                )
            )
        os.chmod(stage, 0o777 & ~_umask())  # mkdtemp makes it private (0700)
    except OSError as exc:
        _undo(made)
        raise cannot_write(path, exc) from None
    moved: list[Path] = []
    try:
        yield stage
        if existed:
            for entry in sorted(stage.iterdir(), key=lambda e: e.name == last):
                os.replace(entry, path / entry.name)
                moved.append(path / entry.name)
            stage.rmdir()
        else:
            os.rename(stage, path)
        _fsync_folder(path.parent)
    except BaseException as exc:
        shutil.rmtree(stage, ignore_errors=True)
        for entry in moved:
            _remove(entry)
        _undo(made)
        if isinstance(exc, OSError) and not isinstance(exc, AttnkitError):
            raise cannot_write(path, exc) from None
        raise


def _undo(made: list[Path]) -> None:
    for folder in reversed(made):
        with contextlib.suppress(OSError):
            folder.rmdir()

"""Download catalogued datasets into the data directory, verifying every byte.

Each download is streamed to a temporary ``*.part`` file next to its destination, its SHA-256
is checked, and only then is it moved into place with :func:`os.replace`, so an interrupted or
corrupted download never leaves a file that looks valid. A ``.part`` file left behind by a killed
download is never read as data, and the next fetch of that file removes it.

Stored files are checked by :func:`check_file`: quickly (size, gzip header and trailer; what
``attnkit data list`` does) or fully (SHA-256 of every byte; what ``fetch`` and
``attnkit data list --verify`` do). A damaged file (truncated, corrupt gzip, wrong SHA-256) is
reported as ``bad`` with the reason, and ``fetch`` downloads it again without ``--force``.
"""

from __future__ import annotations

import gzip
import hashlib
import http.client
import json
import logging
import os
import re
import stat
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import BinaryIO, NamedTuple

from attnkit.core.output_guard import check_output
from attnkit.core.version import __version__
from attnkit.data.catalogue import DatasetFile, get_dataset
from attnkit.data.paths import DataError, read_error_reason, resolve_data_dir

__all__ = [
    "DownloadError",
    "FileCheck",
    "check_file",
    "download",
    "fetch",
    "file_sha256",
    "is_present",
    "mirror_url",
    "remove_stale_parts",
]

log = logging.getLogger(__name__)

ENV_MIRROR = "ATTNKIT_MIRROR"
_CHUNK = 1 << 20


class DownloadError(DataError):
    """A download that failed on the way (network, HTTP status): ``url`` and ``reason`` say
    what and why, so that callers can reword the advice."""

    def __init__(self, url: str, reason: object, hint: str = "") -> None:
        self.url = url
        self.reason = str(reason)
        super().__init__(f"download failed: {url}: {reason}" + (f"; {hint}" if hint else ""))


def file_sha256(path: str | Path, decompress: bool = False) -> str:
    """SHA-256 (hex) of a file's bytes, or of its gzip-decompressed content."""
    digest = hashlib.sha256()
    opener = gzip.open if decompress else open
    with opener(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def mirror_url(url: str, base_url: str) -> str:
    """Replace everything before the file name of ``url`` with ``base_url``.

    ``base_url`` may be a URL (``http://host/dir``) or a local directory path, which becomes a
    ``file://`` URL.
    """
    if "://" not in base_url:
        base_url = Path(base_url).expanduser().resolve().as_uri()
    return base_url.rstrip("/") + "/" + url.rstrip("/").rsplit("/", 1)[-1]


@contextmanager
def _atomic_output(dest: Path) -> Iterator[BinaryIO]:
    """Yield a temporary binary file next to ``dest``; move it to ``dest`` only on success.

    The temporary file is ``{dest.name}.{pid}.{random}.part``: the process id lets a later
    fetch tell a leftover of a killed download from one in progress (:func:`remove_stale_parts`).
    """
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(
            dir=dest.parent, prefix=f"{dest.name}.{os.getpid()}.", suffix=".part"
        )
    except OSError as err:
        raise DataError(f"cannot write {dest}: {read_error_reason(err)}") from None
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
        try:
            os.chmod(tmp, 0o644)  # mkstemp creates 0600; data files are meant to be shared
            os.replace(tmp, dest)
        except FileNotFoundError:
            raise DataError(
                f"the partial download {tmp} was removed by another process (another "
                "`attnkit data fetch` of the same folder?); run the fetch again"
            ) from None
    finally:
        tmp.unlink(missing_ok=True)


_PART_STALE_S = 120.0  # a .part file nobody wrote to for this long is a leftover


def _process_alive(pid: int) -> bool:
    if os.name == "nt":  # os.kill would terminate the process there: rely on the file's age
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # e.g. PermissionError: it exists, owned by someone else
        return True
    return True


def remove_stale_parts(dest: str | Path) -> list[Path]:
    """Delete the ``{dest.name}.*.part`` files that interrupted downloads of ``dest`` left.

    A ``.part`` file is a leftover when the process named in it (attnkit writes
    ``{name}.{pid}.{random}.part``) is gone, or when nothing wrote to it for two minutes;
    a download still running in another process keeps its file. Returns the removed paths.
    """
    dest = Path(dest)
    prefix = dest.name + "."
    try:
        parts = [p for p in dest.parent.iterdir() if p.name.startswith(prefix)]
    except OSError:  # no folder yet, or not readable: nothing to clean
        return []
    removed: list[Path] = []
    for part in parts:
        middle = part.name[len(prefix) :]
        if not middle.endswith(".part") or not part.is_file():
            continue
        pid_text, dot, _ = middle.partition(".")
        stale = bool(dot) and pid_text.isdigit() and not _process_alive(int(pid_text))
        try:
            stale = stale or time.time() - part.stat().st_mtime > _PART_STALE_S
            if stale:
                part.unlink()
                removed.append(part)
                log.info("removed %s, left over from an interrupted download", part)
        except FileNotFoundError:
            pass
        except OSError as err:
            log.warning("cannot remove leftover %s: %s", part, read_error_reason(err))
    return removed


def _open_url(url: str, timeout: float):
    request = urllib.request.Request(url, headers={"User-Agent": f"attnkit/{__version__}"})
    try:
        return urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as err:
        raise DownloadError(url, f"HTTP {err.code} {err.reason}") from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as err:
        reason = getattr(err, "reason", err)
        hint = f"check the network, or use a mirror (--mirror / {ENV_MIRROR})"
        raise DownloadError(url, reason, hint) from None


def download(
    url: str,
    dest: str | Path,
    sha256: str,
    progress: bool = True,
    compress: bool = False,
    timeout: float = 60.0,
) -> Path:
    """Download ``url`` to ``dest`` atomically, verifying the SHA-256 of the downloaded bytes.

    Args:
        url: what to download (``http(s)://`` or ``file://``).
        dest: final path; its directory is created if needed.
        sha256: expected SHA-256 (hex) of the bytes served at ``url``.
        progress: show a tqdm progress bar on stderr.
        compress: gzip the bytes while writing (the checksum is still of the served bytes).
        timeout: socket timeout in seconds.

    Raises:
        DownloadError: network failure (a :class:`DataError`).
        DataError: checksum mismatch. The temporary file is removed and ``dest`` is left
            untouched.
    """
    from tqdm.auto import tqdm

    dest = Path(dest)
    digest = hashlib.sha256()
    response = _open_url(url, timeout)
    with response, _atomic_output(dest) as raw_out:
        total = response.headers.get("Content-Length")
        sink = (
            gzip.GzipFile(filename="", mode="wb", fileobj=raw_out, mtime=0)
            if compress
            else nullcontext(raw_out)
        )
        bar = tqdm(
            total=int(total) if total and total.isdigit() else None,
            unit="B",
            unit_scale=True,
            unit_divisor=1024,
            desc=dest.name,
            disable=not progress,
            leave=False,
        )
        with sink as out, bar:
            try:
                while chunk := response.read(_CHUNK):
                    digest.update(chunk)
                    out.write(chunk)
                    bar.update(len(chunk))
            except (OSError, http.client.HTTPException) as err:
                raise DownloadError(url, err) from None
        actual = digest.hexdigest()
        if actual != sha256.lower():
            raise DataError(
                f"checksum mismatch for {url}: expected sha256 {sha256.lower()}, got {actual}; "
                f"nothing was written to {dest}"
            )
    return dest


class FileCheck(NamedTuple):
    """The state of one stored file: ``status`` is ``"ok"``, ``"missing"`` or ``"bad"``; for
    ``"bad"``, ``reason`` says why in a few words (truncated, corrupt gzip, wrong sha256)."""

    path: Path
    status: str
    reason: str = ""


class _Expected(NamedTuple):
    relpath: str
    sha256: str | None
    size: int | None  # of the stored bytes
    content_size: int | None  # of the decompressed content (gzip trailer)
    decompress: bool  # whether sha256 is of the decompressed content


def _expected(file: DatasetFile) -> list[_Expected]:
    if file.convert:
        return [
            _Expected(o.relpath, o.sha256, None, o.size, o.relpath.endswith(".gz"))
            for o in file.outputs
        ]
    if file.compress:
        return [_Expected(file.relpath, file.sha256, None, file.size, True)]
    return [_Expected(file.relpath, file.sha256, file.size, None, False)]


def _quick_problem(path: Path, exp: _Expected) -> str | None:
    """What a stat and the first and last bytes show to be wrong with ``path``, if anything."""
    size = path.stat().st_size
    if exp.size is not None and size != exp.size:
        return f"{size:,} bytes, expected {exp.size:,}" + (
            " (truncated)" if size < exp.size else ""
        )
    if not path.name.endswith(".gz"):
        return None
    with open(path, "rb") as fh:
        if fh.read(2) != b"\x1f\x8b":
            return "not a gzip file"
        if size < 18:  # 10-byte header + 8-byte trailer
            return read_error_reason(EOFError())
        if exp.content_size is not None:
            fh.seek(-4, os.SEEK_END)
            isize = int.from_bytes(fh.read(4), "little")  # content size mod 2**32
            if isize != exp.content_size % 2**32:
                return read_error_reason(EOFError())  # a cut file ends in compressed data
    return None


def _full_problem(path: Path, exp: _Expected) -> str | None:
    """Read all of ``path`` (decompressed where its checksum is of the content) and compare
    its SHA-256 with the catalogue's; what is wrong, if anything."""
    try:
        actual = file_sha256(path, decompress=exp.decompress)
    except (OSError, EOFError, zlib.error) as err:
        return read_error_reason(err)
    if exp.sha256 and actual != exp.sha256.lower():
        what = "decompressed content" if exp.decompress else "file"
        return f"sha256 of the {what} does not match the catalogue (damaged or another version)"
    return None


def check_file(
    file: DatasetFile, data_dir: str | Path | None = None, verify: bool = True
) -> list[FileCheck]:
    """Check the stored copy of ``file`` (for an archive: every file it converts to).

    ``verify=False`` is the quick check of ``attnkit data list``: it compares the size on disk
    (or, for gzip files, the content size in the gzip trailer) with the catalogue and looks at
    the gzip header, without reading the file; only a file that fails it is read in full, to
    confirm and to name the problem. ``verify=True`` also reads every file and compares its
    SHA-256 with the catalogue. ``.part`` files are never looked at.
    """
    root = resolve_data_dir(data_dir)
    checks: list[FileCheck] = []
    for exp in _expected(file):
        path = root / exp.relpath
        if not path.is_file():
            checks.append(FileCheck(path, "missing"))
            continue
        try:
            problem = _quick_problem(path, exp)
        except OSError as err:
            problem = read_error_reason(err)
        if verify or (problem and exp.decompress):
            problem = (problem if not exp.decompress else None) or _full_problem(path, exp)
        checks.append(FileCheck(path, "bad", problem) if problem else FileCheck(path, "ok"))
    return checks


def is_present(file: DatasetFile, data_dir: str | Path | None = None) -> bool:
    """Whether ``file`` (or, for an archive, everything it converts to) is stored and intact:
    :func:`check_file` with ``verify=True`` finds every file ``ok``."""
    return all(check.status == "ok" for check in check_file(file, data_dir, verify=True))


_IMDB_MEMBER = re.compile(r"^(?:\./)?aclImdb/(train|test)/(pos|neg)/(\d+)_(\d+)\.txt$")


def convert_imdb(archive: Path, outputs: list[Path]) -> None:
    """Convert ``aclImdb_v1.tar.gz`` into ``{split}.jsonl.gz`` files (split = file name stem).

    Each line is ``{"id", "rating", "label", "text"}`` with ``label`` 1 for ``pos`` and 0 for
    ``neg``; rows are sorted by label, then id. The review text is kept exactly as in the archive.
    """
    wanted = {path.name.split(".")[0]: path for path in outputs}
    rows: dict[str, list[tuple[int, int, int, str]]] = {split: [] for split in wanted}
    try:
        with tarfile.open(archive, "r|gz") as tar:
            for member in tar:
                match = _IMDB_MEMBER.match(member.name)
                if not match or not member.isfile() or match.group(1) not in rows:
                    continue
                split, polarity, doc_id, rating = match.groups()
                fh = tar.extractfile(member)
                if fh is None:
                    continue
                text = fh.read().decode("utf-8")
                label = 1 if polarity == "pos" else 0
                rows[split].append((label, int(doc_id), int(rating), text))
    except (tarfile.TarError, OSError, EOFError) as err:
        raise DataError(f"cannot read archive {archive}: {err}") from None
    for split, path in wanted.items():
        if not rows[split]:
            raise DataError(f"archive {archive} has no aclImdb/{split}/{{pos,neg}}/*.txt reviews")
        rows[split].sort(key=lambda row: (row[0], row[1]))
        with _atomic_output(path) as raw, gzip.GzipFile("", "wb", fileobj=raw, mtime=0) as gz:
            for label, doc_id, rating, text in rows[split]:
                record = {"id": doc_id, "rating": rating, "label": label, "text": text}
                gz.write((json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8"))


CONVERTERS: dict[str, Callable[[Path, list[Path]], None]] = {"imdb": convert_imdb}


def _refuse_odd_file(dest: Path) -> None:
    """A data file that exists must be a regular file (or a link to one): a device, FIFO,
    socket or folder in its place is never read or replaced (``attnkit.core.output_guard``)."""
    try:
        mode = os.stat(dest).st_mode
    except OSError:
        return  # missing (or a dangling link): the download decides
    if not stat.S_ISREG(mode):
        kind = "a folder" if stat.S_ISDIR(mode) else "not a regular file"
        raise DataError(f"cannot fetch into {dest}: it is {kind}; move it away first")


def _check_writable(dest: Path) -> None:
    """The output-path guard for a file about to be downloaded: its folder (created if
    missing, under a writable parent) and the file itself."""
    check_output(dest.parent, kind="folder", what="--data-dir")
    if dest.parent.is_dir():
        check_output(dest, what="data file")


def fetch(
    name: str,
    data_dir: str | Path | None = None,
    base_url: str | None = None,
    force: bool = False,
    progress: bool = True,
) -> list[Path]:
    """Download every file of dataset ``name`` into the data directory.

    Files already present with the right checksum are skipped unless ``force``; a damaged one
    (truncated, corrupt gzip, wrong checksum) is downloaded again, and leftover ``.part`` files
    of interrupted downloads of these files are removed (:func:`remove_stale_parts`). ``base_url``
    (default: the ``ATTNKIT_MIRROR`` environment variable) replaces the directory part of each
    upstream URL, so ``https://host/a/b/file.txt`` is fetched from ``{base_url}/file.txt``.
    Archives with a converter are downloaded, verified, converted and then deleted.

    Returns:
        The local paths of the dataset's files (converted outputs for archives).

    Raises:
        DataError: unknown dataset, network failure or checksum mismatch.
    """
    info = get_dataset(name)
    root = resolve_data_dir(data_dir)
    base = base_url or os.environ.get(ENV_MIRROR) or None
    paths: list[Path] = []
    for file in info.files:
        url = mirror_url(file.url, base) if base else file.url
        relpaths = [o.relpath for o in file.outputs] if file.convert else [file.relpath]
        targets = [root / rel for rel in relpaths]
        paths.extend(targets)
        for dest in dict.fromkeys([root / file.relpath, *targets]):
            _refuse_odd_file(dest)  # before anything reads it (a FIFO would block a read)
            remove_stale_parts(dest)
        if not force:
            checks = check_file(file, root, verify=True)
            if all(check.status == "ok" for check in checks):
                log.info("%s: %s already present, skipping", info.name, file.relpath)
                continue
            for check in checks:
                if check.status == "bad":
                    log.warning(
                        "%s is damaged (%s); downloading it again", check.path, check.reason
                    )
        log.info("%s: downloading %s", info.name, url)
        for dest in dict.fromkeys([root / file.relpath, *targets]):
            _check_writable(dest)
        if not file.convert:
            download(url, root / file.relpath, file.sha256, progress, compress=file.compress)
            continue
        archive = root / file.relpath
        try:
            download(url, archive, file.sha256, progress)
            CONVERTERS[file.convert](archive, targets)
        finally:
            archive.unlink(missing_ok=True)
        for out, path in zip(file.outputs, targets, strict=True):
            if out.sha256 and (actual := file_sha256(path, path.suffix == ".gz")) != out.sha256:
                path.unlink(missing_ok=True)
                raise DataError(
                    f"converted file {path} has sha256 {actual}, expected {out.sha256}; "
                    "the converter does not reproduce the catalogued file (please report this)"
                )
    return paths

"""Download catalogued datasets into the data directory, verifying every byte.

Each download is streamed to a temporary ``*.part`` file next to its destination, its SHA-256
is checked, and only then is it moved into place with :func:`os.replace`, so an interrupted or
corrupted download never leaves a file that looks valid.
"""

from __future__ import annotations

import gzip
import hashlib
import http.client
import json
import logging
import os
import re
import tarfile
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import BinaryIO

from attnkit import __version__
from attnkit.data.catalogue import DatasetFile, get_dataset
from attnkit.data.paths import DataError, resolve_data_dir

__all__ = ["DownloadError", "download", "fetch", "file_sha256", "is_present", "mirror_url"]

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
    """Yield a temporary binary file next to ``dest``; move it to ``dest`` only on success."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=f"{dest.name}.", suffix=".part")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; data files are meant to be shared
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)


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


def is_present(file: DatasetFile, data_dir: str | Path | None = None) -> bool:
    """Whether ``file`` (or, for an archive, everything it converts to) is stored and intact."""
    root = resolve_data_dir(data_dir)
    if file.convert:
        for out in file.outputs:
            path = root / out.relpath
            if not path.is_file():
                return False
            if out.sha256 and file_sha256(path, path.suffix == ".gz") != out.sha256:
                return False
        return True
    path = root / file.relpath
    return path.is_file() and file_sha256(path, decompress=file.compress) == file.sha256


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


def fetch(
    name: str,
    data_dir: str | Path | None = None,
    base_url: str | None = None,
    force: bool = False,
    progress: bool = True,
) -> list[Path]:
    """Download every file of dataset ``name`` into the data directory.

    Files already present with the right checksum are skipped unless ``force``. ``base_url``
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
        if not force and is_present(file, root):
            log.info("%s: %s already present, skipping", info.name, file.relpath)
            continue
        log.info("%s: downloading %s", info.name, url)
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

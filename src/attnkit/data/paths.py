"""Where datasets live on disk, and the errors raised when they are missing or malformed."""

from __future__ import annotations

import gzip
import os
import zlib
from collections.abc import Iterable, Mapping
from pathlib import Path

from attnkit.core.errors import DataError

__all__ = [
    "DataError",
    "DatasetNotFoundError",
    "locate",
    "read_error_reason",
    "resolve_data_dir",
]

ENV_DATA_DIR = "ATTNKIT_DATA"


class DatasetNotFoundError(DataError):
    """A catalogued dataset is not on disk.

    The message names the dataset, every path that was tried and how to get the data.
    """

    def __init__(self, name: str, looked_at: Iterable[str | Path], split: str | None = None):
        self.name = name
        self.split = split
        self.looked_at = [Path(p) for p in looked_at]
        what = f"dataset '{name}'" + (f" (split '{split}')" if split else "")
        tried = ", ".join(str(p) for p in self.looked_at) or "nowhere"
        super().__init__(
            f"{what} not found; looked at: {tried}; get it with `attnkit data fetch {name}`, "
            f"or point --data-dir / {ENV_DATA_DIR} at a folder that has it"
        )


def read_error_reason(err: BaseException) -> str:
    """Say in a few words why a data file could not be read: a truncated or corrupt gzip file
    (``EOFError``, ``gzip.BadGzipFile``, ``zlib.error``) or an OS error (without its traceback)."""
    if isinstance(err, EOFError):
        return "truncated gzip file (the compressed data ends early)"
    if isinstance(err, gzip.BadGzipFile):
        return f"not a valid gzip file ({err})"
    if isinstance(err, zlib.error):
        return f"corrupt gzip data ({err})"
    if isinstance(err, OSError) and err.strerror:
        return err.strerror
    return str(err) or type(err).__name__


def resolve_data_dir(data_dir: str | Path | None = None) -> Path:
    """Return the data directory to use.

    Order: the explicit ``data_dir`` argument, then the ``ATTNKIT_DATA`` environment variable,
    then ``$XDG_CACHE_HOME/attnkit`` (``~/.cache/attnkit`` when ``XDG_CACHE_HOME`` is unset).
    ``~`` is expanded; the directory is not created.
    """
    if data_dir is not None and str(data_dir) != "":
        return Path(data_dir).expanduser()
    env = os.environ.get(ENV_DATA_DIR)
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    cache = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return cache / "attnkit"


def locate(
    name: str,
    splits: Mapping[str, str],
    split: str,
    data_dir: str | Path | None = None,
    lang: str | None = None,
) -> Path:
    """The local file of ``split`` of dataset ``name``, whose files lie under the data
    directory as ``splits`` says (split -> relative path; a ``{lang}`` placeholder for
    parallel corpora, filled by ``lang``). A compressed file (``.gz``) is also accepted
    uncompressed (e.g. an upstream ``ratings_train.txt`` placed by hand).

    Raises:
        DataError: no such split, or ``lang`` missing for a parallel corpus.
        DatasetNotFoundError: no candidate file exists; lists every path tried.
    """
    if split not in splits:
        raise DataError(f"dataset '{name}' has no split '{split}'; splits: {', '.join(splits)}")
    rel = splits[split]
    if "{lang}" in rel:
        if not lang:
            raise DataError(f"dataset '{name}' is parallel; pass lang (e.g. 'en' or 'de')")
        rel = rel.format(lang=lang)
    root = resolve_data_dir(data_dir)
    candidates = [root / rel]
    if rel.endswith(".gz"):
        candidates.append(root / rel[: -len(".gz")])
    for path in candidates:
        if path.is_file():
            return path
    raise DatasetNotFoundError(name, candidates, split=split)

"""Readers for text classification data: the catalogued NSMC and IMDB, and user CSV/TSV/JSONL.

Every reader returns :class:`Examples`, a list of :class:`Example` that also records how many
rows were dropped (empty texts). Problems with the input raise :class:`DataError` with a
one-line message naming the file, and the line when there is one.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import os
import random
import re
import zlib
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, NamedTuple, TypeVar

from attnkit.data.paths import DataError, DatasetNotFoundError, locate, read_error_reason

__all__ = [
    "FIXED_SPLITS",
    "IMDB_SPLITS",
    "NSMC_SPLITS",
    "Example",
    "Examples",
    "fixed_split",
    "load_text_classification",
    "read_imdb",
    "read_nsmc",
    "read_table",
    "read_text_file",
    "read_texts",
    "read_unlabeled",
    "train_val_split",
]

T = TypeVar("T")

# where the catalogued files lie under the data directory (attnkit.data.catalogue)
NSMC_SPLITS = {
    "train": "nsmc/ratings_train.txt.gz",
    "test": "nsmc/ratings_test.txt.gz",
    "unlabeled": "nsmc/unlabeled.txt.gz",
}
IMDB_SPLITS = {
    "train": "imdb/train.jsonl.gz",
    "test": "imdb/test.jsonl.gz",
    "unlabeled": "imdb/unsup.jsonl.gz",
}
_LAYOUTS = {"nsmc": NSMC_SPLITS, "imdb": IMDB_SPLITS}


class Example(NamedTuple):
    """One text classification example. ``label`` is ``None`` for unlabelled text."""

    text: str
    label: str | int | None = None


class Examples(list[Example]):
    """A list of :class:`Example` that remembers where it came from.

    Attributes:
        source: the file that was read.
        dropped: rows skipped because their text was empty.
    """

    def __init__(self, items: Sequence[Example] = (), source: str = "", dropped: int = 0):
        super().__init__(items)
        self.source = source
        self.dropped = dropped


CSV_FIELD_LIMIT = 2**31 - 1  # csv's default (131,072 characters) is too small for long texts


def allow_long_csv_fields() -> None:
    """Raise :func:`csv.field_size_limit` (process-wide) so that long fields are read: to
    ``CSV_FIELD_LIMIT``, or the largest value this platform's C ``long`` takes."""
    limit = CSV_FIELD_LIMIT
    while csv.field_size_limit() < limit:
        try:
            csv.field_size_limit(limit)
        except OverflowError:
            limit //= 2


def _iter_lines(path: Path) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, line)`` (line ending kept; lines end at ``\n`` only).

    A gzip file (``.gz``) is decompressed and a UTF-8 byte-order mark is removed. A file with
    no ``\n`` at all but ``\r`` in it has classic Mac (CR-only) line endings: it is split at
    ``\r``, and each line ends in ``\n``. Bytes that are not UTF-8, and a truncated or corrupt
    gzip file, raise :class:`DataError` naming the file (and the line, for bad bytes).
    """
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8-sig", newline="\n") as fh:
            first = fh.readline()
            if "\r" in first and not first.endswith("\n"):  # the whole file, CR-only endings
                yield from enumerate(io.StringIO(first, newline=None), start=1)
                return
            if first:
                yield 1, first
            yield from enumerate(fh, start=2)
    except UnicodeDecodeError:
        raise _decode_error(path, opener) from None
    except (OSError, EOFError, zlib.error) as err:
        raise DataError(f"cannot read {path}: {read_error_reason(err)}") from None


def _decode_error(path: Path, opener: Callable[..., IO[bytes]]) -> DataError:
    """Find the first line of ``path`` that is not UTF-8 and describe it."""
    try:
        with opener(path, "rb") as fh:
            for lineno, raw in enumerate(fh, start=1):
                try:
                    raw.decode("utf-8")
                except UnicodeDecodeError as err:
                    return DataError(
                        f"{path}: line {lineno}: not valid UTF-8 ({err.reason} at byte "
                        f"{err.start} of the line); save the file as UTF-8"
                    )
    except (OSError, EOFError, zlib.error) as err:  # corrupt gzip data that decoded to junk
        return DataError(f"cannot read {path}: {read_error_reason(err)}")
    return DataError(f"{path}: not valid UTF-8; save the file as UTF-8")


def read_nsmc(split: str, data_dir: str | Path | None = None) -> Examples:
    """Read an NSMC split (``train`` or ``test``) with integer labels 0/1.

    Accepts ``ratings_{split}.txt.gz`` or the upstream plain ``.txt``. Fields are split on tabs
    with no quote processing, like upstream's ``pd.read_csv(..., sep="\\t", quoting=3)``, so
    documents with ``"`` keep their CSV quoting. Empty documents (5 in train, 3 in test) are
    dropped and counted in ``Examples.dropped``.
    """
    path = locate("nsmc", NSMC_SPLITS, split, data_dir)
    lines = _iter_lines(path)
    first = next(lines, None)
    if first is None or first[1].rstrip("\r\n") != "id\tdocument\tlabel":
        raise DataError(f"{path}: expected the header 'id<TAB>document<TAB>label'")
    examples: list[Example] = []
    dropped = 0
    for lineno, line in lines:
        fields = line.rstrip("\r\n").split("\t")
        if len(fields) != 3:
            raise DataError(f"{path}: line {lineno}: expected 3 tab-separated fields")
        _, document, label = fields
        if label not in ("0", "1"):
            raise DataError(f"{path}: line {lineno}: label must be 0 or 1, got '{label}'")
        if not document.strip():
            dropped += 1
            continue
        examples.append(Example(document, int(label)))
    return Examples(examples, source=str(path), dropped=dropped)


_BR = re.compile(r"<br\s*/?>", re.IGNORECASE)


def read_imdb(split: str, data_dir: str | Path | None = None, keep_html: bool = False) -> Examples:
    """Read an IMDB split (``train`` or ``test``) with integer labels (0 negative, 1 positive).

    The HTML line breaks ``<br />`` in the reviews become newlines unless ``keep_html``.
    """
    path = locate("imdb", IMDB_SPLITS, split, data_dir)
    examples: list[Example] = []
    dropped = 0
    for lineno, line in _iter_lines(path):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            text, label = row["text"], int(row["label"])
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
            raise DataError(f"{path}: line {lineno}: not an IMDB record ({err})") from None
        if not keep_html:
            text = _BR.sub("\n", text)
        if not text.strip():
            dropped += 1
            continue
        examples.append(Example(text, label))
    return Examples(examples, source=str(path), dropped=dropped)


_FORMATS = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl"}


def _infer_format(path: Path) -> str:
    name = path.name.lower()
    if name.endswith(".gz"):
        name = name[: -len(".gz")]
    suffix = os.path.splitext(name)[1]
    if suffix in _FORMATS:
        return _FORMATS[suffix]
    raise DataError(
        f"{path}: cannot tell the format from the extension '{suffix}'; use .csv, .tsv or "
        ".jsonl (optionally .gz), or pass fmt='csv' | 'tsv' | 'jsonl'"
    )


def _rows(path: Path, fmt: str) -> Iterator[tuple[int, list[str] | dict]]:
    """Yield ``(line_number, row)``: a list of fields (CSV/TSV) or a dict (JSONL)."""
    lines = _iter_lines(path)
    if fmt == "jsonl":
        for lineno, line in lines:
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise DataError(f"{path}: line {lineno}: invalid JSON ({err.msg})") from None
            if not isinstance(row, dict):
                raise DataError(f"{path}: line {lineno}: expected a JSON object per line")
            yield lineno, row
        return
    current = [0]

    def tracked() -> Iterator[str]:
        for lineno, line in lines:
            current[0] = lineno
            yield line

    allow_long_csv_fields()
    if fmt == "tsv":
        reader = csv.reader(tracked(), delimiter="\t", quoting=csv.QUOTE_NONE)
    else:
        reader = csv.reader(tracked())
    try:
        for fields in reader:
            if fields:
                yield current[0], fields
    except csv.Error as err:
        raise DataError(f"{path}: line {current[0]}: {err}") from None


def read_table(
    path: str | Path,
    text_column: str = "text",
    label_column: str | None = "label",
    fmt: str | None = None,
) -> Examples:
    """Read a user CSV, TSV or JSON Lines file (optionally gzipped) into :class:`Examples`.

    CSV uses standard quoting; TSV has no quote processing (like NSMC). The first row of a
    CSV/TSV is the header. Labels stay strings, stripped of surrounding whitespace
    (``"2   "`` -> ``"2"``); ``label_column=None`` reads unlabelled text. Rows with empty text
    are dropped and counted in ``Examples.dropped``.

    Raises:
        DataError: unknown format, empty file, missing column, undecodable bytes (with the line
            number), a row with the wrong number of fields, or an empty label.
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise DataError(f"file not found: {path}")
    fmt = (fmt or _infer_format(path)).lower()
    if fmt not in ("csv", "tsv", "jsonl"):
        raise DataError(f"unknown format '{fmt}'; use 'csv', 'tsv' or 'jsonl'")
    rows = _rows(path, fmt)
    first = next(rows, None)
    if first is None:
        raise DataError(f"{path} is empty")
    wanted = [text_column] + ([label_column] if label_column is not None else [])
    if fmt == "jsonl":
        columns = list(first[1])
        body: Iterator[tuple[int, list[str] | dict]] = _chain(first, rows)
    else:
        columns = [str(c).strip() for c in first[1]]
        body = rows
    for column in wanted:
        if column not in columns:
            raise DataError(
                f"{path}: no column '{column}'; columns are: {', '.join(map(str, columns))}"
            )
    get = _getter(path, fmt, columns)
    examples: list[Example] = []
    dropped = 0
    for lineno, row in body:
        text = get(row, text_column, lineno)
        label: str | None = None
        if label_column is not None:
            label = get(row, label_column, lineno).strip()
            if not label:
                raise DataError(f"{path}: line {lineno}: empty label in column '{label_column}'")
        if not text.strip():
            dropped += 1
            continue
        examples.append(Example(text, label))
    if not examples:
        what = "has a header but no rows" if not dropped else "has only empty texts"
        raise DataError(f"{path} {what}")
    return Examples(examples, source=str(path), dropped=dropped)


def _chain(first: T, rest: Iterator[T]) -> Iterator[T]:
    yield first
    yield from rest


def _getter(path: Path, fmt: str, columns: list[str]) -> Callable[[object, str, int], str]:
    """Return ``get(row, column, lineno) -> str`` for the format."""
    if fmt == "jsonl":

        def get_json(row: object, column: str, lineno: int) -> str:
            assert isinstance(row, dict)
            if column not in row:
                raise DataError(f"{path}: line {lineno}: no key '{column}'")
            value = row[column]
            if isinstance(value, (dict, list)):  # str() would make "{'a': 0}" a label
                kind = "object" if isinstance(value, dict) else "array"
                raise DataError(
                    f"{path}: line {lineno}: column '{column}' holds a JSON {kind}, not a "
                    "string or a number"
                )
            return "" if value is None else str(value)

        return get_json
    index = {name: i for i, name in enumerate(columns)}

    def get_field(row: object, column: str, lineno: int) -> str:
        assert isinstance(row, list)
        if len(row) != len(columns):
            raise DataError(
                f"{path}: line {lineno}: {len(row)} fields, but the header has {len(columns)}"
            )
        return row[index[column]]

    return get_field


def read_unlabeled(name: str, data_dir: str | Path | None = None) -> list[str]:
    """Every review of a catalogued dataset that is safe to pretrain on (never the test set).

    nsmc: ``nsmc/unlabeled.txt.gz``, 639,270 raw reviews one per line (it already holds the
    training reviews, and none of the test set). imdb: the 25,000 training reviews and the
    50,000 ``unlabeled`` ones (``imdb/unsup.jsonl.gz``); labels are ignored.
    """
    key = name.strip().lower()
    if key not in _READERS:
        raise DataError(f"no unlabelled text for dataset '{name}'; use nsmc, imdb or a file")
    try:
        path = locate(key, _LAYOUTS[key], "unlabeled", data_dir)
    except DatasetNotFoundError as err:
        tried = ", ".join(str(p) for p in err.looked_at)
        raise DataError(
            f"unlabelled {key} reviews not found; looked at: {tried}; `attnkit data fetch` "
            "does not download them: place the file there, or pretrain on your own text "
            "(data.name: file, data.train: corpus.txt)"
        ) from None
    if key == "nsmc":
        return [line.strip() for _, line in _iter_lines(path) if line.strip()]
    texts = [ex.text for ex in read_imdb("train", data_dir)]
    for lineno, line in _iter_lines(path):
        if not line.strip():
            continue
        try:
            text = json.loads(line)["text"]
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            raise DataError(f"{path}: line {lineno}: not an IMDB record ({err})") from None
        text = _BR.sub("\n", text)
        if text.strip():
            texts.append(text)
    return texts


def read_texts(path: str | Path, text_column: str = "text") -> list[str]:
    """A user corpus: a ``.txt`` (optionally ``.gz``) file with one text per line, or a
    CSV / TSV / JSON Lines file whose ``text_column`` is read (other columns ignored)."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise DataError(f"file not found: {path}")
    name = path.name.lower().removesuffix(".gz")
    if name.endswith(".txt"):
        return [line.strip() for _, line in _iter_lines(path) if line.strip()]
    return [ex.text for ex in read_table(path, text_column=text_column, label_column=None)]


def read_text_file(path: str | Path, what: str) -> str:
    """The whole of a UTF-8 text file, as one text (``.gz`` decompressed, a BOM dropped, line
    breaks kept as they are); ``what`` names it in errors (e.g. ``data.train``)."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise DataError(f"{what}: {path} does not exist")
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8-sig", newline="") as fh:
            return fh.read()
    except UnicodeDecodeError as exc:
        raise DataError(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except (OSError, EOFError, zlib.error) as exc:
        raise DataError(f"cannot read {path}: {exc}") from None


_READERS: dict[str, Callable[[str, str | Path | None], Examples]] = {
    "nsmc": read_nsmc,
    "imdb": read_imdb,
}


def load_text_classification(
    name_or_path: str | os.PathLike[str] | Mapping[str, str],
    split: str,
    data_dir: str | Path | None = None,
    text_column: str = "text",
    label_column: str | None = "label",
    fmt: str | None = None,
) -> Examples:
    """Load one split of a text classification dataset.

    ``name_or_path`` is one of:

    * a catalogued name (``"nsmc"``, ``"imdb"``): read from the data directory;
    * a mapping from split to file, as written in a config (``{"train": "a.csv", ...}``);
    * a path, which may contain ``{split}`` (``"data/{split}.tsv"``); a path without it is read
      whatever the split.

    Raises:
        DataError: unknown name or missing file, or any problem reading it.
    """
    if isinstance(name_or_path, Mapping):
        if split not in name_or_path:
            raise DataError(f"no file for split '{split}'; splits given: {', '.join(name_or_path)}")
        name_or_path = name_or_path[split]
    spec = os.fspath(name_or_path)
    reader = _READERS.get(spec.lower())
    if reader is not None:
        return reader(split, data_dir)
    if "{split}" in spec:
        spec = spec.replace("{split}", split)
    path = Path(spec).expanduser()
    if not path.is_file():
        known = ", ".join(_READERS)
        raise DataError(
            f"'{spec}' is neither a text classification dataset ({known}) nor an existing file"
        )
    return read_table(path, text_column=text_column, label_column=label_column, fmt=fmt)


def train_val_split(
    examples: Sequence[T],
    val_fraction: float,
    seed: int = 0,
    how: str = "random",
    key: Callable[[T], Hashable] | None = None,
) -> tuple[list[T], list[T]]:
    """Split ``examples`` into (train, validation) deterministically for a given ``seed``.

    ``round(len * val_fraction)`` examples (at least 1, leaving at least 1 for training) go to
    validation. Both parts keep the original order.

    ``how="last"`` takes the last ``val_fraction`` of each ``key`` group (e.g. of each label)
    in file order instead of a random sample, so that neighbouring rows stay on one side.
    That matters when neighbours are related: IMDB's training reviews are grouped by movie,
    and a random validation sample shares movies (titles, names) with the training data and
    overestimates the accuracy on the test set, whose movies are all different.
    """
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must be between 0 and 1, got {val_fraction}")
    n = len(examples)
    if n < 2:
        raise DataError(f"cannot split {n} example(s) into train and validation")
    if how == "last":
        groups: dict[Hashable, list[int]] = {}
        for i, ex in enumerate(examples):
            groups.setdefault(key(ex) if key else None, []).append(i)
        val_set: set[int] = set()
        for idx in groups.values():
            val_set.update(idx[len(idx) - round(len(idx) * val_fraction) :])
        if not val_set:  # groups too small for a share: the last example
            val_set = {n - 1}
        elif len(val_set) == n:  # everything rounded up into validation: keep one to train on
            val_set.discard(0)
        val_idx = sorted(val_set)
        train_idx = [i for i in range(n) if i not in val_set]
    elif how == "random":
        n_val = min(max(1, round(n * val_fraction)), n - 1)
        order = list(range(n))
        random.Random(seed).shuffle(order)
        val_idx = sorted(order[:n_val])
        train_idx = sorted(order[n_val:])
    else:
        raise ValueError(f"how must be random or last, got {how!r}")
    return [examples[i] for i in train_idx], [examples[i] for i in val_idx]


FIXED_SPLITS: tuple[tuple[str, float], ...] = (("train", 0.8), ("validation", 0.1), ("test", 0.1))


def fixed_split(
    keys: Iterable[str], fractions: Sequence[tuple[str, float]] = FIXED_SPLITS
) -> dict[str, str]:
    """Assign every distinct key a split name, the same on every machine, run and seed.

    Used to cut a dataset that comes as one file (e.g. a dev set) into fixed train /
    validation / test parts. The distinct keys are ordered by the SHA-256 of their UTF-8 bytes
    (then by the key itself) and cut in that order: with ``n`` keys, split ``i`` gets the keys
    from ``round(n * F(i-1))`` to ``round(n * F(i))``, ``F`` being the running sum of
    ``fractions`` (the last split takes the rest). Neither random seeds nor Python's hash
    randomisation play any part. Keys that belong together (the questions of one article, the
    hypotheses of one premise) should share a key, so that they land in the same split.

    Returns:
        ``{key: split name}`` for every distinct key.
    """
    if not fractions or any(f < 0 for _, f in fractions):
        raise ValueError(f"fractions must be non-negative (name, fraction) pairs: {fractions}")
    total = sum(f for _, f in fractions)
    if abs(total - 1.0) > 1e-9:
        raise ValueError(f"fractions must sum to 1, got {total}")
    ordered = sorted(set(keys), key=lambda k: (hashlib.sha256(k.encode("utf-8")).digest(), k))
    n = len(ordered)
    assigned: dict[str, str] = {}
    start, running = 0, 0.0
    for i, (name, fraction) in enumerate(fractions):
        running += fraction
        end = n if i == len(fractions) - 1 else round(n * running)
        for key in ordered[start:end]:
            assigned[key] = name
        start = end
    return assigned

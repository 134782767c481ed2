"""In-memory tables as training data: ``attnkit.train(recipe, data=...)``.

``data`` is one table (the training split; validation is held out of it as for a file, by
``data.val_fraction`` / ``data.val_split``) or a dict of tables by split (``{"train": ...,
"validation": ..., "test": ...}``; a ``datasets.DatasetDict`` is one). A table is a pandas
``DataFrame``, a Hugging Face ``datasets.Dataset`` or a list of dicts (one per row).
attnkit imports neither pandas nor datasets: it knows them by their methods.

A table is read with the rules of the user's files (``attnkit.data.user_files``) for the
kind of examples the task reads:

* ``labelled``: the columns ``data.text_column`` and ``data.label_column``;
* ``pairs``: the same and ``data.pair_column``;
* ``parallel``: the columns named by ``data.src_lang`` and ``data.tgt_lang`` (as the
  suffixes of aligned files), or a ``translation`` column of ``{lang: text}`` dicts (the
  Hugging Face translation datasets);
* ``tagged``: ``tokens`` (or ``words``) and ``tags`` (or ``ner_tags``), a list per row;
  tags are names (``O``, ``B-PER``, ...) or, in a ``datasets.Dataset``, the ids of a
  ``ClassLabel`` feature, which names them.

A ``ClassLabel`` label column gives its names as the labels too. Each split is validated
(a missing column names the columns there are; a list where text is expected, an empty
table, an empty label are one-line ``DataError``s naming the row), then written as the file
the kind's reader already reads (JSON Lines, a TSV, a CoNLL-style file) into a staging
folder; the recipe then reads it as ``data.name: file``. Training copies the files into
the run (``RUN/data/``, ``copy_into``) and records what it was trained on in config.json
(``RECORD_KEY``: source, per split the rows and the SHA-256 fingerprint of the file), with
run-relative paths that reading a run resolves inside it (``resolve_in_run``), wherever
the run folder is.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from attnkit.core.output_guard import staged_folder
from attnkit.data.ner_readers import to_iob2
from attnkit.data.paths import DataError

__all__ = [
    "ACCEPTED",
    "DATA_FOLDER",
    "PLACEHOLDER",
    "RECORD_KEY",
    "SPLITS",
    "TABLE_KINDS",
    "RenderedTables",
    "StagedTables",
    "check_same_tables",
    "file_splits",
    "render_tables",
    "resolve_in_run",
    "stage_tables",
]

SPLITS = ("train", "validation", "test")
# the kinds of examples (attnkit.data.kinds) a table can be read as
TABLE_KINDS = ("labelled", "pairs", "parallel", "tagged")
ACCEPTED = (
    "a pandas DataFrame, a datasets.Dataset or DatasetDict, a list of dicts, a file path, "
    "or a dict of them by split (train, validation, test)"
)
DATA_FOLDER = "data"  # RUN/data/: the tables a run was trained on
RECORD_KEY = "trained_on"  # config.json: what the run was trained on
PLACEHOLDER = "(data in memory)"  # data.train until the tables are staged
_FILE_NAMES = {"labelled": "{}.jsonl", "pairs": "{}.jsonl", "parallel": "{}.tsv"}
_TOKEN_COLUMNS = ("tokens", "words")
_TAG_COLUMNS = ("tags", "ner_tags")


# ----------------------------------------------------------------------------- tables
@dataclass
class _Table:
    """One table as rows of plain dicts (str keys), its columns and the class names of its
    ``ClassLabel`` columns (datasets)."""

    rows: list[dict[str, Any]]
    columns: list[str]
    source: str
    where: str  # how messages name it: data, data['train']
    names: dict[str, list[str]] = field(default_factory=dict)


def _type_name(obj: Any) -> str:
    return type(obj).__name__


def _is_dataframe(obj: Any) -> bool:
    return all(hasattr(obj, a) for a in ("to_dict", "columns", "iloc"))


def _is_dataset(obj: Any) -> bool:
    return all(hasattr(obj, a) for a in ("features", "column_names", "__len__", "__iter__"))


def _class_names(feature: Any) -> list[str] | None:
    """The names of a ``ClassLabel`` feature, or of one inside a ``Sequence`` / list."""
    if isinstance(feature, (list, tuple)) and len(feature) == 1:
        return _class_names(feature[0])
    names = getattr(feature, "names", None)
    if "ClassLabel" in _type_name(feature) and isinstance(names, list):
        return [str(n) for n in names]
    inner = getattr(feature, "feature", None)
    return _class_names(inner) if inner is not None else None


def _table(obj: Any, where: str) -> _Table:
    """``obj`` (a DataFrame, a Dataset or a list of dicts) as a ``_Table``."""
    if _is_dataframe(obj):
        columns = [str(c) for c in obj.columns]
        twice = next((c for i, c in enumerate(columns) if c in columns[:i]), None)
        if twice is not None:  # (to_dict would keep one of them, silently)
            raise DataError(f"{where} has two columns named '{twice}': rename or drop one")
        rows = [{str(k): v for k, v in r.items()} for r in obj.to_dict("records")]
        return _Table(rows, columns, "DataFrame", where)
    if _is_dataset(obj):
        rows = obj.to_list() if hasattr(obj, "to_list") else [dict(r) for r in obj]
        features = getattr(obj, "features", None) or {}
        names = {
            str(c): n for c in obj.column_names if (n := _class_names(features.get(c))) is not None
        }
        return _Table(rows, [str(c) for c in obj.column_names], "datasets.Dataset", where, names)
    if isinstance(obj, (list, tuple)):
        columns: dict[str, None] = {}
        rows = []
        for i, row in enumerate(obj):
            if not isinstance(row, Mapping):
                raise DataError(
                    f"{where} row {i} is a {_type_name(row)}, not a dict (a list of dicts is "
                    "one table, one dict per row)"
                )
            rows.append({str(k): v for k, v in row.items()})
            columns.update(dict.fromkeys(rows[-1]))
        return _Table(rows, list(columns), "list", where)
    raise DataError(f"data= got a {_type_name(obj)}; give {ACCEPTED}")


def _check_splits(data: Mapping) -> None:
    if not data:
        raise DataError(f"data= is an empty dict; give {ACCEPTED}")
    for key in data:
        if key not in SPLITS:
            kept = ", ".join(f"{s!r}: data[{s!r}]" for s in SPLITS if s in data)
            raise DataError(
                f"data= has a split {str(key)[:60]!r}; a dict of splits has the keys "
                f"{', '.join(SPLITS)}: pass only those (data={{{kept}}})"
                if kept
                else f"data= has a split {str(key)[:60]!r}; a dict of splits has the keys "
                f"{', '.join(SPLITS)} (a table of columns: pass a DataFrame or a list of dicts)"
            )
    if "train" not in data:
        raise DataError(f"data= has no 'train' split (it has {', '.join(map(str, data))})")


def _is_path(value: Any) -> bool:
    return isinstance(value, (str, os.PathLike))


def file_splits(data: Any) -> dict[str, str] | None:
    """``data`` as the user's files by split when it is a file path (the training file) or
    a dict of them by split; None when it is anything else (tables, say)."""
    if _is_path(data):
        return {"train": os.fspath(data)}
    if isinstance(data, Mapping) and data and all(_is_path(v) for v in data.values()):
        _check_splits(data)
        return {s: os.fspath(data[s]) for s in SPLITS if s in data}
    return None


def _tables(data: Any) -> tuple[str, dict[str, _Table]]:
    """(what ``data`` is, its tables by split)."""
    if isinstance(data, Mapping) and not _is_dataframe(data):
        _check_splits(data)
        tables = {s: _table(data[s], f"data[{s!r}]") for s in SPLITS if s in data}
        kind = (
            "datasets.DatasetDict"
            if _type_name(data) == "DatasetDict"
            else "dict of " + " / ".join(dict.fromkeys(t.source for t in tables.values()))
        )
        return kind, tables
    table = _table(data, "data")
    return table.source, {"train": table}


# ----------------------------------------------------------------------------- cells
def _plain(value: Any) -> Any:
    """A cell as a plain Python value: numpy scalars unboxed, arrays as lists, NaN / NA /
    NaT as None."""
    if value is None:
        return None
    if _type_name(value) in ("NAType", "NaTType"):
        return None
    if hasattr(value, "dtype") and hasattr(value, "tolist"):  # numpy scalars and arrays
        value = value.tolist()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _cell(t: _Table, i: int, row: dict[str, Any], column: str) -> Any:
    if column not in row:
        keys = ", ".join(row) or "none"
        raise DataError(f"{t.where} row {i} has no column '{column}' (its keys: {keys})")
    return _plain(row[column])


def _text(t: _Table, i: int, row: dict[str, Any], column: str) -> str:
    value = _cell(t, i, row, column)
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return str(value)
    raise DataError(f"{t.where} row {i}: column '{column}' holds a {_type_name(value)}, not text")


def _label(t: _Table, i: int, row: dict[str, Any], column: str) -> str:
    value = _cell(t, i, row, column)
    names = t.names.get(column)
    if names is not None and isinstance(value, int) and not isinstance(value, bool):
        if not 0 <= value < len(names):
            raise DataError(
                f"{t.where} row {i}: label {value} in column '{column}' is not a class of its "
                f"ClassLabel (0 to {len(names) - 1}; -1 marks an unlabelled row)"
            )
        return names[value]
    if value is not None and not isinstance(value, (str, int, float)):
        raise DataError(
            f"{t.where} row {i}: column '{column}' holds a {_type_name(value)}, not a label"
        )
    label = "" if value is None else str(value).strip()
    if not label:
        raise DataError(f"{t.where} row {i}: empty label in column '{column}'")
    return label


def _need(t: _Table, columns: list[tuple[str, str]]) -> None:
    """Each (column, setting) is a column of ``t``; else say which columns there are."""
    if not t.rows:
        raise DataError(f"{t.where} is empty (no rows)")
    for column, setting in columns:
        if column not in t.columns:
            raise DataError(
                f"{t.where}: no column '{column}' ({setting}); columns are: "
                f"{', '.join(t.columns) or 'none'}"
            )


# ----------------------------------------------------------------------------- kinds
def _labelled(t: _Table, data: Any, pairs: bool) -> str:
    texts = [data.text_column, *([data.pair_column] if pairs else [])]
    settings = ["data.text_column", *(["data.pair_column"] if pairs else [])]
    _need(t, [*zip(texts, settings, strict=True), (data.label_column, "data.label_column")])
    lines, kept = [], 0
    for i, row in enumerate(t.rows):
        record = {c: _text(t, i, row, c) for c in texts}
        record[data.label_column] = _label(t, i, row, data.label_column)
        kept += all(v.strip() for k, v in record.items() if k in texts)
        lines.append(json.dumps(record, ensure_ascii=False) + "\n")
    if not kept:
        raise DataError(f"{t.where} has only empty texts")
    return "".join(lines)


def _one_line(t: _Table, i: int, column: str, text: str) -> str:
    if any(c in text for c in "\t\r\n"):
        raise DataError(
            f"{t.where} row {i}: column '{column}' holds a tab or line break, which parallel "
            "text cannot (one pair per line): replace them with spaces"
        )
    return text


def _parallel(t: _Table, data: Any) -> str:
    src, tgt = data.src_lang, data.tgt_lang
    if not t.rows:
        raise DataError(f"{t.where} is empty (no rows)")
    nested = not (src in t.columns and tgt in t.columns) and "translation" in t.columns
    if not nested:
        _need(t, [(src, "data.src_lang"), (tgt, "data.tgt_lang")])
    lines = []
    for i, row in enumerate(t.rows):
        if nested:
            pair = _cell(t, i, row, "translation")
            if not isinstance(pair, Mapping):
                raise DataError(
                    f"{t.where} row {i}: column 'translation' holds a {_type_name(pair)}, not "
                    f"a dict of {src} and {tgt} texts"
                )
            for lang, setting in ((src, "data.src_lang"), (tgt, "data.tgt_lang")):
                if lang not in pair:
                    raise DataError(
                        f"{t.where} row {i}: column 'translation' has no '{lang}' ({setting}); "
                        f"it has: {', '.join(map(str, pair)) or 'nothing'}"
                    )
            cells = {f"translation.{k}": pair[k] for k in (src, tgt)}
            texts = [_text(t, i, cells, f"translation.{k}") for k in (src, tgt)]
        else:
            texts = [_text(t, i, row, c) for c in (src, tgt)]
        names = [f"translation.{src}", f"translation.{tgt}"] if nested else [src, tgt]
        s, g = (_one_line(t, i, n, x).strip() for n, x in zip(names, texts, strict=True))
        lines.append(f"{s}\t{g}\n")
    if not any(line.strip() for line in lines):
        raise DataError(f"{t.where} has only empty texts")
    return "".join(lines)


def _tagged(t: _Table, data: Any) -> str:
    if not t.rows:
        raise DataError(f"{t.where} is empty (no rows)")
    tok = next((c for c in _TOKEN_COLUMNS if c in t.columns), _TOKEN_COLUMNS[0])
    tag = next((c for c in _TAG_COLUMNS if c in t.columns), _TAG_COLUMNS[0])
    _need(t, [(tok, "or 'words'"), (tag, "or 'ner_tags'")])
    names = t.names.get(tag)
    blocks = []
    for i, row in enumerate(t.rows):
        tokens, tags = _cell(t, i, row, tok), _cell(t, i, row, tag)
        for column, value in ((tok, tokens), (tag, tags)):
            if not isinstance(value, (list, tuple)):
                raise DataError(
                    f"{t.where} row {i}: column '{column}' holds a {_type_name(value)}, not a "
                    "list (one entry per token)"
                )
        if len(tokens) != len(tags):
            raise DataError(f"{t.where} row {i}: {len(tokens)} tokens but {len(tags)} tags")
        if not tokens:
            continue  # (a file cannot hold an empty sentence either)
        words = [_token(t, i, tok, _plain(w)) for w in tokens]
        labels = [_tag_name(t, i, tag, _plain(x), names) for x in tags]
        try:
            to_iob2(labels)
        except ValueError as exc:
            raise DataError(f"{t.where} row {i}: {exc} (column '{tag}')") from None
        blocks.append("".join(f"{w}\t{x}\n" for w, x in zip(words, labels, strict=True)))
    if not blocks:
        raise DataError(f"{t.where} has no tokens (every row's '{tok}' list is empty)")
    return "\n".join(blocks)


def _token(t: _Table, i: int, column: str, value: Any) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise DataError(
            f"{t.where} row {i}: column '{column}' holds a {_type_name(value)}, not a token"
        )
    if not value.strip() or any(c in value for c in "\t\r\n"):
        raise DataError(
            f"{t.where} row {i}: token {value[:30]!r} in column '{column}' is empty or holds "
            "a tab or line break"
        )
    return value


def _tag_name(t: _Table, i: int, column: str, value: Any, names: list[str] | None) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        if names is None:
            raise DataError(
                f"{t.where} row {i}: column '{column}' holds tag ids ({value}); give tag names "
                "(O, B-PER, ...) or a datasets.Dataset whose ClassLabel feature names them"
            )
        if not 0 <= value < len(names):
            raise DataError(
                f"{t.where} row {i}: tag {value} in column '{column}' is not a class of its "
                f"ClassLabel (0 to {len(names) - 1})"
            )
        return names[value]
    if not isinstance(value, str):
        raise DataError(
            f"{t.where} row {i}: column '{column}' holds a {_type_name(value)}, not a tag"
        )
    return value.strip()


def _render(kind: str, t: _Table, data: Any) -> str:
    if kind == "labelled":
        return _labelled(t, data, pairs=False)
    if kind == "pairs":
        return _labelled(t, data, pairs=True)
    if kind == "parallel":
        return _parallel(t, data)
    return _tagged(t, data)


# ----------------------------------------------------------------------------- staging
@dataclass
class RenderedTables:
    """The tables of ``data=`` as the files of one kind: per split the file's name and
    text, and the record a run keeps (``RECORD_KEY``)."""

    kind: str
    source: str
    files: dict[str, tuple[str, str]]  # split -> (file name, text)
    rows: dict[str, int]

    @property
    def record(self) -> dict[str, Any]:
        """What config.json records: the source, the kind, per split the run-relative file,
        the rows and the SHA-256 of the file's UTF-8 text (its canonical content)."""
        return {
            "source": self.source,
            "kind": self.kind,
            "files": {s: f"{DATA_FOLDER}/{name}" for s, (name, _) in self.files.items()},
            "rows": dict(self.rows),
            "fingerprint": {
                s: hashlib.sha256(text.encode("utf-8")).hexdigest()
                for s, (_, text) in self.files.items()
            },
        }


def render_tables(data: Any, kind: str, settings: Any) -> RenderedTables:
    """``data`` (see the module docstring) validated and rendered as the files ``kind``'s
    reader reads, with the recipe's data ``settings`` (its columns, its languages)."""
    if kind not in TABLE_KINDS:
        raise DataError(
            f"data in memory trains tasks that read labelled texts, sentence pairs, parallel "
            f"text or tagged tokens, not {kind}: write it to a file (data.name: file)"
        )
    source, tables = _tables(data)
    pattern = _FILE_NAMES.get(kind, "{}.conll")
    files = {s: (pattern.format(s), _render(kind, t, settings)) for s, t in tables.items()}
    return RenderedTables(kind, source, files, {s: len(t.rows) for s, t in tables.items()})


@dataclass
class StagedTables:
    """Rendered tables written to a staging folder (``stage_tables``) until the run takes
    them (``copy_into``); ``cleanup`` removes the folder."""

    rendered: RenderedTables
    folder: Path

    @property
    def paths(self) -> dict[str, str]:
        """The staged file of each split, as ``data.train`` / ``validation`` / ``test``."""
        return {s: str(self.folder / name) for s, (name, _) in self.rendered.files.items()}

    def apply(self, data: Any) -> None:
        """Point the recipe's data settings at the staged files (``data.name: file``)."""
        data.name = "file"
        for split in SPLITS:
            setattr(data, split, self.paths.get(split))

    def config_entries(self, payload: dict[str, Any]) -> dict[str, Any]:
        """``payload`` (config.json) with run-relative data files and ``RECORD_KEY``."""
        record = self.rendered.record
        section = {**payload.get("data", {}), "name": "file"}
        section.update({s: record["files"].get(s) for s in SPLITS})
        return {**payload, "data": section, RECORD_KEY: record}

    def copy_into(self, run_path: Path, data: Any = None) -> None:
        """Write the files into ``run_path/data`` all at once (a staging folder renamed into
        place); ``data``: recipe settings pointed at those copies from now on."""
        target = Path(run_path) / DATA_FOLDER
        with staged_folder(target, last="") as stage:
            for name, text in self.rendered.files.values():
                (stage / name).write_text(text, encoding="utf-8", newline="")
        if data is not None:
            for split, (name, _) in self.rendered.files.items():
                setattr(data, split, str(target / name))

    def cleanup(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def stage_tables(data: Any, kind: str, settings: Any) -> StagedTables:
    """``render_tables`` written to a new staging folder (the system's temporary folder)."""
    rendered = render_tables(data, kind, settings)
    folder = Path(tempfile.mkdtemp(prefix="attnkit-tables-"))
    try:
        for name, text in rendered.files.values():
            (folder / name).write_text(text, encoding="utf-8", newline="")
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return StagedTables(rendered, folder)


# ----------------------------------------------------------------------------- runs
def resolve_in_run(settings: Any, record: Any, run_path: Path) -> None:
    """Point a saved run's data settings at the files of its record (``RECORD_KEY``), which
    lie in the run (``RUN/data/``) wherever the run folder is now."""
    files = record.get("files") if isinstance(record, Mapping) else None
    if not isinstance(files, Mapping):
        raise DataError(f"{RECORD_KEY} must be a mapping with files by split")
    for split, rel in files.items():
        parts = PurePosixPath(rel).parts if isinstance(rel, str) else ()
        if split not in SPLITS or len(parts) != 2 or parts[0] != DATA_FOLDER or ".." in parts:
            raise DataError(f"{RECORD_KEY}: bad file {str(rel)[:80]!r} for split {split!r}")
        setattr(settings, split, os.fspath(Path(run_path) / DATA_FOLDER / parts[1]))


def check_same_tables(data: Any, record: Any, settings: Any, run: str) -> None:
    """Refuse (``DataError``) ``data`` that is not what the run recorded it was trained on
    (its ``RECORD_KEY``): resuming must train on the same examples."""
    if file_splits(data) is not None:
        raise DataError(f"{run} resumes on the data it was started with: leave out data=")
    kind = record.get("kind") if isinstance(record, Mapping) else None
    if kind not in TABLE_KINDS:
        raise DataError(
            f"{run} was trained from files, not data in memory: resume it without data="
        )
    given = render_tables(data, kind, settings).record
    for split in sorted(set(given["fingerprint"]) | set(record.get("fingerprint", {}))):
        now, then = given["fingerprint"].get(split), record.get("fingerprint", {}).get(split)
        if now != then:
            rows_now, rows_then = given["rows"].get(split, 0), record.get("rows", {}).get(split, 0)
            raise DataError(
                f"data= is not what {run} was trained on: its {split} split differs "
                f"({rows_now} rows, sha256 {str(now)[:12]} here; {rows_then} rows, sha256 "
                f"{str(then)[:12]} in the run); resume without data= (the run keeps a copy) "
                "or train a new run"
            )

"""The markdown of docs/results.md: one table helper (rows + column specs -> markdown) and
the notes files (benchmarks/notes-<name>.md) the sections end with. Used by
benchmarks/report.py and benchmarks/report_speed.py."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def notes(name: str) -> list[str]:
    path = ROOT / "benchmarks" / f"notes-{name}.md"
    return [path.read_text(encoding="utf-8").strip(), ""] if path.is_file() else []


# --------------------------------------------------------------------------------------
# One table helper: rows + column specs -> markdown
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Col:
    """A column of a markdown table: its header, its cell for a row (a key of the row, dotted
    for a nested one, e.g. ``test.accuracy``, or a function of the row) and, for a key, the
    format spec of its value (``","``, ``".4f"``); ``right``: right-aligned (numbers)."""

    label: str
    cell: str | Callable[[Any], object]
    spec: str = ""
    right: bool = False


def get(row: dict, key: str) -> Any:
    """``row[key]``, following dots into nested records; None where a part is missing."""
    value: Any = row
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def fmt(value: Any, spec: str = "") -> str:
    """``value`` formatted with ``spec``; "-" for None (not measured)."""
    return "-" if value is None else format(value, spec)


def num(label: str, key: str, spec: str = "") -> Col:
    """A right-aligned column of a record's number."""
    return Col(label, key, spec, right=True)


def command(label: str = "command", key: str = "command") -> Col:
    """The command that produced a row, as code."""
    return Col(label, lambda r: f"`{get(r, key)}`")


def table(rows: Iterable[Any], columns: Sequence[Col]) -> list[str]:
    """The lines of a markdown table of ``rows``: a header, the alignment line, one line per
    row. A key column's cell is its value formatted with the column's spec ("" where the row
    lacks the key, "-" for None); a function column's is what it returns. "|" in a cell is
    escaped; an empty cell is "| |"."""

    def cell(row: Any, col: Col) -> str:
        if callable(col.cell):
            text = str(col.cell(row))
        else:
            text = fmt(get(row, col.cell), col.spec) if _has(row, col.cell) else ""
        return text.replace("|", "\\|")

    def line(cells: Iterable[str]) -> str:
        return "|" + "|".join(f" {c} " if c else " " for c in cells) + "|"

    out = [line(c.label for c in columns), line("---:" if c.right else "---" for c in columns)]
    return out + [line(cell(row, c) for c in columns) for row in rows]


def _has(row: Any, key: str) -> bool:
    """Whether ``row`` has the (dotted) ``key``, even with the value None."""
    *parents, last = key.split(".")
    for part in parents:
        row = row.get(part) if isinstance(row, dict) else None
    return isinstance(row, dict) and last in row


def yes_no(value: object) -> str:
    return "yes" if value else "no"

"""Line links of the docs: ``[`Symbol`](../src/attnkit/x.py#L123)`` names the symbol it
points at, so a moved definition can be found and the link checked or fixed.

    python tools/line_links.py          # list the line links that no longer hit their symbol
    python tools/line_links.py --fix    # rewrite them to the line that defines it now

The symbol is the last code span of the link text, without a call's parentheses
(``Decoder.init_cache()``); a dotted name (``DecoderLayer.cross_attn``) is looked for after
the definition of its first part, so that ``forward`` or ``self.head`` of one class is found.
A line defines ``X`` when it has ``def X``, ``class X``, ``X = ...``, ``self.X = ...``, an
annotated ``X: ... = ...`` (a dataclass field, a signature's argument) or a YAML key ``X:``.
tests/system/test_docs_links.py checks every line link with these rules.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
LINE_LINK = re.compile(r"\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(([^()\s#]+)#L(\d+)(?:-L(\d+))?\)")


def qualified_symbol(text: str) -> str | None:
    """``Decoder.init_cache`` of a link text ``[`Decoder.init_cache()`]``: its last code
    span, without arguments (None: no code span)."""
    spans = [m.group(2).strip() for m in CODE_SPAN.finditer(text)]
    if not spans:
        return None
    name = re.split(r"[(\s=]", spans[-1], maxsplit=1)[0].strip(".")
    return name or None


def symbol_of(text: str) -> str | None:
    """The name a link's line must define: the last dotted part of ``qualified_symbol``."""
    name = qualified_symbol(text)
    return name.split(".")[-1] if name else None


def defines(line: str, symbol: str) -> bool:
    s = re.escape(symbol)
    return bool(
        re.search(rf"\b(?:def|class)\s+{s}\b", line)
        or re.search(rf"(?:^|[\s(,])(?:self\.)?{s}\s*(?::[^=]*)?=(?!=)", line)
        or re.match(rf"\s*-?\s*[\"']?{s}[\"']?\s*:", line)  # a YAML key, a dataclass field
    )


def code_lines(path: Path) -> list[str]:
    """The lines of ``path``; in a Python file, the lines of triple-quoted strings (the
    docstrings) blanked, so that a docstring's ``EncoderLayer:  x = ...`` defines nothing."""
    lines = path.read_text(encoding="utf-8").splitlines()
    if path.suffix != ".py":
        return lines
    out, quote = [], ""
    for line in lines:
        inside = bool(quote)
        for m in re.finditer(r'"""|\'\'\'', line):
            if not quote:
                quote = m.group(0)
                inside = True
            elif m.group(0) == quote:
                quote = ""
        out.append("" if inside else line)
    return out


def definition_lines(lines: list[str], qualified: str) -> list[int]:
    """1-based lines of ``lines`` that define ``qualified`` (``A.b``: the first line
    defining ``b`` after each line that defines ``A``)."""
    parts = qualified.split(".")
    candidates = [n for n, line in enumerate(lines, 1) if defines(line, parts[0])]
    for part in parts[1:]:
        found = []
        for start in candidates:
            after = [n for n in range(start + 1, len(lines) + 1) if defines(lines[n - 1], part)]
            if after:
                found.append(after[0])
        candidates = sorted(set(found))
    return candidates


def check_link(page: Path, text: str, target: str, first: int, last: int) -> str | None:
    """Why the line link ``[text](target#Lfirst-Llast)`` of ``page`` misses (None: it hits)."""
    source = (page.parent / target).resolve()
    if not source.is_file():
        return f"{target!r}: no such file"
    lines = code_lines(source)
    if not 1 <= first <= last <= len(lines):
        return f"{target}#L{first}: {source.name} has {len(lines)} lines"
    symbol = symbol_of(text)
    if symbol is None:
        return f"{target}#L{first}: a line link names its symbol in backticks in the link text"
    if any(defines(line, symbol) for line in lines[first - 1 : last]):
        return None
    now = definition_lines(lines, qualified_symbol(text) or symbol)
    return (
        f"{target}#L{first}: line {first} does not define {symbol!r} (defined at lines {now}; "
        "python tools/line_links.py --fix)"
    )


def fix_page(page: Path) -> tuple[str, list[str]]:
    """The text of ``page`` with every missing line link moved to its symbol's one
    definition, and what could not be fixed."""
    problems: list[str] = []

    def fix(m: re.Match[str]) -> str:
        text, target, first = m.group(1), m.group(2), int(m.group(3))
        last = int(m.group(4) or first)
        if check_link(page, text, target, first, last) is None:
            return m.group(0)
        source = (page.parent / target).resolve()
        name = qualified_symbol(text)
        lines = code_lines(source) if source.is_file() else []
        found = definition_lines(lines, name) if name else []
        if len(found) != 1:
            problems.append(f"{page.name}: [{text}]({target}#L{first}): defined at {found}")
            return m.group(0)
        return f"[{text}]({target}#L{found[0]})"

    return LINE_LINK.sub(fix, page.read_text(encoding="utf-8")), problems


def pages() -> list[Path]:
    return sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fix", action="store_true", help="rewrite the links that moved")
    args = parser.parse_args(argv)
    status = 0
    for page in pages():
        fixed, problems = fix_page(page)
        original = page.read_text(encoding="utf-8")
        moved = sum(a != b for a, b in zip(original.splitlines(), fixed.splitlines(), strict=False))
        if moved and args.fix:
            page.write_text(fixed, encoding="utf-8")
            print(f"{page.relative_to(ROOT)}: {moved} line(s) fixed")
        elif moved:
            print(f"{page.relative_to(ROOT)}: {moved} line(s) with links that moved")
            status = 1
        for problem in problems:
            print(problem, file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    raise SystemExit(main())

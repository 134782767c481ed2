"""Keep the committed notebooks clean: no outputs, no execution counts, no run metadata.

    python tools/strip_notebooks.py            # strip notebooks/*.ipynb in place
    python tools/strip_notebooks.py --check    # list the ones that need it; exit 1 if any
    python tools/strip_notebooks.py A.ipynb B.ipynb [--check]

A notebook run in Jupyter keeps its outputs (figures, the explorer's page, training logs)
and counters; committing them would bloat the repository and make every rerun a diff. This
clears, in every code cell, ``outputs`` and ``execution_count`` and the timing metadata
Jupyter and nbclient add (``metadata.execution``, ``collapsed``, ``scrolled``); cell tags
and ids stay (tests/system/test_notebooks.py finds cells by their tags). Written as ``nbformat``
writes (one-space indent, sorted keys), with the standard library only.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUN_METADATA = ("execution", "collapsed", "scrolled")


def stripped(notebook: dict) -> dict:
    """The notebook without outputs, execution counts and run metadata (a new dict)."""
    clean = json.loads(json.dumps(notebook))
    for cell in clean.get("cells", []):
        for key in RUN_METADATA:
            cell.get("metadata", {}).pop(key, None)
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
    return clean


def dumps(notebook: dict) -> str:
    return json.dumps(notebook, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "paths", nargs="*", type=Path, help="notebooks (default: notebooks/*.ipynb)"
    )
    parser.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 if any is dirty"
    )
    args = parser.parse_args(argv)
    paths = args.paths or sorted((ROOT / "notebooks").glob("*.ipynb"))
    dirty = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        clean = dumps(stripped(json.loads(text)))
        if clean != text:
            dirty.append(path)
            if not args.check:
                path.write_text(clean, encoding="utf-8")
    for path in dirty:
        print(f"{path}: {'has outputs or run metadata' if args.check else 'stripped'}")
    return 1 if args.check and dirty else 0


if __name__ == "__main__":
    sys.exit(main())

"""``attnkit data`` (the dataset catalogue: list, fetch) and ``attnkit recipes`` (the bundled
recipes: the table, one recipe's YAML)."""

from __future__ import annotations

import argparse
import sys

from attnkit.app.cli.common import _Parser


def _cmd_data_list(args: argparse.Namespace) -> int:
    """The catalogue, each dataset marked yes / no / bad. By default a quick check (sizes,
    gzip headers and trailers: no file is read through unless it looks damaged); with --verify
    the sha256 of every file. A leftover ``*.part`` of an interrupted download is named, and
    never counted as data."""
    import glob

    from attnkit.data.catalogue import list_datasets
    from attnkit.data.fetch import check_file
    from attnkit.data.paths import resolve_data_dir

    root = resolve_data_dir(args.data_dir)
    print(f"data directory: {root}")
    for info in list_datasets():
        checks = [c for f in info.files for c in check_file(f, root, verify=args.verify)]
        states = {c.status for c in checks}
        mark = "bad" if "bad" in states else "no " if "missing" in states else "yes"
        print(f"  [{mark}] {info.name:16s} {info.language:6s} {info.task:22s} {info.description}")
        for check in checks:
            if check.status == "bad":
                print(
                    f"        {check.path.relative_to(root)}: {check.reason}; "
                    f"`attnkit data fetch {info.name}` downloads it again"
                )
        stored = {root / f.relpath for f in info.files} | {c.path for c in checks}
        parts = sorted(
            str(part.relative_to(root))
            for path in stored
            if path.parent.is_dir()
            for part in path.parent.glob(f"{glob.escape(path.name)}.*")
            if part.name.endswith(".part")
        )
        if parts:
            print(f"        interrupted download, not data (fetch removes it): {', '.join(parts)}")
    if not args.verify:
        print("(quick check of sizes and gzip trailers; --verify compares every sha256)")
    return 0


def _cmd_data_fetch(args: argparse.Namespace) -> int:
    from attnkit.data.fetch import fetch

    for path in fetch(args.name, args.data_dir, base_url=args.mirror, force=args.force):
        print(f"ok {path}")
    return 0


def _add_data(sub: argparse._SubParsersAction) -> None:
    data = sub.add_parser("data", help="list and download datasets")
    actions = data.add_subparsers(
        dest="action", required=True, metavar="ACTION", parser_class=_Parser
    )
    lst = actions.add_parser("list", help="the dataset catalogue and what is present locally")
    lst.add_argument("--data-dir", help="data folder (default: $ATTNKIT_DATA, ~/.cache/attnkit)")
    lst.add_argument(
        "--verify",
        action="store_true",
        help="read every file and compare its sha256 with the catalogue (slower); by default "
        "only sizes and gzip headers/trailers are checked",
    )
    lst.set_defaults(func=_cmd_data_list)
    fetch = actions.add_parser(
        "fetch",
        help="download a dataset (sha256-verified); a missing or damaged file is downloaded "
        "again, an intact one is skipped",
    )
    fetch.add_argument("name")
    fetch.add_argument("--data-dir", help="data folder (default: $ATTNKIT_DATA, ~/.cache/attnkit)")
    fetch.add_argument("--mirror", help="base URL or folder to download from instead of upstream")
    fetch.add_argument("--force", action="store_true", help="download even if present and intact")
    fetch.set_defaults(func=_cmd_data_fetch)


def _cmd_recipes_list(args: argparse.Namespace) -> int:
    """The bundled recipes as a table: name, task, what it trains, the data it needs (and a
    run it starts from), training minutes measured on 2 CPU cores."""
    from attnkit.core.recipes import bundled_recipes

    header = ("NAME", "TASK", "TRAINS", "DATA", "MINUTES")
    rows = [(r.name, r.task, r.trains, r.data, r.minutes_text) for r in bundled_recipes()]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header) - 1)]
    for row in [header, *rows]:
        cells = [cell.ljust(width) for cell, width in zip(row[:-1], widths, strict=True)]
        print("  ".join([*cells, row[-1]]))
    print(
        "MINUTES: training time measured on 2 CPU cores (benchmarks/results); `attnkit recipes "
        "show NAME` prints a recipe to copy and edit, `attnkit train NAME` trains it"
    )
    return 0


def _cmd_recipes_show(args: argparse.Namespace) -> int:
    """The bundled recipe's YAML, exactly as shipped."""
    from attnkit.core.recipes import bundled_text

    sys.stdout.write(bundled_text(args.name))
    return 0


def _add_recipes(sub: argparse._SubParsersAction) -> None:
    rec = sub.add_parser(
        "recipes",
        help="the bundled recipes (what each trains, its data, measured minutes); "
        "`recipes show NAME` prints one",
    )
    rec.set_defaults(func=_cmd_recipes_list)
    actions = rec.add_subparsers(dest="action", metavar="ACTION", parser_class=_Parser)
    lst = actions.add_parser("list", help="the table (the default)")
    lst.set_defaults(func=_cmd_recipes_list)
    show = actions.add_parser("show", help="print a bundled recipe's YAML (to copy and edit)")
    show.add_argument("name", help="a bundled recipe's name, e.g. nsmc-quick")
    show.set_defaults(func=_cmd_recipes_show)

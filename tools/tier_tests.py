"""Pick the tests that leave the fast tier (``make test-fast``) by their measured time.

    pytest -n 2 -m "not slow" --durations=0 -o addopts=-q > /tmp/fast.log
    python tools/tier_tests.py /tmp/fast.log [--at-least 0.3]     # rewrites tests/slow_tests.txt

A test marked ``@pytest.mark.slow`` in its file is an integration test by nature (training
to a result, whole processes, notebooks, the wheel). Many more take a few tenths of a
second each (a tiny run trained in a fixture, a subprocess, a browser page), and together
they made the fast tier take two minutes; tests/conftest.py marks the ones listed in
tests/slow_tests.txt ``slow`` as well. This script writes that list from a ``--durations=0``
log of the fast tier: every test whose setup + call + teardown took at least
``--at-least`` seconds, added to the tests already listed (a listed test is not in the fast
tier's log, so it would otherwise drop out). Both tiers still run in ``make test``.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIST = ROOT / "tests" / "slow_tests.txt"
_LINE = re.compile(r"\s*([\d.]+)s (?:call|setup|teardown)\s+(\S+::\S+)")
HEADER = """\
# Tests that leave the fast tier (make test-fast) for their measured time: tests/conftest.py
# marks them slow. Written by tools/tier_tests.py from a --durations=0 log; one node id a line.
"""


def listed(path: Path = LIST) -> list[str]:
    """The node ids in ``path`` (comments and blank lines skipped)."""
    if not path.is_file():
        return []
    lines = (line.strip() for line in path.read_text(encoding="utf-8").splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def slow_in(log: str, at_least: float) -> set[str]:
    """Node ids whose setup + call + teardown in a ``--durations=0`` log add up to at
    least ``at_least`` seconds."""
    total: Counter[str] = Counter()
    for line in log.splitlines():
        m = _LINE.match(line)
        if m:
            total[m.group(2)] += float(m.group(1))
    return {node for node, seconds in total.items() if seconds >= at_least}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("log", type=Path, help="pytest --durations=0 output of the fast tier")
    p.add_argument("--at-least", type=float, default=0.3, help="seconds (default 0.3)")
    args = p.parse_args(argv)
    nodes = sorted(set(listed()) | slow_in(args.log.read_text(encoding="utf-8"), args.at_least))
    LIST.write_text(HEADER + "".join(f"{n}\n" for n in nodes), encoding="utf-8")
    print(f"wrote {LIST.relative_to(ROOT)}: {len(nodes)} tests")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

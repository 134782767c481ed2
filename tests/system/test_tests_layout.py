"""The tests are found by the module they test: tests/<package path>/test_<module>[_topic].py
beside src/attnkit/<package path>/<module>.py (or test_<package>[_topic].py for a package's
tests as a whole: tests/app/serve/test_serve_batching.py), tests/benchmarks/test_bench_
<script>[_topic].py for benchmarks/<script>.py, and tests/system/ for what crosses every
layer (docs, notebooks, the wheel, the import contract, reliability replays). Nothing sits
directly in tests/ but helpers and conftest.py; and basenames are unique (pytest's default
import mode needs them to be)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
SRC = ROOT / "src" / "attnkit"


def _allowed_prefixes(folder: Path) -> set[str]:
    """The names a test file in ``folder`` (under tests/) may start with, after ``test_``."""
    rel = folder.relative_to(TESTS)
    if rel.parts == ("benchmarks",):
        return {f"bench_{p.stem}" for p in (ROOT / "benchmarks").glob("*.py")}
    package = SRC.joinpath(*rel.parts)
    assert package.is_dir(), f"tests/{rel} mirrors no package of src/attnkit"
    modules = {p.stem for p in package.glob("*.py") if p.stem != "__init__"}
    modules |= {p.name for p in package.iterdir() if (p / "__init__.py").exists()}
    return modules | {package.name}


def _test_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("test_*.py") if "fixtures" not in p.parts)


def test_no_test_file_directly_in_tests():
    assert not list(TESTS.glob("test_*.py"))


def test_every_test_file_is_named_after_what_it_tests():
    wrong = []
    for path in _test_files():
        if path.parent.relative_to(TESTS).parts[:1] == ("system",):
            continue
        name = path.stem.removeprefix("test_")
        prefixes = _allowed_prefixes(path.parent)
        if not any(name == p or name.startswith(p + "_") for p in prefixes):
            wrong.append(str(path.relative_to(ROOT)))
    assert wrong == [], f"not named after a module of their folder's package: {wrong}"


def test_basenames_are_unique():
    names = [p.name for p in _test_files()]
    assert sorted(n for n in set(names) if names.count(n) > 1) == []


def test_every_test_the_slow_list_names_exists():
    """tests/slow_tests.txt (tools/tier_tests.py) names tests by node id: each one's file
    defines its function (a renamed or deleted test must leave the list too)."""
    import sys

    sys.path.insert(0, str(ROOT / "tools"))
    from tier_tests import listed

    stale = []
    for node in listed(TESTS / "slow_tests.txt"):
        path, _, name = node.partition("::")
        function = name.split("[")[0].split("::")[-1]
        file = ROOT / path
        if not file.is_file() or f"def {function}(" not in file.read_text(encoding="utf-8"):
            stale.append(node)
    assert stale == [], f"tests/slow_tests.txt names tests that do not exist: {stale}"

"""benchmarks/report.py: the table helper every section of docs/results.md renders with, the
one results schema (every record in benchmarks/results/ follows it), and docs/results.md
being what the records render to. Nothing trains here."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
RECORDS = sorted((BENCHMARKS / "results").glob("*.json"))


@pytest.fixture
def report(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    monkeypatch.delitem(sys.modules, "report", raising=False)
    yield importlib.import_module("report")
    sys.modules.pop("report", None)


def test_table_renders_rows_by_column_specs(report):
    Col, num = report.Col, report.num
    columns = [
        Col("run", "name"),
        num("acc", "test.accuracy", ".4f"),
        num("tokens/s", "tokens_per_s", ","),
        Col("note", lambda r: f"`{r['name']}` | {len(r)}"),
    ]
    rows = [
        {"name": "a", "test": {"accuracy": 0.87654}, "tokens_per_s": 12345},
        {"name": "b", "tokens_per_s": None},  # no test scores; a speed not measured
    ]
    assert report.table(rows, columns) == [
        "| run | acc | tokens/s | note |",
        "| --- | ---: | ---: | --- |",
        "| a | 0.8765 | 12,345 | `a` \\| 3 |",
        "| b | | - | `b` \\| 2 |",
    ]


def test_every_record_follows_the_schema(report):
    assert RECORDS
    problems = {p.name: report.check_record(json.loads(p.read_text())) for p in RECORDS}
    assert {k: v for k, v in problems.items() if v} == {}


def test_check_record_names_what_breaks_the_schema(report):
    old = {"name": "x", "command": "c", "date": "d", "test_accuracy": 0.9, "test_macro_f1": 0.9}
    assert report.check_record(old) == ["no kind", "old key test_accuracy", "old key test_macro_f1"]
    assert report.check_record({**old, "kind": "nope"}) == [
        "unknown kind 'nope'",
        "old key test_accuracy",
        "old key test_macro_f1",
    ]
    new = {**{k: old[k] for k in ("name", "command", "date")}, "kind": "sentiment"}
    assert report.check_record(new) == ["no test scores"]
    assert report.check_record({**new, "test": {"accuracy": 0.9}}) == []
    elmo = {**new, "kind": "elmo", "elmo": {"test_accuracy": 0.9}, "baseline": {"test": 0.9}}
    assert report.check_record(elmo) == [
        "old key elmo.test_accuracy",
        "baseline.test is not a mapping of metric -> number",
        "no bilm.validation scores",
        "no elmo.test scores",
    ]


def test_results_md_is_what_the_records_render_to(report):
    """docs/results.md is generated: `python benchmarks/report.py` after changing a record."""
    rows = [json.loads(p.read_text(encoding="utf-8")) for p in RECORDS]
    assert report.render(rows) == (ROOT / "docs" / "results.md").read_text(encoding="utf-8")


def test_a_command_held_to_avx2_says_so(report, monkeypatch) -> None:
    """The recorded command of a benchmark run held to AVX2 kernels starts with the variables."""
    monkeypatch.setattr("sys.argv", ["x.py", "--steps", "5"])
    monkeypatch.setenv("ATTNKIT_CPU_BF16", "0")  # alone: the machine cell says "native bf16 no"
    for k in ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS"):
        monkeypatch.delenv(k, raising=False)
    assert report.command_line("x.py") == "python benchmarks/x.py --steps 5"
    for k, v in report.AVX2.items():
        monkeypatch.setenv(k, v)
    assert report.command_line("x.py") == (
        "ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 "
        "ATTNKIT_CPU_BF16=0 python benchmarks/x.py --steps 5"
    )

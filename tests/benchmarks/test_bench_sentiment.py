"""benchmarks/sentiment.py writes the one results schema (benchmarks/report.py): a tiny
recipe and a tiny ensemble member, trained under tmp_path."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def sentiment(monkeypatch, tmp_path):
    """benchmarks/sentiment.py importable, writing its runs under tmp_path."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    for name in ("report", "sentiment"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    module = importlib.import_module("sentiment")
    monkeypatch.setattr(module, "ROOT", tmp_path)
    yield module
    for name in ("report", "sentiment"):
        sys.modules.pop(name, None)


@pytest.mark.slow
def test_an_ensemble_record_follows_the_schema(sentiment, tiny_config):
    from report import check_record

    quick = ["training.progress=false", "training.epochs=1"]
    record = sentiment.run(
        str(tiny_config), "tiny", quick, ensemble=[str(tiny_config)], ensemble_overrides=quick
    )
    assert check_record(record) == []
    assert record["kind"] == "sentiment" and set(record["test"]) == {"accuracy", "macro_f1"}
    assert record["test_examples"] == 80 and "best_val_metric" in record
    for member in record["ensemble"]:  # each classifier alone
        assert set(member["test"]) == {"accuracy"} and 0 <= member["test"]["accuracy"] <= 1

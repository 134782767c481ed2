"""benchmarks/bf16_decode.py: fp32 against bf16 decoding, a line per shape and row count."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))


def test_each_shape_is_timed_in_both_precisions(monkeypatch, capsys) -> None:
    import bf16_decode

    monkeypatch.setattr(bf16_decode, "SHAPES", [(1, 32, 40)])  # one tiny GPT
    bf16_decode.main()
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == ["L1 H32 vocab 40, 1 rows",
                                                      "L1 H32 vocab 40, 16 rows"]  # fmt: skip
    for line in lines:
        fp32, bf16, ratio = re.search(r"fp32 (\d+) ms, bf16 (\d+) ms \(([\d.]+)x", line).groups()
        assert float(ratio) > 0 and int(fp32) >= 0 and int(bf16) >= 0

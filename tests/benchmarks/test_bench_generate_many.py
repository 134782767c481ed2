"""benchmarks/generate_many.py: many prompts through generate(prompts, batch_size=16)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))


def test_it_times_64_prompts_and_counts_their_tokens(served_runs, capsys) -> None:
    import generate_many

    generate_many.main(["after", "--run", str(served_runs["verse"])])
    line = capsys.readouterr().out.strip()
    found = re.fullmatch(r"after: 64 prompts, batch 16: ([\d.]+) s, (\d+) tokens, (\d+) tokens/s",
                         line)  # fmt: skip
    assert found is not None, line
    assert float(found[1]) > 0 and 64 <= int(found[2]) <= 64 * 48

"""benchmarks/recipe_speed.py: the same recipe trained by two revisions of the code (here
HEAD and this checkout), in separate processes, and its table in docs/results.md."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import tiny_recipe

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))


@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("git") is None
    or subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True).returncode,
    reason="needs git and a checkout with a commit",
)
def test_recipe_speed_trains_both_revisions_and_renders(tmp_path, tiny_data):
    recipe = tmp_path / "tiny.yaml"
    recipe.write_text(yaml.safe_dump(tiny_recipe(tiny_data)), encoding="utf-8")
    out = tmp_path / "record.json"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks/recipe_speed.py"),
            str(recipe),
            "--before",
            "HEAD",
            "--steps",
            "12",
            "--rounds",
            "1",
            "--runs",
            str(tmp_path / "runs"),
            "--json",
            str(out),
        ],  # fmt: skip
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads(out.read_text())
    (row,) = record["rows"]
    assert row["before_tokens_per_s"] > 0 and row["after_tokens_per_s"] > 0
    assert row["speedup"] == pytest.approx(
        row["after_tokens_per_s"] / row["before_tokens_per_s"], abs=0.01
    )
    assert [len(v) for v in row["runs"].values()] == [1, 1]
    for label in ("before", "after"):  # both trained the 12 steps
        rows = (tmp_path / "runs" / f"speed-recipe-tiny-{label}" / "metrics.jsonl").read_text()
        assert '"step": 12' in rows
    # the temporary worktree is gone
    trees = subprocess.run(["git", "worktree", "list"], cwd=ROOT, capture_output=True, text=True)
    assert "attnkit-before-" not in trees.stdout

    from report import render

    text = render([record])
    assert "before and after issue 17" in text and f"**{row['speedup']:.2f}x**" in text

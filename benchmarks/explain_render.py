"""The explorer page's cost (issue 34): capture one 128-token text through a 6-layer,
d_model 256 model and render its page, on the CPU; the seconds and the HTML's size.

    python benchmarks/explain_render.py [--threads 2] [--repeats 5] [--heads 4 8] [--json FILE]

The models and the text are benchmarks/explain_speed.py's (a Transformer classifier and a
GPT, randomly initialised: time and size do not depend on the weights), once per number of
``--heads`` (default 4 and 8: the page's arrays grow as layers x heads x T^2, and past
float16 the trace coarsens them, ``encoding.coarsened``); for each, the median over
``--repeats`` runs (after one warm-up) of ``trace(...)`` (capture, building, base64) and of
``render_page(trace)`` (the HTML: script, style, inline Korean font subset, made anew each
time, and the data), and the HTML's bytes. The targets of the issue: capture + render under
2 s on 2 CPU cores, the HTML under 5 MB. The record holds every heads count under ``runs``
(``[{"heads", "model", "classifier", "lm"}]``); its top-level ``model``, ``classifier`` and
``lm`` are the first one's (the layout of earlier records). Writes it to
benchmarks/results/explain-render.json and rebuilds docs/results.md (``--json FILE``: writes
it there instead, publishing nothing).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch

from attnkit.app.explain.page import korean_font_subset, render_page
from explain_speed import measure, predictors  # this folder (run as a script)
from report import command_line, machine, publish

SECONDS = 2.0  # capture + render
BYTES = 5_000_000  # the page


def _model(heads: int) -> str:
    return f"6 layers, d_model 256, d_ff 1024, {heads} heads, random init"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--heads", type=int, nargs="+", default=[4, 8],
                        help="attention heads of the models, one measurement each")  # fmt: skip
    parser.add_argument("--json", type=Path, help="write the record here, publish nothing")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if any(h < 1 or 256 % h for h in args.heads):
        parser.error(f"--heads must divide d_model 256, got {args.heads}")
    record: dict[str, Any] = {
        "name": "explain-render",
        "kind": "explain",
        "threads": torch.get_num_threads(),
        "repeats": args.repeats,
        "torch": torch.__version__,
        "command": command_line("explain_render.py", skip=("--json",)),
        "machine": machine(),
        "date": time.strftime("%Y-%m-%d"),
        "targets": {"capture_and_render_s": SECONDS, "html_bytes": BYTES},
    }

    def cold_render(trace: dict) -> str:
        """The page as ``attnkit explain --html`` makes it once: the Korean font subset made
        anew (a server keeps it cached per character set)."""
        korean_font_subset.cache_clear()
        return render_page(trace)

    runs = []
    for heads in args.heads:
        run: dict[str, Any] = {"heads": heads, "model": _model(heads)}
        for name, predictor in predictors(heads).items():
            m = measure(predictor, args.repeats, render=cold_render)
            total = m["trace_s"] + m["render_s"]
            m.update(capture_and_render_s=round(total, 4),
                     within_targets=total < SECONDS and m["html_bytes"] < BYTES)  # fmt: skip
            run[name] = m
        runs.append(run)
    record["runs"] = runs
    if args.json:
        args.json.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", "utf-8")
        print(json.dumps(record, indent=2, ensure_ascii=False))
    else:
        publish(record)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Many prompts through ``LMPredictor.generate(prompts, batch_size=16)`` in one process:
64 sixteen-character lines of Tiny Shakespeare's validation part, each continued by up to
48 sampled tokens (seed 0) until a line break, so the rows end at different tokens; prints
the median of 3 calls (seconds, tokens, tokens/s). Run it from two source trees in
alternating processes to compare revisions (no record: an ad hoc figure in the notes):

    for i in 1 2 3 4; do
      PYTHONPATH=/tmp/attnkit-before/src python benchmarks/generate_many.py before
      python benchmarks/generate_many.py after
    done

The served run (runs/bench-serve-shakespeare) is what serve_load.py trains for generate.
"""

import argparse
import statistics
import time
from pathlib import Path

import attnkit
from attnkit.data.paths import resolve_data_dir

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("label", nargs="?", default="attnkit", help="what the line is labelled")
    ap.add_argument("--run", type=Path, default=ROOT / "runs" / "bench-serve-shakespeare")
    args = ap.parse_args(argv)
    label = args.label
    lm = attnkit.load(args.run, precision="fp32")
    try:
        text = (resolve_data_dir() / "tinyshakespeare" / "input.txt").read_text(encoding="utf-8")
    except Exception:  # noqa: BLE001 - no data here: a few fixed lines instead
        text = "ROMEO:\nFirst Citizen:\nKING RICHARD III:\n" * 30
    lines = [x[:16] for x in text[int(len(text) * 0.9) :].splitlines() if x.strip()]
    lines = (lines * 64)[:64]
    options = {"max_new_tokens": 48, "temperature": 0.8, "seed": 0, "stop": ["\n"],
               "batch_size": 16}  # fmt: skip
    lm.generate(lines[:16], **options)  # warm-up
    seconds, tokens = [], 0
    for _ in range(3):
        start = time.perf_counter()
        out = lm.generate(lines, **options)
        seconds.append(time.perf_counter() - start)
        tokens = sum(g.tokens for g in out)
    s = statistics.median(seconds)
    print(f"{label}: 64 prompts, batch 16: {s:.3f} s, {tokens} tokens, {tokens / s:.0f} tokens/s")


if __name__ == "__main__":
    main()

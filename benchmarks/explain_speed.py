"""The explainer's data side (issue 34): time to capture and trace one 128-token text through
a 6-layer, d_model 256 model on the CPU, and the size of the trace's JSON.

    python benchmarks/explain_speed.py [--threads 2] [--repeats 5] [--heads 4] [--out FILE]

The models are randomly initialised (the time and the size do not depend on the weights):
a Transformer encoder classifier (post-norm, mean pooling) and a GPT (pre-norm, causal),
each 6 layers, d_model 256, d_ff 1024, ``--heads`` heads, with the tokenizer and run config
of tests/fixtures/legacy_runs/classify-transformer (data.max_len set to 128). For each:
the median over ``--repeats`` runs (after one warm-up) of the plain forward pass, of
``trace(...)`` (capture + building + base64 encoding) and of ``json.dumps`` of the trace,
and the JSON's size in bytes. The page's rendering time is the page's own (the HTML
builder can pass ``render=`` to ``measure``). Prints one JSON record; ``--out`` also writes
it (nothing is published to docs/results.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

import attnkit
from attnkit.app.explain import trace
from attnkit.models.classifier import TransformerClassifierConfig
from attnkit.models.gpt import GPTConfig
from attnkit.tasks.classify import ClassifierPredictor, classifier_output
from attnkit.tasks.lm import LMPredictor

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "legacy_runs" / "classify-transformer"
TOKENS = 128
TEXT = " ".join(["the movie was great and the story 정말 재미있어요"] * 40)  # > 128 tokens


def predictors(heads: int) -> dict[str, Any]:
    """{"classifier": ..., "lm": ...}: random 6-layer d_model 256 models, in memory."""
    base = attnkit.load(FIXTURE, precision="fp32")
    tk = base.tokenizer
    data = dataclasses.replace(base.config.data, max_len=TOKENS)
    sizes = {"vocab_size": tk.vocab_size, "pad_id": tk.pad_id, "max_len": TOKENS, "d_model": 256,
             "num_heads": heads, "d_ff": 1024, "num_layers": 6}  # fmt: skip
    torch.manual_seed(0)
    clf_cfg = TransformerClassifierConfig(**sizes)
    classifier = ClassifierPredictor(
        clf_cfg.build().eval(),
        tk,
        dataclasses.replace(base.config, model=clf_cfg, data=data),
        ["neg", "pos"],
    )
    lm_cfg = GPTConfig(**sizes)
    lm = LMPredictor(lm_cfg.build().eval(), tk,
                     dataclasses.replace(base.config, task="lm", model=lm_cfg, data=data))  # fmt: skip
    return {"classifier": classifier, "lm": lm}


def _median(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    result = fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def measure(
    predictor: Any, repeats: int, render: Callable[[dict], str] | None = None
) -> dict[str, Any]:
    """Median seconds of the forward pass, of trace() and of json.dumps; payload bytes
    (and, with ``render``, the seconds and bytes of the page it makes from the trace)."""
    options = {"max_tokens": TOKENS, "steps": 1, "temperature": 0.0}
    t_trace, result = _median(lambda: trace(predictor, TEXT, **options), repeats)
    t_json, payload = _median(lambda: json.dumps(result, ensure_ascii=False), repeats)
    n = len(result["inputs"][0]["ids"])
    ids = torch.tensor([result["inputs"][0]["ids"]])
    if isinstance(predictor, LMPredictor):
        forward = lambda: predictor.model(ids)  # noqa: E731
    else:
        batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids, dtype=torch.bool)}
        forward = lambda: classifier_output(predictor.model, batch)  # noqa: E731
    with torch.no_grad():
        t_forward, _ = _median(forward, repeats)
    record = {
        "tokens": n,
        "forward_s": round(t_forward, 4),
        "trace_s": round(t_trace, 4),
        "json_s": round(t_json, 4),
        "payload_bytes": len(payload.encode("utf-8")),
        "float16": result["encoding"]["float16"],
        "coarsened": result["encoding"]["coarsened"],
        "qkv": result["encoding"]["qkv"],
    }
    if render is not None:
        t_render, html = _median(lambda: render(result), repeats)
        record.update(render_s=round(t_render, 4), html_bytes=len(html.encode("utf-8")))
    return record


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    record: dict[str, Any] = {
        "kind": "explain-speed",
        "model": f"6 layers, d_model 256, d_ff 1024, {args.heads} heads, random init",
        "threads": torch.get_num_threads(),
        "repeats": args.repeats,
        "torch": torch.__version__,
        "command": " ".join(["python", "benchmarks/explain_speed.py", *sys.argv[1:]]),
        "date": time.strftime("%Y-%m-%d"),
    }
    for name, predictor in predictors(args.heads).items():
        record[name] = measure(predictor, args.repeats)
    text = json.dumps(record, indent=1, ensure_ascii=False)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

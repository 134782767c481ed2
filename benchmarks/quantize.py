"""int8 quantization and ONNX export of a trained run: accuracy and speed against its float
PyTorch weights.

    python benchmarks/quantize.py runs/bench-nsmc-bert            # NSMC test, 50K reviews

A classify run. Exports RUN with ``attnkit export RUN --quantize int8`` into ``RUN-int8``
and with ``attnkit export RUN --format onnx`` into ``RUN-onnx`` (each replaced if it
exists), then, on the CPU, evaluates the three on ``--split`` (``attnkit evaluate``: the
task's metrics, batches of 128, timed) and times single-review predictions
(``predict([text])`` on the first ``--latency`` test texts, median ms, after 5 warm-up
calls). Writes benchmarks/results/quantize-<run name>.json and rebuilds docs/results.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from attnkit.app.api import evaluate, export, load  # noqa: E402
from attnkit.interop.onnx import ONNX_FILE  # noqa: E402
from attnkit.interop.quantize import INT8_WEIGHTS  # noqa: E402
from attnkit.tasks.classify import read_split  # noqa: E402
from report import command_line, machine, publish  # noqa: E402


def _onnxruntime_version() -> str:
    import onnxruntime

    return onnxruntime.__version__


def latency_ms(run: Path, texts: list[str]) -> float:
    predictor = load(run)
    for text in texts[:5]:
        predictor.predict([text])
    times = []
    for text in texts:
        start = time.perf_counter()
        predictor.predict([text])
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run")
    p.add_argument("--split", default="test")
    p.add_argument("--latency", type=int, default=200, help="texts timed one at a time")
    p.add_argument("--json", type=Path, help="write the record here, leave docs alone")
    args = p.parse_args()
    run = Path(args.run)
    out, onnx_out = run.with_name(run.name + "-int8"), run.with_name(run.name + "-onnx")
    for path in (out, onnx_out):
        if path.exists():
            shutil.rmtree(path)
    export(run, out, fmt="attnkit", quantize="int8")
    export(run, onnx_out, fmt="onnx")
    variants = (("fp32", run), ("int8", out), ("onnx", onnx_out))
    rows, raw_seconds = {}, {}
    for label, path in variants:
        start = time.perf_counter()
        metrics = evaluate(path, split=args.split)
        seconds = time.perf_counter() - start
        rows[label] = {
            "accuracy": round(metrics["accuracy"], 4),
            "macro_f1": round(metrics["macro_f1"], 4),
            "examples": metrics.get("num_examples"),
            "evaluate_seconds": round(seconds, 2),
        }
        raw_seconds[label] = seconds
        print(label, rows[label], flush=True)
    texts = [e.text for e in read_split(load(run).config, args.split)][: args.latency]
    raw_ms = {label: latency_ms(path, texts) for label, path in variants}
    for label, ms in raw_ms.items():
        rows[label]["latency_ms_batch1"] = round(ms, 3)
    weights = {
        "fp32": [run / "model.safetensors"],
        "int8": [out / INT8_WEIGHTS],
        "onnx": [p for p in onnx_out.iterdir() if p.name.startswith(ONNX_FILE)],
    }
    for label, paths in weights.items():
        rows[label]["weights_mb"] = round(sum(p.stat().st_size for p in paths) / 2**20, 1)
    onnx_info = json.loads((onnx_out / "config.json").read_text(encoding="utf-8"))["onnx"]
    record = {
        "kind": "quantize",
        "name": f"quantize-{run.name}",
        "run": str(run),
        "split": args.split,
        "fp32": rows["fp32"],
        "int8": rows["int8"],
        "accuracy_change": round(rows["int8"]["accuracy"] - rows["fp32"]["accuracy"], 4),
        "latency_speedup": round(raw_ms["fp32"] / raw_ms["int8"], 2),
        "evaluate_speedup": round(raw_seconds["fp32"] / raw_seconds["int8"], 2),
        "onnx": rows["onnx"],
        "onnx_accuracy_change": round(rows["onnx"]["accuracy"] - rows["fp32"]["accuracy"], 4),
        "onnx_latency_speedup": round(raw_ms["fp32"] / raw_ms["onnx"], 2),
        "onnx_evaluate_speedup": round(raw_seconds["fp32"] / raw_seconds["onnx"], 2),
        "onnx_max_abs_diff": onnx_info["max_abs_diff"],
        "onnxruntime": _onnxruntime_version(),
        "threads": torch.get_num_threads(),
        "machine": machine(),
        "command": command_line("quantize.py"),
        "date": time.strftime("%Y-%m-%d"),
    }
    if args.json:
        args.json.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    else:
        publish(record)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Sequence-to-sequence benchmark: train a recipe, then measure it on the test split.

    python benchmarks/seq2seq.py configs/multi30k-transformer.yaml
    python benchmarks/seq2seq.py configs/multi30k-lstm-attn.yaml
    python benchmarks/seq2seq.py configs/chatbot-ko.yaml

translate recipes: test loss/perplexity; sacreBLEU (cased, detokenized) and BLEU on
lowercased tokens, greedy and beam 5; decoding throughput (sentences/s) greedy and beam 5,
with and without the KV cache (Transformer; an LSTM's recurrent state is its cache).
chat recipes: test loss/perplexity and ten answers to held-out test questions.

``--skip-train`` measures the run already in runs/bench-NAME (trained by this script or by
``attnkit train RECIPE --out runs/bench-NAME``) instead of training it again. Results go to
benchmarks/results/NAME.json (kind translate / chat; the schema: benchmarks/report.py) and
docs/results.md is rebuilt.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

import attnkit
from attnkit.app.api import evaluate, train
from attnkit.data.batching import pad_batch
from attnkit.tasks import seq2seq
from report import ROOT, command_line, machine, peak_rss_mb, publish

BEAMS = (1, 5)


def _train_record(out: Path) -> dict:
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    train_rows = [r for r in rows if "tokens_per_s" in r]
    evals = [r for r in rows if any(k.startswith("val_") for k in r)]
    return {
        "steps": train_rows[-1]["step"] if train_rows else 0,
        "epochs": (train_rows[-1]["epoch"] + 1) if train_rows else 0,
        "train_minutes": round(train_rows[-1]["elapsed_s"] / 60, 1) if train_rows else 0,
        "tokens_per_s": round(statistics.median(r["tokens_per_s"] for r in train_rows)),
        "val_log": [  # the training's evaluations
            {k: v for k, v in r.items() if k in ("step", "epoch", "val_bleu", "val_loss")}
            for r in evals
        ],
    }


def throughput(predictor, sources: list[str], beam: int, use_cache: bool) -> float:
    """Sentences per second decoding ``sources`` in batches of 32."""
    tk, model = predictor.tokenizer, predictor.model
    ids = tk.encode_batch(sources, max_len=predictor.max_len)
    start = time.perf_counter()
    with torch.no_grad():
        for i in range(0, len(ids), 32):
            src, mask = pad_batch(ids[i : i + 32], tk.pad_id)
            seq2seq.decode(
                model, src, mask, tk.bos_id, tk.eos_id, tk.pad_id, predictor.max_len,
                beam=beam, use_cache=use_cache,
            )  # fmt: skip
    return len(ids) / (time.perf_counter() - start)


def measure_translate(out: Path, n_speed: int) -> dict:
    decodings = []
    for beam in BEAMS:
        report = evaluate(out, "test", beam=beam)
        decodings.append(
            {
                k: round(v, 2) if isinstance(v, float) else v
                for k, v in report.items()
                if k.startswith("bleu") or k == "decoding"
            }
        )
        print(f"{report['decoding']}: BLEU {report['bleu']:.2f}, lc {report['bleu_lowercase']:.2f}")
    predictor = attnkit.load(out)
    pairs = seq2seq.read_split(predictor.config, "test")[:n_speed]
    sources = [p.src for p in pairs]
    speed = []
    # a Transformer decodes with or without its KV cache; an LSTM's state is its cache
    caches = (True, False) if predictor.config.model.arch == "transformer" else (True,)
    for beam in BEAMS:
        base = None
        for cache in caches:
            sps = throughput(predictor, sources, beam, cache)
            label = ("yes" if cache else "no") if len(caches) == 2 else "recurrent state"
            row = {"decoding": f"beam {beam}" if beam > 1 else "greedy", "cache": label}
            row["sentences_per_s"] = round(sps, 2)
            if cache:
                base = sps
            elif base:
                speed[-1]["cache_speedup"] = round(base / sps, 2)
            speed.append(row)
            print(row)
    return {
        "test": {"loss": round(report["loss"], 4), "perplexity": round(report["perplexity"], 2)},
        "test_examples": report["num_examples"],
        "decodings": decodings,  # sacreBLEU on the test split, per decoding
        "throughput": speed,
        "throughput_sentences": len(sources),
    }


def measure_chat(out: Path, n_samples: int) -> dict:
    report = evaluate(out, "test")
    predictor = attnkit.load(out)
    pairs = seq2seq.read_split(predictor.config, "test")
    seen, picked = set(), []
    step = max(1, len(pairs) // (n_samples * 3))
    for p in pairs[::step]:  # spread over the split, one answer per distinct question
        if p.src not in seen:
            seen.add(p.src)
            picked.append(p)
        if len(picked) == n_samples:
            break
    answers = predictor.translate([p.src for p in picked], beam=1)  # greedy: reproducible
    return {
        "test": {"loss": round(report["loss"], 4), "perplexity": round(report["perplexity"], 2)},
        "test_examples": report["num_examples"],
        "test_tokens": report["num_tokens"],
        "sampling": "greedy decoding",
        "samples": [
            {"question": p.src, "answer": a, "reference": p.tgt}
            for p, a in zip(picked, answers, strict=True)
        ],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config")
    parser.add_argument("--name", help="result name (default: the recipe's file name)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--skip-train", action="store_true", help="measure runs/bench-NAME as is")
    parser.add_argument("--speed-sentences", type=int, default=256)
    args = parser.parse_args()
    name = args.name or Path(args.config).stem
    out = ROOT / "runs" / f"bench-{name}"
    if not args.skip_train:
        train(args.config, out=out, overrides=["training.progress=false", *args.set], force=True)
    cfg = json.loads((out / "config.json").read_text())
    m = cfg["model"]
    if m["arch"] == "transformer":
        model = f"Transformer {m['num_layers']}+{m['num_decoder_layers'] or m['num_layers']} " \
            f"d{m['d_model']} h{m['num_heads']} ff{m['d_ff']}"  # fmt: skip
    else:
        model = f"LSTM {m['num_layers']}-layer h{m['hidden_size']}, " \
            f"attention {m['attention'] or 'none'}"  # fmt: skip
    record = {
        "name": name,
        "kind": cfg["task"],
        "command": command_line("seq2seq.py", skip=("--skip-train",)),
        "dataset": cfg["data"]["name"],
        "model": model,
        "num_parameters": cfg["num_parameters"],
        **_train_record(out),
    }
    if cfg["task"] == "translate":
        record.update(measure_translate(out, args.speed_sentences))
    else:
        record.update(measure_chat(out, 10))
    record.update(peak_rss_mb=peak_rss_mb(), machine=machine(), date=time.strftime("%Y-%m-%d"))
    publish(record)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

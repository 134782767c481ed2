"""Language-model benchmarks (issue 16): GPT training, generation throughput and ELMo.

A GPT trained on a text, GPT generation throughput with and without the KV cache, and ELMo
(biLM perplexities; the sentiment classifier with and without ELMo features). Each
regenerates docs/results.md.

    python benchmarks/lm.py configs/shakespeare-char.yaml
    python benchmarks/lm.py configs/shakespeare-nanogpt-cpu.yaml
    python benchmarks/lm.py --generation runs/bench-shakespeare-char
    python benchmarks/lm.py --generation mini --name generation-gpt-mini   # random weights
    python benchmarks/lm.py --elmo

A recipe (task lm) trains into runs/bench-NAME and records the validation loss of the best
weights (re-evaluated in fp32 on the whole held-out split), perplexity, bits per character,
the best and last logged validation losses, when ``--target-loss`` (1.60 for Tiny
Shakespeare at character level) was first reached, steps, minutes, median tokens/s and a 200-token sample
(temperature 0.8, top-k 40, seed 0): kind "lm".

``--generation RUN|PRESET`` times greedy decoding of ``--new-tokens`` (128) tokens at batch
1 and 8, with the KV cache (one position per step) and without it (the whole sequence
recomputed each step, ``GPT.stepper(use_cache=False)``), median of ``--repeats`` after a
warm-up, under ``torch.inference_mode``: kind "generation". A preset (tiny | mini | small)
is a freshly initialised GPT (random weights time the same as trained ones).

``--elmo`` trains the biLM (configs/nsmc-bilm.yaml) into runs/bench-NAME-bilm, records its
forward / backward / mean validation perplexity, then trains the ELMo classifier
(configs/nsmc-elmo.yaml, frozen biLM + learned mix) into runs/bench-NAME and the same
classifier without ELMo (configs/nsmc-elmo-baseline.yaml, the biLM's tokenizer) into
runs/bench-NAME-baseline, with the same ``--set`` overrides; both are scored on the test
split, and the learned s_j and gamma are recorded: kind "elmo". The two classifier recipes
must agree on data and training (checked before anything trains).

``--runs DIR`` trains elsewhere than runs/ and ``--json PATH`` writes the record to PATH
without touching benchmarks/results or docs/results.md (for trial runs). The records'
schema: benchmarks/report.py.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

from attnkit.app.api import evaluate, load, train
from attnkit.models.gpt import GPT, PRESETS, GPTConfig
from attnkit.nn.generation import sample
from attnkit.tasks.run_config import load_config
from report import (
    ROOT,
    command_line,
    cpu_native_bf16,
    machine,
    peak_rss_mb,
    publish,
    run_precision,
    write_results_md,
)

SHAKESPEARE_TARGET = 1.60  # issue 16: validation loss <= 1.60 within 30 minutes
SAMPLE = {"max_new_tokens": 200, "temperature": 0.8, "top_k": 40, "seed": 0}
DEFAULT_PROMPT = {"tinyshakespeare": "ROMEO:"}
ELMO_RECIPES = {
    "bilm": "configs/nsmc-bilm.yaml",
    "elmo": "configs/nsmc-elmo.yaml",
    "baseline": "configs/nsmc-elmo-baseline.yaml",
}
QUIET = "training.progress=false"


def _rows(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]


def _speed(rows: list[dict]) -> int | None:
    """Median training tokens/s over the log windows (the first dropped as warm-up when
    there are others)."""
    speeds = [r["tokens_per_s"] for r in rows if "tokens_per_s" in r]
    if len(speeds) > 1:
        speeds = speeds[1:]
    return round(statistics.median(speeds)) if speeds else None


def _elapsed_minutes(rows: list[dict], step: int) -> float | None:
    """Training minutes at ``step`` (the last log row at or before it; evaluations before
    it included)."""
    times = [r["elapsed_s"] for r in rows if "elapsed_s" in r and r["step"] <= step]
    return round(max(times) / 60, 2) if times else None


def _sets(overrides: list[str]) -> str:
    """The overrides as ``attnkit train`` options (paths in this checkout made relative)."""
    text = "".join(f" --set {o}" for o in overrides if o != QUIET)
    return text.replace(f"{ROOT}/", "")


def _timed_train(config: str, out: Path, overrides: list[str]) -> tuple[Any, float]:
    start = time.perf_counter()
    result = train(config, out=out, overrides=[QUIET, *overrides], force=True)
    return result, time.perf_counter() - start


def _environment() -> dict:
    return {
        "threads": torch.get_num_threads(),
        "peak_rss_mb": peak_rss_mb(),
        "machine": machine(),
        "cpu_native_bf16": cpu_native_bf16(),
        "date": time.strftime("%Y-%m-%d"),
    }


# --------------------------------------------------------------------------------------
# GPT trained on a text (kind "lm")
# --------------------------------------------------------------------------------------
def lm_benchmark(
    config: str,
    name: str,
    overrides: list[str],
    runs: Path,
    target: float | None = None,
    prompt: str | None = None,
) -> dict:
    out = runs / f"bench-{name}"
    result, wall = _timed_train(config, out, overrides)
    rows = _rows(out)
    cfg = json.loads((out / "config.json").read_text())
    dataset, m, t = cfg["data"]["name"], cfg["model"], cfg["training"]
    if target is None and dataset == "tinyshakespeare" and cfg["tokenizer"]["kind"] == "char":
        target = SHAKESPEARE_TARGET  # nats per character: it applies to character models only
    evals = [r for r in rows if "val_loss" in r]
    best = min(evals, key=lambda r: r["val_loss"]) if evals else None
    reached = next((r for r in evals if r["val_loss"] <= target), None) if target else None
    # the best weights, re-scored in fp32 on the whole validation split (the Trainer's own
    # evaluations run under the recipe's autocast)
    final = evaluate(out, "validation")
    predictor = load(out)
    prompt = DEFAULT_PROMPT.get(dataset, "") if prompt is None else prompt
    options = {k: v for k, v in SAMPLE.items() if k != "max_new_tokens"}
    text = predictor.generate(prompt, max_new_tokens=SAMPLE["max_new_tokens"], **options)[0].text
    return {
        "kind": "lm",
        "name": name,
        "command": command_line("lm.py"),
        "recipe": config,
        "dataset": dataset,
        "tokenizer": cfg["tokenizer"].get("kind"),
        "vocab_size": cfg["vocab_size"],
        "model": {
            "num_layers": m["num_layers"],
            "d_model": m["d_model"],
            "num_heads": m["num_heads"],
            "d_ff": m["d_ff"],
            "context": m["max_len"],
            "dropout": m["dropout"],
        },
        "num_parameters": cfg["num_parameters"],
        "batch_size": t["batch_size"],
        "precision": run_precision(cfg),
        "bf16": run_precision(cfg) == "bf16",
        "steps": result.step,
        "train_tokens": result.step * t["batch_size"] * m["max_len"],  # at most (packed blocks)
        "train_minutes": round(result.train_seconds / 60, 2),
        "total_minutes": round(wall / 60, 2),
        "tokens_per_s": _speed(rows),
        "validation": {  # the best weights on the whole held-out split, in fp32
            "loss": round(final["loss"], 4),
            "perplexity": round(final["perplexity"], 3),
            "bits_per_char": round(final["bits_per_char"], 4),
            "bits_per_token": round(final["bits_per_token"], 4),
        },
        "validation_tokens": final.get("num_tokens"),
        "best_val_loss": round(best["val_loss"], 4) if best else None,
        "best_step": best["step"] if best else None,
        "last_val_loss": round(evals[-1]["val_loss"], 4) if evals else None,
        "target_loss": target,
        "target_step": reached["step"] if reached else None,
        "target_minutes": _elapsed_minutes(rows, reached["step"]) if reached else None,
        "sample": {"prompt": prompt, "text": text, **SAMPLE},
        **_environment(),
    }


# --------------------------------------------------------------------------------------
# Generation throughput (kind "generation")
# --------------------------------------------------------------------------------------
def generation_model(target: str, vocab_size: int, max_len: int) -> tuple[GPT, str]:
    """The GPT of a trained lm run, or a freshly initialised one of a preset; and what it is."""
    path = Path(target)
    if (path / "config.json").is_file():
        model = load(path).model
        if not isinstance(model, GPT):
            raise SystemExit(f"lm.py: error: {target} is not a GPT (task lm) run")
        return model.eval(), f"`{target}`"
    if target in PRESETS:
        torch.manual_seed(0)
        config = {"preset": target, "vocab_size": vocab_size, "max_len": max_len}
        return GPT(GPTConfig.from_dict(config)).eval(), f"preset {target}, random weights"
    raise SystemExit(
        f"lm.py: error: --generation takes a task-lm run directory or a preset "
        f"({', '.join(PRESETS)}), got {target!r}"
    )


def decode(model: GPT, prompt: torch.Tensor, new_tokens: int, use_cache: bool) -> torch.Tensor:
    """Greedy decoding of exactly ``new_tokens`` tokens after ``prompt`` (B, T) (no EOS stop:
    every row runs to the end); the stepper reads the prompt (the cache's prefill) here."""
    with torch.inference_mode():
        stepper = model.stepper(prompt, use_cache=use_cache)
        return sample(stepper, prompt[:, -1], new_tokens, eos_id=None, temperature=0.0)


def generation_speed(
    model: GPT, batch: int, prompt_len: int, new_tokens: int, use_cache: bool, repeats: int
) -> tuple[float, torch.Tensor]:
    """(Median tokens/s over ``repeats`` timed runs after one warm-up, the tokens)."""
    g = torch.Generator().manual_seed(batch)
    prompt = torch.randint(0, model.config.vocab_size, (batch, prompt_len), generator=g)
    tokens = decode(model, prompt, new_tokens, use_cache)  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        decode(model, prompt, new_tokens, use_cache)
        times.append(time.perf_counter() - start)
    return batch * new_tokens / statistics.median(times), tokens


def generation_benchmark(
    target: str,
    name: str,
    batches: list[int],
    prompt_len: int,
    new_tokens: int,
    repeats: int,
    vocab_size: int,
    max_len: int,
) -> dict:
    model, source = generation_model(target, vocab_size, max_len)
    c = model.config
    results, same = [], True
    for batch in batches:
        cached, a = generation_speed(model, batch, prompt_len, new_tokens, True, repeats)
        plain, b = generation_speed(model, batch, prompt_len, new_tokens, False, repeats)
        same = same and torch.equal(a, b)
        results.append(
            {
                "batch": batch,
                "cache_tokens_per_s": round(cached, 1),
                "no_cache_tokens_per_s": round(plain, 1),
                "cache_speedup": round(cached / plain, 2),
            }
        )
        print(f"batch {batch}: {cached:,.1f} tokens/s with the KV cache, {plain:,.1f} without")
    return {
        "kind": "generation",
        "name": name,
        "command": command_line("lm.py"),
        "source": source,
        "model": {
            "num_layers": c.num_layers,
            "d_model": c.d_model,
            "num_heads": c.num_heads,
            "d_ff": c.d_ff,
            "context": c.max_len,
        },
        "vocab_size": c.vocab_size,
        "num_parameters": sum(p.numel() for p in model.parameters()),
        "decoding": "greedy",
        "prompt_tokens": prompt_len,
        "new_tokens": new_tokens,
        # the sequence outgrows the context: both paths then recompute a sliding window
        "window_slides": prompt_len - 1 + new_tokens > c.max_len,
        "repeats": repeats,
        "same_tokens": same,  # greedy output identical with and without the cache
        "results": results,
        **_environment(),
    }


# --------------------------------------------------------------------------------------
# ELMo (kind "elmo")
# --------------------------------------------------------------------------------------
def budget_differences(elmo: str, baseline: str, overrides: list[str], bilm: Path) -> list[str]:
    """The data / training settings in which the two classifier recipes (with ``overrides``)
    differ: none, for a fair comparison."""
    a = load_config(elmo, [f"model.init_from={bilm}", *overrides]).to_dict()
    b = load_config(baseline, [f"tokenizer.path={bilm / 'tokenizer.json'}", *overrides]).to_dict()
    out = []
    for section in ("task", "data", "training"):
        x, y = a[section], b[section]
        if not isinstance(x, dict):
            out += [f"{section}: {x!r} vs {y!r}"] if x != y else []
            continue
        out += [
            f"{section}.{k}: {x.get(k)!r} vs {y.get(k)!r}"
            for k in sorted(set(x) | set(y))
            if x.get(k) != y.get(k)
        ]
    return out


def _classifier(config: str, out: Path, overrides: list[str]) -> dict:
    result, wall = _timed_train(config, out, overrides)
    cfg = json.loads((out / "config.json").read_text())
    report = evaluate(out, "test")
    model = load(out).model
    record = {
        "recipe": config,
        "command": f"attnkit train {config}{_sets(overrides)} --out {_rel(out)}",
        "arch": cfg["model"]["arch"],
        "num_parameters": cfg["num_parameters"],
        "trainable_parameters": sum(p.numel() for p in model.parameters() if p.requires_grad),
        "test": {
            "accuracy": round(report["accuracy"], 4),
            "macro_f1": round(report["macro_f1"], 4),
        },
        "test_examples": report["num_examples"],
        "best_val_metric": result.best_metric,
        "steps": result.step,
        "train_minutes": round(result.train_seconds / 60, 2),
        "total_minutes": round(wall / 60, 2),
        "tokens_per_s": _speed(_rows(out)),
    }
    if hasattr(model, "mix_weights"):
        weights, gamma = model.mix_weights()
        record["mix_s"] = [round(w, 4) for w in weights]  # softmax(s_j), token layer first
        record["mix_gamma"] = round(gamma, 4)
    return record


def _rel(path: Path) -> str:
    """runs/... for the default runs folder, else the path as given."""
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return str(path)


def elmo_benchmark(
    name: str,
    recipes: dict[str, str],
    bilm_overrides: list[str],
    overrides: list[str],
    runs: Path,
) -> dict:
    bilm_dir = runs / f"bench-{name}-bilm"
    differences = budget_differences(recipes["elmo"], recipes["baseline"], overrides, bilm_dir)
    if differences:  # checked before an hour of training, not after
        raise SystemExit(
            "lm.py: error: the ELMo and baseline recipes differ in " + "; ".join(differences)
        )
    result, wall = _timed_train(recipes["bilm"], bilm_dir, bilm_overrides)
    rows = _rows(bilm_dir)
    cfg = json.loads((bilm_dir / "config.json").read_text())
    evals = [r for r in rows if "val_loss" in r]
    best = min(evals, key=lambda r: r["val_loss"])
    bilm = {
        "recipe": recipes["bilm"],
        "command": f"attnkit train {recipes['bilm']}{_sets(bilm_overrides)} --out {_rel(bilm_dir)}",
        "dataset": cfg["data"]["name"],
        "vocab_size": cfg["vocab_size"],
        "num_layers": cfg["model"]["num_layers"],
        "hidden_size": cfg["model"]["hidden_size"],
        "num_parameters": cfg["num_parameters"],
        "steps": result.step,
        "best_step": best["step"],
        "train_minutes": round(result.train_seconds / 60, 2),
        "total_minutes": round(wall / 60, 2),
        "tokens_per_s": _speed(rows),
        "validation": {  # its best evaluation (best_step)
            "forward_perplexity": round(best["val_forward_perplexity"], 2),
            "backward_perplexity": round(best["val_backward_perplexity"], 2),
            "perplexity": round(best["val_perplexity"], 2),
            "loss": round(best["val_loss"], 4),
        },
    }
    elmo = _classifier(
        recipes["elmo"], runs / f"bench-{name}", [f"model.init_from={bilm_dir}", *overrides]
    )
    baseline = _classifier(
        recipes["baseline"],
        runs / f"bench-{name}-baseline",
        [f"tokenizer.path={bilm_dir / 'tokenizer.json'}", *overrides],
    )
    same_tokenizer = (runs / f"bench-{name}" / "tokenizer.json").read_bytes() == (
        runs / f"bench-{name}-baseline" / "tokenizer.json"
    ).read_bytes()
    return {
        "kind": "elmo",
        "name": name,
        "command": command_line("lm.py"),
        "bilm": bilm,
        "elmo": elmo,
        "baseline": baseline,
        "accuracy_gain": round(elmo["test"]["accuracy"] - baseline["test"]["accuracy"], 4),
        "same_budget": elmo["steps"] == baseline["steps"] and same_tokenizer,
        **_environment(),
    }


# --------------------------------------------------------------------------------------
def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", help="a task-lm recipe to train and measure")
    parser.add_argument("--name", help="result name (default: from the recipe / run / preset)")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="recipe override (--elmo: for both classifiers)",
    )
    parser.add_argument("--target-loss", type=float, help="record when val loss first <= this")
    parser.add_argument("--prompt", help="the sample's prompt (default: ROMEO: / empty)")
    gen = parser.add_argument_group("generation throughput")
    gen.add_argument("--generation", metavar="RUN|PRESET", help="a task-lm run or a GPT preset")
    gen.add_argument("--batch", type=int, action="append", help="batch sizes (default 1 and 8)")
    gen.add_argument("--new-tokens", type=int, default=128)
    gen.add_argument("--prompt-tokens", type=int, default=1, help="prompt length (random ids)")
    gen.add_argument("--repeats", type=int, default=3, help="timed runs (median) after a warm-up")
    gen.add_argument("--vocab-size", type=int, default=8000, help="a preset's vocabulary")
    gen.add_argument("--max-len", type=int, default=256, help="a preset's context")
    elmo = parser.add_argument_group("ELMo")
    elmo.add_argument("--elmo", action="store_true", help="biLM, ELMo classifier and baseline")
    elmo.add_argument("--bilm-set", action="append", default=[], metavar="KEY=VALUE")
    for key, recipe in ELMO_RECIPES.items():
        elmo.add_argument(f"--{key}-config", default=recipe, metavar="CONFIG")
    parser.add_argument("--runs", type=Path, default=ROOT / "runs", help="where runs go")
    parser.add_argument("--json", type=Path, help="write the record here, not to results/")
    parser.add_argument("--only-docs", action="store_true", help="just rebuild docs/results.md")
    args = parser.parse_args()
    if args.only_docs:
        print(f"wrote {write_results_md()}")
        return 0
    modes = [bool(args.config), bool(args.generation), args.elmo]
    if sum(modes) != 1:
        parser.error("give one of: a recipe, --generation RUN|PRESET, --elmo")
    if args.generation and args.set:
        parser.error("--set applies to training; --generation trains nothing")
    args.runs = args.runs.resolve()
    if args.config:
        name = args.name or Path(args.config).stem
        record = lm_benchmark(args.config, name, args.set, args.runs, args.target_loss, args.prompt)
    elif args.generation:
        target = args.generation.rstrip("/")
        stem = Path(target).name.removeprefix("bench-")
        name = args.name or f"generation-{stem if stem not in PRESETS else 'gpt-' + stem}"
        record = generation_benchmark(
            target,
            name,
            args.batch or [1, 8],
            args.prompt_tokens,
            args.new_tokens,
            args.repeats,
            args.vocab_size,
            args.max_len,
        )
    else:
        recipes = {k: getattr(args, f"{k}_config") for k in ELMO_RECIPES}
        record = elmo_benchmark(
            args.name or "elmo-nsmc", recipes, args.bilm_set, args.set, args.runs
        )
    if args.json:
        args.json.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n")
        print(json.dumps(record, indent=2, ensure_ascii=False))
        print(f"wrote {args.json} (benchmarks/results and docs/results.md untouched)")
    else:
        publish(record)
    return 0


if __name__ == "__main__":
    sys.exit(main())

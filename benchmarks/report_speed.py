"""The speed sections of docs/results.md (benchmarks/report.py renders the page): the
server's load, attnkit against its peers, the recipes' training throughput, threads,
start-up, nanoGPT's recipe, the explainer's rendering, int8 inference. One function per
kind of record; ``sections(rows)`` gives them in the page's order."""

from __future__ import annotations

from collections.abc import Callable

from report_tables import Col, command, notes, num, table, yes_no


def sections(rows: list[dict]) -> list[str]:
    """The lines of every speed section, in the page's order."""
    lines: list[str] = []
    for section in (_serve, _speed_ratios, _recipe_speed, _threads, _startup, _nanogpt,
                    _explain, _quantize):  # fmt: skip
        lines += section(rows)
    return lines


def _rate(r: dict) -> str:
    """Requests per second, and tokens per second for a generation load."""
    tokens = f" ({r['tokens_per_s']:,.0f} tokens/s)" if "tokens_per_s" in r else ""
    return f"{r['requests_per_s']:,}{tokens}"


def _tokens(r: dict) -> str:
    """A generation load's tokens per request: " (48 tokens)", or " (6-48 tokens)" varied."""
    if "new_tokens" not in r:
        return ""
    n = r["new_tokens"]
    return (
        f" ({max(1, round(n / 8))}-{n} tokens)" if r.get("new_tokens_varied") else f" ({n} tokens)"
    )


def _clients(r: dict) -> str:
    """Concurrent clients (closed loop), or the open loop's arrival rate."""
    if "arrivals_per_s" in r:
        return f"open loop, {r['arrivals_per_s']:g}/s"
    return f"{r['concurrency']:,}"


SERVE = [
    Col("name", "name"),
    Col("model", "model"),
    Col("endpoint", lambda r: r["endpoint"] + _tokens(r)),
    num("requests", "requests", ","),
    num("texts / request", "texts_per_request"),
    Col("concurrent", _clients, right=True),
    num("errors", "errors"),
    Col("req/s", _rate, right=True),
    num("p50 ms", "latency_ms_p50"),
    num("p90 ms", "latency_ms_p90"),
    num("p99 ms", "latency_ms_p99"),
    num("max ms", "latency_ms_max"),
    Col(
        "server RSS before -> after (MB)",
        lambda r: f"{r['server_rss_mb_before']:,} -> {r['server_rss_mb_after']:,}",
    ),
    command(),
]


def _serve(rows: list[dict]) -> list[str]:
    load = [r for r in rows if r.get("kind") == "serve"]
    if not load:
        return []
    lines = [
        "## Serving (attnkit serve) under load",
        "",
        "`attnkit serve RUN` in its own process on loopback; a fixed number of requests from "
        "N concurrent clients (httpx, or `--client raw`: a minimal HTTP client that leaves "
        "the 2 cores to the server), then it stops. Latency is per request, as the client "
        "sees it (queueing at the server included). Concurrent classify / tag requests are "
        "batched into one forward (`--batch-size`, default 16; `--batch-wait-ms`, default "
        "2), concurrent generate requests into one forward a token (each prompt leaves the "
        "batch when it is done); *unbatched* rows ran with `--batch-size 1`. Memory: the server process's "
        "resident set before and after the load.",
        "",
        *table(load, SERVE),
    ]
    return [*lines, ""]


def _ratio_what(r: dict) -> str:
    same = r.get("same_tokens")
    return r["what"] + ("" if same is None else f" (same tokens: {'yes' if same else 'NO'})")


def _peak_share(key: str) -> Callable[[dict], str]:
    return lambda r: f"{r[key] * 100:.1f}%" if key in r else "-"


SPEED_RATIOS = [
    Col("what", _ratio_what),
    Col("shape", "shape"),
    Col("dtype", "dtype"),
    num("batch", "batch"),
    Col("attnkit", "attnkit"),
    num("attnkit ms", "attnkit_ms", ",.1f"),
    Col("peer", "peer"),
    num("peer ms", "peer_ms", ",.1f"),
    Col("ratio", lambda r: f"**{r['ratio']:.2f}x**", right=True),
    Col("target", lambda r: "-" if r["target"] is None else f"{r['target']:g}x", right=True),
    Col("met", lambda r: "-" if r["met"] is None else yes_no(r["met"])),
    Col("attnkit % peak", _peak_share("attnkit_peak_fraction"), right=True),
    Col("peer % peak", _peak_share("peer_peak_fraction"), right=True),
    Col("note", lambda r: r.get("note", "")),
]


def _speed_ratios(rows: list[dict]) -> list[str]:
    """Issue 17's comparison with the peers (benchmarks/speed.py, kind "speed_ratios")."""
    runs = [r for r in rows if r.get("kind") == "speed_ratios"]
    if not runs:
        return []
    lines = [
        "## Speed against the peers (transformers, torch.nn)",
        "",
        "*ratio* = the peer's median time / attnkit's (> 1: attnkit is faster), both from one "
        "run that alternates their timed iterations after a warm-up; *target*: issue 17's. "
        "*% peak*: the model FLOPs of one call (counted once on attnkit's model with "
        "`torch.utils.flop_counter`, forward + backward for training) per second, as a "
        "fraction of this machine's matmul peak in that dtype, measured by the same script. "
        "Each contender's exact settings are listed below its table.",
        "",
    ]
    for run in runs:
        flags = ", ".join(f"{k} {yes_no(v)}" for k, v in run["cpu_flags"].items())
        peak = run["peak_gflops"]
        lines += [
            f"**{run['name']}** ({run['date']}): "
            + (f"GPU {run['gpu']} ({run['device']}); " if run.get("gpu") else "")
            + f"{run['cpu']}, {run['threads']} threads; "
            f"{flags}; native bf16: {yes_no(run['cpu_native_bf16'])}; matmul peak "
            + ", ".join(f"{k} {v:,} GFLOP/s" for k, v in peak.items())
            + f" ({run['matmul']}); "
            f"{run['minutes']} min. Common settings: {run['common']}. Command: "
            f"`{run['command']}`",
            "",
            *table(run["rows"], SPEED_RATIOS),
        ]
        settings: dict[tuple[str, str], None] = {}  # (contender, its settings), in order
        for r in run["rows"]:
            settings[r["attnkit"], r["attnkit_settings"]] = None
            settings[r["peer"], r["peer_settings"]] = None
        lines += ["", "Settings:", ""]
        lines += [f"- {name}: {text}" for name, text in settings]
        lines.append("")
        if run.get("plot"):
            plot = run["plot"].removeprefix("docs/")
            lines += [f"![attnkit / peer time ratios, {run['name']}]({plot})", ""]
    return lines + notes("speed")


def _recipe_speed_columns(target: float | None) -> list[Col]:
    def met(r: dict) -> str:
        return yes_no(r["speedup"] >= target) if target else "-"

    def each(r: dict) -> str:
        return "; ".join(f"{k}: {', '.join(f'{v:,}' for v in vs)}" for k, vs in r["runs"].items())

    return [
        Col("recipe", "recipe"),
        num("before tokens/s", "before_tokens_per_s", ","),
        num("after tokens/s", "after_tokens_per_s", ","),
        Col("speedup", lambda r: f"**{r['speedup']:.2f}x**", right=True),
        Col("target", lambda r: f"{target:g}x" if target else "-", right=True),
        Col("met", met),
        Col("runs", each),
    ]


def _recipe_speed(rows: list[dict]) -> list[str]:
    """Issue 17's end-to-end figure (benchmarks/recipe_speed.py, kind "recipe_speed")."""
    lines = []
    for run in (r for r in rows if r.get("kind") == "recipe_speed"):
        flags = ", ".join(f"{k} {yes_no(v)}" for k, v in run["cpu_flags"].items())
        setting = ", ".join(f"`{o}`" for o in run.get("after_overrides") or [])
        title = (
            f"## Training throughput of the recipes with {setting} (after) and without (before)"
            if setting
            else "## Training throughput of the recipes, before and after issue 17"
        )
        lines += [
            title,
            "",
            f"The same recipe, data and settings trained {run['steps']} steps by the code of "
            f"`{run['before']}` (before) and of `{run['after']}` (after), alternately, "
            f"{run['rounds']} runs each, every run in its own process; tokens/s = the "
            "Trainer's median over its log windows (the first dropped), then the median over "
            f"the runs. {run['cpu']}, {run['threads']} threads; {flags}; {run['minutes']} min. "
            f"Command: `{run['command']}`",
            "",
            *table(run["rows"], _recipe_speed_columns(run["target"])),
            "",
        ]
    return lines


THREADS = [
    Col("machine state", "condition"),
    num("1 thread tokens/s", "one", ","),
    num("2 threads tokens/s", "two", ","),
    Col("2 / 1", lambda r: f"{r['two'] / r['one']:.2f}x", right=True),
]


def _threads(rows: list[dict]) -> list[str]:
    """1 vs 2 torch threads, quiet and with one core busy (benchmarks/threads.py)."""
    lines = []
    for run in (r for r in rows if r.get("kind") == "threads"):
        speed = {(r["condition"], r["threads"]): r["tokens_per_s"] for r in run["rows"]}
        cells = [
            {"condition": c, "one": speed.get((c, 1)), "two": speed.get((c, 2))}
            for c in ("quiet", "busy")
        ]
        lines += [
            f"## Threads: {run['recipe']} with 1 and 2 torch threads",
            "",
            f"{run['steps']} training steps in fp32 per cell, tokens/s = the Trainer's median "
            "over its log windows (the first dropped); busy = another process spinning on one "
            f"core meanwhile. {run['usable_cores']} usable cores; {run['machine']}; "
            f"{run['date']}. Command: `{run['command']}`",
            "",
            *table([c for c in cells if c["one"] and c["two"]], THREADS),
            "",
        ]
    return lines


STARTUP = [
    Col("kernels", "kernels"),
    num("python -c 'import torch' s", "import_torch_s", ".2f"),
    num("attnkit predict RUN TEXT s", "predict_s", ".2f"),
    num("predict - import torch s", "over_torch_s", ".2f"),
    Col("heavy modules imported", lambda r: ", ".join(r["heavy_imports"]) or "none"),
    Col("machine, date", lambda r: f"{r['machine']}; {r['date']}"),
]


def _startup(rows: list[dict]) -> list[str]:
    """One sentence through ``attnkit predict``, whole processes (benchmarks/startup.py)."""
    runs = [r for r in rows if r.get("kind") == "startup"]
    if not runs:
        return []
    return [
        "## Start-up: one sentence through `attnkit predict`",
        "",
        "Whole processes, the two commands alternating; each figure the median of "
        f"{runs[0]['repeats']} processes (target: predict <= import torch + 0.5 s). Heavy "
        "modules: which of torch._dynamo, sympy, matplotlib, transformers, fastapi, "
        "onnxruntime the predict process imported. Commands: "
        + "; ".join(f"`{r['command']}`" for r in runs),
        "",
        *table(runs, STARTUP),
        "",
    ]


NANOGPT = [
    Col("kernels", "kernels"),
    num("steps", "steps"),
    num("nanoGPT s", "median_s.nanogpt", ".1f"),
    num("attnkit fp32 s", "median_s.attnkit_fp32", ".1f"),
    Col("attnkit auto s", lambda r: f"{r['median_s']['attnkit_auto']:.1f} ({r['auto_precision']})"),
    Col("speed-up fp32 / auto", lambda r: f"{r['speedup_fp32']:.2f}x / {r['speedup_auto']:.2f}x"),
    Col(
        "val loss nanoGPT / fp32 / auto",
        lambda r: " / ".join(
            f"{min(r['validation_loss'][k]):.3f}"
            for k in ("nanogpt", "attnkit_fp32", "attnkit_auto")
        ),
    ),
    Col("machine, date", lambda r: f"{r['machine']}; {r['date']}"),
]


def _nanogpt(rows: list[dict]) -> list[str]:
    """attnkit and nanoGPT's own train.py on its CPU recipe (benchmarks/nanogpt_pairs.py)."""
    runs = [r for r in rows if r.get("kind") == "nanogpt_pairs"]
    if not runs:
        return []
    return [
        "## Small models: nanoGPT's CPU recipe, whole processes",
        "",
        "nanoGPT's train.py (its README's CPU command) and `attnkit train "
        "configs/shakespeare-nanogpt-cpu.yaml` for the same steps, the three alternating; "
        "each figure the median wall time of the rounds (target: attnkit >= 1.5x). "
        "Validation loss: nanoGPT's estimate on 20 random batches, attnkit's on the whole "
        "held-out 10% (lowest of the rounds). Commands: "
        + "; ".join(f"`{r['command']}`" for r in runs),
        "",
        *table(runs, NANOGPT),
        "",
    ]


EXPLAIN = [
    Col("model", "model"),
    num("heads", "heads"),
    num("trace s", "trace_s", ".3f"),
    num("render s", "render_s", ".3f"),
    num("capture + render s", "capture_and_render_s", ".3f"),
    num("HTML MB", "html_mb", ".2f"),
    Col("float16 arrays", "float16"),
]
EXPLAIN_MODELS = (("classifier", "Transformer classifier"), ("lm", "GPT (task lm)"))


def _explain(rows: list[dict]) -> list[str]:
    """The explorer page's cost (benchmarks/explain_render.py), per number of heads."""
    lines = []
    for run in (r for r in rows if r.get("kind") == "explain"):
        cells = [
            {**size[name], "model": label, "heads": size["heads"],
             "html_mb": size[name]["html_bytes"] / 1e6,
             "float16": ", ".join(size[name].get("float16") or []) or "none"}
            for size in run["runs"] for name, label in EXPLAIN_MODELS if name in size
        ]  # fmt: skip
        targets = run["targets"]
        lines += [
            "## Explainer: capturing a forward pass and rendering its page",
            "",
            "`attnkit explain --html` for one 128-token text through a 6-layer model "
            "(d_model 256, d_ff 1024, random init: time and size do not depend on the "
            "weights): trace = capture + building + base64 (`attnkit.app.explain.trace`), "
            "render = the self-contained HTML (script, style, Korean font subset made anew, "
            f"data); median of {run['repeats']} after a warm-up. Targets: under "
            f"{targets['capture_and_render_s']:g} s and {targets['html_bytes'] / 1e6:g} MB. "
            f"{run['machine']}; {run['date']}. Command: `{run['command']}`",
            "",
            *table(cells, EXPLAIN),
            "",
        ]
    return lines


QUANTIZE = [
    Col("run", "run"),
    Col("split", "split"),
    Col("weights", "weights"),
    num("accuracy", "accuracy"),
    num("macro-F1", "macro_f1", ".4f"),
    num("evaluate s", "evaluate_seconds"),
    num("latency ms", "latency_ms_batch1"),
    num("weights MB", "weights_mb"),
    Col("command", "command"),
]


def _quantize_rows(r: dict) -> list[dict]:
    """fp32, int8 and onnx weights of a run, then the change from fp32 of each."""
    rows = [
        {
            **r[label],
            "run": r["run"],
            "split": r["split"],
            "weights": label,
            "accuracy": f"{r[label]['accuracy']:.4f}",
            "command": f"`{r['command']}`",
        }
        for label in ("fp32", "int8", "onnx")
        if label in r  # (records from before the ONNX export have no onnx)
    ]
    rows.append(
        {
            "weights": "int8 change",
            "accuracy": f"{r['accuracy_change']:+.4f}",
            "evaluate_seconds": f"{r['evaluate_speedup']}x faster",
            "latency_ms_batch1": f"{r['latency_speedup']}x faster",
            "command": f"{r['threads']} threads, {r['date']}",
        }
    )
    if "onnx" in r:
        rows.append(
            {
                "weights": "onnx change",
                "accuracy": f"{r['onnx_accuracy_change']:+.4f}",
                "evaluate_seconds": f"{r['onnx_evaluate_speedup']}x faster",
                "latency_ms_batch1": f"{r['onnx_latency_speedup']}x faster",
                "command": f"onnxruntime {r['onnxruntime']}; logits within "
                f"{r['onnx_max_abs_diff']:.1e} of PyTorch's at export",
            }
        )
    return rows


def _quantize(rows: list[dict]) -> list[str]:
    """int8 vs float weights of a run (benchmarks/quantize.py, kind "quantize")."""
    runs = [r for r in rows if r.get("kind") == "quantize"]
    if not runs:
        return []
    lines = [
        "## int8 quantization and ONNX (CPU inference)",
        "",
        "`attnkit export RUN --quantize int8`: every Linear layer dynamically quantized "
        "(int8 weights per output channel, activations per batch); `attnkit export RUN "
        "--format onnx`: the float model as an ONNX graph run by onnxruntime (*onnx*). Each "
        "evaluated on the same split as the float PyTorch run (*fp32*). *latency*: one text "
        "per `predict` call, median ms.",
        "",
        *table([row for r in runs for row in _quantize_rows(r)], QUANTIZE),
    ]
    return [*lines, ""]

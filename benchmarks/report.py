"""docs/results.md from benchmarks/results/*.json (one file per benchmark run).

Each benchmark script writes its JSON record and calls ``write_results_md()``; the tables
are rebuilt from every record, each row with the command that produced it, followed by the
hand-written notes in benchmarks/notes-*.md.

    python benchmarks/report.py        # rebuild docs/results.md only
"""

from __future__ import annotations

import json
import platform
import resource
import shlex
import statistics
import sys
from pathlib import Path

import torch

import attnkit

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"


def machine() -> str:
    """Where a benchmark ran: the recipes train on ``training.device: auto``, so on a machine
    with a GPU the row says which one."""
    from attnkit.device import resolve_device

    device = resolve_device("auto")
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else device.type
    return (
        f"{platform.machine()}, {where}, {torch.get_num_threads()} threads, "
        f"native bf16 {'yes' if device.type == 'cpu' and cpu_native_bf16() else 'no'}, "
        f"torch {torch.__version__}, attnkit {attnkit.__version__}"
    )


def cpu_native_bf16() -> bool:
    """True where the CPU computes bf16 natively (``avx512_bf16`` or ``amx_bf16`` in
    /proc/cpuinfo); elsewhere bf16 autocast is emulated and slower than fp32."""
    from attnkit.device import cpu_has_native_bf16

    return cpu_has_native_bf16()


def run_precision(run_config: dict) -> str:
    """The precision a run trained in (fp32 | bf16 | fp16): what training recorded in its
    config.json (``training.bf16: auto`` decides per machine), else read off the recipe."""
    if run_config.get("precision"):
        return run_config["precision"]
    t = run_config["training"]
    return "fp16" if t.get("fp16") else "bf16" if t.get("bf16") is True else "fp32"


def peak_rss_mb() -> int:
    """The largest resident set of this process or of any child it waited for (MB)."""
    usage = (
        resource.getrusage(who).ru_maxrss
        for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )
    return round(max(usage) / 1024)


def save(record: dict) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{record['name']}.json"
    path.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def command_line(script: str, skip: tuple[str, ...] = ()) -> str:
    """How this benchmark was started: ``python benchmarks/SCRIPT`` + its arguments (minus
    ``skip``), the command written next to every result."""
    args = (shlex.quote(a) for a in sys.argv[1:] if a not in skip)
    return " ".join([f"python benchmarks/{script}", *args])


def publish(record: dict) -> None:
    """Save ``record``, print it, and rebuild docs/results.md."""
    save(record)
    print(json.dumps(record, indent=2, ensure_ascii=False))
    print(f"wrote {write_results_md()}")


def train_tokens_per_s(config: str, out: Path, overrides: list[str]) -> float:
    """Train ``config`` with ``overrides`` into ``out`` and return the median training
    tokens/s the Trainer logged (the first log window dropped as warm-up)."""
    from attnkit.api import train

    train(config, out=out, overrides=overrides, force=True, log=lambda *_: None)
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    return statistics.median([r["tokens_per_s"] for r in rows if "tokens_per_s" in r][1:])


def _notes(name: str) -> list[str]:
    path = ROOT / "benchmarks" / f"notes-{name}.md"
    return [path.read_text(encoding="utf-8").strip(), ""] if path.is_file() else []


def _recipe_init_from(command: str) -> str | None:
    """``model.init_from`` of the recipe a benchmark command names (``configs/X.yaml``)."""
    import yaml

    recipe = next((w for w in shlex.split(command) if w.endswith(".yaml")), None)
    if recipe is None or not (ROOT / recipe).is_file():
        return None
    raw = yaml.safe_load((ROOT / recipe).read_text(encoding="utf-8")) or {}
    return (raw.get("model") or {}).get("init_from")


def _sentiment(rows: list[dict]) -> list[str]:
    lines = [
        "## Sentiment analysis (test split)",
        "",
        "Start: `scratch` = random initialisation; `MLM` = the encoder was first pretrained "
        "as a masked language model on the dataset's unlabelled reviews (`--pretrain`), in "
        "the same command; `ELECTRA` = pretrained the same way by replaced-token detection "
        "(`model.objective: electra`); an ensemble (`--ensemble`) averages the probabilities of "
        "several classifiers, *train min* summing their training. "
        "*pretrain min* + *train min* = the training time of the recipe; "
        "*total min* adds reading data, tokenizer training and evaluation.",
        "",
        "| run | dataset | model | params | start | bf16 | test acc | macro-F1 | pretrain min "
        "| train min | total min | tokens/s | peak RSS MB | command |",
        "| --- | --- | --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| --- |",
    ]
    for r in rows:
        if "test_accuracy" not in r:
            continue
        pre = r.get("pretrain_minutes")
        if pre is None:  # (records written before init_from was recorded: their recipe's)
            init = r.get("init_from", _recipe_init_from(r["command"]))
            start = f"`{init}`" if init else "scratch"
        elif r.get("pretrain_objective") == "electra":
            start = (
                f"ELECTRA, {r['pretrain_steps']:,} steps (generator val loss "
                f"{r['pretrain_val_loss']}, RTD acc {r['pretrain_val_rtd_accuracy']})"
            )
        else:
            start = f"MLM, {r['pretrain_steps']:,} steps (val loss {r['pretrain_val_loss']})"
        if r.get("ensemble"):  # each member's own test accuracy; the others are from scratch
            first, *others = r["ensemble"]
            start += f" [alone {first['test_accuracy']:.4f}]" + "".join(
                f" + {m['arch']} from scratch [alone {m['test_accuracy']:.4f}]" for m in others
            )
        total = round(r["total_minutes"] + r.get("pretrain_total_minutes", 0.0), 2)
        lines.append(
            f"| {r['name']} | {r['dataset']} | {r['arch']} | {r['num_parameters']:,} | {start} "
            f"| {'on' if r['bf16'] else 'off'} | {r['test_accuracy']:.4f} | {r['test_macro_f1']:.4f} "
            f"| {pre if pre is not None else '-'} | {r['train_minutes']} | {total} "
            f"| {r['tokens_per_s']:,} | {r['peak_rss_mb']:,} | `{r['command']}` |"
        )
    lines.append("")
    speed = [r for r in rows if r.get("kind") == "speed"]
    if speed:
        lines += [
            "### bf16 autocast vs fp32 (training tokens/s, same recipe and batches)",
            "",
            "| recipe | steps | fp32 tok/s | bf16 tok/s | bf16 / fp32 | CPU has native bf16 "
            "| threads | command |",
            "| --- | ---: | ---: | ---: | ---: | --- | ---: | --- |",
        ]
        for r in speed:
            lines.append(
                f"| {r['recipe']} | {r['steps']} | {r['fp32_tokens_per_s']:,} "
                f"| {r['bf16_tokens_per_s']:,} | {r['bf16_speedup']:.2f}x "
                f"| {'yes' if r['cpu_native_bf16'] else 'no'} | {r['threads']} "
                f"| `{r['command']}` |"
            )
        lines.append("")
    drop = [r for r in rows if r.get("kind") == "dropout_speed"]
    if drop:
        lines += [
            "### Dropout on the CPU (training tokens/s, same recipe and batches)",
            "",
            "`attention_dropout=0`: no dropout on the attention weights (the fused attention "
            "kernel runs); `dropout=0`: no dropout anywhere.",
            "",
            "| recipe | steps | as in the recipe | attention_dropout=0 | dropout=0 | threads "
            "| command |",
            "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
        ]
        for r in drop:
            t, x = r["tokens_per_s"], r["speedup"]
            lines.append(
                f"| {r['recipe']} | {r['steps']} | {t['recipe']:,} "
                f"| {t['attention_dropout=0']:,} ({x['attention_dropout=0']:.2f}x) "
                f"| {t['dropout=0']:,} ({x['dropout=0']:.2f}x) | {r['threads']} "
                f"| `{r['command']}` |"
            )
        lines.append("")
    return lines + _notes("sentiment")


def _start(r: dict) -> str:
    """How a BERT run started: pretrained in the same command, or from a run / checkpoint."""
    if "pretrain_steps" in r:
        nsp = r.get("pretrain_val_nsp_accuracy")
        return (
            f"{r['pretrain_arch']} on {r['pretrain_dataset']}, {r['pretrain_steps']:,} steps, "
            f"{r['pretrain_minutes']} min (val MLM acc {r['pretrain_val_mlm_accuracy']}"
            + (f", NSP acc {nsp}" if nsp is not None else "")
            + ")"
        )
    return f"`{r['init_from']}`" if r.get("init_from") else "scratch"


def _bert(rows: list[dict]) -> list[str]:
    bert = [r for r in rows if r.get("kind") == "bert"]
    if not bert:
        return []
    lines = [
        "## BERT: pretraining and fine-tuning (test split)",
        "",
        "*start*: where the encoder came from (a pretraining in the same command, with its "
        "validation masked-LM / next-sentence accuracy, or `model.init_from`); *mode*: "
        "fine-tuned end to end, or feature-based (frozen encoder, learned mix of its layers). "
        "*min*: training minutes (pretraining + fine-tuning).",
        "",
        "| run | task | dataset | model | params | start | mode | test metrics | min "
        "| tokens/s | native bf16 | command |",
        "| --- | --- | --- | --- | ---: | --- | --- | --- | ---: | ---: | --- | --- |",
    ]
    for r in bert:
        if "task" not in r:  # pretraining only
            lines.append(
                f"| {r['name']} | bert-pretrain | {r['pretrain_dataset']} | {r['pretrain_arch']} "
                f"| {r['pretrain_parameters']:,} | {_start(r)} | - | - "
                f"| {r['pretrain_minutes']} | {r['pretrain_tokens_per_s']:,} "
                f"| {'yes' if r.get('cpu_native_bf16') else 'no'} | `{r['command']}` |"
            )
            continue
        metrics = ", ".join(f"{k} {v}" for k, v in r["test"].items())
        minutes = round(r["train_minutes"] + r.get("pretrain_minutes", 0.0), 2)
        mode = "feature-based" if r["freeze_encoder"] else "fine-tuned"
        if "extra_train_examples" in r:  # self-training / distillation
            teachers = r["pseudo_teacher"]
            teachers = [teachers] if isinstance(teachers, str) else teachers
            mode += (
                f" + {r['extra_train_examples']:,} "
                + ("soft targets" if r.get("pseudo_soft") else "pseudo-labels")
                + f" from {' + '.join(f'`{t}`' for t in teachers)}"
                + f" ({r['pseudo_minutes']} min to label)"
            )
        lines.append(
            f"| {r['name']} | {r['task']} | {r['dataset']} | {r['arch']} "
            f"| {r['num_parameters']:,} | {_start(r)} "
            f"| {mode} | {metrics} "
            f"| {minutes} | {r['tokens_per_s'] or '-':,} "
            f"| {'yes' if r.get('cpu_native_bf16') else 'no'} | `{r['command']}` |"
        )
    return [*lines, "", *_notes("bert")]


def _seq2seq(rows: list[dict]) -> list[str]:
    translate = [r for r in rows if r.get("kind") == "translate"]
    chat = [r for r in rows if r.get("kind") == "chat"]
    if not translate and not chat:
        return []
    lines = []
    if translate:
        lines += [
            "## Translation: Multi30k de->en, test_2016_flickr (1,000 sentences)",
            "",
            "BLEU = sacreBLEU on detokenized cased output (the standard figure); "
            "BLEU lc = sacreBLEU with `lowercase=True` (lowercased 13a tokens, the way "
            "tutorial series report Multi30k). Signatures below the table.",
            "",
            "| run | model | params | decoding | BLEU | BLEU lc | test ppl | epochs | train min "
            "| train tok/s | command |",
            "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
        ]
        for r in translate:
            for d in r["decodings"]:
                lines.append(
                    f"| {r['name']} | {r['model']} | {r['num_parameters']:,} | {d['decoding']} "
                    f"| {d['bleu']:.2f} | {d['bleu_lowercase']:.2f} | {r['test_perplexity']:.2f} "
                    f"| {r['epochs']} | {r['train_minutes']} | {r['tokens_per_s']:,} "
                    f"| `{r['command']}` |"
                )
        sigs = sorted(
            {
                d[k]
                for r in translate
                for d in r["decodings"]
                for k in ("bleu_signature", "bleu_lowercase_signature")
            }
        )
        lines += ["", "Signatures: " + "; ".join(f"`{s}`" for s in sigs), ""]
        speed = [r for r in translate if r.get("throughput")]
        if speed:
            n = speed[0].get("throughput_sentences", "the")
            lines += [
                f"### Decoding throughput (the first {n} test sentences, batches of 32)",
                "",
                "| run | decoding | KV cache | sentences/s | speed-up from cache |",
                "| --- | --- | --- | ---: | ---: |",
            ]
            for r in speed:
                for t in r["throughput"]:
                    gain = f"{t['cache_speedup']:.2f}x" if t.get("cache_speedup") else ""
                    lines.append(
                        f"| {r['name']} | {t['decoding']} | {t['cache']} "
                        f"| {t['sentences_per_s']:.1f} | {gain} |"
                    )
            lines.append("")
    for r in chat:
        lines += [
            f"## Korean chatbot ({r['name']}): held-out test questions",
            "",
            f"Test loss {r['test_loss']:.3f}, **perplexity {r['test_perplexity']:.2f}** on "
            f"{r['test_pairs']:,} pairs ({r['test_tokens']:,} answer tokens) whose questions "
            f"never occur in training; {r['num_parameters']:,} parameters, {r['epochs']} "
            f"epochs, {r['train_minutes']} min. Command: `{r['command']}`",
            "",
            f"Ten test questions and the model's answers ({r['sampling']}):",
            "",
            "| question | model's answer | reference answer |",
            "| --- | --- | --- |",
        ]
        for s in r["samples"]:
            cells = [s[k].replace("|", "\\|") for k in ("question", "answer", "reference")]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    return lines + _notes("seq2seq")


def _gpt(rows: list[dict]) -> list[str]:
    lm = [r for r in rows if r.get("kind") == "lm"]
    if not lm:
        return []
    lines = [
        "## Language models (GPT)",
        "",
        "*val loss*: cross-entropy per token (nats) of the best weights on the whole held-out "
        "split, re-scored in fp32 (*best* / *last*: the training log's evaluations); *bits/char*: "
        "the total NLL in bits over the characters it spells, comparable across tokenizers. "
        "*target*: the step and training minutes of the first evaluation at or below the "
        "target loss (`not reached` if never; `-`: no target, e.g. a subword model, since "
        "1.60 is in nats per character). *min*: training minutes, evaluations included.",
        "",
        "| run | dataset | tokenizer | model | params | batch x context | steps | val loss "
        "| best / last | ppl | bits/char | target | min | tokens/s | bf16 | threads | command |",
        "| --- | --- | --- | --- | ---: | --- | ---: | ---: | --- | ---: | ---: | --- | ---: "
        "| ---: | --- | ---: | --- |",
    ]
    for r in lm:
        m = r["model"]
        target = "-"
        if r.get("target_loss") is not None:
            reached = r.get("target_step")
            target = f"<= {r['target_loss']:.2f}: " + (
                f"step {reached:,}, {r['target_minutes']} min" if reached else "not reached"
            )
        bf16 = ("on" if r.get("cpu_native_bf16") else "on (emulated)") if r["bf16"] else "off"
        lines.append(
            f"| {r['name']} | {r['dataset']} | {r['tokenizer']} {r['vocab_size']:,} "
            f"| {m['num_layers']} x {m['d_model']}, {m['num_heads']} heads "
            f"| {r['num_parameters']:,} | {r['batch_size']} x {m['context']} | {r['steps']:,} "
            f"| {r['val_loss']:.4f} | {r['best_val_loss']} / {r['last_val_loss']} "
            f"| {r['val_perplexity']:.2f} | {r['val_bits_per_char']:.3f} | {target} "
            f"| {r['train_minutes']} | {r['tokens_per_s'] or '-':,} | {bf16} | {r['threads']} "
            f"| `{r['command']}` |"
        )
    lines.append("")
    for r in lm:
        s = r.get("sample")
        if s:
            lines += [
                f"Sample of {r['name']} (prompt {s['prompt']!r}, {s['max_new_tokens']} tokens, "
                f"temperature {s['temperature']}, top-k {s['top_k']}, seed {s['seed']}):",
                "",
                "```text",
                (s["prompt"] + s["text"]).rstrip(),
                "```",
                "",
            ]
    return lines


def _generation(rows: list[dict]) -> list[str]:
    gen = [r for r in rows if r.get("kind") == "generation"]
    if not gen:
        return []
    lines = [
        "## Generation throughput (GPT)",
        "",
        "New tokens per second (all rows together) of greedy decoding, the prompt read "
        "included: with the KV cache each step costs one position; without it the whole "
        "sequence is recomputed at every step (same tokens: *same*). Median of the repeats "
        "after a warm-up, `torch.inference_mode`, fp32.",
        "",
        "| run | model | params | context | prompt + new tokens | batch | with KV cache tok/s "
        "| without tok/s | speed-up | same | threads | command |",
        "| --- | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | --- | ---: | --- |",
    ]
    for r in gen:
        m = r["model"]
        model = f"{m['num_layers']} x {m['d_model']}, vocab {r['vocab_size']:,} ({r['source']})"
        tokens = f"{r['prompt_tokens']} + {r['new_tokens']}" + (
            " (window slides)" if r.get("window_slides") else ""
        )
        for t in r["results"]:
            lines.append(
                f"| {r['name']} | {model} | {r['num_parameters']:,} | {m['context']} | {tokens} "
                f"| {t['batch']} | {t['cache_tokens_per_s']:,.1f} | {t['no_cache_tokens_per_s']:,.1f} "
                f"| {t['cache_speedup']:.2f}x | {'yes' if r['same_tokens'] else 'NO'} "
                f"| {r['threads']} | `{r['command']}` |"
            )
    return [*lines, ""]


def _elmo(rows: list[dict]) -> list[str]:
    elmo = [r for r in rows if r.get("kind") == "elmo"]
    if not elmo:
        return []
    lines = [
        "## ELMo: biLM perplexity and feature-based sentiment classification",
        "",
        "The biLM (forward and backward LSTM language models) trains on the unlabelled reviews; "
        "its perplexities are per token on the held-out reviews (*mean*: exp of the mean NLL of "
        "both directions). Then the same classifier (token embedding -> BiLSTM -> mean pooling) "
        "trains with and without the frozen biLM's features (ELMo_k = gamma sum_j s_j h_k,j "
        "concatenated to its input), with the same data, tokenizer, optimiser and steps; both "
        "are scored on the test split.",
        "",
        "| run | biLM | params | steps | min | tokens/s | val ppl forward | backward | mean "
        "| command |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in elmo:
        b = r["bilm"]
        lines.append(
            f"| {r['name']} | {b['dataset']}, {b['num_layers']} x {b['hidden_size']} LSTM per "
            f"direction, vocab {b['vocab_size']:,} | {b['num_parameters']:,} | {b['steps']:,} "
            f"| {b['train_minutes']} | {b['tokens_per_s'] or '-':,} "
            f"| {b['val_forward_perplexity']:.2f} | {b['val_backward_perplexity']:.2f} "
            f"| {b['val_perplexity']:.2f} | `{b['command']}` |"
        )
    lines += [
        "",
        "| run | classifier | trainable params | test acc | macro-F1 | steps | train min "
        "| layer mix s_j (token layer first) | gamma | command |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | --- |",
    ]
    for r in elmo:
        for key, label in (("elmo", "with ELMo"), ("baseline", "without (baseline)")):
            c = r[key]
            mix = " / ".join(f"{w:.3f}" for w in c["mix_s"]) if "mix_s" in c else "-"
            gamma = f"{c['mix_gamma']:.3f}" if "mix_gamma" in c else "-"
            lines.append(
                f"| {r['name']} | {label} | {c['trainable_parameters']:,} "
                f"| {c['test_accuracy']:.4f} | {c['test_macro_f1']:.4f} | {c['steps']:,} "
                f"| {c['train_minutes']} | {mix} | {gamma} | `{c['command']}` |"
            )
        lines.append(
            f"| {r['name']} | ELMo - baseline | | {r['accuracy_gain']:+.4f} | | "
            f"{'same steps' if r['same_budget'] else 'DIFFERENT budgets'} | | | | "
            f"`{r['command']}` |"
        )
    return [*lines, ""]


def _lm(rows: list[dict]) -> list[str]:
    lines = _gpt(rows) + _generation(rows) + _elmo(rows)
    return lines + _notes("lm") if lines else []


def _serve(rows: list[dict]) -> list[str]:
    load = [r for r in rows if r.get("kind") == "serve"]
    if not load:
        return []
    lines = [
        "## Serving (attnkit serve) under load",
        "",
        "`attnkit serve RUN` in its own process on loopback; a fixed number of requests from "
        "N concurrent clients (httpx), then it stops. Latency is per request, as the client "
        "sees it (queueing at the server included: inference runs one batch at a time). "
        "Memory: the server process's resident set before and after the load.",
        "",
        "| name | model | endpoint | requests | texts / request | concurrent | errors | req/s "
        "| p50 ms | p90 ms | p99 ms | max ms | server RSS before -> after (MB) | command |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| --- | --- |",
    ]
    for r in load:
        lines.append(
            f"| {r['name']} | {r['model']} | {r['endpoint']} | {r['requests']:,} "
            f"| {r['texts_per_request']} | {r['concurrency']} | {r['errors']} "
            f"| {r['requests_per_s']:,} | {r['latency_ms_p50']} | {r['latency_ms_p90']} "
            f"| {r['latency_ms_p99']} | {r['latency_ms_max']} "
            f"| {r['server_rss_mb_before']:,} -> {r['server_rss_mb_after']:,} | `{r['command']}` |"
        )
    return [*lines, ""]


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
        flags = ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in run["cpu_flags"].items())
        peak = run["peak_gflops"]
        lines += [
            f"**{run['name']}** ({run['date']}): "
            + (f"GPU {run['gpu']} ({run['device']}); " if run.get("gpu") else "")
            + f"{run['cpu']}, {run['threads']} threads; "
            f"{flags}; native bf16: {'yes' if run['cpu_native_bf16'] else 'no'}; matmul peak "
            f"fp32 {peak['fp32']:,} GFLOP/s, bf16 {peak['bf16']:,} GFLOP/s ({run['matmul']}); "
            f"{run['minutes']} min. Common settings: {run['common']}. Command: "
            f"`{run['command']}`",
            "",
            "| what | shape | dtype | batch | attnkit | attnkit ms | peer | peer ms | ratio "
            "| target | met | attnkit % peak | peer % peak | note |",
            "| --- | --- | --- | ---: | --- | ---: | --- | ---: | ---: | ---: | --- | ---: | ---: "
            "| --- |",
        ]
        settings: dict[tuple[str, str], None] = {}  # (contender, its settings), in order
        for r in run["rows"]:
            settings[r["attnkit"], r["attnkit_settings"]] = None
            settings[r["peer"], r["peer_settings"]] = None
            what = r["what"]
            if "same_tokens" in r:
                what += f" (same tokens: {'yes' if r['same_tokens'] else 'NO'})"
            target = "-" if r["target"] is None else f"{r['target']:g}x"
            met = "-" if r["met"] is None else ("yes" if r["met"] else "no")
            share = [
                f"{r[k] * 100:.1f}%" if k in r else "-"
                for k in ("attnkit_peak_fraction", "peer_peak_fraction")
            ]
            lines.append(
                f"| {what} | {r['shape']} | {r['dtype']} | {r['batch']} | {r['attnkit']} "
                f"| {r['attnkit_ms']:,.1f} | {r['peer']} | {r['peer_ms']:,.1f} "
                f"| **{r['ratio']:.2f}x** | {target} | {met} | {share[0]} | {share[1]} "
                f"| {r.get('note', '')} |"
            )
        lines += ["", "Settings:", ""]
        lines += [f"- {name}: {text}" for name, text in settings]
        lines.append("")
        if run.get("plot"):
            plot = run["plot"].removeprefix("docs/")
            lines += [f"![attnkit / peer time ratios, {run['name']}]({plot})", ""]
    return lines + _notes("speed")


def _recipe_speed(rows: list[dict]) -> list[str]:
    """Issue 17's end-to-end figure (benchmarks/recipe_speed.py, kind "recipe_speed")."""
    lines = []
    for run in (r for r in rows if r.get("kind") == "recipe_speed"):
        flags = ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in run["cpu_flags"].items())
        setting = ", ".join(f"`{o}`" for o in run.get("after_overrides") or [])
        title = (
            f"## Training throughput of the recipes with {setting} (after) and without (before)"
            if setting
            else "## Training throughput of the recipes, before and after issue 17"
        )
        target = run["target"]
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
            "| recipe | before tokens/s | after tokens/s | speedup | target | met | runs |",
            "| --- | ---: | ---: | ---: | ---: | --- | --- |",
        ]
        for r in run["rows"]:
            each = "; ".join(
                f"{k}: {', '.join(f'{v:,}' for v in vs)}" for k, vs in r["runs"].items()
            )
            lines.append(
                f"| {r['recipe']} | {r['before_tokens_per_s']:,} | {r['after_tokens_per_s']:,} "
                f"| **{r['speedup']:.2f}x** | {f'{target:g}x' if target else '-'} "
                f"| {('yes' if r['speedup'] >= target else 'no') if target else '-'} | {each} |"
            )
        lines.append("")
    return lines


def _threads(rows: list[dict]) -> list[str]:
    """1 vs 2 torch threads, quiet and with one core busy (benchmarks/threads.py)."""
    lines = []
    for run in (r for r in rows if r.get("kind") == "threads"):
        speed = {(r["condition"], r["threads"]): r["tokens_per_s"] for r in run["rows"]}
        lines += [
            f"## Threads: {run['recipe']} with 1 and 2 torch threads",
            "",
            f"{run['steps']} training steps in fp32 per cell, tokens/s = the Trainer's median "
            "over its log windows (the first dropped); busy = another process spinning on one "
            f"core meanwhile. {run['usable_cores']} usable cores; {run['machine']}; "
            f"{run['date']}. Command: `{run['command']}`",
            "",
            "| machine state | 1 thread tokens/s | 2 threads tokens/s | 2 / 1 |",
            "| --- | ---: | ---: | ---: |",
        ]
        for condition in ("quiet", "busy"):
            one, two = speed.get((condition, 1)), speed.get((condition, 2))
            if one and two:
                lines.append(f"| {condition} | {one:,} | {two:,} | {two / one:.2f}x |")
        lines.append("")
    return lines


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
        "| run | split | weights | accuracy | macro-F1 | evaluate s | latency ms | weights MB "
        "| command |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in runs:
        for label in ("fp32", "int8", "onnx"):
            if label not in r:  # records from before the ONNX export
                continue
            m = r[label]
            lines.append(
                f"| {r['run']} | {r['split']} | {label} | {m['accuracy']:.4f} "
                f"| {m['macro_f1']:.4f} | {m['evaluate_seconds']} | {m['latency_ms_batch1']} "
                f"| {m['weights_mb']} | `{r['command']}` |"
            )
        lines.append(
            f"| | | int8 change | {r['accuracy_change']:+.4f} | | {r['evaluate_speedup']}x faster "
            f"| {r['latency_speedup']}x faster | | {r['threads']} threads, {r['date']} |"
        )
        if "onnx" in r:
            lines.append(
                f"| | | onnx change | {r['onnx_accuracy_change']:+.4f} | "
                f"| {r['onnx_evaluate_speedup']}x faster | {r['onnx_latency_speedup']}x faster "
                f"| | onnxruntime {r['onnxruntime']}; logits within "
                f"{r['onnx_max_abs_diff']:.1e} of PyTorch's at export |"
            )
    lines.append("")
    return lines


def render(rows: list[dict]) -> str:
    """docs/results.md for these result records."""
    lines = [
        "# Results",
        "",
        "Every number here was produced by the command in its row (on the machine named); "
        "rerun it to reproduce. Generated by `benchmarks/report.py` from "
        "`benchmarks/results/*.json` -- do not edit by hand.",
        "",
    ]
    lines += _sentiment(rows)
    lines += _bert(rows)
    lines += _seq2seq(rows)
    lines += _lm(rows)
    lines += _serve(rows)
    lines += _speed_ratios(rows)
    lines += _recipe_speed(rows)
    lines += _threads(rows)
    lines += _quantize(rows)
    machines = sorted({r["machine"] for r in rows if "machine" in r})
    lines += ["Machines: " + "; ".join(machines), ""]
    return "\n".join(lines)


def write_results_md() -> Path:
    rows = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(RESULTS.glob("*.json"))]
    path = ROOT / "docs" / "results.md"
    path.write_text(render(rows), encoding="utf-8")
    return path


if __name__ == "__main__":
    print(f"wrote {write_results_md()}")

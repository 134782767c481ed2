"""docs/results.md from benchmarks/results/*.json (one file per benchmark run).

Each benchmark script writes its JSON record and calls ``write_results_md()``; the tables
are rebuilt from every record, each row with the command that produced it, followed by the
hand-written notes in benchmarks/notes-*.md. Every table is ``table(rows, columns)``: the
records (or rows made from them) and a list of ``Col`` specs.

    python benchmarks/report.py        # rebuild docs/results.md only

The results schema: one record per benchmark run, benchmarks/results/NAME.json
-----------------------------------------------------------------------------------------
Every record has ``name`` (its file name), ``kind`` (the section of docs/results.md:
sentiment, bert, translate, chat, lm, generation, elmo, speed, dropout_speed,
speed_ratios, recipe_speed, threads, quantize, serve), ``command`` (how it was started,
from the repository root, with the recipe files it trained) and ``date``; where measured,
``machine``, ``threads``, ``peak_rss_mb`` and ``cpu_native_bf16``.

A model trained and scored (kinds sentiment, bert, translate, chat, lm; the classifiers and
biLM of elmo; every ensemble member) records its scores as one mapping per split, metric
name -> value:

- ``test``: the final model on the test split, the task's metrics: classify ``accuracy``,
  ``macro_f1``; tag ``f1``, ``precision``, ``recall``; qa ``exact_match``, ``f1``;
  translate and chat ``loss``, ``perplexity`` (translate: sacreBLEU of each decoding in
  ``decodings``); ``test_examples``: reviews / sentences / questions / pairs scored.
- ``validation``: a language model's on the held-out split (it has no test split): ``loss``,
  ``perplexity``, ``bits_per_char``, ``bits_per_token``, with ``validation_tokens``; the
  ELMo biLM's ``forward_perplexity``, ``backward_perplexity``, ``perplexity``, ``loss`` at
  its best evaluation (``best_step``).
- ``pretrain_validation``: the last evaluation of a pretraining run by the same command
  (``pretrain_*`` keys: its steps, minutes, recipe): ``mlm_loss``, ``mlm_accuracy``, and
  ``nsp_accuracy`` (BERT) or ``rtd_accuracy`` (ELECTRA's discriminator).
- ``best_val_metric``: the best value of the recipe's validation metric the training logged;
  ``val_log`` (seq2seq) / ``best_val_loss``, ``last_val_loss`` (lm): the training log's
  evaluations. Minutes: ``train_minutes`` (training), ``total_minutes`` (the whole command).

The other kinds time things (``*_tokens_per_s``, ``*_ms``, ``speedup``): their keys are
the columns of their tables below; quantize has one mapping per weights (``fp32``, ``int8``,
``onnx``): the task's metrics on ``split`` and the timings. ``check_record`` says what in a
record breaks this, the flat keys of the earlier schemas (``test_accuracy``, ``val_loss``,
...) included.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import shlex
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

import torch

import attnkit
import report_speed
from report_tables import (  # noqa: F401  (ROOT, table & co.: also read from report)
    ROOT,
    Col,
    command,
    fmt,
    get,
    notes,
    num,
    table,
    yes_no,
)

RESULTS = ROOT / "benchmarks" / "results"
KINDS = {
    *("sentiment", "bert", "translate", "chat", "lm", "generation", "elmo", "speed"),
    *("dropout_speed", "speed_ratios", "recipe_speed", "threads", "quantize", "serve"),
    "explain",
    "startup",
    "nanogpt_pairs",
}
# keys of the earlier schemas: a split's scores are now one mapping (test, validation, ...)
OLD_KEYS = {
    *("test_accuracy", "test_macro_f1", "test_loss", "test_perplexity", "test_pairs"),
    *("best_val_accuracy", "val_loss", "val_perplexity", "val_bits_per_char"),
    *("val_bits_per_token", "val_tokens", "val_forward_perplexity", "val_backward_perplexity"),
    *("pretrain_val_loss", "pretrain_val_accuracy", "pretrain_val_rtd_accuracy"),
    *("pretrain_val_mlm_accuracy", "pretrain_val_mlm_loss", "pretrain_val_nsp_accuracy"),
}
# where a kind's scores are: (part of the record, its split mapping)
SCORED = {
    "sentiment": [("", "test")],
    "translate": [("", "test")],
    "chat": [("", "test")],
    "lm": [("", "validation")],
    "elmo": [("bilm", "validation"), ("elmo", "test"), ("baseline", "test")],
}


def check_record(record: dict) -> list[str]:
    """What in ``record`` does not follow the results schema (above); [] when it does."""
    problems = [f"no {k}" for k in ("name", "kind", "command", "date") if k not in record]
    kind = record.get("kind")
    if "kind" in record and kind not in KINDS:
        problems.append(f"unknown kind {kind!r}")
    parts = {"": record}  # the record and its nested stages
    parts |= {k: record[k] for k in ("bilm", "elmo", "baseline") if isinstance(record.get(k), dict)}
    parts |= {f"ensemble[{i}]": m for i, m in enumerate(record.get("ensemble") or [])}
    for where, part in parts.items():
        at = f"{where}." if where else ""
        problems += [f"old key {at}{k}" for k in part if k in OLD_KEYS]
        for split in ("test", "validation", "pretrain_validation"):
            scores = part.get(split)
            if split in part and not (
                isinstance(scores, dict)
                and all(isinstance(v, int | float) for v in scores.values())
            ):
                problems.append(f"{at}{split} is not a mapping of metric -> number")
    needed = SCORED.get(kind, []) + ([("", "test")] if kind == "bert" and "task" in record else [])
    for where, split in needed:
        if split not in parts.get(where, {}):
            problems.append(f"no {where + '.' if where else ''}{split} scores")
    return problems


def machine() -> str:
    """Where a benchmark ran: the recipes train on ``training.device: auto``, so on a machine
    with a GPU the row says which one."""
    from attnkit.runtime.device import resolve_device

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
    from attnkit.runtime.device import cpu_has_native_bf16

    return cpu_has_native_bf16()


AVX2 = {
    "ATEN_CPU_CAPABILITY": "avx2",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
    "MKL_ENABLE_INSTRUCTIONS": "AVX2",
    "ATTNKIT_CPU_BF16": "0",
}
"""The environment that holds PyTorch to its AVX2 kernels (ATen, oneDNN, MKL) and attnkit
to fp32: what a laptop without AVX-512 / native bf16 runs (the benchmarks' ``--avx2``)."""


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
    """Write ``record`` to benchmarks/results/NAME.json (after saying on stderr what in it
    does not follow the schema: a record is never lost to a check)."""
    for problem in check_record(record):
        print(f"report.py: warning: {record.get('name')}: {problem}", file=sys.stderr)
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{record['name']}.json"
    path.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def command_line(script: str, skip: tuple[str, ...] = ()) -> str:
    """How this benchmark was started: ``python benchmarks/SCRIPT`` + its arguments (minus
    ``skip``), the command written next to every result. A process whose kernels were
    held back (a variable of ``AVX2`` but ATTNKIT_CPU_BF16, which the machine cell shows)
    has the variables of ``AVX2`` it was started with in front."""
    held = any(k in os.environ for k in AVX2 if k != "ATTNKIT_CPU_BF16")
    env = (f"{k}={shlex.quote(os.environ[k])}" for k in AVX2 if held and k in os.environ)
    args = (shlex.quote(a) for a in sys.argv[1:] if a not in skip)
    return " ".join([*env, f"python benchmarks/{script}", *args])


def publish(record: dict) -> None:
    """Save ``record``, print it, and rebuild docs/results.md."""
    save(record)
    print(json.dumps(record, indent=2, ensure_ascii=False))
    print(f"wrote {write_results_md()}")


def train_tokens_per_s(config: str, out: Path, overrides: list[str]) -> float:
    """Train ``config`` with ``overrides`` into ``out`` and return the median training
    tokens/s the Trainer logged (the first log window dropped as warm-up)."""
    from attnkit.app.api import train

    train(config, out=out, overrides=overrides, force=True, log=lambda *_: None)
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    return statistics.median([r["tokens_per_s"] for r in rows if "tokens_per_s" in r][1:])


# --------------------------------------------------------------------------------------
# The sections of docs/results.md, one per kind of record
# --------------------------------------------------------------------------------------
def _recipe_init_from(command: str) -> str | None:
    """``model.init_from`` of the recipe a benchmark command names (``configs/X.yaml``)."""
    import yaml

    recipe = next((w for w in shlex.split(command) if w.endswith(".yaml")), None)
    if recipe is None or not (ROOT / recipe).is_file():
        return None
    raw = yaml.safe_load((ROOT / recipe).read_text(encoding="utf-8")) or {}
    return (raw.get("model") or {}).get("init_from")


def _sentiment_start(r: dict) -> str:
    """Where a sentiment classifier started: scratch, a run, or the pretraining in the same
    command; an ensemble adds each member's own test accuracy."""
    pre = r.get("pretrain_validation")
    if r.get("pretrain_minutes") is None:  # no pretraining: scratch or init_from
        # (records written before init_from was recorded: their recipe's)
        init = r.get("init_from", _recipe_init_from(r["command"]))
        start = f"`{init}`" if init else "scratch"
    elif r.get("pretrain_objective") == "electra":
        start = (
            f"ELECTRA, {r['pretrain_steps']:,} steps (generator val loss "
            f"{pre['mlm_loss']}, RTD acc {pre['rtd_accuracy']})"
        )
    else:
        start = f"MLM, {r['pretrain_steps']:,} steps (val loss {pre['mlm_loss']})"
    if r.get("ensemble"):  # each member's own test accuracy; the others are from scratch
        first, *others = r["ensemble"]
        start += f" [alone {first['test']['accuracy']:.4f}]" + "".join(
            f" + {m['arch']} from scratch [alone {m['test']['accuracy']:.4f}]" for m in others
        )
    return start


SENTIMENT = [
    Col("run", "name"),
    Col("dataset", "dataset"),
    Col("model", "arch"),
    num("params", "num_parameters", ","),
    Col("start", _sentiment_start),
    Col("bf16", lambda r: "on" if r["bf16"] else "off"),
    num("test acc", "test.accuracy", ".4f"),
    num("macro-F1", "test.macro_f1", ".4f"),
    Col("pretrain min", lambda r: fmt(r.get("pretrain_minutes")), right=True),
    num("train min", "train_minutes"),
    Col(
        "total min",
        lambda r: round(r["total_minutes"] + r.get("pretrain_total_minutes", 0.0), 2),
        right=True,
    ),
    num("tokens/s", "tokens_per_s", ","),
    num("peak RSS MB", "peak_rss_mb", ","),
    command(),
]
BF16_SPEED = [
    Col("recipe", "recipe"),
    num("steps", "steps"),
    num("fp32 tok/s", "fp32_tokens_per_s", ","),
    num("bf16 tok/s", "bf16_tokens_per_s", ","),
    Col("bf16 / fp32", lambda r: f"{r['bf16_speedup']:.2f}x", right=True),
    Col("CPU has native bf16", lambda r: yes_no(r["cpu_native_bf16"])),
    num("threads", "threads"),
    command(),
]


def _with_speedup(variant: str) -> Callable[[dict], str]:
    return lambda r: f"{r['tokens_per_s'][variant]:,} ({r['speedup'][variant]:.2f}x)"


DROPOUT_SPEED = [
    Col("recipe", "recipe"),
    num("steps", "steps"),
    num("as in the recipe", "tokens_per_s.recipe", ","),
    Col("attention_dropout=0", _with_speedup("attention_dropout=0"), right=True),
    Col("dropout=0", _with_speedup("dropout=0"), right=True),
    num("threads", "threads"),
    command(),
]


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
        *table([r for r in rows if r.get("kind") == "sentiment"], SENTIMENT),
        "",
    ]
    speed = [r for r in rows if r.get("kind") == "speed"]
    if speed:
        lines += [
            "### bf16 autocast vs fp32 (training tokens/s, same recipe and batches)",
            "",
            *table(speed, BF16_SPEED),
            "",
        ]
    drop = [r for r in rows if r.get("kind") == "dropout_speed"]
    if drop:
        lines += [
            "### Dropout on the CPU (training tokens/s, same recipe and batches)",
            "",
            "`attention_dropout=0`: no dropout on the attention weights (the fused attention "
            "kernel runs); `dropout=0`: no dropout anywhere.",
            "",
            *table(drop, DROPOUT_SPEED),
            "",
        ]
    return lines + notes("sentiment")


def _start(r: dict) -> str:
    """How a BERT run started: pretrained in the same command, or from a run / checkpoint."""
    if "pretrain_steps" in r:
        pre = r["pretrain_validation"]
        nsp = pre.get("nsp_accuracy")
        return (
            f"{r['pretrain_arch']} on {r['pretrain_dataset']}, {r['pretrain_steps']:,} steps, "
            f"{r['pretrain_minutes']} min (val MLM acc {pre['mlm_accuracy']}"
            + (f", NSP acc {nsp}" if nsp is not None else "")
            + ")"
        )
    return f"`{r['init_from']}`" if r.get("init_from") else "scratch"


def _bert_mode(r: dict) -> str:
    """Fine-tuned or feature-based, and the pseudo-labels / soft targets it learned from."""
    if "task" not in r:  # pretraining only
        return "-"
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
    return mode


def _bert_cell(task: Callable[[dict], object], pretrain: Callable[[dict], object]) -> Callable:
    """A cell of the BERT table: ``task`` for a fine-tuning, ``pretrain`` for a pretraining
    record (no task)."""
    return lambda r: task(r) if "task" in r else pretrain(r)


BERT = [
    Col("run", "name"),
    Col("task", _bert_cell(lambda r: r["task"], lambda r: "bert-pretrain")),
    Col("dataset", _bert_cell(lambda r: r["dataset"], lambda r: r["pretrain_dataset"])),
    Col("model", _bert_cell(lambda r: r["arch"], lambda r: r["pretrain_arch"])),
    Col(
        "params",
        _bert_cell(lambda r: f"{r['num_parameters']:,}", lambda r: f"{r['pretrain_parameters']:,}"),
        right=True,
    ),
    Col("start", _start),
    Col("mode", _bert_mode),
    Col(
        "test metrics",
        _bert_cell(lambda r: ", ".join(f"{k} {v}" for k, v in r["test"].items()), lambda r: "-"),
    ),
    Col(
        "min",
        _bert_cell(
            lambda r: round(r["train_minutes"] + r.get("pretrain_minutes", 0.0), 2),
            lambda r: r["pretrain_minutes"],
        ),
        right=True,
    ),
    Col(
        "tokens/s",
        lambda r: fmt(r["tokens_per_s"] if "task" in r else r["pretrain_tokens_per_s"], ","),
        right=True,
    ),
    Col("native bf16", lambda r: yes_no(r.get("cpu_native_bf16"))),
    command(),
]


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
        *table(bert, BERT),
    ]
    return [*lines, "", *notes("bert")]


# rows of the translation table: (record, one of its decodings)
TRANSLATE = [
    Col("run", lambda rd: rd[0]["name"]),
    Col("model", lambda rd: rd[0]["model"]),
    Col("params", lambda rd: f"{rd[0]['num_parameters']:,}", right=True),
    Col("decoding", lambda rd: rd[1]["decoding"]),
    Col("BLEU", lambda rd: f"{rd[1]['bleu']:.2f}", right=True),
    Col("BLEU lc", lambda rd: f"{rd[1]['bleu_lowercase']:.2f}", right=True),
    Col("test ppl", lambda rd: f"{rd[0]['test']['perplexity']:.2f}", right=True),
    Col("epochs", lambda rd: rd[0]["epochs"], right=True),
    Col("train min", lambda rd: rd[0]["train_minutes"], right=True),
    Col("train tok/s", lambda rd: fmt(rd[0]["tokens_per_s"], ","), right=True),
    Col("command", lambda rd: f"`{rd[0]['command']}`"),
]
# rows of the decoding throughput table: (record, one of its measurements)
DECODING_SPEED = [
    Col("run", lambda rt: rt[0]["name"]),
    Col("decoding", lambda rt: rt[1]["decoding"]),
    Col("KV cache", lambda rt: rt[1]["cache"]),
    Col("sentences/s", lambda rt: f"{rt[1]['sentences_per_s']:.1f}", right=True),
    Col(
        "speed-up from cache",
        lambda rt: f"{rt[1]['cache_speedup']:.2f}x" if rt[1].get("cache_speedup") else "",
        right=True,
    ),
]
CHAT_SAMPLES = [
    Col("question", "question"),
    Col("model's answer", "answer"),
    Col("reference answer", "reference"),
]


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
            *table([(r, d) for r in translate for d in r["decodings"]], TRANSLATE),
        ]
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
                *table([(r, t) for r in speed for t in r["throughput"]], DECODING_SPEED),
                "",
            ]
    for r in chat:
        test = r["test"]
        lines += [
            f"## Korean chatbot ({r['name']}): held-out test questions",
            "",
            f"Test loss {test['loss']:.3f}, **perplexity {test['perplexity']:.2f}** on "
            f"{r['test_examples']:,} pairs ({r['test_tokens']:,} answer tokens) whose questions "
            f"never occur in training; {r['num_parameters']:,} parameters, {r['epochs']} "
            f"epochs, {r['train_minutes']} min. Command: `{r['command']}`",
            "",
            f"Ten test questions and the model's answers ({r['sampling']}):",
            "",
            *table(r["samples"], CHAT_SAMPLES),
            "",
        ]
    return lines + notes("seq2seq")


def _lm_target(r: dict) -> str:
    """When a language model first reached its target validation loss."""
    if r.get("target_loss") is None:
        return "-"
    reached = r.get("target_step")
    return f"<= {r['target_loss']:.2f}: " + (
        f"step {reached:,}, {r['target_minutes']} min" if reached else "not reached"
    )


GPT = [
    Col("run", "name"),
    Col("dataset", "dataset"),
    Col("tokenizer", lambda r: f"{r['tokenizer']} {r['vocab_size']:,}"),
    Col(
        "model",
        lambda r: (
            f"{r['model']['num_layers']} x {r['model']['d_model']}, {r['model']['num_heads']} heads"
        ),
    ),  # fmt: skip
    num("params", "num_parameters", ","),
    Col("batch x context", lambda r: f"{r['batch_size']} x {r['model']['context']}"),
    num("steps", "steps", ","),
    num("val loss", "validation.loss", ".4f"),
    Col("best / last", lambda r: f"{r['best_val_loss']} / {r['last_val_loss']}"),
    num("ppl", "validation.perplexity", ".2f"),
    num("bits/char", "validation.bits_per_char", ".3f"),
    Col("target", _lm_target),
    num("min", "train_minutes"),
    num("tokens/s", "tokens_per_s", ","),
    Col(
        "bf16",
        lambda r: ("on" if r.get("cpu_native_bf16") else "on (emulated)") if r["bf16"] else "off",
    ),
    num("threads", "threads"),
    command(),
]


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
        *table(lm, GPT),
        "",
    ]
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


def _generation_model(r: dict) -> str:
    m = r["model"]
    return f"{m['num_layers']} x {m['d_model']}, vocab {r['vocab_size']:,} ({r['source']})"


def _generation_tokens(r: dict) -> str:
    slides = " (window slides)" if r.get("window_slides") else ""
    return f"{r['prompt_tokens']} + {r['new_tokens']}{slides}"


# rows: (record, one of its batch sizes' results)
GENERATION = [
    Col("run", lambda rt: rt[0]["name"]),
    Col("model", lambda rt: _generation_model(rt[0])),
    Col("params", lambda rt: f"{rt[0]['num_parameters']:,}", right=True),
    Col("context", lambda rt: rt[0]["model"]["context"], right=True),
    Col("prompt + new tokens", lambda rt: _generation_tokens(rt[0])),
    Col("batch", lambda rt: rt[1]["batch"], right=True),
    Col("with KV cache tok/s", lambda rt: f"{rt[1]['cache_tokens_per_s']:,.1f}", right=True),
    Col("without tok/s", lambda rt: f"{rt[1]['no_cache_tokens_per_s']:,.1f}", right=True),
    Col("speed-up", lambda rt: f"{rt[1]['cache_speedup']:.2f}x", right=True),
    Col("same", lambda rt: "yes" if rt[0]["same_tokens"] else "NO"),
    Col("threads", lambda rt: rt[0]["threads"], right=True),
    Col("command", lambda rt: f"`{rt[0]['command']}`"),
]


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
        *table([(r, t) for r in gen for t in r["results"]], GENERATION),
    ]
    return [*lines, ""]


BILM = [
    Col("run", "name"),
    Col(
        "biLM",
        lambda r: (
            f"{r['bilm']['dataset']}, {r['bilm']['num_layers']} x "
            f"{r['bilm']['hidden_size']} LSTM per direction, vocab {r['bilm']['vocab_size']:,}"
        ),
    ),  # fmt: skip
    num("params", "bilm.num_parameters", ","),
    num("steps", "bilm.steps", ","),
    num("min", "bilm.train_minutes"),
    num("tokens/s", "bilm.tokens_per_s", ","),
    num("val ppl forward", "bilm.validation.forward_perplexity", ".2f"),
    num("backward", "bilm.validation.backward_perplexity", ".2f"),
    num("mean", "bilm.validation.perplexity", ".2f"),
    command(key="bilm.command"),
]
# rows: the two classifiers' cells, then their comparison (_elmo_rows)
ELMO_CLASSIFIERS = [
    Col("run", "name"),
    Col("classifier", "label"),
    num("trainable params", "trainable_parameters", ","),
    num("test acc", "test_accuracy"),
    num("macro-F1", "test_macro_f1", ".4f"),
    num("steps", "steps"),
    num("train min", "train_minutes"),
    Col("layer mix s_j (token layer first)", "mix"),
    num("gamma", "gamma", ".3f"),
    Col("command", "command"),
]


def _elmo_rows(r: dict) -> list[dict]:
    """The ELMo classifier and its baseline, then a row with the accuracy gain."""
    rows = []
    for key, label in (("elmo", "with ELMo"), ("baseline", "without (baseline)")):
        c = r[key]
        rows.append(
            {
                "name": r["name"],
                "label": label,
                "trainable_parameters": c["trainable_parameters"],
                "test_accuracy": f"{c['test']['accuracy']:.4f}",
                "test_macro_f1": c["test"]["macro_f1"],
                "steps": f"{c['steps']:,}",
                "train_minutes": c["train_minutes"],
                "mix": " / ".join(f"{w:.3f}" for w in c["mix_s"]) if "mix_s" in c else "-",
                "gamma": c.get("mix_gamma"),
                "command": f"`{c['command']}`",
            }
        )
    rows.append(
        {
            "name": r["name"],
            "label": "ELMo - baseline",
            "test_accuracy": f"{r['accuracy_gain']:+.4f}",
            "steps": "same steps" if r["same_budget"] else "DIFFERENT budgets",
            "command": f"`{r['command']}`",
        }
    )
    return rows


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
        *table(elmo, BILM),
        "",
        *table([row for r in elmo for row in _elmo_rows(r)], ELMO_CLASSIFIERS),
    ]
    return [*lines, ""]


def _lm(rows: list[dict]) -> list[str]:
    lines = _gpt(rows) + _generation(rows) + _elmo(rows)
    return lines + notes("lm") if lines else []


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
    lines += report_speed.sections(rows)
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

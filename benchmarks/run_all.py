"""Run the benchmarks behind docs/results.md, one at a time (``make bench``).

    python benchmarks/run_all.py              # the quick set (a few minutes in all)
    python benchmarks/run_all.py --list       # every benchmark: command, duration, output
    python benchmarks/run_all.py NAME ...     # the named ones, in the order given
    python benchmarks/run_all.py --all        # everything, sequentially (many hours on 2 cores)

Each benchmark runs as a subprocess of this Python, from the repository root, and prints its
own output; this runner adds start / end lines with the elapsed time and a summary. A
benchmark whose dataset is not in the data folder (``ATTNKIT_DATA``; unset, it defaults to
../shared/data when that exists, as in the Makefile) is skipped with the reason: nothing is
downloaded. Exit status: 0 when every benchmark that ran passed, 1 when one failed (or a
benchmark named on the command line was skipped), 2 for an unknown name.

Durations are those measured on this project's 2-core CPU machine (benchmarks/results/*.json).
Every benchmark except imdb-movie-groups overwrites its benchmarks/results/NAME.json and
rebuilds docs/results.md; runs go to runs/.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"
RESULTS = "benchmarks/results/{name}.json + docs/results.md"


@dataclass(frozen=True)
class Benchmark:
    name: str
    args: tuple[str, ...]  # benchmarks/SCRIPT and its arguments
    minutes: float  # rough wall time on 2 CPU cores
    needs: tuple[str, ...]  # dataset splits, "dataset:split[:lang]"; or "run:runs/NAME"
    quick: bool = False  # in the default set
    pending: bool = False  # registered but not run yet: no results/NAME.json, no row
    writes: str = RESULTS

    @property
    def script(self) -> Path:
        return ROOT / self.args[0]

    def command(self) -> list[str]:
        return [sys.executable, *self.args]

    def output(self) -> str:
        return self.writes.format(name=self.name)


def _speed(name: str, *extra: str, **kw) -> Benchmark:
    """A ``benchmarks/speed.py`` run under its own name (its plot: docs/NAME_ratios.png)."""
    args = ("benchmarks/speed.py", *extra, "--name", name)
    return Benchmark(name, args, needs=(), writes=RESULTS + f" + docs/{name}_ratios.png", **kw)


def _nsmc_bert(
    name: str,
    *overrides: str,
    encoder: str = "runs/bench-bert-pretrain-ko",
    minutes: float = 28,
    **kw,
) -> Benchmark:
    """configs/nsmc-bert.yaml fine-tuned from the pretrained run ``encoder`` with ``overrides``."""
    sets = tuple(arg for o in overrides for arg in ("--set", o))
    args = ("benchmarks/bert.py", "configs/nsmc-bert.yaml", "--init", encoder)
    return Benchmark(
        name, (*args, *sets, "--name", name), minutes=minutes, needs=(*NSMC, f"run:{encoder}"), **kw
    )


def _sentiment(name: str, recipe: str, *extra: str, **kw) -> Benchmark:
    args = ("benchmarks/sentiment.py", f"configs/{recipe}.yaml", *extra)
    if name != recipe:
        args += ("--name", name)
    return Benchmark(name, args, **kw)


def _seq2seq(name: str, **kw) -> Benchmark:
    return Benchmark(name, ("benchmarks/seq2seq.py", f"configs/{name}.yaml"), **kw)


NSMC = ("nsmc:train", "nsmc:test")
NSMC_PRE = (*NSMC, "nsmc:unlabeled")
IMDB = ("imdb:train", "imdb:test")
IMDB_PRE = (*IMDB, "imdb:unlabeled")
M30K = tuple(f"multi30k:{s}:{lang}" for s in ("train", "val", "test") for lang in ("de", "en"))
PRETRAIN = ("--pretrain", "configs/nsmc-pretrain.yaml")
SHAKESPEARE = ("tinyshakespeare:train",)

# The rows of docs/results.md, with the commands recorded there. Left out: the -v1/-v2 rows,
# whose commands first check out older recipes with git.
BENCHMARKS: tuple[Benchmark, ...] = (
    _sentiment("nsmc-ngram", "nsmc-ngram", minutes=1.5, needs=NSMC, quick=True),
    _sentiment("imdb-ngram", "imdb-ngram", minutes=0.6, needs=IMDB, quick=True),
    Benchmark(
        "imdb-movie-groups",
        ("benchmarks/imdb_movie_groups.py",),
        minutes=0.3,
        needs=("imdb:train",),
        quick=True,
        writes="nothing (prints the overlap of neighbouring reviews)",
    ),
    _sentiment(
        "nsmc-ngram-bf16", "nsmc-ngram", "--set", "training.bf16=true", minutes=1, needs=NSMC
    ),
    _sentiment(
        "imdb-ngram-bf16", "imdb-ngram", "--set", "training.bf16=true", minutes=0.7, needs=IMDB
    ),
    _sentiment("nsmc-transformer", "nsmc-transformer", minutes=16, needs=NSMC),
    _sentiment("nsmc-gru", "nsmc-gru", minutes=12.5, needs=NSMC),
    _sentiment("nsmc-lstm", "nsmc-lstm", minutes=16, needs=NSMC),
    _sentiment("nsmc-finetune", "nsmc-finetune", *PRETRAIN, minutes=30, needs=NSMC_PRE),
    _sentiment(
        "nsmc-electra",
        "nsmc-finetune",
        "--pretrain",
        "configs/nsmc-electra.yaml",
        minutes=29,
        needs=NSMC_PRE,
    ),
    _sentiment(
        "nsmc-ensemble",
        "nsmc-finetune",
        *PRETRAIN,
        "--pretrain-set",
        "training.max_steps=2800",
        "--ensemble",
        "configs/nsmc-gru.yaml",
        "--ensemble-set",
        "model.hidden_size=128",
        minutes=29,
        needs=NSMC_PRE,
    ),
    _sentiment(
        "nsmc-ensemble-ngram",
        "nsmc-finetune",
        *PRETRAIN,
        "--pretrain-set",
        "training.max_steps=2800",
        "--ensemble",
        "configs/nsmc-ngram.yaml",
        minutes=24,
        needs=NSMC_PRE,
    ),
    _sentiment("imdb-transformer", "imdb-transformer", minutes=19, needs=IMDB),
    _sentiment(
        "imdb-finetune",
        "imdb-finetune",
        "--pretrain",
        "configs/imdb-pretrain.yaml",
        minutes=29,
        needs=IMDB_PRE,
    ),
    _seq2seq("multi30k-transformer", minutes=55, needs=M30K),
    _seq2seq("multi30k-lstm", minutes=28, needs=M30K),
    _seq2seq("multi30k-lstm-attn", minutes=45, needs=M30K),
    _seq2seq("chatbot-ko", minutes=16, needs=("chatbot-ko:train",)),
    Benchmark(
        "speed-nsmc-transformer",
        ("benchmarks/bf16_speed.py", "configs/nsmc-transformer.yaml", "--steps", "150"),
        minutes=10,
        needs=NSMC,
    ),
    Benchmark(
        "dropout-nsmc-transformer",
        ("benchmarks/dropout_speed.py", "configs/nsmc-transformer.yaml", "--steps", "60"),
        minutes=4,
        needs=NSMC,
    ),
    Benchmark(
        "dropout-imdb-transformer-max_len512",
        (
            "benchmarks/dropout_speed.py",
            "configs/imdb-transformer.yaml",
            "--set",
            "data.max_len=512",
            "--steps",
            "30",
        ),
        minutes=5,
        needs=IMDB,
    ),
    Benchmark(
        "dropout-nsmc-pretrain-dropout0.1-limit100000",
        (
            "benchmarks/dropout_speed.py",
            "configs/nsmc-pretrain.yaml",
            "--set",
            "model.dropout=0.1",
            "--set",
            "data.limit=100000",
            "--steps",
            "60",
        ),
        minutes=5,
        needs=NSMC_PRE,
    ),
    # issue 16: language models (benchmarks/lm.py)
    Benchmark(
        "shakespeare-char",
        ("benchmarks/lm.py", "configs/shakespeare-char.yaml"),
        minutes=30,
        needs=SHAKESPEARE,
    ),
    Benchmark(
        "shakespeare-nanogpt-cpu",
        ("benchmarks/lm.py", "configs/shakespeare-nanogpt-cpu.yaml"),
        minutes=2.5,
        needs=SHAKESPEARE,
    ),
    Benchmark(
        "shakespeare-bpe",
        ("benchmarks/lm.py", "configs/shakespeare-bpe.yaml"),
        minutes=11.5,
        needs=SHAKESPEARE,
    ),
    Benchmark(  # times the model trained by shakespeare-char (run that first)
        "generation-shakespeare-char",
        ("benchmarks/lm.py", "--generation", "runs/bench-shakespeare-char"),
        minutes=0.5,
        needs=("run:runs/bench-shakespeare-char",),
    ),
    Benchmark(
        "elmo-nsmc",
        ("benchmarks/lm.py", "--elmo"),
        minutes=40,
        needs=NSMC_PRE,
    ),
    # issue 17: attnkit vs transformers / torch.nn, interleaved (no dataset; run it on a quiet
    # machine: every ratio comes from one run)
    Benchmark(
        "speed",
        ("benchmarks/speed.py",),
        minutes=10,
        needs=(),
        writes=RESULTS + " + docs/speed_ratios.png",
    ),
    # the training rows again, 15 timed iterations each (the ratios vary by run)
    _speed("speed-train-iters15", "--only", "train", "--iters", "15", minutes=10),
    Benchmark(  # int8 export of the Korean BERT fine-tuned on NSMC (nsmc-bert trains it)
        "quantize-bench-nsmc-bert",
        ("benchmarks/quantize.py", "runs/bench-nsmc-bert"),
        minutes=2,
        needs=(*NSMC, "run:runs/bench-nsmc-bert"),
    ),
    Benchmark(  # the shipped recipes' tokens/s with the code before issue 17 and now
        "recipe-speed",
        ("benchmarks/recipe_speed.py",),
        minutes=8,
        needs=NSMC_PRE + M30K,
    ),
    Benchmark(  # the same code with and without training.compile (torch.compile)
        "recipe-speed-compile",
        (
            "benchmarks/recipe_speed.py",
            "configs/nsmc-transformer.yaml",
            "configs/nsmc-pretrain.yaml",
            "--before",
            "HEAD",
            "--after-set",
            "training.compile=true",
            "--steps",
            "150",
            "--name",
            "recipe-speed-compile",
        ),  # fmt: skip
        minutes=12,
        needs=NSMC_PRE,
    ),
    # attention in bf16 on the CPU: the explicit formula instead of the fused kernel
    # (1dcbac1 is main just before that change)
    Benchmark(
        "recipe-speed-cpu-bf16-attention",
        (
            "benchmarks/recipe_speed.py",
            "configs/bert-pretrain-ko.yaml",
            "--before",
            "1dcbac1",
            "--steps",
            "100",
            "--name",
            "recipe-speed-cpu-bf16-attention",
        ),  # fmt: skip
        minutes=10,
        needs=NSMC_PRE,
    ),
    # generation only, with attnkit int8 as a contender
    _speed("speed-generate-int8", "--only", "generate", minutes=4),
    # inference only, with attnkit's ONNX export in onnxruntime as a contender
    _speed("speed-infer-onnx", "--only", "infer", minutes=5),
    # issue 15: BERT (benchmarks/bert.py; the Korean ones need runs/bench-bert-pretrain-ko,
    # which nsmc-bert trains first: ~108 min of pretraining)
    _sentiment("imdb-minilm", "imdb-minilm", minutes=75, needs=IMDB),
    Benchmark(
        "conll2003-minilm-3ep",
        (
            "benchmarks/bert.py",
            "configs/conll2003-minilm.yaml",
            "--set",
            "training.epochs=3",
            "--name",
            "conll2003-minilm-3ep",
        ),  # fmt: skip
        minutes=8.5,
        needs=("conll2003:train", "conll2003:test"),
    ),
    Benchmark(
        "nsmc-bert",
        (
            "benchmarks/bert.py",
            "configs/nsmc-bert.yaml",
            "--pretrain",
            "configs/bert-pretrain-ko.yaml",
        ),  # fmt: skip
        minutes=133,
        needs=NSMC_PRE,
    ),
    # more fine-tuning from the same pretrained encoder: a third epoch, then higher rates
    _nsmc_bert("nsmc-bert-3ep", "training.epochs=3"),
    _nsmc_bert("nsmc-bert-lr2e-4", "training.epochs=3", "training.lr=2e-4"),
    _nsmc_bert("nsmc-bert-lr3e-4", "training.epochs=3", "training.lr=3e-4"),
    # a second, longer pretraining (12,500 steps, ~112 min: the 2-hour budget with a margin)
    # into its own run, then the best fine-tuning settings above
    Benchmark(
        "nsmc-bert-12500",
        (
            "benchmarks/bert.py",
            "configs/nsmc-bert.yaml",
            "--pretrain",
            "configs/bert-pretrain-ko.yaml",
            "--pretrain-set",
            "training.max_steps=12500",
            "--pretrain-name",
            "bert-pretrain-ko-12500",
            "--set",
            "training.epochs=3",
            "--set",
            "training.lr=2e-4",
            "--name",
            "nsmc-bert-12500",
        ),  # fmt: skip
        minutes=135,
        needs=NSMC_PRE,
    ),
    # that encoder, with label smoothing against the overconfidence the rising validation
    # loss shows (0.290 at step 2,000 -> 0.31-0.33 while the accuracy still rose)
    _nsmc_bert(
        "nsmc-bert-12500-ls",
        *("training.epochs=3", "training.lr=2e-4", "training.label_smoothing=0.1"),
        encoder="runs/bench-bert-pretrain-ko-12500",
    ),
    # with the faster CPU bf16 attention: more steps in the 2 hours, and whole-word masking
    Benchmark(
        "nsmc-bert-wwm",
        (
            "benchmarks/bert.py",
            "configs/nsmc-bert.yaml",
            "--pretrain",
            "configs/bert-pretrain-ko.yaml",
            "--pretrain-set",
            "training.max_steps=15000",
            "--pretrain-set",
            "data.whole_word_mask=true",
            "--pretrain-name",
            "bert-pretrain-ko-wwm",
            "--set",
            "training.epochs=3",
            "--set",
            "training.lr=2e-4",
            "--name",
            "nsmc-bert-wwm",
        ),  # fmt: skip
        minutes=140,
        needs=NSMC_PRE,
    ),
    # that encoder fine-tuned a 4th epoch: validation accuracy was still rising at the end of
    # the 3rd (0.8845 / 0.8885 / 0.8888 / 0.8908 at steps 4,000 / 5,000 / 6,000 / 6,681)
    _nsmc_bert(
        "nsmc-bert-wwm-4ep",
        *("training.epochs=4", "training.lr=2e-4"),
        encoder="runs/bench-bert-pretrain-ko-wwm",
    ),
    # nsmc-bert-wwm again with another seed (head initialisation, batch order, dropout and the
    # validation split): how far apart two fine-tunings of one encoder land on the test set
    _nsmc_bert(
        "nsmc-bert-wwm-seed1",
        *("training.epochs=3", "training.lr=2e-4", "training.seed=1"),
        encoder="runs/bench-bert-pretrain-ko-wwm",
    ),
    # 6 layers instead of 4 (a CPU that runs the 4-layer recipe at ~0.25 s/step leaves room for
    # both more layers and more steps in the 2 hours: 92.4 min here), whole-word masking,
    # 18,000 steps; the classifier on the mean of the last layer over the real tokens instead
    # of BERT's pooler on [CLS] (which next-sentence prediction trained, mostly a topic task)
    Benchmark(
        "nsmc-bert-6l-mean",
        (
            "benchmarks/bert.py",
            "configs/nsmc-bert.yaml",
            "--pretrain",
            "configs/bert-pretrain-ko.yaml",
            "--pretrain-set",
            "model.num_layers=6",
            "--pretrain-set",
            "training.max_steps=18000",
            "--pretrain-set",
            "data.whole_word_mask=true",
            "--pretrain-name",
            "bert-pretrain-ko-6l",
            "--set",
            "training.epochs=3",
            "--set",
            "training.lr=2e-4",
            "--set",
            "model.pooling=mean",
            "--name",
            "nsmc-bert-6l-mean",
        ),  # fmt: skip
        minutes=110,
        needs=NSMC_PRE,
    ),
    # that encoder fine-tuned with BERT's pooler on [CLS], as every earlier row: which pooling
    _nsmc_bert(
        "nsmc-bert-6l",
        *("training.epochs=3", "training.lr=2e-4"),
        encoder="runs/bench-bert-pretrain-ko-6l",
        minutes=13,
    ),
    # self-training: nsmc-bert-6l-mean labels the 639K unlabelled reviews (none from the test
    # set); those it gives >= 0.9, as many negative as positive, join the training split of a
    # new fine-tuning of the same encoder (texts of NSMC's own splits dropped)
    Benchmark(
        "nsmc-bert-6l-self",
        (
            "benchmarks/bert.py",
            "configs/nsmc-bert.yaml",
            "--init",
            "runs/bench-bert-pretrain-ko-6l",
            "--pseudo-from",
            "runs/bench-nsmc-bert-6l-mean",
            "--pseudo-min-confidence",
            "0.9",
            "--pseudo-balance",
            *("--set", "training.epochs=3", "--set", "training.lr=2e-4"),
            *("--set", "model.pooling=mean", "--name", "nsmc-bert-6l-self"),
        ),  # fmt: skip
        minutes=35,
        needs=(
            *NSMC_PRE,
            "run:runs/bench-bert-pretrain-ko-6l",
            "run:runs/bench-nsmc-bert-6l-mean",
        ),
    ),
    # distillation: the ensemble of the three 6-layer fine-tunings above gives its class
    # probabilities for every unlabelled review, and a new fine-tuning of the same encoder
    # learns them (soft targets) next to NSMC's labelled training reviews; one BERT results
    Benchmark(
        "nsmc-bert-6l-distill",
        (
            "benchmarks/bert.py",
            "configs/nsmc-bert.yaml",
            "--init",
            "runs/bench-bert-pretrain-ko-6l",
            *("--pseudo-from", "runs/bench-nsmc-bert-6l-mean"),
            *("--pseudo-from", "runs/bench-nsmc-bert-6l"),
            *("--pseudo-from", "runs/bench-nsmc-bert-6l-self"),
            *("--pseudo-min-confidence", "0", "--pseudo-soft"),
            *("--set", "training.epochs=2", "--set", "training.lr=2e-4"),
            *("--set", "model.pooling=mean", "--name", "nsmc-bert-6l-distill"),
        ),  # fmt: skip
        minutes=60,
        needs=(
            *NSMC_PRE,
            "run:runs/bench-bert-pretrain-ko-6l",
            "run:runs/bench-nsmc-bert-6l-mean",
            "run:runs/bench-nsmc-bert-6l",
            "run:runs/bench-nsmc-bert-6l-self",
        ),
    ),
    *(
        Benchmark(
            name,
            (
                "benchmarks/bert.py",
                f"configs/{recipe}.yaml",
                "--init",
                "runs/bench-bert-pretrain-ko",
                *extra,
                "--name",
                name,
            ),  # fmt: skip
            minutes=minutes,
            needs=(f"{dataset}:train", "run:runs/bench-bert-pretrain-ko"),
            pending=pending,
        )
        for name, recipe, dataset, extra, minutes, pending in (
            ("klue-nli-bert", "klue-nli-bert", "klue-nli", (), 1.7, False),
            ("klue-ner-bert", "klue-ner-bert", "klue-ner", (), 5, False),
            (
                "korquad-bert-1ep",
                "korquad-bert",
                "korquad",
                ("--set", "training.epochs=1"),
                7,
                False,
            ),
            (
                "klue-nli-bert-frozen",
                "klue-nli-bert",
                "klue-nli",
                ("--set", "model.freeze_encoder=true", "--set", "training.lr=1e-3"),
                0.5,
                False,
            ),
            (
                "klue-ner-bert-frozen",
                "klue-ner-bert",
                "klue-ner",
                ("--set", "model.freeze_encoder=true", "--set", "training.lr=1e-3"),
                1.5,
                False,
            ),
        )
    ),
    # issue 18: serving (trains runs/bench-serve-nsmc-quick first when missing)
    Benchmark(
        "serve-load",
        ("benchmarks/serve_load.py",),
        minutes=2,
        needs=NSMC,
    ),
)
BY_NAME = {b.name: b for b in BENCHMARKS}


def missing_data(bench: Benchmark) -> str | None:
    """Why ``bench`` cannot run here (a dataset split not in the data folder, or a run
    another benchmark makes), or None."""
    from attnkit.data.catalogue import dataset_path
    from attnkit.errors import DataError

    for need in bench.needs:
        if need.startswith("run:"):
            run = need.removeprefix("run:")
            if not (ROOT / run / "model.safetensors").is_file():
                return f"run {run} not found (the benchmark that trains it runs first)"
            continue
        name, split, *lang = need.split(":")
        try:
            dataset_path(name, split, lang=lang[0] if lang else None)
        except DataError as err:
            return str(err)
    return None


def _minutes(m: float) -> str:
    return f"~{m:g} min" if m >= 1 else "<1 min"


def print_table() -> None:
    rows = [
        (
            b.name + (" *" if b.quick else "") + (" (not run yet)" if b.pending else ""),
            _minutes(b.minutes),
            b.output(),
            " ".join(b.args),
        )
        for b in BENCHMARKS
    ]
    head = ("name", "time", "writes", "command")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(3)]
    for row in [head, *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)) + "  " + row[3])
    total = sum(b.minutes for b in BENCHMARKS)
    print(
        f"\n* = the default (quick) set. --all: {len(BENCHMARKS)} benchmarks, about "
        f"{total / 60:.0f} hours on 2 CPU cores. Commands run with python from {ROOT}."
    )


def run(bench: Benchmark) -> bool:
    print(f"=== {bench.name}: start {time.strftime('%H:%M:%S')}: python {' '.join(bench.args)}")
    start = time.perf_counter()
    code = subprocess.call(bench.command(), cwd=ROOT)
    elapsed = time.perf_counter() - start
    status = "ok" if code == 0 else f"FAILED (exit {code})"
    print(f"=== {bench.name}: end {time.strftime('%H:%M:%S')}: {status} in {elapsed / 60:.1f} min")
    return code == 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="NAME", help="benchmarks to run (--list)")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    parser.add_argument("--all", action="store_true", help="run every benchmark (hours)")
    args = parser.parse_args(argv)
    if args.list:
        print_table()
        return 0
    unknown = [n for n in args.names if n not in BY_NAME]
    if unknown:
        print(
            f"run_all.py: error: unknown benchmark {', '.join(unknown)} (see --list)",
            file=sys.stderr,
        )
        return 2
    if args.all and args.names:
        print("run_all.py: error: give names or --all, not both", file=sys.stderr)
        return 2
    if args.names:
        chosen = [BY_NAME[n] for n in args.names]
    else:
        chosen = [b for b in BENCHMARKS if args.all or b.quick]
    if not os.environ.get("ATTNKIT_DATA") and SHARED_DATA.is_dir():
        os.environ["ATTNKIT_DATA"] = str(SHARED_DATA)  # as the Makefile does; children inherit

    from attnkit.data.paths import resolve_data_dir

    print(f"data folder: {resolve_data_dir()}")
    failed, skipped = [], []
    for bench in chosen:
        reason = missing_data(bench)
        if reason:
            print(f"=== {bench.name}: skipped: {reason}")
            skipped.append(bench.name)
        elif not run(bench):
            failed.append(bench.name)
    ran = len(chosen) - len(skipped)
    print(
        f"ran {ran} of {len(chosen)}: {ran - len(failed)} passed"
        + (f", failed: {', '.join(failed)}" if failed else "")
        + (f"; skipped (no data): {', '.join(skipped)}" if skipped else "")
    )
    return 1 if failed or (args.names and skipped) else 0


if __name__ == "__main__":
    raise SystemExit(main())

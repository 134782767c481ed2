"""Run the benchmarks behind docs/results.md, one at a time (``make bench``).

    python benchmarks/run_all.py              # the quick set (a few minutes in all)
    python benchmarks/run_all.py --list       # every benchmark: command, duration, output
    python benchmarks/run_all.py NAME ...     # the named ones, in the order given
    python benchmarks/run_all.py --all        # everything, sequentially (many hours on 2 cores)

An experiment is files: each benchmark below is a script of benchmarks/ and the recipe files
it trains (configs/NAME.yaml as shipped, or configs/experiments/NAME.yaml: a shipped recipe
with the settings that benchmark changed, written out), plus the script's own options that
are no recipe setting (``--steps``, ``--name``, ``--pseudo-from``, ...). No command here
carries ``--set``: tests/benchmarks/test_bench_run_all.py checks that, and that every experiment file
resolves to the config its benchmark trained.

Each benchmark runs as a subprocess of this Python, from the repository root, and prints its
own output; this runner adds start / end lines with the elapsed time and a summary. A
benchmark whose dataset is not in the data folder (``ATTNKIT_DATA``; unset, it defaults to
../shared/data when that exists, as in the Makefile) or whose starting run (``run:...``,
another benchmark trains it) is missing is skipped with the reason: nothing is downloaded.
Exit status: 0 when every benchmark that ran passed, 1 when one failed (or a benchmark named
on the command line was skipped), 2 for an unknown name.

Durations are those measured on this project's 2-core CPU machine (benchmarks/results/*.json).
Every benchmark except imdb-movie-groups overwrites its benchmarks/results/NAME.json and
rebuilds docs/results.md; runs go to runs/.
"""

from __future__ import annotations

import argparse
import os
import shlex
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
    run: str  # SCRIPT of benchmarks/ and its arguments: recipe files, options
    minutes: float  # rough wall time on 2 CPU cores
    needs: tuple[str, ...]  # dataset splits, "dataset:split[:lang]"; or "run:runs/NAME"
    quick: bool = False  # in the default set
    pending: bool = False  # registered but not run yet: no results/NAME.json, no row
    writes: str = RESULTS

    @property
    def args(self) -> tuple[str, ...]:
        """``benchmarks/SCRIPT`` and its arguments."""
        script, *rest = shlex.split(self.run)
        return (f"benchmarks/{script}", *rest)

    @property
    def script(self) -> Path:
        return ROOT / self.args[0]

    @property
    def recipes(self) -> tuple[str, ...]:
        """The recipe files the command trains (every ``.yaml`` argument)."""
        return tuple(a for a in self.args if a.endswith(".yaml"))

    def command(self) -> list[str]:
        return [sys.executable, *self.args]

    def output(self) -> str:
        return self.writes.format(name=self.name)


C, X = "configs", "configs/experiments"  # shipped recipes; benchmarks' own (written out)
NSMC = ("nsmc:train", "nsmc:test")
NSMC_PRE = (*NSMC, "nsmc:unlabeled")
IMDB = ("imdb:train", "imdb:test")
IMDB_PRE = (*IMDB, "imdb:unlabeled")
M30K = tuple(f"multi30k:{s}:{lang}" for s in ("train", "val", "test") for lang in ("de", "en"))
SHAKESPEARE = ("tinyshakespeare:train",)
KO = "run:runs/bench-bert-pretrain-ko"  # the Korean BERT encoder nsmc-bert pretrains
KO_6L = ("run:runs/bench-bert-pretrain-ko-6l",)  # the 6-layer one nsmc-bert-6l-mean pretrains
SPEED_PLOT = RESULTS + " + docs/{name}_ratios.png"
TEACHERS = ("6l-mean", "6l", "6l-self")  # nsmc-bert-6l-distill's: runs/bench-nsmc-bert-6l-*
B = Benchmark

# The rows of docs/results.md: name, command (benchmarks/SCRIPT ...), minutes, what it needs.
# Left out: the -v1/-v2 rows, whose commands first check out older recipes with git.
# fmt: off
BENCHMARKS: tuple[Benchmark, ...] = (
    B("nsmc-quick", f"sentiment.py {C}/nsmc-quick.yaml", 1.2, NSMC, quick=True),
    B("imdb-quick", f"sentiment.py {C}/imdb-quick.yaml", 1.2, IMDB, quick=True),
    B("nsmc-ngram", f"sentiment.py {C}/nsmc-ngram.yaml", 1.5, NSMC, quick=True),
    B("imdb-ngram", f"sentiment.py {C}/imdb-ngram.yaml", 0.6, IMDB, quick=True),
    B("imdb-movie-groups", "imdb_movie_groups.py", 0.3, ("imdb:train",), quick=True,
      writes="nothing (prints the overlap of neighbouring reviews)"),
    B("nsmc-ngram-bf16", f"sentiment.py {X}/nsmc-ngram-bf16.yaml", 1, NSMC),
    B("imdb-ngram-bf16", f"sentiment.py {X}/imdb-ngram-bf16.yaml", 0.7, IMDB),
    B("nsmc-transformer", f"sentiment.py {C}/nsmc-transformer.yaml", 16, NSMC),
    B("nsmc-gru", f"sentiment.py {C}/nsmc-gru.yaml", 12.5, NSMC),
    B("nsmc-lstm", f"sentiment.py {C}/nsmc-lstm.yaml", 16, NSMC),
    B("nsmc-finetune", f"sentiment.py {C}/nsmc-finetune.yaml --pretrain {C}/nsmc-pretrain.yaml",
      30, NSMC_PRE),
    B("nsmc-electra", f"sentiment.py {C}/nsmc-finetune.yaml --pretrain {C}/nsmc-electra.yaml "
      "--name nsmc-electra", 29, NSMC_PRE),
    # a shorter pretraining, then the classifier averaged with a second one from scratch
    B("nsmc-ensemble", f"sentiment.py {C}/nsmc-finetune.yaml --pretrain "
      f"{X}/nsmc-pretrain-2800.yaml --ensemble {X}/nsmc-gru-h128.yaml --name nsmc-ensemble",
      29, NSMC_PRE),
    B("nsmc-ensemble-ngram", f"sentiment.py {C}/nsmc-finetune.yaml --pretrain "
      f"{X}/nsmc-pretrain-2800.yaml --ensemble {C}/nsmc-ngram.yaml --name nsmc-ensemble-ngram",
      24, NSMC_PRE),
    B("imdb-transformer", f"sentiment.py {C}/imdb-transformer.yaml", 19, IMDB),
    B("imdb-finetune", f"sentiment.py {C}/imdb-finetune.yaml --pretrain {C}/imdb-pretrain.yaml",
      29, IMDB_PRE),
    B("multi30k-transformer", f"seq2seq.py {C}/multi30k-transformer.yaml", 55, M30K),
    B("multi30k-lstm", f"seq2seq.py {C}/multi30k-lstm.yaml", 28, M30K),
    B("multi30k-lstm-attn", f"seq2seq.py {C}/multi30k-lstm-attn.yaml", 45, M30K),
    B("chatbot-ko", f"seq2seq.py {C}/chatbot-ko.yaml", 16, ("chatbot-ko:train",)),
    # training tokens/s of one recipe: fp32 vs bf16, dropout as in the recipe vs none
    B("speed-nsmc-transformer", f"bf16_speed.py {C}/nsmc-transformer.yaml --steps 150", 10, NSMC),
    B("dropout-nsmc-transformer", f"dropout_speed.py {C}/nsmc-transformer.yaml --steps 60", 4,
      NSMC),
    B("dropout-imdb-transformer-max_len512",
      f"dropout_speed.py {X}/imdb-transformer-max_len512.yaml --steps 30", 5, IMDB),
    B("dropout-nsmc-pretrain-dropout0.1-limit100000",
      f"dropout_speed.py {X}/nsmc-pretrain-dropout0.1-limit100000.yaml --steps 60", 5, NSMC_PRE),
    # issue 16: language models (benchmarks/lm.py)
    B("shakespeare-char", f"lm.py {C}/shakespeare-char.yaml", 30, SHAKESPEARE),
    B("shakespeare-nanogpt-cpu", f"lm.py {C}/shakespeare-nanogpt-cpu.yaml", 2.5, SHAKESPEARE),
    B("shakespeare-bpe", f"lm.py {C}/shakespeare-bpe.yaml", 11.5, SHAKESPEARE),
    # times the model shakespeare-char trains (run that first)
    B("generation-shakespeare-char", "lm.py --generation runs/bench-shakespeare-char", 0.5,
      ("run:runs/bench-shakespeare-char",)),
    # configs/nsmc-bilm.yaml, then nsmc-elmo.yaml and nsmc-elmo-baseline.yaml (lm.py's defaults)
    B("elmo-nsmc", "lm.py --elmo", 40, NSMC_PRE),
    # issue 17: attnkit vs transformers / torch.nn, interleaved (no dataset; run it on a quiet
    # machine: every ratio comes from one run); then the training rows again, 15 timed
    # iterations each (the ratios vary by run)
    B("speed", "speed.py", 10, (), writes=SPEED_PLOT),
    B("speed-train-iters15", "speed.py --only train --iters 15 --name speed-train-iters15", 10,
      (), writes=SPEED_PLOT),
    # int8 export of the Korean BERT fine-tuned on NSMC (nsmc-bert trains it)
    B("quantize-bench-nsmc-bert", "quantize.py runs/bench-nsmc-bert", 2,
      (*NSMC, "run:runs/bench-nsmc-bert")),
    # the shipped recipes' tokens/s with the code before issue 17 and now; the same code with
    # and without training.compile (torch.compile: the setting measured, so an option); the
    # attention in bf16 on the CPU: the explicit formula instead of the fused kernel (1dcbac1
    # is main just before that change)
    B("recipe-speed", "recipe_speed.py", 8, NSMC_PRE + M30K),
    B("recipe-speed-compile", f"recipe_speed.py {C}/nsmc-transformer.yaml {C}/nsmc-pretrain.yaml "
      "--before HEAD --after-set training.compile=true --steps 150 --name recipe-speed-compile",
      12, NSMC_PRE),
    B("recipe-speed-cpu-bf16-attention", f"recipe_speed.py {C}/bert-pretrain-ko.yaml --before "
      "1dcbac1 --steps 100 --name recipe-speed-cpu-bf16-attention", 10, NSMC_PRE),
    # generation only, with attnkit int8 as a contender; inference only, with attnkit's ONNX
    # export in onnxruntime as a contender
    B("speed-generate-int8", "speed.py --only generate --name speed-generate-int8", 4, (),
      writes=SPEED_PLOT),
    B("speed-infer-onnx", "speed.py --only infer --name speed-infer-onnx", 5, (),
      writes=SPEED_PLOT),
    # issue 15: BERT (benchmarks/bert.py; the Korean ones start from runs/bench-bert-pretrain-ko,
    # which nsmc-bert trains first: ~108 min of pretraining)
    B("imdb-minilm", f"sentiment.py {C}/imdb-minilm.yaml", 75, IMDB),
    B("conll2003-minilm-3ep", f"bert.py {X}/conll2003-minilm-3ep.yaml", 8.5,
      ("conll2003:train", "conll2003:test")),
    B("nsmc-bert", f"bert.py {C}/nsmc-bert.yaml --pretrain {C}/bert-pretrain-ko.yaml", 133,
      NSMC_PRE),
    # more fine-tuning from the same pretrained encoder: a third epoch, then higher rates
    B("nsmc-bert-3ep", f"bert.py {X}/nsmc-bert-3ep.yaml", 28, (*NSMC, KO)),
    B("nsmc-bert-lr2e-4", f"bert.py {X}/nsmc-bert-lr2e-4.yaml", 28, (*NSMC, KO)),
    B("nsmc-bert-lr3e-4", f"bert.py {X}/nsmc-bert-lr3e-4.yaml", 28, (*NSMC, KO)),
    # a second, longer pretraining (12,500 steps, ~112 min: the 2-hour budget with a margin)
    # into its own run, then the best fine-tuning settings above
    B("nsmc-bert-12500",
      f"bert.py {X}/nsmc-bert-12500.yaml --pretrain {X}/bert-pretrain-ko-12500.yaml", 135,
      NSMC_PRE),
    # that encoder, with label smoothing against the overconfidence the rising validation
    # loss shows (0.290 at step 2,000 -> 0.31-0.33 while the accuracy still rose)
    B("nsmc-bert-12500-ls", f"bert.py {X}/nsmc-bert-12500-ls.yaml", 28,
      (*NSMC, f"{KO}-12500")),
    # with the faster CPU bf16 attention: more steps in the 2 hours, and whole-word masking
    B("nsmc-bert-wwm", f"bert.py {X}/nsmc-bert-wwm.yaml --pretrain {X}/bert-pretrain-ko-wwm.yaml",
      140, NSMC_PRE),
    # that encoder fine-tuned a 4th epoch: validation accuracy was still rising at the end of
    # the 3rd (0.8845 / 0.8885 / 0.8888 / 0.8908 at steps 4,000 / 5,000 / 6,000 / 6,681)
    B("nsmc-bert-wwm-4ep", f"bert.py {X}/nsmc-bert-wwm-4ep.yaml", 28, (*NSMC, f"{KO}-wwm")),
    # nsmc-bert-wwm again with another seed (head initialisation, batch order, dropout and the
    # validation split): how far apart two fine-tunings of one encoder land on the test set
    B("nsmc-bert-wwm-seed1", f"bert.py {X}/nsmc-bert-wwm-seed1.yaml", 28, (*NSMC, f"{KO}-wwm")),
    # 6 layers instead of 4 (a CPU that runs the 4-layer recipe at ~0.25 s/step leaves room for
    # both more layers and more steps in the 2 hours: 92.4 min here), whole-word masking,
    # 18,000 steps; the classifier on the mean of the last layer over the real tokens instead
    # of BERT's pooler on [CLS] (which next-sentence prediction trained, mostly a topic task)
    B("nsmc-bert-6l-mean",
      f"bert.py {X}/nsmc-bert-6l-mean.yaml --pretrain {X}/bert-pretrain-ko-6l.yaml", 110,
      NSMC_PRE),
    # that encoder fine-tuned with BERT's pooler on [CLS], as every earlier row: which pooling
    B("nsmc-bert-6l", f"bert.py {X}/nsmc-bert-6l.yaml", 13, (*NSMC, *KO_6L)),
    # self-training: nsmc-bert-6l-mean labels the 639K unlabelled reviews (none from the test
    # set); those it gives >= 0.9, as many negative as positive, join the training split of a
    # new fine-tuning of the same encoder (texts of NSMC's own splits dropped)
    B("nsmc-bert-6l-self", f"bert.py {X}/nsmc-bert-6l-self.yaml --pseudo-from "
      "runs/bench-nsmc-bert-6l-mean --pseudo-min-confidence 0.9 --pseudo-balance", 35,
      (*NSMC_PRE, *KO_6L, "run:runs/bench-nsmc-bert-6l-mean")),
    # distillation: the ensemble of the three 6-layer fine-tunings above gives its class
    # probabilities for every unlabelled review, and a new fine-tuning of the same encoder
    # learns them (soft targets) next to NSMC's labelled training reviews; one BERT results
    B("nsmc-bert-6l-distill", f"bert.py {X}/nsmc-bert-6l-distill.yaml "
      + "".join(f"--pseudo-from runs/bench-nsmc-bert-{t} " for t in TEACHERS)
      + "--pseudo-min-confidence 0 --pseudo-soft", 60,
      (*NSMC_PRE, *KO_6L, *(f"run:runs/bench-nsmc-bert-{t}" for t in TEACHERS))),
    # the Korean encoder on other tasks: fine-tuned, and feature-based (frozen encoder)
    B("klue-nli-bert", f"bert.py {X}/klue-nli-bert.yaml", 1.7, ("klue-nli:train", KO)),
    B("klue-ner-bert", f"bert.py {X}/klue-ner-bert.yaml", 5, ("klue-ner:train", KO)),
    B("korquad-bert-1ep", f"bert.py {X}/korquad-bert-1ep.yaml", 7, ("korquad:train", KO)),
    B("klue-nli-bert-frozen", f"bert.py {X}/klue-nli-bert-frozen.yaml", 0.5,
      ("klue-nli:train", KO)),
    B("klue-ner-bert-frozen", f"bert.py {X}/klue-ner-bert-frozen.yaml", 1.5,
      ("klue-ner:train", KO)),
    # issue 18: serving (trains runs/bench-serve-nsmc-quick first when missing)
    B("serve-load", "serve_load.py", 2, NSMC),
    # issue 31: 1 vs 2 torch threads, quiet and with one core kept busy
    B("threads-nsmc-quick", f"threads.py {C}/nsmc-quick.yaml --steps 300", 6, NSMC),
    # issue 34: capture + page of `attnkit explain` for a 6-layer, 128-token model
    B("explain-render", "explain_render.py", 0.5, ()),
)
# fmt: on
BY_NAME = {b.name: b for b in BENCHMARKS}


def missing_data(bench: Benchmark) -> str | None:
    """Why ``bench`` cannot run here (a dataset split not in the data folder, or a run
    another benchmark makes), or None."""
    from attnkit.core.errors import DataError
    from attnkit.data.catalogue import dataset_path

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

"""benchmarks/lm.py and its tables in docs/results.md (benchmarks/report.py): sample records
of each kind render, the throughput measurement decodes the same tokens with and without the
KV cache, and the ELMo comparison's recipes are checked for equal budgets. No benchmark
runs here and nothing is written outside tmp_path."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"

LM = {
    "kind": "lm",
    "name": "shakespeare-char",
    "command": "python benchmarks/lm.py configs/shakespeare-char.yaml",
    "recipe": "configs/shakespeare-char.yaml",
    "dataset": "tinyshakespeare",
    "tokenizer": "char",
    "vocab_size": 72,
    "model": {"num_layers": 6, "d_model": 192, "num_heads": 6, "d_ff": 768, "context": 128},
    "num_parameters": 2707968,
    "batch_size": 16,
    "bf16": True,
    "steps": 1800,
    "train_tokens": 3686400,
    "train_minutes": 24.1,
    "total_minutes": 24.6,
    "tokens_per_s": 2827,
    "validation": {
        "loss": 1.5912,
        "perplexity": 4.909,
        "bits_per_char": 2.2956,
        "bits_per_token": 2.2956,
    },
    "validation_tokens": 111539,
    "best_val_loss": 1.5913,
    "best_step": 1800,
    "last_val_loss": 1.5913,
    "target_loss": 1.6,
    "target_step": 1750,
    "target_minutes": 23.4,
    "sample": {
        "prompt": "ROMEO:",
        "text": "\nWhat | say you?\n",
        "max_new_tokens": 200,
        "temperature": 0.8,
        "top_k": 40,
        "seed": 0,
    },
    "threads": 2,
    "peak_rss_mb": 826,
    "machine": "x86_64, cpu, 2 threads, torch 2.13.0+cpu, attnkit 0.2.0",
    "cpu_native_bf16": True,
    "date": "2026-11-24",
}
GENERATION = {
    "kind": "generation",
    "name": "generation-shakespeare-char",
    "command": "python benchmarks/lm.py --generation runs/bench-shakespeare-char",
    "source": "`runs/bench-shakespeare-char`",
    "model": {"num_layers": 6, "d_model": 192, "num_heads": 6, "d_ff": 768, "context": 128},
    "vocab_size": 72,
    "num_parameters": 2707968,
    "decoding": "greedy",
    "prompt_tokens": 1,
    "new_tokens": 128,
    "window_slides": False,
    "repeats": 3,
    "same_tokens": True,
    "results": [
        {
            "batch": 1,
            "cache_tokens_per_s": 613.6,
            "no_cache_tokens_per_s": 123.0,
            "cache_speedup": 4.99,
        },
        {
            "batch": 8,
            "cache_tokens_per_s": 2197.8,
            "no_cache_tokens_per_s": 192.1,
            "cache_speedup": 11.44,
        },
    ],  # fmt: skip
    "threads": 2,
    "machine": "x86_64, cpu, 2 threads, torch 2.13.0+cpu, attnkit 0.2.0",
    "date": "2026-11-24",
}
_CLASSIFIER = {
    "recipe": "configs/nsmc-elmo-baseline.yaml",
    "command": "attnkit train configs/nsmc-elmo-baseline.yaml --out runs/bench-elmo-nsmc-baseline",
    "arch": "lstm",
    "num_parameters": 1691650,
    "trainable_parameters": 1691650,
    "test": {"accuracy": 0.8312, "macro_f1": 0.8311},
    "test_examples": 49997,
    "best_val_metric": 0.83,
    "steps": 4450,
    "train_minutes": 9.8,
    "total_minutes": 10.5,
    "tokens_per_s": 6839,
}
ELMO = {
    "kind": "elmo",
    "name": "elmo-nsmc",
    "command": "python benchmarks/lm.py --elmo",
    "bilm": {
        "recipe": "configs/nsmc-bilm.yaml",
        "command": "attnkit train configs/nsmc-bilm.yaml --out runs/bench-elmo-nsmc-bilm",
        "dataset": "nsmc",
        "vocab_size": 16000,
        "num_layers": 2,
        "hidden_size": 256,
        "num_parameters": 12345678,
        "steps": 800,
        "best_step": 800,
        "train_minutes": 16.2,
        "total_minutes": 17.5,
        "tokens_per_s": 1129,
        "validation": {
            "forward_perplexity": 95.31,
            "backward_perplexity": 97.02,
            "perplexity": 96.16,
            "loss": 9.1,
        },
    },
    "elmo": {
        **_CLASSIFIER,
        "recipe": "configs/nsmc-elmo.yaml",
        "command": "attnkit train configs/nsmc-elmo.yaml --out runs/bench-elmo-nsmc",
        "arch": "elmo",
        "trainable_parameters": 2740230,
        "test": {"accuracy": 0.8456, "macro_f1": 0.8311},
        "mix_s": [0.21, 0.35, 0.44],
        "mix_gamma": 1.234,
    },
    "baseline": _CLASSIFIER,
    "accuracy_gain": 0.0144,
    "same_budget": True,
    "threads": 2,
    "machine": "x86_64, cpu, 2 threads, torch 2.13.0+cpu, attnkit 0.2.0",
    "date": "2026-11-24",
}


@pytest.fixture
def bench(monkeypatch):
    """benchmarks/ importable (report, lm) for one test."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    for name in ("report", "lm"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    yield importlib.import_module("report"), importlib.import_module("lm")
    for name in ("report", "lm"):
        sys.modules.pop(name, None)


def test_report_renders_each_language_model_kind(bench):
    report, _ = bench
    assert [report.check_record(r) for r in (ELMO, GENERATION, LM)] == [[], [], []]
    text = report.render([ELMO, GENERATION, LM])  # (results are read in file-name order)
    for header in (
        "## Language models (GPT)",
        "## Generation throughput (GPT)",
        "## ELMo: biLM perplexity and feature-based sentiment classification",
    ):
        assert text.count(header) == 1
    # each kind's row(s), with the command that produced it
    assert "| shakespeare-char | tinyshakespeare | char 72 | 6 x 192, 6 heads | 2,707,968 " in text
    assert "| 1.5912 | 1.5913 / 1.5913 | 4.91 | 2.296 | <= 1.60: step 1,750, 23.4 min " in text
    assert text.count(f"`{LM['command']}`") == 1
    assert "ROMEO:\nWhat | say you?\n```" in text  # the sample, in a code block
    assert "| 1 + 128 | 1 | 613.6 | 123.0 | 4.99x | yes |" in text
    assert "| 1 + 128 | 8 | 2,197.8 | 192.1 | 11.44x | yes |" in text
    assert text.count(f"`{GENERATION['command']}`") == 2
    assert "| 95.31 | 97.02 | 96.16 | `attnkit train configs/nsmc-bilm.yaml" in text
    assert (
        "| with ELMo | 2,740,230 | 0.8456 | 0.8311 | 4,450 | 9.8 | 0.210 / 0.350 / 0.440 " in text
    )
    assert "| 1.234 | `attnkit train configs/nsmc-elmo.yaml --out runs/bench-elmo-nsmc` |" in text
    assert "| without (baseline) | 1,691,650 | 0.8312 |" in text
    assert "| ELMo - baseline | | +0.0144 | | same steps |" in text
    # none of them leaks into the sentiment table (it lists the records of kind sentiment)
    sentiment = text.split("## Language models")[0]
    assert "elmo-nsmc" not in sentiment and "shakespeare" not in sentiment
    assert "Notes on the language-model benchmarks" in text  # benchmarks/notes-lm.md


def test_report_leaves_the_lm_sections_out_without_records(bench):
    report, _ = bench
    text = report.render([])
    assert "Language models" not in text and "ELMo" not in text


def test_generation_speed_decodes_the_same_tokens_with_and_without_cache(bench):
    _, lm = bench
    model, source = lm.generation_model("tiny", vocab_size=50, max_len=16)
    assert source == "preset tiny, random weights" and not model.training
    fast, a = lm.generation_speed(model, 2, 3, 10, True, repeats=1)
    slow, b = lm.generation_speed(model, 2, 3, 10, False, repeats=1)
    assert a.shape == (2, 10) and torch.equal(a, b) and fast > 0 and slow > 0


def test_elmo_recipes_have_the_same_data_and_training(bench, tmp_path):
    _, lm = bench
    elmo, baseline = ROOT / "configs/nsmc-elmo.yaml", ROOT / "configs/nsmc-elmo-baseline.yaml"
    bilm = tmp_path / "bilm"
    assert lm.budget_differences(str(elmo), str(baseline), [], bilm) == []
    assert lm.budget_differences(str(elmo), str(baseline), ["training.epochs=1"], bilm) == []
    changed = tmp_path / "baseline.yaml"
    changed.write_text(baseline.read_text().replace("epochs: 2", "epochs: 3"))
    assert lm.budget_differences(str(elmo), str(changed), [], bilm) == ["training.epochs: 2 vs 3"]


@pytest.mark.slow
def test_a_classifier_record_has_the_test_scores_of_the_schema(bench, tiny_config, tmp_path):
    """ELMo's classifiers record their test scores as ``test: {accuracy, macro_f1}``."""
    _, lm = bench
    record = lm._classifier(str(tiny_config), tmp_path / "run", ["training.epochs=1"])
    assert set(record["test"]) == {"accuracy", "macro_f1"} and record["test_examples"] == 80
    assert "best_val_metric" in record and "test_accuracy" not in record

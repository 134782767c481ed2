"""Sequence to sequence end to end on a toy reversal task: config keys, batch layout, the
loss, training through the API and the CLI, translate (stdin, beam, trace, attention plot),
chat and evaluate. Everything is tiny and made here, so the whole file takes seconds."""

from __future__ import annotations

import io
import json
import random
import re
import sys
from pathlib import Path

import pytest
import torch
import yaml

from attnkit import load, train
from attnkit.app.cli import main
from attnkit.core.config import ConfigError
from attnkit.data.parallel import Pair
from attnkit.data.paths import DataError
from attnkit.data.tokenization import train_tokenizer
from attnkit.tasks.run_config import RunConfig, load_config
from attnkit.tasks.seq2seq import (
    Seq2SeqObjective,
    Seq2SeqPredictor,
    encode_pairs,
    read_split,
)

WORDS = ["red", "blue", "green", "cat", "dog", "sun", "moon", "tree"]
ROOT = Path(__file__).resolve().parents[2]


def reversal_pairs(n: int, seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words = rng.choices(WORDS, k=rng.randint(2, 5))
        out.append((" ".join(words), " ".join(reversed(words))))
    return out


def write_tsv(path: Path, pairs) -> Path:
    path.write_text("".join(f"{s}\t{t}\n" for s, t in pairs), encoding="utf-8")
    return path


def s2s_recipe(data: Path, task: str = "translate", arch: str = "transformer", **model) -> dict:
    if arch == "transformer":
        sizes = {"d_model": 32, "num_heads": 2, "d_ff": 64, "num_layers": 1}
    else:
        sizes = {"emb_dim": 16, "hidden_size": 32, "num_layers": 1}
    return {
        "task": task,
        "data": {
            "name": "file",
            "train": str(data / "train.tsv"),
            "validation": str(data / "val.tsv"),
            "test": str(data / "test.tsv"),
            "max_len": 12,
        },
        "tokenizer": {"kind": "wordpiece", "vocab_size": 60, "min_frequency": 1},
        "model": {"arch": arch, "dropout": 0.0, "share_embeddings": True, **sizes, **model},
        "training": {
            "max_steps": 40,
            "eval_every": 20,
            "batch_size": 16,
            "lr": 5e-3,
            "schedule": "constant",
            "warmup_steps": 0,
            "label_smoothing": 0.1,
            "log_every": 10,
            "progress": False,
            "num_threads": 1,
        },
    }


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("s2s")
    data = root / "data"
    data.mkdir()
    write_tsv(data / "train.tsv", reversal_pairs(200, 0))
    write_tsv(data / "val.tsv", reversal_pairs(16, 1))
    write_tsv(data / "test.tsv", reversal_pairs(16, 2))
    # Transformer translator through the CLI
    recipe = root / "mt.yaml"
    recipe.write_text(yaml.safe_dump(s2s_recipe(data)), encoding="utf-8")
    assert main(["train", str(recipe), "--out", str(root / "mt")]) == 0
    with pytest.MonkeyPatch.context() as mp:  # curves.png is tested above; it costs ~0.7 s
        mp.setattr("attnkit.runtime.viz.draw_run_curves", lambda run: run.curves_path)
        # LSTM + attention translator through the API (teacher forcing 0.5)
        cfg = s2s_recipe(data, arch="lstm", attention="general")
        cfg["training"]["teacher_forcing_ratio"] = 0.5
        train(RunConfig.from_dict(cfg), out=root / "lstm", log=lambda *a: None)
        # a chatbot: LSTM without attention
        train(
            RunConfig.from_dict(s2s_recipe(data, task="chat", arch="lstm")),
            out=root / "chat",
            log=lambda *a: None,
        )
    return root


def _run(argv, capsys, monkeypatch=None, stdin: bytes | None = None):
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


# ----------------------------------------------------------------------------- config
def _base(**changes) -> dict:
    raw = s2s_recipe(Path("/nonexistent"), arch=changes.pop("model__arch", "transformer"))
    for dotted, value in changes.items():
        section, key = dotted.split("__")
        raw[section][key] = value
    return raw


def test_config_seq2seq_keys_and_preset():
    cfg = RunConfig.from_dict(
        {"task": "translate", "data": {"name": "multi30k"}, "model": {"preset": "small"}}
    )
    m = cfg.model
    assert (m.d_model, m.num_heads, m.d_ff, m.num_layers, m.num_decoder_layers) == (
        256,
        4,
        1024,
        3,
        3,
    )
    assert (cfg.data.src_lang, cfg.data.tgt_lang) == ("de", "en")
    explicit = RunConfig.from_dict(
        {
            "task": "translate",
            "data": {"name": "multi30k"},
            "model": {"preset": "base", "d_model": 128, "num_heads": 4},
        }
    )
    assert explicit.model.d_model == 128 and explicit.model.num_layers == 6
    # the saved config reloads to the same values
    assert RunConfig.from_dict(explicit.to_dict()).model == explicit.model
    lstm = RunConfig.from_dict(_base(model__arch="lstm", model__attention="concat"))
    assert lstm.model.attention == "concat" and lstm.task == "translate"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (_base(model__arch="lstm", model__atention="dot"), "did you mean 'attention'"),
        (_base(training__teacher_forcing=0.5), "did you mean 'teacher_forcing_ratio'"),
        (_base(model__preset="huge"), "model.preset"),
        (_base(model__arch="gru"), "transformer or lstm"),
        (_base(data__name="nsmc"), "data.name"),
        (_base(model__arch="lstm", model__attention="bahdanau"), "model.attention"),
        (_base(model__attention="dot"), "LSTM"),
        (_base(training__teacher_forcing_ratio=1.5), "teacher_forcing_ratio"),
        (_base(data__src_lang="fr", data__name="multi30k"), "multi30k"),
        ({**_base(), "task": "translation"}, "unknown task"),
    ],
)
def test_config_rejects_bad_seq2seq_keys(raw, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        RunConfig.from_dict(raw)


def test_recipes_load():
    for name in ("multi30k-transformer", "multi30k-lstm", "multi30k-lstm-attn", "chatbot-ko"):
        cfg = load_config(ROOT / "configs" / f"{name}.yaml")
        assert cfg.task in ("translate", "chat")
    cfg = load_config(ROOT / "configs" / "multi30k-transformer.yaml")
    assert cfg.model.d_model == 256 and cfg.model.share_embeddings
    assert (cfg.model.num_layers, cfg.model.num_decoder_layers) == (3, 3)
    assert cfg.training.label_smoothing == 0.1
    assert load_config(ROOT / "configs" / "chatbot-ko.yaml").training.schedule == "noam"
    assert load_config(ROOT / "configs" / "multi30k-lstm.yaml").model.attention is None
    classify = load_config(ROOT / "configs" / "nsmc-transformer.yaml")
    assert classify.task == "classify" and not hasattr(classify.model, "attention")


# ----------------------------------------------------------------------------- batch + loss
@pytest.fixture(scope="module")
def toy():
    pairs = [Pair(s, t) for s, t in reversal_pairs(40, 3)]
    tok = train_tokenizer([x for p in pairs for x in p], vocab_size=60, min_frequency=1)
    return pairs, tok


def test_collate_shapes_and_shift(toy):
    pairs, tok = toy
    items, _ = encode_pairs(pairs[:3], tok, max_len=12)
    task = Seq2SeqObjective("translate", tok, 12)
    b = task.collate(items)
    n = len(items)
    longest_src = max(len(it[0]) for it in items)
    longest_tgt = max(len(it[1]) for it in items) + 1
    assert b["src"].shape == b["src_mask"].shape == (n, longest_src)
    assert b["tgt_in"].shape == b["tgt_out"].shape == b["tgt_mask"].shape == (n, longest_tgt)
    for row, (src, tgt, _) in enumerate(items):
        k = len(tgt)
        assert b["src"][row, : len(src)].tolist() == src
        assert b["tgt_in"][row, : k + 1].tolist() == [tok.bos_id, *tgt]
        assert b["tgt_out"][row, : k + 1].tolist() == [*tgt, tok.eos_id]
        assert (b["tgt_in"][row, k + 1 :] == tok.pad_id).all()
        assert (b["tgt_out"][row, k + 1 :] == tok.pad_id).all()
        assert b["tgt_mask"][row].sum() == k + 1 and b["src_mask"][row].sum() == len(src)
    assert b["index"].tolist() == [0, 1, 2]


@pytest.mark.parametrize("arch", ["transformer", "lstm"])
def test_loss_ignores_padding(toy, arch):
    pairs, tok = toy
    extra = {"attention": "dot"} if arch == "lstm" else {}
    cfg = RunConfig.from_dict(s2s_recipe(Path("/x"), arch=arch, **extra))
    torch.manual_seed(0)
    model = cfg.model.replace(vocab_size=tok.vocab_size, pad_id=tok.pad_id).build().eval()
    task = Seq2SeqObjective("translate", tok, 12, label_smoothing=0.1)
    items, _ = encode_pairs(pairs, tok, max_len=12)
    short = min(items, key=lambda it: len(it[1]) + len(it[0]))
    long = max(items, key=lambda it: len(it[1]) + len(it[0]))
    with torch.no_grad():
        l_short, n_short = task.loss(model, task.collate([short]))
        l_long, n_long = task.loss(model, task.collate([long]))
        l_both, n_both = task.loss(model, task.collate([short, long]))
        # extra padding columns change nothing
        batch = task.collate([short])
        for key in ("src", "tgt_in", "tgt_out"):
            batch[key] = torch.cat([batch[key], torch.full((1, 3), tok.pad_id)], 1)
        for key in ("src_mask", "tgt_mask"):
            batch[key] = torch.cat([batch[key], torch.zeros(1, 3, dtype=torch.bool)], 1)
        l_padded, n_padded = task.loss(model, batch)
    assert n_both == n_short + n_long and n_padded == n_short
    assert l_padded.item() == pytest.approx(l_short.item(), abs=1e-5)
    expected = (l_short * n_short + l_long * n_long) / (n_short + n_long)
    assert l_both.item() == pytest.approx(expected.item(), abs=1e-5)


# ----------------------------------------------------------------------------- training
@pytest.mark.slow
def test_cli_training_wrote_a_translate_run(runs):
    run = runs / "mt"
    assert {
        "config.json",
        "tokenizer.json",
        "model.safetensors",
        "last",
        "metrics.jsonl",
        "curves.png",
    } <= {p.name for p in run.iterdir()}
    cfg = json.loads((run / "config.json").read_text())
    assert cfg["task"] == "translate" and cfg["model"]["share_embeddings"]
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in rows if "val_bleu" in r]
    assert len(evals) == 2 and all("val_perplexity" in r for r in evals)
    train_losses = [r["train_loss"] for r in rows if "train_loss" in r]
    assert train_losses[-1] < train_losses[0]


def test_api_load_translate_and_chat(runs):
    for name in ("mt", "lstm", "chat"):
        predictor = load(runs / name)
        assert isinstance(predictor, Seq2SeqPredictor)
        out = predictor.translate(["red blue green", "", "dog cat"])
        assert len(out) == 3 and out[1] == "" and all(isinstance(x, str) for x in out)
        assert predictor.translate("red dog", beam=3) == predictor.translate(["red dog"], beam=3)
    bot = load(runs / "chat")
    assert bot.task == "chat"
    assert bot.chat("red dog", temperature=1.0, seed=3) == bot.chat(
        "red dog", temperature=1.0, seed=3
    )
    assert bot.chat("red dog", temperature=0) == bot.translate(["red dog"])[0]
    assert bot.chat("   ") == ""


def test_unknown_characters_and_truncation(runs):
    mt = load(runs / "mt")
    assert mt.tokenizer.unk_id in mt.tokenizer.encode("red ☃ 红")
    assert isinstance(mt.translate(["red ☃ 红"])[0], str)
    with pytest.warns(UserWarning, match="longer than max_len=12"):
        mt.translate([" ".join(["red"] * 30)])


def test_alignment_shapes(runs):
    for name in ("mt", "lstm"):
        a = load(runs / name).alignment("red blue green")
        assert a.weights.shape == (len(a.output), len(a.source))
        assert torch.allclose(a.weights.sum(-1), torch.ones(len(a.output)), atol=1e-4)
    with pytest.raises(ValueError, match="no attention"):
        load(runs / "chat").alignment("red blue")


# ----------------------------------------------------------------------------- CLI
def test_translate_stdin_line_for_line(runs, capsys, monkeypatch):
    code, out, _ = _run(
        ["translate", str(runs / "mt"), "-"], capsys, monkeypatch, b"red blue\n\ngreen cat dog\n"
    )
    assert code == 0
    lines = out.split("\n")
    assert len(lines) == 4 and lines[1] == "" and lines[3] == ""  # 3 lines + final newline
    code, out, _ = _run(
        ["translate", str(runs / "lstm"), "red blue", "--beam", "3", "--json"], capsys
    )
    assert code == 0 and set(json.loads(out)) == {"source", "translation"}


def test_translate_beam(runs, capsys):
    code, out, _ = _run(
        ["translate", str(runs / "mt"), "red blue", "cat dog sun", "--beam", "4"], capsys
    )
    assert code == 0 and len(out.splitlines()) == 2


def test_translate_trace_format(runs, capsys):
    code, out, _ = _run(["translate", str(runs / "mt"), "red blue green", "--trace"], capsys)
    assert code == 0
    lines = out.splitlines()
    steps, final = lines[:-1], lines[-1]
    assert steps and not final.startswith("step ")
    pattern = re.compile(
        r"^step (\d+): \[BOS\]( \S+)* -> \S+  \| \S+ [01]\.\d{3}(, \S+ [01]\.\d{3}){4}$"
    )
    for i, line in enumerate(steps, 1):
        m = pattern.match(line)
        assert m, line
        assert int(m.group(1)) == i
    assert steps[-1].split(" -> ")[1].startswith("[EOS]") or len(steps) == 12
    code, _, err = _run(["translate", str(runs / "mt"), "red", "--trace", "--beam", "2"], capsys)
    assert code == 2 and err.count("\n") == 1


def test_show_attention_writes_png(runs, tmp_path, capsys):
    for name in ("mt", "lstm"):
        png = tmp_path / f"{name}.png"
        code, out, err = _run(
            ["translate", str(runs / name), "red blue green", "--show-attention", str(png)], capsys
        )
        assert code == 0 and png.read_bytes()[:4] == b"\x89PNG" and "wrote" in err
    code, _, err = _run(
        ["translate", str(runs / "chat"), "red", "--show-attention", str(tmp_path / "x.png")],
        capsys,
    )
    assert code == 2 and "no attention" in err and err.count("\n") == 1


def test_chat_exits_cleanly_on_eof(runs, capsys, monkeypatch):
    code, out, _ = _run(
        ["chat", str(runs / "chat"), "--seed", "1"], capsys, monkeypatch, b"red dog\n\nsun\n"
    )
    assert code == 0 and len(out.split("\n")) == 4 and out.split("\n")[1] == ""
    code, out, _ = _run(["chat", str(runs / "chat")], capsys, monkeypatch, b"")
    assert code == 0 and out == ""


@pytest.mark.parametrize(
    "argv",
    [
        ["chat", "RUN", "--top-p", "0"],
        ["chat", "RUN", "--temperature", "-1"],
        ["translate", "RUN", "red", "--beam", "0"],
        ["translate", "RUN"],
        ["predict", "RUN", "red"],
        ["translate", "/nonexistent/run", "red"],
    ],
)
def test_bad_input_is_one_line_exit_2(runs, capsys, argv):
    argv = [str(runs / "mt") if a == "RUN" else a for a in argv]
    code, _, err = _run(argv, capsys)
    assert code == 2 and re.match(r"attnkit( \w+)?: error: ", err) and err.count("\n") == 1


def test_translate_warns_on_truncation(runs, capsys):
    code, out, err = _run(["translate", str(runs / "mt"), " ".join(["red"] * 30)], capsys)
    assert code == 0 and len(out.splitlines()) == 1
    assert "attnkit: warning: input 1 is longer than max_len=12" in err


def test_evaluate_translate_and_chat(runs, capsys):
    code, out, _ = _run(["evaluate", str(runs / "mt"), "--split", "test"], capsys)
    assert code == 0
    assert re.search(r"^BLEU\s+\d+\.\d\d  \(greedy decoding\)$", out, re.M)
    assert re.search(
        r"^signature\s+nrefs:1\|case:mixed\|eff:no\|tok:13a\|smooth:exp\|version:", out, re.M
    )
    code, out, _ = _run(["evaluate", str(runs / "lstm"), "--beam", "2", "--json"], capsys)
    report = json.loads(out)
    assert code == 0 and report["decoding"] == "beam 2" and 0 <= report["bleu"] <= 100
    code, out, _ = _run(["evaluate", str(runs / "chat")], capsys)
    assert code == 0 and "perplexity" in out and "BLEU" not in out


def test_evaluate_reports_lowercased_bleu(runs, capsys):
    code, out, _ = _run(["evaluate", str(runs / "mt"), "--json"], capsys)
    report = json.loads(out)
    assert code == 0 and "case:lc" in report["bleu_lowercase_signature"]
    # lowercasing can only merge n-grams into matches: never below the cased score
    assert report["bleu_lowercase"] >= report["bleu"]
    code, out, _ = _run(["evaluate", str(runs / "mt")], capsys)
    assert re.search(r"^BLEU lc\s+\d+\.\d\d  \(lowercased 13a tokens\)$", out, re.M)


# ----------------------------------------------------------------------------- user files
def test_two_aligned_files_by_prefix(tmp_path):
    pairs = reversal_pairs(60, 5)
    for lang, col in (("de", 0), ("en", 1)):
        (tmp_path / f"train.{lang}").write_text("\n".join(p[col] for p in pairs) + "\n")
    write_tsv(tmp_path / "val.tsv", pairs[:8])
    raw = s2s_recipe(tmp_path)
    raw["data"].update(train=str(tmp_path / "train"), test=str(tmp_path / "nothing"))
    raw["training"].update(max_steps=4, eval_every=4)
    cfg = RunConfig.from_dict(raw)
    assert read_split(cfg, "train") == [Pair(s, t) for s, t in pairs]
    assert read_split(cfg, "validation")[0] == Pair(*pairs[0])  # a TSV still works
    with pytest.raises(DataError, match=r"no file .*nothing .*nothing\.de \+ nothing\.en"):
        read_split(cfg, "test")
    (tmp_path / "train.en").write_text("one line\n")
    with pytest.raises(DataError, match="not aligned"):
        read_split(cfg, "train")
    (tmp_path / "train.en").write_text("\n".join(p[1] for p in pairs) + "\n")
    train(cfg, out=tmp_path / "run", log=lambda *a: None)
    assert isinstance(load(tmp_path / "run").translate(["red dog"])[0], str)


# ----------------------------------------------------------------------------- resume
@pytest.mark.slow
def test_seq2seq_resume_after_sigkill_is_exact(tmp_path):
    """An LSTM with dropout and teacher forcing 0.5 (both draw random numbers) killed mid-run
    and resumed logs the same losses and ends with the same weights as an unbroken run."""
    from safetensors.torch import load_file
    from test_training_resume import _cli, _cli_here, _rows

    write_tsv(tmp_path / "train.tsv", reversal_pairs(120, 0))
    write_tsv(tmp_path / "val.tsv", reversal_pairs(8, 1))
    train_tokenizer(
        [w for p in reversal_pairs(120, 0) for w in p], vocab_size=60, min_frequency=1
    ).save(tmp_path / "tok.json")
    raw = s2s_recipe(tmp_path, arch="lstm", attention="concat")
    raw["model"]["dropout"] = 0.2
    raw["tokenizer"]["path"] = str(tmp_path / "tok.json")
    raw["training"].update(max_steps=12, eval_every=6, save_every=3, teacher_forcing_ratio=0.5)
    raw["training"]["log_every"] = 1
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump(raw))
    assert _cli_here("train", str(recipe), "--out", str(tmp_path / "full")) == 0
    crashed = _cli("train", str(recipe), "--out", str(tmp_path / "crash"), killer=True)
    assert crashed.returncode == -9
    assert json.loads((tmp_path / "crash/last/state.json").read_text())["step"] == 6
    resumed = _cli("train", "--resume", "--out", str(tmp_path / "crash"))
    assert resumed.returncode == 0, resumed.stderr
    drop = ("tokens_per_s", "elapsed_s")
    a = [{k: v for k, v in r.items() if k not in drop} for r in _rows(tmp_path / "full")]
    b = [{k: v for k, v in r.items() if k not in drop} for r in _rows(tmp_path / "crash")]
    assert a == b and len([r for r in a if "val_bleu" in r]) == 2
    wa = load_file(str(tmp_path / "full/last/model.safetensors"))
    wb = load_file(str(tmp_path / "crash/last/model.safetensors"))
    for name in wa:
        torch.testing.assert_close(wa[name], wb[name], rtol=0, atol=0)

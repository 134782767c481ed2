"""Task lm: a GPT trained as a causal language model on a text file, Tiny Shakespeare's
split, reviews packed with [EOS], the metrics (bits per character checked on hand cases),
generation from Python and the CLI (streaming, stop strings, seeds, one-line errors)."""

from __future__ import annotations

import gzip
import json
import math
import os
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import yaml
from torch import nn

import attnkit
from attnkit.app.cli import main
from attnkit.core.config import ConfigError
from attnkit.core.errors import InputError
from attnkit.data.tokenization import train_tokenizer
from attnkit.models.gpt import GPT, GPTConfig
from attnkit.tasks.lm import (
    IGNORE_INDEX,
    Generation,
    GenerationRequest,
    LanguageModelObjective,
    LMItem,
    LMPredictor,
    StopGeneration,
    cut_stream,
    prepare_data,
    read_corpus,
    token_stream,
)
from attnkit.tasks.run_config import load_config

SHARED = Path(
    os.environ.get("ATTNKIT_DATA") or Path(__file__).resolve().parents[3] / "shared" / "data"
)
SHAKESPEARE = SHARED / "tinyshakespeare" / "input.txt"

VERSE = (
    "First Citizen:\nBefore we proceed any further, hear me speak.\n\n"
    "All:\nSpeak, speak.\n\n"
    "First Citizen:\nYou are all resolved rather to die than to famish?\n\n"
    "All:\nResolved. resolved.\n\n"
)
CORPUS = VERSE * 12  # ~2,300 characters
TINY_GPT = {"arch": "gpt", "num_layers": 1, "d_model": 32, "num_heads": 2, "d_ff": 64,
            "dropout": 0.0}  # fmt: skip
QUICK = {"max_steps": 12, "batch_size": 8, "lr": 3e-3, "log_every": 4, "eval_every": 6,
         "progress": False, "num_threads": 1, "schedule": "cosine", "warmup_steps": 2}  # fmt: skip


def _write_recipe(path: Path, raw: dict) -> Path:
    path.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    return path


def _char_recipe(corpus: Path, **data) -> dict:
    return {
        "task": "lm",
        "data": {"name": "file", "train": str(corpus), "val_fraction": 0.1, "max_len": 24,
                 **data},
        "tokenizer": {"kind": "char", "min_frequency": 1},
        "model": TINY_GPT,
        "training": QUICK,
    }  # fmt: skip


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("lmdata") / "verse.txt"
    path.write_text(CORPUS, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def lm_run(corpus_file: Path, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("runs") / "verse"
    recipe = _write_recipe(out.parent / "verse.yaml", _char_recipe(corpus_file))
    attnkit.train(recipe, out=out, log=lambda *_: None)
    return out


@pytest.fixture(scope="module")
def lm(lm_run: Path) -> LMPredictor:
    return attnkit.load(lm_run)


# ----------------------------------------------------------------------------- training
def test_training_logs_perplexity_and_bits_per_char(lm_run: Path) -> None:
    rows = [json.loads(line) for line in (lm_run / "metrics.jsonl").read_text().splitlines()]
    val = [r for r in rows if "val_loss" in r]
    assert [r["step"] for r in val] == [6, 12]
    last = val[-1]
    assert last["val_perplexity"] == pytest.approx(math.exp(last["val_loss"]))
    assert last["val_bits_per_token"] == pytest.approx(last["val_loss"] / math.log(2))
    # a char tokenizer: one token per character, so bits per char = bits per token
    assert last["val_bits_per_char"] == pytest.approx(last["val_bits_per_token"])
    assert last["val_num_chars"] == last["val_num_tokens"]
    assert last["val_loss"] < math.log(30)  # learned something (uniform: ln |vocab| ~ 3.6)
    saved = json.loads((lm_run / "config.json").read_text())
    assert saved["task"] == "lm" and saved["model"]["arch"] == "gpt"
    assert saved["model"]["max_len"] == 24
    assert saved["model"]["eos_id"] == 6  # the tokenizer's [EOS]


def test_file_is_one_text_split_by_position(corpus_file: Path) -> None:
    cfg = load_config(_write_recipe(corpus_file.with_name("r.yaml"), _char_recipe(corpus_file)))
    corpus = read_corpus(cfg)
    assert not corpus.documents
    cut = int(len(CORPUS) * 0.9)
    assert corpus.train == [CORPUS[:cut]] and corpus.validation == [CORPUS[cut:]]
    data = prepare_data(cfg, log=lambda *_: None)
    # blocks of max_len + 1 overlapping by one token: every target once, in order
    targets = [t for item in data.train for t in item.ids[1:]]
    assert data.tokenizer.decode(targets) == CORPUS[1:cut]
    assert all(len(it.ids) == 25 for it in data.train[:-1])
    assert sum(it.chars for it in data.validation) == len(CORPUS) - cut - 1


def test_lm_recipe_checks(corpus_file: Path) -> None:
    raw = _char_recipe(corpus_file)
    with pytest.raises(ConfigError, match="data.name"):
        load_config(_write_recipe(corpus_file.with_name("a.yaml"),
                                  {**raw, "data": {"name": "multi30k"}}))  # fmt: skip
    with pytest.raises(ConfigError, match="data.train"):
        load_config(
            _write_recipe(corpus_file.with_name("b.yaml"), {**raw, "data": {"name": "file"}})
        )
    for name in ("shakespeare-char", "shakespeare-nanogpt-cpu", "nsmc-gpt", "imdb-gpt"):
        cfg = load_config(Path(__file__).resolve().parents[2] / "configs" / f"{name}.yaml")
        assert cfg.task == "lm" and cfg.model.arch == "gpt"
    nano = load_config(Path(__file__).resolve().parents[2] / "configs/shakespeare-nanogpt-cpu.yaml")
    m, t = nano.model, nano.training
    assert (m.num_layers, m.d_model, m.num_heads, m.dropout) == (4, 128, 4, 0.0)
    assert (nano.data.max_len, t.batch_size, t.max_steps, t.lr) == (64, 12, 2000, 1e-3)


# ----------------------------------------------------------------------------- metrics
class _Uniform(nn.Module):
    """Every next token equally likely: logits of zeros."""

    def __init__(self, vocab: int) -> None:
        super().__init__()
        self.vocab = vocab
        self.dummy = nn.Parameter(torch.zeros(1))

    def forward(self, input_ids, attention_mask=None):
        return SimpleNamespace(logits=torch.zeros(*input_ids.shape, self.vocab))


def test_uniform_model_has_log2_vocab_bits_per_char() -> None:
    text = "to be or not to be, that is the question\n" * 3
    tk = train_tokenizer([text], kind="char", min_frequency=1)
    ids, widths = token_stream(tk, [text], documents=False)
    items = cut_stream(ids, widths, max_len=16)
    task = LanguageModelObjective(tk.pad_id)
    out = task.evaluate(_Uniform(tk.vocab_size), [task.collate(items[:3]), task.collate(items[3:])])
    v = tk.vocab_size
    assert out["num_tokens"] == out["num_chars"] == len(text) - 1
    assert out["loss"] == pytest.approx(math.log(v))
    assert out["perplexity"] == pytest.approx(v)
    assert out["bits_per_char"] == pytest.approx(math.log2(v))
    assert out["bits_per_token"] == pytest.approx(math.log2(v))


def test_bits_per_char_counts_characters_not_tokens() -> None:
    docs = ["the cat sat on the mat", "a dog ran under the house"]
    tk = train_tokenizer(docs * 5, kind="wordpiece", vocab_size=60, min_frequency=1)
    ids, widths = token_stream(tk, docs, documents=True)
    eos = tk.eos_id
    assert ids[0] == eos and ids[-1] == eos and ids.count(eos) == 3  # [EOS] d1 [EOS] d2 [EOS]
    # every character is some token's (spaces included), each [EOS] one: the line break
    assert sum(widths) == sum(len(d) for d in docs) + 2
    items = cut_stream(ids, widths, max_len=5)
    assert sum(it.chars for it in items) == sum(widths)  # the first [EOS] has width 0
    task = LanguageModelObjective(tk.pad_id)
    out = task.evaluate(_Uniform(tk.vocab_size), [task.collate(items)])
    n_tokens = len(ids) - 1
    assert out["num_tokens"] == n_tokens
    assert out["bits_per_char"] == pytest.approx(n_tokens * math.log2(tk.vocab_size) / sum(widths))


def test_collate_shifts_targets_and_masks_padding() -> None:
    task = LanguageModelObjective(pad_id=0)
    batch = task.collate([LMItem([5, 6, 7, 8], 3), LMItem([9, 10], 1)])
    assert batch["input_ids"].tolist() == [[5, 6, 7], [9, 0, 0]]
    assert batch["labels"].tolist() == [[6, 7, 8], [10, IGNORE_INDEX, IGNORE_INDEX]]
    assert batch["attention_mask"].tolist() == [[True] * 3, [True, False, False]]
    assert batch["num_chars"].tolist() == [3, 1]


# ----------------------------------------------------------------------------- data sources
def test_tinyshakespeare_is_split_90_10_by_position(tmp_path: Path) -> None:
    text = "".join(f"Line {i}: the quality of mercy is not strained.\n" for i in range(40))
    (tmp_path / "tinyshakespeare").mkdir()
    (tmp_path / "tinyshakespeare" / "input.txt").write_text(text, encoding="utf-8")
    raw = {"task": "lm", "data": {"name": "tinyshakespeare", "data_dir": str(tmp_path),
                                  "max_len": 32, "val_fraction": 0.3}}  # fmt: skip
    corpus = read_corpus(load_config(_write_recipe(tmp_path / "r.yaml", raw)))
    cut = int(len(text) * 0.9)  # the dataset's own split: val_fraction does not apply
    assert corpus.train == [text[:cut]] and corpus.validation == [text[cut:]]


def test_reviews_are_packed_with_eos_and_prompts_start_a_review(tmp_path: Path) -> None:
    reviews = [f"정말 재미있어요 {i}번 봤어요" for i in range(30)] + ["최악의 영화"] * 10
    (tmp_path / "nsmc").mkdir()
    with gzip.open(tmp_path / "nsmc" / "unlabeled.txt.gz", "wt", encoding="utf-8") as f:
        f.write("\n".join(reviews) + "\n")
    raw = {"task": "lm", "data": {"name": "nsmc", "data_dir": str(tmp_path), "max_len": 16,
                                  "val_fraction": 0.1},
           "tokenizer": {"kind": "wordpiece", "vocab_size": 80, "min_frequency": 1}}  # fmt: skip
    cfg = load_config(_write_recipe(tmp_path / "r.yaml", raw))
    data = prepare_data(cfg, log=lambda *_: None)
    tk = data.tokenizer
    stream = [data.train[0].ids[0]] + [t for it in data.train for t in it.ids[1:]]
    assert stream[0] == tk.eos_id and stream[-1] == tk.eos_id
    assert stream.count(tk.eos_id) == 36 + 1  # 90% of 40 reviews, each followed by [EOS]
    assert len(data.validation) >= 1
    model = GPT(GPTConfig(vocab_size=tk.vocab_size, max_len=16, d_model=16, num_heads=2,
                          d_ff=32, num_layers=1, eos_id=tk.eos_id))  # fmt: skip
    predictor = LMPredictor(model, tk, cfg)
    assert predictor._prompt_ids("정말")[0] == tk.eos_id  # a review starts after [EOS]
    assert predictor._prompt_ids("") == [tk.eos_id]
    out = predictor.generate("정말", max_new_tokens=20, seed=0)[0]
    assert out.finish_reason in ("eos", "length") and out.tokens <= 20


# ----------------------------------------------------------------------------- generation
def test_generate_returns_text_and_streams_it(lm: LMPredictor) -> None:
    pieces: list[str] = []
    (out,) = lm.generate("First Citizen:", max_new_tokens=30, seed=0, stream=pieces.append)
    assert isinstance(out, Generation)
    assert out.prompt == "First Citizen:" and out.tokens == 30 == len(out.text)
    assert "".join(pieces) == out.text and len(pieces) > 1
    assert out.format() == out.text and out.to_dict()["finish_reason"] == "length"
    assert set(out.text) <= set(CORPUS)  # no special token is ever sampled (a char each)


def test_seeded_sampling_is_reproducible_and_greedy_deterministic(lm: LMPredictor) -> None:
    a = lm.generate("All:", max_new_tokens=25, seed=3, top_k=10, top_p=0.9)[0].text
    b = lm.generate("All:", max_new_tokens=25, seed=3, top_k=10, top_p=0.9)[0].text
    c = lm.generate("All:", max_new_tokens=25, seed=4, top_k=10, top_p=0.9)[0].text
    assert a == b and a != c
    g1 = lm.generate("All:", max_new_tokens=15, temperature=0)[0].text
    g2 = lm.generate("All:", max_new_tokens=15, temperature=0, seed=9)[0].text
    assert g1 == g2
    several = lm.generate(["All:", "", "Speak"], max_new_tokens=5, seed=1,
                          repetition_penalty=1.3)  # fmt: skip
    assert [g.prompt for g in several] == ["All:", "", "Speak"]
    assert lm.generate("All:", max_new_tokens=0)[0].text == ""


def test_stop_strings_cut_the_continuation(lm: LMPredictor) -> None:
    free = lm.generate("First", max_new_tokens=60, seed=5)[0].text
    stop = free[10:12]  # a string that the same sample reaches
    pieces: list[str] = []
    out = lm.generate("First", max_new_tokens=60, seed=5, stop=[stop, "zzz"],
                      stream=pieces.append)[0]  # fmt: skip
    assert out.finish_reason == "stop"
    assert out.text == free[: free.index(stop)] and stop not in out.text
    assert "".join(pieces) == out.text  # a half-seen stop string is never streamed


def test_streaming_byte_level_bpe_adds_up_to_the_text(corpus_file: Path) -> None:
    """Korean through byte-level BPE: a character is several tokens; what is streamed is
    never taken back, and adds up to the final text."""
    texts = ["정말 재미있어요. 최고의 영화", "배우들의 연기가 좋았어요", "지루해요"] * 20
    tk = train_tokenizer(texts, kind="bpe", vocab_size=300, min_frequency=1)
    cfg = load_config(_write_recipe(corpus_file.with_name("bpe.yaml"), _char_recipe(corpus_file)))
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=tk.vocab_size, max_len=24, d_model=16, num_heads=2,
                          d_ff=32, num_layers=1, eos_id=tk.eos_id))  # fmt: skip
    predictor = LMPredictor(model, tk, cfg)
    for seed in range(3):
        pieces: list[str] = []
        out = predictor.generate("정말", max_new_tokens=30, seed=seed, stream=pieces.append)[0]
        assert "".join(pieces) == out.text and out.tokens == 30
        assert len(pieces) < 30  # pieces waited for the rest of their characters


def test_long_prompts_and_unknown_characters_warn(lm: LMPredictor) -> None:
    with pytest.warns(UserWarning, match="context"):
        out = lm.generate(CORPUS[:100], max_new_tokens=5, seed=0)[0]
    assert out.tokens == 5
    with pytest.warns(UserWarning, match=r"\[UNK\]"):
        lm.generate("Zebra ☃", max_new_tokens=2, seed=0)


# ----------------------------------------------------------------------------- batches
# prompts of several lengths (left padding), an empty one, one longer than the context
# (max_len 24: its window slides during the batch), each with its own options
REQUESTS = [
    GenerationRequest("First Citizen:", max_new_tokens=20, temperature=0),
    GenerationRequest("All:", max_new_tokens=12, seed=3, top_k=10, top_p=0.9),
    GenerationRequest("", max_new_tokens=8, temperature=0, repetition_penalty=1.4),
    GenerationRequest(VERSE[:40], max_new_tokens=16, temperature=0),
    GenerationRequest("Speak", max_new_tokens=30, seed=5, stop=["\n\n"]),
    GenerationRequest("Resolved", max_new_tokens=0),
    GenerationRequest("You are", max_new_tokens=10, seed=1, temperature=0.8),
]


def _alone(lm: LMPredictor, r: GenerationRequest, **extra) -> Generation:
    skip = ("prompt", "on_done", "on_error")
    options = {k: v for k, v in r.__dict__.items() if k not in skip}
    return lm.generate(r.prompt, **{**options, **extra})[0]


def test_a_batch_gives_each_prompt_what_it_gets_alone(lm: LMPredictor) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the long prompt's
        alone = [_alone(lm, r) for r in REQUESTS]
        together = lm.generate_batch(REQUESTS)
    assert together == alone
    assert [g.tokens for g in together][:4] == [20, 12, 8, 16]
    assert together[5].text == "" and together[5].tokens == 0
    # several prompts of one call, batched: greedy is the same as one by one
    prompts = [r.prompt for r in REQUESTS]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        one_by_one = lm.generate(prompts, max_new_tokens=12, temperature=0)
        batched = lm.generate(prompts, max_new_tokens=12, temperature=0, batch_size=4)
    assert batched == one_by_one and len(batched) == len(prompts)


def test_a_batch_streams_each_prompt_and_stops_one_on_request(lm: LMPredictor) -> None:
    pieces: dict[int, list[str]] = {0: [], 1: [], 2: []}

    def stop_after_three(piece: str) -> None:
        if len(pieces[1]) == 3:
            raise StopGeneration
        pieces[1].append(piece)

    requests = [
        GenerationRequest("All:", max_new_tokens=15, temperature=0, stream=pieces[0].append),
        GenerationRequest("First", max_new_tokens=15, temperature=0, stream=stop_after_three),
        GenerationRequest("Speak", max_new_tokens=15, seed=2, stream=pieces[2].append),
    ]
    out = lm.generate_batch(requests)
    assert [g.finish_reason for g in out] == ["length", "cancelled", "length"]
    assert "".join(pieces[0]) == out[0].text and "".join(pieces[2]) == out[2].text
    assert "".join(pieces[1]) == out[1].text[:3] and out[1].tokens == 4
    # alone, StopGeneration ends the continuation the same way
    alone: list[str] = []

    def stop_at_once(piece: str) -> None:
        raise StopGeneration

    g = lm.generate("First", max_new_tokens=15, temperature=0, stream=stop_at_once)[0]
    assert g.finish_reason == "cancelled" and g.tokens == 1 and alone == []
    with pytest.raises(InputError, match="stream takes one prompt at a time"):
        lm.generate(["a", "b"], stream=print, batch_size=2)
    with pytest.raises(InputError, match="batch_size must be an integer >= 1"):
        lm.generate("a", batch_size=0)


def test_a_batch_hands_each_prompt_over_as_soon_as_it_is_done(lm: LMPredictor) -> None:
    long_pieces: list[str] = []
    done: list[tuple[str, int]] = []  # (prompt, pieces of the long one streamed by then)

    def on_done(g: Generation) -> None:
        done.append((g.prompt, len(long_pieces)))

    requests = [
        GenerationRequest("All:", max_new_tokens=40, temperature=0, stream=long_pieces.append,
                          on_done=on_done),
        GenerationRequest("First", max_new_tokens=3, temperature=0, on_done=on_done),
        GenerationRequest("Speak", max_new_tokens=0, on_done=on_done),
    ]  # fmt: skip
    out = lm.generate_batch(requests)
    assert [p for p, _ in done] == ["Speak", "First", "All:"]
    assert done[0][1] == 0 and done[1][1] < 5 and done[2][1] == len(long_pieces)
    assert [g.tokens for g in out] == [40, 3, 0]


def test_requests_that_join_a_running_batch_get_what_they_get_alone(lm: LMPredictor) -> None:
    # continuous batching: the batch starts with two requests; the others join it between
    # tokens, one or two at a time (one of 0 tokens, one whose window slides, one sampled),
    # and a refused one goes to its on_error while the batch goes on
    errors: list[Exception] = []
    bad = GenerationRequest("x", max_new_tokens=3, top_p=0.0, on_error=errors.append)
    later = {2: REQUESTS[2:4], 5: [REQUESTS[4], bad], 6: REQUESTS[5:7]}  # call -> joining
    asked: list[int] = []

    def more(going: int) -> list[GenerationRequest]:
        asked.append(going)
        return list(later.get(len(asked), []))

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        alone = [_alone(lm, r) for r in REQUESTS]
        together = lm.generate_batch(REQUESTS[:2], more=more)
    assert together == alone  # (in the order they joined: here REQUESTS' own)
    assert asked[:7] == [2, 2, 4, 4, 4, 5, 6] and len(asked) > 20
    assert len(errors) == 1 and "top_p" in str(errors[0])
    # the long prompt's warning, numbered as the 4th request
    assert any(str(w.message).startswith("input 4: the prompt has") for w in caught)
    # without on_error, a refused request ends the call
    with pytest.raises(InputError, match="top_p"):
        lm.generate_batch(REQUESTS[:1], more=lambda going: [GenerationRequest("x", top_p=0.0)])


def test_a_prompt_of_generate_joins_the_batch_when_a_row_finishes(lm, monkeypatch) -> None:
    # generate(prompts, batch_size=2): a stop string ends the rows at different tokens, and
    # each next prompt takes a finished row's place between two tokens: fewer batches than
    # len(prompts) / 2, and every prompt gets what it gets alone
    prompts = ["First Citizen:", "All:", "", "Speak", "You are", "the", "O"]
    options = {"max_new_tokens": 24, "temperature": 0, "repetition_penalty": 3.0, "stop": ["o"]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        alone = [lm.generate(p, **options)[0] for p in prompts]
        batches: list[int] = []
        real = lm._continue
        monkeypatch.setattr(lm, "_continue", lambda rows, more=None: batches.append(len(rows))
                            or real(rows, more))  # fmt: skip
        together = lm.generate(prompts, batch_size=2, **options)
    assert together == alone
    assert len({g.tokens for g in alone}) > 2  # (the rows do end at different tokens)
    assert len(batches) < 4 and batches[0] == 2, batches


def test_a_batch_names_the_prompt_of_each_warning(lm: LMPredictor) -> None:
    requests = [GenerationRequest("All:", max_new_tokens=2),
                GenerationRequest("Zebra ☃", max_new_tokens=2)]  # fmt: skip
    with pytest.warns(UserWarning, match=r"^input 2: the prompt has text .*\[UNK\]") as caught:
        lm.generate_batch(requests)
    assert len(caught) == 1 and caught[0].filename == __file__
    with pytest.warns(UserWarning, match=r"^the prompt has text"):  # one request: as alone
        lm.generate_batch(requests[1:])
    with pytest.raises(InputError, match="request 2 must be a GenerationRequest"):
        lm.generate_batch([requests[0], "All:"])  # type: ignore[list-item]
    with pytest.raises(InputError, match="top_p"):
        lm.generate_batch([requests[0], GenerationRequest("x", top_p=0.0)])
    assert lm.generate_batch([]) == []


@pytest.mark.parametrize(
    "options, message",
    [
        ({"max_new_tokens": -1}, "max_new_tokens"),
        ({"top_p": 0.0}, "top_p"),
        ({"top_p": 1.5}, "top_p"),
        ({"temperature": -0.5}, "temperature"),
        ({"top_k": -2}, "top_k"),
        ({"repetition_penalty": 0.0}, "repetition_penalty"),
        ({"stop": [""]}, "stop"),
    ],
)
def test_bad_generation_options_are_input_errors(lm: LMPredictor, options, message) -> None:
    with pytest.raises(InputError, match=message):
        lm.generate("All:", **options)


def test_perplexity_and_evaluate(lm: LMPredictor, lm_run: Path) -> None:
    seen = lm.perplexity(VERSE)
    assert 1.0 < seen < lm.tokenizer.vocab_size
    assert lm.perplexity("vVvVqQqQ zZ xX") > seen  # unlike anything it read
    with pytest.raises(InputError):
        lm.perplexity("  ")
    report = attnkit.evaluate(lm_run, "test")
    assert report["split"] == "validation" and "no test split" in report["note"]
    rows = [json.loads(x) for x in (lm_run / "metrics.jsonl").read_text().splitlines()]
    best = min(r["val_loss"] for r in rows if "val_loss" in r)
    assert report["loss"] == pytest.approx(best, rel=1e-4)  # the best weights, same split
    assert report["bits_per_char"] == pytest.approx(report["loss"] / math.log(2), rel=1e-6)


# ----------------------------------------------------------------------------- CLI
def test_cli_generate_streams_text(lm_run: Path, capsys) -> None:
    code = main(["generate", str(lm_run), "--prompt", "All:", "--max-new-tokens", "5",
                 "--seed", "2"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    expected = attnkit.load(lm_run).generate("All:", max_new_tokens=5, seed=2)[0].text
    assert out == expected + ("" if expected.endswith("\n") else "\n")
    assert main(["generate", str(lm_run), "--prompt", "All:", "--max-new-tokens", "5",
                 "--seed", "2", "--json", "--stop", "zz"]) == 0  # fmt: skip
    row = json.loads(capsys.readouterr().out)
    assert row["text"] == expected and row["tokens"] == 5 and row["prompt"] == "All:"


def test_cli_predict_continues_prompts(lm_run: Path, capsys) -> None:
    assert main(["predict", str(lm_run), "First Citizen:", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert row["prompt"] == "First Citizen:" and row["tokens"] == 200


@pytest.mark.parametrize(
    "args, message",
    [
        (["--max-new-tokens", "-3"], "--max-new-tokens must be >= 0"),
        (["--top-p", "0"], "--top-p must be in (0, 1]"),
        (["--top-p", "1.2"], "--top-p must be in (0, 1]"),
        (["--temperature", "-1"], "--temperature must be >= 0"),
        (["--repetition-penalty", "0"], "--repetition-penalty must be > 0"),
    ],
)
def test_cli_generate_bad_options_are_one_line_errors(lm_run: Path, capsys, args, message) -> None:
    assert main(["generate", str(lm_run), "--prompt", "All:", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and err.startswith("attnkit: error:")


def test_cli_verbs_point_to_generate(lm_run: Path, capsys) -> None:
    assert main(["translate", str(lm_run), "hello"]) == 2
    assert "attnkit generate" in capsys.readouterr().err


# ----------------------------------------------------------------------------- real data
@pytest.mark.skipif(not SHAKESPEARE.is_file(), reason="no shared Tiny Shakespeare data")
def test_tiny_shakespeare_smoke(tmp_path: Path) -> None:
    """The first 2,000 characters of the real text, as the catalogued dataset: trains,
    evaluates, generates."""
    with SHAKESPEARE.open(encoding="utf-8") as f:
        head = f.read(2000)
    (tmp_path / "tinyshakespeare").mkdir()
    (tmp_path / "tinyshakespeare" / "input.txt").write_text(head, encoding="utf-8")
    raw = {"task": "lm", "data": {"name": "tinyshakespeare", "data_dir": str(tmp_path),
                                  "max_len": 32},
           "tokenizer": {"kind": "char", "min_frequency": 1}, "model": TINY_GPT,
           "training": {**QUICK, "max_steps": 6, "eval_every": 6}}  # fmt: skip
    result = attnkit.train(_write_recipe(tmp_path / "r.yaml", raw), out=tmp_path / "run",
                           log=lambda *_: None)  # fmt: skip
    assert result.last_metrics["val_num_chars"] == 2000 - int(2000 * 0.9) - 1
    out = attnkit.load(tmp_path / "run").generate("First Citizen:", max_new_tokens=20, seed=0)[0]
    assert len(out.text) == 20


def test_models_from_pretrained_reads_an_lm_run(lm_run: Path) -> None:
    """attnkit.models.from_pretrained finds a GPT by its saved model_type ("gpt")."""
    from attnkit.models import from_pretrained

    model = from_pretrained(lm_run)
    assert isinstance(model, GPT) and not model.training
    x = torch.tensor([[1, 2, 3]])
    want = attnkit.load(lm_run).model(x).logits
    assert torch.equal(model(x).logits, want)

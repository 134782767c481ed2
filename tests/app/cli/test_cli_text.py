"""Text input of predict / translate / chat / fill-mask: bytes that are not UTF-8 (argv,
stdin) are one `attnkit: error:` line (chat's stdin loop: reported and skipped), inputs with
line breaks and tabs still give one output line each, and `chat RUN -` reads stdin."""

from __future__ import annotations

import io
import json
import sys

import pytest
from test_mlm import _corpus, _mlm_recipe
from test_seq2seq import reversal_pairs, s2s_recipe, write_tsv

from attnkit import load, train
from attnkit.app.cli import main
from attnkit.tasks.run_config import RunConfig
from conftest import make_sentiment_rows, tiny_recipe, write_csv

BAD = "red \udcff dog"  # argv bytes b"red \xff dog" as Python sees them (surrogateescape)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One-step runs: a classifier, a Transformer translator (also chats), a masked LM."""
    root = tmp_path_factory.mktemp("text")
    write_csv(root / "train.csv", make_sentiment_rows(40, seed=0))
    write_csv(root / "test.csv", make_sentiment_rows(8, seed=1))
    write_tsv(root / "train.tsv", reversal_pairs(40, 0))
    write_tsv(root / "val.tsv", reversal_pairs(4, 1))
    write_tsv(root / "test.tsv", reversal_pairs(4, 2))
    mt = s2s_recipe(root)
    mt["training"].update(max_steps=1, eval_every=1)
    recipes = {
        "clf": tiny_recipe(root, epochs=1, max_steps=1),
        "mt": mt,
        "mlm": _mlm_recipe(_corpus(root / "c.txt", n=40), epochs=1, max_steps=1),
    }
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(
            "attnkit.runtime.viz.draw_run_curves", lambda run: run.curves_path
        )  # not tested here
        for name, recipe in recipes.items():
            train(RunConfig.from_dict(recipe), out=root / name, log=lambda *a: None)
    return {name: str(root / name) for name in recipes}


def _run(argv, capsys, monkeypatch=None, stdin: bytes | None = None):
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


def _argv(runs, verb: str, *texts: str) -> list[str]:
    """``attnkit VERB RUN TEXTS``; verb fill-mask is predict on the mlm run."""
    if verb == "fill-mask":
        return ["predict", runs["mlm"], *texts]
    return [verb, runs["clf" if verb == "predict" else "mt"], *texts, *_greedy(verb)]


def _greedy(verb: str) -> list[str]:
    return ["--temperature", "0"] if verb == "chat" else []


VERBS = ["predict", "translate", "chat", "fill-mask"]


def _first(verb: str) -> str:
    return "the [MASK] movie" if verb == "fill-mask" else "red dog"


# ----------------------------------------------------------------------------- not UTF-8
@pytest.mark.parametrize("verb", VERBS)
def test_invalid_utf8_argument_is_one_error(runs, capsys, verb):
    code, out, err = _run(_argv(runs, verb, _first(verb), BAD), capsys)
    assert code == 2 and out == ""
    assert err == "attnkit: error: input 2 is not valid UTF-8 (byte 0xff at character 5)\n"


@pytest.mark.parametrize("verb", VERBS)
def test_invalid_utf8_on_stdin_is_one_error(runs, capsys, monkeypatch, verb):
    stdin = _first(verb).encode() + b"\nsun \xff\xfe moon\n"
    code, out, err = _run(_argv(runs, verb, "-"), capsys, monkeypatch, stdin)
    assert code == 2 and out == ""
    assert err == (
        "attnkit: error: input 2 is not valid UTF-8 (line 2) on stdin: byte 0xff at byte 5\n"
    )


def test_invalid_utf8_after_an_argument_numbers_the_input(runs, capsys, monkeypatch):
    """predict skips blank stdin lines: the input number counts texts, the line number lines."""
    code, _, err = _run(
        ["predict", runs["clf"], "great", "-"], capsys, monkeypatch, b"\nfine\n\xc3\n"
    )
    assert code == 2 and "input 3 is not valid UTF-8 (line 3) on stdin" in err


def test_chat_loop_skips_a_bad_line_and_answers_the_next(runs, capsys, monkeypatch):
    bot = load(runs["mt"])
    expected = [bot.chat(t, temperature=0) for t in ("red dog", "sun moon")]
    code, out, err = _run(
        ["chat", runs["mt"], "--temperature", "0"],
        capsys,
        monkeypatch,
        b"red dog\nbad \xff line\nsun moon\n",
    )
    assert code == 0
    assert out.splitlines() == expected
    assert err == "attnkit: error: input 2 is not valid UTF-8 (byte 0xff at byte 5); skipped\n"


# ----------------------------------------------------------------------------- one line each
@pytest.mark.parametrize("verb", ["predict", "translate", "chat"])
def test_line_breaks_and_tabs_give_one_output_line_per_input(runs, capsys, verb):
    texts = ["red\ndog", "sun\tmoon", "cat\r\ntree\x1b", "green\u2028blue"]
    code, out, _ = _run(_argv(runs, verb, *texts), capsys)
    assert code == 0 and len(out.splitlines()) == len(texts) and out.count("\n") == len(texts)
    if verb == "predict":  # the echoed text, escaped
        echoed = [line.split("\t")[2] for line in out.splitlines()]
        assert echoed == ["red\\ndog", "sun\\tmoon", "cat\\r\\ntree\\x1b", "green\\u2028blue"]


def test_fill_mask_one_line_per_mask_with_escaped_text(runs, capsys):
    code, out, _ = _run(_argv(runs, "fill-mask", "the [MASK]\tmovie\n[MASK]"), capsys)
    lines = out.splitlines()
    assert code == 0 and len(lines) == 2 and out.count("\n") == 2
    assert [line.split("\t")[0] for line in lines] == ["[MASK] 1", "[MASK] 2"]
    assert all(line.split("\t")[2] == "the [MASK]\\tmovie\\n[MASK]" for line in lines)


def test_json_output_keeps_texts_exact(runs, capsys):
    texts = ["red\ndog", "sun\tmoon"]
    code, out, _ = _run(["predict", runs["clf"], *texts, "--json"], capsys)
    assert code == 0 and [json.loads(x)["text"] for x in out.splitlines()] == texts
    code, out, _ = _run(["translate", runs["mt"], *texts, "--json"], capsys)
    assert code == 0 and [json.loads(x)["source"] for x in out.splitlines()] == texts


def test_stdin_lines_split_only_at_line_breaks(runs, capsys, monkeypatch):
    """A form feed or U+2028 inside a stdin line does not split it: one line in, one out."""
    stdin = "red\x0cdog\nsun\u2028moon\r\ncat\n".encode()
    code, out, _ = _run(["translate", runs["mt"], "-"], capsys, monkeypatch, stdin)
    assert code == 0 and out.count("\n") == 3


# ----------------------------------------------------------------------------- chat RUN -
def test_chat_dash_reads_stdin_lines(runs, capsys, monkeypatch):
    argv = ["chat", runs["mt"], "--seed", "1", "--temperature", "1"]
    code, expected, _ = _run([*argv, "red dog", "", "sun moon"], capsys)
    assert code == 0 and expected.count("\n") == 3
    code, out, _ = _run([*argv, "-"], capsys, monkeypatch, b"red dog\n\nsun moon\n")
    assert code == 0 and out == expected  # the same turns, seeds and answers


def test_a_text_starting_with_at_is_a_text_not_a_file(runs, capsys) -> None:
    """Found by tests/system/test_fuzz.py: an argument "@..." used to be opened as a file."""
    code, out, _ = _run(["predict", runs["clf"], "@user great movie", "@\x00"], capsys)
    assert code == 0
    out = out.splitlines()
    assert len(out) == 2 and out[0].endswith("\t@user great movie")

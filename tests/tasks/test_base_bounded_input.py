"""Bounded input (issue 32, item 3): a text is cut to ``max_text_chars(max_len)`` characters
before tokenization in every verb and in training; texts read whole are tokenized in
pieces; ``--file`` and stdin are read line by line with a bounded line; an endless line is
one error line. Also item 5's broken pipe: ``attnkit predict RUN --file many.txt | head -1``
exits quietly."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import attnkit
import attnkit.data.lines as lines
import attnkit.data.tokenization as tokenization
from attnkit.app.cli import main
from attnkit.data.lines import MAX_LINE_BYTES, decode_line, iter_lines
from attnkit.data.tokenization import (
    MAX_TEXT_CHARS,
    MIN_TEXT_CHARS,
    Tokenizer,
    cut_text,
    max_text_chars,
    split_long,
    train_tokenizer,
)

WORDS = ["the", "movie", "was", "great", "최고", "재미있어요", "don't", "a.b"]
SEPARATORS = [" ", "", "  ", "\n", "\n\n", "\t", " \n"]


class Spy:
    """A tokenizer backend that records the longest text it was given in one call."""

    def __init__(self, backend) -> None:
        self._backend = backend
        self.longest = 0  # characters of the longest single text
        self.most = 0  # characters given in one call (a batch: all its texts)

    def _see(self, texts) -> None:
        sizes = [len(t) if isinstance(t, str) else sum(map(len, t)) for t in texts]
        self.longest = max([self.longest, *sizes])
        self.most = max(self.most, sum(sizes))

    def encode(self, text, *args, **kwargs):
        self._see([text])
        return self._backend.encode(text, *args, **kwargs)

    def encode_batch(self, texts, *args, **kwargs):
        self._see(texts)
        return self._backend.encode_batch(texts, *args, **kwargs)

    def encode_batch_fast(self, texts, *args, **kwargs):
        self._see(texts)
        return self._backend.encode_batch_fast(texts, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._backend, name)


def spy_on(tokenizer: Tokenizer) -> Spy:
    spy = Spy(tokenizer._tk)
    tokenizer._tk = spy
    tokenizer._encode_batch = getattr(spy, "encode_batch_fast", spy.encode_batch)
    return spy


@pytest.fixture(scope="module")
def tokenizers_by_kind() -> dict[str, Tokenizer]:
    text = " ".join(WORDS * 20)
    return {
        kind: train_tokenizer([text], kind=kind, vocab_size=200, min_frequency=1)
        for kind in ("wordpiece", "bpe", "char")
    }


# ----------------------------------------------------------------------------- the bound
def test_max_text_chars_has_a_floor_and_a_ceiling() -> None:
    assert max_text_chars(16) == MIN_TEXT_CHARS
    assert max_text_chars(512) == 512 * tokenization.CHARS_PER_TOKEN
    assert max_text_chars(10**9) == MAX_TEXT_CHARS == max_text_chars(None)
    assert MAX_LINE_BYTES >= 4 * MAX_TEXT_CHARS  # a cut line still holds every model's text


def test_cut_text_keeps_the_part_truncation_keeps() -> None:
    n = max_text_chars(16)
    text = "a" * n + "b" * n + "c" * n
    assert cut_text("short", 16) == ("short", False)
    assert cut_text(text, 16) == ("a" * n, True)
    assert cut_text(text, 16, "tail") == ("c" * n, True)
    assert cut_text(text, 16, "head+tail") == ("a" * n + "c" * n, True)


@given(
    st.lists(st.tuples(st.sampled_from(WORDS), st.sampled_from(SEPARATORS)), max_size=300),
    st.integers(8, 200),
)
def test_split_long_joins_back_within_the_bound(parts, size) -> None:
    text = "".join(w + s for w, s in parts)
    pieces = split_long(text, size)
    assert "".join(pieces) == text
    assert all(len(p) <= size for p in pieces)
    assert all(pieces) or pieces == [""]


@pytest.mark.parametrize("kind", ["wordpiece", "bpe", "char"])
def test_long_texts_give_the_same_tokens_in_pieces(tokenizers_by_kind, monkeypatch, kind):
    import random

    rng = random.Random(kind)
    text = "".join(rng.choice(WORDS) + rng.choice(SEPARATORS) for _ in range(3000))
    tk = tokenizers_by_kind[kind]
    whole = tk.backend.encode(text, add_special_tokens=False)
    monkeypatch.setattr(tokenization, "MAX_TEXT_CHARS", 500)
    spy = spy_on(tk)
    try:
        assert tk.encode(text) == whole.ids  # no max_len: read whole, in pieces
        assert tk.encode_batch([text, "the movie"])[0] == whole.ids
        ids, offsets = tk.encode_offsets(text)
        assert ids == whole.ids and offsets == [tuple(o) for o in whole.offsets]
        assert tk.tokenize(text) == whole.tokens
        assert spy.most <= 500  # never more than MAX_TEXT_CHARS in one call
    finally:
        tk._tk = spy._backend
        tk._encode_batch = getattr(spy._backend, "encode_batch_fast", spy._backend.encode_batch)


def test_encode_with_max_len_cuts_characters_first(tokenizers_by_kind) -> None:
    tk = tokenizers_by_kind["wordpiece"]
    spy = spy_on(tk)
    huge = "great movie " * 200_000  # 2.4 MB
    ids, cut = tk.encode(huge, max_len=16, add_cls=True, return_truncated=True)
    assert cut and len(ids) == 16 and spy.longest <= max_text_chars(16)
    # the characters alone decide: spaces the tokenizer drops are still a truncated text
    ids, flags = tk.encode_batch([" " * 100_000 + "great"], max_len=16, return_truncated=True)
    assert flags == [True] and ids == [[]]
    assert spy.longest <= max_text_chars(16)


# ----------------------------------------------------------------------------- the verbs
@pytest.fixture
def classify_run(tiny_run_once: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(tiny_run_once, tmp_path / "run"))


def test_predict_and_pseudo_label_never_tokenize_more_than_the_bound(classify_run) -> None:
    from attnkit.tasks.pseudo_label import pseudo_label

    clf = attnkit.load(classify_run)
    spy = spy_on(clf.tokenizer)
    bound = max_text_chars(clf.config.data.max_len)
    with pytest.warns(UserWarning, match="input 1 is longer than max_len=16 tokens; it was trunc"):
        (pred,) = clf.predict(["great " * 1_000_000])  # 6 MB
    assert pred.truncated and spy.longest <= bound
    with pytest.warns(UserWarning, match="input 1 is longer than max_len"):  # truthful:
        (pred,) = clf.predict([" " * 50_000 + "great"])  # cut by characters alone
    assert pred.truncated
    rows, stats = pseudo_label(clf, ["awful " * 500_000, "great movie"], 0.0, False, 8)
    assert stats["texts"] == 2 and spy.longest <= bound


def test_classify_training_data_is_cut_before_tokenization(tiny_config, tmp_path, monkeypatch):
    """The training readers' path (prepare_data -> encode_examples) with one 3 MB text."""
    import csv

    from attnkit.tasks import get_task
    from attnkit.tasks.run_config import load_config

    train = Path(load_config(tiny_config).data.train)
    rows = list(csv.reader(train.open(encoding="utf-8")))
    rows.insert(3, ["great movie " * 250_000, "pos"])
    with train.open("w", encoding="utf-8", newline="") as f:
        csv.writer(f).writerows(rows)
    trained: list[int] = []
    original = tokenization.train_tokenizer

    def counting(texts, *args, **kwargs):
        texts = list(texts)
        trained.append(max(map(len, texts)))
        return original(texts, *args, **kwargs)

    monkeypatch.setattr(tokenization, "train_tokenizer", counting)
    spies: list[Spy] = []
    encode_batch = Tokenizer.encode_batch

    def spying(self, *args, **kwargs):
        if not isinstance(self._tk, Spy):
            spies.append(spy_on(self))
        return encode_batch(self, *args, **kwargs)

    monkeypatch.setattr(Tokenizer, "encode_batch", spying)
    cfg = load_config(tiny_config)
    data = get_task("classify").prepare_data(cfg, None, lambda *_: None)
    assert trained and trained[0] <= MAX_TEXT_CHARS  # the tokenizer trainer read pieces
    assert spies and max(s.longest for s in spies) <= max_text_chars(cfg.data.max_len)
    assert data.extras.get("truncated", 1) >= 1


def test_tag_and_qa_cut_before_tokenization(tokenizers_by_kind) -> None:
    from attnkit.data.ner_features import encode_pieces, encode_tagged
    from attnkit.data.qa_features import make_features

    tk = train_tokenizer([" ".join(WORDS * 20)], kind="wordpiece", vocab_size=200)
    spy = spy_on(tk)
    words = ["great", "movie"] * 300_000
    feature = encode_tagged(tk, words, None, None, 16)
    assert feature.truncated and spy.longest <= max_text_chars(16)
    text = "great movie " * 300_000
    piece = encode_pieces(tk, text, [(0, 5), (6, 11)], None, None, 16)
    assert piece.truncated and spy.longest <= max_text_chars(16)
    features = make_features(tk, "great " * 100_000 + "?", "the movie was great. " * 20_000,
                             None, 0, max_len=32, doc_stride=16, max_question_len=8)  # fmt: skip
    assert features and spy.longest <= MAX_TEXT_CHARS


def test_tag_predictor_cuts_the_text_it_splits(tmp_path: Path) -> None:
    import torch

    from attnkit.models import TaggerOutput
    from attnkit.tasks.run_config import RunConfig
    from attnkit.tasks.tag import TagPredictor

    class Outside(torch.nn.Module):
        def forward(self, ids, mask):
            return TaggerOutput(torch.zeros(*ids.shape, 3))

    tk = train_tokenizer([" ".join(WORDS * 20)], kind="wordpiece", vocab_size=200)
    spy = spy_on(tk)
    cfg = RunConfig.from_dict({"task": "tag", "data": {"name": "conll2003", "max_len": 16}})
    tagger = TagPredictor(Outside(), tk, cfg, ["O", "B-PER", "I-PER"])
    with pytest.warns(
        UserWarning, match=r"input 1 is longer than max_len=16 word pieces; it was cut"
    ):
        (result,) = tagger.tag("great movie " * 200_000)
    assert result.truncated and len(result.text) == max_text_chars(16)
    assert spy.longest <= max_text_chars(16)


@pytest.mark.slow
def test_translate_chat_and_generate_cut_before_tokenization(served_runs) -> None:
    huge = "ein Mann fährt Fahrrad. " * 100_000
    mt = attnkit.load(served_runs["translator"])
    spy = spy_on(mt.tokenizer)
    with pytest.warns(UserWarning, match="input 1 is longer than max_len"):
        mt.translate([huge], max_len=3)
    assert spy.longest <= max_text_chars(mt.max_len)
    bot = attnkit.load(served_runs["bot"])
    spy = spy_on(bot.tokenizer)
    with pytest.warns(UserWarning, match="longer than max_len"):
        bot.chat(huge, max_len=3, seed=0)
    assert spy.longest <= max_text_chars(bot.max_len)
    lm = attnkit.load(served_runs["verse"])
    spy = spy_on(lm.tokenizer)
    with pytest.warns(UserWarning, match="the prompt has more than 4,096 characters"):
        (g,) = lm.generate("ROMEO: " * 500_000, max_new_tokens=3, seed=0)
    assert g.tokens == 3 and spy.longest <= max_text_chars(lm.max_len)


# ----------------------------------------------------------------------------- lines
@given(st.binary(max_size=200).map(lambda b: bytes(b"ab\r\n"[x % 4] for x in b)))
def test_iter_lines_splits_as_splitlines(data: bytes) -> None:
    old = lines._CHUNK
    lines._CHUNK = 3  # line breaks (\r\n too) across reads
    try:
        got = list(iter_lines(io.BytesIO(data), "in x"))
    finally:
        lines._CHUNK = old
    assert got == [(line, False) for line in data.splitlines()]


@given(st.lists(st.integers(0, 30), max_size=8), st.sampled_from([b"\n", b"\r\n", b"\r"]))
def test_iter_lines_cuts_long_lines(lengths, eol) -> None:
    data = eol.join(b"x" * n for n in lengths)
    old = lines._CHUNK, lines.MAX_LINE_BYTES
    lines._CHUNK, lines.MAX_LINE_BYTES = 4, 10
    try:
        got = list(iter_lines(io.BytesIO(data), "in x"))
    finally:
        lines._CHUNK, lines.MAX_LINE_BYTES = old
    assert got == [(line[:10], len(line) > 10) for line in data.splitlines()]


def test_a_cut_line_ends_on_a_character() -> None:
    raw = "가".encode() * 5
    assert decode_line(raw[:7], cut=True) == "가가"
    with pytest.raises(UnicodeDecodeError):
        decode_line(raw[:7], cut=False)


def test_file_lines_are_cut_to_the_line_bound(tmp_path: Path, monkeypatch) -> None:
    from attnkit.app import cli
    from attnkit.app.cli.inputs import _read_inputs

    path = tmp_path / "h.txt"
    path.write_bytes(("가" * 500_000).encode() + b"\nsecond\n")  # 1.5 MB, then a short line
    args = cli.build_parser().parse_args(["predict", "RUN", "--file", str(path)])
    texts = _read_inputs(args)
    assert texts == ["가" * (MAX_LINE_BYTES // 3), "second"]


@pytest.mark.parametrize("how", ["file", "stdin"])
def test_an_endless_line_is_one_error_in_bounded_memory(tmp_path, monkeypatch, capsys, how):
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero")
    zero = open("/dev/zero", "rb")  # noqa: SIM115 - closed below
    try:
        if how == "stdin":
            monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(zero))
            argv = ["tag", str(tmp_path / "run"), "-"]
        else:
            argv = ["tag", str(tmp_path / "run"), "--file", "/dev/zero"]
        tracemalloc.start()
        try:
            assert main(argv) == 2
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    finally:
        zero.close()
    where = "on stdin" if how == "stdin" else "in /dev/zero"
    err = capsys.readouterr().err
    assert err == (
        f"attnkit: error: line 1 {where} goes on for more than 64 MiB without a line break: "
        "not a text file with one text per line\n"
    )
    assert peak < 8 * MAX_LINE_BYTES  # a few copies of one line: it never grows with the stream


def _child(argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    """``attnkit argv`` in a fresh interpreter that prints, last, how much its peak memory
    grew while the command ran (KiB; torch and attnkit imported before)."""
    code = (
        "import resource, sys\nimport attnkit.app.api\nfrom attnkit.app.cli import main\n"
        "peak = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "before = peak()\nrc = main(sys.argv[1:])\nsys.stdout.flush()\n"
        "print('PEAK', peak() - before, file=sys.stderr)\nsys.exit(rc)\n"
    )
    return subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, **kwargs)


def _peak_mib(stderr: bytes) -> float:
    value = int(stderr.decode().rsplit("PEAK ", 1)[1].split()[0])
    return value / (2**20 if sys.platform == "darwin" else 2**10)


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="resource is POSIX")
def test_a_10mb_line_predicts_in_bounded_memory(classify_run, tmp_path) -> None:
    path = tmp_path / "h.txt"
    path.write_text("the movie was great " * 500_000 + "\n", encoding="utf-8")  # 10 MB
    big = _child(["predict", str(classify_run), "--file", str(path)])
    assert big.returncode == 0, big.stderr.decode()
    err = big.stderr.decode()
    assert "attnkit: warning: input 1 is longer than max_len=16 tokens" in err
    assert "Traceback" not in err
    # before: +1.6 GB (the 10 MB line tokenized whole); now the line read is cut to 1 MiB
    # and the model's text to 4,096 characters
    assert _peak_mib(big.stderr) < 150


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_stdin_from_dev_zero_in_a_real_process(classify_run) -> None:
    with open("/dev/zero", "rb") as zero:
        done = _child(["predict", str(classify_run), "-"], stdin=zero, timeout=120)
    assert done.returncode == 2
    err = done.stderr.decode().splitlines()
    assert err[0].startswith("attnkit: error: line 1 on stdin goes on for more than 64 MiB")
    assert _peak_mib(done.stderr) < 64  # bounded (it grew without end before)


# ----------------------------------------------------------------------------- broken pipe
def _read_one_line_and_close(argv: list[str]) -> tuple[int, str, bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "attnkit", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    first = proc.stdout.readline()
    proc.stdout.close()  # `| head -1`
    err = proc.stderr.read().decode()
    proc.stderr.close()
    return proc.wait(timeout=120), err, first


@pytest.mark.slow
@pytest.mark.parametrize("verb", ["predict", "generate"])  # one handler: a batch, a stream
def test_a_closed_pipe_ends_quietly(verb, classify_run, served_runs, tmp_path) -> None:
    many = tmp_path / "many.txt"
    if verb == "predict":
        many.write_text("the movie was great\n" * 5000, encoding="utf-8")  # 150 KB out
        argv = ["predict", str(classify_run), "--file", str(many)]
    elif verb == "translate":
        line = "Ein Mann fährt Fahrrad. " * 25  # 600 characters: a 75 KB --json output
        many.write_text((line + "\n") * 120, encoding="utf-8")
        argv = ["translate", str(served_runs["translator"]), "--json", "-"]
    else:
        argv = ["generate", str(served_runs["verse"]), "--max-new-tokens", "20000", "--seed", "0"]
    if verb == "translate":
        with many.open("rb") as stdin:
            proc = subprocess.Popen(
                [sys.executable, "-m", "attnkit", *argv],
                stdin=stdin,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            first = proc.stdout.readline()
            proc.stdout.close()
            err = proc.stderr.read().decode()
            proc.stderr.close()
            rc = proc.wait(timeout=120)
    else:
        rc, err, first = _read_one_line_and_close(argv)
    assert first  # it did print
    assert rc == 141, err  # 128 + SIGPIPE, as a tool the signal ends
    assert "Traceback" not in err and "BrokenPipe" not in err and "Exception" not in err


def test_broken_pipe_in_process_returns_141(monkeypatch, capsys) -> None:
    from attnkit.app import cli

    def broken(args):
        raise BrokenPipeError(32, "Broken pipe")

    parser = cli.build_parser()
    args = parser.parse_args(["env"])
    args.func = broken
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    monkeypatch.setattr(parser, "parse_known_args", lambda argv: (args, []))
    monkeypatch.setattr(sys, "stdout", io.StringIO())  # no real file: nothing to redirect
    assert main(["env"]) == 141
    assert capsys.readouterr().err == ""


def test_answer_reads_a_bounded_context_file(tmp_path: Path, monkeypatch) -> None:
    from attnkit.app.cli import tag_qa

    seen: list[str] = []

    class Reader:
        def answer_batch(self, pairs):
            seen.extend(context for _, context in pairs)
            return []

        def to_json(self, results):
            return ""

    monkeypatch.setattr(tag_qa, "_load_for", lambda run, verb, args: Reader())  # answer's
    path = tmp_path / "context.txt"
    path.write_bytes(("가" * 1_000_000).encode())  # 3 MB
    assert main(["answer", "RUN", "--context", str(path), "--question", "누구?"]) == 0
    assert seen == ["가" * ((4 * MAX_TEXT_CHARS + 4) // 3)]  # >= MAX_TEXT_CHARS + 1: it warns

"""Fuzzing the edges where users' bytes come in (reliability issue, item 9): the recipe
loader, the dataset readers, the tokenizer wrapper and the CLI's text paths. Random bytes,
huge inputs, control characters and mixed scripts end in a result or in one of attnkit's
own one-line errors (``AttnkitError``), never in another exception."""

from __future__ import annotations

import gzip
import io
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attnkit.app.cli import main
from attnkit.core.errors import AttnkitError
from attnkit.data.readers import load_text_classification, read_table, read_texts
from attnkit.data.tokenization import train_tokenizer
from attnkit.tasks.run_config import RunConfig, load_config

# the same examples every run (conftest's hypothesis profile); ATTNKIT_FUZZ=1 draws new ones
# each run, for exploring (that is how the "@text read as a file" bug was found)
FAST = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
KEYS = {
    "task": ["classify", "translate", "chat", "mlm", "dance"],
    "data": ["name", "train", "limit", "max_len", "val_fraction", "val_split", "truncation"],
    "tokenizer": ["kind", "vocab_size", "min_frequency", "lowercase", "path"],
    "model": ["arch", "d_model", "num_heads", "d_ff", "num_layers", "dropout", "pooling",
              "hidden_size", "attention", "preset", "objective", "ngram_max", "vocab_size"],
    "training": ["lr", "epochs", "max_steps", "batch_size", "warmup_steps", "patience",
                 "label_smoothing", "clip_grad_norm", "weight_decay", "betas", "device",
                 "bf16", "fp16", "log_every", "eval_every"],
}  # fmt: skip
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=30)
)
VALUES = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=12
)  # fmt: skip
PIECES = st.characters(codec="utf-8", exclude_categories=("Cs",)) | st.sampled_from(
    ["\n", "\r", "\t", "\x00", "\x1b", "\u2028", "한국어", "[MASK]", "é", " "]
)
TEXT = st.lists(PIECES, max_size=40).map("".join)


@st.composite
def recipes(draw) -> dict:
    raw: dict = {}
    if draw(st.booleans()):
        raw["task"] = draw(st.sampled_from(KEYS["task"]) | VALUES)
    for section in ("data", "tokenizer", "model", "training"):
        if draw(st.booleans()):
            keys = st.sampled_from(KEYS[section]) | st.text(max_size=6)
            raw[section] = draw(st.dictionaries(keys, VALUES, max_size=4) | VALUES)
    if draw(st.integers(0, 9)) == 0:
        raw[draw(st.text(max_size=6))] = draw(VALUES)
    return raw


@FAST
@given(recipes())
def test_any_recipe_is_a_config_or_one_config_error(raw: dict) -> None:
    try:
        RunConfig.from_dict(raw)
    except AttnkitError as exc:
        message = str(exc)
        assert "\n" not in message and len(message) < 1000


@FAST
@given(st.binary(max_size=400))
def test_any_recipe_file_is_a_config_or_one_config_error(tmp_path_factory, data: bytes) -> None:
    path = tmp_path_factory.mktemp("recipe") / "r.yaml"
    path.write_bytes(data)
    try:
        load_config(path)
    except AttnkitError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 1000


@FAST
@given(st.binary(max_size=600), st.sampled_from([".csv", ".tsv", ".jsonl", ".csv.gz"]))
def test_any_data_file_is_read_or_one_data_error(
    tmp_path_factory, data: bytes, suffix: str
) -> None:
    path = tmp_path_factory.mktemp("data") / f"train{suffix}"
    path.write_bytes(gzip.compress(data) if suffix.endswith(".gz") and data[:1] != b"x" else data)
    for read in (
        lambda: load_text_classification({"train": str(path)}, "train"),
        lambda: read_table(path, ["text", "label"]),
        lambda: read_texts(path),
    ):
        try:
            read()
        except AttnkitError as exc:
            assert "\n" not in str(exc).strip()


@pytest.fixture(scope="module")
def tokenizer():
    texts = ["the movie was great", "정말 재미있어요 영화", "boring film", "최악 [MASK] 지루해"]
    return train_tokenizer(texts * 5, vocab_size=80, min_frequency=1)


@FAST
@given(text=TEXT, max_len=st.integers(min_value=3, max_value=40))
def test_the_tokenizer_takes_any_text(tokenizer, text: str, max_len: int) -> None:
    ids = tokenizer.encode(text, max_len=max_len)
    assert len(ids) <= max_len and all(0 <= i < tokenizer.vocab_size for i in ids)
    batch, cut = tokenizer.encode_batch([text, text * 3], max_len=max_len, return_truncated=True)
    assert batch[0] == ids and len(cut) == 2
    assert isinstance(tokenizer.decode(ids), str)


@pytest.mark.slow
def test_a_huge_input_is_truncated_quickly(tokenizer) -> None:
    huge = "정말 재미있어요 " * 200_000  # 2.6 MB
    assert len(tokenizer.encode(huge, max_len=64)) == 64


# ----------------------------------------------------------------------------- the CLI
@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    import attnkit
    from conftest import make_sentiment_rows, tiny_recipe, write_csv

    root = tmp_path_factory.mktemp("fuzz-run")
    write_csv(root / "train.csv", make_sentiment_rows(120, seed=0))
    write_csv(root / "test.csv", make_sentiment_rows(20, seed=1))
    out = root / "run"
    attnkit.train(RunConfig.from_dict(tiny_recipe(root, max_steps=2)), out=out, log=lambda *_: None)
    return out


@pytest.mark.slow
@FAST
@given(texts=st.lists(TEXT.filter(lambda t: t.strip() and t != "-"), min_size=1, max_size=3))
def test_predict_prints_one_line_per_text_or_one_error(run: Path, capsys, texts) -> None:
    code = main(["predict", str(run), *texts])
    out, err = capsys.readouterr()
    assert code in (0, 2)
    if code == 0:
        assert len(out.splitlines()) == len(texts)
    else:
        assert len(err.splitlines()) == 1 and err.startswith("attnkit: error: ")


@FAST
@given(data=st.binary(max_size=300))
def test_predict_reads_any_stdin_bytes(run: Path, capsys, monkeypatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
    code = main(["predict", str(run), "-"])
    out, err = capsys.readouterr()
    assert code in (0, 2)
    if code == 2:
        assert len(err.splitlines()) == 1 and err.startswith("attnkit: error: ")


def test_a_huge_argument_is_one_prediction(run: Path, capsys) -> None:
    assert main(["predict", str(run), "great " * 300_000]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1


def test_an_alias_bomb_recipe_is_one_short_error(tmp_path: Path) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    lines.append("training: {lr: *a8}")
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(AttnkitError) as exc:
        load_config(bomb)
    assert len(str(exc.value)) < 300
    assert yaml  # the file is valid YAML: the loader, not the parser, must stay bounded


# ------------------------------------------------------------ config.json sizes of a run
SIZE_VALUES = (
    st.sampled_from([0, -1, -5, 1, 2, 16, 32, 64, 120, 1000, 65536, 65537, 10**6, 10**9, 10**12])
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from(["32", "1e9", "abc", "", [32], {"d": 1}])
    | st.booleans()
    | st.none()
)
SIZE_FIELDS = [("model", f) for f in ("d_model", "d_ff", "num_heads", "num_layers", "vocab_size",
               "max_len", "num_classes", "pad_id")] + [("data", "max_len")]  # fmt: skip


@pytest.fixture(scope="module")
def sized_run(run: Path, tmp_path_factory) -> tuple[Path, dict]:
    """A copy of the fuzz run whose config.json the examples rewrite, and the original."""
    import json
    import shutil

    copy = Path(shutil.copytree(run, tmp_path_factory.mktemp("sized") / "run"))
    return copy, json.loads((copy / "config.json").read_text(encoding="utf-8"))


@settings(FAST, max_examples=40)
@given(changes=st.dictionaries(st.sampled_from(SIZE_FIELDS), SIZE_VALUES, min_size=1, max_size=3))
def test_any_config_json_sizes_load_or_give_one_line(sized_run, changes: dict) -> None:
    """Sizes in a run's config.json (huge, negative, zero, floats, strings, bools): the run
    loads or ``attnkit.load`` raises one of attnkit's one-line errors, never another
    exception, and nothing of the sizes' gigabytes is ever allocated."""
    import copy
    import json
    import resource

    import attnkit

    path, original = sized_run
    raw = copy.deepcopy(original)
    for (section, key), value in changes.items():
        raw[section][key] = value
    (path / "config.json").write_text(json.dumps(raw), encoding="utf-8")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        attnkit.load(path)
    except AttnkitError as exc:
        assert "\n" not in str(exc) and "config.json" in str(exc)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 1024, f"{changes}: peak memory grew by {grown_mb:.0f} MB"

"""Input and output the user got wrong, each one line and exit code 2 (reliability issue
40, round 3): stdout that cannot be written (a full disk, closed), stdin that is closed,
a --context that is no regular file, JSON Lines cells that are objects or arrays, a
tokenizer.json that is not the run's, and weights whose tensors were cast to another kind.

The subprocess tests (a real closed or full descriptor) are marked slow; each case has an
in-process test too."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from torch import nn

import attnkit
from attnkit.app.cli import main
from attnkit.core.checkpoint import load_model_weights, save_model_weights
from attnkit.core.errors import DataError, RunError
from attnkit.data.pairs import read_pair_file
from attnkit.data.readers import read_table
from conftest import LEGACY_RUNS

FORMAT2 = Path(__file__).parents[1] / "fixtures" / "format2_runs"
CLASSIFY = LEGACY_RUNS / "classify-transformer"
TRANSLATE = LEGACY_RUNS / "translate-transformer"
CHAT = LEGACY_RUNS / "chat-lstm"
LM = FORMAT2 / "gpt-lm"
TAGGER = FORMAT2 / "bert-tagger"
QA = FORMAT2 / "bert-qa"

FULL = "attnkit: error: cannot write the output: No space left on device"
CLOSED_OUT = "attnkit: error: cannot write the output: stdout is closed"
CLOSED_IN = "attnkit: error: no standard input to read (stdin is closed)"
needs_dev_full = pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
needs_bash = pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")

VERBS = {  # a command line of each verb that prints, on a tiny run of its task
    "predict": ["predict", str(CLASSIFY), "a great movie"],
    "tag": ["tag", str(TAGGER), "kim went to seoul"],
    "answer": ["answer", str(QA), "--context", "kim went to seoul", "--question", "where"],
    "translate": ["translate", str(TRANSLATE), "ein mann"],
    "chat": ["chat", str(CHAT), "hallo"],
    "generate": ["generate", str(LM), "--prompt", "the", "--max-new-tokens", "5"],
}


def _attnkit(argv: list[str], shell: str | None = None, **kwargs) -> subprocess.CompletedProcess:
    """``attnkit argv`` in a fresh interpreter; ``shell``: a redirection bash applies to it
    first (``>&-``: stdout closed)."""
    command = [sys.executable, "-m", "attnkit", *argv]
    if shell is not None:
        command = ["bash", "-c", f'"$@" {shell}', "bash", *command]
    return subprocess.run(command, capture_output="stdout" not in kwargs, timeout=120, **kwargs)


def _only_error(err: str, line: str) -> None:
    """stderr ends with the error ``line``, the only error, and holds no traceback."""
    assert err.splitlines()[-1] == line, err
    assert err.count("attnkit: error:") == 1 and "Traceback" not in err, err


# ----------------------------------------------------------------------------- 1. stdout
@needs_dev_full
@pytest.mark.slow
@pytest.mark.parametrize("verb", sorted(VERBS))
def test_a_full_stdout_is_one_line_for_every_verb(verb: str) -> None:
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "attnkit", *VERBS[verb]],
            stdout=full,
            stderr=subprocess.PIPE,
            timeout=120,
        )
    assert done.returncode == 2
    _only_error(done.stderr.decode(), FULL)


@needs_bash
@pytest.mark.slow
@pytest.mark.parametrize("verb", ["predict", "generate"])  # a batch, a stream
def test_a_closed_stdout_is_an_error_not_a_lost_output(verb: str) -> None:
    done = _attnkit(VERBS[verb], shell=">&-")
    assert done.returncode == 2
    _only_error(done.stderr.decode(), CLOSED_OUT)


@needs_dev_full
@pytest.mark.parametrize("verb", ["predict", "tag", "answer"])
def test_a_full_stdout_in_process(verb: str, monkeypatch, capsys) -> None:
    full = open("/dev/full", "w")  # noqa: SIM115 - sys.stdout for the call
    monkeypatch.setattr(sys, "stdout", full)
    try:
        assert main(VERBS[verb]) == 2
    finally:
        full.close()  # main pointed its descriptor at /dev/null: nothing is left to fail
    _only_error(capsys.readouterr().err, FULL)


def test_a_closed_stdout_in_process(monkeypatch, capsys) -> None:
    monkeypatch.setattr(sys, "stdout", None)
    assert main(VERBS["predict"]) == 2
    assert capsys.readouterr().err == CLOSED_OUT + "\n"


def _with_command(monkeypatch, command) -> None:
    """``main`` runs ``command(args)`` as the env verb's."""
    from attnkit.app import cli

    parser = cli.build_parser()
    args = parser.parse_args(["env"])
    args.func = command
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    monkeypatch.setattr(parser, "parse_known_args", lambda argv: (args, []))


@needs_dev_full
def test_a_failed_write_someone_caught_is_still_reported(monkeypatch, capsys) -> None:
    def swallowing(args) -> int:  # as logging's handler does with a failed write
        with contextlib.suppress(OSError):
            print("x" * 100_000)  # past the buffer: written at once, the data then dropped
        return 0

    _with_command(monkeypatch, swallowing)
    full = open("/dev/full", "w")  # noqa: SIM115
    monkeypatch.setattr(sys, "stdout", full)
    try:
        assert main(["env"]) == 2
    finally:
        full.close()
    _only_error(capsys.readouterr().err, FULL)


def test_an_oserror_that_is_not_stdouts_keeps_its_traceback(monkeypatch) -> None:
    def failing(args) -> int:
        raise OSError(28, "No space left on device")  # a bug: not the output's

    _with_command(monkeypatch, failing)
    with pytest.raises(OSError, match="No space left"):
        main(["env"])


def test_main_gives_stdout_back(capsys) -> None:
    before = sys.stdout
    assert main(["predict", str(CLASSIFY), "a great movie"]) == 0
    assert sys.stdout is before
    assert capsys.readouterr().out.endswith("a great movie\n")


# ----------------------------------------------------------------------------- 2. stdin
@pytest.mark.parametrize(
    "argv",
    [
        ["predict", str(CLASSIFY), "-"],
        ["tag", str(TAGGER), "-"],
        ["translate", str(TRANSLATE), "-"],
        ["chat", str(CHAT), "-"],
        ["chat", str(CHAT)],  # the prompt loop
    ],
    ids=["predict", "tag", "translate", "chat-", "chat-loop"],
)
def test_a_closed_stdin_is_one_line(argv: list[str], monkeypatch, capsys) -> None:
    monkeypatch.setattr(sys, "stdin", None)
    assert main(argv) == 2
    assert capsys.readouterr().err == CLOSED_IN + "\n"


@needs_bash
@pytest.mark.slow
def test_a_closed_stdin_in_a_real_process() -> None:
    done = _attnkit(["predict", str(CLASSIFY), "-"], shell="<&-")
    assert done.returncode == 2
    assert done.stderr.decode() == CLOSED_IN + "\n"


@pytest.mark.slow
def test_a_stdin_open_for_writing_only_is_one_line(tmp_path: Path) -> None:
    with open(tmp_path / "out.txt", "w") as write_only:
        done = _attnkit(["predict", str(CLASSIFY), "-"], stdin=write_only)
    assert done.returncode == 2
    assert done.stderr.decode() == (
        "attnkit: error: cannot read standard input: Bad file descriptor\n"
    )


# ----------------------------------------------------------------------------- 3. --context
def _answer(context: str) -> list[str]:
    return ["answer", str(QA), "--context", context, "--question", "where"]


def test_a_context_folder_is_one_line(tmp_path: Path, capsys) -> None:
    assert main(_answer(str(tmp_path))) == 2
    assert capsys.readouterr().err == (
        f"attnkit: error: --context {tmp_path} is a folder, not a text file\n"
    )


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_a_context_device_is_one_line(capsys) -> None:
    assert main(_answer("/dev/zero")) == 2
    assert capsys.readouterr().err == (
        "attnkit: error: --context /dev/zero is a character device, not a text file\n"
    )


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs")
def test_a_context_fifo_is_one_line_without_waiting(tmp_path: Path, capsys) -> None:
    fifo = tmp_path / "passage"
    os.mkfifo(fifo)  # nobody writes to it: opening it to read would wait forever
    codes: list[int] = []
    worker = threading.Thread(target=lambda: codes.append(main(_answer(str(fifo)))), daemon=True)
    worker.start()
    worker.join(timeout=60)
    assert not worker.is_alive(), "attnkit answer waits on the FIFO"
    assert codes == [2]
    assert capsys.readouterr().err == (
        f"attnkit: error: --context {fifo} is a FIFO (named pipe), not a text file\n"
    )


def test_a_context_file_and_a_context_text_still_answer(tmp_path: Path, capsys) -> None:
    passage = tmp_path / "passage.txt"
    passage.write_text("kim went to seoul", encoding="utf-8")
    assert main(_answer(str(passage))) == 0
    from_file = capsys.readouterr().out
    assert main(_answer("kim went to seoul")) == 0
    assert capsys.readouterr().out == from_file != ""


# ----------------------------------------------------------------------------- 4. data cells
def _jsonl(path: Path, *rows: dict) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("row", "column", "kind"),
    [
        ({"text": "good", "label": {"a": 0}}, "label", "object"),
        ({"text": "good", "label": ["pos"]}, "label", "array"),
        ({"text": ["good", "film"], "label": "pos"}, "text", "array"),
        ({"text": {"en": "good"}, "label": "pos"}, "text", "object"),
    ],
)
def test_a_jsonl_cell_that_is_an_object_or_array_is_refused(
    tmp_path: Path, row: dict, column: str, kind: str
) -> None:
    path = _jsonl(tmp_path / "train.jsonl", {"text": "fine", "label": "pos"}, row)
    with pytest.raises(DataError) as caught:
        read_table(path)
    assert str(caught.value) == (
        f"{path}: line 2: column '{column}' holds a JSON {kind}, not a string or a number"
    )


def test_jsonl_pairs_refuse_them_too(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "nli.jsonl", {"premise": "a", "hypothesis": {"b": 1}, "label": "x"})
    with pytest.raises(DataError, match=r"line 1: column 'hypothesis' holds a JSON object"):
        read_pair_file(path, text_column="premise", pair_column="hypothesis")


def test_jsonl_numbers_and_strings_stay_accepted(tmp_path: Path) -> None:
    path = _jsonl(
        tmp_path / "train.jsonl",
        {"text": "good", "label": 1},
        {"text": "bad", "label": 0.5},
        {"text": 42, "label": "pos"},
    )
    table = read_table(path)
    assert [(ex.text, ex.label) for ex in table] == [("good", "1"), ("bad", "0.5"), ("42", "pos")]
    with pytest.raises(DataError, match="line 1: empty label in column 'label'"):
        read_table(_jsonl(tmp_path / "null.jsonl", {"text": "good", "label": None}))


def test_training_on_a_jsonl_with_object_labels_is_one_line(tmp_path: Path, capsys) -> None:
    import yaml

    from conftest import tiny_recipe

    data = tmp_path / "data"
    data.mkdir()
    rows = [{"text": f"good film {i}", "label": {"a": 0}} for i in range(20)]
    train, test = _jsonl(data / "train.jsonl", *rows), _jsonl(data / "test.jsonl", *rows)
    recipe = tiny_recipe(data)
    recipe["data"].update(train=str(train), test=str(test))
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(recipe), encoding="utf-8")
    assert main(["train", str(tmp_path / "r.yaml"), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == (
        f"attnkit: error: {train}: line 1: column 'label' holds a JSON object, not a string "
        "or a number"
    )
    assert not (tmp_path / "run").exists() or not any((tmp_path / "run").iterdir())


# ----------------------------------------------------------------------------- 5. tokenizer
def _copy(run: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(run, tmp_path / run.name))


def _edit_tokenizer(run: Path, edit) -> None:
    path = run / "tokenizer.json"
    tokenizer = json.loads(path.read_text(encoding="utf-8"))
    edit(tokenizer)
    path.write_text(json.dumps(tokenizer), encoding="utf-8")


def _rename(token: str):
    """An edit of tokenizer.json: ``token`` renamed (the vocabulary keeps its size)."""

    def edit(tokenizer: dict) -> None:
        for added in tokenizer["added_tokens"]:
            if added["content"] == token:
                added["content"] = "[OTHER]"
        vocab = tokenizer["model"]["vocab"]
        vocab["[OTHER]"] = vocab.pop(token)

    return edit


def test_a_tokenizer_larger_than_the_model_is_refused(tmp_path: Path) -> None:
    run = _copy(CLASSIFY, tmp_path)

    def grow(tokenizer: dict) -> None:
        vocab = tokenizer["model"]["vocab"]
        for i in range(200):
            vocab[f"zz{i}"] = len(vocab)

    _edit_tokenizer(run, grow)
    with pytest.raises(RunError) as caught:
        attnkit.load(run)
    assert str(caught.value) == (
        f"{run / 'tokenizer.json'} has 284 tokens, more than the model's vocabulary of 84: "
        "it is not this run's tokenizer"
    )


def test_another_runs_smaller_tokenizer_is_refused(tmp_path: Path, capsys) -> None:
    run = _copy(CLASSIFY, tmp_path)
    shutil.copy(TRANSLATE / "tokenizer.json", run / "tokenizer.json")  # 50 tokens, not 84
    message = (
        f"{run / 'tokenizer.json'} has 50 tokens, but this run was trained with a tokenizer "
        "of 84 (config.json's vocab_size): it is not this run's tokenizer"
    )
    with pytest.raises(RunError) as caught:
        attnkit.load(run)
    assert str(caught.value) == message
    assert main(["predict", str(run), "a great movie"]) == 2
    assert capsys.readouterr().err == f"attnkit: error: {message}\n"


@pytest.mark.parametrize(
    ("run", "token", "needs"),
    [
        (CLASSIFY, "[PAD]", "[PAD], [CLS]"),  # every task pads; cls pooling reads [CLS]
        (CLASSIFY, "[CLS]", "[PAD], [CLS]"),
        (TRANSLATE, "[EOS]", "[PAD], [BOS], [EOS]"),
        (QA, "[SEP]", "[PAD], [CLS], [SEP]"),
    ],
    ids=["classify-pad", "classify-cls", "translate-eos", "qa-sep"],
)
def test_a_tokenizer_without_a_special_token_the_task_needs_is_refused(
    tmp_path: Path, run: Path, token: str, needs: str
) -> None:
    run = _copy(run, tmp_path)
    _edit_tokenizer(run, _rename(token))
    task = json.loads((run / "config.json").read_text(encoding="utf-8"))["task"]
    with pytest.raises(RunError) as caught:
        attnkit.load(run)
    assert str(caught.value) == (
        f"{run / 'tokenizer.json'} lacks the special token {token} (a {task} run's "
        f"tokenizer needs {needs})"
    )


def test_a_tokenizer_without_its_unknown_word_token_is_refused(tmp_path: Path, capsys) -> None:
    run = _copy(CLASSIFY, tmp_path)
    _edit_tokenizer(run, _rename("[UNK]"))  # the Rust encoder failed on every text
    message = (
        f"{run / 'tokenizer.json'} lacks the special token [UNK] that its WordPiece model "
        "needs for unknown words"
    )
    with pytest.raises(RunError) as caught:
        attnkit.load(run)
    assert str(caught.value) == message
    assert main(["predict", str(run), "a great movie"]) == 2
    assert capsys.readouterr().err == f"attnkit: error: {message}\n"


# ----------------------------------------------------------------------------- 6. dtypes
@pytest.mark.parametrize("dtype", [torch.int8, torch.int32, torch.bool])
def test_weights_cast_to_another_kind_are_refused(tmp_path: Path, dtype, capsys) -> None:
    run = _copy(CLASSIFY, tmp_path)
    weights = run / "model.safetensors"
    tensors = load_file(str(weights))
    name = sorted(tensors)[0]
    tensors[name] = tensors[name].to(dtype)
    save_file(tensors, str(weights), metadata={"format": "pt"})
    kind = str(dtype).removeprefix("torch.")
    message = f"{weights} holds tensors of another type: {name} is {kind} in the file, float32 in the model"
    with pytest.raises(RunError) as caught:
        attnkit.load(run)
    assert str(caught.value) == message
    assert main(["predict", str(run), "a great movie"]) == 2
    assert capsys.readouterr().err == f"attnkit: error: {message}\n"


def test_every_tensor_cast_is_counted(tmp_path: Path) -> None:
    run = _copy(CLASSIFY, tmp_path)
    weights = run / "model.safetensors"
    tensors = {k: v.to(torch.int8) for k, v in load_file(str(weights)).items()}
    save_file(tensors, str(weights), metadata={"format": "pt"})
    with pytest.raises(
        RunError,
        match=rf"is int8 in the file, float32 in the model \(and {len(tensors) - 1} more\)$",
    ):
        attnkit.load(run)


def test_another_float_type_still_loads(tmp_path: Path) -> None:
    run = _copy(CLASSIFY, tmp_path)
    weights = run / "model.safetensors"
    before = attnkit.load(CLASSIFY).predict(["a great movie"])[0]
    tensors = {k: v.to(torch.float16) for k, v in load_file(str(weights)).items()}
    save_file(tensors, str(weights), metadata={"format": "pt"})
    after = attnkit.load(run).predict(["a great movie"])[0]
    assert after.label == before.label


class _WithCounts(nn.Module):
    """A float weight and an integer buffer (as position ids or a step counter are)."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(3))
        self.register_buffer("counts", torch.arange(3))


def test_integer_buffers_load_as_integers_and_refuse_floats(tmp_path: Path) -> None:
    source, target = _WithCounts(), _WithCounts()
    source.counts += 5
    path = save_model_weights(source, tmp_path / "model.safetensors")
    load_model_weights(target, path)
    assert target.counts.tolist() == [5, 6, 7] and target.counts.dtype == torch.int64
    save_file({"weight": source.weight.detach(), "counts": source.counts.float()}, str(path))
    with pytest.raises(RunError, match="counts is float32 in the file, int64 in the model"):
        load_model_weights(target, path)

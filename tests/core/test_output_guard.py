"""One output-path guard for every verb that writes (``attnkit.core.output_guard``): nothing the
user had is destroyed. Device nodes (also /dev/null as root), FIFOs, sockets, folders, links
out of their folder, the command's own inputs and a run's files are refused with one line
before any work; pseudo-label's format follows the file name; an OS error while writing
(read-only, full disk, permission, not a directory) is one line naming the path, with
nothing half-written left; a killed export's leftovers block nothing; a damaged ONNX export
is one line. The nine data-loss cases of issue 32 are marked ``# issue 32: data loss``."""

from __future__ import annotations

import errno
import gzip
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import attnkit.app.api
from attnkit.app.cli import main
from attnkit.core.errors import InputError, RunError
from attnkit.core.output_guard import check_output, staged_folder
from attnkit.data.pseudo_label_files import (
    PSEUDO_LABEL_SUFFIXES,
    PseudoLabel,
    _soft_targets,
    write_pseudo_labels,
)
from attnkit.data.readers import read_table
from conftest import LEGACY_RUNS

TRANSLATOR = LEGACY_RUNS / "translate-transformer"


def _run(argv, capsys):
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


def _one_line(err: str, *parts: str) -> None:
    assert err.startswith("attnkit: error: ") and err.count("\n") == 1, err
    for part in parts:
        assert part in err, err


def _snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under ``root``: its type and content (links: their target)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            mode = os.lstat(p).st_mode
            if stat.S_ISLNK(mode):
                out[str(p)] = ("link", os.readlink(p))
            elif stat.S_ISREG(mode):
                out[str(p)] = ("file", p.read_bytes())
            else:
                out[str(p)] = (stat.S_IFMT(mode),)
    return out


@pytest.fixture
def dev_safe(monkeypatch):
    """A safety net for the tests that aim at /dev: a rename onto anything under /dev fails
    the test instead of replacing a device of the machine (should the guard ever let one
    through)."""
    replace, rename = os.replace, os.rename

    def guarded(real):
        def move(src, dst, *args, **kwargs):
            if os.path.realpath(dst).startswith("/dev/"):
                raise AssertionError(f"attnkit tried to replace {dst}")
            return real(src, dst, *args, **kwargs)

        return move

    monkeypatch.setattr(os, "replace", guarded(replace))
    monkeypatch.setattr(os, "rename", guarded(rename))


@pytest.fixture
def run_copy(tiny_run_once, tmp_path) -> Path:
    """A copy of the session's tiny classify run (it may be aimed at)."""
    return Path(shutil.copytree(tiny_run_once, tmp_path / "runs" / "cls"))


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _labels(n: int = 3, soft: bool = False) -> list[PseudoLabel]:
    probs = [(0.9, 0.1), (0.2, 0.8), (0.6, 0.4)]
    texts = ['great, "fun" film', "awful\tstory", "최고 영화"]
    return [
        PseudoLabel(texts[i], "pos" if probs[i][0] > 0.5 else "neg", max(probs[i]),
                    probs[i] if soft else None)
        for i in range(n)
    ]  # fmt: skip


# ----------------------------------------------------------------------------- the rules
def test_empty_path_is_refused():
    for kind in ("file", "folder"):
        with pytest.raises(InputError, match="--output is empty"):
            check_output("", kind=kind, what="--output")


def test_new_and_regular_files_are_accepted(tmp_path):
    assert check_output(tmp_path / "new.png") == tmp_path / "new.png"
    (tmp_path / "old.png").write_text("x")
    assert check_output(tmp_path / "old.png") == tmp_path / "old.png"


def test_fifo_socket_and_folder_are_refused(tmp_path):
    fifo = _fifo(tmp_path / "pipe.png")
    with pytest.raises(InputError, match="is a FIFO \\(named pipe\\), not a regular file"):
        check_output(fifo)
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(tmp_path / "s.png"))
        with pytest.raises(InputError, match="is a socket, not a regular file"):
            check_output(tmp_path / "s.png")
    finally:
        sock.close()
    with pytest.raises(InputError, match="is a folder; give a file name"):
        check_output(tmp_path)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="mknod needs root")
def test_a_character_device_is_refused(tmp_path):
    node = tmp_path / "null.png"
    os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    with pytest.raises(InputError, match="is a character device, not a regular file"):
        check_output(node)


def test_dev_null_is_never_replaced_even_as_root(dev_safe, capsys):  # issue 32: data loss
    before = os.stat("/dev/null")
    code, out, err = _run(["plot", "positional-encoding", "-o", "/dev/null"], capsys)
    assert code == 2 and out == ""
    _one_line(err, "cannot write /dev/null: it is a character device, not a regular file")
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_ino == before.st_ino


def test_symlinks_out_of_their_folder_are_refused_inside_they_are_followed(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.tsv").write_text("keep me")
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "sub").mkdir()
    for name, target in (("up.tsv", "../outside/keep.tsv"), ("abs.tsv", outside / "keep.tsv"),
                         ("gone.tsv", outside / "new.tsv"), ("dev.tsv", "/dev/null")):  # fmt: skip
        (folder / name).symlink_to(target)
        with pytest.raises(InputError, match="is a symbolic link to .* outside its folder"):
            check_output(folder / name)
    (folder / "in.tsv").symlink_to("sub/real.tsv")  # dangling, inside: the target is written
    assert check_output(folder / "in.tsv") == (folder / "sub" / "real.tsv").resolve()
    (folder / "dir.tsv").symlink_to("sub")
    with pytest.raises(InputError, match="is a folder"):
        check_output(folder / "dir.tsv")
    (folder / "loop.tsv").symlink_to("loop.tsv")
    with pytest.raises(InputError, match="loop.tsv"):
        check_output(folder / "loop.tsv")
    assert (outside / "keep.tsv").read_text() == "keep me"
    assert not (outside / "new.tsv").exists()


def test_an_input_is_never_the_output(tmp_path):
    corpus = tmp_path / "u.tsv"
    corpus.write_text("text\ngood\n")
    with pytest.raises(InputError, match="it is also an input of this command"):
        check_output(corpus, inputs=[corpus])
    os.link(corpus, tmp_path / "hard.tsv")  # another name, the same file
    with pytest.raises(InputError, match="it is also an input"):
        check_output(tmp_path / "hard.tsv", inputs=["nsmc", None, corpus])
    assert check_output(tmp_path / "other.tsv", inputs=[corpus]) == tmp_path / "other.tsv"


def test_files_of_a_run_directory_are_refused_its_curves_too(run_copy):
    (run_copy / "last" / "a" / "b").mkdir(parents=True)
    for target in ("model.safetensors", "new.png", "last/model.safetensors", "last/x.png",
                   "curves.png", "last/a/b/x.png", "last/a/b/c"):  # fmt: skip
        with pytest.raises(InputError, match="is a run directory"):
            check_output(run_copy / target)
    for folder in ("export", "last/a/b/c", "last/a/b/c/d"):  # at any depth
        with pytest.raises(InputError, match="is a run directory"):
            check_output(run_copy / folder, kind="folder")


def test_folder_outputs(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match="--out .*file is a file, not a folder"):
        check_output(tmp_path / "file", kind="folder", what="--out")
    with pytest.raises(InputError, match="file is a file, not a folder"):
        check_output(tmp_path / "file" / "run", kind="folder", what="--out")
    with pytest.raises(InputError, match="is a FIFO \\(named pipe\\), not a folder"):
        check_output(_fifo(tmp_path / "pipe"), kind="folder")
    full = tmp_path / "full"
    full.mkdir()
    assert check_output(full, kind="folder", empty=True) == full
    (full / ".backup.20241128.tmp").write_text("the user's")  # looks like ours: it is not
    with pytest.raises(InputError, match="full is not empty .it holds '.backup.20241128.tmp'"):
        check_output(full, kind="folder", empty=True)
    assert (full / ".backup.20241128.tmp").read_text() == "the user's"
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")  # runs/big -> /mnt/disk/big
    assert check_output(tmp_path / "link", kind="folder") == tmp_path / "elsewhere"
    assert check_output(tmp_path / "a" / "b", kind="folder") == tmp_path / "a" / "b"
    assert not (tmp_path / "a").exists()  # nothing made here


def test_read_only_and_unwritable_folders_are_named_before_any_work(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "access", lambda *a, **k: False)
    monkeypatch.setattr(os, "statvfs", lambda p: types.SimpleNamespace(f_flag=os.ST_RDONLY))
    with pytest.raises(InputError, match=f"folder {tmp_path} is on a read-only file system"):
        check_output(tmp_path / "x.png")
    with pytest.raises(InputError, match="is on a read-only file system"):
        check_output(tmp_path / "run", kind="folder")
    monkeypatch.setattr(os, "statvfs", lambda p: types.SimpleNamespace(f_flag=0))
    with pytest.raises(InputError, match=f"folder {tmp_path} is not writable"):
        check_output(tmp_path / "x.png")


# ----------------------------------------------------------------------------- the 9 cases
def test_predict_explain_into_a_link_fifo_or_device(tiny_run_once, tmp_path, capsys, dev_safe):
    # issue 32: data loss
    (tmp_path / "secret").write_text("keep me")
    (tmp_path / "figs").mkdir()
    link = tmp_path / "figs" / "x.png"
    link.symlink_to(tmp_path / "secret")
    for target, message in ((link, "outside its folder"),
                            (_fifo(tmp_path / "p.png"), "is a FIFO"),
                            ("/dev/null", "is a character device")):  # fmt: skip
        code, out, err = _run(["predict", tiny_run_once, "좋아요", "--explain", target], capsys)
        assert code == 2 and out == ""  # before any prediction
        _one_line(err, f"cannot write {target}", message)
    assert link.is_symlink() and (tmp_path / "secret").read_text() == "keep me"
    inside = tmp_path / "figs" / "latest.png"  # a link in its folder: the figure goes there
    inside.symlink_to("heat.png")
    code, _, err = _run(["predict", tiny_run_once, "좋아요", "--explain", inside], capsys)
    assert code == 0 and inside.is_symlink()
    assert (tmp_path / "figs" / "heat.png").read_bytes()[:4] == b"\x89PNG"


def test_plot_and_translate_into_a_fifo(tmp_path, capsys):  # issue 32: data loss
    fifo = _fifo(tmp_path / "p.png")
    for argv in (["plot", "positional-encoding", "-o", fifo],
                 ["translate", TRANSLATOR, "red", "--show-attention", fifo]):  # fmt: skip
        code, out, err = _run(argv, capsys)
        assert code == 2 and out == ""
        _one_line(err, f"cannot write {fifo}: it is a FIFO (named pipe), not a regular file")
        assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_pseudo_label_refuses_its_input_a_run_file_and_a_fifo(run_copy, tmp_path, capsys):
    # issue 32: data loss (x3): -o u.txt over --input u.txt, -o RUN/model.safetensors, -o FIFO
    corpus = tmp_path / "u.txt"
    corpus.write_text("good movie\nbad movie\n")
    weights = (run_copy / "model.safetensors").read_bytes()
    fifo = _fifo(tmp_path / "p.tsv")
    table = tmp_path / "u.tsv"
    table.write_text("text\ngood movie\n")
    for source, target, message in (
        (corpus, corpus, "it is also an input of this command"),
        (table, table, "it is also an input of this command"),
        (corpus, run_copy / "model.safetensors", "is a run directory"),
        (corpus, fifo, "is a FIFO"),
    ):
        code, out, err = _run(["pseudo-label", run_copy, "--input", source, "-o", target], capsys)
        assert code == 2 and out == "" and "labelled" not in err  # before any labelling
        _one_line(err, f"cannot write {target}", message)
    assert corpus.read_text() == "good movie\nbad movie\n"
    assert table.read_text() == "text\ngood movie\n"
    assert (run_copy / "model.safetensors").read_bytes() == weights


def test_export_refuses_a_non_empty_folder_an_empty_name_and_a_file(
    tiny_run_once, tmp_path, capsys, monkeypatch
):  # issue 32: data loss (hf into a non-empty folder, -o '')
    full = tmp_path / "hf"
    full.mkdir()
    (full / "config.json").write_text("mine")
    monkeypatch.chdir(tmp_path)
    for fmt in ("hf", "onnx", "attnkit"):
        extra = ["--quantize", "int8"] if fmt == "attnkit" else []
        code, _, err = _run(["export", tiny_run_once, "--format", fmt, *extra, "-o", full], capsys)
        assert code == 2
        _one_line(err, f"--output {full} is not empty (it holds 'config.json'): choose a new")
        code, _, err = _run(["export", tiny_run_once, "--format", fmt, *extra, "-o", ""], capsys)
        assert code == 2
        _one_line(err, "--output is empty: give a folder name")
    (tmp_path / "model.onnx").write_text("keep me")
    code, _, err = _run(
        ["export", tiny_run_once, "--format", "onnx", "-o", tmp_path / "model.onnx"], capsys
    )
    assert code == 2
    _one_line(err, f"--output {tmp_path / 'model.onnx'} is a file, not a folder")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf", "model.onnx"]
    assert (full / "config.json").read_text() == "mine"


def test_train_out_refuses_a_fifo_and_a_folder_inside_a_run(run_copy, tiny_config, capsys):
    for out, message in ((_fifo(run_copy.parent / "pipe"), "is a FIFO (named pipe), not a folder"),
                         (run_copy / "sub", "is a run directory")):  # fmt: skip
        code, _, err = _run(["train", tiny_config, "--out", out], capsys)
        assert code == 2 and "step" not in err
        _one_line(err, str(out), message)
    assert not (run_copy / "sub").exists()


# ----------------------------------------------------------------------------- formats (item 7)
@pytest.mark.parametrize("suffix", PSEUDO_LABEL_SUFFIXES)
@pytest.mark.parametrize("soft", [False, True])
def test_pseudo_label_format_follows_the_name_and_reads_back(tmp_path, suffix, soft):
    path = write_pseudo_labels(_labels(soft=soft), tmp_path / f"p{suffix}", ["neg", "pos"])
    raw = path.read_bytes()
    if suffix.endswith(".gz"):
        assert raw[:2] == b"\x1f\x8b"
        raw = gzip.decompress(raw)
    text = raw.decode("utf-8")
    first = text.splitlines()[0]
    if ".jsonl" in suffix:
        assert json.loads(first)["text"] == 'great, "fun" film'
    else:
        assert first.split("," if ".csv" in suffix else "\t")[:3] == ["text", "label", "confidence"]
    table = read_table(path)  # what data.extra_train reads
    assert [ex.text for ex in table] == ['great, "fun" film', "awful story", "최고 영화"]
    assert [ex.label for ex in table] == ["pos", "neg", "pos"]
    targets = _soft_targets(path, ["neg", "pos"], "text")
    if soft:
        assert targets["awful story"] == pytest.approx((0.2, 0.8))
    else:
        assert targets is None


@pytest.mark.parametrize("name", ["p.txt", "p.gz", "p", "p.tsv.bz2", "p.parquet"])
def test_pseudo_label_refuses_a_name_it_cannot_honour(run_copy, tmp_path, capsys, name):
    corpus = tmp_path / "u.txt"
    corpus.write_text("good movie\n")
    code, out, err = _run(
        ["pseudo-label", run_copy, "--input", corpus, "-o", tmp_path / name], capsys
    )
    assert code == 2 and out == "" and "labelled" not in err
    _one_line(err, f"cannot write {tmp_path / name}: pseudo-labels are written as "
                   ".tsv, .csv, .jsonl, .tsv.gz, .csv.gz, .jsonl.gz")  # fmt: skip
    assert not (tmp_path / name).exists()


def test_pseudo_label_cli_writes_compressed_csv(run_copy, tmp_path, capsys):
    corpus = tmp_path / "u.txt"
    corpus.write_text("great movie\nawful film\n")
    out = tmp_path / "p.csv.gz"
    code, stdout, err = _run(["pseudo-label", run_copy, "--input", corpus, "-o", out,
                              "--min-confidence", "0", "--quiet"], capsys)  # fmt: skip
    assert code == 0, err
    assert stdout.startswith(f"wrote {out}: 2 of 2 texts")
    assert gzip.decompress(out.read_bytes()).decode().startswith("text,label,confidence\n")
    assert len(read_table(out)) == 2


# ----------------------------------------------------------------------------- OS errors
ERRORS = {
    errno.EROFS: "Read-only file system",
    errno.ENOSPC: "No space left on device",
    errno.EACCES: "Permission denied",
    errno.ENOTDIR: "Not a directory",
}


def _failing_replace(monkeypatch, code: int, under: Path) -> None:
    """os.replace / os.rename into ``under`` fail with ``code`` (a full disk, ...)."""
    replace, rename = os.replace, os.rename

    def failing(real):
        def move(src, dst, *args, **kwargs):
            if os.path.abspath(dst).startswith(str(under)):
                raise OSError(code, os.strerror(code), str(dst))
            return real(src, dst, *args, **kwargs)

        return move

    monkeypatch.setattr(os, "replace", failing(replace))
    monkeypatch.setattr(os, "rename", failing(rename))


@pytest.mark.parametrize("code", list(ERRORS))
def test_pseudo_label_and_plot_write_errors_are_one_line(tmp_path, capsys, monkeypatch, code):
    old = tmp_path / "p.tsv"
    old.write_text("old\n")
    _failing_replace(monkeypatch, code, tmp_path)
    with pytest.raises(InputError, match=f"^cannot write {old}: {ERRORS[code]}$"):
        write_pseudo_labels(_labels(), old)
    png = tmp_path / "pe.png"
    result, out, err = _run(["plot", "positional-encoding", "--max-len", "4", "--d-model",
                             "4", "-o", png], capsys)  # fmt: skip
    assert result == 2 and err == f"attnkit: error: cannot write {png}: {ERRORS[code]}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.tsv"]  # no temporary file left
    assert old.read_text() == "old\n"


def test_pseudo_label_on_a_read_only_folder_fails_before_labelling(
    run_copy, tmp_path, capsys, monkeypatch
):
    corpus = tmp_path / "u.txt"
    corpus.write_text("good movie\n")
    real_access = os.access
    ro = tmp_path / "ro"
    ro.mkdir()

    def access(path, mode, **kwargs):
        return False if Path(path) == ro else real_access(path, mode, **kwargs)

    monkeypatch.setattr(os, "access", access)
    monkeypatch.setattr(os, "statvfs", lambda p: types.SimpleNamespace(f_flag=os.ST_RDONLY))
    monkeypatch.setattr(attnkit.app.api, "load", lambda *a, **k: pytest.fail("labelled first"))
    code, out, err = _run(["pseudo-label", run_copy, "--input", corpus, "-o", ro / "p.tsv"], capsys)
    assert code == 2 and out == ""
    _one_line(err, f"cannot write {ro / 'p.tsv'}: folder {ro} is on a read-only file system")


@pytest.mark.parametrize("code", list(ERRORS))
def test_pseudo_label_write_error_after_labelling(run_copy, tmp_path, capsys, monkeypatch, code):
    corpus = tmp_path / "u.txt"
    corpus.write_text("good movie\n")
    out = tmp_path / "out"
    out.mkdir()
    _failing_replace(monkeypatch, code, out)
    result, stdout, err = _run(["pseudo-label", run_copy, "--input", corpus, "-o",
                                out / "p.tsv", "--quiet"], capsys)  # fmt: skip
    assert result == 2 and stdout == ""
    assert err == f"attnkit: error: cannot write {out / 'p.tsv'}: {ERRORS[code]}\n"
    assert list(out.iterdir()) == []


@pytest.mark.parametrize("code", list(ERRORS))
def test_export_write_errors_leave_nothing(tiny_run_once, tmp_path, capsys, monkeypatch, code):
    _failing_replace(monkeypatch, code, tmp_path / "exports")
    out = tmp_path / "exports" / "q"
    result, _, err = _run(
        ["export", tiny_run_once, "--format", "attnkit", "--quantize", "int8", "-o", out], capsys
    )
    assert result == 2
    _one_line(err, f"cannot write {out}: {ERRORS[code]}")
    assert not (tmp_path / "exports").exists()  # not even the folders made for it
    empty = tmp_path / "empty"  # an existing empty folder stays as it was
    empty.mkdir()
    _failing_replace(monkeypatch, code, empty)
    result, _, err = _run(
        ["export", tiny_run_once, "--format", "attnkit", "--quantize", "int8", "-o", empty],
        capsys,
    )
    assert result == 2 and list(empty.iterdir()) == []


def _fake_onnx_export(model, task, path, vocab_size, max_len):
    Path(path).write_bytes(b"graph")
    Path(str(path) + ".data").write_bytes(b"weights")
    return {"inputs": ["input_ids", "attention_mask"], "outputs": ["logits"], "opset": 18,
            "max_abs_diff": 0.0}  # fmt: skip


def test_files_that_look_like_ours_are_never_removed(tiny_run_once, tmp_path, capsys, monkeypatch):
    """Only what this process made is removed: a name that looks like one of attnkit's
    temporary names (a user's backup, a killed export's staging folder) stays, and a
    folder holding one is not empty."""
    monkeypatch.setattr(attnkit.app.api, "export_onnx", _fake_onnx_export)  # the folder, not ONNX
    out = tmp_path / "onnx"
    out.mkdir()
    (out / ".backup.20241128.tmp").write_text("the user's")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()  # fmt: skip
    stage = tmp_path / f".onnx2.{dead}.abcdefgh.tmp"  # a killed export's staging folder
    stage.mkdir()
    (stage / "model.onnx").write_bytes(b"half")
    code, _, err = _run(["export", tiny_run_once, "--format", "onnx", "-o", out], capsys)
    assert code == 2 and "is not empty" in err, err
    assert sorted(p.name for p in out.iterdir()) == [".backup.20241128.tmp"]
    target = tmp_path / "onnx2"
    code, _, err = _run(["export", tiny_run_once, "--format", "onnx", "-o", target], capsys)
    assert code == 0, err
    assert sorted(p.name for p in target.iterdir()) == [
        "config.json", "model.onnx", "model.onnx.data", "tokenizer.json"]  # fmt: skip
    assert (stage / "model.onnx").read_bytes() == b"half"  # not ours to remove
    assert sorted(p.name for p in tmp_path.iterdir()) == [stage.name, "onnx", "onnx2"]


def test_staged_folder_keeps_a_failed_write_from_showing(tmp_path):
    with pytest.raises(ZeroDivisionError), staged_folder(tmp_path / "new") as stage:
        (stage / "config.json").write_text("{}")
        1 / 0  # noqa: B018
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(RunError, match="^bad run$"), staged_folder(tmp_path / "a" / "new"):
        raise RunError("bad run")  # our own errors pass as they are
    assert list(tmp_path.iterdir()) == []  # the folders made for it are gone too


@pytest.mark.parametrize("code", list(ERRORS))
def test_train_out_write_errors_are_one_line(tiny_config, tmp_path, capsys, monkeypatch, code):
    out = tmp_path / "runs" / "x"
    _failing_replace(monkeypatch, code, tmp_path / "runs")
    result, _, err = _run(["train", tiny_config, "--out", out], capsys)
    assert result == 2
    assert err.splitlines()[-1] == f"attnkit: error: cannot write {out}: {ERRORS[code]}"
    assert not out.exists()  # nothing half-made blocks the next try
    monkeypatch.undo()
    monkeypatch.setattr(os, "access", lambda *a, **k: False)  # a read-only disk, found first
    monkeypatch.setattr(os, "statvfs", lambda p: types.SimpleNamespace(f_flag=os.ST_RDONLY))
    result, out_text, err = _run(["train", tiny_config, "--out", out], capsys)
    assert result == 2 and out_text == ""
    _one_line(err, f"cannot write {out}", "is on a read-only file system")


# ----------------------------------------------------------------------------- damaged ONNX
def _onnx_run(run: Path, graph: bytes) -> Path:
    (run / "model.safetensors").unlink()
    shutil.rmtree(run / "last", ignore_errors=True)
    (run / "model.onnx").write_bytes(graph)
    config = json.loads((run / "config.json").read_text())
    config["onnx"] = {"inputs": ["input_ids", "attention_mask"], "outputs": ["logits"]}
    (run / "config.json").write_text(json.dumps(config))
    return run


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty", "another graph"])
def test_a_damaged_onnx_export_is_one_line(run_copy, capsys, damage):
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", [x], [y])
    whole = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    whole.ir_version = 8
    assert onnx.checker.check_model(whole) is None
    data = whole.SerializeToString()
    graph_bytes = {"truncated": data[: len(data) // 2], "garbage": os.urandom(300),
                   "empty": b"", "another graph": data}[damage]  # fmt: skip
    run = _onnx_run(run_copy, graph_bytes)
    code, out, err = _run(["predict", run, "great movie"], capsys)
    assert code == 2 and out == ""
    message = "is not the model its config.json describes" if damage == "another graph" else (
        "is damaged or not an ONNX model")  # fmt: skip
    _one_line(err, f"{run / 'model.onnx'} {message}")


# ----------------------------------------------------------------------------- fuzz
NAMES = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="/\\"),
    min_size=1,
    max_size=12,
).filter(lambda s: s not in (".", "..") and len(s.encode()) < 200)

KINDS = ["new", "regular", "folder", "fifo", "socket", "link in", "dangling link in",
         "link out", "dangling link out", "link to dev", "under a file", "missing folder",
         "input", "hard link to input", "run file", "run curves", "deep in a run",
         "empty"]  # fmt: skip


def _make(root: Path, kind: str, name: str) -> tuple[str, str | None, list]:
    """Build the case ``kind`` under ``root``: (output path, what is expected: None = written
    or a phrase of the refusal, the command's inputs)."""
    work = root / "work"
    work.mkdir()
    (work / "sub").mkdir()
    (root / "in").mkdir()
    (root / "outside.tsv").write_text("outside")
    corpus = root / "in" / "corpus.tsv"
    corpus.write_text("text\nhi\n")
    name += ".tsv"
    p = work / name
    if kind == "regular":
        p.write_text("old")
    elif kind == "folder":
        p.mkdir()
        return str(p), "is a folder", []
    elif kind == "fifo":
        os.mkfifo(p)
        return str(p), "is a FIFO", []
    elif kind == "socket":
        if len(str(p).encode()) > 100:  # AF_UNIX paths are short
            return str(p), None, []
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(p))
        sock.close()
        return str(p), "is a socket", []
    elif kind in ("link in", "dangling link in"):
        if kind == "link in":
            (work / "sub" / "t.tsv").write_text("target")
        p.symlink_to("sub/t.tsv")
    elif kind in ("link out", "dangling link out", "link to dev"):
        target = {"link out": root / "outside.tsv", "dangling link out": root / "gone.tsv",
                  "link to dev": Path("/dev/null")}[kind]  # fmt: skip
        p.symlink_to(target)
        return str(p), "outside its folder", []
    elif kind == "under a file":
        (work / "f").write_text("file")
        return str(work / "f" / name), "is a file, not a folder", []
    elif kind == "missing folder":
        return str(work / "missing" / name), "does not exist", []
    elif kind == "input":
        return str(corpus), "also an input", [corpus]
    elif kind == "hard link to input":
        os.link(corpus, p)
        return str(p), "also an input", [corpus]
    elif kind in ("run file", "run curves", "deep in a run"):
        run = work / "run"
        run.mkdir()
        (run / "config.json").write_text("{}")
        (run / "model.safetensors").write_text("weights")
        if kind == "run curves":  # a run's own figure: its training's alone
            return str(run / "curves.png"), "is a run directory", []
        if kind == "deep in a run":
            (run / "last" / "a").mkdir(parents=True)
            return str(run / "last" / "a" / name), "is a run directory", []
        return str(run / name), "is a run directory", []
    elif kind == "empty":
        return "", "is empty", []
    return str(p), None, [corpus]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(KINDS), name=NAMES)
def test_fuzz_output_paths_never_destroy_anything(kind, name):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        path, expected, inputs = _make(root, kind, name)
        before = _snapshot(root)
        try:
            target = check_output(path, inputs=inputs, what="-o")
        except InputError as exc:
            message = str(exc)
            assert "\n" not in message and expected is not None, message
            assert expected in message, message
            assert _snapshot(root) == before
            return
        assert expected is None, f"{kind}: {path} was accepted"
        written = write_pseudo_labels(_labels(), target)
        after = _snapshot(root)
        changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
        assert changed == {str(written)}, changed  # only the output, and nothing else
        assert stat.S_ISREG(os.lstat(written).st_mode)
        if kind in ("link in", "dangling link in"):
            assert os.path.islink(path) and Path(path).resolve() == written.resolve()

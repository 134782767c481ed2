"""Damaged data files: truncated or corrupt gzip, a wrong sha256, leftover ``*.part`` files of
interrupted downloads, CSV fields over csv's default 131,072-character limit, CR-only lines.

``attnkit data list`` marks a damaged file ``[bad]`` with the reason, ``attnkit data fetch``
downloads it again without ``--force``, and the readers raise one-line DataErrors."""

from __future__ import annotations

import csv
import dataclasses
import functools
import gzip
import hashlib
import importlib
import os
import subprocess
import sys
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from attnkit.app import cli
from attnkit.data import DataError, catalogue, fetch, is_present, read_nsmc, read_table
from attnkit.data.fetch import check_file, remove_stale_parts
from attnkit.data.parallel import read_chatbot, read_multi30k, read_parallel_files
from attnkit.data.readers import read_texts

fetch_module = importlib.import_module("attnkit.data.fetch")  # attnkit.data.fetch: the function
NSMC_TRAIN = "id\tdocument\tlabel\n1\t아 더빙.. 진짜 짜증나네요\t0\n2\t재밌다 강추\t1\n".encode()
NSMC_TEST = "id\tdocument\tlabel\n9\t별로\t0\n".encode()
SHAKESPEARE = b"First Citizen:\nBefore we proceed any further, hear me speak.\n"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _patch_dataset(monkeypatch, name: str, **file_changes) -> None:
    """Replace fields of catalogued files of dataset ``name`` (per-file dicts by relpath)."""
    infos = []
    for info in catalogue.list_datasets():
        if info.name == name:
            files = tuple(
                dataclasses.replace(f, **file_changes.get(f.relpath, {})) for f in info.files
            )
            info = dataclasses.replace(info, files=files)
        infos.append(info)
    monkeypatch.setattr(catalogue, "_DATASETS", tuple(infos))


@pytest.fixture
def small_catalogue(monkeypatch):
    """nsmc and tinyshakespeare with small synthetic contents (checksums and sizes patched)."""
    _patch_dataset(
        monkeypatch,
        "nsmc",
        **{
            "nsmc/ratings_train.txt.gz": {"sha256": sha(NSMC_TRAIN), "size": len(NSMC_TRAIN)},
            "nsmc/ratings_test.txt.gz": {"sha256": sha(NSMC_TEST), "size": len(NSMC_TEST)},
        },
    )
    _patch_dataset(
        monkeypatch,
        "tinyshakespeare",
        **{"tinyshakespeare/input.txt": {"sha256": sha(SHAKESPEARE), "size": len(SHAKESPEARE)}},
    )
    monkeypatch.delenv("ATTNKIT_MIRROR", raising=False)


def _store_good(data: Path) -> None:
    (data / "nsmc").mkdir(parents=True, exist_ok=True)
    (data / "tinyshakespeare").mkdir(exist_ok=True)
    (data / "nsmc/ratings_train.txt.gz").write_bytes(gzip.compress(NSMC_TRAIN, mtime=0))
    (data / "nsmc/ratings_test.txt.gz").write_bytes(gzip.compress(NSMC_TEST, mtime=0))
    (data / "tinyshakespeare/input.txt").write_bytes(SHAKESPEARE)


def _truncate(path: Path, keep: float = 0.5) -> None:
    raw = path.read_bytes()
    path.write_bytes(raw[: int(len(raw) * keep)])


def _mirror(folder: Path) -> Path:
    folder.mkdir()
    (folder / "ratings_train.txt").write_bytes(NSMC_TRAIN)
    (folder / "ratings_test.txt").write_bytes(NSMC_TEST)
    (folder / "input.txt").write_bytes(SHAKESPEARE)
    return folder


def _list(capsys, data: Path, *extra: str) -> str:
    assert cli.main(["data", "list", "--data-dir", str(data), *extra]) == 0
    return capsys.readouterr().out


def _row(out: str, name: str) -> str:
    return next(line for line in out.splitlines() if f"] {name} " in line)


# --------------------------------------------------------------------------- data list
@pytest.mark.parametrize("verify", [False, True])
def test_data_list_marks_truncated_gzip_bad(small_catalogue, tmp_path, capsys, verify):
    data = tmp_path / "data"
    _store_good(data)
    _truncate(data / "nsmc/ratings_train.txt.gz")
    out = _list(capsys, data, *(["--verify"] if verify else []))
    assert "[bad] nsmc " in _row(out, "nsmc")
    assert "[yes] tinyshakespeare " in _row(out, "tinyshakespeare")
    assert "nsmc/ratings_train.txt.gz: truncated gzip file" in out
    assert "attnkit data fetch nsmc" in out
    assert "ratings_test" not in out  # the intact file is not reported


def test_data_list_names_other_damage(small_catalogue, tmp_path, capsys):
    data = tmp_path / "data"
    _store_good(data)
    (data / "nsmc/ratings_test.txt.gz").write_bytes(NSMC_TEST)  # not gzipped at all
    (data / "tinyshakespeare/input.txt").write_bytes(SHAKESPEARE[:-5])  # cut short
    out = _list(capsys, data)
    assert "nsmc/ratings_test.txt.gz: not a valid gzip file" in out
    n = len(SHAKESPEARE)
    assert f"tinyshakespeare/input.txt: {n - 5} bytes, expected {n} (truncated)" in out
    assert "[bad] tinyshakespeare " in _row(out, "tinyshakespeare")


def test_data_list_sha256_mismatch_only_with_verify(small_catalogue, tmp_path, capsys):
    """Same size, different bytes: only --verify reads the file (the quick check cannot see it)."""
    data = tmp_path / "data"
    _store_good(data)
    (data / "tinyshakespeare/input.txt").write_bytes(SHAKESPEARE.replace(b"First", b"Frist"))
    assert "[yes] tinyshakespeare " in _row(_list(capsys, data), "tinyshakespeare")
    out = _list(capsys, data, "--verify")
    assert "[bad] tinyshakespeare " in _row(out, "tinyshakespeare")
    assert "tinyshakespeare/input.txt: sha256 of the file does not match" in out


def test_data_list_quick_check_reads_no_intact_file(small_catalogue, tmp_path, capsys, monkeypatch):
    """The default check hashes nothing that looks intact (fast on 100 MB+ datasets)."""
    data = tmp_path / "data"
    _store_good(data)

    def no_hashing(*args, **kwargs):
        raise AssertionError("data list read a whole file")

    monkeypatch.setattr(fetch_module, "file_sha256", no_hashing)
    out = _list(capsys, data)
    assert "[yes] nsmc " in _row(out, "nsmc") and "[no ] imdb " in _row(out, "imdb")


def test_data_list_part_file_is_not_data(small_catalogue, tmp_path, capsys):
    data = tmp_path / "data"
    (data / "tinyshakespeare").mkdir(parents=True)
    (data / "tinyshakespeare/input.txt.123.abcdefgh.part").write_bytes(SHAKESPEARE)
    out = _list(capsys, data)
    assert "[no ] tinyshakespeare " in _row(out, "tinyshakespeare")
    assert "interrupted download" in out and "input.txt.123.abcdefgh.part" in out
    assert not is_present(catalogue.get_dataset("tinyshakespeare").files[0], data)


# --------------------------------------------------------------------------- fetch
class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def server(tmp_path, monkeypatch):
    """A local HTTP server on 127.0.0.1 serving tmp_path/www; yields (www_dir, base_url)."""
    www = tmp_path / "www"
    www.mkdir()
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=www))
    thread = threading.Thread(target=httpd.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    yield www, f"http://127.0.0.1:{httpd.server_port}/mirror"
    httpd.shutdown()
    httpd.server_close()


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda p: _truncate(p), id="truncated"),
        pytest.param(lambda p: p.write_bytes(b"\x1f\x8b\x08\x00garbage" * 9), id="corrupt"),
        pytest.param(lambda p: p.write_bytes(gzip.compress(b"id\tdocument\tlabel\n")), id="sha"),
    ],
)
def test_cli_fetch_downloads_damaged_file_again(
    small_catalogue, server, tmp_path, capsys, caplog, damage
):
    www, base = server
    _mirror(www / "mirror")
    data = tmp_path / "data"
    argv = ["data", "fetch", "nsmc", "--data-dir", str(data), "--mirror", base]
    assert cli.main(argv) == 0
    damaged = data / "nsmc/ratings_train.txt.gz"
    damage(damaged)
    intact_mtime = (data / "nsmc/ratings_test.txt.gz").stat().st_mtime_ns
    caplog.clear()
    assert cli.main(argv) == 0  # no --force
    assert gzip.decompress(damaged.read_bytes()) == NSMC_TRAIN
    assert (data / "nsmc/ratings_test.txt.gz").stat().st_mtime_ns == intact_mtime  # skipped
    assert f"{damaged} is damaged" in caplog.text
    assert [e.label for e in read_nsmc("train", data)] == [0, 1]
    assert not list(data.rglob("*.part"))


def test_fetch_sha256_mismatch_plain_file_from_local_folder(small_catalogue, tmp_path, capsys):
    mirror = _mirror(tmp_path / "mirror")
    data = tmp_path / "data"
    _store_good(data)
    stored = data / "tinyshakespeare/input.txt"
    stored.write_bytes(SHAKESPEARE.upper())  # same size, wrong sha256
    argv = ["data", "fetch", "tinyshakespeare", "--data-dir", str(data), "--mirror", str(mirror)]
    assert cli.main(argv) == 0
    assert stored.read_bytes() == SHAKESPEARE
    assert f"ok {stored}" in capsys.readouterr().out


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_fetch_removes_leftover_part_files(small_catalogue, tmp_path):
    mirror = _mirror(tmp_path / "mirror")
    data = tmp_path / "data"
    folder = data / "nsmc"
    folder.mkdir(parents=True)
    killed = folder / f"ratings_train.txt.gz.{_dead_pid()}.k1ll3d00.part"  # process gone
    old = folder / "ratings_test.txt.gz.oldname1.part"  # older name format, untouched 1 h
    running = folder / f"ratings_test.txt.gz.{os.getpid()}.running0.part"  # being written
    other = folder / "unrelated.part"
    for part in (killed, old, running, other):
        part.write_bytes(b"\x1f\x8b partial")
    an_hour_ago = time.time() - 3600
    os.utime(old, (an_hour_ago, an_hour_ago))
    fetch("nsmc", data_dir=data, base_url=str(mirror), progress=False)
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        ["ratings_test.txt.gz", "ratings_train.txt.gz", running.name, other.name]
    )
    os.utime(running, (an_hour_ago, an_hour_ago))  # stalled for an hour: a leftover too
    fetch("nsmc", data_dir=data, base_url=str(mirror), progress=False)  # both present: skip
    assert not running.exists() and other.exists()
    assert remove_stale_parts(folder / "ratings_train.txt.gz") == []


def test_check_file_statuses(small_catalogue, tmp_path):
    data = tmp_path / "data"
    file = catalogue.get_dataset("nsmc").files[0]
    assert [c.status for c in check_file(file, data)] == ["missing"]
    _store_good(data)
    assert check_file(file, data, verify=True)[0].status == "ok"
    _truncate(data / file.relpath, keep=0.9)
    check = check_file(file, data, verify=False)[0]
    assert (check.status, check.path) == ("bad", data / file.relpath)
    assert "truncated" in check.reason
    assert not is_present(file, data)  # no EOFError


# --------------------------------------------------------------------------- readers
def _one_line_error(excinfo, path: Path) -> str:
    message = str(excinfo.value)
    assert str(path) in message and "\n" not in message
    return message


def test_parallel_reader_truncated_gzip_is_data_error(tmp_path):
    folder = tmp_path / "multi30k"
    folder.mkdir()
    lines = "".join(f"sentence {i}\n" for i in range(2000)).encode()
    for lang in ("de", "en"):
        (folder / f"val.{lang}.gz").write_bytes(gzip.compress(lines))
    assert len(read_multi30k("val", data_dir=tmp_path)) == 2000
    _truncate(folder / "val.en.gz")
    with pytest.raises(DataError) as info:
        read_multi30k("val", data_dir=tmp_path)
    assert "truncated gzip file" in _one_line_error(info, folder / "val.en.gz")
    (folder / "val.de.gz").write_bytes(b"\x1f\x8b\x08\x00" + os.urandom(64))
    with pytest.raises(DataError) as info:
        read_parallel_files(folder / "val.de.gz", folder / "val.de.gz")
    _one_line_error(info, folder / "val.de.gz")


@pytest.mark.parametrize("name", ["nsmc/ratings_train.txt.gz", "user/table.csv.gz"])
def test_text_readers_truncated_gzip_is_data_error(tmp_path, name):
    path = tmp_path / name
    path.parent.mkdir()
    body = NSMC_TRAIN if name.startswith("nsmc") else b"text,label\n" + b"some text,1\n" * 5000
    path.write_bytes(gzip.compress(body))
    _truncate(path)
    with pytest.raises(DataError) as info:
        read_nsmc("train", tmp_path) if name.startswith("nsmc") else read_table(path)
    assert "truncated gzip file" in _one_line_error(info, path)


# --------------------------------------------------------------------------- long CSV fields
@pytest.fixture
def default_csv_limit():
    """Start from csv's default limit (another test may have raised it), restore it after."""
    before = csv.field_size_limit()
    csv.field_size_limit(131_072)
    yield
    csv.field_size_limit(before)


LONG = "가" * 100_000 + " 나" * 50_000  # 200,000 characters


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".csv.gz"])
def test_read_table_reads_200k_character_field(default_csv_limit, tmp_path, suffix):
    assert len(LONG) == 200_000
    sep = "\t" if suffix == ".tsv" else ","
    body = f"text{sep}label\n{LONG}{sep}1\nshort{sep}0\n".encode()
    path = tmp_path / f"train{suffix}"
    path.write_bytes(gzip.compress(body) if suffix.endswith(".gz") else body)
    examples = read_table(path)
    assert [len(e.text) for e in examples] == [200_000, 5] and examples[0].label == "1"
    assert len(read_texts(path)[0]) == 200_000


def test_read_chatbot_reads_200k_character_field(default_csv_limit, tmp_path):
    (tmp_path / "chatbot").mkdir()
    rows = [f"q{i},a{i},0" for i in range(40)] + [f'"{LONG}",answer,1']
    (tmp_path / "chatbot/ChatbotData.csv").write_text("Q,A,label\r\n" + "\r\n".join(rows) + "\r\n")
    pairs = [p for split in ("train", "validation", "test") for p in read_chatbot(split, tmp_path)]
    assert len(pairs) == 41 and any(len(p.src) == 200_000 for p in pairs)


# --------------------------------------------------------------------------- CR-only lines
def test_cr_only_line_endings_are_accepted(tmp_path):
    """Classic Mac files (lines end in a lone CR) read like their LF twins."""
    files = {
        "a.csv": b'text,label\r"two\rlines",1\rworld,0\r',
        "a.tsv": b"text\tlabel\rhello\t1\rworld\t0",
        "a.jsonl": b'{"text": "hello", "label": 1}\r{"text": "world", "label": 0}\r',
        "a.txt": b"hello\rworld\r",
    }
    for name, raw in files.items():
        (tmp_path / name).write_bytes(raw)
        (tmp_path / f"lf-{name}").write_bytes(raw.replace(b"\r", b"\n"))
    for name in ("a.csv", "a.tsv", "a.jsonl"):
        assert read_table(tmp_path / name) == read_table(tmp_path / f"lf-{name}"), name
        assert len(read_table(tmp_path / name)) == 2
    assert read_texts(tmp_path / "a.txt") == ["hello", "world"]
    nsmc = tmp_path / "nsmc"
    nsmc.mkdir()
    (nsmc / "ratings_train.txt.gz").write_bytes(gzip.compress(NSMC_TRAIN.replace(b"\n", b"\r")))
    assert [(e.text, e.label) for e in read_nsmc("train", tmp_path)] == [
        ("아 더빙.. 진짜 짜증나네요", 0),
        ("재밌다 강추", 1),
    ]


def test_lf_file_keeps_a_lone_cr_inside_a_line(tmp_path):
    """Only a file with no LF at all is taken as CR-only; elsewhere a CR stays text."""
    path = tmp_path / "a.csv"
    path.write_bytes(b'text,label\n"a\rb",1\nc,0\n')
    assert [e.text for e in read_table(path)] == ["a\rb", "c"]


def test_parallel_lines_break_only_at_cr_and_lf(tmp_path):
    """Aligned files stay aligned: U+2028, U+0085, form feed are text, not line breaks."""
    src, tgt = tmp_path / "src.txt", tmp_path / "tgt.txt"
    src.write_text("a\u2028b\rc\x85d\x0ce\r")  # CR-only, with odd characters inside lines
    tgt.write_text("one\ntwo\n")
    pairs = read_parallel_files(src, tgt)
    assert [p.src for p in pairs] == ["a\u2028b", "c\x85d\x0ce"]

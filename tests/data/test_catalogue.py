"""Tests for attnkit.data: paths, catalogue, fetch (against a local HTTP server), readers."""

from __future__ import annotations

import dataclasses
import functools
import gzip
import hashlib
import io
import json
import os
import stat
import tarfile
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from attnkit.core.errors import AttnkitError
from attnkit.data import (
    DataError,
    DatasetNotFoundError,
    Example,
    catalogue,
    dataset_path,
    download,
    fetch,
    get_dataset,
    is_present,
    list_datasets,
    load_text_classification,
    mirror_url,
    read_imdb,
    read_nsmc,
    read_table,
    resolve_data_dir,
    train_val_split,
)

SHARED = Path(
    os.environ.get("ATTNKIT_DATA") or Path(__file__).resolve().parents[3] / "shared" / "data"
)
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason="offline data copy not present")


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------------------- paths
def test_resolve_data_dir_order(monkeypatch, tmp_path):
    monkeypatch.delenv("ATTNKIT_DATA", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert resolve_data_dir() == Path.home() / ".cache" / "attnkit"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert resolve_data_dir() == tmp_path / "xdg" / "attnkit"
    monkeypatch.setenv("ATTNKIT_DATA", str(tmp_path / "env"))
    assert resolve_data_dir() == tmp_path / "env"
    assert resolve_data_dir(tmp_path / "arg") == tmp_path / "arg"


def test_not_found_message_is_one_helpful_line(tmp_path):
    with pytest.raises(DatasetNotFoundError) as info:
        dataset_path("nsmc", "train", tmp_path)
    message = str(info.value)
    assert "\n" not in message
    assert "'nsmc'" in message and "attnkit data fetch nsmc" in message
    assert "ATTNKIT_DATA" in message and "--data-dir" in message
    assert str(tmp_path / "nsmc" / "ratings_train.txt.gz") in message
    assert str(tmp_path / "nsmc" / "ratings_train.txt") in message
    assert isinstance(info.value, DataError) and isinstance(info.value, ValueError)


# --------------------------------------------------------------------------- catalogue
def test_catalogue_entries():
    names = [info.name for info in list_datasets()]
    assert {"nsmc", "imdb", "multi30k", "chatbot-ko", "tinyshakespeare"} <= set(names)
    for info in list_datasets():
        assert info.files and info.splits and info.license and info.language and info.task
        for file in info.files:
            assert file.url.startswith("https://") and len(file.sha256) == 64
    assert set(get_dataset("nsmc").splits) == {"train", "test", "unlabeled"}
    assert set(get_dataset("IMDB").splits) == {"train", "test", "unlabeled"}
    assert get_dataset("imdb").files[0].url.endswith("/aclImdb_v1.tar.gz")


def test_unknown_dataset_lists_known_names():
    with pytest.raises(DataError, match="known datasets: .*nsmc.*imdb"):
        get_dataset("wikitext")


def test_dataset_path_split_and_lang_errors(tmp_path):
    with pytest.raises(DataError, match="no split 'validation'.*train, test"):
        dataset_path("nsmc", "validation", tmp_path)
    with pytest.raises(DataError, match="pass lang"):
        dataset_path("multi30k", "train", tmp_path)


@needs_shared
def test_catalogue_checksums_match_offline_copy():
    """Every catalogued file is recognised as present and intact in the offline copy."""
    for info in list_datasets():
        for file in info.files:
            assert is_present(file, SHARED), (info.name, file.relpath)
    assert dataset_path("multi30k", "test", SHARED, lang="de").name == "test_2016_flickr.de.gz"


# --------------------------------------------------------------------------- fetch
class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep test output clean
        pass


@pytest.fixture
def server(tmp_path, monkeypatch):
    """A local HTTP server on 127.0.0.1 serving tmp_path/www; yields (www_dir, base_url)."""
    www = tmp_path / "www"
    www.mkdir()
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    monkeypatch.delenv("ATTNKIT_MIRROR", raising=False)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=www))
    thread = threading.Thread(target=httpd.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    yield www, f"http://127.0.0.1:{httpd.server_port}/mirror"
    httpd.shutdown()
    httpd.server_close()


def _serve(www: Path, name: str, data: bytes) -> None:
    (www / "mirror").mkdir(exist_ok=True)
    (www / "mirror" / name).write_bytes(data)


def _patch_dataset(monkeypatch, name: str, **file_changes) -> None:
    """Replace fields of every file of catalogued dataset ``name`` (per-file dicts by relpath)."""
    infos = []
    for info in catalogue.list_datasets():
        if info.name == name:
            files = tuple(
                dataclasses.replace(f, **file_changes.get(f.relpath, {})) for f in info.files
            )
            info = dataclasses.replace(info, files=files)
        infos.append(info)
    monkeypatch.setattr(catalogue, "_DATASETS", tuple(infos))


NSMC_TRAIN = (
    'id\tdocument\tlabel\n1\t아 더빙.. 진짜 짜증나네요\t0\n2\t"""최고"" 라고 함"\t1\n'
    "3\t\t1\n4\t재밌다 강추\t1\n"
).encode()
NSMC_TEST = b"id\tdocument\tlabel\n9\t\xeb\xb3\x84\xeb\xa1\x9c\t0\n"


def _nsmc_fixture(www: Path, monkeypatch) -> None:
    _serve(www, "ratings_train.txt", NSMC_TRAIN)
    _serve(www, "ratings_test.txt", NSMC_TEST)
    _patch_dataset(
        monkeypatch,
        "nsmc",
        **{
            "nsmc/ratings_train.txt.gz": {"sha256": sha(NSMC_TRAIN), "size": len(NSMC_TRAIN)},
            "nsmc/ratings_test.txt.gz": {"sha256": sha(NSMC_TEST), "size": len(NSMC_TEST)},
        },
    )


def test_fetch_success_stores_gzip_and_reads(server, tmp_path, monkeypatch):
    www, base = server
    _nsmc_fixture(www, monkeypatch)
    data = tmp_path / "data"
    paths = fetch("nsmc", data_dir=data, base_url=base, progress=False)
    assert paths == [data / "nsmc/ratings_train.txt.gz", data / "nsmc/ratings_test.txt.gz"]
    with gzip.open(paths[0], "rb") as fh:
        assert fh.read() == NSMC_TRAIN
    assert not list(data.rglob("*.part"))
    train = read_nsmc("train", data)
    assert [e.label for e in train] == [0, 1, 1]
    assert train[1].text == '"""최고"" 라고 함"'  # quoting=3: kept verbatim
    assert train.dropped == 1
    assert read_nsmc("test", data) == [Example("별로", 0)]


def test_fetch_uses_mirror_env(server, tmp_path, monkeypatch):
    www, base = server
    _nsmc_fixture(www, monkeypatch)
    monkeypatch.setenv("ATTNKIT_MIRROR", base + "/")
    assert len(fetch("nsmc", data_dir=tmp_path / "d", progress=False)) == 2


def test_fetch_checksum_mismatch_leaves_nothing(server, tmp_path, monkeypatch):
    www, base = server
    _nsmc_fixture(www, monkeypatch)
    _serve(www, "ratings_train.txt", NSMC_TRAIN + b"5\ttampered\t1\n")
    data = tmp_path / "data"
    with pytest.raises(DataError) as info:
        fetch("nsmc", data_dir=data, base_url=base, progress=False)
    message = str(info.value)
    assert "checksum mismatch" in message and sha(NSMC_TRAIN) in message
    assert sha(NSMC_TRAIN + b"5\ttampered\t1\n") in message
    assert not [p for p in data.rglob("*") if p.is_file()]


def test_download_mismatch_keeps_existing_dest(server, tmp_path):
    www, base = server
    _serve(www, "x.bin", b"new bytes")
    dest = tmp_path / "x.bin"
    dest.write_bytes(b"old")
    with pytest.raises(DataError, match="expected sha256"):
        download(f"{base}/x.bin", dest, sha(b"other"), progress=False)
    assert dest.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["www", "x.bin"]
    assert download(f"{base}/x.bin", dest, sha(b"new bytes"), progress=True) == dest
    assert dest.read_bytes() == b"new bytes"


def test_download_http_error(server, tmp_path):
    _, base = server
    with pytest.raises(DataError, match="HTTP 404"):
        download(f"{base}/missing.txt", tmp_path / "m.txt", "0" * 64, progress=False)
    assert not list(tmp_path.glob("m.txt*"))


def test_fetch_skips_present_files(server, tmp_path, monkeypatch):
    www, base = server
    _nsmc_fixture(www, monkeypatch)
    data = tmp_path / "data"
    fetch("nsmc", data_dir=data, base_url=base, progress=False)
    for file in (www / "mirror").iterdir():  # the server has nothing now: only a skip can pass
        file.unlink()
    assert len(fetch("nsmc", data_dir=data, base_url=base, progress=False)) == 2
    with pytest.raises(DataError, match="HTTP 404"):
        fetch("nsmc", data_dir=data, base_url=base, force=True, progress=False)
    assert read_nsmc("train", data).dropped == 1  # forced failure left the old files intact


def test_fetch_replaces_corrupted_file(server, tmp_path, monkeypatch):
    www, base = server
    _nsmc_fixture(www, monkeypatch)
    data = tmp_path / "data"
    fetch("nsmc", data_dir=data, base_url=base, progress=False)
    corrupt = data / "nsmc/ratings_test.txt.gz"
    corrupt.write_bytes(gzip.compress(b"id\tdocument\tlabel\n"))
    fetch("nsmc", data_dir=data, base_url=base, progress=False)
    assert gzip.decompress(corrupt.read_bytes()) == NSMC_TEST


def _tarball(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, text in files.items():
            data = text.encode("utf-8")
            member = tarfile.TarInfo(name)
            member.size = len(data)
            tar.addfile(member, io.BytesIO(data))
    return buffer.getvalue()


def test_fetch_imdb_converts_tarball(server, tmp_path, monkeypatch):
    www, base = server
    archive = _tarball(
        {
            "aclImdb/README": "not a review",
            "aclImdb/train/pos/10_9.txt": "Great!<br /><br />Loved it.",
            "aclImdb/train/neg/2_1.txt": "Awful\tfilm.",
            "aclImdb/train/neg/1_3.txt": "Boring, café scenes.",
            "aclImdb/train/unsup/5_0.txt": "unlabelled",
            "aclImdb/test/pos/0_10.txt": "Superb.",
            "aclImdb/test/neg/0_2.txt": "Bad.",
            "aclImdb/train/urls_pos.txt": "http://example.invalid",
        }
    )
    _serve(www, "aclImdb_v1.tar.gz", archive)
    outputs = tuple(
        dataclasses.replace(o, sha256=None) for o in get_dataset("imdb").files[0].outputs
    )
    _patch_dataset(
        monkeypatch,
        "imdb",
        **{"imdb/aclImdb_v1.tar.gz": {"sha256": sha(archive), "outputs": outputs}},
    )
    data = tmp_path / "data"
    paths = fetch("imdb", data_dir=data, base_url=base, progress=False)
    assert paths == [data / "imdb/train.jsonl.gz", data / "imdb/test.jsonl.gz"]
    assert sorted(p.name for p in (data / "imdb").iterdir()) == ["test.jsonl.gz", "train.jsonl.gz"]
    with gzip.open(paths[0], "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh]
    assert rows == [
        {"id": 1, "rating": 3, "label": 0, "text": "Boring, café scenes."},
        {"id": 2, "rating": 1, "label": 0, "text": "Awful\tfilm."},
        {"id": 10, "rating": 9, "label": 1, "text": "Great!<br /><br />Loved it."},
    ]
    train = read_imdb("train", data)
    assert train[2] == Example("Great!\n\nLoved it.", 1)
    assert read_imdb("train", data, keep_html=True)[2].text == rows[2]["text"]
    assert [e.label for e in read_imdb("test", data)] == [0, 1]
    (www / "mirror" / "aclImdb_v1.tar.gz").unlink()
    assert fetch("imdb", data_dir=data, base_url=base, progress=False) == paths  # skipped


def test_fetch_imdb_bad_archive_checksum(server, tmp_path, monkeypatch):
    www, base = server
    _serve(www, "aclImdb_v1.tar.gz", _tarball({"aclImdb/train/pos/1_8.txt": "x"}))
    data = tmp_path / "data"
    with pytest.raises(DataError, match="checksum mismatch"):
        fetch("imdb", data_dir=data, base_url=base, progress=False)
    assert not [p for p in data.rglob("*") if p.is_file()]


def test_mirror_url(tmp_path):
    url = "https://raw.githubusercontent.com/e9t/nsmc/abc/ratings_train.txt"
    assert mirror_url(url, "http://h:1/m/") == "http://h:1/m/ratings_train.txt"
    assert mirror_url(url, str(tmp_path)) == (tmp_path / "ratings_train.txt").as_uri()


def test_fetch_from_local_directory_mirror(tmp_path, monkeypatch):
    text = b"First Citizen:\nBefore we proceed any further, hear me speak.\n"
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "input.txt").write_bytes(text)
    _patch_dataset(
        monkeypatch, "tinyshakespeare", **{"tinyshakespeare/input.txt": {"sha256": sha(text)}}
    )
    (path,) = fetch("tinyshakespeare", tmp_path / "data", base_url=str(mirror), progress=False)
    assert path.read_bytes() == text


# --------------------------------------------------------------------------- readers
def test_nsmc_plain_txt_and_bad_header(tmp_path):
    (tmp_path / "nsmc").mkdir()
    (tmp_path / "nsmc/ratings_test.txt").write_bytes(NSMC_TEST)
    assert read_nsmc("test", tmp_path) == [Example("별로", 0)]
    (tmp_path / "nsmc/ratings_train.txt").write_text("a,b,c\n")
    with pytest.raises(DataError, match="header"):
        read_nsmc("train", tmp_path)


def test_read_table_csv(tmp_path):
    path = tmp_path / "chat.csv"
    path.write_text(
        '\ufeffQ,A,label\n12시 땡!,하루가 또 가네요.,0\n"쉼표, 있음","여러\n줄",2   \n ,빈칸,1\n',
        encoding="utf-8",
    )
    examples = read_table(path, text_column="Q")
    assert examples == [Example("12시 땡!", "0"), Example("쉼표, 있음", "2")]
    assert examples.dropped == 1
    assert read_table(path, text_column="A", label_column=None)[1] == Example("여러\n줄", None)


def test_read_table_tsv_and_jsonl_gz(tmp_path):
    tsv = tmp_path / "a.tsv"
    tsv.write_text('text\tlabel\n"quoted" text\tpos\n', encoding="utf-8")
    assert read_table(tsv) == [Example('"quoted" text', "pos")]
    jsonl = tmp_path / "b.jsonl.gz"
    rows = [{"sentence": "좋다", "y": 1}, {"sentence": "싫다", "y": 0}]
    jsonl.write_bytes(gzip.compress("\n".join(json.dumps(r) for r in rows).encode()))
    assert read_table(jsonl, "sentence", "y") == [Example("좋다", "1"), Example("싫다", "0")]
    custom = tmp_path / "c.data"
    custom.write_text("text,label\nhi,1\n")
    assert read_table(custom, fmt="csv") == [Example("hi", "1")]


def test_read_table_missing_column_names_columns(tmp_path):
    path = tmp_path / "a.csv"
    path.write_text("sentence,label\nhi,1\n")
    with pytest.raises(DataError) as info:
        read_table(path)
    assert "no column 'text'" in str(info.value) and "sentence, label" in str(info.value)
    jsonl = tmp_path / "a.jsonl"
    jsonl.write_text('{"text": "a", "label": 1}\n{"text": "b"}\n')
    with pytest.raises(DataError, match="line 2: no key 'label'"):
        read_table(jsonl)


def test_read_table_bad_bytes_names_line(tmp_path):
    path = tmp_path / "latin.csv"
    path.write_bytes(b"text,label\nok,1\n" + "café,0\n".encode("latin-1"))
    with pytest.raises(DataError) as info:
        read_table(path)
    assert str(path) in str(info.value) and "line 3" in str(info.value)
    assert "UTF-8" in str(info.value)


@pytest.mark.parametrize(
    ("content", "pattern"),
    [
        (b"", "is empty"),
        (b"text,label\n", "header but no rows"),
        (b"text,label\nhi,1,extra\n", "line 2: 3 fields, but the header has 2"),
        (b"text,label\nhi,\n", "line 2: empty label"),
    ],
)
def test_read_table_errors(tmp_path, content, pattern):
    path = tmp_path / "x.csv"
    path.write_bytes(content)
    with pytest.raises(DataError, match=pattern):
        read_table(path)


def test_read_table_format_errors(tmp_path):
    with pytest.raises(DataError, match="file not found"):
        read_table(tmp_path / "nope.csv")
    (tmp_path / "x.xlsx").write_text("x")
    with pytest.raises(DataError, match="fmt="):
        read_table(tmp_path / "x.xlsx")
    (tmp_path / "bad.jsonl").write_text('{"text": "a", "label": 1}\n{oops\n')
    with pytest.raises(DataError, match="line 2: invalid JSON"):
        read_table(tmp_path / "bad.jsonl")


def test_load_text_classification_dispatch(tmp_path):
    (tmp_path / "nsmc").mkdir()
    (tmp_path / "nsmc/ratings_test.txt.gz").write_bytes(gzip.compress(NSMC_TEST))
    assert load_text_classification("nsmc", "test", data_dir=tmp_path) == [Example("별로", 0)]
    for split in ("train", "test"):
        (tmp_path / f"{split}.csv").write_text(f"text,label\n{split} text,a\n")
    pattern = str(tmp_path / "{split}.csv")
    assert load_text_classification(pattern, "test")[0].text == "test text"
    mapping = {"train": str(tmp_path / "train.csv")}
    assert load_text_classification(mapping, "train")[0].text == "train text"
    with pytest.raises(DataError, match="no file for split 'test'"):
        load_text_classification(mapping, "test")
    with pytest.raises(DataError, match="neither a text classification dataset"):
        load_text_classification("nope", "train")
    with pytest.raises(DataError, match=r"'multi30k' is neither .* \(nsmc, imdb\)"):
        load_text_classification("multi30k", "train")  # (a recipe names its kind: see below)


def test_train_val_split_deterministic():
    items = list(range(100))
    train, val = train_val_split(items, 0.1, seed=3)
    assert (train, val) == train_val_split(items, 0.1, seed=3)
    assert len(val) == 10 and sorted(train + val) == items
    assert val == sorted(val) and train == sorted(train)
    assert train_val_split(items, 0.1, seed=4)[1] != val
    assert len(train_val_split([1, 2], 0.01, seed=0)[1]) == 1
    with pytest.raises(ValueError):
        train_val_split(items, 1.0, seed=0)


def test_train_val_split_last_keeps_neighbours_together():
    """how="last": the last share of each label in file order (IMDB: whole movies held out)."""
    rows = [("neg", i) for i in range(40)] + [("pos", i) for i in range(60)]  # sorted by label
    train, val = train_val_split(rows, 0.1, how="last", key=lambda r: r[0])
    assert val == [("neg", i) for i in range(36, 40)] + [("pos", i) for i in range(54, 60)]
    assert sorted(train + val) == rows and train == sorted(train) and len(train) == 90
    assert train_val_split(rows, 0.1, seed=5, how="last", key=lambda r: r[0])[1] == val
    assert train_val_split(list(range(10)), 0.2, how="last") == (list(range(8)), [8, 9])
    assert train_val_split([1, 2], 0.01, how="last") == ([1], [2])  # at least one each
    assert train_val_split([1, 2], 0.9, how="last") == ([1], [2])
    with pytest.raises(ValueError, match="random or last"):
        train_val_split(rows, 0.1, how="first")


@pytest.mark.slow
@needs_shared
def test_offline_copy_readers():
    train = read_nsmc("train", SHARED)
    assert len(train) == 149_995 and train.dropped == 5
    assert train[0] == Example("아 더빙.. 진짜 짜증나네요 목소리", 0)
    assert sum(e.label for e in train) == 74_827 - 2  # two of the 5 empty rows are positive
    test = read_nsmc("test", SHARED)
    assert len(test) == 49_997 and test.dropped == 3
    chat = read_table(SHARED / "chatbot/ChatbotData.csv", text_column="Q")
    assert len(chat) == 11_823 and {e.label for e in chat} == {"0", "1", "2"}


def test_fetch_never_reads_or_replaces_what_is_not_a_data_file(server, tmp_path, monkeypatch):
    """The output-path guard for downloads: a FIFO in a data file's place is refused before
    anything reads it (a read would block), a link out of the data folder is not replaced."""
    www, base = server
    _nsmc_fixture(www, monkeypatch)
    data = tmp_path / "data"
    (data / "nsmc").mkdir(parents=True)
    fifo = data / "nsmc" / "ratings_train.txt.gz"
    os.mkfifo(fifo)
    with pytest.raises(DataError, match="it is not a regular file"):
        fetch("nsmc", data_dir=data, base_url=base, progress=False)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    fifo.unlink()
    outside = tmp_path / "elsewhere.gz"
    outside.write_bytes(b"not nsmc")
    fifo.symlink_to(outside)  # damaged (wrong checksum): would be downloaded again
    with pytest.raises(AttnkitError, match="outside its folder"):
        fetch("nsmc", data_dir=data, base_url=base, progress=False)
    assert outside.read_bytes() == b"not nsmc" and fifo.is_symlink()

"""Output paths: a figure (--explain, --show-attention, plot -o) that cannot be written at
the path given is one `attnkit: error:` line before any work, missing folders are not made,
figures are written atomically; train --out at a file is a clean error."""

from __future__ import annotations

import os

import matplotlib.figure
import pytest
from test_seq2seq import reversal_pairs, s2s_recipe, write_tsv

from attnkit import train
from attnkit.app.cli import main
from attnkit.runtime.viz import plot_positional_encoding
from attnkit.tasks.run_config import RunConfig
from conftest import make_sentiment_rows, tiny_recipe, write_csv


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One-step runs: a Transformer classifier and a Transformer translator."""
    root = tmp_path_factory.mktemp("outputs")
    write_csv(root / "train.csv", make_sentiment_rows(40, seed=0))
    write_csv(root / "test.csv", make_sentiment_rows(8, seed=1))
    write_tsv(root / "train.tsv", reversal_pairs(40, 0))
    write_tsv(root / "val.tsv", reversal_pairs(4, 1))
    write_tsv(root / "test.tsv", reversal_pairs(4, 2))
    mt = s2s_recipe(root)
    mt["training"].update(max_steps=1, eval_every=1)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(
            "attnkit.runtime.viz.draw_run_curves", lambda run: run.curves_path
        )  # not tested here
        for name, recipe in (("clf", tiny_recipe(root, epochs=1, max_steps=1)), ("mt", mt)):
            train(RunConfig.from_dict(recipe), out=root / name, log=lambda *a: None)
    return {"clf": str(root / "clf"), "mt": str(root / "mt")}


def _run(argv, capsys):
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


def _figure_argv(runs, verb: str, png) -> list[str]:
    if verb == "explain":
        return ["predict", runs["clf"], "great movie", "--explain", str(png)]
    return ["translate", runs["mt"], "red dog", "--show-attention", str(png)]


def _bad_paths(tmp_path):
    """(path, expected message) for each place a figure cannot go."""
    (tmp_path / "file.txt").write_text("not a folder")
    (tmp_path / "folder").mkdir()
    return {
        "a folder": (tmp_path / "folder", f"{tmp_path / 'folder'} is a folder"),
        "a missing folder": (
            tmp_path / "missing" / "x.png",
            f"folder {tmp_path / 'missing'} does not exist",
        ),
        "under a file": (
            tmp_path / "file.txt" / "x.png",
            f"{tmp_path / 'file.txt'} is a file, not a folder",
        ),
        "deeper under a file": (
            tmp_path / "file.txt" / "sub" / "x.png",
            f"{tmp_path / 'file.txt'} is a file, not a folder",
        ),
        "not an image format": (tmp_path / "x.bogus", ".bogus is not an image format"),
    }


CASES = [
    "a folder",
    "a missing folder",
    "under a file",
    "deeper under a file",
    "not an image format",
]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("verb", ["explain", "show-attention"])
def test_figure_that_cannot_be_written_is_one_error_before_any_work(
    runs, capsys, tmp_path, verb, case
):
    png, message = _bad_paths(tmp_path)[case]
    before = sorted(p.name for p in tmp_path.rglob("*"))
    code, out, err = _run(_figure_argv(runs, verb, png), capsys)
    assert code == 2 and out == ""  # nothing predicted or translated
    assert err.startswith("attnkit: error: ") and err.count("\n") == 1
    assert message in err
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # no folder made


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root ignores chmod")
@pytest.mark.parametrize("verb", ["explain", "show-attention"])
def test_figure_in_a_read_only_folder(runs, capsys, tmp_path, verb):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        code, out, err = _run(_figure_argv(runs, verb, folder / "x.png"), capsys)
    finally:
        folder.chmod(0o700)
    assert code == 2 and out == "" and "is not writable" in err and err.count("\n") == 1


@pytest.mark.parametrize("verb", ["explain", "show-attention"])
def test_figure_is_written(runs, capsys, tmp_path, verb):
    png = tmp_path / "x.png"
    code, _, err = _run(_figure_argv(runs, verb, png), capsys)
    assert code == 0 and png.read_bytes()[:4] == b"\x89PNG" and f"wrote {png}" in err
    assert [p.name for p in tmp_path.iterdir()] == ["x.png"]


@pytest.mark.parametrize("kind", ["positional-encoding", "curves"])
def test_plot_into_a_missing_folder_or_a_folder(runs, capsys, tmp_path, kind):
    first = ["plot", kind]
    if kind == "positional-encoding":
        first += ["--max-len", "4", "--d-model", "4"]
    else:
        (tmp_path / "metrics.jsonl").write_text('{"step": 1, "train_loss": 1.0}\n')
        first.append(str(tmp_path))
    code, out, err = _run([*first, "-o", str(tmp_path / "missing" / "pe.png")], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert f"folder {tmp_path / 'missing'} does not exist" in err
    assert not (tmp_path / "missing").exists()
    code, out, err = _run([*first, "-o", str(tmp_path)], capsys)
    assert code == 2 and f"{tmp_path} is a folder" in err and err.count("\n") == 1


def test_train_out_at_a_file(capsys, tmp_path, tiny_config):
    target = tmp_path / "run.txt"
    target.write_text("keep me")
    for out, message in (
        (target, f"--out {target} is a file, not a folder"),
        (target / "run", f"--out {target / 'run'}: {target} is a file, not a folder"),
    ):
        code, _, err = _run(["train", str(tiny_config), "--out", str(out)], capsys)
        assert code == 2 and err == f"attnkit: error: {message}\n"
    code, _, err = _run(["train", "--resume", "--out", str(target)], capsys)
    assert code == 2 and "is a file, not a folder" in err and err.count("\n") == 1
    assert target.read_text() == "keep me"


# ----------------------------------------------------------------------------- atomic
def test_plot_write_is_atomic_with_a_unique_temp_name(tmp_path):
    png = tmp_path / "pe.png"
    other = tmp_path / ".pe.png.tmp"  # e.g. another process's temporary file
    other.write_text("someone else's")
    plot_positional_encoding(4, 4, png)
    plot_positional_encoding(5, 4, png)  # overwrite
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert other.read_text() == "someone else's"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".pe.png.tmp", "pe.png"]
    umask = os.umask(0)
    os.umask(umask)
    assert png.stat().st_mode & 0o777 == 0o666 & ~umask  # not the temp file's 0600


def test_failed_plot_write_keeps_the_old_file(tmp_path, capsys, monkeypatch):
    png = tmp_path / "pe.png"
    plot_positional_encoding(4, 4, png)
    old = png.read_bytes()

    def disk_full(self, fname, **kwargs):
        fname.write(b"\x89PNG half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", disk_full)
    code, out, err = _run(["plot", "positional-encoding", "-o", str(png)], capsys)
    assert code == 2 and out == ""
    assert err == f"attnkit: error: cannot write {png}: No space left on device\n"
    assert png.read_bytes() == old
    assert [p.name for p in tmp_path.iterdir()] == ["pe.png"]  # no temporary file left


def test_viz_library_does_not_make_folders(tmp_path):
    from attnkit.core.errors import InputError

    with pytest.raises(InputError, match="does not exist"):
        plot_positional_encoding(4, 4, tmp_path / "a" / "b" / "pe.png")
    assert not (tmp_path / "a").exists()

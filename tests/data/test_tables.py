"""Your data in memory: ``attnkit.train(recipe, data=...)`` with a pandas DataFrame, a
``datasets.Dataset`` / ``DatasetDict``, a list of dicts or a dict of them by split, for
classify (texts and sentence pairs), translate and tag; the run keeps its copy (RUN/data)
and a record of it, so evaluate, calibrate and resume work from anywhere and after the run
folder is moved; each mistake is one line (attnkit.data.tables). The training runs are
tiny and shared by module-scoped fixtures."""

from __future__ import annotations

import json
import random
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml

import attnkit
from attnkit.app.cli import main
from attnkit.core.errors import AttnkitError, DataError
from attnkit.data.tables import render_tables, resolve_in_run
from attnkit.tasks.run_config import load_config
from conftest import make_sentiment_rows, tiny_recipe

pd = pytest.importorskip("pandas")
datasets = pytest.importorskip("datasets")

QUIET = {"log": lambda *_: None}


def _classify_recipe(tmp: Path, **data) -> Path:
    """The tiny classify recipe of conftest, for data.name: file without files (data=
    supplies them), one epoch."""
    recipe = tiny_recipe(tmp, epochs=1)
    recipe["data"] = {"name": "file", "val_fraction": 0.1, "max_len": 16, **data}
    path = tmp / "classify.yaml"
    path.write_text(yaml.safe_dump(recipe), encoding="utf-8")
    return path


def _train(recipe: Path, out: Path, data, **kw):
    return attnkit.train(recipe, out=out, data=data, **QUIET, **kw)


# ----------------------------------------------------------------------------- classify
@pytest.fixture(scope="module")
def df_run(tmp_path_factory) -> tuple[Path, object]:
    """A classify run trained on one DataFrame (validation held out of it)."""
    root = tmp_path_factory.mktemp("df")
    df = pd.DataFrame(make_sentiment_rows(200, seed=0))
    _train(_classify_recipe(root), root / "run", df)
    return root / "run", df


@pytest.mark.slow
def test_dataframe_trains_records_and_evaluates_after_a_move(
    df_run, tmp_path: Path, monkeypatch, capsys
) -> None:
    run, df = df_run
    saved = json.loads((run / "config.json").read_text(encoding="utf-8"))
    record = saved["trained_on"]
    assert record["source"] == "DataFrame" and record["kind"] == "labelled"
    assert record["rows"] == {"train": 200} and set(record["fingerprint"]) == {"train"}
    assert saved["data"]["name"] == "file" and saved["data"]["train"] == "data/train.jsonl"
    lines = (run / "data" / "train.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == df.to_dict("records")
    assert not [p for p in (run / "data").iterdir() if p.name.startswith(".")]
    moved = tmp_path / "elsewhere" / "run"
    shutil.copytree(run, moved)
    before = attnkit.evaluate(run, split="train")
    after = attnkit.evaluate(moved, split="train")
    assert after["accuracy"] == before["accuracy"] and len(lines) == sum(
        map(sum, after["confusion_matrix"])
    )
    assert attnkit.load(moved).config.data.train == str(moved / "data" / "train.jsonl")
    report = attnkit.calibrate(moved, **QUIET)  # on the validation split held out of it
    assert report["temperature"] > 0
    monkeypatch.chdir(tmp_path / "elsewhere")  # the CLI, from another folder
    assert main(["evaluate", "run", "--split", "train"]) in (0, None)
    assert f"{after['accuracy']:.4f}" in capsys.readouterr().out
    exported = attnkit.export(moved, tmp_path / "int8", fmt="attnkit", quantize="int8")
    assert attnkit.evaluate(exported, split="train")["confusion_matrix"]  # its own copy


@pytest.mark.slow
def test_resume_checks_the_data_is_the_same(df_run, tmp_path: Path) -> None:
    run, df = df_run
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    attnkit.train(out=copy, resume=True, data=df.copy(), **QUIET)  # same rows: continues
    attnkit.train(out=copy, resume=True, **QUIET)  # without data=: the run's own copy
    changed = df.copy()
    changed.loc[3, "text"] = "something else entirely"
    with pytest.raises(DataError, match=r"data= is not what .* trained on: its train split"):
        attnkit.train(out=copy, resume=True, data=changed, **QUIET)


@pytest.mark.slow
def test_dataset_with_classlabel_labels(tmp_path: Path) -> None:
    rows = [
        {"text": r["text"], "label": int(r["label"] == "pos")} for r in make_sentiment_rows(200, 0)
    ]
    features = datasets.Features(
        {"text": datasets.Value("string"), "label": datasets.ClassLabel(names=["neg", "pos"])}
    )
    ds = datasets.Dataset.from_list(rows, features=features)
    _train(_classify_recipe(tmp_path), tmp_path / "run", ds)
    saved = json.loads((tmp_path / "run" / "config.json").read_text(encoding="utf-8"))
    assert saved["trained_on"]["source"] == "datasets.Dataset"
    assert saved["labels"] == ["neg", "pos"]  # the ClassLabel's names, not 0 / 1
    report = attnkit.evaluate(tmp_path / "run", split="train")
    assert report["accuracy"] >= 0 and len(report["confusion_matrix"]) == 2


@pytest.mark.slow
def test_datasetdict_and_list_of_dicts_splits(tmp_path: Path) -> None:
    dd = datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_list(make_sentiment_rows(200, 0)),
            "validation": datasets.Dataset.from_list(make_sentiment_rows(40, 1)),
            "test": datasets.Dataset.from_list(make_sentiment_rows(30, 2)),
        }
    )
    recipe = _classify_recipe(tmp_path)
    _train(recipe, tmp_path / "dd", dd)
    record = json.loads((tmp_path / "dd" / "config.json").read_text())["trained_on"]
    assert record["source"] == "datasets.DatasetDict"
    assert record["rows"] == {"train": 200, "validation": 40, "test": 30}
    for split, n in (("validation", 40), ("test", 30)):
        report = attnkit.evaluate(tmp_path / "dd", split=split)
        assert sum(map(sum, report["confusion_matrix"])) == n
    # a list of dicts, one table: the first rows only
    _train(recipe, tmp_path / "list", make_sentiment_rows(120, 3))
    record = json.loads((tmp_path / "list" / "config.json").read_text())["trained_on"]
    assert record["source"] == "list" and record["rows"] == {"train": 120}
    assert attnkit.evaluate(tmp_path / "list", split="train")["accuracy"] >= 0


@pytest.mark.slow
def test_sentence_pairs_from_a_list_of_dicts(tmp_path: Path) -> None:
    rng = random.Random(0)
    words = ["cat", "dog", "sun", "moon", "tree", "car"]
    rows = []
    for _ in range(120):
        a = rng.choice(words)
        b = a if rng.random() < 0.5 else rng.choice(words)
        rows.append({"premise": f"the {a}", "hypothesis": f"a {b}", "same": str(a == b)})
    recipe = tiny_recipe(tmp_path, epochs=1)
    recipe["data"] = {"name": "file", "text_column": "premise", "pair_column": "hypothesis",
                      "label_column": "same", "max_len": 16}  # fmt: skip
    recipe["model"] = {"arch": "bert-classifier", "d_model": 32, "num_heads": 2, "d_ff": 64,
                       "num_layers": 1}  # fmt: skip
    (tmp_path / "pairs.yaml").write_text(yaml.safe_dump(recipe), encoding="utf-8")
    _train(tmp_path / "pairs.yaml", tmp_path / "run", {"train": rows, "test": rows[:20]})
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["pairs"] is True and saved["trained_on"]["kind"] == "pairs"
    assert sum(map(sum, attnkit.evaluate(tmp_path / "run")["confusion_matrix"])) == 20


# ----------------------------------------------------------------------------- seq2seq, tag
@pytest.mark.slow
def test_translate_from_a_dataframe(tmp_path: Path) -> None:
    rng = random.Random(0)
    words = ["red", "blue", "green", "cat", "dog", "sun"]
    sents = [rng.choices(words, k=rng.randint(2, 4)) for _ in range(80)]
    df = pd.DataFrame({"de": [" ".join(s) for s in sents],
                       "en": [" ".join(reversed(s)) for s in sents]})  # fmt: skip
    recipe = {
        "task": "translate",
        "data": {"name": "file", "max_len": 10},
        "tokenizer": {"kind": "wordpiece", "vocab_size": 60, "min_frequency": 1},
        "model": {"arch": "transformer", "d_model": 32, "num_heads": 2, "d_ff": 64,
                  "num_layers": 1, "dropout": 0.0},
        "training": {"max_steps": 6, "eval_every": 6, "batch_size": 16, "lr": 5e-3,
                     "log_every": 3, "progress": False, "num_threads": 1},
    }  # fmt: skip
    (tmp_path / "mt.yaml").write_text(yaml.safe_dump(recipe), encoding="utf-8")
    _train(tmp_path / "mt.yaml", tmp_path / "run", {"train": df, "test": df.head(8)})
    assert (tmp_path / "run" / "data" / "test.tsv").read_text().splitlines()[0] == (
        f"{df.de[0]}\t{df.en[0]}"
    )
    report = attnkit.evaluate(tmp_path / "run", split="test")
    assert "bleu" in report


@pytest.mark.slow
def test_tag_from_a_dataset_with_classlabel_tags(tmp_path: Path) -> None:
    names = ["O", "B-PER", "I-PER", "B-LOC"]
    rng = random.Random(0)
    rows = []
    for _ in range(80):
        tokens, tags = ["in", rng.choice(["Paris", "Rome"])], [0, 3]
        tokens += ["met", rng.choice(["John", "Mary"]), "Kim"]
        tags += [0, 1, 2]
        rows.append({"tokens": tokens, "ner_tags": tags})
    features = datasets.Features(
        {"tokens": datasets.List(datasets.Value("string")),
         "ner_tags": datasets.List(datasets.ClassLabel(names=names))}
    )  # fmt: skip
    ds = datasets.Dataset.from_list(rows, features=features)
    recipe = {
        "task": "tag",
        "data": {"name": "file", "max_len": 16},
        "tokenizer": {"kind": "wordpiece", "vocab_size": 80, "min_frequency": 1},
        "model": {"arch": "bert-tagger", "d_model": 32, "num_heads": 2, "d_ff": 64,
                  "num_layers": 1},
        "training": {"max_steps": 6, "eval_every": 6, "batch_size": 16, "lr": 5e-3,
                     "log_every": 3, "progress": False, "num_threads": 1},
    }  # fmt: skip
    (tmp_path / "tag.yaml").write_text(yaml.safe_dump(recipe), encoding="utf-8")
    _train(tmp_path / "tag.yaml", tmp_path / "run", {"train": ds, "test": ds.select(range(8))})
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert set(saved["labels"]) <= set(names) and "B-LOC" in saved["labels"]
    first = (tmp_path / "run" / "data" / "train.conll").read_text().split("\n\n")[0]
    assert first.splitlines()[1].endswith("\tB-LOC")
    assert "f1" in json.dumps(attnkit.evaluate(tmp_path / "run", split="test"))


# ----------------------------------------------------------------------------- fast checks
class _Cfg:
    """Data settings as a recipe has them (the columns, the languages)."""

    text_column, pair_column, label_column = "text", None, "label"
    src_lang, tgt_lang = "de", "en"


def test_tables_render_as_the_files_readers_read() -> None:
    df = pd.DataFrame({"text": ["good", None, 3], "label": [1, 0, 1], "extra": [1, 2, 3]})
    rendered = render_tables(df, "labelled", _Cfg())
    assert rendered.files["train"][1].splitlines() == [
        '{"text": "good", "label": "1"}', '{"text": "", "label": "0"}',
        '{"text": "3", "label": "1"}',
    ]  # fmt: skip
    same = render_tables(df.to_dict("records"), "labelled", _Cfg()).record
    assert same["fingerprint"] == rendered.record["fingerprint"]  # the content, not the type
    other = render_tables(df.iloc[::-1], "labelled", _Cfg()).record
    assert other["fingerprint"] != rendered.record["fingerprint"]
    features = datasets.Features(
        {"text": datasets.Value("string"), "label": datasets.ClassLabel(names=["neg", "pos"])}
    )
    ds = datasets.Dataset.from_list([{"text": "fine", "label": 1}], features=features)
    assert render_tables(ds, "labelled", _Cfg()).files["train"][1] == (
        '{"text": "fine", "label": "pos"}\n'
    )
    unlabelled = datasets.Dataset.from_list([{"text": "?", "label": -1}], features=features)
    with pytest.raises(DataError, match=r"row 0: label -1 in column 'label' is not a class"):
        render_tables({"train": ds, "test": unlabelled}, "labelled", _Cfg())
    hf = [{"translation": {"de": "ein Hund", "en": "a dog", "fr": "un chien"}}]
    assert render_tables(hf, "parallel", _Cfg()).files["train"][1] == "ein Hund\ta dog\n"


def test_run_paths_resolve_inside_the_run_only(tmp_path: Path) -> None:
    cfg = _Cfg()
    resolve_in_run(cfg, {"files": {"train": "data/train.jsonl"}}, tmp_path)
    assert cfg.train == str(tmp_path / "data" / "train.jsonl")
    for bad in ("../x.jsonl", "/etc/passwd", "data/../../x", "other/train.jsonl"):
        with pytest.raises(DataError, match="bad file"):
            resolve_in_run(cfg, {"files": {"train": bad}}, tmp_path)


ERRORS = [
    (pd.DataFrame({"review": ["a"], "stars": [1]}),
     r"^data: no column 'text' \(data.text_column\); columns are: review, stars$"),
    ([{"text": ["a", "list"], "label": "x"}], r"^data row 0: column 'text' holds a list, not text$"),
    ([{"text": {"a": 1}, "label": "x"}], r"holds a dict, not text"),
    ([{"text": "ok", "label": "x"}, {"text": "no label"}],
     r"^data row 1 has no column 'label' \(its keys: text\)$"),
    ([{"text": "ok", "label": None}], r"^data row 0: empty label in column 'label'$"),
    (pd.DataFrame({"text": [], "label": []}), r"^data is empty \(no rows\)$"),
    ([], r"^data is empty \(no rows\)$"),
    ({"train": [{"text": "a", "label": "x"}], "dev": []},
     r"^data= has a split 'dev'; a dict of splits has the keys train, validation, test: pass "
     r"only those \(data=\{'train': data\['train'\]\}\)$"),  # e.g. IMDB's 'unsupervised'
    ({"dev": []}, r"^data= has a split 'dev'; .* \(a table of columns: pass a DataFrame"),
    ({"test": [{"text": "a", "label": "x"}]}, r"^data= has no 'train' split \(it has test\)$"),
    ({}, r"^data= is an empty dict"),
    (42, r"^data= got a int; give a pandas DataFrame, a datasets.Dataset or DatasetDict"),
    ([1, 2], r"^data row 0 is a int, not a dict"),
    (pd.DataFrame([["a", "b", "x"]], columns=["text", "text", "label"]),
     r"^data has two columns named 'text': rename or drop one$"),
]  # fmt: skip


@pytest.mark.parametrize(("data", "message"), ERRORS)
def test_each_mistake_is_one_line_and_writes_nothing(data, message, tmp_path: Path) -> None:
    recipe = _classify_recipe(tmp_path)
    with pytest.raises(AttnkitError, match=message) as err:
        _train(recipe, tmp_path / "run", data)
    assert "\n" not in str(err.value)
    assert not (tmp_path / "run").exists()


def test_task_and_kind_mistakes(tmp_path: Path) -> None:
    mt = [{"q": "hi", "a": "hello"}]
    with pytest.raises(DataError, match=r"^data: no column 'de' \(data.src_lang\); columns"):
        render_tables(mt, "parallel", _Cfg())
    with pytest.raises(DataError, match=r"row 0: column 'q' holds a tab or line break"):
        cfg = _Cfg()
        cfg.src_lang, cfg.tgt_lang = "q", "a"
        render_tables([{"q": "two\nlines", "a": "x"}], "parallel", cfg)
    tagged = [{"tokens": ["John", "Kim"], "tags": [1, 2]}]
    with pytest.raises(DataError, match=r"row 0: column 'tags' holds tag ids \(1\); give tag"):
        render_tables(tagged, "tagged", _Cfg())
    with pytest.raises(DataError, match=r"^data row 0: 2 tokens but 1 tags$"):
        render_tables([{"tokens": ["a", "b"], "tags": ["O"]}], "tagged", _Cfg())
    with pytest.raises(DataError, match=r"row 0: tag 'PER' is not O, B-TYPE or I-TYPE"):
        render_tables([{"words": ["a"], "ner_tags": ["PER"]}], "tagged", _Cfg())
    with pytest.raises(DataError, match=r"column 'tokens' holds a str, not a list"):
        render_tables([{"tokens": "a b", "tags": ["O", "O"]}], "tagged", _Cfg())
    lm = tmp_path / "lm.yaml"
    lm.write_text(yaml.safe_dump({"task": "lm", "data": {"name": "file"}}), encoding="utf-8")
    with pytest.raises(DataError, match=r"^task lm reads text: data= trains the tasks that"):
        attnkit.train(lm, out=tmp_path / "run", data=[{"text": "x"}], **QUIET)
    assert not (tmp_path / "run").exists()


def test_a_recipe_object_and_file_paths(tmp_path: Path) -> None:
    """A RunConfig is not changed by data=; data= may also name files (no copy made)."""
    cfg = load_config(_classify_recipe(tmp_path, train="x.csv"))
    with pytest.raises(DataError, match="data row 0: column 'text' holds a list"):
        attnkit.train(cfg, out=tmp_path / "run", data=[{"text": [1], "label": "a"}], **QUIET)
    assert cfg.data.train == "x.csv"
    with pytest.raises(DataError, match="no-such.csv"):
        attnkit.train(cfg, out=tmp_path / "run", data=tmp_path / "no-such.csv", **QUIET)


def test_a_failure_after_staging_leaves_nothing(tmp_path: Path, monkeypatch) -> None:
    """One class only: refused once the staged data is read, and neither the run folder
    nor the staging folder is left."""
    staging = tmp_path / "tmp"
    staging.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(staging))
    rows = [{"text": f"text {i}", "label": "x"} for i in range(10)]
    with pytest.raises(DataError, match="the training data has only one class"):
        _train(_classify_recipe(tmp_path), tmp_path / "run", rows)
    assert not (tmp_path / "run").exists() and not list(staging.iterdir())


def test_file_paths_are_recorded_absolute(tmp_path: Path, monkeypatch) -> None:
    """data= naming files relative to the current folder: the run reads them from any
    folder (evaluate, resume and the explorer run elsewhere)."""
    from attnkit.app.api import _stage_tables

    (tmp_path / "train.csv").write_text("text,label\ngood,pos\nbad,neg\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    cfg = load_config(_classify_recipe(tmp_path, train="x.csv"))
    staged, tables = _stage_tables(cfg, {"train": "train.csv"})
    assert tables is None and staged.data.train == str(tmp_path / "train.csv")

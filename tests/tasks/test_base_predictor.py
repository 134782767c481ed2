"""The ``Predictor`` base class: every task's predictor subclasses it and declares what it
can do (``capabilities``); the CLI verbs and the server's endpoints dispatch on that
declaration, not on ``hasattr``; a task's ``evaluate`` (and ``calibrate``) leave the loaded
predictor's config as it was, whatever options they are given."""

from __future__ import annotations

import ast
import copy
import inspect
import shutil
import typing
from pathlib import Path

import pytest

import attnkit
from attnkit.app.cli import main
from attnkit.core.errors import RunError
from attnkit.tasks import BUILTIN, Predictor, classify, get_task
from attnkit.tasks.base import CAPABILITIES, OPTIONS
from attnkit.tasks.classify import ClassifierPredictor, ClassifySpec, EnsemblePredictor

SRC = Path(attnkit.__file__).parent
LEGACY = Path(__file__).parents[1] / "fixtures" / "legacy_runs"


def _predictor_classes() -> dict[str, type]:
    """Each built-in task's predictor class (from ``TaskSpec.predictor``'s return type), and
    classify's ensemble."""
    classes = {}
    for name in BUILTIN:
        spec = get_task(name)
        classes[name] = typing.get_type_hints(type(spec).predictor)["return"]
    classes["classify ensemble"] = typing.get_type_hints(classify.ensemble)["return"]
    return classes


def test_every_predictor_subclasses_predictor_and_declares_real_capabilities() -> None:
    classes = _predictor_classes()
    assert classes["classify ensemble"] is EnsemblePredictor
    assert len(set(classes.values())) == 9  # seq2seq serves translate and chat
    for name, cls in classes.items():
        assert issubclass(cls, Predictor), name
        assert isinstance(cls.capabilities, frozenset) and cls.capabilities, name
        assert cls.capabilities <= set(CAPABILITIES), (name, cls.capabilities - set(CAPABILITIES))
        for capability in cls.capabilities:
            if capability in OPTIONS:  # an option of a method: the method takes the keyword
                method, keyword = OPTIONS[capability]
                assert keyword in inspect.signature(getattr(cls, method)).parameters, name
            else:
                assert callable(getattr(cls, capability, None)), (name, capability)
        # and every method of a capability's name is declared (what hasattr found before)
        has = {c for c in CAPABILITIES if c not in OPTIONS and callable(getattr(cls, c, None))}
        assert has <= cls.capabilities, (name, has - cls.capabilities)
        # and what the task's endpoint calls is declared (attnkit serve checks it too)
        if name in BUILTIN and get_task(name).endpoint is not None:
            from attnkit.app.serve.runs import ENDPOINT_CAPABILITY

            assert ENDPOINT_CAPABILITY[get_task(name).endpoint] in cls.capabilities, name


def test_no_capability_probes_in_the_cli_the_server_and_the_api() -> None:
    """``hasattr`` / ``getattr(x, name, default)`` on a predictor: the declaration is asked."""
    files = [SRC / "app" / "api.py", SRC / "tasks" / "pseudo_label.py"]
    files += sorted((SRC / "app" / "cli").glob("*.py"))
    files += sorted((SRC / "app" / "serve").glob("*.py"))
    probes = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
                continue
            probe = node.func.id == "hasattr" or (node.func.id == "getattr" and len(node.args) == 3)
            target = ast.unparse(node.args[0]) if node.args else ""
            if probe and ("predictor" in target or target in ("p", "member", "m")):
                probes.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    assert probes == []


def test_load_refuses_a_task_whose_predictor_is_not_a_predictor(
    tiny_run_once: Path, monkeypatch
) -> None:
    monkeypatch.setattr(ClassifySpec, "predictor", lambda self, *args: object())
    with pytest.raises(TypeError, match="returned a object, not an attnkit.tasks.Predictor"):
        attnkit.load(tiny_run_once)


# ----------------------------------------------------------------------------- the CLI
def _cli_error(capsys, argv: list[str]) -> str:
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("attnkit: error: ")
    return err.removeprefix("attnkit: error: ").rstrip("\n")


def test_cli_verbs_dispatch_on_declared_capabilities(
    tiny_run_once: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    run = str(tiny_run_once)
    chat = str(LEGACY / "chat-lstm")
    assert _cli_error(capsys, ["translate", run, "hi"]) == (
        f"{run} is a classify run; use `attnkit predict`"
    )
    assert _cli_error(capsys, ["tag", chat, "hi"]) == (
        f"{chat} is a chat run; use `attnkit translate` or `attnkit chat`"
    )
    # what a class declares decides, not the methods it has
    declared = ClassifierPredictor.capabilities
    monkeypatch.setattr(ClassifierPredictor, "capabilities", declared - {"explain"})
    figure = str(tmp_path / "a.png")
    assert _cli_error(capsys, ["predict", run, "good", "--explain", figure]) == (
        "--explain has nothing to draw for a classify run"
    )
    monkeypatch.setattr(ClassifierPredictor, "capabilities", declared - {"sentence_pairs"})
    assert _cli_error(capsys, ["predict", run, "good", "--pair", "bad"]) == (
        f"--pair: {run} is a classify run, not a sentence-pair one"
    )
    monkeypatch.setattr(ClassifierPredictor, "capabilities", frozenset())
    assert _cli_error(capsys, ["predict", run, "good"]) == f"{run} is a classify run"
    monkeypatch.setattr(ClassifierPredictor, "capabilities", declared)
    assert main(["predict", run, "good"]) == 0


# ----------------------------------------------------------------------------- the server
def test_server_endpoints_dispatch_on_declared_capabilities(served_runs, monkeypatch) -> None:
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    from attnkit.app.serve import Limits, create_app
    from attnkit.app.serve.runs import load_runs

    runs = load_runs([f"{n}={served_runs[n]}" for n in ("sentiment", "translator")])
    client = TestClient(create_app(runs, Limits()))

    def error(path: str, body: dict) -> str:
        response = client.post(path, json=body)
        assert response.status_code == 422, response.text
        return response.json()["error"]["message"]

    sentiment, translator = runs["sentiment"].predictor, runs["translator"].predictor
    assert client.post("/v1/classify", json={"texts": ["good"], "attention": True}).is_success
    monkeypatch.setattr(sentiment, "capabilities", sentiment.capabilities - {"attention"})
    assert error("/v1/classify", {"texts": ["good"], "attention": True}) == (
        "model 'sentiment' has no attention maps to return"
    )
    assert client.get("/v1/models").json()["models"][0]["attention"] is False
    monkeypatch.setattr(sentiment, "capabilities", frozenset({"predict"}))
    assert error("/v1/classify", {"texts": ["good"], "pairs": ["bad"]}) == (
        "this model classifies single texts; it was not trained on pairs"
    )
    monkeypatch.setattr(translator, "capabilities", translator.capabilities - {"alignment"})
    assert error("/v1/translate", {"texts": ["ein hund"], "alignment": True}) == (
        "model 'translator' has no alignment to return"
    )
    assert client.post("/v1/translate", json={"texts": ["ein hund"]}).is_success
    # a run whose predictor does not declare what its endpoint calls is refused at start
    monkeypatch.setattr(ClassifierPredictor, "capabilities", frozenset({"explain"}))
    with pytest.raises(RunError, match="classify run whose predictor cannot predict: it cannot "
                       "answer /v1/classify"):  # fmt: skip
        load_runs([served_runs["ngram"]])


# ----------------------------------------------------------------------------- evaluate
def test_evaluate_and_calibrate_leave_the_predictors_config_unchanged(
    tiny_run_once: Path, tmp_path: Path, monkeypatch
) -> None:
    spec = get_task("classify")
    elsewhere = str(tmp_path / "elsewhere")  # data.name file: the files are read as before
    predictor = attnkit.load(tiny_run_once)
    before = copy.deepcopy(predictor.config)
    report = spec.evaluate(predictor, "test", data_dir=elsewhere, batch_size=7)
    assert report["split"] == "test" and predictor.config == before
    assert predictor.config.data.data_dir is None
    ensemble = attnkit.load([tiny_run_once, tiny_run_once])
    spec.evaluate(ensemble, "test", data_dir=elsewhere)
    assert all(m.config == before for m in ensemble.members)
    assert ensemble.precision is ensemble.members[0].precision

    run = tmp_path / "run"
    shutil.copytree(tiny_run_once, run)  # calibrate writes the temperature into the run
    predictor = attnkit.load(run)
    classify.calibrate(predictor, elsewhere, lambda *_: None)
    assert predictor.config == before


def test_translate_evaluate_with_options_leaves_the_config_unchanged(
    tmp_path: Path, monkeypatch
) -> None:
    # the legacy translate run reads DATA/test.tsv (relative): give it one here
    (tmp_path / "DATA").mkdir()
    (tmp_path / "DATA" / "test.tsv").write_text(
        "ein hund\ta dog\neine katze\ta cat\n", encoding="utf-8"
    )
    monkeypatch.chdir(tmp_path)
    predictor = attnkit.load(LEGACY / "translate-transformer")
    before = copy.deepcopy(predictor.config)
    report = get_task("translate").evaluate(
        predictor, "test", data_dir=str(tmp_path / "elsewhere"), batch_size=2, beam=2
    )
    assert report["split"] == "test" and predictor.config == before

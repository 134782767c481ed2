"""The explorer goes through the predictor's checks (issue 40, reliability round 3: item 5,
parts of 4 and 7): a run it cannot step through (an ONNX export of any family) is refused
in one line, and not linked, by the CLI, the server and the Python API; a run whose outputs
are not finite (NaN weights) is an error, never a page of NaN; explain takes predict's
input limits; ``--max-tokens`` is bounded per run where it enters; the positional-encoding
figure's sizes are bounded; a served run's name is what a URL carries as it is."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

import attnkit
from attnkit.app.cli import main
from attnkit.app.explain.trace import family_of
from attnkit.core.errors import NON_FINITE, InputError, NonFiniteError, RunError
from attnkit.core.params import MAX_PE_CELLS, PARAMS, check_pe_size

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from fastapi.testclient import TestClient  # noqa: E402

from attnkit.app.serve import Limits, create_app  # noqa: E402
from attnkit.app.serve.names import parse_spec, safe_name  # noqa: E402
from attnkit.app.serve.runs import ServedRun, load_runs  # noqa: E402

FIXTURES = Path(__file__).parents[2] / "fixtures"
LEGACY = FIXTURES / "legacy_runs"
FORMAT2 = FIXTURES / "format2_runs"
CLF = LEGACY / "classify-transformer"
BERT = FORMAT2 / "bert-classifier"
NON_FINITE_LINE = f"attnkit: error: {NON_FINITE}"

# (run, text, second text) of each family the explorer knows
FAMILY_RUNS = {
    "classifier": (CLF, "good movie", None),
    "bert-pair": (FORMAT2 / "bert-classifier-pair", "good movie", "bad film"),
    "mlm": (LEGACY / "mlm", "the [MASK] was", None),
    "lm": (FORMAT2 / "gpt-lm", "First Citizen:", None),
    "seq2seq": (LEGACY / "translate-transformer", "ein mann", None),
    "tag": (FORMAT2 / "bert-tagger", "Seoul hosted the Olympics", None),
    "qa": (FORMAT2 / "bert-qa", "who ran?", "Bob ran fast today."),
}


def error_line(capsys) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("attnkit: error: "), lines
    return lines[0]


def explain_cli(run, text, pair, out: Path, *extra: str) -> int:
    argv = ["explain", str(run), text, "--html", str(out), *extra]
    return main(argv + (["--pair", pair] if pair is not None else []))


@pytest.fixture
def no_server(monkeypatch) -> list:
    """``attnkit explain`` / ``serve`` without a real server: what would have been started
    (and the addresses bound) is recorded instead."""
    import attnkit.app.serve.server as server

    started: list = []

    class Server:
        def __init__(self, app, limits) -> None:
            started.append(app)

        def run(self, sockets) -> None:
            pass

    monkeypatch.setattr(server, "make_server", Server)
    monkeypatch.setattr(server, "bind", lambda host, port: started.append((host, port)) or [])
    return started


def nan_copy(run: Path, dest: Path) -> Path:
    """A copy of ``run`` whose float weights are all NaN (as tests/runtime/test_training_diverged.py)."""
    shutil.copytree(run, dest)
    weights = load_file(dest / "model.safetensors")
    nan = {k: torch.full_like(v, float("nan")) if v.is_floating_point() else v
           for k, v in weights.items()}  # fmt: skip
    save_file(nan, dest / "model.safetensors", metadata={"format": "pt"})
    return dest


# ----------------------------------------------------------------------------- capabilities
class _Weightless(torch.nn.Module):
    """A model with no PyTorch weights of its own, as an ONNX export's ``OnnxModel``."""

    def forward(self, *args, **kwargs):  # pragma: no cover - never called
        raise AssertionError("the explainer ran a model it cannot capture")


def test_a_model_without_pytorch_weights_is_refused_by_every_entry(tmp_path, capsys) -> None:
    """The rule (``family_of``): the explorer steps through a predictor of a family it has
    a view for, declaring what that view calls, holding a PyTorch model with weights. One
    that does not is no explorer link, a JSON 422 from /v1/explain, a 404 page, one line
    from the CLI and an InputError from the Python API."""
    predictor = attnkit.load(CLF)
    predictor.model = _Weightless()
    with pytest.raises(InputError, match="no PyTorch model for the explainer"):
        family_of(predictor)
    with pytest.raises(InputError, match="no PyTorch model"):
        attnkit.explain(predictor, "good movie")
    run = ServedRun("w", CLF, "classify", "classify", predictor)
    assert not run.explainable and "ONNX export" in run.explain_problem
    client = TestClient(create_app({"w": run}))
    got = client.post("/v1/explain", json={"text": "good movie"})
    assert got.status_code == 422 and "no PyTorch model" in got.json()["error"]["message"]
    page = client.get("/explain/w", params={"text": "good movie"})
    assert page.status_code == 404 and "has no explorer page" in page.json()["error"]["message"]


def test_an_int8_run_is_explained_with_its_own_numbers(tmp_path) -> None:
    """int8 (dynamically quantized Linear layers) keeps PyTorch modules to capture: it is
    explained, and linked."""
    predictor = attnkit.load(CLF, quantize="int8")
    assert family_of(predictor) == "classifier"
    trace = attnkit.explain(predictor, "good movie").trace
    assert trace["stacks"] and trace["stacks"][0]["layers"]
    assert trace["view"]["predicted"] == predictor.predict(["good movie"])[0].label
    run = ServedRun("q", CLF, "classify", "classify", predictor)
    assert run.describe()["explain"] == "/explain/q"


@pytest.fixture(scope="module")
def onnx_exports(tmp_path_factory) -> dict[str, tuple[Path, str, str | None]]:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    from attnkit.app.api import export

    root = tmp_path_factory.mktemp("onnx-explain")
    out = {}
    for family in ("classifier", "tag", "qa"):
        run, text, pair = FAMILY_RUNS[family]
        out[family] = (export(run, root / f"{family}-onnx", fmt="onnx"), text, pair)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("family", ["classifier", "tag", "qa"])
def test_onnx_exports_are_served_but_not_explained(onnx_exports, family, tmp_path, capsys,
                                                   no_server) -> None:  # fmt: skip
    out, text, pair = onnx_exports[family]
    client = TestClient(create_app([f"m={out}"]))
    (info,) = client.get("/v1/models").json()["models"]
    assert info["explain"] is None  # no explorer link on the index
    endpoint = info["endpoint"]
    body = {"texts": [text]} if endpoint != "/v1/answer" else {"question": text, "context": pair}
    assert client.post(endpoint, json=body).status_code == 200  # still served
    got = client.post("/v1/explain", json={"text": text, "pair": pair})
    assert got.status_code == 422, got.text
    message = got.json()["error"]["message"]
    assert "ONNX export" in message and "\n" not in message
    page = client.get("/explain/m", params={"text": text} if pair is None else {"pair": pair})
    assert page.status_code == 404 and page.json()["error"]["status"] == 404
    html = tmp_path / "x.html"
    assert explain_cli(out, text, pair, html) == 2
    assert "no PyTorch model for the explainer" in error_line(capsys)
    assert not html.exists()
    served = ["explain", str(out), text, "--port", "8123"] + (["--pair", pair] if pair else [])
    assert main(served) == 2
    assert "ONNX export" in error_line(capsys)
    assert not any(not isinstance(x, tuple) for x in no_server)  # no server made
    with pytest.raises(InputError, match="ONNX export"):
        attnkit.explain(out, text, pair=pair)


# ----------------------------------------------------------------------------- finiteness
@pytest.mark.parametrize("family", ["classifier", "mlm", "lm", "seq2seq", "tag", "qa"])
def test_nan_weights_are_one_error_everywhere(family, tmp_path, capsys, no_server) -> None:
    run, text, pair = FAMILY_RUNS[family]
    bad = nan_copy(run, tmp_path / "nan")
    with pytest.raises(NonFiniteError, match="not finite numbers"):  # an AttnkitError
        attnkit.explain(bad, text, pair=pair)
    html = tmp_path / "x.html"
    assert explain_cli(bad, text, pair, html) == 2
    assert error_line(capsys) == NON_FINITE_LINE and not html.exists()
    served = ["explain", f"m={bad}", text, "--port", "8123"] + (["--pair", pair] if pair else [])
    assert main(served) == 2  # the first page is built before the server starts
    assert error_line(capsys) == NON_FINITE_LINE
    assert all(isinstance(x, tuple) for x in no_server)
    client = TestClient(create_app(load_runs([f"m={bad}"], explain_only=True)))
    query = {"text": text} if pair is None else {"text": text, "pair": pair}
    for got in (client.post("/v1/explain", json=query), client.get("/explain/m", params=query)):
        assert got.status_code == 422, got.text
        assert got.headers["content-type"] == "application/json"  # not a page
        error = got.json()["error"]
        assert error["type"] == "invalid_request" and error["message"] == NON_FINITE
        assert "NaN," not in got.text


# ----------------------------------------------------------------------------- input limits
@pytest.mark.parametrize("family", sorted(FAMILY_RUNS))
@pytest.mark.parametrize("text", ["", "  \n"])
def test_an_empty_text_is_refused_as_predict_refuses_it(family, text, tmp_path, capsys) -> None:
    run, _, pair = FAMILY_RUNS[family]
    what = "question" if family == "qa" else "text"
    with pytest.raises(InputError, match="empty or whitespace only"):
        attnkit.app.explain.trace(attnkit.load(run), text, pair=pair)
    html = tmp_path / "x.html"
    assert explain_cli(run, text, pair, html) == 2
    assert f"the {what} is empty or whitespace only" in error_line(capsys)
    assert not html.exists()


def test_a_lone_surrogate_is_refused_in_python_as_the_cli_and_server_refuse_it() -> None:
    with pytest.raises(InputError, match="text is not valid Unicode"):
        attnkit.explain(CLF, "good \ud800")
    with pytest.raises(InputError, match="second text is not valid Unicode"):
        attnkit.explain(FAMILY_RUNS["bert-pair"][0], "good", pair="\udcff")


@pytest.fixture(scope="module")
def limited() -> TestClient:
    runs = [f"clf={CLF}", f"qa={FORMAT2 / 'bert-qa'}", f"pair={FORMAT2 / 'bert-classifier-pair'}"]
    return TestClient(create_app(runs, Limits(max_chars=40, max_context_chars=200)))


def test_server_explain_takes_the_limits_of_the_runs_endpoint(limited) -> None:
    """A text is capped as /v1/classify caps it; a qa run's context as /v1/answer caps it
    (max_context_chars, not a text's max_chars)."""
    long_text, context = "good " * 9, "Bob ran fast today. " * 8  # 45 and 160 characters
    for path, body in (
        ("/v1/classify", {"model": "clf", "texts": [long_text]}),
        ("/v1/explain", {"model": "clf", "text": long_text}),
    ):
        got = limited.post(path, json=body)
        assert got.status_code == 413 and "at most 40" in got.json()["error"]["message"]
    answer = limited.post("/v1/answer", json={"question": "who ran?", "context": context})
    assert answer.status_code == 200
    explained = limited.post("/v1/explain", json={"model": "qa", "text": "who ran?",
                                                  "pair": context})  # fmt: skip
    assert explained.status_code == 200, explained.text
    too_long = limited.post("/v1/explain", json={"model": "qa", "text": "who?",
                                                 "pair": context * 2})  # fmt: skip
    assert too_long.status_code == 413
    assert "context 1 has 320 characters" in too_long.json()["error"]["message"]
    pair = limited.post("/v1/explain", json={"model": "pair", "text": "good", "pair": context})
    assert pair.status_code == 413 and "second sentence" in pair.json()["error"]["message"]
    assert limited.post("/v1/explain", json={"model": "clf", "text": " "}).status_code == 422


def test_served_explain_checks_the_limits_at_start_up(tmp_path, capsys, no_server) -> None:
    pair = FAMILY_RUNS["bert-pair"][0]
    assert main(["explain", str(pair), "good", "--pair", "film " * 500, "--port", "8123"]) == 2
    line = error_line(capsys)
    assert "at most 2,000 per second sentence (when served; --html has no such limit)" in line
    qa, question, _ = FAMILY_RUNS["qa"]
    context = "Bob ran fast today. " * 150  # 3000 characters: more than a text, a context
    assert main(["explain", str(qa), question, "--pair", context, "--port", "8123"]) == 0
    assert any(not isinstance(x, tuple) for x in no_server)  # served


# ----------------------------------------------------------------------------- --max-tokens
@pytest.mark.parametrize(
    ("family", "value", "extra", "message"),
    [
        ("classifier", 2, [], None),  # a Transformer classifier: [CLS] and one token
        ("bert", 2, [], "must be >= 3 for this classify run, whose input is [CLS] text [SEP]"),
        ("bert", 3, [], None),
        ("bert-pair", 4, [], "must be >= 5 for this classify run, whose input is [CLS] A [SEP]"),
        ("bert-pair", 5, [], None),
        ("mlm", 2, [], "the text's [MASK] is past the first 2 tokens"),
        ("mlm", 4, [], None),
        ("lm", 2, [], "steps=8 leaves no room for the prompt within 2 tokens"),
        ("lm", 2, ["--steps", "2"], None),
        ("seq2seq", 2, [], None),
        ("tag", 2, [], "must be >= 3 for this tag run"),
        ("tag", 3, [], None),
        ("qa", 4, [], "must be >= 5 for this qa run"),
        ("qa", 5, [], "must be >= 10 for this question: its 6 tokens"),
        ("qa", 10, [], None),
    ],
)
def test_max_tokens_is_bounded_per_run(family, value, extra, message, tmp_path, capsys) -> None:
    run, text, pair = FAMILY_RUNS.get(family) or (BERT, "good movie", None)
    out = tmp_path / "x.html"
    code = explain_cli(run, text, pair, out, "--max-tokens", str(value), *extra)
    if message is None:
        assert code == 0 and out.is_file(), capsys.readouterr().err
        return
    assert code == 2
    line = error_line(capsys)
    assert message in line and "--max-tokens" in line, line
    assert not out.exists()


@pytest.mark.parametrize(("value", "message"), [("1", ">= 2"), ("4097", "<= 4096")])
def test_max_tokens_out_of_range_before_any_model_is_loaded(value, message, capsys) -> None:
    argv = ["explain", "/nonexistent/run", "x", "--html", "x.html", "--max-tokens", value]
    assert main(argv) == 2
    assert f"--max-tokens must be {message}, got {value}" in error_line(capsys)
    assert PARAMS["max_tokens"].problem(int(value)) is not None
    with pytest.raises(InputError, match="max_tokens must be in 2..4096"):
        attnkit.explain(CLF, "good", max_tokens=int(value))


# ----------------------------------------------------------------------------- plot sizes
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--max-len", "1000000", "--d-model", "100000"], "--max-len: must be in 1..8192"),
        (["--d-model", "100000"], "--d-model: must be in 2..8192, got 100000"),
        (["--max-len", "8192", "--d-model", "8192"],
         "--max-len x --d-model must be at most 4,194,304 numbers"),
    ],
)  # fmt: skip
def test_positional_encoding_sizes_are_bounded(argv, message, tmp_path, capsys) -> None:
    out = tmp_path / "pe.png"
    try:
        code = main(["plot", "positional-encoding", *argv, "-o", str(out)])
    except SystemExit as exc:  # argparse's type check
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not out.exists()


def test_positional_encoding_bounds_in_python(tmp_path) -> None:
    with pytest.raises(InputError, match="max_len must be in 1..8192, got 1000000"):
        attnkit.plot_positional_encoding(1_000_000, 100_000)
    with pytest.raises(InputError, match="at most 4,194,304 numbers"):
        attnkit.plot_positional_encoding(4096, 2048)
    with pytest.raises(InputError, match="d_model must be in 2..8192, got 1"):
        attnkit.plot_positional_encoding(8, 1)
    check_pe_size(8192, MAX_PE_CELLS // 8192)  # the largest figures are allowed
    assert attnkit.plot_positional_encoding(8, 16, tmp_path / "pe.png").is_file()


# ----------------------------------------------------------------------------- run names
@pytest.mark.parametrize("name", ["a/b", ".hidden", "a b", "x" * 65, "a%2Fb", "감성", "a?b"])
def test_a_given_run_name_a_url_would_not_carry_is_refused_at_start_up(name, capsys,
                                                                      no_server) -> None:  # fmt: skip
    with pytest.raises(RunError, match="must be 1 to 64 letters, digits"):
        parse_spec(f"{name}={CLF}")
    assert main(["serve", f"{name}={CLF}", "--port", "8123"]) == 2
    line = error_line(capsys)
    assert f"run name {name!r} must be 1 to 64" in line and f"={CLF}" in line
    assert no_server == []  # refused before the address is taken


def test_safe_names_are_served_and_their_explorer_page_answers(tmp_path) -> None:
    for name in ("a.b-c_1", "x" * 64, "-x", "1"):
        assert parse_spec(f"{name}={CLF}") == (name, CLF)
    assert safe_name("my run (v2)") == "my-run-v2" and safe_name("감성") == "run"
    assert safe_name("..hidden") == "hidden" and len(safe_name("y" * 100)) == 64
    folder = tmp_path / "my run 감성"
    shutil.copytree(CLF, folder)
    client = TestClient(create_app([str(folder), f"ok.v1={CLF}"]))
    links = {m["name"]: m["explain"] for m in client.get("/v1/models").json()["models"]}
    assert links == {"my-run": "/explain/my-run", "ok.v1": "/explain/ok.v1"}
    for link in links.values():
        page = client.get(link, params={"text": "good movie"})
        assert page.status_code == 200, page.text
    data = re.search(r'id="trace-data">(.*?)</script>', page.text, re.S).group(1)
    assert json.loads(data)["api"]["model"] == "ok.v1"


def test_explain_serves_a_folder_under_its_safe_name(tmp_path, capsys, no_server) -> None:
    folder = tmp_path / "a run?"
    shutil.copytree(CLF, folder)
    assert main(["explain", str(folder), "good movie", "--port", "8123"]) == 0
    assert "explorer page: http://127.0.0.1:8123/explain/a-run  (" in capsys.readouterr().out
    client = TestClient(no_server[-1], base_url="http://127.0.0.1:8123")
    assert client.get("/explain/a-run").status_code == 200


def test_two_folders_made_into_one_name_are_refused(tmp_path) -> None:
    for name in ("감성", "분석"):
        shutil.copytree(CLF, tmp_path / name)
    with pytest.raises(RunError, match="two runs are named 'run'.*name them"):
        load_runs([str(tmp_path / "감성"), str(tmp_path / "분석")])

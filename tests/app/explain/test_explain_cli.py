"""``attnkit explain RUN TEXT`` (issue 34): with --html one self-contained page written
atomically, the numbers in it the Python API's; without, the explorer served by
``attnkit serve``'s server (this run only), which also serves /v1/explain and links each
run's explorer from its index. Errors are one line and exit code 2, before any model is
loaded where they can be; the server's answers keep its hardening (JSON 4xx, limits)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import attnkit
from attnkit.app.cli import main
from attnkit.app.explain.page import explain_traces

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from fastapi.testclient import TestClient  # noqa: E402

from attnkit.app.serve import Limits, create_app  # noqa: E402

LEGACY = Path(__file__).parents[2] / "fixtures" / "legacy_runs"
CLF = LEGACY / "classify-transformer"
TEXT = "최악 영화 정말"


def traces_in(path: Path) -> list[dict]:
    page = path.read_text(encoding="utf-8")
    found = re.search(r'<script type="application/json" id="trace-data">(.*?)</script>', page, re.S)
    assert found, "no trace data in the page"
    return json.loads(found.group(1))["traces"]


def error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


@pytest.mark.slow
def test_html_writes_the_page_of_the_python_api(tmp_path: Path, capsys) -> None:
    out = tmp_path / "explain.html"
    assert main(["explain", str(CLF), TEXT, "--html", str(out)]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {out}"
    (item,) = traces_in(out)
    want = explain_traces(attnkit.load(CLF, precision="fp32"), TEXT)[0][1]
    assert item["trace"] == json.loads(json.dumps(want))  # the same numbers
    pred = attnkit.load(CLF).predict([TEXT])[0]
    assert item["trace"]["view"]["predicted"] == pred.label
    assert [p.name for p in tmp_path.iterdir()] == ["explain.html"]  # no temporary file


@pytest.mark.slow
def test_html_seq2seq_options(tmp_path: Path, capsys) -> None:
    out = tmp_path / "mt.html"
    run = LEGACY / "translate-transformer"
    assert main(["explain", str(run), "ein mann", "--html", str(out), "--beam", "2"]) == 0
    items = traces_in(out)
    assert [i["label"] for i in items] == ["greedy", "beam 2"]
    mt = attnkit.load(run)
    assert items[1]["trace"]["view"]["output_text"] == mt.translate(["ein mann"], beam=2)[0]
    assert main(["explain", str(run), "ein mann", "--html", str(out), "--beam", "1"]) == 0
    assert [i["label"] for i in traces_in(out)] == ["greedy"]  # replaced, atomically


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--html", "{tmp}/no/such/folder/x.html"], "does not exist"),
        (["--html", f"{CLF}/config.json"], "is a run directory"),
        (["--html", "{tmp}"], "folder"),
        (["--html", "{tmp}/x.html", "--steps", "-1"], "--steps must be >= 0"),
        (["--html", "{tmp}/x.html", "--max-tokens", "1"], "--max-tokens must be >= 2"),
        (["--html", "{tmp}/x.html", "--temperature", "-1"], "--temperature"),
        (["--port", "0"], "--port must be in 1..65535"),
        (["--steps", "65"], "--steps must be at most 64 when served"),
        (["--beam", "9"], "--beam must be at most 8 when served"),
    ],
)
def test_errors_before_any_model_is_loaded(argv, message, tmp_path: Path, capsys) -> None:
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert main(["explain", str(tmp_path / "not-a-run"), TEXT, *argv]) == 2
    line = error_line(capsys)
    assert line.startswith("attnkit: error: ") and message in line, line


@pytest.mark.parametrize(
    ("run", "text", "extra", "message"),
    [
        ("nope", TEXT, [], "not a run directory"),
        ("classify-transformer", " ", [], "empty"),
        ("translate-transformer", "x", ["--pair", "y"], "sentence-pair"),
        ("mlm", "no mask here", [], "[MASK]"),
    ],
)
def test_input_errors_are_one_line(run, text, extra, message, tmp_path, capsys) -> None:
    out = tmp_path / "x.html"
    assert main(["explain", str(LEGACY / run), text, "--html", str(out), *extra]) == 2
    assert message in error_line(capsys)
    assert not out.exists()


def test_without_html_it_serves_the_explorer(monkeypatch, capsys) -> None:
    """The server is attnkit serve's (its hardening included), holding this run only; the
    printed URL opens the page of the given text."""
    import attnkit.app.serve.server as server

    served = {}

    class Fake:
        def __init__(self, app, limits):
            served["app"] = app

        def run(self, sockets):
            served["sockets"] = sockets

    monkeypatch.setattr(server, "make_server", Fake)
    monkeypatch.setattr(server, "bind", lambda host, port: [])
    assert main(["explain", f"m={LEGACY / 'mlm'}", "the [MASK] was", "--port", "8123"]) == 0
    assert "explorer page: http://127.0.0.1:8123/explain/m" in capsys.readouterr().out
    client = TestClient(served["app"], base_url="http://127.0.0.1:8123")
    page = client.get("/explain/m")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "connect-src 'self'" in page.headers["content-security-policy"]
    data = re.search(r'id="trace-data">(.*?)</script>', page.text, re.S).group(1)
    (item,) = json.loads(data)["traces"]
    assert item["trace"]["text"] == "the [MASK] was" and item["trace"]["family"] == "mlm"
    # an mlm run has no endpoint of its own: served for its explorer only
    (info,) = client.get("/v1/models").json()["models"]
    assert info["endpoint"] is None and info["explain"] == "/explain/m"
    refused = client.post("/v1/classify", json={"model": "m", "texts": ["x"]})
    assert refused.status_code == 422 and "explorer page only" in refused.json()["error"]["message"]


def test_served_text_refused_before_the_server_starts(monkeypatch, capsys) -> None:
    """Without --html the first page's traces are built before the server starts: a text
    the run refuses is the same one-line error and exit code 2 as with --html."""
    import attnkit.app.serve.server as server

    started = []
    monkeypatch.setattr(server, "make_server", lambda app, limits: started.append(app))
    monkeypatch.setattr(server, "bind", lambda host, port: [])
    assert main(["explain", f"m={LEGACY / 'mlm'}", "no mask here", "--port", "8123"]) == 2
    line = error_line(capsys)
    assert line.startswith("attnkit: error: ") and "[MASK]" in line, line
    assert started == []


def test_explorer_page_of_a_refused_text_shows_why() -> None:
    """A text the run refuses gets the explorer page (422) with the message and the form
    holding the text, not a JSON error; the page's own parameters stay JSON errors."""
    app = create_app([f"m={LEGACY / 'mlm'}"], explain={"text": "the [MASK] was"})
    client = TestClient(app)
    got = client.get("/explain/m", params={"text": "no mask 한글"})
    assert got.status_code == 422 and got.headers["content-type"].startswith("text/html")
    assert "connect-src 'self'" in got.headers["content-security-policy"]
    data = json.loads(re.search(r'id="trace-data">(.*?)</script>', got.text, re.S).group(1))
    assert data["traces"] == []
    api = data["api"]
    assert "[MASK]" in api["error"] and api["text"] == "no mask 한글" and api["family"] == "mlm"
    assert "url(data:font/woff" in got.text  # the Hangul of the text typed: the inline subset
    assert client.get("/explain/m", params={"text": "the [MASK] was"}).status_code == 200


@pytest.fixture(scope="module")
def client() -> TestClient:
    app = create_app(
        [
            f"clf={CLF}",
            f"mt={LEGACY / 'translate-transformer'}",
            f"ngram={LEGACY / 'classify-ngram'}",
        ],
        Limits(max_chars=40, max_beam=3, max_new_tokens=5),
    )
    return TestClient(app)


def test_api_explain_answers_the_traces(client: TestClient) -> None:
    got = client.post("/v1/explain", json={"model": "clf", "text": TEXT})
    assert got.status_code == 200
    body = got.json()
    assert body["model"] == "clf" and [t["label"] for t in body["traces"]] == ["classifier"]
    want = explain_traces(attnkit.load(CLF, precision="fp32"), TEXT)[0][1]
    assert body["traces"][0]["trace"] == json.loads(json.dumps(want))
    mt = client.post("/v1/explain", json={"model": "mt", "text": "ein mann", "beam": 2}).json()
    assert [t["label"] for t in mt["traces"]] == ["greedy", "beam 2"]


def test_index_links_each_explainable_run(client: TestClient) -> None:
    models = {m["name"]: m for m in client.get("/v1/models").json()["models"]}
    assert models["clf"]["explain"] == "/explain/clf"
    assert models["mt"]["explain"] == "/explain/mt" and models["mt"]["endpoint"] == "/v1/translate"
    assert "explain-links" in client.get("/").text
    assert "explainLinks" in client.get("/static/app.js").text
    page = client.get("/explain/mt", params={"text": "ein mann", "beam": 1})
    assert page.status_code == 200
    assert "connect-src 'self'" in page.headers["content-security-policy"]


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"model": "nope", "text": "x"}, 404, "no model named 'nope'"),
        ({"text": "x"}, 422, "several models"),
        ({"model": "clf", "text": 3}, 422, "text:"),
        ({"model": "clf", "text": "x", "extra": 1}, 422, "extra"),
        ({"model": "clf", "text": "x" * 41}, 413, "at most 40"),
        ({"model": "clf", "text": "x", "pair": "y" * 41}, 413, "at most 40"),
        ({"model": "mt", "text": "x", "beam": 4}, 422, "beam must be <= 3"),
        ({"model": "clf", "text": "x", "max_new_tokens": 6}, 422, "max_new_tokens must be <= 5"),
        ({"model": "clf", "text": "x", "temperature": -1}, 422, "temperature"),
        ({"model": "clf", "text": "   "}, 422, "empty"),
        ({"model": "clf", "text": "x", "pair": "y"}, 422, "pair"),
    ],
)
def test_api_explain_refusals_are_json(client: TestClient, body, status, message) -> None:
    got = client.post("/v1/explain", json=body)
    assert got.status_code == status, got.text
    error = got.json()["error"]
    assert error["status"] == status and message in error["message"], error


def test_explorer_page_refusals_are_json(client: TestClient) -> None:
    for path, params, status in [
        ("/explain/nope", {"text": "x"}, 404),
        ("/explain/clf", {"text": "x" * 41}, 413),
        ("/explain/clf", {"text": "x", "beam": "many"}, 422),
        ("/explain/mt", {"text": "x", "beam": 9}, 422),
    ]:
        got = client.get(path, params=params)
        assert got.status_code == status, (path, params, got.text)
        assert got.json()["error"]["status"] == status
    too_big = client.post("/v1/explain", content=b"x" * 1_000_001,
                          headers={"content-type": "application/json"})  # fmt: skip
    assert too_big.status_code == 413


@pytest.mark.slow
def test_api_explain_fuzz_never_fails(client: TestClient) -> None:
    """Whatever the body (the explain fields with values of any type, unknown fields, any
    text), /v1/explain answers 200 or a JSON 4xx, never a 500."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from attnkit.app.serve.schemas import ExplainRequest

    text = st.text(st.characters(codec=None), max_size=30) | st.sampled_from(
        ["\ud800", "안녕 [MASK]", "\x00", " ", ""]
    )
    value = st.one_of(
        st.none(), st.booleans(), st.integers(-3, 70), st.floats(allow_nan=True), text,
        st.lists(text, max_size=2),
    )  # fmt: skip
    fields = list(ExplainRequest.model_fields)

    @st.composite
    def bodies(draw) -> dict:
        body = {}
        for key in draw(st.lists(st.sampled_from(fields), unique=True)):
            if key == "model":
                body[key] = draw(st.sampled_from(["clf", "mt", "ngram", "nope"]) | value)
            else:
                body[key] = draw(text if key == "text" else value)
        if draw(st.booleans()):
            body[draw(text)] = draw(value)
        return body

    @settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
    @given(body=bodies())
    def run(body: dict) -> None:
        payload = json.dumps(body, allow_nan=True).encode()
        got = client.post("/v1/explain", content=payload,
                          headers={"content-type": "application/json"})  # fmt: skip
        assert got.status_code in (200, 404, 413, 422), got.text
        if got.status_code != 200:
            assert got.json()["error"]["message"]

    run()


def test_show_is_inline_in_a_notebook_and_a_browser_page_elsewhere(monkeypatch) -> None:
    """``Explanation.show()``: IPython displays it where there is a notebook shell;
    without one the page is written to a new temporary file and opened in the browser."""
    import IPython
    import IPython.display

    ex = attnkit.explain(LEGACY / "classify-transformer", "good movie")
    opened: list[str] = []
    monkeypatch.setattr("webbrowser.open", lambda url: opened.append(url))
    monkeypatch.setattr(IPython, "get_ipython", lambda: None)
    path = ex.show()
    assert opened == [path.as_uri()] and path.read_text(encoding="utf-8") == ex.html

    class ZMQInteractiveShell:  # what Jupyter runs
        pass

    shown: list[object] = []
    monkeypatch.setattr(IPython, "get_ipython", lambda: ZMQInteractiveShell())
    monkeypatch.setattr(IPython.display, "display", lambda obj: shown.append(obj))
    assert ex.show() is None and shown == [ex] and len(opened) == 1


def test_decode_array_reads_a_mask_and_names_what_it_cannot_read() -> None:
    from attnkit.app.explain import decode_array

    ex = attnkit.explain(LEGACY / "classify-transformer", "good movie", pad_to=12)
    attention = ex.trace["stacks"][0]["layers"][0]["attention"][0]
    mask = decode_array(attention["mask"])  # the mask itself, not only its "array"
    assert mask.dtype == "uint8" and mask.shape[-1] == 12 and mask[0, -1] == 0
    assert (mask == decode_array(attention["mask"]["array"])).all()
    with pytest.raises(ValueError, match="decode_array reads an Array"):
        decode_array(attention)

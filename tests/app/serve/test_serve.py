"""attnkit serve: every endpoint answers as the Python API does, limits give 413/422, errors
are JSON (never a 500), streaming, the timeout, the web page's files, and a real server
process started by the CLI."""

from __future__ import annotations

import dataclasses
import io
import json
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")  # fastapi.testclient

from fastapi.testclient import TestClient  # noqa: E402

import attnkit  # noqa: E402
from attnkit.app.cli import main  # noqa: E402
from attnkit.app.serve import Limits, create_app  # noqa: E402
from attnkit.app.serve.runs import load_runs  # noqa: E402
from attnkit.core.errors import ConfigError, RunError  # noqa: E402
from attnkit.tasks.lm import Generation, StopGeneration  # noqa: E402

LIMITS = Limits(max_chars=200, max_texts=8, max_new_tokens=16, max_beam=4,
                max_body_bytes=20_000)  # fmt: skip


@pytest.fixture(scope="module")
def runs(served_runs):
    return load_runs([f"{name}={path}" for name, path in served_runs.items()])


@pytest.fixture(scope="module")
def client(runs) -> TestClient:
    return TestClient(create_app(runs, LIMITS))


def _error(response, status: int) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body["error"]["status"] == status
    message = body["error"]["message"]
    assert message and "\n" not in message
    return message


# ----------------------------------------------------------------------------- listing
def test_healthz_and_models(client) -> None:
    assert client.get("/healthz").json() == {
        "status": "ok",
        "models": ["sentiment", "ngram", "translator", "bot", "verse"],
    }
    body = client.get("/v1/models").json()
    by_name = {m["name"]: m for m in body["models"]}
    assert by_name["sentiment"]["endpoint"] == "/v1/classify"
    assert by_name["sentiment"]["labels"] == ["neg", "pos"]
    assert by_name["sentiment"]["attention"] is True
    assert by_name["ngram"]["attention"] is False  # no attention maps for a bag of n-grams
    assert by_name["translator"]["endpoint"] == "/v1/translate"
    assert by_name["translator"]["alignment"] is True
    assert by_name["bot"]["endpoint"] == "/v1/chat"
    assert by_name["verse"]["endpoint"] == "/v1/generate"
    assert by_name["verse"]["task"] == "lm"
    assert body["limits"]["max_texts"] == 8


def test_a_run_without_endpoint_or_a_duplicate_name_is_refused(served_runs) -> None:
    mlm = Path(__file__).parents[2] / "fixtures" / "legacy_runs" / "mlm"
    with pytest.raises(RunError, match="mlm run, which has no endpoint"):
        load_runs([mlm])
    with pytest.raises(RunError, match="two runs are named 'x'"):
        load_runs([f"x={served_runs['ngram']}", f"x={served_runs['sentiment']}"])
    with pytest.raises(RunError, match="give at least one run"):
        load_runs([])
    with pytest.raises(ConfigError, match="max_texts must be an integer >= 1"):
        Limits(max_texts=0)


# ----------------------------------------------------------------------------- classify
def test_classify_is_the_python_api(client, served_runs) -> None:
    texts = ["the movie was really great", "최악 영화 지루해요", "이 영화 정말 감동"]
    body = client.post("/v1/classify", json={"model": "sentiment", "texts": texts}).json()
    expected = attnkit.load(served_runs["sentiment"]).predict(texts)
    assert body["model"] == "sentiment"
    assert [p["text"] for p in body["predictions"]] == texts  # Korean comes back intact
    for got, want in zip(body["predictions"], expected, strict=True):
        assert got["label"] == want.label
        assert got["probabilities"] == pytest.approx(want.probabilities, abs=1e-6)
        assert "attention" not in got


def test_classify_attention_per_layer_and_head(client, served_runs) -> None:
    text = "이 영화 정말 재미있어요"
    body = client.post(
        "/v1/classify", json={"model": "sentiment", "texts": [text], "attention": True}
    ).json()
    att = body["predictions"][0]["attention"]
    tokens, weights = attnkit.load(served_runs["sentiment"]).attention(text)
    assert att["tokens"] == tokens
    received = att["received"]  # (layers, heads, tokens)
    assert len(received) == len(weights)
    assert len(received[0]) == weights[0].size(0)
    for layer, w in zip(received, weights, strict=True):
        for head, wh in zip(layer, w, strict=True):
            assert head == pytest.approx(wh.mean(0).tolist(), abs=1e-4)
            assert sum(head) == pytest.approx(1.0, abs=1e-3)  # rows sum to 1: so do the means


def test_classify_errors(client) -> None:
    msg = _error(client.post("/v1/classify", json={"texts": ["a"]}), 422)
    assert "several models answer /v1/classify (sentiment, ngram)" in msg
    msg = _error(client.post("/v1/classify", json={"model": "nope", "texts": ["a"]}), 404)
    assert "no model named 'nope'" in msg
    msg = _error(client.post("/v1/classify", json={"model": "verse", "texts": ["a"]}), 422)
    assert "send it to /v1/generate" in msg
    msg = _error(client.post("/v1/classify", json={"model": "ngram", "texts": ["  "]}), 422)
    assert "empty" in msg
    ngram_attention = {"model": "ngram", "texts": ["good"], "attention": True}
    assert "attention maps exist only" in _error(
        client.post("/v1/classify", json=ngram_attention), 422
    )
    pairs = {"model": "ngram", "texts": ["a"], "pairs": ["b"]}
    assert "not trained on pairs" in _error(client.post("/v1/classify", json=pairs), 422)
    assert "texts: " in _error(client.post("/v1/classify", json={"model": "ngram"}), 422)
    typo = {"model": "ngram", "text": ["a"]}
    assert _error(client.post("/v1/classify", json=typo), 422)
    assert _error(client.post("/v1/classify", json={"model": "ngram", "texts": [1]}), 422)
    assert _error(client.post("/v1/classify", json={"model": "ngram", "texts": []}), 422)
    bad = client.post(
        "/v1/classify", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert _error(bad, 422) == "the request body is not valid JSON"


def test_limits_give_413_and_422(client) -> None:
    many = {"model": "ngram", "texts": ["good"] * 9}
    assert "9 texts in one request; this server takes at most 8" in _error(
        client.post("/v1/classify", json=many), 413
    )
    long = {"model": "ngram", "texts": ["ok", "x" * 201]}
    assert "text 2 has 201 characters" in _error(client.post("/v1/classify", json=long), 413)
    huge = json.dumps({"model": "ngram", "texts": ["a" * 30_000]}).encode()
    assert "over 20,000 bytes" in _error(client.post("/v1/classify", content=huge), 413)

    def chunks():  # no Content-Length: counted as it arrives
        for _ in range(30):
            yield b" " * 1000

    assert "over 20,000 bytes" in _error(client.post("/v1/classify", content=chunks()), 413)
    tokens = {"model": "verse", "prompt": "a", "max_new_tokens": 17}
    assert "max_new_tokens must be <= 16" in _error(client.post("/v1/generate", json=tokens), 422)
    beam = {"texts": ["ein mann"], "beam": 5}
    assert "beam must be <= 4" in _error(client.post("/v1/translate", json=beam), 422)


def test_unknown_paths_and_methods_are_json(client) -> None:
    assert _error(client.get("/v1/nothing"), 404) == "Not Found"
    wrong_method = client.get("/v1/classify")
    assert _error(wrong_method, 405) == "Method Not Allowed"
    assert wrong_method.headers["allow"] == "POST"
    bad_length = client.post("/v1/classify", content=b"{}", headers={"content-length": "x"})
    assert "Content-Length" in _error(bad_length, 400)


def test_attention_maps_are_capped(runs) -> None:
    client = TestClient(create_app(runs, Limits(max_attention_texts=2)))
    body = {"model": "sentiment", "texts": ["good"] * 3, "attention": True}
    assert "at most 2 texts" in _error(client.post("/v1/classify", json=body), 413)
    body["attention"] = False
    assert client.post("/v1/classify", json=body).status_code == 200


def test_invalid_unicode_is_a_422(client) -> None:
    lone = b'{"model": "ngram", "texts": ["ok \\ud800"]}'
    response = client.post(
        "/v1/classify", content=lone, headers={"content-type": "application/json"}
    )
    assert "lone surrogate" in _error(response, 422)


def test_only_allowed_hosts(runs) -> None:
    app = create_app(runs, LIMITS, allowed_hosts=["127.0.0.1", "localhost"])
    local = TestClient(app, base_url="http://127.0.0.1:8000")
    assert local.get("/healthz").status_code == 200
    rebound = TestClient(app, base_url="http://evil.example:8000")  # DNS rebinding
    assert rebound.get("/healthz").status_code == 400


def test_truncation_is_reported_as_a_warning(client) -> None:
    text = " ".join(["the movie was really great"] * 6)  # > max_len 16 tokens
    body = client.post("/v1/classify", json={"model": "sentiment", "texts": [text]}).json()
    assert body["predictions"][0]["truncated"] is True
    assert any("truncated" in w for w in body["warnings"])


# ----------------------------------------------------------------------------- seq2seq
def test_translate_and_alignment(client, served_runs) -> None:
    mt = attnkit.load(served_runs["translator"])
    texts = ["ein mann", "eine frau"]
    body = client.post("/v1/translate", json={"texts": texts}).json()
    assert body["translations"] == mt.translate(texts)
    body = client.post("/v1/translate", json={"texts": texts[:1], "alignment": True}).json()
    a = mt.alignment(texts[0])
    assert body["translations"] == [a.text]
    assert body["alignment"]["source"] == a.source
    assert body["alignment"]["output"] == a.output
    got = [w for row in body["alignment"]["weights"] for w in row]
    assert got == pytest.approx(a.weights.flatten().tolist(), abs=1e-4)
    two = {"texts": texts, "alignment": True}
    assert "one text per request" in _error(client.post("/v1/translate", json=two), 422)


def test_chat_is_reproducible_with_a_seed(client, served_runs) -> None:
    bot = attnkit.load(served_runs["bot"])
    body = client.post("/v1/chat", json={"message": "안녕 hello", "seed": 3}).json()
    assert body["answer"] == bot.chat("안녕 hello", seed=3)
    assert "empty" in _error(client.post("/v1/chat", json={"message": " "}), 422)
    assert _error(client.post("/v1/chat", json={"message": "hi", "top_p": 0}), 422)
    assert _error(client.post("/v1/chat", json={"message": "hi", "seed": -1}), 422)


# ----------------------------------------------------------------------------- generate
def test_generate_matches_the_python_api(client, served_runs) -> None:
    lm = attnkit.load(served_runs["verse"])
    options = {"max_new_tokens": 12, "temperature": 0.8, "top_k": 5, "seed": 7}
    body = client.post("/v1/generate", json={"prompt": "First", **options}).json()
    want = lm.generate("First", **options)[0]
    assert body["text"] == want.text
    assert body["tokens"] == want.tokens
    assert body["finish_reason"] == want.finish_reason


def test_generate_streams_ndjson(client, served_runs) -> None:
    lm = attnkit.load(served_runs["verse"])
    options = {"max_new_tokens": 12, "temperature": 0.0}
    with client.stream(
        "POST", "/v1/generate", json={"prompt": "Before", "stream": True, **options}
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("application/x-ndjson")
        lines = [json.loads(x) for x in response.iter_lines() if x]
    pieces = [x["token"] for x in lines[:-1]]
    final = lines[-1]
    assert final["done"] is True
    assert "".join(pieces) == final["text"] == lm.generate("Before", **options)[0].text
    assert len(pieces) > 1  # streamed piece by piece, not in one go
    # a bad request is refused before the stream starts: a real 4xx
    bad = {"prompt": "a", "stream": True, "stop": [""]}
    assert "stop string" in _error(client.post("/v1/generate", json=bad), 422)


def test_timeout_gives_503(runs, monkeypatch) -> None:
    app = create_app(runs, Limits(timeout_s=0.2))
    release = threading.Event()
    sentiment = runs["sentiment"].predictor
    monkeypatch.setattr(sentiment, "predict", lambda *a, **k: release.wait(30) and [])
    with TestClient(app) as client:
        response = client.post("/v1/classify", json={"model": "sentiment", "texts": ["a"]})
        assert "no answer within 0.2 s" in _error(response, 503)
        # a request queued behind the busy model times out too, and is never run
        queued = client.post("/v1/classify", json={"model": "ngram", "texts": ["a"]})
        assert "no answer within 0.2 s" in _error(queued, 503)
        release.set()
        assert app.state.server.lock.acquire(timeout=10)  # the model is free again
        app.state.server.lock.release()


@pytest.mark.parametrize("batch_size", [1, 16])  # alone, and through the batcher
def test_a_closed_stream_stops_the_generation(runs, monkeypatch, batch_size) -> None:
    app = create_app(runs, dataclasses.replace(LIMITS, batch_size=batch_size))
    pieces = []

    def endless(prompt, stream):  # a generation that only stops if told
        for _ in range(100_000):
            try:
                stream("x")
            except StopGeneration:
                return [Generation(prompt, "".join(pieces), len(pieces), "cancelled")]
            pieces.append("x")
            time.sleep(0.001)
        raise AssertionError("the generation was not stopped")

    def endless_batch(requests, more=None):
        (request,) = requests
        return endless(request.prompt, request.stream)

    monkeypatch.setattr(runs["verse"].predictor, "generate_batch", endless_batch)
    with TestClient(app) as client:
        with client.stream("POST", "/v1/generate", json={"prompt": "a", "stream": True}) as r:
            first = next(r.iter_lines())
            assert json.loads(first) == {"token": "x"}
        # the client left: the generation stops at its next piece and frees the model
        assert app.state.server.lock.acquire(timeout=10)
        app.state.server.lock.release()
    assert len(pieces) < 100_000


# ----------------------------------------------------------------------------- web page
def test_web_page_and_docs_are_served(client) -> None:
    page = client.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert '<meta charset="utf-8">' in page.text
    assert "감성 분류" in page.text
    for asset in ("/static/app.js", "/static/style.css"):
        assert client.get(asset).status_code == 200
    for path in ("/", "/static/app.js", "/static/style.css"):  # nothing from elsewhere
        assert not re.search(r"(https?:)?//[a-z]", client.get(path).text), path
    assert "default-src 'self'" in page.headers["content-security-policy"]
    font = client.get("/fonts/NanumGothic.ttf")
    assert font.status_code == 200 and font.content[:4] == b"\x00\x01\x00\x00"  # a TrueType font
    from fontTools.ttLib import TTFont

    tables = TTFont(io.BytesIO(font.content)).keys()
    assert "glyf" in tables and not any(t.startswith("TSI") for t in tables)  # Chromium takes it
    docs = client.get("/docs")
    assert docs.status_code == 200 and "/docs-assets/swagger-ui-bundle.js" in docs.text
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", docs.text)  # no CDN
    for asset in ("swagger-ui-bundle.js", "swagger-ui.css", "favicon.png"):
        assert client.get(f"/docs-assets/{asset}").status_code == 200, asset
    bundle = client.get("/docs-assets/swagger-ui-bundle.js").text
    assert re.search(r'PACKAGE_VERSION:"5\.', bundle)  # Swagger UI 5: reads OpenAPI 3.1
    spec = client.get("/openapi.json").json()
    assert {"/v1/classify", "/v1/translate", "/v1/chat", "/v1/generate"} <= set(spec["paths"])


# ----------------------------------------------------------------------------- the CLI
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_cli_serves_until_stopped(served_runs) -> None:
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "attnkit.app.cli",
            "serve",
            str(served_runs["ngram"]),
            "--port",
            str(port),
        ],  # fmt: skip
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
                    assert json.load(r) == {"status": "ok", "models": ["classify-ngram"]}
                    break
            except OSError:
                assert proc.poll() is None, proc.stdout.read()
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.3)
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/v1/classify",
            data=json.dumps({"texts": ["great"]}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as r:
            assert json.load(r)["predictions"][0]["label"] in ("neg", "pos")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_cli_refuses_bad_runs_and_limits(capsys) -> None:
    mlm = Path(__file__).parents[2] / "fixtures" / "legacy_runs" / "mlm"
    assert main(["serve", str(mlm)]) == 2
    assert "has no endpoint to serve it" in capsys.readouterr().err
    ngram = Path(__file__).parents[2] / "fixtures" / "legacy_runs" / "classify-ngram"
    assert main(["serve", str(ngram), "--max-texts", "0"]) == 2
    assert "max_texts must be an integer >= 1" in capsys.readouterr().err
    assert main(["serve", str(ngram), "--port", "70000"]) == 2
    assert "--port must be in 1..65535" in capsys.readouterr().err

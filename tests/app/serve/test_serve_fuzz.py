"""Fuzzing every endpoint of attnkit serve with hypothesis: whatever the body (any JSON
value, fields of the right names with values of any type, raw bytes), the answer is 2xx or
a 4xx with a JSON error body, never a 500."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from fastapi.testclient import TestClient  # noqa: E402
from hypothesis import HealthCheck, assume, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from starlette import testclient as starlette_testclient  # noqa: E402

from attnkit.app.serve import Limits, create_app  # noqa: E402
from attnkit.app.serve.runs import load_runs  # noqa: E402
from attnkit.app.serve.schemas import REQUESTS  # noqa: E402

ENDPOINTS = ["classify", "translate", "chat", "generate", "tag", "answer"]
MODELS = ["sentiment", "ngram", "translator", "bot", "verse", "nope"]
# refused by the TestClient's HTTP client before sending (httpx's, httpx2's with starlette 1.x)
CLIENT_REFUSALS = (starlette_testclient.httpx.InvalidURL,)
SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# any code point: Korean, control characters, and lone surrogates (JSON escapes can spell
# them; json.dumps writes them as \\udXXX)
text = st.text(st.characters(codec=None), max_size=40) | st.sampled_from(
    ["\ud800", "a\udfff", "안녕", "\x00", " ", ""]
)
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True), text,
)  # fmt: skip
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(text, inner, max_size=4)),
    max_leaves=12,
)


def _fields(endpoint: str) -> list[str]:
    return list(REQUESTS[endpoint].model_fields)


@st.composite
def bodies(draw, endpoint: str):
    """Mostly dicts with this endpoint's field names (values right or wrong), sometimes any
    JSON value."""
    if draw(st.integers(0, 4)) == 0:
        return draw(values)
    keys = _fields(endpoint)
    chosen = draw(st.lists(st.sampled_from(keys), unique=True, max_size=len(keys)))
    body = {}
    for key in chosen:
        body[key] = draw(
            st.one_of(
                values,
                st.sampled_from(MODELS) if key == "model" else values,
                st.lists(text, min_size=1, max_size=3),  # plausible texts
                st.integers(-2, 20),
                st.floats(-1, 3),
            )
        )
    if draw(st.booleans()):
        body[draw(text)] = draw(values)  # sometimes an unknown field
    return body


@pytest.fixture(scope="module")
def client(served_runs) -> TestClient:
    runs = load_runs([f"{name}={path}" for name, path in served_runs.items()])
    limits = Limits(max_chars=100, max_texts=4, max_new_tokens=6, max_body_bytes=5_000)
    return TestClient(create_app(runs, limits), raise_server_exceptions=False)


def _check(response) -> None:
    assert response.status_code < 500, response.text
    if response.status_code >= 400:
        body = response.json()
        assert response.status_code in (400, 404, 413, 422)  # 400: a body that is not text
        assert isinstance(body["error"]["message"], str) and body["error"]["message"]


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_any_json_body_gets_an_answer_or_a_4xx(client, endpoint: str) -> None:
    @SETTINGS
    @given(body=bodies(endpoint))
    def run(body) -> None:
        payload = json.dumps(body, allow_nan=True).encode()  # NaN / Infinity literals too
        response = client.post(
            f"/v1/{endpoint}", content=payload, headers={"content-type": "application/json"}
        )
        _check(response)
        if response.status_code == 200 and isinstance(body, dict) and body.get("stream"):
            lines = [json.loads(x) for x in response.text.splitlines() if x]
            assert "done" in lines[-1] or "error" in lines[-1]
            assert lines[-1].get("error", {}).get("status", 0) < 500, lines[-1]

    run()


@SETTINGS
@given(
    endpoint=st.sampled_from(ENDPOINTS),
    raw=st.binary(max_size=200),
    content_type=st.sampled_from(
        ["application/json", "text/plain", "", "application/x-www-form-urlencoded"]
    ),
)
def test_raw_bytes_get_a_4xx(client, endpoint: str, raw: bytes, content_type: str) -> None:
    headers = {"content-type": content_type} if content_type else {}
    _check(client.post(f"/v1/{endpoint}", content=raw, headers=headers))


@SETTINGS
@given(
    path=st.text(alphabet="abcdefv1/._-%", max_size=20).map(lambda p: "/" + p),
    method=st.sampled_from(["GET", "POST", "PUT", "DELETE"]),
)
@example(path="///", method="GET")  # refused by the test client of starlette 1.x, once
@example(path="//docs", method="POST")
def test_any_path_and_method_gets_json(client, path: str, method: str) -> None:
    # an absolute URL: the path is sent as written, as curl sends it ("//a" as a relative URL
    # would name the host "a", and newer clients refuse it); what the client still refuses
    # before sending (InvalidURL) was never sent: not a server failure
    try:
        response = client.request(method, "http://testserver" + path)
    except CLIENT_REFUSALS:
        assume(False)
    assert response.status_code < 500
    if response.status_code >= 400:
        assert response.json()["error"]["message"]


# ----------------------------------------------------------------------------- ranges, types
DECODING = ["seed", "temperature", "top_k", "top_p", "repetition_penalty", "max_new_tokens"]


@SETTINGS
@given(
    name=st.sampled_from(DECODING),
    value=st.one_of(
        st.integers(-(2**70), 2**70),
        st.sampled_from([0, 1, 2**31 - 1, 2**31, 2**63 - 1, 2**63, -1]),
        st.floats(allow_nan=True, allow_infinity=True),
        st.booleans(),
        st.text(max_size=4),
        st.none(),
    ),
)
def test_decoding_parameters_take_the_cli_ranges_and_strict_types(client, name, value) -> None:
    """Whatever the value, /v1/generate takes it iff it is of the field's JSON type (no
    coercion: a bool or a string is no number, a float no integer) and in the range the CLI
    checks (attnkit.core.params); and the CLI's check refuses exactly what the range refuses."""
    import argparse

    from attnkit.app.cli.common import UsageError, _sampling_args
    from attnkit.core.params import PARAMS

    param = PARAMS[name]
    body = {"model": "verse", "prompt": "a", "max_new_tokens": 1, name: value}
    response = client.post(
        "/v1/generate",
        content=json.dumps(body, allow_nan=True).encode(),
        headers={"content-type": "application/json"},
    )
    nullable = name in ("seed", "max_new_tokens")  # null: not given
    accepted = (value is None and nullable) or (value is not None and param.problem(value) is None)
    if name == "max_new_tokens" and isinstance(value, int) and value > 6:  # the server limit
        accepted = False
    assert response.status_code == (200 if accepted else 422), (value, response.text)
    if not accepted:
        assert response.json()["error"]["message"].startswith(name)  # "seed: ...", "... here"
    # the CLI gets what argparse makes of the option (int or float), then this check
    parsed = int if param.kind is int else float
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    if parsed is int and not isinstance(value, int):
        return
    args = argparse.Namespace(**{n: None for n in DECODING})
    setattr(args, name, parsed(value) if parsed is float and abs(value) < 1e308 else value)
    refused = PARAMS[name].problem(getattr(args, name)) is not None
    try:
        _sampling_args(args)
    except UsageError as exc:
        assert refused and str(exc).startswith(f"{param.option} must be"), exc
    else:
        assert not refused


_WRONG_TYPES = {
    bool: ["yes", 1, 0, "true", None],
    int: [True, "3", 3.0, 2.5, None],
    float: [True, "0.5", None],
}


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_no_field_is_coerced(client, endpoint: str) -> None:
    """Every bool, int and float field of every request: a value of another JSON type is
    422 naming the field (never coerced: "yes" -> true, true -> 1, "3" -> 3)."""
    model = REQUESTS[endpoint]
    for field, info in model.model_fields.items():
        kind = info.annotation
        if kind not in _WRONG_TYPES:  # str, lists, optional ints (null allowed) below
            kind = int if kind == (int | None) else None
        if kind is None:
            continue
        for wrong in _WRONG_TYPES[kind]:
            if wrong is None and info.annotation == (int | None):
                continue  # null is "not given"
            response = client.post(f"/v1/{endpoint}", json={field: wrong})
            assert response.status_code == 422, (field, wrong)
            messages = [d["loc"][-1] for d in response.json()["error"]["details"]]
            assert field in messages, (field, wrong, response.json())

"""What each endpoint does with a checked request: the predictor's public API, nothing else.

``check(endpoint, request, limits)`` runs first, in the event loop (cheap: sizes only);
``HANDLERS[endpoint](run, request, limits)`` then runs in a worker thread under the
server's model lock and returns the JSON body. ``BATCHED[endpoint](run, items, limits)``
answers several queued requests of one ``batch_key`` (``attnkit.app.serve.batching``'s
``Pending``) by one call of the predictor's batch API: the JSON body of each, as
``HANDLERS`` would give it; a request whose ``cancelled`` event is set while its batch runs
may stop early (a generation: at its next piece), and a streamed one gets its pieces."""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from attnkit.app.explain.page import DEFAULT_BEAM, DEFAULT_STEPS, explain_traces
from attnkit.app.explain.trace import family_of
from attnkit.app.serve.batching import Pending
from attnkit.app.serve.limits import Limits
from attnkit.app.serve.runs import ServedRun
from attnkit.app.serve.schemas import (
    AnswerRequest,
    ChatRequest,
    ClassifyRequest,
    ExplainRequest,
    GenerateRequest,
    TagRequest,
    TranslateRequest,
)
from attnkit.core.errors import InputError
from attnkit.tasks.lm import Generation, GenerationRequest, StopGeneration

DEFAULT_NEW_TOKENS = 64  # what /v1/generate produces when max_new_tokens is not given
EXPLAIN_MAX_STEPS = 64  # tokens one /v1/explain of an lm run may generate (and trace)


class PayloadTooLarge(Exception):
    """A request bigger than the server's limits (-> 413)."""


def _check_texts(texts: Sequence[str], limits: Limits, what: str = "text") -> None:
    if len(texts) > limits.max_texts:
        raise PayloadTooLarge(
            f"{len(texts)} {what}s in one request; this server takes at most {limits.max_texts}"
        )
    _check_chars(texts, limits.max_chars, what)


def _check_chars(texts: Sequence[str], limit: int, what: str) -> None:
    for i, text in enumerate(texts, 1):
        if len(text) > limit:
            raise PayloadTooLarge(
                f"{what} {i} has {len(text):,} characters; this server takes at most "
                f"{limit:,} per {what}"
            )


def check(endpoint: str, req: Any, limits: Limits, run: ServedRun | None = None) -> None:
    """Refuse a request over the limits: ``PayloadTooLarge`` (413) for sizes, ``InputError``
    (422) for parameters out of the server's range. ``run``: the run that answers (an
    /v1/explain of a qa run reads a question and a context: /v1/answer's limits)."""
    if isinstance(req, ClassifyRequest):
        _check_texts(req.texts, limits)
        if req.attention and len(req.texts) > limits.max_attention_texts:
            raise PayloadTooLarge(
                f"attention maps are returned for at most {limits.max_attention_texts} texts "
                f"per request, got {len(req.texts)}"
            )
        if req.pairs is not None:
            _check_texts(req.pairs, limits, "second sentence")
    elif isinstance(req, (TranslateRequest, TagRequest)):
        _check_texts(req.texts, limits)
        if isinstance(req, TranslateRequest) and req.beam > limits.max_beam:
            raise InputError(f"beam must be <= {limits.max_beam} here, got {req.beam}")
    elif isinstance(req, ChatRequest):
        _check_chars([req.message], limits.max_chars, "message")
    elif isinstance(req, GenerateRequest):
        _check_chars([req.prompt], limits.max_chars, "prompt")
        _check_texts(req.stop, limits, "stop string")
        if req.max_new_tokens is None:
            req.max_new_tokens = min(DEFAULT_NEW_TOKENS, limits.max_new_tokens)
        if req.max_new_tokens > limits.max_new_tokens:
            raise InputError(
                f"max_new_tokens must be <= {limits.max_new_tokens} here, got {req.max_new_tokens}"
            )
        if any(not s for s in req.stop):
            raise InputError("a stop string must not be empty")
    elif isinstance(req, AnswerRequest):
        _check_chars([req.question], limits.max_chars, "question")
        _check_chars([req.context], limits.max_context_chars, "context")
    elif isinstance(req, ExplainRequest):
        qa = run is not None and run.explainable and family_of(run.predictor) == "qa"
        _check_chars([req.text], limits.max_chars, "question" if qa else "text")
        if req.pair is not None and qa:  # a context, as /v1/answer takes it
            _check_chars([req.pair], limits.max_context_chars, "context")
        elif req.pair is not None:
            _check_chars([req.pair], limits.max_chars, "second sentence")
        if req.target is not None:
            _check_chars([req.target], limits.max_chars, "target")
        if req.beam is not None and req.beam > limits.max_beam:
            raise InputError(f"beam must be <= {limits.max_beam} here, got {req.beam}")
        most = min(limits.max_new_tokens, EXPLAIN_MAX_STEPS)
        if req.max_new_tokens is not None and req.max_new_tokens > most:
            raise InputError(f"max_new_tokens must be <= {most} here, got {req.max_new_tokens}")


def _rounded(rows: Any, digits: int = 4) -> Any:
    """Nested lists of floats, rounded (attention maps as compact JSON)."""
    if isinstance(rows, list):
        return [_rounded(r, digits) for r in rows]
    return round(float(rows), digits)


def _classify_options(run: ServedRun, req: ClassifyRequest) -> dict[str, Any]:
    """``predict``'s options for ``req`` (its second sentences), after the run's checks."""
    p = run.predictor
    options = {}
    if req.pairs is not None:
        if not p.can("sentence_pairs"):
            raise InputError("this model classifies single texts; it was not trained on pairs")
        options["pairs"] = req.pairs
    if req.attention and not p.can("attention"):
        raise InputError(f"model {run.name!r} has no attention maps to return")
    return options


def classify(run: ServedRun, req: ClassifyRequest, limits: Limits) -> dict[str, Any]:
    """Labels and probabilities; with ``attention``, per text the tokens and, per layer and
    head, the attention each token receives (the mean over all query positions of its
    column: what the web page highlights)."""
    p = run.predictor
    options = _classify_options(run, req)
    preds = p.predict(req.texts, **options)
    out = []
    for text, pred in zip(req.texts, preds, strict=True):
        item = pred.to_dict()
        if req.attention:
            tokens, weights = p.attention(text)  # per layer (H, T, T)
            item["attention"] = {
                "tokens": tokens,
                "received": [_rounded(w.mean(1).tolist()) for w in weights],  # (L, H, T)
            }
        out.append(item)
    return {"model": run.name, "predictions": out}


def translate(run: ServedRun, req: TranslateRequest, limits: Limits) -> dict[str, Any]:
    """Translations; with ``alignment`` (one text), its output x source cross-attention."""
    p = run.predictor
    if req.alignment:
        if not p.can("alignment"):
            raise InputError(f"model {run.name!r} has no alignment to return")
        if len(req.texts) != 1:
            raise InputError("alignment is given for one text per request")
        a = p.alignment(req.texts[0], beam=req.beam)
        return {
            "model": run.name,
            "translations": [a.text],
            "alignment": {
                "source": a.source,
                "output": a.output,
                "weights": _rounded(a.weights.tolist()),
            },
        }
    return {"model": run.name, "translations": p.translate(req.texts, beam=req.beam)}


def chat(run: ServedRun, req: ChatRequest, limits: Limits) -> dict[str, Any]:
    if not req.message.strip():
        raise InputError("the message is empty or whitespace only")
    answer = run.predictor.chat(
        req.message, temperature=req.temperature, top_k=req.top_k, top_p=req.top_p, seed=req.seed
    )
    return {"model": run.name, "answer": answer}


def generate(
    run: ServedRun,
    req: GenerateRequest,
    limits: Limits,
    stream: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """One continuation of the prompt (``stream(piece)`` gets it as it is produced)."""
    (g,) = run.predictor.generate_batch([_generation_request(req, stream)])
    return {"model": run.name, **g.to_dict()}


def _generation_request(
    req: GenerateRequest,
    stream: Callable[[str], None] | None,
    on_done: Callable[[Generation], None] | None = None,
) -> GenerationRequest:
    """The predictor's ``GenerationRequest`` for a /v1/generate body (``check`` has set its
    max_new_tokens)."""
    return GenerationRequest(
        req.prompt,
        max_new_tokens=int(req.max_new_tokens or DEFAULT_NEW_TOKENS),
        temperature=req.temperature,
        top_k=req.top_k,
        top_p=req.top_p,
        repetition_penalty=req.repetition_penalty,
        stop=req.stop or None,
        seed=req.seed,
        stream=stream,
        on_done=on_done,
    )


def tag(run: ServedRun, req: TagRequest, limits: Limits) -> dict[str, Any]:
    return {"model": run.name, "results": [t.to_dict() for t in run.predictor.tag(req.texts)]}


def answer(run: ServedRun, req: AnswerRequest, limits: Limits) -> dict[str, Any]:
    return {"model": run.name, **run.predictor.answer(req.question, req.context).to_dict()}


def explain(
    run: ServedRun, req: ExplainRequest, limits: Limits, max_tokens: int = 128
) -> dict[str, Any]:
    """The explorer page's data for one text: ``{"model", "traces": [{"label", "trace"}]}``
    (``attnkit.app.explain``: one trace; greedy and beam for a seq2seq run); an input
    longer than ``max_tokens`` tokens is cut, with a note."""
    steps = DEFAULT_STEPS if req.max_new_tokens is None else req.max_new_tokens
    traces = explain_traces(
        run.predictor,
        req.text,
        pair=req.pair,
        beam=min(DEFAULT_BEAM, limits.max_beam) if req.beam is None else req.beam,
        steps=min(steps, limits.max_new_tokens),
        temperature=req.temperature,
        top_k=req.top_k,
        seed=req.seed,
        max_tokens=max_tokens,
        pad_to=req.pad_to,
        target=req.target,
    )
    return {"model": run.name, "traces": [{"label": k, "trace": t} for k, t in traces]}


def batch_key(req: Any) -> str | None:
    """Which requests one forward pass may answer together (None: this one runs alone):
    classify requests without attention maps (those of single texts apart from those of
    sentence pairs), tag requests, and generate requests (each with its own options)."""
    if isinstance(req, ClassifyRequest):
        return None if req.attention else "texts" if req.pairs is None else "pairs"
    if isinstance(req, TagRequest):
        return "texts"
    if isinstance(req, GenerateRequest):
        return "prompts"
    return None


def batch_rows(req: Any) -> int:
    """The rows a request takes in a batch: its texts (one prompt for /v1/generate)."""
    return 1 if isinstance(req, GenerateRequest) else len(req.texts)


def _parts(items: Sequence[Any], reqs: Sequence[Any]) -> list[list[Any]]:
    """``items`` (one per text of all ``reqs``, in order) cut back into each request's."""
    out, start = [], 0
    for req in reqs:
        out.append(list(items[start : start + len(req.texts)]))
        start += len(req.texts)
    if start != len(items):
        raise RuntimeError(f"{len(items)} answers for {start} texts")
    return out


def classify_many(run: ServedRun, items: Sequence[Pending], limits: Limits) -> list[dict[str, Any]]:
    """``classify`` of several requests (of one ``batch_key``) by one ``predict`` call."""
    reqs: list[ClassifyRequest] = [item.request for item in items]
    options = [_classify_options(run, r) for r in reqs]
    texts = [t for r in reqs for t in r.texts]
    merged: dict[str, Any] = {}
    if "pairs" in options[0]:
        if any(len(r.pairs or ()) != len(r.texts) for r in reqs):  # each its own error
            raise InputError("a request's texts and second sentences differ in number")
        merged["pairs"] = [s for r in reqs for s in r.pairs or ()]
    preds = run.predictor.predict(texts, **merged)
    return [
        {"model": run.name, "predictions": [pred.to_dict() for pred in part]}
        for part in _parts(preds, reqs)
    ]


def tag_many(run: ServedRun, items: Sequence[Pending], limits: Limits) -> list[dict[str, Any]]:
    """``tag`` of several requests by one ``tag`` call."""
    reqs: list[TagRequest] = [item.request for item in items]
    results = run.predictor.tag([t for r in reqs for t in r.texts])
    return [
        {"model": run.name, "results": [t.to_dict() for t in part]}
        for part in _parts(results, reqs)
    ]


def _pieces(item: Pending) -> Callable[[str], None]:
    """The stream callback of a queued generation: its pieces to ``item.stream`` (if it is
    streamed), and the end of it once the request is given up (``item.cancelled``)."""

    def stream(piece: str) -> None:
        if item.cancelled.is_set():
            raise StopGeneration
        if item.stream is not None:
            item.streamed = True
            item.stream(piece)

    return stream


def generate_many(
    run: ServedRun,
    items: Sequence[Pending],
    limits: Limits,
    on_answer: Callable[[Pending, dict[str, Any]], None] | None = None,
    more: Callable[[int], Sequence[Pending]] | None = None,
) -> list[dict[str, Any]]:
    """``generate`` of several requests by one ``generate_batch`` call: each its own options
    and seed, its own stream and the warnings about its own prompt; a request given up
    stops at its next piece of text (the others go on). ``on_answer(item, body)`` gets each
    request's answer as soon as its generation is done (before the batch's others are).

    ``more(going)``: continuous batching, asked between two tokens for queued requests
    that join the running ones (``generate_batch``'s ``more``); the answers cover them
    too, after ``items``. One refused when it joins gets its error in its future."""
    items = list(items)
    refused: dict[int, Exception] = {}
    caught: list[warnings.WarningMessage] = []

    def answer(k: int, g: Generation) -> dict[str, Any]:
        body = {"model": run.name, **g.to_dict()}
        mine = _prompt_notes(caught, len(items))[k]
        return {**body, "warnings": mine} if mine else body

    def done(k: int) -> Callable[[Generation], None] | None:
        if on_answer is None:
            return None
        return lambda g: on_answer(items[k], answer(k, g))

    def refuse(k: int, exc: Exception) -> None:  # (a request that joins: its own 4xx)
        refused[k] = exc
        if not items[k].future.done():
            items[k].future.set_exception(exc)

    def request(k: int) -> GenerationRequest:
        r = _generation_request(items[k].request, _pieces(items[k]), done(k))
        r.on_error = lambda exc: refuse(k, exc)
        return r

    def join(going: int) -> list[GenerationRequest]:
        assert more is not None
        first = len(items)
        items.extend(more(going))
        return [request(k) for k in range(first, len(items))]

    requests = [request(k) for k in range(len(items))]
    with warnings.catch_warnings(record=True) as recorded:  # "input N: ..." -> request N's
        warnings.simplefilter("always")
        caught = recorded  # (what the prompts raised, before any request is done)
        generations = run.predictor.generate_batch(requests, more=join if more else None)
    for w in caught:  # warnings about no one prompt: the caller's (the server then answers
        if _prompt_note(w, len(items)) is None:  # each request alone)
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    answered = iter(generations)  # (one per request not refused, in order)
    return [
        {"error": str(refused[k])} if k in refused else answer(k, next(answered))
        for k in range(len(items))
    ]


_NUMBERED = re.compile(r"input (\d+): (.*)", re.DOTALL)  # generate_batch's prompt warnings


def _prompt_note(w: warnings.WarningMessage, n: int) -> tuple[int, str] | None:
    """Which of ``n`` prompts a warning of ``generate_batch`` is about, and what it says
    of it; None for a warning about no one prompt (not a UserWarning, or not numbered)."""
    if not issubclass(w.category, UserWarning):
        return None
    found = _NUMBERED.fullmatch(str(w.message))
    if found is not None and 0 < int(found[1]) <= n:
        return int(found[1]) - 1, found[2]
    if n == 1:  # (generate_batch numbers them for two prompts or more, or with ``more``)
        return 0, str(w.message)
    return None


def _prompt_notes(caught: Sequence[warnings.WarningMessage], n: int) -> list[list[str]]:
    """Each of ``n`` prompts' warnings (once each, in order)."""
    notes: list[list[str]] = [[] for _ in range(n)]
    for w in caught:
        if (note := _prompt_note(w, n)) is not None and note[1] not in notes[note[0]]:
            notes[note[0]].append(note[1])
    return notes


BATCHED: dict[str, Callable[..., list[dict[str, Any]]]] = {
    "classify": classify_many,
    "tag": tag_many,
    "generate": generate_many,
}

HANDLERS: dict[str, Callable[..., dict[str, Any]]] = {
    "classify": classify,
    "translate": translate,
    "chat": chat,
    "generate": generate,
    "tag": tag,
    "answer": answer,
    "explain": explain,
}

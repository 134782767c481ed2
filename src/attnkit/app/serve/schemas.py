"""The JSON bodies of ``attnkit serve``'s endpoints (pydantic models: FastAPI checks every
request against them and documents them at /docs). Unknown fields are refused (422), so a
misspelt option never passes silently, and types are strict (422, never coerced: ``"yes"``
is not a bool, ``true`` not an integer, ``"3"`` not a number; an integer is a number). The
ranges of the decoding parameters are ``attnkit.core.params.PARAMS``, the CLI's."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from attnkit.core.params import PARAMS

PAD_TO_MAX = 4096  # /v1/explain's pad_to: the run's own bound (its max_len) is checked after


def _check_text(value: Any) -> Any:
    """A string (or each string of a list) must be valid Unicode text: JSON's escapes can
    spell lone surrogates ("\\ud800"), which no tokenizer can read."""
    for text in value if isinstance(value, list) else [value]:
        if isinstance(text, str):
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                raise ValueError("the text holds a lone surrogate (invalid Unicode)") from None
    return value


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)

    @field_validator("*")
    @classmethod
    def _valid_text(cls, value: Any) -> Any:
        return _check_text(value)

    model: str | None = Field(
        None,
        description="which served run answers (GET /v1/models); may be left out when the "
        "server has one run for this endpoint",
    )


class ClassifyRequest(_Request):
    texts: list[str] = Field(..., min_length=1, description="the texts to classify, one batch")
    pairs: list[str] | None = Field(
        None, description="each text's second sentence, for a model trained on sentence pairs"
    )
    attention: bool = Field(
        False,
        description="also return each token's self-attention, per layer and head (Transformer "
        "and BERT classifiers of single texts)",
    )


class TranslateRequest(_Request):
    texts: list[str] = Field(..., min_length=1, description="the sentences to translate")
    beam: int = Field(1, **PARAMS["beam"].bounds(), description="beam width (1: greedy)")
    alignment: bool = Field(
        False, description="also return the cross-attention alignment (one text per request)"
    )


class ChatRequest(_Request):
    message: str = Field(..., description="what the user says")
    temperature: float = Field(0.7, **PARAMS["temperature"].bounds(), description="0: greedy")
    top_k: int = Field(0, **PARAMS["top_k"].bounds(), description="0: off")
    top_p: float = Field(0.9, **PARAMS["top_p"].bounds(), description="1: off")
    seed: int | None = Field(
        None, **PARAMS["seed"].bounds(), description="makes the answer reproducible"
    )


class GenerateRequest(_Request):
    prompt: str = Field("", description="the text to continue (may be empty)")
    max_new_tokens: int | None = Field(
        None,
        **PARAMS["max_new_tokens"].bounds(),
        description="default 64 (or the server's limit, if lower); at most the limit",
    )
    temperature: float = Field(1.0, **PARAMS["temperature"].bounds(), description="0: greedy")
    top_k: int = Field(0, **PARAMS["top_k"].bounds(), description="0: off")
    top_p: float = Field(1.0, **PARAMS["top_p"].bounds(), description="1: off")
    repetition_penalty: float = Field(
        1.0, **PARAMS["repetition_penalty"].bounds(), description="> 1 discourages repeats"
    )
    stop: list[str] = Field(default_factory=list, description="strings that end the text")
    seed: int | None = Field(
        None, **PARAMS["seed"].bounds(), description="makes sampling reproducible"
    )
    stream: bool = Field(
        False,
        description='answer as newline-delimited JSON: {"token": ...} lines as they are '
        'produced, then one {"done": true, ...} line',
    )


class TagRequest(_Request):
    texts: list[str] = Field(..., min_length=1, description="the texts to tag")


class AnswerRequest(_Request):
    question: str = Field(..., description="the question")
    context: str = Field(..., description="the text holding the answer")


class ExplainRequest(_Request):
    text: str = Field(
        ..., description="the text to step through (lm: the prompt; mlm: with [MASK] tokens)"
    )
    pair: str | None = Field(
        None,
        description="the second sentence, for a model trained on sentence pairs; a qa run's "
        "context (text: the question)",
    )
    beam: int | None = Field(
        None,
        **PARAMS["beam"].bounds(),
        description="translate/chat runs: the beam search shown beside greedy decoding (1: "
        "greedy only; default 4, or the server's limit if lower)",
    )
    max_new_tokens: int | None = Field(
        None,
        **PARAMS["max_new_tokens"].bounds(),
        description="lm runs: the tokens generated, one step each (default 8; at most the "
        "server's limit for explanations)",
    )
    temperature: float = Field(
        1.0, **PARAMS["temperature"].bounds(), description="lm runs: 0 = greedy"
    )
    top_k: int = Field(0, **PARAMS["top_k"].bounds(), description="lm runs: 0 = off")
    seed: int | None = Field(0, **PARAMS["seed"].bounds(), description="lm runs: the sampling seed")
    pad_to: int | None = Field(
        None,
        ge=1,
        le=PAD_TO_MAX,
        description="classify, mlm, tag, translate, chat runs: pad the text (a seq2seq run's "
        "source) with [PAD] to this many tokens, as in a batch beside a longer text (at most the "
        "tokens the run reads)",
    )
    target: str | None = Field(
        None,
        description="translate/chat runs: a reference output, to see teacher forcing (the "
        "decoder fed the reference shifted right, as in training) beside free decoding",
    )


REQUESTS: dict[str, type[_Request]] = {
    "classify": ClassifyRequest,
    "translate": TranslateRequest,
    "chat": ChatRequest,
    "generate": GenerateRequest,
    "tag": TagRequest,
    "answer": AnswerRequest,
    "explain": ExplainRequest,
}

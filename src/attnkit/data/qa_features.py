"""Extractive question answering over long contexts (SQuAD / KorQuAD with BERT).

The model reads ``[CLS] question [SEP] context-window [SEP]`` and predicts, at every
position, a start logit and an end logit; the answer is the context span maximising
``start_logit[i] + end_logit[j]`` (Devlin et al. 2019, section 4.2). A context longer than
the model's window is read in overlapping windows (Google's ``run_squad.py``; Hugging
Face's ``run_qa.py``), each one a :class:`QAFeature`, and the best span over all windows
wins (:func:`best_answer`).

``doc_stride`` has BERT's meaning here: consecutive windows START ``doc_stride`` context
tokens apart (the step). Hugging Face's ``stride`` is the OVERLAP instead; BERT's default
``doc_stride=128`` with windows of ``room`` tokens corresponds to HF's
``stride = room - 128``. If ``doc_stride`` exceeds the window size, windows are placed back
to back (step = window size, as ``run_squad.py``'s ``min(length, doc_stride)``), so no
context token is ever skipped.

Training targets: ``start_position``/``end_position`` are the answer's first and last
token in the window, or ``0, 0`` (the [CLS] position) when the window does not contain the
whole answer or there is no answer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from attnkit.core.errors import DataError, InputError
from attnkit.data.tokenization import cut_text

if TYPE_CHECKING:
    from attnkit.data.tokenization import Tokenizer

__all__ = ["Answer", "QAFeature", "best_answer", "decode_span", "make_features"]

Span = tuple[int, int]


@dataclass
class QAFeature:
    """One window of one question-context example.

    Attributes:
        example_index: which example (question) this window belongs to.
        input_ids: ``[CLS] question [SEP] window [SEP]``, length T <= max_len.
        token_type_ids: length T: 0 for [CLS], the question and the first [SEP]; 1 for the
            context window and the last [SEP].
        offsets: length T: each context token's ``(start, end)`` character span in the
            context; None for [CLS], question tokens and both [SEP].
        start_position, end_position: the answer's first and last token (indices into
            ``input_ids``) when the whole answer is inside this window, else ``0, 0``
            ([CLS]); ``0, 0`` too when the example has no answer.
        window_index: 0 for the first window of the example, 1 for the next, ...
    """

    example_index: int
    input_ids: list[int]
    token_type_ids: list[int]
    offsets: list[Span | None]
    start_position: int
    end_position: int
    window_index: int


@dataclass
class Answer:
    """The predicted answer: ``text == context[start:end]`` and its span score
    (start logit + end logit); ``("", -1, -1, -inf)`` when there was no span to pick."""

    text: str
    start: int
    end: int
    score: float


# --------------------------------------------------------------------------------------
# Features
# --------------------------------------------------------------------------------------
def _window_starts(num_tokens: int, room: int, doc_stride: int) -> list[int]:
    """First context token of each window: 0, step, 2*step, ... until a window reaches the
    last token (step = min(doc_stride, room))."""
    step = min(doc_stride, room)
    starts = [0]
    while starts[-1] + room < num_tokens:
        starts.append(starts[-1] + step)
    return starts


def _answer_tokens(answer: tuple[str, int], context: str, offsets: Sequence[Span]) -> Span:
    """First and last context token of the answer's character span ``[s, e)``.

    The first token is the one covering ``s`` (or, if ``s`` falls on a character no token
    covers, such as a space, the first token after it); the last token is the one covering
    ``e - 1`` (or the last token before it).
    """
    text, s = answer
    e = s + len(text)
    if not text or s < 0 or e > len(context):
        raise DataError(
            f"answer {text!r} at character {s} is not inside the context ({len(context)} characters)"
        )
    if context[s:e] != text:
        raise DataError(f"answer {text!r} does not occur at character {s} of the context")
    first = next((i for i, (a, b) in enumerate(offsets) if b > s), None)
    last = next((i for i in reversed(range(len(offsets))) if offsets[i][0] < e), None)
    if first is None or last is None or first > last:
        raise DataError(f"answer {text!r} at character {s} covers no token of the context")
    return first, last


def _question_ids(tokenizer: Tokenizer, question: str, max_question_len: int) -> list[int]:
    if not question.strip():
        raise InputError("the question is empty")
    if max_question_len < 1:
        raise InputError(f"max_question_len must be >= 1, got {max_question_len}")
    ids = tokenizer.encode(question, max_len=max_question_len)  # cut before tokenization too
    if not ids:
        raise InputError(f"the question {question!r} has no tokens")
    return ids


def make_features(
    tokenizer: Tokenizer,
    question: str,
    context: str,
    answer: tuple[str, int] | None,
    example_index: int,
    max_len: int = 384,
    doc_stride: int = 128,
    max_question_len: int = 64,
) -> list[QAFeature]:
    """The windows of one example: ``[CLS] question [SEP] window [SEP]`` each.

    The question keeps its first ``max_question_len`` tokens; each window holds
    ``room = max_len - len(question) - 3`` context tokens (fewer in the last one), and
    windows start ``doc_stride`` tokens apart (see the module docstring) until one reaches
    the end of the context, so every context token is in at least one window.

    Args:
        tokenizer: a WordPiece tokenizer with [CLS] and [SEP] (character offsets needed).
        question, context: the texts.
        answer: ``(text, start_char)`` with ``context[start_char:][:len(text)] == text``,
            or None (prediction, or an unanswerable question).
        example_index: copied into every feature.
        max_len: tokens per window, special tokens included.
        doc_stride: context tokens between the starts of consecutive windows (>= 1).
        max_question_len: question tokens kept.

    Raises:
        InputError: an empty question or context, ``doc_stride < 1``, or a ``max_len`` that
            leaves no room for context after the (truncated) question and 3 special tokens.
        DataError: the answer's character span is not inside the context, does not match
            its text, or covers no token.
    """
    q_ids = _question_ids(tokenizer, question, max_question_len)
    if not context.strip():
        raise InputError("the context is empty")
    if doc_stride < 1:
        raise InputError(f"doc_stride must be >= 1, got {doc_stride}")
    room = max_len - len(q_ids) - 3
    if room < 1:
        raise InputError(
            f"max_len={max_len} leaves no room for context after {len(q_ids)} question tokens and 3 special tokens"
        )
    # a context is read whole, in windows; only a huge one is cut (to MAX_TEXT_CHARS
    # characters: hundreds of windows) before tokenization; an answer beyond is not seen
    context, cut = cut_text(context)
    c_ids, c_offsets = tokenizer.encode_offsets(context)
    if cut and answer is not None and answer[1] + len(answer[0]) > len(context):
        answer = None
    if not c_ids:
        raise InputError(f"the context {context[:40]!r} has no tokens")
    answer_span = _answer_tokens(answer, context, c_offsets) if answer is not None else None
    head = [tokenizer.cls_id, *q_ids, tokenizer.sep_id]
    features = []
    for w, start in enumerate(_window_starts(len(c_ids), room, doc_stride)):
        end = min(start + room, len(c_ids))  # window = context tokens [start, end)
        s_pos = e_pos = 0
        if answer_span is not None and start <= answer_span[0] and answer_span[1] < end:
            s_pos, e_pos = (len(head) + i - start for i in answer_span)
        offsets: list[Span | None] = [None] * len(head)
        features.append(
            QAFeature(
                example_index=example_index,
                input_ids=head + c_ids[start:end] + [tokenizer.sep_id],
                token_type_ids=[0] * len(head) + [1] * (end - start + 1),
                offsets=[*offsets, *c_offsets[start:end], None],
                start_position=s_pos,
                end_position=e_pos,
                window_index=w,
            )
        )
    return features


# --------------------------------------------------------------------------------------
# Decoding
# --------------------------------------------------------------------------------------
def _as_floats(logits: Any, length: int, name: str) -> np.ndarray:
    """A list / 1-D tensor of logits -> float64 array of its first ``length`` values."""
    if hasattr(logits, "detach"):  # torch.Tensor, without importing torch here
        logits = logits.detach().float().cpu().numpy()
    arr = np.asarray(logits, dtype=np.float64)
    if arr.ndim != 1 or arr.shape[0] < length:
        raise InputError(f"{name} must be 1-D with >= {length} values, got shape {arr.shape}")
    return arr[:length]


def _context_range(feature: QAFeature) -> tuple[int, int]:
    """First and one-past-last position of the context tokens in ``feature``."""
    positions = [i for i, o in enumerate(feature.offsets) if o is not None]
    return (positions[0], positions[-1] + 1) if positions else (0, 0)


def _scored_spans(s: np.ndarray, e: np.ndarray, max_answer_len: int) -> tuple[np.ndarray, ...]:
    """Every span ``i <= j < i + max_answer_len`` of ``n = len(s)`` positions: (score, i, j)
    arrays, best first (ties: earlier start, then shorter)."""
    n = len(s)
    parts = [
        (s[: n - k] + e[k:], np.arange(n - k), np.arange(k, n))
        for k in range(min(max_answer_len, n))
    ]
    score, i, j = (np.concatenate(x) for x in zip(*parts, strict=True))
    order = np.lexsort((j, i, -score))
    return score[order], i[order], j[order]


def decode_span(
    start_logits: Sequence[float] | Any,
    end_logits: Sequence[float] | Any,
    feature: QAFeature,
    max_answer_len: int = 30,
    n_best: int = 20,
) -> list[tuple[float, int, int]]:
    """The ``n_best`` best answer spans of one window, as character spans of the context.

    Considers every token span ``i <= j`` with ``j - i + 1 <= max_answer_len`` whose both
    ends are context tokens of this window (never [CLS], question tokens or [SEP]); its
    score is ``start_logits[i] + end_logits[j]``. Spans that give the same characters
    (BERT's uncased vocabulary splits a Hangul syllable into jamo pieces sharing one
    offset) are reported once, with their best score. Exact, not the top-k approximation
    of ``run_qa.py``.

    Args:
        start_logits, end_logits: per position of ``feature.input_ids`` (lists or 1-D
            tensors; longer, padded ones are cut to ``len(feature.input_ids)``).
        feature: the window the logits were computed for.
        max_answer_len: longest answer, in tokens.
        n_best: how many spans to return at most.

    Returns:
        ``[(score, start_char, end_char), ...]`` best first; ``context[start_char:end_char]``
        is the answer text. Empty if the window has no context tokens.
    """
    if max_answer_len < 1 or n_best < 1:
        raise InputError(f"max_answer_len and n_best must be >= 1, got {max_answer_len}, {n_best}")
    length = len(feature.input_ids)
    s = _as_floats(start_logits, length, "start_logits")
    e = _as_floats(end_logits, length, "end_logits")
    lo, hi = _context_range(feature)
    if lo == hi:
        return []
    scores, starts, ends = _scored_spans(s[lo:hi], e[lo:hi], max_answer_len)
    out: list[tuple[float, int, int]] = []
    seen: set[Span] = set()
    for score, i, j in zip(scores.tolist(), starts.tolist(), ends.tolist(), strict=True):
        a, b = feature.offsets[lo + i], feature.offsets[lo + j]
        chars = (a[0], b[1])  # type: ignore[index]  # context positions have offsets
        if chars not in seen:
            seen.add(chars)
            out.append((float(score), *chars))
            if len(out) == n_best:
                break
    return out


def best_answer(
    features: Sequence[QAFeature],
    start_logits_per_feature: Sequence[Any],
    end_logits_per_feature: Sequence[Any],
    context: str,
    max_answer_len: int = 30,
) -> Answer:
    """The best span over all windows of one example (:func:`decode_span` in each).

    A token in several windows is scored in each; the highest-scoring span wins (ties: the
    earlier window). ``Answer("", -1, -1, -inf)`` if no window has a valid span, which
    only happens when ``features`` is empty or has no context tokens (an empty context;
    :func:`make_features` refuses those).

    Raises:
        InputError: the features belong to different examples, or the logits lists do
            not have one entry per feature.
    """
    if len({f.example_index for f in features}) > 1:
        raise InputError("best_answer takes the features of ONE example")
    if not len(features) == len(start_logits_per_feature) == len(end_logits_per_feature):
        raise InputError(
            f"{len(features)} features but {len(start_logits_per_feature)} start and "
            f"{len(end_logits_per_feature)} end logit sequences"
        )
    best = Answer("", -1, -1, -math.inf)
    for feature, s, e in zip(
        features, start_logits_per_feature, end_logits_per_feature, strict=True
    ):
        spans = decode_span(s, e, feature, max_answer_len=max_answer_len, n_best=1)
        if spans and spans[0][0] > best.score:
            score, a, b = spans[0]
            best = Answer(context[a:b], a, b, score)
    return best

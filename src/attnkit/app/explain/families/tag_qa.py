"""BERT with a head over every token: a tag (NER) run (``tag``) and extractive question
answering (``qa``)."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from attnkit.app.explain.families.common import (
    Options,
    Part,
    _full_qkv,
    _norm_first,
    _pad_note,
    _pe_table,
    _taps,
    pad_input,
)
from attnkit.app.explain.parts import (
    embedding_part,
    first_layer_input,
    input_part,
    pending,
    stack_part,
)
from attnkit.core.errors import InputError
from attnkit.data.ner_features import (
    continuation_ids,
    encode_pieces,
    encode_tagged,
    unit_predictions,
    word_predictions,
)
from attnkit.data.qa_features import decode_span, make_features
from attnkit.data.tokenization import MAX_TEXT_CHARS, cut_text
from attnkit.nn.capture import Recorder, capture
from attnkit.tasks.metrics import get_entities
from attnkit.tasks.tag import split_words


# --------------------------------------------------------------------------------------
# token tagging (NER)
# --------------------------------------------------------------------------------------
def _bert_parts(
    rec: Recorder, model: nn.Module, length: int, full: bool
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The embeddings and the encoder stack of a BERT with a head (tagger, QA)."""
    stack = stack_part(rec, "encoder", "input", _norm_first(rec), full)
    c = model.config
    emb = embedding_part(rec, "input", first_layer_input(rec), "token", None,
                         layer_norm=c.EMBEDDING_LAYER_NORM,
                         table=_pe_table(model, length))  # fmt: skip
    return [emb] if emb else [], [stack] if stack else []


def tag(predictor: Any, text: str, opts: Options) -> Part:
    """A tag (NER) run: the label predicted at every position, each word's label (its first
    piece's; per character for a KLUE-NER run) and the entities, as ``predictor.tag``."""
    model, tk, cfg = predictor.model, predictor.tokenizer, predictor.config
    if not isinstance(text, str) or not text.strip():
        raise InputError("input is empty or whitespace only")
    bound = min(int(cfg.data.max_len), opts.max_tokens)
    piece = predictor.word_unit == "piece"
    text, chars_cut = cut_text(text, bound)  # as predictor.tag: beyond, nothing is labelled
    words = split_words(text, "char" if piece else predictor.word_unit)
    spans = [(a, b) for _, a, b in words]
    if piece:
        feature = encode_pieces(tk, text, spans, None, None, bound)
    else:
        feature = encode_tagged(tk, [w for w, _, _ in words], None, None, bound)
    cut = bool(feature.truncated or chars_cut)
    notes = [f"the text was cut to {bound} word pieces: the words that did not fit are "
             "labelled O"] if cut else []  # fmt: skip
    length = len(feature.input_ids)
    ids, real, _ = pad_input(feature.input_ids, tk.pad_id, opts.pad_to, bound)
    if len(ids) > length:
        notes.append(_pad_note(len(ids) - length, len(ids)))
    x = torch.tensor([ids], device=predictor.device)
    taps = _taps(model, token=("embeddings.word",))
    with torch.no_grad(), capture(model, taps) as rec:
        logits = model(x, torch.tensor([real], device=predictor.device)).logits[0].float().cpu()
    probs = logits.softmax(-1)  # (T, C)
    predicted = logits.argmax(-1)
    labels = predictor.labels
    if piece:
        unit_ids = unit_predictions(predicted, feature.unit_position, feature.unit_first,
                                    continuation_ids(labels), predictor.outside_id)  # fmt: skip
        first = list(feature.unit_position)
    else:
        unit_ids = word_predictions(predicted, feature.word_index, len(words),
                                    predictor.outside_id)  # fmt: skip
        first = [-1] * len(words)
        for position, w in enumerate(feature.word_index):
            if 0 <= w < len(words) and first[w] < 0:
                first[w] = position
    word_labels = [labels[k] for k in unit_ids]
    entities = [
        {"type": kind, "text": text[spans[a][0] : spans[b][1]], "start": spans[a][0],
         "end": spans[b][1]}
        for kind, a, b in get_entities(word_labels)
    ]  # fmt: skip
    view = {
        "kind": "tag",
        "labels": list(labels),
        "unit": "char" if piece else predictor.word_unit,
        "predicted": [labels[int(k)] for k in predicted],
        "probabilities": pending(probs, "probabilities"),
        "words": [
            {"word": w, "label": label, "position": None if p < 0 else int(p)}
            for (w, _, _), label, p in zip(words, word_labels, first, strict=True)
        ],
        "entities": entities,
    }
    embeddings, stacks = _bert_parts(rec, model, len(ids), _full_qkv(opts.qkv, rec))
    inputs = [input_part("input", tk, ids, None, cut, bound, padded=len(ids) - length)]
    return Part(inputs, embeddings, stacks, view, notes)


# --------------------------------------------------------------------------------------
# extractive question answering
# --------------------------------------------------------------------------------------
def _strip(context: str, start: int, end: int) -> tuple[int, int]:
    """The span without leading / trailing whitespace (as ``QAPredictor.answer``)."""
    while start < end and context[start].isspace():
        start += 1
    while end > start and context[end - 1].isspace():
        end -= 1
    return start, end


def qa(predictor: Any, text: str, opts: Options) -> Part:
    """A qa run: ``text`` is the question, ``opts.pair`` the context (segments A and B).
    The context is read in windows as ``predictor.answer`` reads it; the window shown is
    the one its answer comes from."""
    model, tk, cfg = predictor.model, predictor.tokenizer, predictor.config
    question, context = text, opts.pair
    if context is None:
        raise InputError("a qa run reads a question and a context: give the context as the "
                         "second text (--pair CONTEXT)")  # fmt: skip
    if not isinstance(context, str):
        raise InputError(f"the context must be a string, got {type(context).__name__}")
    if not question.strip():
        raise InputError("the question is empty or whitespace only")
    bound = min(int(cfg.data.max_len), opts.max_tokens)
    if bound < int(cfg.data.max_len):  # the explainer's bound: room for the question?
        asked = len(tk.encode(question, max_len=predictor.max_question_len))
        if bound < asked + 4:
            raise InputError(f"max_tokens (--max-tokens) must be >= {asked + 4} for this "
                             f"question: its {asked} tokens, [CLS], two [SEP] and a token of "
                             f"the context, got {bound}")  # fmt: skip
    features = make_features(tk, question, context, None, 0, bound, predictor.doc_stride,
                             predictor.max_question_len)  # fmt: skip
    n_answer = predictor.max_answer_len
    notes: list[str] = []
    if len(context) > MAX_TEXT_CHARS:  # as predictor.answer reads it, saying so
        notes.append(f"the context is longer than {MAX_TEXT_CHARS:,} characters: only its "
                     "beginning is read")  # fmt: skip
    shown = 0
    if len(features) > 1:  # the window of the best span (ties: the earlier, as best_answer)
        best = -math.inf
        for w, (s, e) in enumerate(predictor.window_logits(features)):
            spans = decode_span(s, e, features[w], max_answer_len=n_answer, n_best=1)
            if spans and spans[0][0] > best:
                best, shown = spans[0][0], w
        notes.append(f"the context is read in {len(features)} windows of at most {bound} "
                     f"tokens; shown: window {shown + 1}, which holds the answer")  # fmt: skip
    _, question_cut = tk.encode(question, max_len=predictor.max_question_len,
                                return_truncated=True)  # fmt: skip
    if question_cut:
        notes.append(f"the question was cut to its first {predictor.max_question_len} tokens "
                     "(max_question_len)")  # fmt: skip
    f = features[shown]
    x = torch.tensor([f.input_ids], device=predictor.device)
    types = torch.tensor([f.token_type_ids], device=predictor.device)
    taps = _taps(model, token=("embeddings.word",))
    with torch.no_grad(), capture(model, taps) as rec:
        out = model(x, torch.ones_like(x, dtype=torch.bool), types)
    start_logits, end_logits = out.start_logits[0].float().cpu(), out.end_logits[0].float().cpu()
    spans = decode_span(start_logits, end_logits, f, max_answer_len=n_answer, n_best=5)
    score, a, b = spans[0]
    first = next(p for p, o in enumerate(f.offsets) if o is not None and o[0] == a)
    last = max(p for p, o in enumerate(f.offsets) if o is not None and o[1] == b)
    a, b = _strip(context, a, b)
    view = {
        "kind": "qa",
        "question": question,
        "context": context,
        "answer": {
            "text": context[a:b],
            "start": a,
            "end": b,
            "score": float(score),
            "start_token": first,
            "end_token": last,
        },  # fmt: skip
        "start_logits": pending(start_logits, "span"),
        "end_logits": pending(end_logits, "span"),
        "start_probabilities": pending(start_logits.softmax(-1), "span"),
        "end_probabilities": pending(end_logits.softmax(-1), "span"),
        "candidates": [
            {"text": context[s:e].strip(), "start": s, "end": e, "score": float(sc)}
            for sc, s, e in spans
        ],
        "windows": len(features),
        "window": shown,
    }
    embeddings, stacks = _bert_parts(rec, model, len(f.input_ids), _full_qkv(opts.qkv, rec))
    inputs = [input_part("input", tk, f.input_ids, f.token_type_ids,
                         len(features) > 1 or question_cut, bound)]  # fmt: skip
    return Part(inputs, embeddings, stacks, view, notes)

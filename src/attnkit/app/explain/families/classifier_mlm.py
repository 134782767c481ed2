"""The encoders that read one text (or a sentence pair): a classify run (``classifier``), a
masked LM's [MASK] fill-in (``mlm``) and a bert-pretrain run's sentence pair with its NSP
head (``mlm_pair``)."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torch import nn

from attnkit.app.explain.families.common import (
    Options,
    Part,
    _cut_note,
    _full_qkv,
    _norm_first,
    _pad_note,
    _pe_table,
    _stack_name,
    _taps,
    _top,
    pad_input,
)
from attnkit.app.explain.families.lm_bilm import elmo_mix
from attnkit.app.explain.parts import (
    embedding_part,
    first_layer_input,
    input_part,
    pending,
    stack_part,
)
from attnkit.core.errors import InputError
from attnkit.data.segments import pair_ids
from attnkit.nn.capture import capture
from attnkit.tasks.classify import classifier_output
from attnkit.tasks.classify import encode_texts as classify_encode


# --------------------------------------------------------------------------------------
# classifier
# --------------------------------------------------------------------------------------
def classifier(predictor: Any, text: str, opts: Options) -> Part:
    """A classify run (Transformer, RNN/LSTM/GRU, GPT-, BERT-, ELMo-classifier, n-grams)."""
    model, tk, cfg = predictor.model, predictor.tokenizer, predictor.config
    pairs = None if opts.pair is None else [opts.pair]
    ids, types, cut = predictor.encode([text], pairs)  # the predictor's checks and warnings
    notes: list[str] = []
    bounded, bound = cut[0], int(cfg.data.max_len)
    if len(ids[0]) > opts.max_tokens:  # the explainer's own bound, below data.max_len
        short = dataclasses.replace(
            cfg, data=dataclasses.replace(cfg.data, max_len=opts.max_tokens)
        )
        ids, types, _ = classify_encode(tk, [text], short, pairs)
        notes.append(_cut_note("input", opts.max_tokens, getattr(cfg.data, "truncation", "head")))
        bounded, bound = True, opts.max_tokens
    elif cut[0]:
        notes.append(f"the input was cut to the run's data.max_len = {cfg.data.max_len} tokens")
    length = len(ids[0])
    padded, real, padded_types = pad_input(ids[0], tk.pad_id, opts.pad_to,
                                           min(int(cfg.data.max_len), opts.max_tokens),
                                           None if types is None else types[0])  # fmt: skip
    n_pad = len(padded) - length
    if n_pad:
        notes.append(_pad_note(n_pad, len(padded)))

    def batch_of(ids_row: list[int], mask_row: list[bool], types_row: list[int] | None) -> dict:
        b = {"input_ids": torch.tensor([ids_row], device=predictor.device),
             "attention_mask": torch.tensor([mask_row], device=predictor.device)}  # fmt: skip
        if types_row is not None:
            b["token_type_ids"] = torch.tensor([types_row], device=predictor.device)
        return b

    batch = batch_of(padded, real, padded_types)
    taps = _taps(model, pooled=("head", "classifier"), token=("tok_embed", "embeddings.word",
                 "embed"), position=("pos.embedding",))  # fmt: skip
    if not isinstance(taps.get("pooled"), nn.Linear):  # (the n-gram model has no head)
        taps.pop("pooled", None)
    with torch.no_grad(), capture(model, taps) as rec:
        logits = classifier_output(model, batch).logits[0].float().cpu()
    if n_pad:  # the prediction of the padded text is the text's own: the mask sees to it
        with torch.no_grad():
            alone = classifier_output(model, batch_of(ids[0], [True] * length,
                                      None if types is None else types[0])).logits[0]  # fmt: skip
        gap = float((alone.float().cpu() - logits).abs().max())
        notes.append(f"the logits with the padding equal the text's own, alone (largest "
                     f"difference {gap:.1e})" if gap < 1e-4 else f"the padding changes this "
                     f"model's logits (by up to {gap:.3g}): it does not mask padding everywhere")  # fmt: skip
    probs = (logits / predictor.temperature).softmax(-1)
    c = cfg.model
    pooled = rec.of("tap", "pooled")
    pooling = getattr(c, "pooling_used", None) or getattr(c, "pooling", None) or "n-grams"
    view: dict[str, Any] = {
        "kind": "classifier",
        "labels": list(predictor.labels),
        "logits": logits.tolist(),
        "probabilities": probs.tolist(),
        "temperature": float(predictor.temperature),
        "predicted": predictor.labels[int(probs.argmax())],
        "pooling": pooling,
        "pooled": pending(pooled[0]["input"][0], "pooled") if pooled else None,
    }
    mix = rec.of("scalar_mix")
    # ELMo: the task model reads a mix of the biLM's (LSTM) layers; a frozen BERT's mix is of
    # its attention layers
    elmo = bool(mix) and not rec.of("attention")
    if elmo:
        view["elmo"] = elmo_mix(mix[0], trim=True)
    elif mix:  # a frozen BERT's layers, mixed for the head (freeze_encoder)
        view["mix"] = elmo_mix(mix[0])
    inputs = [input_part("input", tk, padded, padded_types, bounded, bound, padded=n_pad)]
    full = _full_qkv(opts.qkv, rec)
    stack = stack_part(rec, _stack_name(rec), "input", _norm_first(rec), full)
    emb = None
    if not elmo:
        emb = embedding_part(rec, "input", first_layer_input(rec), "token", "position",
                             layer_norm=c.EMBEDDING_LAYER_NORM,
                             table=_pe_table(model, len(padded)))  # fmt: skip
    return Part(inputs, [emb] if emb else [], [stack] if stack else [], view, notes)


# --------------------------------------------------------------------------------------
# masked LM
# --------------------------------------------------------------------------------------
def mlm(predictor: Any, text: str, opts: Options) -> Part:
    """An mlm or bert-pretrain run: [MASK] fill-in (a bert-pretrain run given a pair:
    ``mlm_pair``, its NSP head too)."""
    if opts.pair is not None:
        return mlm_pair(predictor, text, opts)
    model, tk, cfg = predictor.model, predictor.tokenizer, predictor.config
    if not isinstance(text, str) or not text.strip():
        raise InputError("input is empty or whitespace only")
    wrap = predictor.wrap_in_cls_sep
    bound = min(cfg.data.max_len, opts.max_tokens)
    ids, cut = tk.encode(text, max_len=bound, add_cls=wrap, add_sep=wrap, return_truncated=True)
    notes = [_cut_note("input", bound)] if cut else []
    length = len(ids)
    ids, real, _ = pad_input(ids, tk.pad_id, opts.pad_to, bound)
    if len(ids) > length:
        notes.append(_pad_note(len(ids) - length, len(ids)))
    x = torch.tensor([ids], device=predictor.device)
    mask = None if opts.pad_to is None else torch.tensor([real], device=predictor.device)
    where = x == tk.mask_id
    if not where.any():
        whole = tk.encode(text, max_len=cfg.data.max_len, add_cls=wrap, add_sep=wrap)
        if cut and bound < cfg.data.max_len and tk.mask_id in whole:
            raise InputError(f"the text's [MASK] is past the first {bound} tokens the "
                             "explainer reads (max_tokens, --max-tokens): give more")  # fmt: skip
        raise InputError("the text has no [MASK] token to fill in")
    taps = _taps(model, token=("embeddings.word",))
    with torch.no_grad(), capture(model, taps) as rec:
        logits = model(x, mask, positions=where).logits.float().cpu()  # (masks, V)
    probs = logits.softmax(-1)
    positions = where[0].nonzero().flatten().tolist()
    view = {
        "kind": "mlm",
        "masks": [
            {"position": p, "top": _top(tk, probs[i], opts.top)} for i, p in enumerate(positions)
        ],  # fmt: skip
    }
    c = cfg.model
    full = _full_qkv(opts.qkv, rec)
    stack = stack_part(rec, "encoder", "input", _norm_first(rec), full)
    emb = embedding_part(rec, "input", first_layer_input(rec), "token", None,
                         layer_norm=c.EMBEDDING_LAYER_NORM,
                         table=_pe_table(model, len(ids)))  # fmt: skip
    inputs = [input_part("input", tk, ids, None, cut, bound, padded=len(ids) - length)]
    return Part(inputs, [emb] if emb else [], [stack] if stack else [], view, notes)


# --------------------------------------------------------------------------------------
# next-sentence prediction (bert-pretrain, a pair)
# --------------------------------------------------------------------------------------
NO_NSP_HEAD = (
    "this run has no next-sentence (NSP) head: model.arch bert-mlm learns the masked LM only "
    "(RoBERTa's choice); train model.arch bert-pretraining for IsNext / NotNext"
)


def mlm_pair(predictor: Any, text: str, opts: Options) -> Part:
    """A bert-pretrain run given a pair: [CLS] A [SEP] B [SEP] with segments 0 / 1, as its
    NSP pairs were built; the NSP head's IsNext / NotNext and the fill-ins of any [MASK]."""
    model, tk, cfg = predictor.model, predictor.tokenizer, predictor.config
    if not predictor.can("next_sentence"):
        raise InputError("a second sentence is read by a bert-pretrain run (next-sentence "
                         "prediction), not by this mlm run: give one text")  # fmt: skip
    pair = opts.pair
    if not isinstance(text, str) or not text.strip() or not isinstance(pair, str) or (
            not pair.strip()):  # fmt: skip
        raise InputError("both sentences (A and B) must be non-empty")
    if getattr(opts, "pad_to", None) is not None:
        raise InputError("pad_to pads one text: a bert-pretrain run's sentence pair (next-"
                         "sentence prediction) is read as it is, without pad_to")  # fmt: skip
    bound = min(int(cfg.data.max_len), opts.max_tokens)
    a = tk.encode(text, max_len=cfg.data.max_len)  # as predictor.next_sentence cuts them
    b = tk.encode(pair, max_len=cfg.data.max_len)
    ids, types, cut = pair_ids(tk, a, b, bound)
    notes = [_cut_note("pair", bound, "longer sentence cut first")] if cut else []
    x = torch.tensor([ids], device=predictor.device)
    t = torch.tensor([types], device=predictor.device)
    where = x == tk.mask_id
    taps = _taps(model, token=("embeddings.word",))
    with torch.no_grad(), capture(model, taps) as rec:
        out = model(x, None, t, positions=where)
    probs = out.logits.float().cpu().softmax(-1)  # (masks, V)
    positions = where[0].nonzero().flatten().tolist()
    has_head = bool(cfg.model.predicts_next_sentence) and getattr(
        out, "next_sentence_logits", None) is not None  # fmt: skip
    if has_head:
        nsp_logits = out.next_sentence_logits[0].float().cpu()
        p = nsp_logits.softmax(-1)
        nsp = {"available": True, "is_next": float(p[0]), "not_next": float(p[1]),
               "logits": nsp_logits.tolist(),
               "note": "P(IsNext) = softmax(W h_[CLS]' + b)_0 over the pooled [CLS] vector "
               "h_[CLS]' = tanh(W_p h_[CLS] + b_p): how likely B follows A"}  # fmt: skip
    else:
        nsp = {"available": False, "is_next": None, "not_next": None, "logits": None,
               "note": NO_NSP_HEAD}  # fmt: skip
        notes.append(NO_NSP_HEAD)
    view = {
        "kind": "mlm",
        "masks": [
            {"position": q, "top": _top(tk, probs[i], opts.top)} for i, q in enumerate(positions)
        ],  # fmt: skip
        "nsp": nsp,
    }
    full = _full_qkv(opts.qkv, rec)
    stack = stack_part(rec, "encoder", "input", _norm_first(rec), full)
    emb = embedding_part(rec, "input", first_layer_input(rec), "token", None,
                         layer_norm=cfg.model.EMBEDDING_LAYER_NORM,
                         table=_pe_table(model, len(ids)))  # fmt: skip
    inputs = [input_part("input", tk, ids, types, cut, bound)]
    return Part(inputs, [emb] if emb else [], [stack] if stack else [], view, notes)

"""One function per family: run the predictor's model on one text under
``attnkit.nn.capture`` and build the trace's inputs, embeddings, stacks and ``view``
(``attnkit.app.explain.schema``). Each returns a ``Part``; ``attnkit.app.explain.trace``
assembles and encodes it."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from attnkit.app.explain.parts import (
    QKV_FULL_LIMIT,
    embedding_part,
    first_layer_input,
    input_part,
    lstm_attention_part,
    norms,
    pending,
    qkv_bytes,
    stack_part,
)
from attnkit.core.errors import InputError
from attnkit.data.batching import pad_batch
from attnkit.data.ner_features import (
    continuation_ids,
    encode_pieces,
    encode_tagged,
    unit_predictions,
    word_predictions,
)
from attnkit.data.qa_features import decode_span, make_features
from attnkit.data.tokenization import cut_text
from attnkit.models.elmo_classifier import add_boundaries
from attnkit.nn.capture import Recorder, capture
from attnkit.nn.generation import top_k_top_p_filter
from attnkit.nn.layers import SinusoidalPositionalEncoding
from attnkit.tasks.classify import classifier_output
from attnkit.tasks.classify import encode_texts as classify_encode
from attnkit.tasks.metrics import get_entities
from attnkit.tasks.seq2seq import decode
from attnkit.tasks.tag import split_words

__all__ = ["Options", "Part", "bilm", "classifier", "lm", "mlm", "qa", "seq2seq", "tag"]


@dataclass
class Options:
    """What ``trace`` was asked for (see its docstring)."""

    max_tokens: int = 128
    steps: int = 1
    temperature: float = 1.0
    top_k: int = 0
    seed: int | None = 0
    beam: int = 1
    top: int = 10
    qkv: str = "auto"
    pair: str | None = None


@dataclass
class Part:
    """A family's share of the trace, arrays still ``Pending``."""

    inputs: list[dict[str, Any]]
    embeddings: list[dict[str, Any]]
    stacks: list[dict[str, Any]]
    view: dict[str, Any]
    notes: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------
def _find(model: nn.Module, *suffixes: str) -> tuple[str, nn.Module] | None:
    """The first submodule whose name is or ends with one of ``suffixes`` (in that order)."""
    named = dict(model.named_modules())
    for suffix in suffixes:
        for name, module in named.items():
            if name == suffix or name.endswith("." + suffix):
                return name, module
    return None


def _taps(model: nn.Module, **wanted: tuple[str, ...]) -> dict[str, nn.Module]:
    """{tap name: module} for the ``wanted`` {tap name: module name suffixes} found."""
    out = {}
    for tap, suffixes in wanted.items():
        found = _find(model, *suffixes)
        if found is not None:
            out[tap] = found[1]
    return out


def _full_qkv(option: str, *recs: Recorder) -> bool:
    if option == "full":
        return True
    if option == "norms":
        return False
    return sum(qkv_bytes(r) for r in recs) <= QKV_FULL_LIMIT


PE_TABLE_ROWS = 64  # a sinusoidal table's rows shown for the PE heatmap of a short input


def _pe_table(model: nn.Module, length: int) -> Tensor | None:
    """The first min(max_len, 64) rows of the model's sinusoidal table, when the input is
    shorter than that (else the rows used are the heatmap: None)."""
    found = next((m for m in model.modules() if isinstance(m, SinusoidalPositionalEncoding)), None)
    rows = 0 if found is None else min(found.max_len, PE_TABLE_ROWS)
    return found.pe[:rows] if found is not None and length < rows else None


def _tokens(tokenizer: Any, ids: list[int]) -> list[str]:
    return [tokenizer.id_to_token(int(i)) or "?" for i in ids]


def _top(tokenizer: Any, probs: Tensor, k: int, logits: Tensor | None = None,
         filtered: Tensor | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """The ``k`` likeliest tokens of one distribution (V,) (by ``logits`` when given)."""
    ranking = logits if logits is not None else probs
    idx = ranking.topk(min(k, ranking.numel())).indices.tolist()
    out = []
    for i in idx:
        item: dict[str, Any] = {"token": tokenizer.id_to_token(i) or "?", "id": i,
                                "probability": float(probs[i])}  # fmt: skip
        if logits is not None:
            item["logit"] = float(logits[i])
        if filtered is not None:
            item["filtered"] = float(filtered[i])
        out.append(item)
    return out


def _cut_note(what: str, bound: int, keep: str = "beginning") -> str:
    return f"the {what} was cut to {bound} tokens (its {keep} kept): the explainer's bound"


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
    input_ids, mask = pad_batch(ids, tk.pad_id)
    batch = {
        "input_ids": input_ids.to(predictor.device),
        "attention_mask": mask.to(predictor.device),
    }
    if types is not None:
        batch["token_type_ids"] = torch.tensor(types, device=predictor.device)
    taps = _taps(model, pooled=("head", "classifier"), token=("tok_embed", "embeddings.word",
                 "embed"), position=("pos.embedding",))  # fmt: skip
    if not isinstance(taps.get("pooled"), nn.Linear):  # (the n-gram model has no head)
        taps.pop("pooled", None)
    with torch.no_grad(), capture(model, taps) as rec:
        logits = classifier_output(model, batch).logits[0].float().cpu()
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
    inputs = [input_part("input", tk, ids[0], None if types is None else types[0], bounded,
                         bound)]  # fmt: skip
    full = _full_qkv(opts.qkv, rec)
    stack = stack_part(rec, _stack_name(rec), "input", _norm_first(rec), full)
    emb = None
    if not elmo:
        emb = embedding_part(rec, "input", first_layer_input(rec), "token", "position",
                             layer_norm=c.EMBEDDING_LAYER_NORM,
                             table=_pe_table(model, len(ids[0])))  # fmt: skip
    return Part(inputs, [emb] if emb else [], [stack] if stack else [], view, notes)


def _norm_first(rec: Recorder) -> bool:
    """Whether the blocks normalise before their sublayers (GPT) or after (BERT, 2017)."""
    add_norm = rec.of("add_norm")
    return bool(add_norm and add_norm[0]["norm_first"])


def _stack_name(rec: Recorder) -> str:
    """ "decoder" for a stack under a look-ahead mask (GPT), else "encoder"."""
    roles = {r["role"] for r in rec.of("attention")}
    return "decoder" if "causal_self" in roles else "encoder"


def elmo_mix(r: Any, trim: bool = False) -> dict[str, Any]:
    """``ELMoMix`` of a ``scalar_mix`` record (``trim``: drop the [BOS]/[EOS] columns an
    ELMo classifier adds around the text)."""
    weights, gamma = r["weights"], r["gamma"]
    layers = torch.stack([h[0] for h in r["layers"]])  # (L + 1, T, 2H)
    out = r["output"][0]
    if trim:
        layers, out = layers[:, 1:-1], out[1:-1]
    contributions = norms(gamma * weights[:, None, None] * layers)
    return {
        "scalars": r["scalars"].tolist(),
        "weights": weights.tolist(),
        "gamma": float(gamma),
        "layer_norms": pending(norms(layers), "elmo"),
        "contributions": pending(contributions, "elmo"),
        "output_norms": pending(norms(out), "elmo"),
    }


# --------------------------------------------------------------------------------------
# GPT language model
# --------------------------------------------------------------------------------------
def _filtered(logits: Tensor, banned: Tensor, temperature: float, top_k: int) -> Tensor:
    """The distribution a token is drawn from (as ``attnkit.nn.generation.sample`` makes
    it): banned ids at -inf, then softmax(logits / T) after top-k; T = 0: one-hot argmax."""
    logits = logits.float()
    if banned.numel():
        logits = logits.index_fill(-1, banned.to(logits.device), float("-inf"))
    if temperature == 0.0:
        return torch.zeros_like(logits).scatter_(-1, logits.argmax(-1, keepdim=True), 1.0)
    shifted = (logits - logits.max(-1, keepdim=True).values).double()
    return top_k_top_p_filter(shifted / temperature, top_k, 1.0).softmax(-1).float()


FULL_VOCAB = 512  # lm steps: every logit is stored for a vocabulary this small (characters)
STORED_TOP = 64  # else the logits of the best 64 (the page renormalises over them)


def _distribution(logits: Tensor, top: int) -> dict[str, Any]:
    """``LMStep.distribution`` of one step's logits (V,): all of them for a small
    vocabulary, else the best max(64, ``top``) with their ids and their probability mass."""
    probs = logits.softmax(-1)
    if logits.numel() <= FULL_VOCAB:
        return {"complete": True, "ids": None, "logits": pending(logits, "logits"), "mass": 1.0}
    idx = logits.topk(min(max(STORED_TOP, top), logits.numel())).indices
    return {"complete": False, "ids": idx.tolist(), "logits": pending(logits[idx], "logits"),
            "mass": float(probs[idx].sum())}  # fmt: skip


def lm(predictor: Any, text: str, opts: Options) -> Part:
    """An lm run (GPT): the prompt's forward pass and ``opts.steps`` new tokens."""
    model, tk = predictor.model, predictor.tokenizer
    ids = list(predictor._prompt_ids(text))
    notes: list[str] = []
    room = min(opts.max_tokens, int(model.max_len)) - max(opts.steps - 1, 0)
    if room < 1:
        raise InputError(f"steps={opts.steps} leaves no room for the prompt within "
                         f"{min(opts.max_tokens, int(model.max_len))} tokens")  # fmt: skip
    truncated = len(ids) > room
    if truncated:
        ids = ids[-room:]
        notes.append(_cut_note("prompt", room, "end") + f" (with {opts.steps} new tokens)")
    banned = getattr(predictor, "banned", torch.empty(0, dtype=torch.long))
    device = predictor.device
    generator = None
    if opts.temperature > 0 and opts.seed is not None:
        generator = torch.Generator(device=device).manual_seed(int(opts.seed))
    generated: list[int] = []
    with torch.no_grad():
        for _ in range(opts.steps):
            x = torch.tensor([ids + generated], device=device)
            probs = _filtered(model(x).logits[0, -1], banned, opts.temperature, opts.top_k)
            if opts.temperature == 0.0:
                token = int(probs.argmax())
            else:
                token = int(torch.multinomial(probs, 1, generator=generator))
            generated.append(token)
            if predictor.documents and token == predictor.eos_id:
                break
    seq = ids + generated[:-1] if generated else ids
    taps = _taps(model, token=("tok_embed",), position=("pos.embedding",))
    with torch.no_grad(), capture(model, taps) as rec:
        logits = model(torch.tensor([seq], device=device)).logits[0].float().cpu()
    steps = []
    for k, token in enumerate(generated):
        p = len(ids) - 1 + k
        raw = logits[p].softmax(-1)
        filtered = _filtered(logits[p], banned.cpu(), opts.temperature, opts.top_k)
        entropy = float(-(raw * raw.clamp_min(1e-30).log()).sum())
        steps.append({
            "position": p,
            "chosen": {"token": tk.id_to_token(token) or "?", "id": token},
            "top": _top(tk, raw, opts.top, logits[p], filtered),
            "entropy": entropy,
            "distribution": _distribution(logits[p], opts.top),
        })  # fmt: skip
    view = {
        "kind": "lm",
        "prompt_length": len(ids),
        "temperature": float(opts.temperature),
        "top_k": int(opts.top_k),
        "seed": opts.seed,
        "banned": [int(i) for i in banned.tolist()],
        "steps": steps,
        "generated": _tokens(tk, generated),
    }
    full = _full_qkv(opts.qkv, rec)
    stack = stack_part(rec, "decoder", "input", True, full)
    emb = embedding_part(rec, "input", first_layer_input(rec), "token", "position")
    inputs = [input_part("input", tk, seq, None, truncated, opts.max_tokens)]
    return Part(inputs, [emb] if emb else [], [stack] if stack else [], view, notes)


# --------------------------------------------------------------------------------------
# masked LM
# --------------------------------------------------------------------------------------
def mlm(predictor: Any, text: str, opts: Options) -> Part:
    """An mlm or bert-pretrain run: [MASK] fill-in."""
    model, tk, cfg = predictor.model, predictor.tokenizer, predictor.config
    if not isinstance(text, str) or not text.strip():
        raise InputError("input is empty or whitespace only")
    wrap = predictor.wrap_in_cls_sep
    bound = min(cfg.data.max_len, opts.max_tokens)
    ids, cut = tk.encode(text, max_len=bound, add_cls=wrap, add_sep=wrap, return_truncated=True)
    notes = [_cut_note("input", bound)] if cut else []
    x = torch.tensor([ids], device=predictor.device)
    where = x == tk.mask_id
    if not where.any():
        raise InputError("the text has no [MASK] token to fill in")
    taps = _taps(model, token=("embeddings.word",))
    with torch.no_grad(), capture(model, taps) as rec:
        logits = model(x, None, positions=where).logits.float().cpu()  # (masks, V)
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
    inputs = [input_part("input", tk, ids, None, cut, bound)]
    return Part(inputs, [emb] if emb else [], [stack] if stack else [], view, notes)


# --------------------------------------------------------------------------------------
# ELMo's biLM
# --------------------------------------------------------------------------------------
def bilm(predictor: Any, text: str, opts: Options) -> Part:
    """A bilm run: the two LMs' predictions and the (equal) layer mix of ``embed``."""
    model, tk, cfg = predictor.model, predictor.tokenizer, predictor.config
    if not isinstance(text, str) or not text.strip():
        raise InputError("input is empty or whitespace only")
    bound = min(cfg.data.max_len, opts.max_tokens)
    ids, cut = tk.encode(text, max_len=bound, return_truncated=True)
    notes = [_cut_note("input", bound)] if cut else []
    x = torch.tensor([ids], device=predictor.device)
    mask = torch.ones_like(x, dtype=torch.bool)
    bos_eos = predictor.boundaries
    wide, wide_mask = (x, mask) if bos_eos is None else add_boundaries(x, mask, *bos_eos, tk.pad_id)
    with torch.no_grad(), capture(predictor.embedder) as rec:
        out = model(wide, wide_mask)
        predictor.embedder(wide, wide_mask)
    lo, hi = (0, len(ids)) if bos_eos is None else (1, len(ids) + 1)
    fwd = out.forward_logits[0].float().cpu().softmax(-1)
    bwd = out.backward_logits[0].float().cpu().softmax(-1)
    view = {
        "kind": "bilm",
        "forward": [{"position": t - lo, "top": _top(tk, fwd[t], opts.top)} for t in range(lo, hi)],
        "backward": [
            {"position": t - lo, "top": _top(tk, bwd[t], opts.top)} for t in range(lo, hi)
        ],
        "elmo": elmo_mix(rec.of("scalar_mix")[0], trim=bos_eos is not None),
    }
    inputs = [input_part("input", tk, ids, None, cut, bound)]
    return Part(inputs, [], [], view, notes)


# --------------------------------------------------------------------------------------
# seq2seq
# --------------------------------------------------------------------------------------
def seq2seq(predictor: Any, text: str, opts: Options) -> Part:
    """A translate / chat run (Transformer, or LSTM with any score function)."""
    model, tk = predictor.model, predictor.tokenizer
    ids = predictor._one(text)  # the predictor's checks, and its warning when it cuts
    # the predictor cuts the source to the run's data.max_len (``_encode``): the same call
    _, run_cut = tk.encode_batch([text], max_len=predictor.max_len, return_truncated=True)
    notes: list[str] = []
    truncated, bound = bool(run_cut[0]), int(predictor.max_len)
    if len(ids) > opts.max_tokens:  # the explainer's own bound, below data.max_len
        ids = ids[: opts.max_tokens]
        notes.append(_cut_note("source", opts.max_tokens))
        truncated, bound = True, opts.max_tokens
    elif truncated:
        notes.append(f"the source was cut to the run's data.max_len = {bound} tokens")
    src, src_mask = predictor._batch([ids])
    limit = predictor._limit(min(predictor.max_len, opts.max_tokens))
    with torch.no_grad():
        out = decode(model, src, src_mask, tk.bos_id, tk.eos_id, tk.pad_id, limit,
                     beam=opts.beam)[0]  # fmt: skip
    ended = len(out) < limit
    tgt = [tk.bos_id, *(out if ended else out[:-1])]
    tgt_in = torch.tensor([tgt], device=predictor.device)
    transformer = getattr(model, "has_cross_attention", False) and hasattr(model, "decoder") and (
        hasattr(model.decoder, "layers"))  # fmt: skip
    stacks: list[dict[str, Any]] = []
    embeddings: list[dict[str, Any]] = []
    alignment = None
    if transformer:
        with torch.no_grad(), capture(model) as enc:
            memory, _ = model.encode(src, src_mask)
        with torch.no_grad(), capture(model) as dec:
            logits, _ = model.decode(
                tgt_in, memory, src_mask, torch.ones_like(tgt_in, dtype=torch.bool)
            )
        full = _full_qkv(opts.qkv, enc, dec)
        norm_first = bool(model.config.norm_first)
        for rec, name, inp, mem in ((enc, "encoder", "source", None),
                                    (dec, "decoder", "target", "source")):  # fmt: skip
            stack = stack_part(rec, name, inp, norm_first, full, mem)
            if stack:
                stacks.append(stack)
            emb = embedding_part(rec, inp, first_layer_input(rec),
                                 table=_pe_table(model, max(len(ids), len(tgt))))  # fmt: skip
            if emb:
                embeddings.append(emb)
        last = [r for r in dec.of("attention") if r["role"] == "cross"][-1]
        alignment = last["weights"][0].mean(0)
        score = None
    else:
        taps = _taps(model, source=("src_embed",))
        with torch.no_grad(), capture(model, taps) as rec:
            result = model(src, tgt_in, src_mask)
        logits = result.logits
        emb = embedding_part(rec, "source", None, "source")
        if emb:
            embeddings.append(emb)
        score = None
        if getattr(model, "attention_name", None) is not None:
            score = {"name": model.score.name, "formula": model.score.formula}
            part = lstm_attention_part(rec, model.score, _full_qkv(opts.qkv, rec))
            if part is not None:
                stacks.append({"name": "decoder", "input": "target", "kind": "lstm",
                               "norm_first": False,
                               "layers": [{"index": 0, "attention": [part], "residual": None}]})  # fmt: skip
                alignment = torch.cat([r["weights"][0] for r in rec.of("softmax")], 0)
    probs = logits[0].float().cpu().softmax(-1)  # (T_out, V)
    chosen = [*out, *([tk.eos_id] if ended else [])]
    steps = [
        {"step": t + 1, "chosen": {"token": tk.id_to_token(tok) or "?", "id": int(tok)},
         "top": _top(tk, probs[t], opts.top)}
        for t, tok in enumerate(chosen)
    ]  # fmt: skip
    labels = _tokens(tk, out) + (["[EOS]"] if ended else [])
    view = {
        "kind": "seq2seq",
        "search": "beam" if opts.beam > 1 else "greedy",
        "beam": int(opts.beam),
        "output_tokens": labels,
        "output_text": tk.decode(out),
        "alignment": None if alignment is None else pending(alignment, "alignment"),
        "steps": steps,
        "score": score,
    }
    inputs = [input_part("source", tk, ids, None, truncated, bound),
              input_part("target", tk, tgt, None, not ended, limit)]  # fmt: skip
    return Part(inputs, embeddings, stacks, view, notes)


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
    ids = feature.input_ids
    x = torch.tensor([ids], device=predictor.device)
    taps = _taps(model, token=("embeddings.word",))
    with torch.no_grad(), capture(model, taps) as rec:
        logits = model(x, torch.ones_like(x, dtype=torch.bool)).logits[0].float().cpu()
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
    inputs = [input_part("input", tk, ids, None, cut, bound)]
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
    features = make_features(tk, question, context, None, 0, bound, predictor.doc_stride,
                             predictor.max_question_len)  # fmt: skip
    n_answer = predictor.max_answer_len
    notes: list[str] = []
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

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
from attnkit.core.errors import InputError, check_finite
from attnkit.data.batching import pad_batch
from attnkit.data.ner_features import (
    continuation_ids,
    encode_pieces,
    encode_tagged,
    unit_predictions,
    word_predictions,
)
from attnkit.data.qa_features import decode_span, make_features
from attnkit.data.segments import pair_ids
from attnkit.data.tokenization import MAX_TEXT_CHARS, cut_text
from attnkit.models.elmo_classifier import add_boundaries
from attnkit.nn.attention import SCORE_NAMES, make_score, masked_softmax
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
    target: str | None = None  # seq2seq: a reference target (teacher forcing)
    pad_to: int | None = None  # pad the input with [PAD] to this many tokens (``PADDED``)


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


# the families whose batches pad texts to a common length, and why the others are not
PADDED = ("classifier", "mlm", "tag", "seq2seq")
NOT_PADDED = {
    "lm": "an lm (GPT) run reads one prompt at a time, and is trained on contiguous blocks "
    "of text (only the last block may be padded, at its end, which the look-ahead mask already "
    "hides from every real token): its look-ahead mask is the one to look at (pad_to applies "
    "to classify, mlm, bert-pretrain, tag, translate and chat runs)",
    "bilm": "a bilm run is explained one text at a time (pad_to applies to classify, mlm, "
    "bert-pretrain, tag, translate and chat runs)",
    "qa": "a qa run reads its context in windows of its own (pad_to applies to classify, mlm, "
    "bert-pretrain, tag, translate and chat runs)",
}


def pad_input(ids: list[int], pad_id: int, pad_to: int | None, bound: int,
              types: list[int] | None = None) -> tuple[list[int], list[bool], list[int] | None]:  # fmt: skip
    """``ids`` padded with ``pad_id`` to ``pad_to`` tokens as ``pad_batch`` pads them in a
    batch whose longest text has ``pad_to`` tokens: (ids, mask (True = a real token, False =
    padding), segment ids padded with 0). ``pad_to`` None: as they are, every token real.
    ``bound``: the most tokens the run reads (its data.max_len, the explainer's bound)."""
    if pad_to is None:
        return list(ids), [True] * len(ids), types
    if pad_to > bound:
        raise InputError(f"pad_to must be at most {bound} (the most tokens this run reads), "
                         f"got {pad_to}")  # fmt: skip
    if pad_to < len(ids):
        raise InputError(f"pad_to {pad_to} is shorter than the text's {len(ids)} tokens: padding "
                         f"only lengthens a text (give pad_to >= {len(ids)})")  # fmt: skip
    # the text beside a longer one in a batch: pad_batch pads it to the longest's length
    padded, mask = pad_batch([list(ids), [pad_id] * pad_to], pad_id)
    out_types = None if types is None else pad_batch([list(types), [0] * pad_to], 0)[0][0].tolist()
    return padded[0].tolist(), mask[0].tolist(), out_types


def _pad_note(n_pad: int, pad_to: int) -> str:
    return (f"padded with {n_pad} [PAD] token{'s' if n_pad != 1 else ''} to {pad_to} tokens "
            "(pad_to), as in a batch beside a longer text: the padding mask hides them")  # fmt: skip


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
    bound = min(opts.max_tokens, int(model.max_len))
    room = bound - max(opts.steps - 1, 0)
    if room < 1:
        which = ("max_tokens (--max-tokens)" if opts.max_tokens < int(model.max_len)
                 else "the run's max_len")  # fmt: skip
        raise InputError(f"steps={opts.steps} leaves no room for the prompt within {bound} "
                         f"tokens ({which}): give at most {bound} steps")  # fmt: skip
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
            last = model(x).logits[0, -1]
            check_finite(last, allow_neg_inf=True)  # NaN weights: no token can be drawn
            probs = _filtered(last, banned, opts.temperature, opts.top_k)
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
    source = list(ids)
    if opts.pad_to is not None:  # the source beside a longer one in a batch
        source, real, _ = pad_input(ids, tk.pad_id, opts.pad_to,
                                    min(int(predictor.max_len), opts.max_tokens))  # fmt: skip
        if len(source) > len(ids):
            notes.append(_pad_note(len(source) - len(ids), len(source)))
        src = torch.tensor([source], device=predictor.device)
        src_mask = torch.tensor([real], device=predictor.device)
    limit = predictor._limit(min(predictor.max_len, opts.max_tokens))
    with torch.no_grad():
        out = decode(model, src, src_mask, tk.bos_id, tk.eos_id, tk.pad_id, limit,
                     beam=opts.beam)[0]  # fmt: skip
        if len(source) > len(ids):  # the padded source decodes as the source alone
            alone = decode(model, *predictor._batch([ids]), tk.bos_id, tk.eos_id, tk.pad_id,
                           limit, beam=opts.beam)[0]  # fmt: skip
            notes.append("the output with the padding is the source's own, alone"
                         if list(alone) == list(out) else "the padding changes this model's "
                         f"output (alone: {tk.decode(alone)!r})")  # fmt: skip
    ended = len(out) < limit
    tgt = [tk.bos_id, *(out if ended else out[:-1])]
    tgt_in = torch.tensor([tgt], device=predictor.device)
    transformer = getattr(model, "has_cross_attention", False) and hasattr(model, "decoder") and (
        hasattr(model.decoder, "layers"))  # fmt: skip
    stacks: list[dict[str, Any]] = []
    embeddings: list[dict[str, Any]] = []
    alignment = None
    functions = None  # the five score functions on the decoder's queries (``score_functions``)
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
                                 table=_pe_table(model, max(len(source), len(tgt))))  # fmt: skip
            if emb:
                embeddings.append(emb)
        last = [r for r in dec.of("attention") if r["role"] == "cross"][-1]
        alignment = last["weights"][0].mean(0)
        score = None
        functions = score_functions(last["q"][0], last["k"][0], src_mask[0], None, last.module)
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
                functions = _lstm_score_functions(rec, model.score, src_mask[0])
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
    view["score_functions"] = functions
    if opts.target is not None:
        view["teacher_forcing"] = teacher_forcing(predictor, src, src_mask, opts.target,
                                                  chosen, probs, opts.top)  # fmt: skip
    inputs = [input_part("source", tk, source, None, truncated, bound,
                         padded=len(source) - len(ids)),
              input_part("target", tk, tgt, None, not ended, limit)]  # fmt: skip
    return Part(inputs, embeddings, stacks, view, notes)


# --------------------------------------------------------------------------------------
# the five score functions of the course (lecture 002) on one seq2seq run's queries
# --------------------------------------------------------------------------------------
SCORE_SEED = 0  # the untrained illustrations' parameters: drawn under this seed, every time
SCORE_FUNCTIONS_BYTES = 400_000  # all heads' functions kept under this, else head 0's only


def score_functions(query: Tensor, keys: Tensor, key_mask: Tensor, own: Any | None,
                    module: str) -> dict[str, Any]:  # fmt: skip
    """``ScoreFunctions``: the scores and softmax weights of dot, scaled dot, general, concat
    and location for each query (``query`` (H, T, Dq), ``keys`` (H, S, Dk), ``key_mask`` (S,)
    True = may attend). ``own``: the run's own ``Score`` module (an LSTM's, with its trained
    parameters); None: a Transformer's cross-attention, whose own score is scaled dot of
    its projected (trained) q and k. The score functions with parameters that are not the
    run's are freshly initialised under ``SCORE_SEED``: untrained illustrations."""
    h, t, dq = query.shape
    s, dk = keys.size(1), keys.size(2)
    kept = h if 5 * 2 * h * t * s * 4 <= SCORE_FUNCTIONS_BYTES else 1
    q, k = query[:kept].float().cpu(), keys[:kept].float().cpu()
    mask = key_mask.bool().cpu()[None, None, :].expand(kept, t, s)
    own_name = "scaled_dot" if own is None else own.name
    out = []
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(SCORE_SEED)
        for name in SCORE_NAMES:
            if name == own_name and own is not None:  # where the model runs, as it ran
                fn, parameters = own, "trained"
                scores = own(query[:kept], keys[:kept]).float().cpu()
            else:
                fn = make_score(name, d_query=dq, d_key=dk, d_attn=dq, max_len=s)
                parameters = "none" if name in ("dot", "scaled_dot") else "untrained"
                scores = fn(q, k)  # (kept, T, S)
            out.append({
                "name": name,
                "formula": fn.formula,
                "own": name == own_name,
                "parameters": parameters,
                "scores": pending(scores, "score_functions"),
                "weights": pending(masked_softmax(scores, mask), "score_functions"),
            })  # fmt: skip
    return {"module": module, "query": "target", "key": "source", "num_heads": int(h),
            "heads": int(kept), "own": own_name, "seed": SCORE_SEED, "functions": out}  # fmt: skip


def _lstm_score_functions(rec: Recorder, own: Any, key_mask: Tensor) -> dict[str, Any] | None:
    """``score_functions`` of an LSTM decoder: queries s_t (the ``score`` records), keys the
    encoder outputs h_i (the values ``attend`` read: the score function's own input)."""
    found, attend = rec.of("score"), rec.of("attend")
    if not found or not attend:
        return None
    query = torch.cat([r["query"][0] for r in found], 0)[None]  # (1, T, H)
    keys = attend[0]["values"][0][None]  # (1, S, H)
    return score_functions(query, keys, key_mask, own, found[0].module)


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


# --------------------------------------------------------------------------------------
# teacher forcing (seq2seq, a reference target given) and NSP (bert-pretrain, a pair)
# --------------------------------------------------------------------------------------
def _token(tk: Any, i: int, probability: float | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"token": tk.id_to_token(int(i)) or "?", "id": int(i)}
    if probability is not None:
        out["probability"] = float(probability)
    return out


def teacher_forcing(predictor: Any, src: Tensor, src_mask: Tensor, target: str,
                    chosen: list[int], free_probs: Tensor, top: int) -> dict[str, Any]:  # fmt: skip
    """``TeacherForcing``: the decoder fed the reference shifted right ([BOS] y_1 ..
    y_{n}, as training feeds it) beside the decoder fed its own outputs (``chosen``: the
    free decoding's tokens, [EOS] included when it stopped; ``free_probs`` (T, V): its
    distributions)."""
    model, tk = predictor.model, predictor.tokenizer
    if not isinstance(target, str) or not target.strip():
        raise InputError("the reference target is empty or whitespace only")
    # training cuts a target to data.max_len - 1 tokens ([BOS] + target fits max_len)
    ref, cut = tk.encode(target, max_len=max(1, int(predictor.max_len) - 1),
                         return_truncated=True)  # fmt: skip
    if not ref:
        raise InputError("the reference target has no tokens the run's tokenizer knows")
    gold = [*ref, tk.eos_id]
    tgt_in = torch.tensor([[tk.bos_id, *ref]], device=predictor.device)
    with torch.no_grad():
        logits = model(src, tgt_in, src_mask).logits[0].float().cpu()  # (n + 1, V)
    logp = logits.log_softmax(-1)
    probs = logp.exp()
    steps = []
    for t, y in enumerate(gold):
        free = t < len(chosen)
        steps.append({
            "step": t + 1,
            "input_train": _token(tk, int(tgt_in[0, t])),
            "reference": _token(tk, y, probs[t, y]),
            "top": _top(tk, probs[t], top),
            "input_free": _token(tk, tk.bos_id if t == 0 else chosen[t - 1]) if free else None,
            "free": _token(tk, chosen[t], free_probs[t, chosen[t]]) if free else None,
            "free_reference_probability": float(free_probs[t, y]) if free else None,
        })  # fmt: skip
    training = getattr(predictor.config, "training", None)
    ratio = getattr(training, "teacher_forcing_ratio", None)
    return {
        "reference_text": target,
        "reference": _tokens(tk, gold),
        "reference_ids": [int(i) for i in gold],
        "truncated": bool(cut),
        "ratio": None if ratio is None else float(ratio),
        "loss": float(-logp[torch.arange(len(gold)), torch.tensor(gold)].mean()),
        "steps": steps,
    }


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

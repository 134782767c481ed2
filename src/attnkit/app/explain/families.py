"""One function per family: run the predictor's model on one text under
``attnkit.nn.capture`` and build the trace's inputs, embeddings, stacks and ``view``
(``attnkit.app.explain.schema``). Each returns a ``Part``; ``attnkit.app.explain.trace``
assembles and encodes it."""

from __future__ import annotations

import dataclasses
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
from attnkit.models.elmo_classifier import add_boundaries
from attnkit.nn.capture import Recorder, capture
from attnkit.nn.generation import top_k_top_p_filter
from attnkit.nn.layers import SinusoidalPositionalEncoding
from attnkit.tasks.classify import classifier_output
from attnkit.tasks.classify import encode_texts as classify_encode
from attnkit.tasks.seq2seq import decode

__all__ = ["Options", "Part", "classifier", "lm", "mlm", "bilm", "seq2seq"]


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
    bounded = cut[0]
    if len(ids[0]) > opts.max_tokens:  # the explainer's own bound, below data.max_len
        short = dataclasses.replace(
            cfg, data=dataclasses.replace(cfg.data, max_len=opts.max_tokens)
        )
        ids, types, _ = classify_encode(tk, [text], short, pairs)
        notes.append(_cut_note("input", opts.max_tokens, cfg.data.truncation))
        bounded = True
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
                         opts.max_tokens)]  # fmt: skip
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
        })  # fmt: skip
    view = {
        "kind": "lm",
        "prompt_length": len(ids),
        "temperature": float(opts.temperature),
        "top_k": int(opts.top_k),
        "seed": opts.seed,
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
        logits = model(x, None, where).float().cpu()  # (masks, V)
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
    ids = predictor._one(text)
    notes: list[str] = []
    truncated = len(ids) > opts.max_tokens
    if truncated:
        ids = ids[: opts.max_tokens]
        notes.append(_cut_note("source", opts.max_tokens))
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
    inputs = [input_part("source", tk, ids, None, truncated, opts.max_tokens),
              input_part("target", tk, tgt, None, not ended, limit)]  # fmt: skip
    return Part(inputs, embeddings, stacks, view, notes)

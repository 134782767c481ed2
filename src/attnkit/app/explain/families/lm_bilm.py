"""The language models: a GPT lm run's prompt and new tokens (``lm``), ELMo's biLM
(``bilm``) and its layer mix (``elmo_mix``, which an ELMo classifier shows too)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from attnkit.app.explain.families.common import (
    Options,
    Part,
    _cut_note,
    _full_qkv,
    _taps,
    _tokens,
    _top,
)
from attnkit.app.explain.parts import (
    embedding_part,
    first_layer_input,
    input_part,
    norms,
    pending,
    stack_part,
)
from attnkit.core.errors import InputError, check_finite
from attnkit.models.elmo_classifier import add_boundaries
from attnkit.nn.capture import capture
from attnkit.nn.generation import top_k_top_p_filter


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

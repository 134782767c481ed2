"""A translate / chat run (``seq2seq``: a Transformer, or an LSTM with attention): its
decoding and alignment, the five score functions of lecture 002 on its queries
(``score_functions``) and, given a reference target, teacher forcing
(``teacher_forcing``)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from attnkit.app.explain.families.common import (
    Options,
    Part,
    _cut_note,
    _full_qkv,
    _pad_note,
    _pe_table,
    _taps,
    _tokens,
    _top,
    pad_input,
)
from attnkit.app.explain.parts import (
    embedding_part,
    first_layer_input,
    input_part,
    lstm_attention_part,
    pending,
    stack_part,
)
from attnkit.core.errors import InputError
from attnkit.nn.attention import SCORE_NAMES, make_score, masked_softmax
from attnkit.nn.capture import Recorder, capture
from attnkit.tasks.seq2seq import decode


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
            memory = model.encode(src, src_mask)
        with torch.no_grad(), capture(model) as dec:
            logits = model.decode(
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
# teacher forcing (a reference target given)
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

"""Decoding for every decoder: greedy, beam search, sampling (temperature, top-k, top-p).

Models plug in through a tiny protocol, so the search code never knows what a model is:

    class Stepper(Protocol):
        def step(self, tokens: Tensor) -> Tensor:   # (N,) last token of each row -> (N, V) logits
        def reorder(self, index: Tensor) -> None:   # keep rows ``index`` (N',), in that order

A Transformer decoder implements ``step`` with its KV cache (one new position per call) and
``reorder`` with ``KVCache.reorder``; an LSTM decoder with its hidden state. A decoder-only
language model (GPT) reads its prompt when its stepper is made and starts from the prompt's
last token.

``sample`` also takes Hugging Face's repetition penalty (CTRL, Keskar et al. 2019: a token
already in the row has its logit divided by the penalty if positive, multiplied if
negative) and stop sequences (a row is finished once its new tokens end with one of them).

``sample_rows`` decodes rows that each have their own options (``RowOptions``: sampling,
generator, token budget) and that the caller finishes one by one (a stop string, a client
gone): a finished row leaves the batch at once (``Stepper.reorder``), so the others do not
carry it. Each row gets the tokens ``sample`` would give it alone, up to float rounding
(its padded batch-mates change the order of some sums, never what it attends to). Rows can
also join between two tokens (``join``: continuous batching), where the stepper can take
them in (``extend(other)``: another stepper's rows appended after its own, as GPT's does).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor

from attnkit.core.errors import check_finite

__all__ = [
    "BeamResult",
    "JoinRule",
    "Joining",
    "RowOptions",
    "Stepper",
    "apply_repetition_penalty",
    "beam_search",
    "greedy",
    "sample",
    "sample_rows",
    "top_k_top_p_filter",
]


class Stepper(Protocol):
    def step(self, tokens: Tensor) -> Tensor: ...

    def reorder(self, index: Tensor) -> None: ...


# on_step(t, tokens_so_far (B, t+1), probs (B, V)): for step-by-step traces
StepCallback = Callable[[int, Tensor, Tensor], None]


def _finish(out: Tensor, eos_id: int | None, pad_id: int) -> Tensor:
    """Replace everything after the first EOS of each row by ``pad_id``."""
    if eos_id is None:
        return out
    after = (out == eos_id).int().cumsum(1) - (out == eos_id).int() > 0
    return out.masked_fill(after, pad_id)


@torch.no_grad()
def greedy(
    model: Stepper,
    start: Tensor,
    max_new_tokens: int,
    eos_id: int | None = None,
    pad_id: int = 0,
    on_step: StepCallback | None = None,
) -> Tensor:
    """Pick the most probable token at each step. start (B,) -> tokens (B, <= max_new_tokens)
    (without the start token); rows that produced EOS are padded with ``pad_id`` after it."""
    return sample(model, start, max_new_tokens, eos_id, pad_id, temperature=0.0, on_step=on_step)


def top_k_top_p_filter(logits: Tensor, top_k: int = 0, top_p: float = 1.0) -> Tensor:
    """Set logits outside the top-k and outside the nucleus (smallest set of tokens whose
    probability adds up to ``top_p``) to -inf. logits (N, V) -> (N, V)."""
    if top_k and top_k < logits.size(-1):
        kth = logits.topk(top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = logits.sort(dim=-1, descending=True)
        cum = sorted_logits.softmax(-1).cumsum(-1)
        drop = cum - sorted_logits.softmax(-1) >= top_p  # keep the token that crosses top_p
        sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
        logits = torch.full_like(logits, float("-inf")).scatter(-1, order, sorted_logits)
    return logits


def apply_repetition_penalty(logits: Tensor, seen: Tensor, penalty: float | Tensor) -> Tensor:
    """CTRL's repetition penalty, as Hugging Face applies it: the logit of every token with
    ``seen`` True is divided by ``penalty`` if positive, multiplied by it if negative
    (``penalty > 1`` discourages repeats). logits (N, V) float, seen (N, V) bool, penalty a
    number or (N, 1) (one per row; 1 leaves a row as it is) -> (N, V)."""
    if not isinstance(penalty, Tensor) and penalty == 1.0:
        return logits
    penalised = torch.where(logits < 0, logits * penalty, logits / penalty)
    # a tiny penalty must not overflow to +inf (-inf, a banned token, stays -inf)
    penalised = penalised.clamp(max=torch.finfo(logits.dtype).max)
    return torch.where(seen, penalised, logits)


def sampling_probs(
    logits: Tensor, temperature: float, top_k: int = 0, top_p: float = 1.0
) -> Tensor:
    """softmax(logits / temperature) after top-k / top-p filtering: (N, V) float -> (N, V)
    float32, every row a distribution (else ``NonFiniteError``: e.g. every token banned).
    temperature > 0."""
    # softmax(l / T) = softmax((l - max l) / T): shifted, the values are <= 0, so a tiny T
    # cannot overflow to +inf (it tends to greedy, as it should) (in float64: T may be
    # below float32's smallest number)
    shifted = (logits - logits.max(-1, keepdim=True).values).double()
    filtered = top_k_top_p_filter(shifted / temperature, top_k, top_p)
    probs = filtered.softmax(-1).float()
    check_finite(probs)  # e.g. every token banned: no distribution to sample from
    return probs


def _seen_tokens(
    vocab: int, start: Tensor, context: Tensor | None, context_mask: Tensor | None
) -> Tensor:
    """(B, V) bool: True for the start token and the real tokens of ``context`` (B, T)."""
    seen = torch.zeros(start.size(0), vocab, dtype=torch.bool, device=start.device)
    seen[torch.arange(start.size(0), device=start.device), start] = True
    if context is not None and context.size(1) > 0:
        real = torch.ones_like(context, dtype=torch.bool) if context_mask is None else context_mask
        counts = torch.zeros(seen.shape, dtype=torch.long, device=seen.device)
        counts.scatter_add_(1, context.masked_fill(~real, 0), real.long())  # pads add 0
        seen |= counts > 0
    return seen


def _ends_with(out: list[Tensor], stop: Sequence[Tensor]) -> Tensor:
    """(B,) bool: the tokens so far (list of (B,)) end with one of the ``stop`` sequences."""
    hit = torch.zeros_like(out[-1], dtype=torch.bool)
    for seq in stop:
        n = seq.numel()
        if 0 < n <= len(out):
            hit |= (torch.stack(out[-n:], 1) == seq).all(1)
    return hit


@torch.no_grad()
def sample(
    model: Stepper,
    start: Tensor,
    max_new_tokens: int,
    eos_id: int | None = None,
    pad_id: int = 0,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    generator: torch.Generator | None = None,
    on_step: StepCallback | None = None,
    repetition_penalty: float = 1.0,
    context: Tensor | None = None,
    context_mask: Tensor | None = None,
    stop: Sequence[Sequence[int]] | None = None,
) -> Tensor:
    """Sample from softmax(logits / temperature) after top-k / top-p filtering;
    ``temperature=0`` is greedy. start (B,) -> tokens (B, <= max_new_tokens).

    ``repetition_penalty`` (> 0; 1 = off) applies to the tokens already in each row: the
    start token, the new ones and ``context`` (B, T) (e.g. the prompt; ``context_mask``
    (B, T) True = real token). ``stop``: token sequences that finish a row (kept in the
    output, ``pad_id`` after them), as ``eos_id`` does; all rows finished ends the loop."""
    if repetition_penalty <= 0:
        raise ValueError(f"repetition_penalty must be > 0, got {repetition_penalty}")
    stops = [torch.as_tensor(list(s), dtype=torch.long, device=start.device) for s in stop or ()]
    tokens = start
    out: list[Tensor] = []
    done = torch.zeros(start.size(0), dtype=torch.bool, device=start.device)
    # index of each row's last kept token (the EOS or the stop sequence's end)
    end = torch.full_like(done, max_new_tokens, dtype=torch.long)
    seen: Tensor | None = None
    for t in range(max_new_tokens):
        logits = model.step(tokens).float()
        if repetition_penalty != 1.0:
            if seen is None:
                seen = _seen_tokens(logits.size(-1), start, context, context_mask)
            logits = apply_repetition_penalty(logits, seen, repetition_penalty)
        # NaN (damaged or diverged weights): an error, not a token picked from NaN (argmax)
        # or a crash in multinomial; -inf is a banned token
        check_finite(logits, allow_neg_inf=True)
        if temperature == 0.0:
            probs = logits.softmax(-1) if on_step is not None else None  # only to report
            tokens = logits.argmax(-1)
        else:
            probs = sampling_probs(logits, temperature, top_k, top_p)
            tokens = torch.multinomial(probs, 1, generator=generator).squeeze(1)
        out.append(tokens)
        if seen is not None:
            seen[torch.arange(tokens.size(0), device=tokens.device), tokens] = True
        if on_step is not None and probs is not None:
            on_step(t, torch.stack(out, 1), probs)
        if eos_id is not None or stops:
            now = tokens == eos_id if eos_id is not None else torch.zeros_like(done)
            if stops:
                now |= _ends_with(out, stops)
            end = torch.where(now & ~done, t, end)
            done |= now
            if bool(done.all()):
                break
    result = torch.stack(out, 1)
    if not stops:
        return _finish(result, eos_id, pad_id)
    after = torch.arange(result.size(1), device=result.device)[None, :] > end[:, None]
    return result.masked_fill(after, pad_id)


@dataclass(frozen=True)
class RowOptions:
    """How ``sample_rows`` continues one row: ``sample``'s options, for this row only.
    temperature 0: greedy. ``generator``: this row's draws (rows may share one)."""

    max_new_tokens: int
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    repetition_penalty: float = 1.0
    generator: torch.Generator | None = None


def _pick(logits: Tensor, rows: Sequence[RowOptions]) -> Tensor:
    """The next token of each row: logits (N, V) -> (N,) long. Greedy rows take the argmax;
    rows that sample draw from ``sampling_probs`` (computed together for rows of the same
    temperature, top-k and top-p), each from its own generator.

    The draw is ``torch.multinomial(p, 1)``'s own (ATen's code for one sample):
    argmax_v p_v / q_v with q_v ~ Exp(1), i.e. argmax_v (log p_v + Gumbel noise), which picks
    v with probability p_v. Each row's q comes from its generator, as multinomial would
    draw it for the row alone, so a row gets the token ``sample`` gives it alone; the
    argmax is one operation for all rows (multinomial once per row took ~70 us each, most
    of a 16-row step's sampling)."""
    picked = logits.argmax(-1)
    groups: dict[tuple[float, int, float], list[int]] = {}
    for i, row in enumerate(rows):
        if row.temperature != 0.0:
            groups.setdefault((row.temperature, row.top_k, row.top_p), []).append(i)
    for (temperature, top_k, top_p), index in groups.items():
        probs = sampling_probs(logits[index], temperature, top_k, top_p)  # (n, V)
        q = torch.empty_like(probs)
        for j, i in enumerate(index):
            q[j].exponential_(1, generator=rows[i].generator)
        drawn = (probs / q).argmax(-1)
        if len(index) == len(rows):
            picked = drawn
        else:
            picked[torch.tensor(index, device=picked.device)] = drawn
    return picked


@dataclass
class Joining:
    """Rows that join a running ``sample_rows`` between two tokens (continuous batching):
    ``model``, a stepper that has read their prompts (what the running stepper's ``extend``
    takes), their ``start`` tokens (N',), their ``RowOptions`` and, for their repetition
    penalty, their ``context`` / ``context_mask`` (N', T'), as ``sample_rows`` takes them."""

    model: Stepper
    start: Tensor
    rows: Sequence[RowOptions]
    context: Tensor | None = None
    context_mask: Tensor | None = None


@dataclass
class JoinRule:
    """When rows that wait to join a running ``sample_rows`` come in (continuous batching).
    Reading their prompts (a forward pass of its own) pauses the rows going, so letting
    them in one by one as room frees up would slow everyone down: they come in once at
    least ``ratio`` of the rows going can (``min(waiting, room)``), or once they have
    waited ``after`` tokens. Text Generation Inference's rule and defaults
    (``waiting_served_ratio`` 0.3, ``max_waiting_tokens`` 20)."""

    ratio: float = 0.3
    after: int = 20
    waited: int = 0  # tokens made since rows have been waiting with room for them

    def ready(self, waiting: int, room: int, going: int) -> bool:
        """Whether ``waiting`` rows come in now, beside ``going`` rows, with ``room`` free
        rows in the batch (asked once a token)."""
        if waiting <= 0 or room <= 0:
            if waiting <= 0:
                self.waited = 0
            return False
        if min(waiting, room) >= self.ratio * going or self.waited >= self.after:
            self.waited = 0
            return True
        self.waited += 1
        return False


def _check_rows(rows: Sequence[RowOptions], start: Tensor) -> None:
    if len(rows) != start.size(0):
        raise ValueError(f"{len(rows)} row options for {start.size(0)} rows")
    for row in rows:
        if row.repetition_penalty <= 0:
            raise ValueError(f"repetition_penalty must be > 0, got {row.repetition_penalty}")


def _seen_live(
    vocab: int, sources: Sequence[tuple[int, Joining]], live: list[int], out: list[list[int]]
) -> Tensor:
    """(live, V) bool: each live row's start, context and new tokens so far; ``sources``:
    (index of its first row, the rows) for each group that came in (the first: the call's)."""
    parts = []
    for first, group in sources:
        mine = [i - first for i in live if first <= i < first + len(group.rows)]
        if mine:
            seen = _seen_tokens(vocab, group.start, group.context, group.context_mask)
            parts.append(seen[mine])
    seen = torch.cat(parts) if len(parts) > 1 else parts[0]
    for k, i in enumerate(live):
        if out[i]:
            seen[k, out[i]] = True
    return seen


@torch.no_grad()
def sample_rows(
    model: Stepper,
    start: Tensor,
    rows: Sequence[RowOptions],
    on_token: Callable[[int, int], bool],
    context: Tensor | None = None,
    context_mask: Tensor | None = None,
    on_finish: Callable[[int], None] | None = None,
    join: Callable[[int], Joining | None] | None = None,
) -> list[list[int]]:
    """Decode each row with its own ``RowOptions``: start (B,) -> each row's new tokens.

    ``on_token(row, token)`` sees each new token of a row (``row``: its index in ``start``)
    and returns True to finish the row there (its EOS, a stop string); a row is also
    finished after its ``max_new_tokens``. A finished row leaves the batch (``reorder``)
    and ``on_finish(row)`` is called, before the next step (a row of 0 tokens: first); the
    loop ends when every row has. ``context`` / ``context_mask`` (B, T): as ``sample``'s,
    for the rows' repetition penalty. An exception from a callback ends them all.

    ``join(going)``: asked before each step, while rows are going (``going`` of them),
    for rows to add (a ``Joining``, or None): ``model.extend(joining.model)`` appends them
    to the batch, and they are numbered after the rows so far (B, B + 1, ...: their index
    for the callbacks and in the result). Each gets what it gets alone."""
    _check_rows(rows, start)
    every = list(rows)  # the options of every row so far (joined ones appended)
    out: list[list[int]] = [[] for _ in every]
    finished = on_finish or (lambda _row: None)
    device = start.device

    def admit(first: int, group: Joining) -> list[int]:
        """The rows of ``group`` (numbered from ``first``) that have tokens to make: the
        others are finished now, and left out of ``group.model``."""
        going = [j for j, row in enumerate(group.rows) if row.max_new_tokens > 0]
        for j in range(len(group.rows)):
            if group.rows[j].max_new_tokens <= 0:
                finished(first + j)
        if going and len(going) < len(group.rows):
            group.model.reorder(torch.tensor(going, device=device))
        return going

    sources = [(0, Joining(model, start, list(rows), context, context_mask))]
    going = admit(0, sources[0][1])
    live = going  # model row -> row
    if not live:
        return out
    tokens = start[live]
    stale = True  # the rows changed: the penalties and seen tokens are to be made again
    seen: Tensor | None = None  # (live, V): for the rows' repetition penalty
    penalty: Tensor | None = None  # (live, 1)
    while live:
        joining = join(len(live)) if join is not None else None
        if joining is not None and len(joining.rows):
            _check_rows(joining.rows, joining.start)
            first = len(every)
            every += joining.rows
            out += [[] for _ in joining.rows]
            sources.append((first, joining))
            going = admit(first, joining)
            if going:
                model.extend(joining.model)  # type: ignore[attr-defined]
                live = live + [first + j for j in going]
                tokens = torch.cat([tokens, joining.start[going]])
                stale = True
        logits = model.step(tokens).float()  # (live, V)
        if stale:
            penalty, seen, stale = None, None, False
            if any(every[i].repetition_penalty != 1.0 for i in live):
                penalty = torch.tensor([[every[i].repetition_penalty] for i in live], device=device)
                seen = _seen_live(logits.size(-1), sources, live, out)
        if penalty is not None and seen is not None:
            logits = apply_repetition_penalty(logits, seen, penalty)
        check_finite(logits, allow_neg_inf=True)  # NaN weights: an error, not a token
        tokens = _pick(logits, [every[i] for i in live])
        if seen is not None:
            seen[torch.arange(tokens.size(0), device=device), tokens] = True
        keep = []
        for j, (i, token) in enumerate(zip(live, tokens.tolist(), strict=True)):
            out[i].append(token)
            if not on_token(i, token) and len(out[i]) < every[i].max_new_tokens:
                keep.append(j)
        if len(keep) < len(live):  # some rows finished: the others go on alone
            for j in sorted(set(range(len(live))) - set(keep)):
                finished(live[j])
            live = [live[j] for j in keep]
            if not live:
                break
            index = torch.tensor(keep, device=device)
            model.reorder(index)
            tokens = tokens[index]
            seen = None if seen is None else seen[index]
            penalty = None if penalty is None else penalty[index]
    return out


@dataclass
class BeamResult:
    tokens: list[list[int]]  # best hypothesis per input (EOS excluded)
    scores: list[float]  # its length-normalized log-probability


@torch.no_grad()
def beam_search(
    model: Stepper,
    start: Tensor,
    beam_size: int,
    max_new_tokens: int,
    eos_id: int,
    length_penalty: float = 1.0,
) -> BeamResult:
    """Batched beam search. Each input keeps ``beam_size`` live hypotheses; a hypothesis that
    emits EOS is finished with score log P / len^length_penalty (len counts EOS). An input is
    done when it has ``beam_size`` finished hypotheses and no live one can still beat the
    worst of them; at ``max_new_tokens`` live hypotheses are finished as they are.
    """
    b, k = start.size(0), beam_size
    device = start.device
    model.reorder(torch.arange(b, device=device).repeat_interleave(k))  # (B*K) rows
    tokens = start.repeat_interleave(k)
    scores = torch.full((b, k), float("-inf"), device=device)
    scores[:, 0] = 0.0  # all beams start identical: expand only the first
    history = torch.empty(b * k, 0, dtype=torch.long, device=device)
    finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(b)]
    done = [False] * b

    def norm(score: float, length: int) -> float:
        return score / (max(length, 1) ** length_penalty)

    for t in range(max_new_tokens):
        logp = model.step(tokens).float().log_softmax(-1)  # (B*K, V)
        check_finite(logp, allow_neg_inf=True)  # NaN weights: an error, not NaN beams
        vocab = logp.size(-1)
        cand = (scores.view(-1, 1) + logp).view(b, k * vocab)  # (B, K*V)
        top_scores, top_idx = cand.topk(2 * k, dim=-1)  # enough to refill after EOS
        next_rows, next_tokens, next_scores = [], [], []
        for i in range(b):
            picked = 0
            for s, idx in zip(top_scores[i].tolist(), top_idx[i].tolist(), strict=True):
                if picked == k:
                    break
                beam, tok = divmod(idx, vocab)
                row = i * k + beam
                if done[i] or s == float("-inf"):
                    next_rows.append(row)
                    next_tokens.append(tok)
                    next_scores.append(float("-inf"))
                    picked += 1
                    continue
                if tok == eos_id:
                    finished[i].append((norm(s, t + 1), history[row].tolist()))
                    continue
                next_rows.append(row)
                next_tokens.append(tok)
                next_scores.append(s)
                picked += 1
            while picked < k:  # fewer than k live candidates: pad with dead beams
                next_rows.append(i * k)
                next_tokens.append(eos_id)
                next_scores.append(float("-inf"))
                picked += 1
            best_live = max(next_scores[-k:])
            if len(finished[i]) >= k:
                worst = sorted(h[0] for h in finished[i])[-k]
                # a live beam's normalized score can only improve if length_penalty > 0 and
                # its log-prob stays; bound it optimistically by the final length
                bound = norm(best_live, max_new_tokens if length_penalty > 0 else t + 1)
                if best_live == float("-inf") or bound <= worst:
                    done[i] = True
        if all(done):
            break
        index = torch.tensor(next_rows, device=device)
        model.reorder(index)
        tokens = torch.tensor(next_tokens, device=device)
        history = torch.cat([history[index], tokens[:, None]], dim=1)
        scores = torch.tensor(next_scores, device=device).view(b, k)
    for i in range(b):  # unfinished inputs: live beams count as finished
        if not done[i]:
            for j in range(k):
                s = scores[i, j].item()
                if s != float("-inf"):
                    finished[i].append((norm(s, history.size(1)), history[i * k + j].tolist()))
    best = [max(hyps, key=lambda h: h[0]) if hyps else (float("-inf"), []) for hyps in finished]
    return BeamResult(tokens=[h[1] for h in best], scores=[h[0] for h in best])

"""What every family's builder shares: ``trace``'s options (``Options``), the share of the
trace a builder returns (``Part``), finding the modules to tap, the top-k lists, an input
padded as a batch pads it (``pad_input``; the families it applies to: ``PADDED``) and the
notes on cuts and padding."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torch import Tensor, nn

from attnkit.app.explain.parts import (
    QKV_FULL_LIMIT,
    qkv_bytes,
)
from attnkit.core.errors import InputError
from attnkit.data.batching import pad_batch
from attnkit.nn.capture import Recorder
from attnkit.nn.layers import SinusoidalPositionalEncoding


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


def _norm_first(rec: Recorder) -> bool:
    """Whether the blocks normalise before their sublayers (GPT) or after (BERT, 2017)."""
    add_norm = rec.of("add_norm")
    return bool(add_norm and add_norm[0]["norm_first"])


def _stack_name(rec: Recorder) -> str:
    """ "decoder" for a stack under a look-ahead mask (GPT), else "encoder"."""
    roles = {r["role"] for r in rec.of("attention")}
    return "decoder" if "causal_self" in roles else "encoder"

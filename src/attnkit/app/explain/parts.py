"""The parts of a trace every family shares, built from ``attnkit.nn.capture`` records:
inputs, embeddings, attention stacks (``attnkit.app.explain.schema`` describes each key)
and the encoding of their arrays under a byte budget."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from attnkit.app.explain.schema import encode_array
from attnkit.nn.attention import MultiHeadAttention
from attnkit.nn.capture import Record, Recorder

__all__ = [
    "COARSEN",
    "Pending",
    "attention_part",
    "embedding_part",
    "finalize",
    "input_part",
    "lstm_attention_part",
    "norms",
    "pending",
    "stack_part",
]

# keys whose arrays may be stored as float16 when the trace is over its budget, in the
# order they are given up (the full Q/K/V first, the weights last)
DOWNCAST_ORDER = (("q", "k", "v", "head_out", "layer_norm"), ("scores",), ("token", "sum", "rows",
                  "segment", "table"), ("weights",))  # fmt: skip
QKV_FULL_LIMIT = 1_000_000  # bytes: qkv="auto" keeps the full Q/K/V of a trace under this


@dataclass
class Pending:
    """An array waiting for its encoding (float32 values; ``key``: its key in the trace;
    ``layer``: the index of the attention layer it belongs to, 0 elsewhere)."""

    values: np.ndarray
    key: str
    dtype: str = "float32"
    layer: int = 0

    @property
    def nbytes(self) -> int:  # base64 size
        return _b64(self.values.size * (1 if self.dtype == "uint8" else 4))


def _b64(raw: int) -> int:
    return (raw + 2) // 3 * 4


def pending(values: Tensor | np.ndarray, key: str, dtype: str = "float32") -> Pending:
    if isinstance(values, Tensor):
        values = values.detach().cpu()
        values = values.numpy() if dtype == "uint8" else values.float().numpy()
    return Pending(np.asarray(values), key, dtype)


def norms(x: Tensor) -> Tensor:
    """Euclidean norm over the last dimension, in float32."""
    return torch.linalg.vector_norm(x.float(), dim=-1)


# what ``finalize`` gives up, in order, when every group of DOWNCAST_ORDER is float16 and
# the arrays are still over the budget (many heads: the arrays grow as layers x heads x T^2):
# the scores of every attention layer but the first of its stack, then the weights of those
# layers are stored as uint8 (1/255 steps); the first layer keeps both, so that its panel
# shows scores, mask and softmax exactly as they were computed
COARSEN = {
    "scores": "the scores before the mask are kept for the first layer of each stack only "
    "(the page would be over its size budget): pick layer 0 to see them",
    "weights": "the attention weights of the layers after the first are stored in steps of "
    "1/255 (uint8; the page would be over its size budget): rows sum to 1 within ~0.01",
}
WEIGHT_STEPS = 255


def _walk(obj: Any, out: list[Pending]) -> None:
    if isinstance(obj, Pending):
        out.append(obj)
    elif isinstance(obj, dict):
        for value in obj.values():
            _walk(value, out)
    elif isinstance(obj, list):
        for value in obj:
            _walk(value, out)


def _coarse(p: Pending, coarse: set[str], key: str) -> bool:
    return key in coarse and p.key == key and p.layer > 0


def _size(p: Pending, half: set[str], coarse: set[str]) -> int:
    """The base64 bytes ``p`` takes once encoded as decided."""
    if _coarse(p, coarse, "scores"):
        return 0
    if _coarse(p, coarse, "weights"):
        return _b64(p.values.size)
    return p.nbytes // (2 if p.key in half and p.dtype == "float32" else 1)


def _encode(obj: Any, half: set[str], coarse: set[str]) -> Any:
    if isinstance(obj, Pending):
        if _coarse(obj, coarse, "scores"):
            return None
        if _coarse(obj, coarse, "weights"):
            steps = np.rint(np.clip(obj.values, 0.0, 1.0) * WEIGHT_STEPS).astype(np.uint8)
            return {**encode_array(steps, "uint8"), "scale": 1.0 / WEIGHT_STEPS}
        dtype = "float16" if obj.dtype == "float32" and obj.key in half else obj.dtype
        return encode_array(obj.values, dtype)
    if isinstance(obj, dict):
        return {k: _encode(v, half, coarse) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_encode(v, half, coarse) for v in obj]
    return obj


def finalize(obj: Any, precision: str, budget_bytes: int) -> tuple[Any, list[str], int, list[str]]:
    """Encode every ``Pending`` in ``obj``: float32, except (``precision="auto"``) the
    groups of ``DOWNCAST_ORDER`` needed to bring the arrays under ``budget_bytes``, then,
    if still over, the steps of ``COARSEN`` (later layers' scores dropped, their weights
    as uint8); or every float array of those keys (``precision="float16"``, nothing
    coarsened). Returns (the encoded object, the keys stored as float16, the arrays'
    base64 bytes, the ``COARSEN`` steps taken)."""
    found: list[Pending] = []
    _walk(obj, found)
    half: set[str] = set()
    coarse: set[str] = set()
    if precision == "float16":
        half = {k for group in DOWNCAST_ORDER for k in group}
    elif precision == "auto":
        total = sum(p.nbytes for p in found)
        for group in DOWNCAST_ORDER:
            if total <= budget_bytes:
                break
            for p in found:
                if p.key in group and p.dtype == "float32":
                    total -= p.nbytes // 2
            half.update(group)
        for step in COARSEN:
            if sum(_size(p, half, coarse) for p in found) <= budget_bytes:
                break
            if any(p.key == step and p.layer > 0 for p in found):
                coarse.add(step)
    used = sorted({p.key for p in found if p.key in half and p.dtype == "float32"})
    total = sum(_size(p, half, coarse) for p in found)
    return _encode(obj, set(used), coarse), used, total, [k for k in COARSEN if k in coarse]


# --------------------------------------------------------------------------------------
# Inputs and embeddings
# --------------------------------------------------------------------------------------
def input_part(
    name: str,
    tokenizer: Any,
    ids: list[int],
    segments: list[int] | None = None,
    truncated: bool = False,
    bound: int = 0,
    padded: int = 0,
) -> dict[str, Any]:
    """``Input``: the token strings of ``ids`` (as the tokenizer spells them); ``padded``:
    how many of its last ids are padding added to it (``pad_to``), masked."""
    pad_id = getattr(tokenizer, "pad_id", None)
    return {
        "name": name,
        "tokens": [tokenizer.id_to_token(i) or "?" for i in ids],
        "ids": [int(i) for i in ids],
        "segments": None if segments is None else [int(s) for s in segments],
        "truncated": bool(truncated),
        "bound": int(bound),
        "padded": int(padded),
        "pad_id": None if pad_id is None else int(pad_id),
    }


def _first(rec: Recorder, kind: str, module: str | None = None) -> Record | None:
    found = rec.of(kind, module)
    return found[0] if found else None


def embedding_part(
    rec: Recorder,
    input_name: str,
    first_layer_input: Tensor | None,
    token_tap: str | None = None,
    position_tap: str | None = None,
    layer_norm: bool = False,
    table: Tensor | None = None,
) -> dict[str, Any] | None:
    """``Embedding`` from one input's records: a ``token_embedding`` record (or the tap
    ``token_tap`` on an ``nn.Embedding``), a ``position`` record (or the tap
    ``position_tap`` on a position table), a ``segment`` record; ``first_layer_input``
    (1, T, d): what the first layer read (None: token + position)."""
    token_rec = _first(rec, "token_embedding")
    scale = 1.0
    if token_rec is not None:
        token, scale = token_rec["output"][0], float(token_rec["scale"])
    elif token_tap is not None and (tap := _first(rec, "tap", token_tap)) is not None:
        token = tap["output"][0]
    else:
        return None
    position = None
    pos_rec = _first(rec, "position")
    if pos_rec is not None:
        rows, positions, kind = pos_rec["rows"], pos_rec["positions"], pos_rec["kind"]
    elif position_tap is not None and (tap := _first(rec, "tap", position_tap)) is not None:
        rows, positions, kind = tap["output"], tap["input"], "learned"
        rows = rows[0] if rows.dim() == 3 else rows
        positions = positions[0] if positions.dim() == 2 else positions
    else:
        rows = None
    if rows is not None:
        position = {
            "kind": kind,
            "positions": [int(p) for p in positions.tolist()],
            "rows": pending(rows, "rows"),
        }
        if kind == "sinusoidal" and table is not None:
            position["table"] = pending(table, "table")
    seg_rec = _first(rec, "segment")
    segment = None if seg_rec is None else seg_rec["output"][0]
    if first_layer_input is not None:
        total = first_layer_input[0]
    else:
        total = token + (0 if rows is None else rows.to(token.dtype))
    return {
        "input": input_name,
        "d_model": int(token.size(-1)),
        "token": pending(token, "token"),
        "token_scale": scale,
        "position": position,
        "segment": None if segment is None else pending(segment, "segment"),
        "sum": pending(total, "sum"),
        "layer_norm": bool(layer_norm),
    }


# --------------------------------------------------------------------------------------
# Attention stacks
# --------------------------------------------------------------------------------------
_LAYER = re.compile(r"^(?P<layer>(?:.*\.)?layers\.(?P<index>\d+))\.(?P<what>\w+)$")


def _mask_2d(mask: Tensor | None, t_q: int, t_k: int) -> Tensor:
    """A captured mask (broadcastable to (B, H, Tq, Tk); None: none) -> (Tq, Tk) bool of
    the first row of the batch."""
    full = torch.ones(t_q, t_k, dtype=torch.bool)
    if mask is None:
        return full
    m = mask.cpu()
    while m.dim() > 2:
        m = m[0]
    return full & m


def attention_part(r: Record, query: str, key: str, full_qkv: bool) -> dict[str, Any]:
    """``Attention`` of one multi-head attention record (the first row of its batch)."""
    q, k, v = r["q"][0], r["k"][0], r["v"][0]  # (H, T, d_head)
    weights, scores, heads = r["weights"][0], r["scores"][0], r["head_out"][0]
    h, t_q, t_k = weights.shape
    kinds = (["padding"] if r["padding"] else []) + (["look_ahead"] if r["look_ahead"] else [])
    part: dict[str, Any] = {
        "role": r["role"],
        "module": r.module,
        "query": query,
        "key": key,
        "num_heads": int(h),
        "d_head": int(q.size(-1)),
        "score": {
            "name": MultiHeadAttention.score_name,
            "formula": MultiHeadAttention.formula,
            "scale": float(r["scale"]),
        },
        "mask": {
            "kinds": kinds,
            "array": pending(_mask_2d(r["mask"], t_q, t_k).to(torch.uint8), "mask", "uint8"),
        },  # fmt: skip
        "scores": pending(scores, "scores"),
        "weights": pending(weights, "weights"),
        "q_norms": pending(norms(q), "q_norms"),
        "k_norms": pending(norms(k), "k_norms"),
        "v_norms": pending(norms(v), "v_norms"),
        "head_out_norms": pending(norms(heads), "head_out_norms"),
        "output_norms": pending(norms(r["output"][0]), "output_norms"),
        "dropout_p": float(r["dropout_p"]),
    }
    if full_qkv:
        part.update(q=pending(q, "q"), k=pending(k, "k"), v=pending(v, "v"),
                    head_out=pending(heads, "head_out"))  # fmt: skip
    return part


def _residual(rec: Recorder, layer: str, decoder: bool) -> dict[str, Any] | None:
    add_norms = [r for r in rec.of("add_norm", prefix=layer + ".")]
    if not add_norms:
        return None
    names = ["attention", "cross_attention", "ffn"] if decoder else ["attention", "ffn"]
    sublayers = [
        {
            "name": names[i] if i < len(names) else r.module.rsplit(".", 1)[-1],
            "sublayer": pending(norms(r["sublayer"][0]), "residual"),
            "after": pending(norms(r["output"][0]), "residual"),
            "norm": layer_norm_part(r),
        }
        for i, r in enumerate(add_norms)
    ]
    ffn = _first(rec, "ffn", f"{layer}.ffn")
    active = None
    if ffn is not None:
        active = pending((ffn["hidden"][0] > 0).float().mean(-1), "residual")
    return {
        "input": pending(norms(add_norms[0]["input"][0]), "residual"),
        "sublayers": sublayers,
        "ffn_active": active,
        "output": pending(norms(add_norms[-1]["output"][0]), "residual"),
        "activation": None if ffn is None else ffn.data.get("activation"),
        "norm_first": bool(add_norms[0]["norm_first"]),
    }


LN_DIMS = 8  # the first dimensions of a LayerNorm's input and output kept per token


def layer_norm_part(r: Record) -> dict[str, Any] | None:
    """The LayerNorm of one ``add_norm`` record: per token its statistics over d_model
    (mean, std = sqrt of the biased variance) and the first ``LN_DIMS`` dimensions of
    what it read and wrote; its gamma, beta (all d_model) and eps (None: an old record)."""
    if "norm_input" not in r.data:
        return None
    z = r["norm_input"][0].float()  # (T, d)
    var, mean = torch.var_mean(z, dim=-1, unbiased=False)
    k = min(LN_DIMS, z.size(-1))
    gamma = r["gamma"].float()
    beta = torch.zeros_like(gamma) if r["beta"] is None else r["beta"].float()  # (no bias: 0)
    return {
        "eps": float(r["eps"]),
        "mean": pending(mean, "residual"),
        "std": pending(var.sqrt(), "residual"),
        "gamma": pending(gamma, "residual"),
        "beta": pending(beta, "residual"),
        "gamma_norm": float(norms(gamma)),
        "beta_norm": float(norms(beta)),
        "x": pending(z[:, :k], "layer_norm"),
        "normalized": pending(r["norm_output"][0][:, :k], "layer_norm"),
    }


def layer_inputs(rec: Recorder) -> dict[str, Tensor]:
    """{layer name: the residual stream entering it (B, T, d)}, from the add_norm records."""
    out: dict[str, Tensor] = {}
    for r in rec.of("add_norm"):
        m = re.match(r"^(.*layers\.\d+)\.", r.module)
        if m and m.group(1) not in out:
            out[m.group(1)] = r["input"]
    return out


def stack_part(
    rec: Recorder,
    name: str,
    input_name: str,
    norm_first: bool,
    full_qkv: bool,
    memory_name: str | None = None,
) -> dict[str, Any] | None:
    """``Stack`` of every multi-head attention layer in ``rec`` (in call order; a layer
    called twice keeps its first call). ``memory_name``: the input cross-attention's keys
    come from (a decoder)."""
    layers: dict[str, dict[str, Any]] = {}
    seen: set[str] = set()
    for r in rec.of("attention"):
        m = _LAYER.match(r.module)
        if m is None or r.module in seen:
            continue
        seen.add(r.module)
        layer = layers.setdefault(
            m.group("layer"), {"index": int(m.group("index")), "attention": [], "residual": None}
        )
        key = memory_name if r["role"] == "cross" and memory_name else input_name
        part = attention_part(r, input_name, key, full_qkv)
        for coarsened in ("scores", "weights"):  # what finalize may coarsen after layer 1
            part[coarsened].layer = list(layers).index(m.group("layer"))
        layer["attention"].append(part)
    if not layers:
        return None
    decoder = memory_name is not None
    for prefix, layer in layers.items():
        layer["residual"] = _residual(rec, prefix, decoder)
    return {
        "name": name,
        "input": input_name,
        "kind": "transformer",
        "norm_first": bool(norm_first),
        "layers": list(layers.values()),
    }


def first_layer_input(rec: Recorder) -> Tensor | None:
    """What the first Transformer layer read (1, T, d), or None without one."""
    inputs = layer_inputs(rec)
    return next(iter(inputs.values())) if inputs else None


def lstm_attention_part(
    rec: Recorder, score_module: Any, full_qkv: bool, query: str = "target", key: str = "source"
) -> dict[str, Any] | None:
    """``Attention`` (one head) of an LSTM decoder's score-function attention: the
    ``score``, ``softmax`` and ``attend`` records of each decoding step, stacked over the
    steps (rows = target positions)."""
    scores = rec.of("score")
    soft = rec.of("softmax")
    attend = rec.of("attend")
    if not scores or not (len(scores) == len(soft) == len(attend)):
        return None
    s = torch.cat([r["scores"][0] for r in scores], 0)  # (T, S)
    w = torch.cat([r["weights"][0] for r in soft], 0)  # (T, S)
    query_vecs = torch.cat([r["query"][0] for r in scores], 0)  # (T, H)
    contexts = torch.cat([r["context"][0] for r in attend], 0)  # (T, H)
    keys, values = scores[0]["keys"][0], attend[0]["values"][0]  # (S, .), (S, H)
    mask = soft[0]["mask"]
    mask_2d = _mask_2d(mask, w.size(0), w.size(1))
    part: dict[str, Any] = {
        "role": "cross",
        "module": scores[0].module,
        "query": query,
        "key": key,
        "num_heads": 1,
        "d_head": int(query_vecs.size(-1)),
        "score": {"name": score_module.name, "formula": score_module.formula, "scale": None},
        "mask": {
            "kinds": ["padding"] if mask is not None else [],
            "array": pending(mask_2d.to(torch.uint8), "mask", "uint8"),
        },  # fmt: skip
        "scores": pending(s[None], "scores"),
        "weights": pending(w[None], "weights"),
        "q_norms": pending(norms(query_vecs)[None], "q_norms"),
        "k_norms": pending(norms(keys)[None], "k_norms"),
        "v_norms": pending(norms(values)[None], "v_norms"),
        "head_out_norms": pending(norms(contexts)[None], "head_out_norms"),
        "dropout_p": 0.0,
    }
    if full_qkv:
        part.update(q=pending(query_vecs[None], "q"), k=pending(keys[None], "k"),
                    v=pending(values[None], "v"), head_out=pending(contexts[None], "head_out"))  # fmt: skip
    return part


def qkv_bytes(rec: Recorder) -> int:
    """Bytes the full Q, K, V and weighted sums of the first batch row would take."""
    total = 0
    for r in rec.of("attention"):
        total += sum(r[key][0].numel() for key in ("q", "k", "v", "head_out")) * 4
    return total

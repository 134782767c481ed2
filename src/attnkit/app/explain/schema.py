"""The explainer's trace: what ``attnkit.app.explain.trace(...)`` returns and the explorer
page reads (one JSON object; ``SCHEMA_VERSION`` names this layout), as dataclasses.

The reference (every key, the arrays' encodings, the changes per version) is
docs/explain-trace.md.
"""

from __future__ import annotations

import base64
import sys
from typing import Any, Literal, TypedDict

import numpy as np

if sys.version_info >= (3, 11):
    from typing import NotRequired
else:  # Python 3.10: torch's own dependency has it
    from typing_extensions import NotRequired

__all__ = [
    "SCHEMA_VERSION",
    "Array",
    "Attention",
    "ClassifierView",
    "ELMoMix",
    "Embedding",
    "Input",
    "LMStep",
    "LayerNormStats",
    "LMView",
    "Layer",
    "MLMView",
    "Positional",
    "QAView",
    "Residual",
    "Seq2SeqView",
    "Stack",
    "TagView",
    "Trace",
    "decode_array",
    "encode_array",
]

SCHEMA_VERSION = "attnkit.explain/1"

Family = Literal["classifier", "lm", "seq2seq", "mlm", "bilm", "tag", "qa"]


class Array(TypedDict, total=False):
    dtype: Literal["float32", "float16", "uint8"]
    shape: list[int]
    data: str  # base64 of the little-endian values in C order
    scale: float  # only a quantised array (uint8 weights): value = stored x scale


class Input(TypedDict):
    name: str
    tokens: list[str]
    ids: list[int]
    segments: list[int] | None
    truncated: bool
    bound: int
    padded: NotRequired[int]
    pad_id: NotRequired[int | None]


class Positional(TypedDict, total=False):
    kind: str
    positions: list[int]
    rows: Array
    table: Array


class Embedding(TypedDict):
    input: str
    d_model: int
    token: Array
    token_scale: float
    position: Positional | None
    segment: Array | None
    sum: Array
    layer_norm: bool


class Attention(TypedDict, total=False):
    role: str
    module: str
    query: str
    key: str
    num_heads: int
    d_head: int
    score: dict[str, Any]
    mask: dict[str, Any]
    scores: Array
    weights: Array
    q_norms: Array
    k_norms: Array
    v_norms: Array
    head_out_norms: Array
    q: Array
    k: Array
    v: Array
    head_out: Array
    output_norms: Array
    dropout_p: float


class Residual(TypedDict):
    input: Array
    sublayers: list[dict[str, Any]]
    ffn_active: Array | None
    output: Array
    activation: str | None
    norm_first: bool


class LayerNormStats(TypedDict):
    eps: float
    mean: Array
    std: Array
    gamma: Array
    beta: Array
    gamma_norm: float
    beta_norm: float
    x: Array
    normalized: Array


class Layer(TypedDict):
    index: int
    attention: list[Attention]
    residual: Residual | None


class Stack(TypedDict):
    name: str
    input: str
    kind: str
    norm_first: bool
    layers: list[Layer]


class ELMoMix(TypedDict):
    scalars: list[float]
    weights: list[float]
    gamma: float
    layer_norms: Array
    contributions: Array
    output_norms: Array


class ClassifierView(TypedDict, total=False):
    kind: str
    labels: list[str]
    logits: list[float]
    probabilities: list[float]
    temperature: float
    predicted: str
    pooling: str
    pooled: Array | None
    elmo: ELMoMix
    mix: ELMoMix


class LMStep(TypedDict):
    position: int
    chosen: dict[str, Any]
    top: list[dict[str, Any]]
    entropy: float
    distribution: dict[str, Any]


class LMView(TypedDict):
    kind: str
    prompt_length: int
    temperature: float
    top_k: int
    seed: int | None
    banned: list[int]
    steps: list[LMStep]
    generated: list[str]


class Seq2SeqView(TypedDict):
    kind: str
    search: str
    beam: int
    output_tokens: list[str]
    output_text: str
    alignment: Array | None
    steps: list[dict[str, Any]]
    score: dict[str, str] | None
    teacher_forcing: NotRequired[dict[str, Any]]
    score_functions: NotRequired[dict[str, Any] | None]


class MLMView(TypedDict):
    kind: str
    masks: list[dict[str, Any]]
    nsp: NotRequired[dict[str, Any]]


class TagView(TypedDict):
    kind: str
    labels: list[str]
    unit: str
    predicted: list[str]
    probabilities: Array
    words: list[dict[str, Any]]
    entities: list[dict[str, Any]]


class QAView(TypedDict):
    kind: str
    question: str
    context: str
    answer: dict[str, Any]
    start_logits: Array
    end_logits: Array
    start_probabilities: Array
    end_probabilities: Array
    candidates: list[dict[str, Any]]
    windows: int
    window: int


class Trace(TypedDict):
    schema: str
    family: Family
    task: str
    arch: str
    run: str | None
    model: dict[str, Any]
    text: str
    pair: str | None
    notes: list[str]
    dropout: dict[str, Any]
    encoding: dict[str, Any]
    inputs: list[Input]
    embeddings: list[Embedding]
    stacks: list[Stack]
    view: dict[str, Any]


_DTYPES = {"float32": np.float32, "float16": np.float16, "uint8": np.uint8}


def encode_array(values: Any, dtype: str = "float32") -> Array:
    """A numpy array / torch tensor / nested list -> ``Array`` (base64, little-endian)."""
    if hasattr(values, "detach"):  # a torch tensor
        values = (
            values.detach().float().cpu().numpy()
            if dtype != "uint8"
            else (values.detach().cpu().numpy())
        )
    arr = np.ascontiguousarray(np.asarray(values), dtype=np.dtype(_DTYPES[dtype]).newbyteorder("<"))
    return {
        "dtype": dtype,
        "shape": list(arr.shape),
        "data": base64.b64encode(arr.tobytes()).decode(),
    }


def decode_array(array: Array) -> np.ndarray:
    """An ``Array`` -> numpy array of its dtype and shape (a float16 one as float16; a
    quantised one, with a ``scale``, as float32 values x scale). An attention's ``mask``
    ({"kinds", "array"}) is read as its array (uint8, 1 = may attend)."""
    if isinstance(array, dict) and "dtype" not in array and "array" in array:
        array = array["array"]  # an Attention's mask
    if not isinstance(array, dict) or not {"dtype", "shape", "data"} <= set(array):
        keys = sorted(array) if isinstance(array, dict) else type(array).__name__
        raise ValueError("decode_array reads an Array of the trace ({'dtype', 'shape', "
                         f"'data'}}), got {keys}")  # fmt: skip
    dtype = np.dtype(_DTYPES[array["dtype"]]).newbyteorder("<")
    raw = base64.b64decode(array["data"])
    out = np.frombuffer(raw, dtype=dtype).reshape(array["shape"]).astype(dtype.newbyteorder("="))
    if "scale" in array:
        return out.astype(np.float32) * np.float32(array["scale"])
    return out

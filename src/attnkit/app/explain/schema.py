"""The explainer's trace: what ``attnkit.app.explain.trace(...)`` returns and the explorer
page reads (one JSON object; ``SCHEMA_VERSION`` names this layout).

Changes
-------
(version 1; additions only, no key renamed)
- ``encoding.bytes``: the arrays' base64 size; a note in ``notes`` when it is over
  ``encoding.budget_bytes`` even with every large array in float16.
- ``ClassifierView.mix``: a frozen BERT's learned layer mix (``freeze_encoder``).
- ``Positional.table``: the first min(max_len, 64) rows of a sinusoidal table, only when
  the input is shorter than that (a long input's ``rows`` are the heatmap themselves).
- ``encoding.coarsened``, ``Array.scale`` (uint8 weights), ``Attention.scores`` may be None:
  a trace over its budget even in float16 (see "Arrays").
- ``LMStep.distribution`` (the step's logits: all of them, or the best 64) and
  ``LMView.banned``: what the page's temperature / top-k controls compute from.
- families "tag" (``TagView``) and "qa" (``QAView``).
- ``Residual.activation``, ``Residual.norm_first`` and each sublayer's ``norm``
  (``LayerNormStats``: mean, std, gamma, beta of its LayerNorm).
- ``Seq2SeqView.teacher_forcing`` (a reference target given) and ``MLMView.nsp`` (a
  bert-pretrain run given a pair).
- ``Input.padded`` and ``Input.pad_id`` (``trace(..., pad_to=N)``: the text padded with
  [PAD] as in a batch); ``Seq2SeqView.score_functions`` (``ScoreFunctions``: the five
  score functions of lecture 002 on the decoder's queries).

Arrays
------
Every tensor is an ``Array``: ``{"dtype": "float32" | "float16" | "uint8", "shape": [..],
"data": base64}`` -- the values in C order (last index fastest), little-endian, base64
encoded (``decode_array`` reads one into numpy; in the browser:
``new Float32Array(Uint8Array.from(atob(data), c => c.charCodeAt(0)).buffer)``, float16 via
a small converter). float32 is the model's own value; float16 is used only for the large
per-head matrices (``scores``, ``weights``, and the full ``q``/``k``/``v``/``head_out``) when
keeping them in float32 would exceed the trace's byte budget (``encoding.budget_bytes``,
default 4 MB of arrays): ``encoding.float16`` lists which keys were stored so. A
trace made with ``precision="float32"`` keeps everything in float32 (what the tests
compare to 1e-6 against the model's forward pass). Masks are uint8 (1 = may attend).
Token lists, ids, probabilities of the family view and other short vectors are plain JSON
numbers (Python floats of the float32 values).

Size: for a 6-layer, d_model 256, 4-head model reading 128 tokens the whole trace's JSON
is about 3.7 MB (``scores`` in float16; benchmarks/explain_speed.py). Float16 groups, in
the order given up: the full Q/K/V/head_out (with the LayerNorms' ``x`` and ``normalized``),
scores, the embedding arrays (token, sum,
rows, segment, table), weights. When the arrays are still over the budget with all of
them in float16 (8 heads and more at 128 tokens: they grow as layers x heads x T^2), the
trace is coarsened further, in this order, as far as needed (``encoding.coarsened``, and a
note each): "scores": the ``scores`` of every attention layer but the first of its stack
are None; "weights": the ``weights`` of those layers are uint8 with ``scale`` 1/255
(``decode_array`` gives the values; rows sum to 1 within ~0.01). The first layer of a
stack always keeps its scores and weights as computed (float16 at worst). Q, K, V and the per-head weighted sums are
stored as per-token norms always (``q_norms`` ...); the full matrices (``q`` ...) only when
``qkv="full"``, or with ``qkv="auto"`` (the default) when all of them together stay under
1 MB (tiny models: what a learner trains on a laptop).

Top level (``Trace``)
---------------------
schema        "attnkit.explain/1"
family        "classifier" | "lm" | "seq2seq" | "mlm" | "bilm" | "tag" | "qa": which
              ``view`` follows
task          the run's task (classify, lm, translate, chat, mlm, bert-pretrain, bilm, tag,
              qa)
arch          the run's model.arch (transformer, lstm, gru, bert-classifier, gpt, ...)
run           the run directory's name (None: a predictor built in memory)
model         ``ModelInfo``: sizes and what the model is made of
text, pair    the input as given (pair: a BERT pair's second sentence, else None)
notes         lines the page shows as they are (e.g. "the input was cut to 128 tokens";
              "dropout is off: eval mode (inference)"); always at least the dropout line
dropout       {"active": false, "p": the model's configured dropout, "note": "..."}:
              dropout is never applied in a trace (eval mode)
encoding      {"arrays": "base64-le", "budget_bytes": int, "bytes": int (the arrays'
              base64 size), "float16": [keys stored as float16, e.g. "scores"],
              "coarsened": [] | ["scores"] | ["scores", "weights"] (see "Arrays"),
              "qkv": "norms" | "full"}
inputs        [``Input``]: each token sequence the model reads (one; seq2seq: source and
              target)
embeddings    [``Embedding``]: one per input (empty for models without token vectors to
              show, e.g. the n-gram classifier)
stacks        [``Stack``]: the attention layers, in the order they run (classifier /
              GPT / BERT: one stack "encoder" or "decoder"; Transformer seq2seq: "encoder"
              then "decoder"; LSTM seq2seq with attention: one "decoder" stack of one layer
              whose one attention is the score-function attention; models without
              attention: [])
view          the family's part (``ClassifierView``, ``LMView``, ``Seq2SeqView``,
              ``MLMView``, ``BiLMView``, ``TagView``, ``QAView``),
              ``view["kind"] == family``; a classifier built on
              ELMo also has ``view["elmo"]`` (``ELMoMix``)

``Input``
    name       "input" | "source" | "target"
    tokens     [str] the token strings (word pieces, characters; Korean as it is)
    ids        [int]
    segments   [int] | None: segment (token type) ids of a BERT pair (0 = A, 1 = B)
    truncated  bool: the text was cut (see ``notes``); bound: the cut's token limit
    padded     int: how many of the last tokens are padding added to the text (or a
               seq2seq source) (``pad_to``: as in a batch beside a longer text; the padding mask hides
               them, their attention weights are 0); 0 otherwise. A [PAD] typed in the
               text is not padding: the mask comes from each text's length in its batch
               (``attnkit.data.batching.pad_batch``), never from the token's id, so the
               model reads a typed [PAD] like any other token
    pad_id     int | None: the tokenizer's [PAD] id

``Embedding`` (the vectors entering the first layer, per position)
    input         the ``Input.name`` it belongs to
    d_model       int
    token         Array (T, d_model): the token embedding rows, times ``token_scale``
    token_scale   float: sqrt(d_model) where the model scales them (the paper), else 1
    position      ``Positional`` | None
    segment       Array (T, d_model) | None: BERT's segment embedding rows
    sum           Array (T, d_model): what the first layer reads (token + position
                  [+ segment], after BERT's embedding LayerNorm where there is one)
    layer_norm    bool: ``sum`` is after a LayerNorm (BERT)

``Positional``
    kind       "sinusoidal" | "learned"
    positions  [int]: the position of each token (its row of the table)
    rows       Array (T, d_model): the rows added
    table      Array (P, d_model) | absent: the first P = min(max_len, 64) rows of a
               sinusoidal table when the input is shorter than P, for the course's PE
               heatmap (learned, or a longer input: absent; ``rows`` are the heatmap)

``Stack``
    name        "encoder" | "decoder"
    input       the ``Input.name`` its queries come from
    kind        "transformer" | "lstm"
    norm_first  bool: pre-norm (GPT) or post-norm (the paper, BERT)
    layers      [``Layer``]

``Layer``
    index       int
    attention   [``Attention``]: self (then cross in a decoder), in the order they run
    residual    ``Residual`` | None (LSTM: None)

``Attention`` (one attention call: all heads of one layer)
    role        "self" | "causal_self" | "cross"
    module      the module's name in the model (e.g. "encoder.layers.0.self_attn")
    query, key  the ``Input.name`` of its queries / keys (cross: "target", "source")
    num_heads   H;  d_head: int
    score       {"name": "scaled_dot" | "dot" | "general" | "concat" | "location",
                 "formula": the course's formula (text), "scale": float | None}
    mask        {"kinds": ["padding"] / ["padding", "look_ahead"] / [], "array": Array
                 uint8 (Tq, Tk): 1 where the query may attend (padding and look-ahead
                 combined), the same for every head}
    scores      Array (H, Tq, Tk) | None: the scores before the mask (Q K^T / sqrt(d_k);
                LSTM: the score function's e_t,i), masked entries included as computed
                (None: not stored, ``encoding.coarsened``)
    weights     Array (H, Tq, Tk): softmax weights after the mask (rows sum to 1; masked
                entries exactly 0)
    q_norms     Array (H, Tq): ||q|| per head and query token (LSTM: ||s_t||)
    k_norms     Array (H, Tk);  v_norms: Array (H, Tk) (LSTM: the encoder outputs h_i)
    head_out_norms  Array (H, Tq): ||sum_i alpha_i v_i|| per head (LSTM: ||c_t||)
    q, k, v, head_out  Array (H, T, d_head) each, only when ``encoding.qkv == "full"``
    output_norms  Array (Tq): ||output|| after W^O (concatenated heads x W^O; LSTM: absent)
    dropout_p   0.0 (no dropout at inference)

``Residual`` (the residual stream of one Transformer layer, per token: Euclidean norms)
    input       Array (T): the stream entering the layer
    sublayers   [{"name": "attention" | "cross_attention" | "ffn", "sublayer": Array (T)
                 ||sublayer output||, "after": Array (T) the stream after this Add & Norm}]
    ffn_active  Array (T) | None: the fraction of the FFN's d_ff units that are > 0 after the
                activation (ReLU / GELU) per token
    output      Array (T): the stream leaving the layer (= the last ``after``)
    activation  "relu" | "gelu" | "gelu_tanh" | None: the FFN's activation (the run's
                model.activation; None: no FFN record)
    norm_first  bool: pre-norm, x + Sublayer(LayerNorm(x)), or post-norm,
                LayerNorm(x + Sublayer(x)) (as the ``Stack``'s)
    each ``sublayers`` item also has "norm": ``LayerNormStats`` | None, the LayerNorm of
    that Add & Norm

``LayerNormStats`` (one LayerNorm over d_model: LN(z) = gamma * (z - mean) /
sqrt(std^2 + eps) + beta; z = x + Sublayer(x) post-norm, x pre-norm)
    eps         float
    mean, std   Array (T): per token, the mean and the standard deviation (square root of
                the biased variance) of z over its d_model numbers
    gamma, beta Array (d_model): the learned scale and shift
    gamma_norm, beta_norm  float: ||gamma||, ||beta||
    x           Array (T, k): the first k = min(8, d_model) numbers of z per token
    normalized  Array (T, k): the same numbers of LN(z)

Family views
------------
``ClassifierView`` (family "classifier": transformer, rnn/lstm/gru, gpt-classifier,
bert-classifier, elmo, ngram)
    kind "classifier"; labels [str]; logits [float]; probabilities [float] (softmax(logits
    / temperature), what ``predictor.predict`` reports); temperature float; predicted str;
    pooling str ("mean", "max", "cls", "last", "pooler", "n-grams"); pooled Array (D,) | None:
    the vector the linear head reads (None for n-grams); elmo: ``ELMoMix`` (arch elmo only);
    mix: ``ELMoMix`` of a frozen BERT's layers (bert-classifier with freeze_encoder only:
    s_j, gamma and each of its num_layers + 1 outputs' share)

``LMView`` (family "lm": GPT)
    kind "lm"; prompt_length int (tokens of the prompt in ``inputs[0]``); temperature;
    top_k; seed; banned [int]: the ids the sampler never draws ([PAD], [MASK] ...: -inf
    before the softmax of ``filtered``); steps [``LMStep``]: one per generated token, in
    order (the stack's forward
    pass covers the prompt and every generated token but the last: with the look-ahead
    mask, query row p is exactly what step p - prompt_length + 1 computed); generated
    [str]: the new tokens
    ``LMStep``: position int (the query row that predicted it), chosen {"token", "id"},
    top [{"token", "id", "logit", "probability", "filtered"}] (the ``top`` most likely
    tokens by logit; probability = softmax(logits) at temperature 1, filtered = the
    probability after temperature and top-k, the distribution the token was drawn from),
    entropy float (nats, at temperature 1), distribution {"complete": bool, "ids": [int] |
    None, "logits": Array (N,) float32, "mass": float}: the step's logits, all V of them
    when V <= 512 (complete, ids None: the index is the id), else the best max(64, top) by
    logit with their ids and their probability mass at temperature 1 (the page's
    temperature and top-k controls are exact over a complete distribution, and otherwise
    renormalise over these N, saying so)

``Seq2SeqView`` (family "seq2seq": Transformer and LSTM translate / chat runs)
    kind "seq2seq"; search "greedy" | "beam"; beam int; output_tokens [str] (+ "[EOS]" when
    decoding stopped there); output_text str; alignment Array (T_out, S) | None: what
    ``predictor.alignment`` draws (Transformer: last layer's cross-attention, mean over
    heads; LSTM: alpha_t); steps [{"step": t (1-based), "chosen": {"token", "id"},
    "top": [{"token", "id", "probability"}]}]: the decoder's distribution at each step
    (teacher-forced over the decoded output, which gives the decoding's own numbers);
    score {"name", "formula"} | None (LSTM: the score function; None without attention);
    score_functions ``ScoreFunctions`` | None (None: no attention);
    teacher_forcing ``TeacherForcing`` | absent (only when a reference target was given:
    ``trace(..., target=TEXT)``)

``TeacherForcing`` (the decoder at training time vs at inference, for one reference)
    reference_text str; reference [str] the reference's tokens y_1 .. y_n (+ "[EOS]": what
    training predicts last); reference_ids [int]; truncated bool (cut to the run's
    data.max_len - 1 tokens, as training cuts targets); ratio float | None: the run's
    training.teacher_forcing_ratio (the probability of feeding the gold previous token;
    1.0: always); loss float: the mean cross-entropy (nats) of the reference under teacher
    forcing (what training minimises); steps [{"step": t (1-based), "input_train": {"token",
    "id"} (the reference shifted right: [BOS], y_1 .. y_{t-1}), "reference": {"token", "id",
    "probability"} (P(y_t | source, [BOS] y_1 .. y_{t-1})), "top": [{"token", "id",
    "probability"}] (teacher-forced), "input_free": {"token", "id"} | None (the model's own
    previous output when decoding freely: [BOS], then what it chose; None past the end of
    the free decoding), "free": {"token", "id", "probability"} | None (what free decoding
    chose at step t, and its probability), "free_reference_probability": float | None
    (P(y_t) given the model's own previous outputs instead)}]

``ScoreFunctions`` (the course's score table, lecture 002, on one run's decoder queries)
    module     the attention they stand beside (LSTM: its score module, e.g. "score";
               Transformer: the last decoder layer's cross-attention)
    query, key "target", "source": the ``Input`` names of the queries (rows) and keys
    num_heads  H of that attention; heads: how many are kept (H, or 1 when all of them
               would take over 400 kB: head 0 only)
    own        the run's own score function ("scaled_dot" for a Transformer)
    seed       int: the seed the untrained illustrations' parameters are drawn under
    functions  [{"name": "dot" | "scaled_dot" | "general" | "concat" | "location",
               "formula": str, "own": bool, "parameters": "trained" (the run's own
               trained parameters) | "none" (no parameters: computed on the run's own
               queries and keys) | "untrained" (freshly initialised under ``seed``: an
               illustration, not what the run learned), "scores": Array (heads, T, S),
               "weights": Array (heads, T, S) (softmax over the visible keys)}], in this
               order. Queries and keys: an LSTM's decoder states s_t and encoder outputs
               h_i (the own function's scores and weights equal the stack's); a
               Transformer's projected q = W^Q s, k = W^K h of each head

``MLMView`` (family "mlm": task mlm and bert-pretrain runs)
    kind "mlm"; masks [{"position": int, "top": [{"token", "id", "probability"}]}], one
    per [MASK] left to right (what ``predictor.fill_mask`` returns); nsp | absent (only
    for a bert-pretrain run given a pair: ``inputs[0]`` is then [CLS] A [SEP] B [SEP] with
    segments 0 / 1): {"available": bool (the run has an NSP head: model.arch
    bert-pretraining), "is_next", "not_next": float | None (softmax of the NSP head's two
    logits over the pooled [CLS] vector: what ``predictor.next_sentence`` reports),
    "logits": [float, float] | None (IsNext, NotNext), "note": str}

``BiLMView`` (family "bilm": ELMo's biLM)
    kind "bilm"; forward [{"position", "top": [...]}] (token t + 1 from tokens <= t);
    backward [...] (token t - 1 from tokens >= t); elmo ``ELMoMix`` (the untrained,
    equal mix of ``predictor.embed``)

``TagView`` (family "tag": bert-tagger NER runs)
    kind "tag"; labels [str] (the run's label names, in id order); unit "word" | "char"
    (the units labelled: words, or characters for a KLUE-NER run); predicted [str]: the
    label predicted at each position of ``inputs[0]`` ([CLS] and [SEP] included: not
    read); probabilities Array (T, C): softmax of the logits at each position; words
    [{"word", "label", "position": the piece whose prediction labels it (a word's first
    piece, a character's first covering piece), None when it was cut off (then "O")}]:
    what ``predictor.tag`` returns; entities [{"type", "text", "start", "end"}] (character
    offsets into ``text``)

``QAView`` (family "qa": bert-qa runs; ``text`` is the question, ``pair`` the context)
    kind "qa"; question, context str; answer {"text", "start", "end" (character offsets
    into the context: ``predictor.answer``'s), "score" (start + end logit), "start_token",
    "end_token" (its positions in ``inputs[0]``)}; start_logits, end_logits,
    start_probabilities, end_probabilities Array (T,) (softmax over the window's
    positions); candidates [{"text", "start", "end", "score"}]: the window's 5 best spans;
    windows int (the context is read in this many windows, ``inputs[0]`` is one:
    ``[CLS] question [SEP] window [SEP]``, segments A / B); window int (the one shown: the
    answer's)

``ELMoMix``
    scalars [float] s_j as learned (token layer first); weights [float] softmax(s)_j;
    gamma float; layer_norms Array (L + 1, T) ||h_{k,j}||; contributions Array (L + 1, T)
    ||gamma softmax(s)_j h_{k,j}|| (each layer's share of the ELMo vector, per token);
    output_norms Array (T) ||ELMo_k||
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

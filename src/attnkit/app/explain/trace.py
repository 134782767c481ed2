"""``trace(predictor_or_run, text, **options)``: one text through a trained run, every step
the course teaches captured (``attnkit.nn.capture``) and returned as one JSON-serialisable
dict laid out as ``attnkit.app.explain.schema`` describes."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from attnkit.app.api import load
from attnkit.app.explain import families
from attnkit.app.explain.parts import COARSEN, Pending, finalize
from attnkit.app.explain.schema import SCHEMA_VERSION
from attnkit.core.errors import NON_FINITE, InputError, NonFiniteError
from attnkit.core.params import EXPLAIN_MIN_TOKENS, PARAMS
from attnkit.tasks.base import Predictor
from attnkit.tasks.bilm import BiLMPredictor
from attnkit.tasks.classify import ClassifierPredictor, EnsemblePredictor
from attnkit.tasks.lm import LMPredictor
from attnkit.tasks.mlm import FillMaskPredictor
from attnkit.tasks.qa import QAPredictor
from attnkit.tasks.seq2seq import Seq2SeqPredictor
from attnkit.tasks.tag import TagPredictor

__all__ = ["DEFAULT_BUDGET", "FAMILIES", "NEEDS", "family_of", "min_tokens", "trace"]

DEFAULT_BUDGET = 4_000_000  # bytes of base64 arrays (the page's HTML must stay under 5 MB:
# the script, style, font subset and the JSON around the arrays take well under 1 MB)

# predictor class -> (family, builder); the first isinstance match wins
FAMILIES: list[tuple[type, str, Any]] = [
    (ClassifierPredictor, "classifier", families.classifier),
    (LMPredictor, "lm", families.lm),
    (Seq2SeqPredictor, "seq2seq", families.seq2seq),
    (FillMaskPredictor, "mlm", families.mlm),
    (BiLMPredictor, "bilm", families.bilm),
    (TagPredictor, "tag", families.tag),
    (QAPredictor, "qa", families.qa),
]
# the capability (``Predictor.can``) each family's view runs its predictor through: a
# predictor that does not declare it is not explained
NEEDS: dict[str, str] = {"classifier": "predict", "lm": "generate", "seq2seq": "translate",
                         "mlm": "fill_mask", "bilm": "embed", "tag": "tag", "qa": "answer"}  # fmt: skip


def family_of(predictor: Any) -> str:
    """The explainer's family of a predictor ("classifier", "lm", ...); InputError if it
    cannot be explained: the explainer has no view for its task, it does not declare what
    that view calls (``NEEDS``), or it holds no PyTorch model to capture (an ONNX export).
    The one rule ``attnkit explain``, ``attnkit.explain`` and the server (its explorer
    links, /v1/explain, /explain/NAME) follow."""
    return _builder(predictor)[0]


def _builder(predictor: Any) -> tuple[str, Any]:
    if isinstance(predictor, EnsemblePredictor):
        raise InputError("the explainer steps through one run, not an ensemble: give one run")
    task = getattr(predictor, "task", type(predictor).__name__)
    for cls, family, build in FAMILIES:
        if isinstance(predictor, cls):
            if not predictor.can(NEEDS[family]):
                raise InputError(f"this {task} predictor cannot {NEEDS[family]}: the explainer "
                                 "has no view of it")  # fmt: skip
            model = getattr(predictor, "model", None)
            # the steps are captured from the model's PyTorch modules (attnkit.nn.capture):
            # a model without weights of its own (an ONNX export, run by onnxruntime as one
            # graph) has none to show
            if not isinstance(model, nn.Module) or next(model.parameters(), None) is None:
                raise InputError(
                    f"this {task} run has no PyTorch model for the explainer to step through "
                    "(an ONNX export runs in onnxruntime as one graph): explain the run it was "
                    "exported from"
                )
            return family, build
    raise InputError(
        f"the explainer has no view for task {task} runs (it explains classify, lm, "
        "translate, chat, mlm, bert-pretrain, bilm, tag and qa runs)"
    )


def min_tokens(predictor: Any, family: str, pair: str | None = None) -> tuple[int, str]:
    """(the fewest tokens ``max_tokens`` may cut the run's input to, its layout): one token
    of each text and the special tokens the run wraps them in (``EXPLAIN_MIN_TOKENS``, the
    table of ``attnkit.core.params``). A qa run also needs its question's tokens (checked
    when the question is read)."""
    layout = "text"
    if family == "classifier" and getattr(predictor.config.model, "READS_PAIRS", False):
        paired = pair is not None or bool(getattr(predictor, "pairs", False))
        layout = "[CLS] A [SEP] B [SEP]" if paired else "[CLS] text [SEP]"
    elif family == "mlm" and pair is not None:
        layout = "[CLS] A [SEP] B [SEP]"  # a bert-pretrain run's sentence pair (NSP)
    elif (family == "mlm" and getattr(predictor, "wrap_in_cls_sep", False)) or family == "tag":
        layout = "[CLS] text [SEP]"
    elif family == "qa":
        layout = "[CLS] question [SEP] context [SEP]"
    return EXPLAIN_MIN_TOKENS[layout], layout


def _finite(obj: Any) -> bool:
    """Whether every number of a trace's body (its arrays and its floats) is finite."""
    if isinstance(obj, Pending):
        values = obj.values
        return not np.issubdtype(values.dtype, np.floating) or bool(np.isfinite(values).all())
    if isinstance(obj, float):
        return math.isfinite(obj)
    if isinstance(obj, dict):
        return all(_finite(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return all(_finite(v) for v in obj)
    return True


def _model_info(predictor: Any) -> dict[str, Any]:
    c = predictor.config.model
    info: dict[str, Any] = {"arch": c.arch, "describe": c.describe()}
    for key in ("d_model", "num_heads", "d_ff", "num_layers", "num_decoder_layers",
                "hidden_size", "emb_dim", "positional", "norm_first", "activation", "pooling",
                "attention", "max_len", "vocab_size"):  # fmt: skip
        if hasattr(c, key):
            value = getattr(c, key)
            info[key] = value if isinstance(value, (int, float, str, bool)) or value is None \
                else str(value)  # fmt: skip
    info["parameters"] = int(sum(p.numel() for p in predictor.model.parameters()))
    return info


def _dropout_p(predictor: Any) -> float:
    return float(getattr(predictor.config.model, "dropout", 0.0) or 0.0)


def trace(
    predictor_or_run: Predictor | str | Path,
    text: str,
    *,
    pair: str | None = None,
    max_tokens: int = 128,
    steps: int = 1,
    temperature: float = 1.0,
    top_k: int = 0,
    seed: int | None = 0,
    beam: int = 1,
    top: int = 10,
    qkv: str = "auto",
    precision: str = "auto",
    budget_bytes: int = DEFAULT_BUDGET,
    pad_to: int | None = None,
    target: str | None = None,
) -> dict[str, Any]:
    """Run ``text`` through a run's model once with every step captured; returns the trace
    (``attnkit.app.explain.schema.Trace``), JSON-serialisable.

    predictor_or_run: what ``attnkit.load`` returns, or a run directory (loaded in fp32 on
        the CPU). The model runs in eval mode (no dropout), in float32.
    pair: a BERT sentence-pair classifier's second sentence; a qa run's context (``text``:
        its question).
    max_tokens: the bound: a longer input is cut (a note in ``notes`` says so).
    steps, temperature, top_k, seed: lm runs: tokens to generate, one at a time, drawn
        from softmax(logits / temperature) after top-k (temperature 0: greedy).
    beam: seq2seq runs: beam width (1: greedy).
    top: candidates listed per distribution.
    qkv: "auto" | "norms" | "full": whether the full Q, K, V and weighted sums are kept
        (auto: when they take under 1 MB) or only their per-token norms.
    precision: "auto" | "float32" | "float16": how large arrays are stored (auto: float32
        unless over ``budget_bytes``; see the schema's "Arrays").
    pad_to: classify, mlm, bert-pretrain, tag, translate and chat runs: the text (a seq2seq
        run's source) padded with [PAD] to this many tokens, as in a batch beside a longer
        text (``Input.padded``; the padding mask hides them); at most the tokens the run
        reads, at least the text's.
    target: translate / chat runs: a reference output, to compare the decoder at training
        time (teacher forcing: fed the reference shifted right) with the decoder at
        inference (fed its own outputs): ``view["teacher_forcing"]``.
    """
    if qkv not in ("auto", "norms", "full"):
        raise InputError(f"qkv must be auto, norms or full, got {qkv!r}")
    if precision not in ("auto", "float32", "float16"):
        raise InputError(f"precision must be auto, float32 or float16, got {precision!r}")
    for name, value, low in (("steps", steps, 0), ("beam", beam, 1), ("top", top, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise InputError(f"{name} must be an integer >= {low}, got {value!r}")
    problem = PARAMS["max_tokens"].problem(max_tokens)  # the range of attnkit.core.params
    if problem is not None:
        raise InputError(f"max_tokens {problem}")
    if not isinstance(text, str):
        raise InputError(f"the text must be a string, got {type(text).__name__}")
    for what, value in (("text", text), ("second text", pair), ("target", target)):
        if not isinstance(value, str):
            continue
        try:  # a lone surrogate ("\ud800") is no text a tokenizer can read
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InputError(f"the {what} is not valid Unicode (a lone surrogate at character "
                             f"{exc.start + 1})") from None  # fmt: skip
    if pad_to is not None and (isinstance(pad_to, bool) or not isinstance(pad_to, int)
                               or pad_to < 1):  # fmt: skip
        raise InputError(f"pad_to must be an integer >= 1, got {pad_to!r}")
    predictor = predictor_or_run
    if isinstance(predictor_or_run, (str, Path)):
        predictor = load(predictor_or_run, precision="fp32")
    family, build = _builder(predictor)
    if not text.strip():  # as predict (the CLI's, attnkit.explain's) refuses one
        what = "question" if family == "qa" else "text"
        raise InputError(f"the {what} is empty or whitespace only")
    need, layout = min_tokens(predictor, family, pair)
    if max_tokens < need:
        raise InputError(f"max_tokens (--max-tokens) must be >= {need} for this "
                         f"{predictor.config.task} run, whose input is {layout}, got "
                         f"{max_tokens}")  # fmt: skip
    if target is not None and family != "seq2seq":
        raise InputError("a reference target (teacher forcing) is read only by translate / "
                         "chat runs")  # fmt: skip
    if target is not None and not isinstance(target, str):
        raise InputError(f"the target must be a string, got {type(target).__name__}")
    if pad_to is not None and family not in families.PADDED:
        raise InputError(f"pad_to: {families.NOT_PADDED.get(family, 'not for this run')}")
    opts = families.Options(max_tokens=max_tokens, steps=steps, temperature=float(temperature),
                            top_k=int(top_k), seed=seed, beam=beam, top=top, qkv=qkv,
                            pair=pair, pad_to=pad_to, target=target)  # fmt: skip
    model = predictor.model
    was_training = model.training
    model.eval()
    try:
        with torch.autocast(predictor.device.type, enabled=False):
            part = build(predictor, text, opts)
    finally:
        model.train(was_training)
    p = _dropout_p(predictor)
    dropout_note = (
        f"dropout is off: eval mode (inference); training used p = {p:g}"
        if p
        else "dropout is off: eval mode (inference)"
    )
    body = {
        "inputs": part.inputs,
        "embeddings": part.embeddings,
        "stacks": part.stacks,
        "view": part.view,
    }
    if not _finite(body):  # damaged or diverged weights: an error, never a page of NaN
        raise NonFiniteError(NON_FINITE)
    encoded, half, size, coarse = finalize(body, precision, budget_bytes)
    part.notes.extend(COARSEN[step] for step in coarse)
    if size > budget_bytes:
        part.notes.append(
            f"the trace's arrays take {size / 1e6:.1f} MB, more than its budget of "
            f"{budget_bytes / 1e6:.1f} MB even in float16{' and coarsened' if coarse else ''}: "
            "explain fewer tokens (max_tokens)"
        )
    qkv_kept = any(
        "q" in att for s in part.stacks for layer in s["layers"] for att in layer["attention"]
    )
    run_dir = getattr(predictor, "run_dir", None)
    return {
        "schema": SCHEMA_VERSION,
        "family": family,
        "task": str(predictor.config.task),
        "arch": str(predictor.config.model.arch),
        "run": None if run_dir is None else Path(run_dir).name,
        "model": _model_info(predictor),
        "text": text,
        "pair": pair,
        "notes": [*part.notes, dropout_note],
        "dropout": {"active": False, "p": p, "note": dropout_note},
        "encoding": {
            "arrays": "base64-le",
            "budget_bytes": int(budget_bytes),
            "bytes": size,
            "float16": half,
            "coarsened": coarse,
            "qkv": "full" if qkv_kept else "norms",
        },  # fmt: skip
        **encoded,
    }

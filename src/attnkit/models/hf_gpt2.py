"""Hugging Face GPT-2 checkpoints <-> ``attnkit.models.gpt.GPT``.

The one place that knows Hugging Face's GPT-2 names. ``attnkit.models.gpt`` reads and writes
through it (``GPT.from_pretrained`` / ``save_pretrained``), passing its config class, so this
module needs none of GPT's code. A GPT-2 directory holds

    config.json         {"model_type": "gpt2", "n_embd": 768, "n_layer": 12, ...}
    model.safetensors   transformer.wte.weight, transformer.h.0.attn.c_attn.weight, ...
                        (or pytorch_model.bin, read with ``torch.load(weights_only=True)``)

    model = load_hf_gpt2("gpt2/", GPTConfig)      # a GPT, in eval mode
    save_hf_gpt2(model, "out/")        # transformers.GPT2LMHeadModel.from_pretrained("out/")

GPT-2's linear layers are ``Conv1D``: y = x W + b with W of shape (in, out), the transpose
of ``nn.Linear``'s (out, in). Its attention projects query, key and value at once: ``c_attn``
(d, 3d) is [W_Q | W_K | W_V] side by side, which attnkit keeps as ``q_proj``, ``k_proj``,
``v_proj``. ``GPT2LMHeadModel`` prefixes the body with ``transformer.`` (``GPT2Model``
checkpoints have no prefix; both load); its ``lm_head.weight`` is the token embedding and is
not stored when tied. The causal-mask buffers older checkpoints hold (``attn.bias``,
``attn.masked_bias``) are skipped. GPT-2 settings attnkit's GPT does not have
(``scale_attn_by_inverse_layer_idx``, ``reorder_and_upcast_attn``, ``add_cross_attention``,
unscaled attention) are a one-line ``ConfigError``; ``embd_pdrop`` is read as ``resid_pdrop``
(attnkit has one dropout for both; inference is the same).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol, TypeVar, cast

import torch
from torch import Tensor

from attnkit.core.checkpoint import misfit_summary
from attnkit.core.config import ConfigError, short_repr
from attnkit.core.errors import MissingFileError, RunError
from attnkit.models.base import AttnkitModel, ModelConfig
from attnkit.models.hf_bert import read_hf_tensors, write_hf_checkpoint
from attnkit.models.saved import CONFIG_FILE, WEIGHTS_FILE
from attnkit.models.sizes import (
    check_foreign_weights,
    renamed_fields,
)

# (the hints name the bases: this module is given GPT's classes, ``GPTConfig`` and ``GPT``,
# and needs none of their code; what it reads of a config beyond the base's is ``GPTSizes``)
C = TypeVar("C", bound=ModelConfig)


class GPTSizes(Protocol):
    """What this module reads of a ``GPTConfig`` beyond ``ModelConfig``'s fields."""

    eos_id: int | None
    d_model: int
    d_ff: int
    num_layers: int
    dropout: float
    attention_dropout: float | None
    activation: str
    tie_embeddings: bool


def _sizes(config: ModelConfig) -> GPTSizes:
    """``config`` as the ``GPTConfig`` it is (what ``attnkit.models.gpt`` passes)."""
    return cast(GPTSizes, config)


__all__ = [
    "check_hf_gpt2",
    "from_hf_state_dict",
    "gpt_config_from_hf",
    "gpt_config_to_hf",
    "is_hf_gpt2_config",
    "load_hf_gpt2",
    "save_hf_gpt2",
    "to_hf_state_dict",
]

SAFETENSORS_FILE = WEIGHTS_FILE

# config: attnkit field -> GPT-2 key (n_inner, the activation and the token ids apart)
_CONFIG_KEYS = {
    "vocab_size": "vocab_size",
    "max_len": "n_positions",
    "d_model": "n_embd",
    "num_layers": "n_layer",
    "num_heads": "n_head",
    "dropout": "resid_pdrop",
    "attention_dropout": "attn_pdrop",
    "layer_norm_eps": "layer_norm_epsilon",
    "init_std": "initializer_range",
    "tie_embeddings": "tie_word_embeddings",
}
# GPT2Config's defaults, for the keys a config.json may leave out
_HF_DEFAULTS: dict[str, Any] = {
    "n_positions": 1024,
    "resid_pdrop": 0.1,
    "attn_pdrop": 0.1,
    "layer_norm_epsilon": 1e-5,
    "initializer_range": 0.02,
    "tie_word_embeddings": True,
}
_REQUIRED_HF_KEYS = ("n_embd", "n_layer", "n_head", "vocab_size")
# the names config.json gives the fields in messages
_HF_NAMES = {**_CONFIG_KEYS, "d_ff": "n_inner", "pad_id": "pad_token_id", "eos_id": "eos_token_id"}
_ACT_FROM_HF = {
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu_fast": "gelu_tanh",
    "gelu": "gelu",
    "relu": "relu",
}
_ACT_TO_HF = {"gelu_tanh": "gelu_new", "gelu": "gelu", "relu": "relu"}
# (key, value GPT-2 means by default): settings whose other value attnkit cannot compute
_UNSUPPORTED = (
    ("scale_attn_weights", True),
    ("scale_attn_by_inverse_layer_idx", False),
    ("reorder_and_upcast_attn", False),
    ("add_cross_attention", False),
)
# inside h.{i}: attnkit module -> GPT-2 Conv1D module (weight transposed) or LayerNorm
_CONV1D = {
    "self_attn.out_proj": "attn.c_proj",
    "ffn.linear1": "mlp.c_fc",
    "ffn.linear2": "mlp.c_proj",
}
_NORMS = {"add_norm1.norm": "ln_1", "add_norm2.norm": "ln_2"}
_QKV = ("q_proj", "k_proj", "v_proj")
# causal-mask buffers older GPT-2 checkpoints store (rebuilt, never read)
_IGNORED_SUFFIXES = (".attn.bias", ".attn.masked_bias")


# --------------------------------------------------------------------------------------
# config.json
# --------------------------------------------------------------------------------------
ATTNKIT_KEY = "attnkit_config"  # attnkit's GPTConfig, beside GPT-2's keys in config.json


def is_hf_gpt2_config(raw: Any) -> bool:
    """True for a Hugging Face GPT-2 config.json's contents."""
    return isinstance(raw, dict) and raw.get("model_type") == "gpt2" and "n_embd" in raw


def _token_id(value: Any, vocab_size: int) -> int | None:
    """A config token id (an int, or a list whose first entry is used) if in the vocabulary."""
    if isinstance(value, list) and value:
        value = value[0]
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < vocab_size:
        return value
    return None


def gpt_config_from_hf(raw: dict[str, Any], config_class: type[C], where: str = CONFIG_FILE) -> C:
    """A GPT-2 config.json's contents -> a ``config_class`` (``GPTConfig``; missing optional keys take
    GPT2Config's defaults; settings attnkit's GPT does not have: a one-line
    ``ConfigError``). ``pad_id``: pad_token_id, else eos_token_id, else 0 (GPT-2 has no
    padding token; padded positions are masked anyway)."""
    if not isinstance(raw, dict) or raw.get("model_type") != "gpt2":
        found = raw.get("model_type") if isinstance(raw, dict) else type(raw).__name__
        raise ConfigError(f"{where} is not a GPT-2 config (model_type {short_repr(found)})")
    missing = [k for k in _REQUIRED_HF_KEYS if k not in raw]
    if missing:
        raise ConfigError(f"{where} lacks {', '.join(missing)}")
    for key, default in _UNSUPPORTED:
        if key in raw and bool(raw[key]) != default:
            raise ConfigError(
                f"{where}: {key}={short_repr(raw[key])} is not supported (attnkit's GPT has "
                f"GPT-2's plain scaled self-attention; only {key}={str(default).lower()})"
            )
    act = raw.get("activation_function", "gelu_new")
    if act not in _ACT_FROM_HF:
        raise ConfigError(
            f"{where}: activation_function must be one of {', '.join(_ACT_FROM_HF)}, "
            f"got {short_repr(act)}"
        )
    values: dict[str, Any] = {}
    for name, key in _CONFIG_KEYS.items():
        value = raw.get(key)
        values[name] = _HF_DEFAULTS[key] if value is None else _typed(key, value, where)
    n_inner = raw.get("n_inner")
    values["d_ff"] = 4 * values["d_model"] if n_inner is None else _typed("n_inner", n_inner, where)
    values["activation"] = _ACT_FROM_HF[act]
    values["eos_id"] = _token_id(raw.get("eos_token_id"), values["vocab_size"])
    pad = _token_id(raw.get("pad_token_id"), values["vocab_size"])
    values["pad_id"] = pad if pad is not None else (values["eos_id"] or 0)
    config = config_class(**values)
    try:  # every size bounded (attnkit.models.sizes), named as GPT-2 names it
        config.validate()
    except ConfigError as exc:
        raise ConfigError(f"{where}: {renamed_fields(str(exc), _HF_NAMES)}") from None
    saved = raw.get(ATTNKIT_KEY)
    if isinstance(saved, dict):  # written by attnkit: its exact config, if still in agreement
        try:
            exact = config_class.from_dict(saved)
            exact.validate()
        except ConfigError:
            return config
        theirs = {k: v for k, v in raw.items() if k != ATTNKIT_KEY}
        ours = {k: v for k, v in gpt_config_to_hf(exact).items() if k != ATTNKIT_KEY}
        if all(theirs.get(k) == v for k, v in ours.items()):
            return exact
    return config


_INT_KEYS = ("vocab_size", "n_positions", "n_embd", "n_layer", "n_head", "n_inner")


def _typed(key: str, value: Any, where: str) -> Any:
    """A config.json value checked against its type (sizes int, rates float, ties bool)."""
    if key == "tie_word_embeddings":
        ok = isinstance(value, bool)
        kind = "true or false"
    elif key in _INT_KEYS:
        ok = isinstance(value, int) and not isinstance(value, bool)
        kind = "an integer"
    else:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        value = float(value) if ok else value
        kind = "a number"
    if not ok:
        raise ConfigError(f"{where}: {key} must be {kind}, got {short_repr(value)}")
    return value


def gpt_config_to_hf(config: ModelConfig) -> dict[str, Any]:
    """``GPTConfig`` -> the contents of a GPT-2 config.json (``GPT2LMHeadModel``)."""
    hf: dict[str, Any] = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2"}
    for name, key in _CONFIG_KEYS.items():
        hf[key] = getattr(config, name)
    sizes = _sizes(config)
    if sizes.attention_dropout is None:
        hf["attn_pdrop"] = sizes.dropout
    hf["embd_pdrop"] = sizes.dropout
    hf["n_inner"] = sizes.d_ff
    hf["n_ctx"] = config.max_len
    hf["activation_function"] = _ACT_TO_HF[sizes.activation]
    hf["pad_token_id"] = config.pad_id
    hf["bos_token_id"] = hf["eos_token_id"] = sizes.eos_id
    for key, default in _UNSUPPORTED:
        hf[key] = default
    hf = dict(sorted(hf.items()))
    # attnkit's own settings too (transformers keeps unknown keys as attributes), so that a
    # round trip gives back exactly this config (attention_dropout None, the preset, ...)
    hf[ATTNKIT_KEY] = config.to_dict()
    return hf


# --------------------------------------------------------------------------------------
# tensors
# --------------------------------------------------------------------------------------
def to_hf_state_dict(model: AttnkitModel) -> dict[str, Tensor]:
    """The model's tensors under ``GPT2LMHeadModel``'s names, Conv1D weights transposed,
    q/k/v fused into ``c_attn``; ``lm_head.weight`` only when not tied. GPT-2 has biases
    in every layer: a model without (``model.bias: false``) is refused."""
    if not getattr(model.config, "bias", True):
        raise RunError(
            "this GPT has no biases (model.bias: false) and GPT-2 has them in every layer: "
            "it cannot be exported as a Hugging Face GPT-2 directory"
        )
    c = _sizes(model.config)
    state = model.state_dict()
    out = {
        "transformer.wte.weight": state["tok_embed.weight"],
        "transformer.wpe.weight": state["pos.embedding.weight"],
        "transformer.ln_f.weight": state["blocks.norm.weight"],
        "transformer.ln_f.bias": state["blocks.norm.bias"],
    }
    for i in range(c.num_layers):
        ours, theirs = f"blocks.layers.{i}.", f"transformer.h.{i}."
        for module, norm in _NORMS.items():
            for part in ("weight", "bias"):
                out[f"{theirs}{norm}.{part}"] = state[f"{ours}{module}.{part}"]
        qkv = [state[f"{ours}self_attn.{p}.weight"] for p in _QKV]  # each (d, d): (out, in)
        out[f"{theirs}attn.c_attn.weight"] = torch.cat(qkv, 0).t()  # (d, 3d): (in, out)
        out[f"{theirs}attn.c_attn.bias"] = torch.cat(
            [state[f"{ours}self_attn.{p}.bias"] for p in _QKV]
        )
        for module, conv in _CONV1D.items():
            out[f"{theirs}{conv}.weight"] = state[f"{ours}{module}.weight"].t()
            out[f"{theirs}{conv}.bias"] = state[f"{ours}{module}.bias"]
    if not c.tie_embeddings:
        out["lm_head.weight"] = state["lm_head.weight"]
    return out


def _expected_shapes(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every GPT-2 tensor's shape for ``config`` (from a model on the meta device)."""
    with torch.device("meta"):
        model = config.build()
    return {k: tuple(v.shape) for k, v in to_hf_state_dict(model).items()}


def _named(tensors: dict[str, Any], config: ModelConfig) -> dict[str, Any]:
    """A checkpoint's entries under ``GPT2LMHeadModel``'s names (mask buffers and a tied
    ``lm_head.weight`` left out)."""
    named: dict[str, Any] = {}
    for key, tensor in tensors.items():
        name = key if key == "lm_head.weight" else key.removeprefix("transformer.")
        if name.endswith(_IGNORED_SUFFIXES):
            continue
        if name == "lm_head.weight" and _sizes(config).tie_embeddings:
            continue  # the token embedding itself
        named[name if name == "lm_head.weight" else f"transformer.{name}"] = tensor
    return named


def _check_shapes(shapes: dict[str, tuple[int, ...]], config: ModelConfig, where: str) -> None:
    """A one-line ``RunError`` unless ``shapes`` (``_named``'s) are exactly those of a
    GPT-2 of ``config``: missing, unexpected or misshapen tensors, one of each named."""
    expected = _expected_shapes(config)
    missing = [k for k in expected if k not in shapes]
    unexpected = [k for k in shapes if k not in expected]
    misshapen = [
        f"{k} is {v} in the file, {expected[k]} in the config"
        for k, v in shapes.items()
        if k in expected and v != expected[k]
    ]
    problems = misfit_summary(missing, unexpected, misshapen)
    if problems:
        raise RunError(f"{where} does not match its GPT-2 config: {problems}")


def check_hf_gpt2(directory: str | Path, config: ModelConfig) -> None:
    """Before loading anything: a GPT of ``config`` (read from ``directory``'s config.json,
    its sizes bounded) must have the tensors of the directory's model.safetensors, read
    from its header, and fit in the memory available. One line naming config.json and the
    field (a ``RunError`` for weights that disagree, a ``ConfigError`` for memory);
    pytorch_model.bin has no header: it is checked once loaded."""
    directory = Path(directory)
    check_foreign_weights(
        directory,
        config,
        lambda shapes, changed: _check_shapes(_named(shapes, changed), changed, str(directory)),
        lambda shapes, changed: (_expected_shapes(changed), _named(shapes, changed)),
        _HF_NAMES,
        lambda changed: changed.build(),
        SAFETENSORS_FILE,
    )


def from_hf_state_dict(
    tensors: dict[str, Tensor], config: ModelConfig, where: str = "checkpoint"
) -> dict[str, Tensor]:
    """A GPT-2 checkpoint's tensors (``GPT2LMHeadModel`` or ``GPT2Model``) -> ``GPT``'s
    state dict for ``config``. Missing, unexpected or misshapen tensors: a one-line
    ``RunError`` naming one of each."""
    named = _named(tensors, config)
    _check_shapes({k: tuple(v.shape) for k, v in named.items()}, config, where)

    sizes = _sizes(config)
    d = sizes.d_model
    state = {
        "tok_embed.weight": named["transformer.wte.weight"],
        "pos.embedding.weight": named["transformer.wpe.weight"],
        "blocks.norm.weight": named["transformer.ln_f.weight"],
        "blocks.norm.bias": named["transformer.ln_f.bias"],
    }
    for i in range(sizes.num_layers):
        ours, theirs = f"blocks.layers.{i}.", f"transformer.h.{i}."
        for module, norm in _NORMS.items():
            for part in ("weight", "bias"):
                state[f"{ours}{module}.{part}"] = named[f"{theirs}{norm}.{part}"]
        weight = named[f"{theirs}attn.c_attn.weight"]  # (d, 3d)
        bias = named[f"{theirs}attn.c_attn.bias"]  # (3d,)
        for j, p in enumerate(_QKV):
            state[f"{ours}self_attn.{p}.weight"] = weight[:, j * d : (j + 1) * d].t()
            state[f"{ours}self_attn.{p}.bias"] = bias[j * d : (j + 1) * d]
        for module, conv in _CONV1D.items():
            state[f"{ours}{module}.weight"] = named[f"{theirs}{conv}.weight"].t()
            state[f"{ours}{module}.bias"] = named[f"{theirs}{conv}.bias"]
    state["lm_head.weight"] = named.get("lm_head.weight", state["tok_embed.weight"])
    return state


# --------------------------------------------------------------------------------------
# directories
# --------------------------------------------------------------------------------------
def read_hf_config(directory: str | Path, config_class: type[C]) -> C:
    """The ``config_class`` (``GPTConfig``) of a GPT-2 directory's config.json."""
    path = Path(directory) / CONFIG_FILE
    if not path.is_file():
        raise MissingFileError(f"{directory} has no {CONFIG_FILE}")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise RunError(f"{path} is damaged ({str(exc).splitlines()[0]})") from None
    return gpt_config_from_hf(raw, config_class, where=str(path))


def load_hf_gpt2(
    directory: str | Path, config_class: type[ModelConfig], map_location: str = "cpu"
) -> AttnkitModel:
    """A ``GPT`` (eval mode; built by ``config_class``, ``GPTConfig``) from a Hugging Face
    GPT-2 directory: config.json + model.safetensors (or pytorch_model.bin, tensors only)."""
    config = read_hf_config(directory, config_class)
    check_hf_gpt2(directory, config)  # before anything is loaded or built
    tensors = read_hf_tensors(directory, map_location)
    state = from_hf_state_dict(tensors, config, str(directory))
    model = config.build()
    model.load_state_dict(state)
    return model.to(map_location).eval()


def save_hf_gpt2(model: AttnkitModel, directory: str | Path) -> Path:
    """Write ``model`` as a GPT-2 directory (config.json + model.safetensors) that
    ``transformers.GPT2LMHeadModel.from_pretrained`` loads with no missing or unexpected
    keys. Refuses a training run's directory (its config.json would be replaced)."""
    return write_hf_checkpoint(directory, gpt_config_to_hf(model.config), to_hf_state_dict(model))

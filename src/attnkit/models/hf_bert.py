"""Hugging Face BERT checkpoints <-> ``attnkit.models.bert.BertModel`` and its heads.

The one place that knows Hugging Face's BERT names. ``attnkit.models.bert`` reads and writes
through it (``from_pretrained`` / ``save_pretrained``), passing the class to build, so this
module needs none of BERT's code. A Hugging Face BERT directory holds

    config.json         {"model_type": "bert", "hidden_size": 768, ...}
    model.safetensors   embeddings.word_embeddings.weight, encoder.layer.0.attention..., ...
                        (or pytorch_model.bin, read with ``torch.load(weights_only=True)``)

    model = load_hf_bert("all-MiniLM-L6-v2/", BertModel)    # in eval mode
    save_hf_bert(model, "out/")             # transformers.BertModel.from_pretrained("out/")

Checkpoints of BERT with a head (``BertForPreTraining``, ``BertForMaskedLM``,
``BertForSequenceClassification``, ...) prefix the encoder's names with ``bert.``. Loaded
into a ``BertModel``, the heads' tensors (``cls.*``, ``classifier.*``, ...) are unused;
loaded into a head of ``attnkit.models.bert`` (``load_hf_bert(dir, BertForMaskedLM)``)
the head's tensors are read too, and a head (or pooler) the checkpoint lacks is freshly
initialised: ``model.loading_info`` lists those tensors and a warning says so, as
transformers does. A tensor of the encoder itself that has no place in the model, a missing
one or one of another shape is a one-line ``RunError``. config.json's ``architectures``
gives the head (``model.arch``), ``id2label`` / ``num_labels`` its ``num_classes``.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Protocol, TypeVar, cast

import torch
from torch import Tensor

from attnkit.core.checkpoint import atomic_write_text, misfit_summary, read_tensors, save_tensors
from attnkit.core.config import ConfigError, short_repr
from attnkit.core.errors import MissingFileError, RunError
from attnkit.models.base import AttnkitModel, ModelConfig
from attnkit.models.saved import CONFIG_FILE, WEIGHTS_FILE, is_training_run
from attnkit.models.sizes import (
    check_foreign_weights,
    renamed_fields,
)

# (the hints name the bases: this module is given BERT's classes, ``BertConfig`` and
# ``attnkit.models.bert.HfBertFiles``, and needs none of their code; what it reads of them
# beyond the bases' own is ``BertSizes`` and ``BertLayout``)
C = TypeVar("C", bound=ModelConfig)
M = TypeVar("M", bound=AttnkitModel)


class BertSizes(Protocol):
    """What this module reads of a ``BertConfig`` beyond ``ModelConfig``'s fields."""

    num_layers: int
    num_classes: int
    activation: str
    freeze_encoder: bool

    @property
    def pooling_used(self) -> str: ...


class BertLayout(Protocol):
    """What it reads of the class of a BERT model (``HfBertFiles``: ``BertModel`` or a
    head's class) and sets on one loaded from a Hugging Face directory."""

    ARCH: str
    HAS_POOLER: bool
    HEAD_KEYS: dict[str, str]
    loading_info: dict[str, list[str]]


def _sizes(config: ModelConfig) -> BertSizes:
    """``config`` as the ``BertConfig`` it is (what ``attnkit.models.bert`` passes)."""
    return cast(BertSizes, config)


def _layout(model: AttnkitModel | type[AttnkitModel]) -> BertLayout:
    """``model`` (a class or an instance) as the ``HfBertFiles`` it is."""
    return cast(BertLayout, model)


logger = logging.getLogger("attnkit")

__all__ = [
    "BERT_ARCHS",
    "bert_config_from_hf",
    "bert_config_to_hf",
    "check_hf_bert",
    "check_hf_exportable",
    "fold_temperature",
    "from_hf_state_dict",
    "hf_key_map",
    "is_hf_bert_config",
    "load_hf_bert",
    "model_key_map",
    "save_hf_bert",
    "to_hf_state_dict",
]

SAFETENSORS_FILE = WEIGHTS_FILE
PYTORCH_FILE = "pytorch_model.bin"
# model.arch -> the model's class name in attnkit.models.bert, Hugging Face's too
BERT_ARCHS = {
    "bert": "BertModel",
    "bert-mlm": "BertForMaskedLM",
    "bert-pretraining": "BertForPreTraining",
    "bert-classifier": "BertForSequenceClassification",
    "bert-tagger": "BertForTokenClassification",
    "bert-qa": "BertForQuestionAnswering",
}

# attnkit module -> Hugging Face module (each with .weight and .bias, embeddings: .weight)
_EMBEDDING_KEYS = {
    "embeddings.word.weight": "embeddings.word_embeddings.weight",
    "embeddings.pos.embedding.weight": "embeddings.position_embeddings.weight",
    "embeddings.segment.embedding.weight": "embeddings.token_type_embeddings.weight",
    "embeddings.norm.weight": "embeddings.LayerNorm.weight",
    "embeddings.norm.bias": "embeddings.LayerNorm.bias",
}
_LAYER_MODULES = {  # inside encoder.layers.{i} -> inside encoder.layer.{i}
    "self_attn.q_proj": "attention.self.query",
    "self_attn.k_proj": "attention.self.key",
    "self_attn.v_proj": "attention.self.value",
    "self_attn.out_proj": "attention.output.dense",
    "add_norm1.norm": "attention.output.LayerNorm",
    "ffn.linear1": "intermediate.dense",
    "ffn.linear2": "output.dense",
    "add_norm2.norm": "output.LayerNorm",
}
_POOLER_KEYS = {"pooler.weight": "pooler.dense.weight", "pooler.bias": "pooler.dense.bias"}
# the encoder's own top-level modules in a Hugging Face state dict (anything else is a head)
_BODY_PREFIXES = ("embeddings.", "encoder.", "pooler.")
# buffers Hugging Face rebuilds (older versions saved them), the tied decoder weight
_IGNORED_BUFFERS = (
    "embeddings.position_ids",
    "embeddings.token_type_ids",
    "cls.predictions.decoder.weight",
)
_ARCH_FROM_HF = {hf: arch for arch, hf in BERT_ARCHS.items()}
_LABELLED_ARCHS = ("bert-classifier", "bert-tagger")  # config.json gets id2label / label2id

# config: attnkit field -> Hugging Face key, and Hugging Face's defaults (BertConfig's)
_CONFIG_KEYS = {
    "vocab_size": "vocab_size",
    "d_model": "hidden_size",
    "num_layers": "num_hidden_layers",
    "num_heads": "num_attention_heads",
    "d_ff": "intermediate_size",
    "activation": "hidden_act",
    "dropout": "hidden_dropout_prob",
    "attention_dropout": "attention_probs_dropout_prob",
    "max_len": "max_position_embeddings",
    "type_vocab_size": "type_vocab_size",
    "init_std": "initializer_range",
    "layer_norm_eps": "layer_norm_eps",
    "pad_id": "pad_token_id",
}
_REQUIRED_HF_KEYS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
# the names config.json gives the fields in messages
_HF_NAMES = {**_CONFIG_KEYS, "num_classes": "num_labels", "arch": "architectures"}
# Hugging Face hidden_act -> attnkit activation (gelu is the exact erf GELU in both)
_ACT_FROM_HF = {
    "gelu": "gelu",
    "relu": "relu",
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
}
_ACT_TO_HF = {"gelu": "gelu", "relu": "relu", "gelu_tanh": "gelu_pytorch_tanh"}


# --------------------------------------------------------------------------------------
# config.json
# --------------------------------------------------------------------------------------
def is_hf_bert_config(raw: Any) -> bool:
    """True for a Hugging Face BERT config.json's contents (``"model_type": "bert"`` with
    Hugging Face's keys, not attnkit's own ``BertConfig.to_dict()``)."""
    return isinstance(raw, dict) and raw.get("model_type") == "bert" and "hidden_size" in raw


def bert_config_to_hf(config: ModelConfig, labels: list[str] | None = None) -> dict[str, Any]:
    """``BertConfig`` -> the contents of a Hugging Face BERT config.json (``labels``: the
    class names of a classifier / tagger, else LABEL_0, LABEL_1, ...)."""
    hf: dict[str, Any] = {"architectures": [BERT_ARCHS[config.arch]], "model_type": "bert"}
    for name, key in _CONFIG_KEYS.items():
        hf[key] = getattr(config, name)
    sizes = _sizes(config)
    if config.arch in _LABELLED_ARCHS:
        names = labels or [f"LABEL_{i}" for i in range(sizes.num_classes)]
        if len(names) != sizes.num_classes or len(set(names)) != len(names):
            raise ConfigError(f"{len(names)} label names for {sizes.num_classes} classes")
        hf["id2label"] = {str(i): name for i, name in enumerate(names)}
        hf["label2id"] = {name: i for i, name in enumerate(names)}
    hf["hidden_act"] = _ACT_TO_HF[sizes.activation]
    hf["position_embedding_type"] = "absolute"
    return dict(sorted(hf.items()))


def bert_config_from_hf(raw: dict[str, Any], config_class: type[C], where: str = CONFIG_FILE) -> C:
    """A Hugging Face BERT config.json's contents -> a ``config_class`` (``BertConfig``;
    missing optional keys take Hugging Face's defaults; settings attnkit's BERT does not
    have are a one-line ``ConfigError``)."""
    if not isinstance(raw, dict) or raw.get("model_type") != "bert":
        found = raw.get("model_type") if isinstance(raw, dict) else type(raw).__name__
        raise ConfigError(f"{where} is not a BERT config (model_type {short_repr(found)})")
    missing = [k for k in _REQUIRED_HF_KEYS if k not in raw]
    if missing:
        raise ConfigError(f"{where} lacks {', '.join(missing)}")
    unsupported = [
        (raw.get("position_embedding_type", "absolute") != "absolute", "position_embedding_type"),
        (bool(raw.get("is_decoder", False)), "is_decoder"),
        (bool(raw.get("add_cross_attention", False)), "add_cross_attention"),
    ]
    for bad, key in unsupported:
        if bad:
            raise ConfigError(
                f"{where}: {key}={short_repr(raw[key])} is not supported (attnkit's BERT is "
                "an encoder with absolute positions)"
            )
    act = raw.get("hidden_act", "gelu")
    if act not in _ACT_FROM_HF:
        raise ConfigError(
            f"{where}: hidden_act must be one of {', '.join(_ACT_FROM_HF)}, got {short_repr(act)}"
        )
    defaults = config_class()
    values: dict[str, Any] = {}
    for name, key in _CONFIG_KEYS.items():
        value = raw.get(key)
        values[name] = getattr(defaults, name) if value is None else value
    values["activation"] = _ACT_FROM_HF[act]
    archs = raw.get("architectures") or ["BertModel"]
    values["arch"] = _ARCH_FROM_HF.get(archs[0] if isinstance(archs, list) else "", "bert")
    labels = raw.get("id2label")
    num_labels = len(labels) if isinstance(labels, dict) and labels else raw.get("num_labels")
    values["num_classes"] = _sizes(defaults).num_classes if num_labels is None else num_labels
    try:  # every value typed and every size bounded (attnkit.models.sizes), under HF's names
        config = config_class.from_dict(values)
        config.validate()
    except ConfigError as exc:
        raise ConfigError(f"{where}: {renamed_fields(str(exc), _HF_NAMES)}") from None
    return config


# --------------------------------------------------------------------------------------
# parameter names
# --------------------------------------------------------------------------------------
def hf_key_map(num_layers: int) -> dict[str, str]:
    """attnkit ``BertModel`` state-dict name -> Hugging Face ``BertModel``'s, for every
    tensor of a ``num_layers``-layer model."""
    keys = dict(_EMBEDDING_KEYS)
    for i in range(num_layers):
        for ours, theirs in _LAYER_MODULES.items():
            for part in ("weight", "bias"):
                keys[f"encoder.layers.{i}.{ours}.{part}"] = f"encoder.layer.{i}.{theirs}.{part}"
    keys.update(_POOLER_KEYS)
    return keys


def _prefix(model_class: type[AttnkitModel]) -> str:
    """Where the encoder's tensors are in ``model_class``: at the top (``BertModel``) or
    under ``bert.`` (a head's class)."""
    return "" if _layout(model_class).ARCH == "bert" else "bert."


def model_key_map(model_class: type[AttnkitModel], num_layers: int) -> dict[str, str]:
    """attnkit state-dict name -> Hugging Face's, for ``BertModel`` or a head's class (its
    encoder under ``bert.``, the pooler only where Hugging Face's class has one)."""
    body = hf_key_map(num_layers)
    layout = _layout(model_class)
    if not layout.HAS_POOLER:
        body = {k: v for k, v in body.items() if k not in _POOLER_KEYS}
    if not _prefix(model_class):
        return body
    return {**{f"bert.{k}": f"bert.{v}" for k, v in body.items()}, **layout.HEAD_KEYS}


def to_hf_state_dict(model: AttnkitModel) -> dict[str, Tensor]:
    """The model's tensors under Hugging Face's names (the tied masked-LM decoder is the
    word embedding: stored once, as transformers does)."""
    names = model_key_map(type(model), _sizes(model.config).num_layers)
    return {names[k]: v for k, v in model.state_dict().items()}


def _hf_name(key: str) -> str | None:
    """A Hugging Face checkpoint's key without the ``bert.`` prefix of models with heads
    (TF-era ``gamma``/``beta`` renamed), or None for a rebuilt buffer or the tied decoder."""
    if key.startswith("bert."):
        key = key[len("bert.") :]
    if key in _IGNORED_BUFFERS:
        return None
    if ".LayerNorm." in key:
        key = key.replace(".LayerNorm.gamma", ".LayerNorm.weight")
        key = key.replace(".LayerNorm.beta", ".LayerNorm.bias")
    return key


def from_hf_state_dict(
    tensors: dict[str, Tensor],
    config: ModelConfig,
    model_class: type[AttnkitModel],
    where: str = "checkpoint",
    info: dict[str, list[str]] | None = None,
) -> dict[str, Tensor]:
    """A Hugging Face BERT checkpoint's tensors -> the state dict of ``model_class`` for
    ``config``. Raises a one-line ``RunError`` for missing, unexpected or misshapen
    encoder tensors. Tensors of other heads are unused; the head's or pooler's tensors the
    checkpoint lacks are left out (the model keeps its fresh ones). ``info`` (if given)
    gets Hugging Face's names of both: ``missing_keys`` and ``unexpected_keys``."""
    names = model_key_map(model_class, _sizes(config).num_layers)
    bare = _prefix(model_class)
    # Hugging Face's name without the bert. prefix -> ours
    theirs_to_ours = {v.removeprefix(bare): k for k, v in names.items()}
    head = _layout(model_class).HEAD_KEYS
    optional = {k for k in names if k.removeprefix(bare) in _POOLER_KEYS or k in head}
    renamed: dict[str, tuple[str, Tensor]] = {}
    for key, tensor in tensors.items():
        name = _hf_name(key)
        if name is not None:
            renamed[name] = (key, tensor)
    if "cls.predictions.decoder.bias" in renamed:  # older checkpoints: the same tensor twice
        renamed.setdefault("cls.predictions.bias", renamed.pop("cls.predictions.decoder.bias"))
    expected = _expected_shapes(config, model_class)
    state: dict[str, Tensor] = {}
    unexpected: list[str] = []
    unused: list[str] = []
    for name, (key, tensor) in renamed.items():
        ours = theirs_to_ours.get(name)
        if ours is not None:
            state[ours] = tensor
        elif name.startswith(_BODY_PREFIXES) and name not in _POOLER_KEYS.values():
            unexpected.append(key)
        else:
            unused.append(key)  # another head's tensor (or a pooler this model lacks)
    missing = [names[k] for k in names if k not in state and k not in optional]
    shapes = [
        f"{names[k]} is {tuple(v.shape)} in the file, {expected[k]} in the config"
        for k, v in state.items()
        if tuple(v.shape) != expected[k]
    ]
    problems = misfit_summary([k.removeprefix(bare) for k in missing], unexpected, shapes)
    if problems:
        raise RunError(f"{where} does not match its BERT config: {problems}")
    if info is not None:
        info["missing_keys"] = [names[k] for k in names if k not in state]
        info["unexpected_keys"] = unused
    return state


def _expected_shapes(
    config: ModelConfig, model_class: type[AttnkitModel]
) -> dict[str, tuple[int, ...]]:
    """Every tensor's shape in a ``model_class`` of ``config`` (without building one)."""
    with torch.device("meta"):
        model = model_class(config)
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}


# --------------------------------------------------------------------------------------
# directories
# --------------------------------------------------------------------------------------
def read_hf_config(directory: str | Path, config_class: type[C]) -> C:
    """The ``config_class`` (``BertConfig``) of a Hugging Face BERT directory's config.json."""
    path = Path(directory) / CONFIG_FILE
    if not path.is_file():
        raise MissingFileError(f"{directory} has no {CONFIG_FILE}")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise RunError(f"{path} is damaged ({str(exc).splitlines()[0]})") from None
    return bert_config_from_hf(raw, config_class, where=str(path))


class _Shape:
    """A tensor's stand-in with only its shape (from a safetensors header)."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = torch.Size(shape)


def check_hf_bert(
    directory: str | Path, config: ModelConfig, model_class: type[AttnkitModel]
) -> None:
    """Before loading anything: a ``model_class`` of ``config`` (read from ``directory``'s
    config.json, its sizes bounded) must have the tensors of the directory's
    model.safetensors, read from its header (``from_hf_state_dict`` run on the shapes), and
    fit in the memory available. One line naming config.json and the field (a
    ``RunError`` for weights that disagree, a ``ConfigError`` for memory);
    pytorch_model.bin has no header: it is checked once loaded."""
    directory = Path(directory)

    def check_tensors(shapes: dict[str, tuple[int, ...]], changed: ModelConfig) -> None:
        stubs = {k: _Shape(v) for k, v in shapes.items()}
        from_hf_state_dict(stubs, changed, model_class, str(directory))  # type: ignore[arg-type]

    def expected_found(shapes: dict[str, tuple[int, ...]], changed: ModelConfig) -> Any:
        names = model_key_map(model_class, _sizes(changed).num_layers)
        bare = _prefix(model_class)
        expected = {
            names[k].removeprefix(bare): v
            for k, v in _expected_shapes(changed, model_class).items()
        }
        return expected, {n: v for k, v in shapes.items() if (n := _hf_name(k)) is not None}

    check_foreign_weights(
        directory, config, check_tensors, expected_found, _HF_NAMES, model_class,
        SAFETENSORS_FILE,
    )  # fmt: skip


def read_hf_tensors(directory: str | Path, map_location: str = "cpu") -> dict[str, Tensor]:
    """The tensors of a Hugging Face directory: model.safetensors, else pytorch_model.bin
    (loaded with ``weights_only=True``: tensors only, no code runs)."""
    directory = Path(directory)
    safetensors = directory / SAFETENSORS_FILE
    if safetensors.is_file():
        return read_tensors(safetensors, map_location)
    pickle = directory / PYTORCH_FILE
    if pickle.is_file():
        try:
            tensors = torch.load(pickle, map_location=map_location, weights_only=True)
        except Exception as exc:  # unpickling errors come in many types
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise RunError(f"{pickle} could not be read as tensors only ({reason})") from None
        if not isinstance(tensors, dict) or not all(
            isinstance(v, Tensor) for v in tensors.values()
        ):
            raise RunError(f"{pickle} is not a state dict of tensors")
        return tensors
    if any(directory.glob("*.index.json")):
        raise RunError(f"{directory} holds a sharded checkpoint, which is not supported")
    raise MissingFileError(f"{directory} has neither {SAFETENSORS_FILE} nor {PYTORCH_FILE}")


def load_hf_bert(directory: str | Path, model_class: type[M], map_location: str = "cpu") -> M:
    """A ``model_class`` (``BertModel`` or a head's class; eval mode) from a Hugging Face
    BERT directory. ``model.loading_info`` holds Hugging Face's names of the tensors freshly
    initialised (``missing_keys``: a head or pooler the checkpoint lacks) and of those
    unused (``unexpected_keys``: another head's)."""
    config = read_hf_config(directory, model_class.config_class)
    config = config.replace(arch=_layout(model_class).ARCH)
    check_hf_bert(directory, config, model_class)  # before anything is loaded or built
    tensors = read_hf_tensors(directory, map_location)
    info: dict[str, list[str]] = {}
    state = from_hf_state_dict(tensors, config, model_class, str(directory), info)
    model = model_class(config)
    result = model.load_state_dict(state, strict=False)
    assert not result.unexpected_keys, result.unexpected_keys
    _layout(model).loading_info = info
    if info["missing_keys"]:
        logger.warning(
            "Some weights of %s were not initialized from the checkpoint at %s and are newly "
            "initialized: %s; train the model before using it for predictions",
            model_class.__name__,
            directory,
            ", ".join(info["missing_keys"]),
        )
    if info["unexpected_keys"]:
        logger.info(
            "%s does not use these tensors of %s: %s",
            model_class.__name__,
            directory,
            ", ".join(info["unexpected_keys"]),
        )
    return model.to(map_location).eval()


_POOLED_BY = {"mean": "by mean over tokens", "cls": "on the bare [CLS] vector"}


def check_hf_exportable(config: ModelConfig) -> None:
    """A one-line ``ConfigError`` if Hugging Face's class for ``config.arch`` would compute
    something else than attnkit's model: a feature-based model (``freeze_encoder``) or a
    bert-classifier that does not pool with the pooler (``model.pooling: mean | cls``;
    ``BertForSequenceClassification`` always reads tanh(W h_[CLS] + b))."""
    sizes = _sizes(config)
    if sizes.freeze_encoder:
        raise ConfigError(
            "a feature-based model (model.freeze_encoder) reads a learned mix of the encoder's "
            "layers, which Hugging Face's BERT classes have no place for; export the "
            "fine-tuned kind instead"
        )
    pooling = sizes.pooling_used
    if config.arch == "bert-classifier" and pooling != "pooler":
        raise ConfigError(
            f"it pools {_POOLED_BY.get(pooling, f'by {pooling}')} (model.pooling: {pooling}); "
            "transformers' BertForSequenceClassification reads the [CLS] pooler, so a Hugging "
            "Face export would predict differently: export --format onnx (or --format attnkit "
            "--quantize int8) instead, or train with model.pooling: pooler"
        )


def fold_temperature(
    hf_config: dict[str, Any], tensors: dict[str, Tensor], temperature: float
) -> None:
    """Fold a classifier's calibration temperature T into its head, in place: the
    classifier's weight and bias divided by T, so that softmax(W x + b) of the new head is
    softmax((W x + b) / T) exactly (what ``ClassifierPredictor`` computes), and config.json
    records ``"attnkit_temperature_folded": T`` (so that nobody divides by it again:
    attnkit reads such a directory as it is)."""
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)):
        raise ConfigError(f"temperature must be a number > 0, got {short_repr(temperature)}")
    if not 0 < temperature < float("inf"):
        raise ConfigError(f"temperature must be a number > 0, got {temperature!r}")
    if "classifier.weight" not in tensors or "classifier.bias" not in tensors:
        raise ConfigError("only a classifier's head (classifier.weight, .bias) takes a temperature")
    for name in ("classifier.weight", "classifier.bias"):
        tensors[name] = tensors[name] / temperature
    hf_config["attnkit_temperature_folded"] = float(temperature)


def save_hf_bert(
    model: AttnkitModel,
    directory: str | Path,
    labels: list[str] | None = None,
    temperature: float | None = None,
) -> Path:
    """Write ``model`` as a Hugging Face BERT directory (config.json + model.safetensors)
    that ``transformers.BertModel.from_pretrained`` loads with no missing or unexpected
    keys (the head's class, e.g. ``transformers.BertForMaskedLM``, for a model with a
    head). ``temperature`` (a calibrated bert-classifier's T): folded into the head
    (``fold_temperature``), so transformers' probabilities are attnkit's. Refuses a model
    Hugging Face's classes would run differently (``check_hf_exportable``) and a training
    run's directory (its config.json would be replaced)."""
    check_hf_exportable(model.config)
    hf_config = bert_config_to_hf(model.config, labels)
    tensors = to_hf_state_dict(model)
    if temperature is not None:
        fold_temperature(hf_config, tensors, temperature)
    return write_hf_checkpoint(directory, hf_config, tensors)


def write_hf_checkpoint(
    directory: str | Path, config: dict[str, Any], tensors: dict[str, Tensor]
) -> Path:
    """Write a Hugging Face directory: model.safetensors, then config.json (both atomic).
    Refuses a training run's directory (its config.json would be replaced)."""
    directory = Path(directory)
    path = directory / CONFIG_FILE
    if is_training_run(directory):
        raise ConfigError(
            f"{directory} is a training run: saving would replace its config.json; "
            "choose another folder"
        )
    directory.mkdir(parents=True, exist_ok=True)
    save_tensors(tensors, directory / SAFETENSORS_FILE)
    atomic_write_text(path, json.dumps(config, indent=2, ensure_ascii=False) + "\n")
    return directory

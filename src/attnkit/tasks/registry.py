"""The task registry: the recipe's ``task:`` name -> its ``TaskSpec`` (``tasks/base.py``).

Built-in tasks are named here by the spec their module defines (``BUILTIN``: name ->
``"attnkit.tasks.classify:SPEC"``), as transformers' auto mappings name their classes: a
module is imported the first time its task is asked for, and registers nothing itself (no
task module imports the registry). Adding a task = one new module that defines its spec +
one line in ``BUILTIN``. A task defined anywhere else calls ``register_task``: a script or
a test before it trains, another package from a module it names as an entry point, so the
``attnkit`` command finds it too:

    [project.entry-points."attnkit.tasks"]
    my-task = "my_package.my_task"        # importing it registers task "my-task"
    my-task = "my_package.my_task:SPEC"   # or: the spec itself, registered when loaded
"""

from __future__ import annotations

import importlib
import importlib.metadata

from attnkit.core.errors import ConfigError
from attnkit.tasks.base import TaskSpec

__all__ = ["BUILTIN", "get_task", "register_task", "task_names"]

# task name -> the spec that is the task, by name ("module:NAME"), imported on first use
BUILTIN: dict[str, str] = {
    "classify": "attnkit.tasks.classify:SPEC",
    "translate": "attnkit.tasks.seq2seq:TRANSLATE",
    "chat": "attnkit.tasks.seq2seq:CHAT",
    "mlm": "attnkit.tasks.mlm:SPEC",
    "tag": "attnkit.tasks.tag:SPEC",
    "qa": "attnkit.tasks.qa:SPEC",
    "bert-pretrain": "attnkit.tasks.bert_pretrain:SPEC",
    "lm": "attnkit.tasks.lm:SPEC",
    "bilm": "attnkit.tasks.bilm:SPEC",
}

ENTRY_POINTS = "attnkit.tasks"
# the tasks registered (register_task) and the built-in ones asked for so far; emptied (a
# test's), a built-in one comes back from its module on the next get_task
_REGISTRY: dict[str, TaskSpec] = {}


def register_task(spec: TaskSpec, replace: bool = False) -> TaskSpec:
    """Make ``spec`` the task named ``spec.name`` (a built-in one's name only with
    ``replace=True``); returns it."""
    if not spec.name:
        raise ValueError("a TaskSpec needs a name")
    taken = spec.name in _REGISTRY or spec.name in BUILTIN
    if taken and not replace and _REGISTRY.get(spec.name) is not spec:
        raise ValueError(f"task {spec.name!r} is already registered")
    _REGISTRY[spec.name] = spec
    return spec


def task_names() -> list[str]:
    return sorted(set(BUILTIN) | set(_REGISTRY) | set(_plugins()))


def _plugins() -> dict[str, importlib.metadata.EntryPoint]:
    """Tasks other packages declare (``[project.entry-points."attnkit.tasks"]``: name =
    the module that registers it, or its spec), so that the ``attnkit`` command finds them
    too."""
    return {ep.name: ep for ep in importlib.metadata.entry_points(group=ENTRY_POINTS)}


def _builtin(name: str) -> TaskSpec:
    """The spec ``BUILTIN[name]`` names, its module imported now (once: Python keeps it)."""
    module, _, attribute = BUILTIN[name].partition(":")
    spec = getattr(importlib.import_module(module), attribute)
    if not isinstance(spec, TaskSpec) or spec.name != name:
        raise TypeError(f"{BUILTIN[name]} is not the TaskSpec of task {name!r}")
    return spec


def get_task(name: str) -> TaskSpec:
    """The spec of task ``name``, importing on first use the module that defines it: a
    built-in one (``BUILTIN``) or a plugin's (entry point group ``attnkit.tasks``)."""
    if name not in _REGISTRY and name in BUILTIN:
        _REGISTRY[name] = _builtin(name)
    if name not in _REGISTRY:
        plugin = _plugins().get(name)
        if plugin is not None:
            loaded = plugin.load()  # a module that registers it, or the spec itself
            if isinstance(loaded, TaskSpec) and name not in _REGISTRY:
                register_task(loaded)
    if name not in _REGISTRY:
        raise ConfigError(f"unknown task {name!r} (valid: {', '.join(task_names())})")
    return _REGISTRY[name]

"""Tasks: what each recipe's ``task:`` trains, and the registry that finds it.

``attnkit.tasks.registry`` maps a task name to its ``TaskSpec`` (``attnkit.tasks.base``); the
whole recipe is read by ``attnkit.tasks.run_config``. Adding a task = one new module that
defines its spec + one line in ``registry.BUILTIN`` (``"attnkit.tasks.my_task:SPEC"``:
imported on first use; docs/extending.md).
"""

from __future__ import annotations

from attnkit.tasks.base import Predictor, PreparedData, Recipe, RunError, TaskSpec, get_tokenizer
from attnkit.tasks.registry import BUILTIN, get_task, register_task, task_names

__all__ = [
    "BUILTIN",
    "Predictor",
    "PreparedData",
    "Recipe",
    "RunError",
    "TaskSpec",
    "get_task",
    "get_tokenizer",
    "register_task",
    "task_names",
]

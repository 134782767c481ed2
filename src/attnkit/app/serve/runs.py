"""The runs one ``attnkit serve`` process holds, and which endpoint serves each.

A run's task names its endpoint (``TaskSpec.endpoint``: a classify run is served by
POST /v1/classify, an lm run by /v1/generate, ...), and its predictor must declare the
capability that endpoint calls (``ENDPOINT_CAPABILITY``, ``Predictor.can``); nothing here
knows a task by name."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from attnkit.app.api import load
from attnkit.app.explain.trace import family_of
from attnkit.app.serve.names import parse_spec
from attnkit.core.errors import InputError, RunError
from attnkit.tasks import get_task

# what each endpoint calls on a run's predictor (attnkit.app.serve.handlers); the options a
# request may ask for need theirs too: classify's pairs (sentence_pairs) and attention,
# translate's alignment
ENDPOINT_CAPABILITY: dict[str, str] = {
    "classify": "predict",
    "translate": "translate",
    "chat": "chat",
    "generate": "generate",
    "tag": "tag",
    "answer": "answer",
}


@dataclass
class ServedRun:
    """One loaded run: its public ``name``, where it came from, its task and predictor."""

    name: str
    path: Path
    task: str
    endpoint: str | None  # None: a run served for its explorer page only (attnkit explain)
    predictor: Any

    @property
    def explain_problem(self) -> str | None:
        """Why the explorer cannot step through this run (``family_of``: no view for its
        task, or no PyTorch model, e.g. an ONNX export), or None when it can."""
        try:
            family_of(self.predictor)
        except InputError as exc:
            return str(exc)
        return None

    @property
    def explainable(self) -> bool:
        """Whether the explorer can step through this run (its page is linked and served)."""
        return self.explain_problem is None

    def describe(self) -> dict[str, Any]:
        """What GET /v1/models says about it (what the web page builds its forms from)."""
        p = self.predictor
        model = p.model
        cfg = p.config
        info: dict[str, Any] = {
            "name": self.name,
            "task": self.task,
            "endpoint": None if self.endpoint is None else f"/v1/{self.endpoint}",
            "explain": f"/explain/{quote(self.name, safe='')}" if self.explainable else None,
            "arch": cfg.model.arch,
            "parameters": getattr(model, "num_parameters", None)  # an ONNX export's
            or sum(t.numel() for t in model.parameters()),
            "dataset": cfg.data.name,
        }
        if self.endpoint in ("classify", "tag"):
            info["labels"] = list(p.labels)
        if self.endpoint == "classify":
            info["pairs"] = p.can("sentence_pairs") and bool(p.pairs)
            info["attention"] = (
                p.can("attention") and bool(model.returns_attention) and not info["pairs"]
            )
        if self.endpoint == "translate":
            info["alignment"] = p.can("alignment") and bool(model.has_cross_attention)
        return info


def parse_specs(specs: Sequence[str | Path]) -> list[tuple[str, Path]]:
    """(name, path) of each ``RUN`` / ``NAME=RUN`` (``attnkit.app.serve.names``), before any
    run is loaded: an unsafe name, or two runs of one name, is a one-line ``RunError``."""
    if not specs:
        raise RunError("give at least one run directory to serve")
    named: dict[str, Path] = {}
    for spec in specs:
        name, path = parse_spec(spec)
        if name in named:
            raise RunError(
                f"two runs are named {name!r} ({named[name]} and {path}); "
                f"name them: attnkit serve a={named[name]} b={path}"
            )
        named[name] = path
    return list(named.items())


def load_runs(
    specs: Sequence[str | Path],
    map_location: str = "cpu",
    precision: str = "auto",
    explain_only: bool = False,
) -> dict[str, ServedRun]:
    """Load each run (``RUN`` or ``NAME=RUN``) for serving, by name. A run whose task has no
    endpoint, or two runs of one name, is a one-line ``RunError``; with ``explain_only``
    (``attnkit explain``) a run without an endpoint is served for its explorer page, and a
    run the explorer has no view for is the error."""
    runs: dict[str, ServedRun] = {}
    for name, path in parse_specs(specs):
        predictor = load(path, map_location=map_location, precision=precision)
        task = predictor.config.task
        endpoint = get_task(task).endpoint
        if explain_only:
            family_of(predictor)  # InputError: no view for this task
            can = endpoint is not None and predictor.can(
                ENDPOINT_CAPABILITY.get(endpoint, endpoint)
            )
            runs[name] = ServedRun(name, path, task, endpoint if can else None, predictor)
            continue
        if endpoint is None:
            raise RunError(
                f"{path} is a {task} run, which has no endpoint to serve it; serve classify, "
                "translate, chat, lm, tag or qa runs"
            )
        needed = ENDPOINT_CAPABILITY.get(endpoint, endpoint)
        if not predictor.can(needed):
            raise RunError(
                f"{path} is a {task} run whose predictor cannot {needed}: it cannot answer "
                f"/v1/{endpoint}"
            )
        runs[name] = ServedRun(name, path, task, endpoint, predictor)
    return runs


def pick_explainable(runs: dict[str, ServedRun], name: str | None) -> ServedRun:
    """The run whose forward pass /v1/explain steps through: the one named, or the only one.

    Raises:
        LookupError: no such run (-> 404).
        InputError: the explorer has no view for its task, or several runs could answer
            (-> 422).
    """
    if name is None:
        if len(runs) > 1:
            raise InputError(f"several models are served ({', '.join(runs)}): name one in 'model'")
        name = next(iter(runs))
    if name not in runs:
        raise LookupError(f"no model named {name!r} is served (GET /v1/models lists them)")
    run = runs[name]
    family_of(run.predictor)  # InputError: no view for this task
    return run


def pick(runs: dict[str, ServedRun], endpoint: str, name: str | None) -> ServedRun:
    """The run that answers a request to ``endpoint``: the one named, or the only one.

    Raises:
        LookupError: no such run (-> 404).
        InputError: the run serves another endpoint, or several could answer (-> 422).
    """
    candidates = [r for r in runs.values() if r.endpoint == endpoint]
    if name is not None:
        if name not in runs:
            raise LookupError(f"no model named {name!r} is served (GET /v1/models lists them)")
        run = runs[name]
        if run.endpoint is None:
            raise InputError(
                f"model {name!r} is served for its explorer page only: /explain/{name}"
            )
        if run.endpoint != endpoint:
            raise InputError(f"model {name!r} is a {run.task} model: send it to /v1/{run.endpoint}")
        return run
    if not candidates:
        raise LookupError(f"no model served here answers /v1/{endpoint}")
    if len(candidates) > 1:
        names = ", ".join(r.name for r in candidates)
        raise InputError(f"several models answer /v1/{endpoint} ({names}): name one in 'model'")
    return candidates[0]

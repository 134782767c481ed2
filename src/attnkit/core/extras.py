"""The optional dependencies ("extras"), and the one rule for a missing one.

``import attnkit``, training, evaluation and prediction need only the core dependencies
(pyproject.toml). Everything else is an extra, installed with ``pip install "attnkit[NAME]"``:

    plot         matplotlib (+ koreanize-matplotlib's Korean font): figures, curves.png
    serve        fastapi, pydantic, uvicorn, fastapi-offline: ``attnkit serve``
    onnx         onnx, onnxscript, onnxruntime: ``attnkit export --format onnx``
    tensorboard  tensorboard: ``training.report_to: [tensorboard]``
    notebook     ipywidgets (+ plot): the live progress widget and inline figures in Jupyter

An optional package is imported only where it is used, inside ``needs(extra, what)`` (or
through ``require``). A missing one is then a ``MissingExtraError``: one line naming the
command to run, e.g. ``attnkit serve needs the serve extra: pip install "attnkit[serve]"
(no module named 'fastapi')``. It is an ``AttnkitError`` (the CLI prints it as one line and
exits non-zero) and an ``ImportError`` (``except ImportError`` still catches it).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

from attnkit.core.errors import AttnkitError

__all__ = [
    "EXTRAS",
    "MissingExtraError",
    "extra_of",
    "install_command",
    "missing_extra",
    "needs",
    "require",
]

# extra -> the top-level modules it brings (and those they need directly), by import name
EXTRAS: dict[str, tuple[str, ...]] = {
    "plot": ("matplotlib", "koreanize_matplotlib", "fontTools", "kiwisolver", "PIL"),
    "serve": (
        "fastapi",
        "pydantic",
        "pydantic_core",
        "uvicorn",
        "fastapi_offline",
        "starlette",
        "h11",
        "anyio",
    ),
    "onnx": ("onnx", "onnxscript", "onnxruntime"),
    "tensorboard": ("tensorboard",),
    "notebook": ("ipywidgets", "IPython"),
}


class MissingExtraError(AttnkitError, ImportError):
    """An optional dependency is not installed: one line naming ``pip install "attnkit[X]"``."""


def install_command(extra: str) -> str:
    """``pip install "attnkit[EXTRA]"`` (quoted for every shell)."""
    if extra not in EXTRAS:
        raise ValueError(f"unknown extra {extra!r} (known: {', '.join(EXTRAS)})")
    return f'pip install "attnkit[{extra}]"'


def extra_of(module: str | None) -> str | None:
    """The extra that brings the module named ``module`` (e.g. ``matplotlib.pyplot`` ->
    ``plot``), or None for a module of no extra."""
    top = (module or "").split(".")[0]
    return next((extra for extra, names in EXTRAS.items() if top in names), None)


def _reason(exc: ImportError) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:1].lower() + text[1:]


def _error(extra: str, what: str, exc: ImportError) -> MissingExtraError:
    error = MissingExtraError(
        f"{what} needs the {extra} extra: {install_command(extra)} ({_reason(exc)})"
    )
    error.name = exc.name
    return error


@contextmanager
def needs(extra: str, what: str) -> Iterator[None]:
    """Import the optional packages of ``extra`` inside this block: an ImportError of any
    module but attnkit's own (a bug, left as is) becomes a ``MissingExtraError`` saying that
    ``what`` (e.g. "attnkit serve") needs ``extra`` and how to install it."""
    install_command(extra)  # an unknown extra is a bug of the caller, found at once
    try:
        yield
    except MissingExtraError:
        raise
    except ImportError as exc:
        if (exc.name or "").split(".")[0] == "attnkit":
            raise
        raise _error(extra, what, exc) from exc


def require(module: str, extra: str, what: str) -> ModuleType:
    """The optional module ``module``, imported (``MissingExtraError`` if it is missing):
    ``plt = require("matplotlib.pyplot", "plot", "attnkit plot")``."""
    with needs(extra, what):
        return importlib.import_module(module)


def missing_extra(exc: ImportError, what: str) -> MissingExtraError | None:
    """``exc`` as a ``MissingExtraError`` if the module it could not import belongs to an
    extra (the CLI's net for an import not wrapped in ``needs``); else None."""
    if isinstance(exc, MissingExtraError):
        return exc
    extra = extra_of(exc.name)
    return None if extra is None else _error(extra, what, exc)

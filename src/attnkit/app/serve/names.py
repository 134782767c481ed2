"""The public name of a served run (``attnkit serve NAME=RUN``, or its folder's name): part
of the URLs the server answers (``/explain/NAME``) and of the requests' ``"model"``, so it
holds only what a URL path carries as it is: 1 to 64 letters, digits, ``.``, ``_`` or
``-``, not starting with ``.``. A name given (``NAME=RUN``) outside that is refused, in one
line, before anything is loaded; a folder's name is made into one (``my run`` -> ``my-run``,
``감성`` -> ``run``: then name it)."""

from __future__ import annotations

import re
from pathlib import Path

from attnkit.core.errors import RunError

__all__ = ["RUN_NAME", "parse_spec", "safe_name"]

MAX_NAME = 64
RUN_NAME = re.compile(rf"[A-Za-z0-9_-][A-Za-z0-9._-]{{0,{MAX_NAME - 1}}}")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(text: str) -> str:
    """``text`` (a folder's name) as a run name: each run of other characters replaced by
    ``-``, leading dots and dashes dropped, at most 64 characters; ``run`` if nothing is
    left."""
    name = _UNSAFE.sub("-", text).lstrip(".-")[:MAX_NAME].rstrip("-")
    return name if RUN_NAME.fullmatch(name) else "run"


def parse_spec(spec: str | Path) -> tuple[str, Path]:
    """``NAME=RUN`` (NAME checked) or ``RUN`` (named after its folder, made safe): (name,
    path). An empty or unsafe NAME is a one-line ``RunError``."""
    text = str(spec)
    if "=" in text and not Path(text).exists():
        name, _, path = text.partition("=")
        if not name or not path:
            raise RunError(f"expected RUN or NAME=RUN, got {text!r}")
        if RUN_NAME.fullmatch(name) is None:
            raise RunError(
                f"run name {name!r} must be 1 to {MAX_NAME} letters, digits, '.', '_' or '-', "
                f"not starting with '.' (it is part of the URL /explain/NAME): e.g. "
                f"{safe_name(name)}={path}"
            )
        return name, Path(path)
    path = Path(text)
    return safe_name(path.resolve().name), path

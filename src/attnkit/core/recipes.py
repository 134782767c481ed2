"""The bundled recipes: the YAML files of ``attnkit/recipes/`` (package data).

``attnkit recipes`` lists them, ``attnkit recipes show NAME`` prints one to copy and edit,
``attnkit train NAME`` / ``attnkit.train("NAME")`` train one when ``NAME`` is not a file (a
path always wins). They are read through ``importlib.resources``, so they work from a wheel,
an editable install or a zip alike; in a git checkout ``configs/NAME.yaml`` links to them.

Each recipe describes itself in a top-level ``about:`` mapping, which training ignores::

    about:
      trains: one line: what the recipe trains
      minutes: 15.91          # training minutes measured on 2 CPU cores; null: not measured
      measured: benchmarks/results/nsmc-transformer.json train_minutes   # where recorded

Its task and the data it needs come from the recipe itself (``task:``, ``data.name``, and what
it starts from: a run in ``model.init_from`` or ``tokenizer.path``, or pretrained weights).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

import yaml

from attnkit.core.errors import ConfigError

if TYPE_CHECKING:  # (importlib.resources.abc is Python >= 3.11)
    from importlib.resources.abc import Traversable

__all__ = [
    "Recipe",
    "bundled_names",
    "bundled_recipe",
    "bundled_recipes",
    "bundled_text",
    "close_names",
    "is_bundled",
    "missing_recipe_message",
]

_SUFFIX = ".yaml"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def _folder() -> Traversable:
    """The ``recipes`` folder inside the installed ``attnkit`` package."""
    return resources.files("attnkit").joinpath("recipes")


def bundled_names() -> list[str]:
    """The names of the bundled recipes (file stems), sorted."""
    folder = _folder()
    if not folder.is_dir():
        return []
    return sorted(
        entry.name[: -len(_SUFFIX)]
        for entry in folder.iterdir()
        if entry.name.endswith(_SUFFIX) and entry.is_file()
    )


def is_bundled(name: str) -> bool:
    """True if ``name`` is the name of a bundled recipe (no path, no ``.yaml``)."""
    return bool(_NAME.fullmatch(name)) and name in bundled_names()


def close_names(name: str, n: int = 3) -> list[str]:
    """The bundled recipe names closest to ``name``: the one a typo misspells, else at most
    ``n`` look-alikes and names that contain it (``gpt`` -> imdb-gpt, nsmc-gpt, ...)."""
    stem = name.replace("\\", "/").rsplit("/", 1)[-1].removesuffix(_SUFFIX)[:100]
    names = bundled_names()
    close = difflib.get_close_matches(stem, names, n=n, cutoff=0.6)
    if close and difflib.SequenceMatcher(None, stem, close[0]).ratio() >= 0.9:
        return close[:1]
    for other in names:
        if len(close) >= n:
            break
        if stem and stem in other and other not in close:
            close.append(other)
    return close


def _unknown(name: str) -> str:
    close = close_names(name)
    hint = f" (did you mean {' / '.join(close)}?)" if close else ""
    return f"no bundled recipe named {name[:100]!r}{hint}; `attnkit recipes` lists them"


def bundled_text(name: str) -> str:
    """The YAML text of the bundled recipe ``name``, as shipped. Unknown: ``ConfigError``
    naming the closest recipes."""
    if not is_bundled(name):
        raise ConfigError(_unknown(name))
    return _folder().joinpath(name + _SUFFIX).read_text(encoding="utf-8")


def missing_recipe_message(config: str) -> str:
    """The one line for a recipe argument that is neither a file nor a bundled name. Text
    that looks like a path (a folder part or a suffix) is a missing file, with the bundled
    recipe of the same name where there is one."""
    looks_like_path = "/" in config or "\\" in config or config.endswith((".yaml", ".yml", ".json"))
    if not looks_like_path:
        close = close_names(config)
        hint = f"; did you mean {' / '.join(close)}?" if close else ""
        return (
            f"{config[:100]!r} is neither a recipe file nor a bundled recipe{hint} "
            "(`attnkit recipes` lists them)"
        )
    stem = config.replace("\\", "/").rsplit("/", 1)[-1]
    stem = stem.rsplit(".", 1)[0] if "." in stem else stem
    same = f" (the bundled recipe of that name: attnkit train {stem})" if is_bundled(stem) else ""
    return f"config file not found: {config}{same}"


@dataclass(frozen=True)
class Recipe:
    """One bundled recipe, as ``attnkit recipes`` lists it."""

    name: str
    task: str
    trains: str
    data: str  # the catalogue dataset it reads, then a run or weights it starts from; "none"
    minutes: float | None  # training minutes measured on 2 CPU cores; None: not measured
    measured: str | None  # where that measurement is recorded

    @property
    def text(self) -> str:
        """The recipe's YAML, as shipped (to copy and edit)."""
        return bundled_text(self.name)

    @property
    def minutes_text(self) -> str:
        """``minutes`` for a table: the number, or "not measured"."""
        return "not measured" if self.minutes is None else f"{self.minutes:g}"


def _starts_from(raw: dict[str, Any]) -> list[str]:
    """What the recipe starts from besides its data: a run (``runs/NAME`` in model.init_from
    or tokenizer.path) or pretrained weights (model.init_from, e.g. all-MiniLM-L6-v2)."""
    model = raw["model"] if isinstance(raw.get("model"), dict) else {}
    tokenizer = raw["tokenizer"] if isinstance(raw.get("tokenizer"), dict) else {}
    found = []
    init_from, tokenizer_path = model.get("init_from"), tokenizer.get("path")
    if isinstance(init_from, str):
        found.append(init_from)
    if isinstance(tokenizer_path, str) and tokenizer_path.startswith("runs/"):
        found.append(tokenizer_path)  # (a tokenizer file elsewhere is the user's own)
    runs = ["/".join(v.split("/")[:2]) if v.startswith("runs/") else v for v in found]
    return list(dict.fromkeys(runs))


def bundled_recipe(name: str) -> Recipe:
    """The metadata of the bundled recipe ``name`` (its ``about:`` mapping, task and data).
    A recipe without ``about.trains`` is a packaging bug: ``ConfigError`` naming it."""
    try:
        raw = yaml.safe_load(bundled_text(name)) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"bundled recipe {name!r} is not valid YAML: {exc.problem}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"bundled recipe {name!r} must contain a mapping of sections")
    about = raw.get("about")
    if not isinstance(about, dict) or not isinstance(about.get("trains"), str):
        raise ConfigError(f"bundled recipe {name!r} has no about.trains line")
    minutes = about.get("minutes")
    if minutes is not None and (isinstance(minutes, bool) or not isinstance(minutes, (int, float))):
        raise ConfigError(f"bundled recipe {name!r}: about.minutes must be a number or null")
    data = raw["data"] if isinstance(raw.get("data"), dict) else {}
    needs = [str(data["name"])] if data.get("name") else []
    needs += _starts_from(raw)
    return Recipe(
        name=name,
        task=str(raw.get("task", "classify")),
        trains=about["trains"].strip(),
        data=", ".join(needs) or "none",
        minutes=None if minutes is None else float(minutes),
        measured=about.get("measured"),
    )


def bundled_recipes() -> list[Recipe]:
    """Every bundled recipe's metadata, by name."""
    return [bundled_recipe(name) for name in bundled_names()]

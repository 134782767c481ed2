"""Config loading, the generic part: YAML recipes -> raw sections -> typed, checked dataclasses.

A recipe has four sections, ``data``, ``tokenizer``, ``model`` and ``training``, plus the
``task`` name. Each section is a dataclass declared by the layer that owns it: the shared
``DataConfig`` and ``TokenizerConfig`` in ``attnkit.data.settings`` (each task extends
``DataConfig`` with its own settings, ``TaskSpec.data_settings``), ``TrainingConfig`` in
``attnkit.runtime.training_config``, a ``ModelConfig`` per arch in ``attnkit.models`` and the
whole ``RunConfig`` in ``attnkit.tasks.run_config``. This module only reads YAML, applies
``--set section.key=value`` overrides and builds a dataclass from a mapping
(``build_dataclass``): every key is checked, a typo is an error that names the key and
suggests the closest valid one, every value is coerced to its field's type. It imports
nothing of attnkit but its errors.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import reprlib
from pathlib import Path
from typing import Any

import yaml

from attnkit.core.errors import ConfigError
from attnkit.core.recipes import bundled_text, is_bundled, missing_recipe_message

__all__ = [
    "FIRST_FORMAT_MODEL_KEYS",
    "ConfigError",
    "apply_overrides",
    "at_least",
    "build_dataclass",
    "check",
    "coerce",
    "cut",
    "parse_yaml",
    "positive",
    "read_recipe",
    "require",
    "short_repr",
    "suggest",
]

# The settings of the single, flat model section of the first run format (before each
# model family had its own config): keys of other families are ignored in such runs.
FIRST_FORMAT_MODEL_KEYS = frozenset(
    [
        "arch",
        "d_model",
        "num_heads",
        "d_ff",
        "num_layers",
        "dropout",
        "attention_dropout",
        "pooling",
        "positional",
        "norm_first",
        "activation",
        "objective",
        "generator_d_model",
        "rtd_weight",
        "init_from",
        "hidden_size",
        "bidirectional",
        "ngram_max",
        "num_buckets",
        "nb_weighting",
        "preset",
        "num_decoder_layers",
        "share_embeddings",
        "tie_output",
        "attention",
        "emb_dim",
    ]
)


def suggest(key: str, valid: list[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest valid key, else the list of valid keys."""
    close = difflib.get_close_matches(key, valid, n=1) if len(key) <= 100 else []
    return f" (did you mean {close[0]!r}?)" if close else f" (valid: {', '.join(valid)})"


_REPR = reprlib.Repr()
_REPR.maxlevel = 2
_REPR.maxlist = _REPR.maxtuple = _REPR.maxset = _REPR.maxdict = 4
_REPR.maxstring = _REPR.maxother = _REPR.maxlong = 60


def short_repr(value: Any, limit: int = 60) -> str:
    """``repr(value)`` for an error message, at most ``limit`` characters (cut with "…").
    Bounded work: a huge or deeply nested value (a YAML alias bomb) is never repr'd in
    full."""
    try:
        text = _REPR.repr(value).replace("\n", "\\n")
    except Exception:  # e.g. an int too long to convert to text
        text = f"<{type(value).__name__}>"
    return cut(text, limit)


def cut(text: str, limit: int = 60) -> str:
    """``text`` cut to ``limit`` characters (with "…")."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def positive(where: str, value: Any, optional: bool = False) -> tuple[bool, str]:
    """``(ok, message)`` for ``check``: ``value > 0`` (or None when ``optional``)."""
    ok = (optional and value is None) or (value is not None and value > 0)
    return ok, f"{where} must be > 0, got {short_repr(value)}"


def at_least(where: str, value: Any, low: float, optional: bool = False) -> tuple[bool, str]:
    """``(ok, message)`` for ``check``: ``value >= low`` (or None when ``optional``)."""
    ok = (optional and value is None) or (value is not None and value >= low)
    when = " (or null)" if optional else ""
    return ok, f"{where} must be >= {low}{when}, got {short_repr(value)}"


def coerce(value: Any, annotation: str, where: str) -> Any:
    """Check/convert a YAML value against a dataclass field's annotation string. Floats
    must be finite (YAML's ``.nan`` and ``.inf`` are refused)."""
    optional = "None" in annotation
    if value is None:
        if optional:
            return None
        raise ConfigError(f"{where} must not be null")
    base = annotation.replace(" | None", "").strip()
    try:
        if base == "bool":
            if not isinstance(value, bool):
                raise TypeError
            return value
        if base == "bool | str":  # a switch that also takes "auto"
            if isinstance(value, str) and value.strip().lower() == "auto":
                return "auto"
            if not isinstance(value, bool):
                raise ConfigError(f"{where} must be true, false or auto, got {short_repr(value)}")
            return value
        if base == "int":
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise TypeError
            if isinstance(value, str) and len(value) > 100:
                raise TypeError
            return int(value)
        if base == "float":
            if isinstance(value, bool) or (isinstance(value, str) and len(value) > 100):
                raise TypeError
            number = float(value)
            if not math.isfinite(number):
                raise ConfigError(f"{where} must be a finite number, got {short_repr(value)}")
            return number
        if base == "str":
            if not isinstance(value, str):
                raise TypeError
            return value
        if base.startswith("tuple"):
            if not isinstance(value, (list, tuple)) or len(value) > 100:
                raise TypeError
            return tuple(coerce(v, "float", f"{where}[{i}]") for i, v in enumerate(value))
    except (TypeError, ValueError, OverflowError) as exc:
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(f"{where} must be {base}, got {short_repr(value)}") from None
    return value


def build_dataclass(
    cls: type,
    raw: Any,
    prefix: str,
    hints: dict[str, str] | None = None,
    ignore: frozenset[str] = frozenset(),
) -> Any:
    """``cls(**raw)`` with every key checked (unknown -> the closest valid one, or ``hints``'
    message for a key that belongs elsewhere; keys in ``ignore`` are skipped) and every
    value coerced to its field's type. Raises ``ConfigError`` with a one-line message."""
    if not isinstance(raw, dict):
        raise ConfigError(
            f"{prefix.rstrip('.') or 'config'} must be a mapping, got {type(raw).__name__}"
        )
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    kwargs = {}
    for key, value in raw.items():
        where = f"{prefix}{key}"
        if key not in fields:
            if key in ignore:
                continue
            if hints and key in hints:
                raise ConfigError(hints[key])
            raise ConfigError(
                f"unknown config key {short_repr(where)}{suggest(str(key), list(fields))}"
            )
        kwargs[key] = coerce(value, str(fields[key].type), where)
    return cls(**kwargs)


def require(ok: bool, message: str) -> None:
    """Raise ``ConfigError(message)`` unless ``ok``."""
    if not ok:
        raise ConfigError(message)


def check(*conditions: tuple[bool, str]) -> None:
    """``require`` each ``(ok, message)`` in turn: the first that fails raises."""
    for ok, message in conditions:
        require(ok, message)


class _RecipeLoader(yaml.SafeLoader):  # type: ignore[misc]  # (PyYAML ships no types)
    """YAML's safe loading, except that a key given twice in one mapping is an error (plain
    YAML keeps the last value silently). Merge keys (``<<: *base``) may still be overridden."""

    def __init__(self, stream: str, source: str) -> None:
        super().__init__(stream)
        self.source = source
        self.sections: dict[int, str] = {}  # id(mapping node) -> its dotted section name

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            section = self.sections.get(id(node), "")
            seen: set[Any] = set()
            for key_node, value_node in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    duplicate = key in seen
                    seen.add(key)
                except TypeError:  # unhashable: the base class reports it
                    continue
                if duplicate:
                    where = f"section {section} of {self.source}" if section else self.source
                    raise ConfigError(
                        f"duplicate key {short_repr(key)} in {where}, "
                        f"line {key_node.start_mark.line + 1}"
                    )
                if isinstance(value_node, yaml.MappingNode):
                    name = f"{section}.{key}" if section else str(key)
                    self.sections.setdefault(id(value_node), cut(name))
        return super().construct_mapping(node, deep=deep)


def parse_yaml(text: str, source: str) -> Any:
    """``yaml.safe_load(text)``, refusing duplicate keys (``ConfigError`` naming ``source``,
    the section and the line)."""
    loader = _RecipeLoader(text, source)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


# what a malformed document can raise while it is read (besides yaml.YAMLError): a
# timestamp or integer PyYAML cannot convert, nesting deeper than the recursion limit
_PARSE_ERRORS = (yaml.YAMLError, UnicodeDecodeError, ValueError, RecursionError)


def apply_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``section.key=value`` strings (values parsed as YAML) to a raw config dict."""
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"--set expects key=value, got {short_repr(item)}")
        dotted, text = item.split("=", 1)
        try:
            value = parse_yaml(text, f"--set {cut(dotted)}")
        except ConfigError:
            raise
        except _PARSE_ERRORS:
            value = text
        node = raw
        parts = dotted.strip().split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"--set {cut(dotted)}: {short_repr(part)} is not a section")
        node[parts[-1]] = value
    return raw


def read_recipe(
    path: str | Path | None = None, overrides: list[str] | None = None
) -> dict[str, Any]:
    """The raw sections of a YAML (or JSON) recipe with ``overrides`` applied (``{}`` and the
    overrides when ``path`` is None); ``attnkit.tasks.run_config.load_config`` types and
    checks them. ``path`` is a file, or else the name of a bundled recipe
    (``attnkit.core.recipes``: ``"nsmc-quick"``); a file always wins."""
    raw: dict[str, Any] = {}
    if path is not None:
        file = Path(path)
        bundled = not file.is_file() and is_bundled(str(path))
        if not bundled and not file.is_file():
            raise ConfigError(missing_recipe_message(str(path)))
        source = f"bundled recipe {path}" if bundled else str(file)
        try:
            text = bundled_text(str(path)) if bundled else file.read_text(encoding="utf-8")
            raw = parse_yaml(text, source) or {}
        except ConfigError:
            raise
        except _PARSE_ERRORS as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ConfigError(f"cannot parse {source}: {cut(first, 200)}") from None
        if not isinstance(raw, dict):
            raise ConfigError(f"{source} must contain a mapping of sections")
    return apply_overrides(raw, overrides or [])

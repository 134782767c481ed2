"""The range of every decoding parameter, defined once.

The CLI's options (``attnkit generate --temperature``, ``chat --seed``, ...), the JSON
fields of ``attnkit serve`` (``serve/schemas.py``: pydantic bounds, so /docs shows them)
and the predictors' own checks all read ``PARAMS``, so a value the CLI takes is one the
server takes, and the other way round.

    seed                0 .. 2**63 - 1 (torch.Generator.manual_seed takes -2**63 .. 2**64 - 1
                        and wraps negatives; one non-negative 64-bit range leaves room for
                        ``chat``'s seed + turn)
    temperature         finite, >= 0 (0: greedy)
    top_k               0 .. 2**31 - 1 (0: off)
    top_p               (0, 1] (1: off)
    repetition_penalty  finite, > 0 (1: off)
    max_new_tokens      >= 0 (the server has its own, lower, limit)
    beam                1 .. MAX_BEAM (1: greedy; the server has its own, lower limit)
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

from attnkit.core.errors import InputError

__all__ = ["PARAMS", "Param", "check_params"]


@dataclass(frozen=True)
class Param:
    """One parameter's range: ``low`` (exclusive if ``low_open``) up to ``high`` (None: no
    bound; exclusive if ``high_open``); a float must also be finite."""

    name: str
    kind: type
    low: int | float
    low_open: bool = False
    high: int | float | None = None
    high_open: bool = False

    @property
    def option(self) -> str:
        """The CLI option: ``--top-k`` for ``top_k``."""
        return "--" + self.name.replace("_", "-")

    def bounds(self) -> dict[str, int | float]:
        """The bounds as pydantic ``Field`` keywords (``ge``/``gt``, ``le``/``lt``)."""
        out: dict[str, int | float] = {("gt" if self.low_open else "ge"): self.low}
        if self.high is not None:
            out["lt" if self.high_open else "le"] = self.high
        return out

    def describe(self) -> str:
        """The range in words: ``>= 0 and finite``, ``in (0, 1]``, ``in 0..2147483647``."""
        low = f"{self.low:g}" if self.kind is float else str(self.low)
        if self.high is None:
            text = f"{'>' if self.low_open else '>='} {low}"
            return text + " and finite" if self.kind is float else text
        high = f"{self.high:g}" if self.kind is float else str(self.high)
        if self.kind is int and not self.low_open and not self.high_open:
            return f"in {low}..{high}"
        return f"in {'(' if self.low_open else '['}{low}, {high}{')' if self.high_open else ']'}"

    def problem(self, value: Any) -> str | None:
        """None if ``value`` is in range, else why not (``must be >= 0 and finite, got
        inf``)."""
        wrong = f"must be {self.describe()}, got {value!r}"
        if isinstance(value, bool):
            return wrong
        if self.kind is int and not isinstance(value, numbers.Integral):
            return f"must be an integer, got {value!r}"
        if not isinstance(value, numbers.Real):
            return f"must be a number, got {value!r}"
        if not isinstance(value, numbers.Integral) and not math.isfinite(value):
            return wrong
        above_low = value > self.low if self.low_open else value >= self.low
        below_high = self.high is None or (
            value < self.high if self.high_open else value <= self.high
        )
        return None if above_low and below_high else wrong


MAX_BEAM = 64  # beams past this only cost memory (the server's own limit is lower: max_beam)

PARAMS: dict[str, Param] = {
    p.name: p
    for p in (
        Param("seed", int, 0, high=2**63 - 1),
        Param("temperature", float, 0.0),
        Param("top_k", int, 0, high=2**31 - 1),
        Param("top_p", float, 0.0, low_open=True, high=1.0),
        Param("repetition_penalty", float, 0.0, low_open=True),
        Param("max_new_tokens", int, 0),
        Param("beam", int, 1, high=MAX_BEAM),
    )
}


def check_params(**values: Any) -> None:
    """Raise ``InputError`` for the first value out of its range (None: not given, skipped):
    ``check_params(temperature=t, seed=s)``."""
    for name, value in values.items():
        if value is None:
            continue
        problem = PARAMS[name].problem(value)
        if problem is not None:
            raise InputError(f"{name} {problem}")

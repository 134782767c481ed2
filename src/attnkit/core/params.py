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

and the sizes other verbs take, bounded the same way wherever they enter:

    max_tokens          2 .. MAX_EXPLAIN_TOKENS: the tokens ``attnkit explain`` cuts an input to
                        (``--max-tokens``, the explainer's ``max_tokens``); each run needs at
                        least ``EXPLAIN_MIN_TOKENS`` of its input's layout
    pe_max_len          1 .. MAX_PE_SIZE: ``attnkit plot positional-encoding --max-len``
    pe_d_model          2 .. MAX_PE_SIZE: its ``--d-model``; both together at most
                        ``MAX_PE_CELLS`` numbers (``check_pe_size``)
    batch_size          1 .. MAX_BATCH_SIZE: the texts ``attnkit serve`` answers in one
                        forward pass across concurrent requests (``--batch-size``,
                        ``Limits.batch_size``; 1: each request alone)
    batch_wait_ms       0 .. MAX_BATCH_WAIT_MS: how long a batch, once the server is under
                        load, waits for more requests (``--batch-wait-ms``)
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any, cast

from attnkit.core.errors import InputError

__all__ = [
    "EXPLAIN_MIN_TOKENS",
    "MAX_BATCH_SIZE",
    "MAX_BATCH_WAIT_MS",
    "MAX_EXPLAIN_TOKENS",
    "MAX_PE_CELLS",
    "MAX_PE_SIZE",
    "PARAMS",
    "Param",
    "check_params",
    "check_pe_size",
]


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
    flag: str | None = None  # the CLI option, when it is not named after ``name``

    @property
    def option(self) -> str:
        """The CLI option: ``--top-k`` for ``top_k`` (``flag`` when given)."""
        return self.flag or "--" + self.name.replace("_", "-")

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
        number = cast(float, value)  # (an int or a float: numbers.Real has no "<")
        above_low = number > self.low if self.low_open else number >= self.low
        below_high = self.high is None or (
            number < self.high if self.high_open else number <= self.high
        )
        return None if above_low and below_high else wrong


MAX_BEAM = 64  # beams past this only cost memory (the server's own limit is lower: max_beam)
# tokens of one explained input: its attention arrays grow as heads x T^2, and past a few
# thousand tokens the explorer page is over its size budget anyway
MAX_EXPLAIN_TOKENS = 4096
# the positional-encoding figure: rows and columns each, and the numbers drawn (a 2048 x 2048
# figure takes ~3 s and ~1 GB to draw; 1,000,000 x 100,000 would take 400 GB)
MAX_PE_SIZE = 8192
MAX_PE_CELLS = 1 << 22  # 4,194,304: 2048 x 2048, 8192 x 512
# the server's micro-batches: past a few hundred texts a forward pass gains nothing on a CPU
# (the predictors cut their input into batches of 32-64 anyway), and waiting longer than a
# tenth of a second for company costs every request more than a forward pass saves
MAX_BATCH_SIZE = 256
MAX_BATCH_WAIT_MS = 100.0

# the fewest tokens the explainer may cut an input to (``max_tokens``), by the input's layout:
# one token of each text and the special tokens around them. The explainer picks a run's
# layout (``attnkit.app.explain.trace.min_tokens``); a qa run needs its question's tokens too.
EXPLAIN_MIN_TOKENS: dict[str, int] = {
    "text": 2,  # a text (classify, lm, bilm, translate, chat; [CLS] or [EOS] first, if any)
    "[CLS] text [SEP]": 3,  # a BERT's one text: classify, mlm, tag
    "[CLS] A [SEP] B [SEP]": 5,  # a BERT's sentence pair: classify, bert-pretrain with NSP
    "[CLS] question [SEP] context [SEP]": 5,  # qa, a one-token question
}

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
        Param("max_tokens", int, min(EXPLAIN_MIN_TOKENS.values()), high=MAX_EXPLAIN_TOKENS),
        Param("pe_max_len", int, 1, high=MAX_PE_SIZE, flag="--max-len"),
        Param("pe_d_model", int, 2, high=MAX_PE_SIZE, flag="--d-model"),
        Param("batch_size", int, 1, high=MAX_BATCH_SIZE),
        Param("batch_wait_ms", float, 0.0, high=MAX_BATCH_WAIT_MS),
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


def check_pe_size(max_len: Any, d_model: Any, cli: bool = False) -> None:
    """Raise ``InputError`` unless a positional-encoding figure of ``max_len`` positions by
    ``d_model`` dimensions is in range (``pe_max_len``, ``pe_d_model``, ``MAX_PE_CELLS``);
    ``cli``: the message names the options (``--max-len``) rather than the arguments."""
    for param, value in ((PARAMS["pe_max_len"], max_len), (PARAMS["pe_d_model"], d_model)):
        problem = param.problem(value)
        if problem is not None:
            raise InputError(f"{param.option if cli else param.name[3:]} {problem}")
    if max_len * d_model > MAX_PE_CELLS:
        names = "--max-len x --d-model" if cli else "max_len x d_model"
        raise InputError(
            f"{names} must be at most {MAX_PE_CELLS:,} numbers (e.g. 2048 x 2048 or "
            f"8192 x 512), got {max_len:,} x {d_model:,}"
        )

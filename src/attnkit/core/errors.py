"""attnkit's own exceptions: each means "bad input", described in one user-facing line.

The CLI reports exactly these as ``attnkit: error: <message>`` with exit code 2; any other
exception is a bug and keeps its traceback. All are ``ValueError`` subclasses.

    AttnkitError          base
      ConfigError         a bad recipe: unknown key, wrong type, impossible value
      DataError           a problem with input data (missing, malformed)
      RunError            a run directory that cannot be used as asked
      InputError          a bad argument or input text given to a predictor
      MissingFileError    a file the user named does not exist (also a FileNotFoundError)
      TrainingError       training cannot go on (it diverged: a non-finite loss or gradient)
      NonFiniteError      a model produced NaN or infinite outputs (damaged or diverged weights)
      MissingExtraError   an optional dependency is not installed: names its pip install
                          (attnkit.core.extras; also an ImportError)
"""

from __future__ import annotations

import json
from typing import Any

__all__ = [
    "NON_FINITE",
    "AttnkitError",
    "ConfigError",
    "DataError",
    "InputError",
    "MissingFileError",
    "NonFiniteError",
    "RunError",
    "TrainingError",
    "check_finite",
    "json_line",
]


class AttnkitError(ValueError):
    """Bad input to attnkit, described in one line."""


class ConfigError(AttnkitError):
    """A bad recipe: unknown key, wrong type, impossible value (one-line message)."""


class DataError(AttnkitError):
    """A problem with input data, described in one user-facing line (no traceback needed)."""


class RunError(AttnkitError):
    """A run directory that cannot be used as asked (missing, already used, incomplete)."""


class InputError(AttnkitError):
    """A bad argument or input given to a predictor (empty text, beam < 1, no [MASK], ...)."""


class MissingFileError(AttnkitError, FileNotFoundError):
    """A file the user named does not exist."""


class TrainingError(AttnkitError):
    """Training cannot go on: it diverged (a non-finite loss or gradient norm). The message
    names the step and the learning rate, and what was kept."""


class NonFiniteError(AttnkitError):
    """A model produced NaN or infinite outputs (its weights are damaged, or its training
    diverged): an error rather than NaN in a prediction (JSON has no NaN)."""


NON_FINITE = (
    "the model's outputs are not finite numbers (NaN or infinity): its weights are damaged "
    "or its training diverged (train it again, with a lower training.lr)"
)


def check_finite(values: Any, allow_neg_inf: bool = False) -> None:
    """Raise ``NonFiniteError`` unless every value of the tensor ``values`` is finite
    (``allow_neg_inf``: -inf allowed too, e.g. logits of banned tokens)."""
    import math

    import torch

    if values.is_floating_point():  # one reduction first: a finite sum has no NaN or inf in
        total = float(values.sum())  # it, a sum of -inf no NaN or +inf (NaN + x = NaN,
        if math.isfinite(total) or (allow_neg_inf and total == -math.inf):  # inf - inf = NaN)
            return
    bad = torch.isnan(values) | torch.isposinf(values)
    if not allow_neg_inf:
        bad |= torch.isneginf(values)
    if bool(bad.any()):
        raise NonFiniteError(NON_FINITE)


def json_line(obj: Any) -> str:
    """``obj`` as one line of strict JSON (UTF-8 as is): NaN and infinity, which JSON does
    not have, are refused (``NonFiniteError``) instead of printed as bare ``NaN``."""
    try:
        return json.dumps(obj, ensure_ascii=False, allow_nan=False)
    except ValueError as exc:
        if "JSON compliant" not in str(exc):  # "Out of range float values are not JSON compliant"
            raise
        raise NonFiniteError(NON_FINITE) from None

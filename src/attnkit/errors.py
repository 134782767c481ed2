"""attnkit's own exceptions: each means "bad input", described in one user-facing line.

The CLI reports exactly these as ``attnkit: error: <message>`` with exit code 2; any other
exception is a bug and keeps its traceback. All are ``ValueError`` subclasses.

    AttnkitError          base
      ConfigError         a bad recipe: unknown key, wrong type, impossible value
      DataError           a problem with input data (missing, malformed)
      RunError            a run directory that cannot be used as asked
      InputError          a bad argument or input text given to a predictor
      MissingFileError    a file the user named does not exist (also a FileNotFoundError)
"""

from __future__ import annotations

__all__ = [
    "AttnkitError",
    "ConfigError",
    "DataError",
    "InputError",
    "MissingFileError",
    "RunError",
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

"""One small module per task: each maps a batch to a loss / predictions and names its metrics."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from attnkit.config import TokenizerConfig
from attnkit.tokenization import Tokenizer, train_tokenizer


def get_tokenizer(
    tk: TokenizerConfig, texts: Iterable[str], what: str, log: Callable[[str], None] = print
) -> Tokenizer:
    """The recipe's tokenizer: loaded from ``tokenizer.path``, else trained on ``texts``
    (``what`` describes them in the log line)."""
    if tk.path:
        return Tokenizer.load(tk.path)
    log(f"training a {tk.kind} tokenizer (vocab {tk.vocab_size}) on {what}")
    return train_tokenizer(
        texts,
        kind=tk.kind,
        vocab_size=tk.vocab_size,
        min_frequency=tk.min_frequency,
        lowercase=tk.lowercase,
    )

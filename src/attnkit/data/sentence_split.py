"""Texts cut into segments for BERT's next-sentence prediction (``attnkit.data.nsp``):
a user text file's blank-line-separated blocks of lines, or one review cut into its
sentences. Plain text work (no tokenizer), so the catalogue's readers stay light."""

from __future__ import annotations

import re

__all__ = ["has_segments", "review_segments", "split_documents"]

_BR = re.compile(r"<br\s*/?>", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+")


def split_documents(text: str) -> list[list[str]]:
    """A user text file's documents: blocks separated by blank lines (lines of whitespace
    only count as blank); each document is the list of its non-empty, stripped lines."""
    docs: list[list[str]] = []
    current: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if line:
            current.append(line)
        elif current:
            docs.append(current)
            current = []
    if current:
        docs.append(current)
    return docs


def has_segments(review: str) -> bool:
    """Whether ``review_segments(review)`` is not empty (some text outside ``<br>`` tags),
    without cutting it."""
    if "<" not in review:  # (nearly every review: no tag to look for)
        return bool(review.strip())
    return any(block.strip() for block in _BR.split(review))


def review_segments(review: str) -> list[str]:
    """One review's segments: its sentences (see the module docstring); empty ones dropped."""
    parts: list[str] = []
    for block in _BR.split(review):
        parts.extend(s.strip() for s in _SENTENCE_END.split(block.strip()))
    return [p for p in parts if p]

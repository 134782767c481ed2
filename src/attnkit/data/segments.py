"""BERT's input format: ``[CLS] A [SEP]`` or ``[CLS] A [SEP] B [SEP]`` with segment ids.

    tokens          [CLS] the movie was great [SEP] i loved it [SEP]
    token_type_ids    0    0    0    0    0     0    1    1   1   1

Sentence A (and its [CLS] and [SEP]) is segment 0, sentence B and the last [SEP] segment 1
(Devlin et al. 2019, fig. 2). A pair longer than ``max_len`` loses tokens from the end of
the longer of the two sentences, one at a time ("longest first", as BERT's
``_truncate_seq_pair`` and Hugging Face's default).
"""

from __future__ import annotations

from collections.abc import Sequence

from attnkit.data.tokenization import Tokenizer, cut_text, truncate

__all__ = ["encode_pairs", "pair_ids", "truncate_pair"]


def truncate_pair(a: list[int], b: list[int], budget: int) -> tuple[list[int], list[int]]:
    """Cut the longer of ``a`` / ``b`` (``b`` on ties) from its end until
    ``len(a) + len(b) <= budget``."""
    a, b = list(a), list(b)
    while len(a) + len(b) > budget:
        if len(a) > len(b):
            a.pop()
        else:
            b.pop()
    return a, b


def pair_ids(
    tokenizer: Tokenizer, a: list[int], b: list[int] | None, max_len: int, keep: str = "head"
) -> tuple[list[int], list[int], bool]:
    """(input_ids, token_type_ids, truncated) of ``[CLS] a [SEP] (b [SEP])`` in at most
    ``max_len`` positions. A single sentence keeps its ``keep`` part (``truncate``); a pair
    is cut longest first."""
    cls, sep = tokenizer.cls_id, tokenizer.sep_id
    if b is None:
        budget = max_len - 2
        if budget < 1:
            raise ValueError(f"max_len={max_len} leaves no room for [CLS] text [SEP]")
        cut = len(a) > budget
        ids = [cls, *truncate(a, budget, keep), sep]
        return ids, [0] * len(ids), cut
    budget = max_len - 3
    if budget < 2:
        raise ValueError(f"max_len={max_len} leaves no room for [CLS] A [SEP] B [SEP]")
    cut = len(a) + len(b) > budget
    a, b = truncate_pair(a, b, budget)
    return [cls, *a, sep, *b, sep], [0] * (len(a) + 2) + [1] * (len(b) + 1), cut


def encode_pairs(
    tokenizer: Tokenizer,
    texts: Sequence[str],
    texts_b: Sequence[str] | None,
    max_len: int,
    keep: str = "head",
) -> tuple[list[list[int]], list[list[int]], list[bool]]:
    """``pair_ids`` for many texts (``texts_b`` None: single sentences): (input_ids,
    token_type_ids, truncated) lists, one entry per text. Each text is first cut to
    ``max_text_chars(max_len)`` characters (``cut_text``; a pair's sentences keep their
    beginnings, as longest-first does), and a text so cut counts as truncated."""
    a_keep = keep if texts_b is None else "head"
    a_texts, a_cut = _cut_all(texts, max_len, a_keep)
    a_ids = tokenizer.encode_batch(a_texts)
    b_ids: list[list[int] | None] = [None] * len(a_ids)
    b_cut = [False] * len(a_ids)
    if texts_b is not None:
        b_texts, b_cut = _cut_all(texts_b, max_len, "head")
        b_ids = list(tokenizer.encode_batch(b_texts))
    ids, types, cut = [], [], []
    for a, b, cut_a, cut_b in zip(a_ids, b_ids, a_cut, b_cut, strict=True):
        i, t, c = pair_ids(tokenizer, a, b, max_len, keep)
        ids.append(i)
        types.append(t)
        cut.append(c or cut_a or cut_b)
    return ids, types, cut


def _cut_all(texts: Sequence[str], max_len: int, keep: str) -> tuple[list[str], list[bool]]:
    """Each text cut to ``max_text_chars(max_len)`` characters, and whether it was."""
    pairs = [cut_text(t, max_len, keep) for t in texts]
    return [t for t, _ in pairs], [c for _, c in pairs]

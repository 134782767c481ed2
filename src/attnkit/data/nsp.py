"""BERT's next-sentence prediction (Devlin et al. 2019, section 3.1 "Task #2: NSP").

The model reads ``[CLS] A [SEP] B [SEP]`` and predicts, from the [CLS] output, whether B is
the text that really follows A (``is_next=1``, 50% of the pairs) or a segment taken from a
*different*, randomly chosen document (``is_next=0``, 50%). Segment (token type) ids tell the
two parts apart: 0 for ``[CLS] A [SEP]``, 1 for ``B [SEP]``. The task is meant to teach
relations between sentences (useful for QA and NLI).

What a document and a segment are:

* user text file (``split_documents``, ``attnkit.data.sentence_split``): a document is a block of lines separated from the
  next by a blank line; its segments are its non-empty lines (one sentence per line).
* one-line reviews, NSMC / IMDB (``review_segments``): a document is one review; its
  segments are its sentences, split after sentence-final punctuation (``. ! ? …``, which
  also covers Korean endings such as "다." and "요.") followed by whitespace, and at
  IMDB's ``<br />`` line breaks. Reviews without punctuation stay one segment.
* a document with a single segment (most short reviews) cannot give a positive pair: it is
  never used as A, only as the source of B in negative pairs. At least one document must
  have two or more segments.

Shapes: each ``NspExample`` holds ``input_ids`` and ``token_type_ids`` (lists of equal
length L <= max_len: 1 + len(A) + 1 + len(B) + 1) and ``is_next`` (0 or 1). The longer of
A / B is cut from its end (B on a tie; BERT's ``truncate_seq_pair``) until the pair fits ``max_len``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from attnkit.core.errors import DataError
from attnkit.data.segments import truncate_pair
from attnkit.data.sentence_split import review_segments, split_documents

__all__ = ["NspExample", "make_nsp_pairs", "review_segments", "split_documents"]


@dataclass(frozen=True)
class NspExample:
    """One NSP pair: ``[CLS] A [SEP] B [SEP]`` ids, their 0/1 segment ids, and the label."""

    input_ids: list[int]
    token_type_ids: list[int]
    is_next: int


def _take(segments: list[list[int]], start: int, budget: int) -> list[int]:
    """Segments from ``start`` on, at least one, more while they fit ``budget`` tokens."""
    out = list(segments[start])
    for seg in segments[start + 1 :]:
        if len(out) + len(seg) > budget:
            break
        out.extend(seg)
    return out


def make_nsp_pairs(
    documents: list[list[list[int]]],
    max_len: int,
    cls_id: int,
    sep_id: int,
    rng: random.Random,
    num_pairs: int | None = None,
) -> list[NspExample]:
    """NSP pairs from tokenized documents (each a list of segments, each a list of ids).

    Documents with two or more segments serve as A, in a shuffled order, repeated until
    ``num_pairs`` pairs exist (default: one pair per such document). For each pair: A =
    1 or more consecutive segments starting at a random one (up to half the token budget,
    always leaving a segment after it); with probability 0.5 B = the segment(s) right after
    A in the same document (``is_next=1``), else segment(s) from a random start in a
    different document (``is_next=0``, any document, single-segment ones included). B takes
    further segments while they fit. Deterministic for a given ``rng`` state.
    """
    docs = [[list(s) for s in doc if len(s) > 0] for doc in documents]
    docs = [d for d in docs if d]
    if len(docs) < 2:
        raise DataError(f"next-sentence prediction needs at least 2 documents, got {len(docs)}")
    sources = [i for i, d in enumerate(docs) if len(d) >= 2]
    if not sources:
        raise DataError("next-sentence prediction needs a document with 2 or more segments")
    if max_len < 5:
        raise ValueError(f"max_len must be at least 5 ([CLS] A [SEP] B [SEP]), got {max_len}")
    budget = max_len - 3
    wanted = len(sources) if num_pairs is None else num_pairs
    examples: list[NspExample] = []
    order: list[int] = []
    while len(examples) < wanted:
        if not order:
            order = sources[:]
            rng.shuffle(order)
        d = order.pop()
        doc = docs[d]
        start = rng.randrange(len(doc) - 1)
        a_end = start + rng.randint(1, len(doc) - 1 - start)  # A = doc[start:a_end]
        while a_end - start > 1 and sum(len(s) for s in doc[start:a_end]) > budget // 2:
            a_end -= 1
        a = [t for seg in doc[start:a_end] for t in seg]
        if rng.random() < 0.5:
            is_next = 1
            b = _take(doc, a_end, budget - len(a))
        else:
            is_next = 0
            other = rng.randrange(len(docs) - 1)
            if other >= d:  # uniform over the other documents
                other += 1
            b = _take(docs[other], rng.randrange(len(docs[other])), budget - len(a))
        a, b = truncate_pair(a, b, budget)  # BERT's truncate_seq_pair
        ids = [cls_id, *a, sep_id, *b, sep_id]
        types = [0] * (len(a) + 2) + [1] * (len(b) + 1)  # as attnkit.data.segments.pair_ids
        examples.append(NspExample(ids, types, is_next))
    return examples

"""Token classification (NER) with WordPiece: one label per word, on its first piece.

BERT (Devlin et al. 2019, section 5.3) tags words, but the model sees word pieces: the
input is ``[CLS] pieces [SEP]``, the label of each word is put on its FIRST piece, and the
other pieces, ``[CLS]`` and ``[SEP]`` get :data:`IGNORE_INDEX` so the loss skips them. At
prediction time the first piece's label is the word's label (:func:`word_predictions`).

Truncation keeps whole words: a word whose pieces do not all fit is dropped with every word
after it (:func:`encode_tagged`); the dropped words are reported (``truncated``) and get the
caller's "O" label id when predictions are mapped back to words.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from attnkit.data.mlm import IGNORE_INDEX
from attnkit.data.tagged import to_iob2
from attnkit.errors import DataError, InputError

if TYPE_CHECKING:
    from attnkit.tokenization import Tokenizer

__all__ = [
    "IGNORE_INDEX",
    "TaggedFeature",
    "align_labels",
    "encode_tagged",
    "repair_iob2",
    "word_predictions",
]


@dataclass
class TaggedFeature:
    """One tagged sentence, ready for a token-classification model.

    Attributes:
        input_ids: ``[CLS] pieces [SEP]``, length T <= max_len.
        labels: length T: the word's label id on its first piece, ``IGNORE_INDEX`` on the
            other pieces and on ``[CLS]``/``[SEP]``; None when no tags were given.
        word_index: length T: the index (into the original ``words``) of the word whose
            FIRST piece is at this position, -1 elsewhere ([CLS], [SEP], later pieces).
        num_words_kept: words 0 .. num_words_kept-1 are in ``input_ids``.
        truncated: some words did not fit (``num_words_kept < len(words)``).
    """

    input_ids: list[int]
    labels: list[int] | None
    word_index: list[int]
    num_words_kept: int
    truncated: bool


def align_labels(word_ids_per_piece: Sequence[int | None], word_labels: Sequence[int]) -> list[int]:
    """Per-piece labels: ``word_labels[w]`` on the first piece of word w, ``IGNORE_INDEX``
    on its other pieces and on pieces of no word (``None`` or a negative index, e.g. the
    special tokens).

    ``word_ids_per_piece`` (length T) gives each piece's word index; a word's pieces are
    consecutive. Returns a list of length T.
    """
    out: list[int] = []
    previous: int | None = None
    for word in word_ids_per_piece:
        if word is None or word < 0:
            out.append(IGNORE_INDEX)
            previous = None
            continue
        out.append(int(word_labels[word]) if word != previous else IGNORE_INDEX)
        previous = word
    return out


def _pieces_per_word(tokenizer: Tokenizer, words: Sequence[str]) -> list[list[int]]:
    """The piece ids of each word; a word that tokenizes to nothing gets ``[UNK]``."""
    ids, word_ids = tokenizer.encode_words(words)
    pieces: list[list[int]] = [[] for _ in words]
    for token_id, word in zip(ids, word_ids, strict=True):
        pieces[word].append(token_id)
    return [p if p else [tokenizer.unk_id] for p in pieces]


def _keep_words(pieces: list[list[int]], budget: int) -> tuple[list[list[int]], int]:
    """The whole words that fit in ``budget`` pieces, and how many words that is.

    A word that does not fit ends the sequence. Exception: a first word longer than the
    whole budget keeps its first ``budget`` pieces (its label sits on the first piece, so
    it can still be tagged) rather than leaving an empty sentence.
    """
    kept: list[list[int]] = []
    used = 0
    for word in pieces:
        if used + len(word) > budget:
            if not kept:
                kept.append(word[:budget])
            break
        kept.append(word)
        used += len(word)
    return kept, len(kept)


def _tag_ids(
    tags: Sequence[str], words: Sequence[str], label_to_id: Mapping[str, int] | None
) -> list[int]:
    if label_to_id is None:
        raise InputError("tags were given without label_to_id")
    if len(tags) != len(words):
        raise DataError(f"{len(words)} words but {len(tags)} tags")
    unknown = sorted({t for t in tags if t not in label_to_id})
    if unknown:
        raise DataError(
            f"unknown tag(s) {', '.join(map(repr, unknown))}; known: {sorted(label_to_id)}"
        )
    return [label_to_id[t] for t in tags]


def encode_tagged(
    tokenizer: Tokenizer,
    words: Sequence[str],
    tags: Sequence[str] | None,
    label_to_id: Mapping[str, int] | None,
    max_len: int,
) -> TaggedFeature:
    """``[CLS] pieces [SEP]`` of a pre-split sentence, with first-piece labels.

    Each word is tokenized on its own (:meth:`Tokenizer.encode_words`); a word that
    tokenizes to nothing (empty, control characters) becomes one ``[UNK]`` so every word
    has a first piece. The pieces are cut to ``max_len - 2`` keeping whole words: the first
    word that does not fit, and every word after it, is dropped (``truncated=True``); only
    when the first word alone is too long are its first ``max_len - 2`` pieces kept.

    Args:
        tokenizer: a WordPiece tokenizer with [CLS], [SEP] and [UNK].
        words: the sentence, split into words (as in CoNLL files).
        tags: one tag per word (e.g. ``"B-PER"``), or None for unlabelled text.
        label_to_id: tag -> label id; needed when ``tags`` is given.
        max_len: at most this many ids, [CLS] and [SEP] included (>= 3).

    Raises:
        InputError: ``max_len < 3``, or tags without ``label_to_id``.
        DataError: tags and words differ in number, or a tag is not in ``label_to_id``.
    """
    if max_len < 3:
        raise InputError(f"max_len={max_len} is too small: [CLS] word [SEP] needs at least 3")
    tag_ids = _tag_ids(tags, words, label_to_id) if tags is not None else None
    kept, num_kept = _keep_words(_pieces_per_word(tokenizer, words), max_len - 2)
    input_ids = [tokenizer.cls_id]
    word_index = [-1]
    for w, pieces in enumerate(kept):
        input_ids += pieces
        word_index += [w] + [-1] * (len(pieces) - 1)
    input_ids.append(tokenizer.sep_id)
    word_index.append(-1)
    labels = None
    if tag_ids is not None:
        labels = align_labels(word_index, tag_ids)  # first piece of each word
    return TaggedFeature(input_ids, labels, word_index, num_kept, num_kept < len(words))


def word_predictions(
    piece_label_ids: Sequence[int] | Any, word_index: Sequence[int], num_words: int, fill: int
) -> list[int]:
    """One label id per word: the prediction at the word's first piece.

    Args:
        piece_label_ids: predicted label id per position (a list or 1-D tensor; it may be
            longer than ``word_index``, e.g. padded: extra positions are ignored).
        word_index: :attr:`TaggedFeature.word_index` of the same sequence.
        num_words: number of words of the original sentence.
        fill: label id for words that were truncated away; pass your "O" id (id 0 by the
            usual convention, but nothing here assumes it).

    Returns:
        ``num_words`` label ids.
    """
    if hasattr(piece_label_ids, "tolist"):  # torch tensor / numpy array
        piece_label_ids = piece_label_ids.tolist()
    if len(piece_label_ids) < len(word_index):
        raise InputError(f"{len(piece_label_ids)} predictions for {len(word_index)} positions")
    out = [fill] * num_words
    for label, word in zip(piece_label_ids, word_index, strict=False):
        if 0 <= word < num_words:
            out[word] = int(label)
    return out


def repair_iob2(tags: Sequence[str]) -> list[str]:
    """Valid IOB2: every ``I-X`` not preceded by ``B-X`` or ``I-X`` becomes ``B-X``
    (``attnkit.data.tagged.to_iob2``, which reads data with it too).

    A prediction clean-up for display or for strict (IOB2-scheme) scoring; attnkit's own
    evaluation does not call it. On tags made of ``O``, ``B-X`` and ``I-X`` it does not
    change :func:`attnkit.metrics.entity_f1`: seqeval's default, conlleval-compatible mode
    already starts an entity at such an ``I-X``.
    """
    return to_iob2(tags)

"""Token classification (NER) with WordPiece: one label per word, on its first piece.

BERT (Devlin et al. 2019, section 5.3) tags words, but the model sees word pieces: the
input is ``[CLS] pieces [SEP]``, the label of each word is put on its FIRST piece, and the
other pieces, ``[CLS]`` and ``[SEP]`` get :data:`IGNORE_INDEX` so the loss skips them. At
prediction time the first piece's label is the word's label (:func:`word_predictions`).

Truncation keeps whole words: a word whose pieces do not all fit is dropped with every word
after it (:func:`encode_tagged`); the dropped words are reported (``truncated``) and get the
caller's "O" label id when predictions are mapped back to words.

Text tagged per character (KLUE-NER, ``word_unit: piece``) is instead tokenized as a whole,
spaces as written, so the encoder sees the pieces it was pretrained on
(:func:`encode_pieces`): EVERY piece gets a label, the tag of its first character, and
:func:`unit_predictions` maps the predicted piece labels back to one label per character.
The first pieces are kept when the text is too long.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from attnkit.core.errors import DataError, InputError
from attnkit.data.masking import IGNORE_INDEX
from attnkit.data.ner_readers import to_iob2
from attnkit.data.tokenization import cut_text, max_text_chars

if TYPE_CHECKING:
    from attnkit.data.tokenization import Tokenizer

__all__ = [
    "IGNORE_INDEX",
    "PieceFeature",
    "TaggedFeature",
    "align_labels",
    "continuation_ids",
    "encode_pieces",
    "encode_tagged",
    "repair_iob2",
    "unit_predictions",
    "unit_spans",
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


def _words_within(words: Sequence[str], max_len: int) -> list[str]:
    """The first words of ``words`` with at most ``max_text_chars(max_len)`` characters in
    all (a first word longer than that: its beginning), so that a huge sentence is never
    tokenized whole; the words left out count as truncated."""
    limit, used = max_text_chars(max_len), 0
    out: list[str] = []
    for word in words:
        word = str(word)
        if used + len(word) > limit:
            if not out:
                out.append(word[:limit])
            break
        out.append(word)
        used += len(word) + 1
    return out


def _tag_ids(
    tags: Sequence[str], words: Sequence[Any], label_to_id: Mapping[str, int] | None
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
    when the first word alone is too long are its first ``max_len - 2`` pieces kept. Words
    beyond ``max_text_chars(max_len)`` characters are dropped before tokenization.

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
    kept, num_kept = _keep_words(
        _pieces_per_word(tokenizer, _words_within(words, max_len)), max_len - 2
    )
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
    (``attnkit.data.ner_readers.to_iob2``, which reads data with it too).

    A prediction clean-up for display or for strict (IOB2-scheme) scoring; attnkit's own
    evaluation does not call it. On tags made of ``O``, ``B-X`` and ``I-X`` it does not
    change :func:`attnkit.tasks.metrics.entity_f1`: seqeval's default, conlleval-compatible mode
    already starts an entity at such an ``I-X``.
    """
    return to_iob2(tags)


# --------------------------------------------------------------------------------------
# Labels on every word piece of the natural text (KLUE-NER: ``word_unit: piece``)
# --------------------------------------------------------------------------------------
@dataclass
class PieceFeature:
    """One sentence tagged per unit (a character, for KLUE-NER), encoded from its natural
    text with a label on EVERY word piece (:func:`encode_pieces`).

    Attributes:
        input_ids: ``[CLS] pieces [SEP]``, length T <= max_len.
        labels: length T: each piece's label id (the tag of its first unit, ``B-X`` turned
            into ``I-X`` when that unit is not the piece's own: a second piece of one
            character), ``IGNORE_INDEX`` on ``[CLS]``/``[SEP]``; None without tags.
        unit_position: one per unit: the position (into ``input_ids``) of the first piece
            that covers the unit, -1 when none does (cut off by ``max_len``).
        unit_first: one per unit: whether the unit is that piece's first unit (it then
            takes the piece's label; a later unit of the piece takes its ``I-`` form).
        truncated: some pieces did not fit in ``max_len``.
    """

    input_ids: list[int]
    labels: list[int] | None
    unit_position: list[int]
    unit_first: list[bool]
    truncated: bool


def unit_spans(units: Sequence[str], space_after: Sequence[bool] | None) -> list[tuple[int, int]]:
    """The ``(start, end)`` span of each unit in the text they make: joined as
    ``space_after`` says (``TaggedSentence.text``), or by single spaces when it is None."""
    spans: list[tuple[int, int]] = []
    at = 0
    for k, unit in enumerate(units):
        spans.append((at, at + len(unit)))
        at += len(unit) + (1 if space_after is None or space_after[k] else 0)
    return spans


def continuation_ids(labels: Sequence[str]) -> list[int]:
    """For each label id, the id a later unit of the same piece gets: ``I-X`` for ``B-X``
    and ``I-X`` (when ``I-X`` is a label), the ``O`` id (or 0) for everything else."""
    to_id = {name: i for i, name in enumerate(labels)}
    outside = to_id.get("O", 0)
    return [
        to_id.get("I-" + name[2:], outside) if name[:2] in ("B-", "I-") else outside
        for name in labels
    ]


def encode_pieces(
    tokenizer: Tokenizer,
    text: str,
    spans: Sequence[tuple[int, int]],
    tags: Sequence[str] | None,
    label_to_id: Mapping[str, int] | None,
    max_len: int,
) -> PieceFeature:
    """``[CLS] pieces [SEP]`` of ``text`` tokenized as a whole
    (:meth:`Tokenizer.encode_offsets`), with a label on every piece.

    ``spans`` are the units' ``(start, end)`` offsets in ``text`` (the tagged
    characters; spaces are no unit). A piece's first unit is the first unit it overlaps;
    its label is that unit's tag, except that a unit already covered by an earlier piece
    (a character split into several pieces) gives ``I-X`` for ``B-X``. So a piece that
    starts at an entity's first character is ``B-X``, one inside an entity ``I-X``, any
    other ``O``; a piece that covers no unit is ``O``. An entity whose start or end falls
    inside a piece cannot be represented exactly (:func:`unit_predictions` widens or
    shifts it to piece boundaries). The pieces are cut to ``max_len - 2`` (the first ones
    are kept), after the text to ``max_text_chars(max_len)`` characters; units no kept
    piece covers get ``unit_position`` -1.

    Raises:
        InputError: ``max_len < 3``, or tags without ``label_to_id``.
        DataError: tags and spans differ in number, or a tag is not in ``label_to_id``.
    """
    if max_len < 3:
        raise InputError(f"max_len={max_len} is too small: [CLS] piece [SEP] needs at least 3")
    tag_ids = _tag_ids(tags, spans, label_to_id) if tags is not None else None
    text, cut = cut_text(text, max_len)  # never tokenized whole when huge (offsets hold)
    ids, offsets = tokenizer.encode_offsets(text)
    budget = max_len - 2
    truncated = cut or len(ids) > budget
    ids, offsets = ids[:budget], offsets[:budget]
    # the unit at each character offset (-1: no unit there, e.g. a space)
    unit_at = [-1] * (max((b for _, b in spans), default=0) + 1)
    for u, (a, b) in enumerate(spans):
        for pos in range(a, b):
            unit_at[pos] = u
    unit_position = [-1] * len(spans)
    unit_first = [False] * len(spans)
    piece_unit: list[int] = []  # each piece's first unit (-1: none)
    for k, (a, b) in enumerate(offsets):
        first = -1
        for pos in range(a, min(max(b, a + 1), len(unit_at))):
            u = unit_at[pos]
            if u < 0:
                continue
            if first < 0:
                first = u
            if unit_position[u] < 0:
                unit_position[u] = k + 1  # after [CLS]
                unit_first[u] = u == first
        piece_unit.append(first)
    labels = None
    if tag_ids is not None:
        assert label_to_id is not None
        names = {i: name for name, i in label_to_id.items()}
        outside = label_to_id.get("O", 0)
        labels = [IGNORE_INDEX]
        for k, u in enumerate(piece_unit):
            if u < 0:
                labels.append(outside)
                continue
            label = tag_ids[u]
            if unit_position[u] != k + 1:  # the unit began in an earlier piece
                name = names[label]
                label = (
                    label_to_id.get("I-" + name[2:], outside)
                    if name[:2] in ("B-", "I-")
                    else outside
                )
            labels.append(label)
        labels.append(IGNORE_INDEX)
    input_ids = [tokenizer.cls_id, *ids, tokenizer.sep_id]
    return PieceFeature(input_ids, labels, unit_position, unit_first, truncated)


def unit_predictions(
    piece_label_ids: Sequence[int] | Any,
    unit_position: Sequence[int],
    unit_first: Sequence[bool],
    continuation: Sequence[int],
    fill: int,
) -> list[int]:
    """One label id per unit from the labels predicted per piece: a piece's first unit
    takes the piece's label, its other units ``continuation[label]`` (``I-X`` for a
    ``B-X`` or ``I-X`` piece, else ``O``: :func:`continuation_ids`); units no piece covers
    get ``fill`` (your ``O`` id)."""
    if hasattr(piece_label_ids, "tolist"):
        piece_label_ids = piece_label_ids.tolist()
    out = []
    for position, first in zip(unit_position, unit_first, strict=True):
        if position < 0:
            out.append(fill)
            continue
        label = int(piece_label_ids[position])
        out.append(label if first else continuation[label])
    return out

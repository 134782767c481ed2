"""Subword tokenizers: train and load Hugging Face ``tokenizers`` models behind one small API.

Three kinds are trained here; the two subword kinds with NFKC normalisation (plus
lowercasing if asked):

* ``"wordpiece"`` (BERT-style): splits on whitespace and punctuation, ``##`` marks a word
  continuation, and a word with a character never seen in training becomes ``[UNK]``.
  Decoding joins words with single spaces and removes the space before ``. , ! ?``, so
  ``decode(encode(x))`` equals the normalised ``x`` up to whitespace (exactly, for text with
  single spaces whose only punctuation is a word-final ``. , ! ?``; ``don't`` comes back as
  ``don ' t``).
* ``"bpe"`` (GPT-2-style byte-level BPE): every string is representable (no ``[UNK]``) and
  ``decode(encode(x))`` equals the normalised ``x`` exactly.
* ``"char"`` (character level, as for Tiny Shakespeare): one token per Unicode code point
  seen in training, no normalisation (case, spaces and newlines are tokens; only
  ``lowercase=True`` changes the text); a character never seen becomes ``[UNK]``, and
  ``decode(encode(x))`` equals ``x`` exactly for text of seen characters.

Every trained tokenizer has :data:`SPECIAL_TOKENS` at ids 0-6 in that order. Special tokens
are only added where asked (``add_cls`` etc.), never implicitly.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Literal, overload

import tokenizers
from tokenizers import decoders, models, normalizers, pre_tokenizers, processors, trainers

from attnkit.core.checkpoint import temp_file_beside
from attnkit.core.errors import DataError, InputError, MissingFileError

__all__ = [
    "CHARS_PER_TOKEN",
    "MAX_TEXT_CHARS",
    "MIN_TEXT_CHARS",
    "SPECIAL_TOKENS",
    "TRUNCATION",
    "Tokenizer",
    "cut_text",
    "max_text_chars",
    "split_long",
    "train_tokenizer",
    "truncate",
]

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[BOS]", "[EOS]"]
TokenizerKind = Literal["wordpiece", "bpe", "char"]
TOKENIZER_FILE = "tokenizer.json"
TRUNCATION = ("head", "tail", "head+tail")  # which part of a too-long text is kept


# ----------------------------------------------------------------------------- bounded input
# A tokenizer's memory grows with the text it is given whole: Hugging Face ``tokenizers``
# keeps ids, offsets and token strings per character, ~200-400 bytes a character (a 10 MB
# line took 1.8 GB). So no text reaches a tokenizer longer than a bound:
#
# * a text that is cut to ``max_len`` tokens anyway (classify, tag, translate, chat, a QA
#   question, a generate prompt, ...) is first cut to ``max_text_chars(max_len)``
#   characters (``cut_text``): ``CHARS_PER_TOKEN`` characters a token, generous (English
#   BPE averages ~4, Korean WordPiece ~2-3, a char tokenizer 1), and never fewer than
#   ``MIN_TEXT_CHARS`` nor more than ``MAX_TEXT_CHARS``. The model sees the same tokens
#   unless a token spans more than 16 characters on average; the cut text is reported as
#   truncated like a text cut by tokens (``Tokenizer.encode(..., return_truncated=True)``);
# * a text read whole (a language model's corpus, a biLM / MLM document, a QA context) is
#   tokenized in pieces of at most ``MAX_TEXT_CHARS`` characters, cut before a whitespace
#   run (``split_long``), which gives the same tokens for attnkit's tokenizers (they split
#   at whitespace first) in bounded memory; a QA context itself is cut to
#   ``MAX_TEXT_CHARS``;
# * ``encode_batch`` hands the backend at most ``MAX_TEXT_CHARS`` characters at a time.
#
# The CLI reads ``--file`` and stdin line by line, a line cut to ``4 * MAX_TEXT_CHARS``
# bytes (>= MAX_TEXT_CHARS characters, so the cut is reported by the model's own cut).
CHARS_PER_TOKEN = 16
MIN_TEXT_CHARS = 4096
MAX_TEXT_CHARS = 1 << 18  # 262,144 characters: ~100 MB in the tokenizer at worst


def _check_unicode(text: str, index: int, count: int) -> None:
    """An ``InputError`` for a text no tokenizer can read: not a str, or holding a lone
    surrogate (``"\\ud800"``, which Python strings can hold and UTF-8 cannot)."""
    which = f"text {index + 1}" if count > 1 else "the text"
    if not isinstance(text, str):
        raise InputError(f"{which} must be a str, got {type(text).__name__}")
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(
            f"{which} is not valid Unicode (a lone surrogate at character {exc.start})"
        ) from None


def max_text_chars(max_len: int | None) -> int:
    """The most characters of a text that a model of ``max_len`` tokens is given (None:
    ``MAX_TEXT_CHARS``, for texts read whole)."""
    if max_len is None:
        return MAX_TEXT_CHARS
    return min(MAX_TEXT_CHARS, max(MIN_TEXT_CHARS, int(max_len) * CHARS_PER_TOKEN))


def cut_text(text: str, max_len: int | None = None, keep: str = "head") -> tuple[str, bool]:
    """(``text`` cut to ``max_text_chars(max_len)`` characters, whether it was cut), before
    tokenization. ``keep`` as in :func:`truncate`: the beginning, the end, or (head+tail)
    both ends (the first and the last ``max_text_chars`` characters, joined)."""
    limit = max_text_chars(max_len)
    if len(text) <= limit:
        return text, False
    if keep == "tail":
        return text[len(text) - limit :], True
    if keep == "head+tail":
        return text[:limit] + text[len(text) - limit :], True
    return text[:limit], True


# the LAST place in a window before a line break (a whitespace run) that follows a
# non-space: greedy ``.*`` backtracks from the window's end, so finding it costs the
# distance from the end, not a scan of every match
_LAST_BEFORE_NEWLINE = re.compile(r".*(?<=\S)(?=\n)", re.DOTALL)
_LAST_BEFORE_SPACE = re.compile(r".*(?<=\S)(?=\s)", re.DOTALL)


def split_long(text: str, max_chars: int | None = None) -> list[str]:
    """``text`` in consecutive pieces of at most ``max_chars`` characters that join back to
    it: each cut falls before a line break that follows a non-space (else before any
    whitespace run) in the last half of the piece, where attnkit's tokenizers split
    anyway; only a piece without whitespace there is cut at ``max_chars`` (default
    ``MAX_TEXT_CHARS``)."""
    max_chars = MAX_TEXT_CHARS if max_chars is None else max_chars
    if len(text) <= max_chars:
        return [text]
    pieces: list[str] = []
    start = 0
    while len(text) - start > max_chars:
        lo, hi = start + max_chars // 2, start + max_chars
        cut = hi
        for pattern in (_LAST_BEFORE_NEWLINE, _LAST_BEFORE_SPACE):
            found = pattern.match(text, lo, hi)
            if found is not None and found.end() > start:
                cut = found.end()
                break
        pieces.append(text[start:cut])
        start = cut
    pieces.append(text[start:])
    return pieces


def _groups(texts: list[str]) -> Iterator[tuple[int, int]]:
    """``(start, end)`` ranges of ``texts`` holding at most ``MAX_TEXT_CHARS`` characters in
    all (or a single text)."""
    max_chars = MAX_TEXT_CHARS
    start, total = 0, 0
    for i, text in enumerate(texts):
        if i > start and total + len(text) > max_chars:
            yield start, i
            start, total = i, 0
        total += len(text)
    if start < len(texts):
        yield start, len(texts)


def truncate(ids: list[int], budget: int, keep: str = "head") -> list[int]:
    """The ``budget`` tokens of ``ids`` that a model sees when the text is too long.

    ``head``: the beginning (the usual choice); ``tail``: the end; ``head+tail``: the first
    quarter of the budget from the beginning and the rest from the end. Reviews often state
    their verdict at the end: for BERT on IMDB (Sun et al. 2019, "How to Fine-Tune BERT for
    Text Classification") head+tail (128 + 382 of 510 tokens) beat head only.
    """
    if keep not in TRUNCATION:
        raise ValueError(f"keep must be one of {', '.join(TRUNCATION)}, got {keep!r}")
    if len(ids) <= budget:
        return ids
    if keep == "head":
        return ids[:budget]
    if keep == "tail":
        return ids[len(ids) - budget :]
    head = budget // 4  # head+tail
    return ids[:head] + ids[len(ids) - (budget - head) :]


class Tokenizer:
    """A trained subword tokenizer (wraps a ``tokenizers.Tokenizer``)."""

    def __init__(self, backend: tokenizers.Tokenizer) -> None:
        # attnkit truncates (``max_len``, ``keep``) and pads (``pad_batch``) itself: a loaded
        # tokenizer.json's own settings (Hugging Face files often pad/cut to 128) are dropped
        backend.no_padding()
        backend.no_truncation()
        self._tk = backend
        self._special = {tok: backend.token_to_id(tok) for tok in SPECIAL_TOKENS}
        # ids that decode(skip_special=True) drops; [UNK] is kept so lost text stays visible
        self._skip = {i for tok, i in self._special.items() if i is not None and tok != "[UNK]"}
        self._encode_batch = getattr(backend, "encode_batch_fast", backend.encode_batch)
        # a char tokenizer without a normalizer maps each code point through its vocabulary:
        # encode_offsets_batch looks them up itself (a 1 MB corpus: ~0.2 s instead of ~2 s)
        self._chars: dict[str, int] | None = None
        if _is_char_level(backend) and backend.normalizer is None:
            self._chars = {t: i for t, i in backend.get_vocab().items() if len(t) == 1}
            self._added = [t.content for t in backend.get_added_tokens_decoder().values()]

    # ----------------------------------------------------------------- properties
    @property
    def backend(self) -> tokenizers.Tokenizer:
        """The underlying ``tokenizers.Tokenizer``."""
        return self._tk

    @property
    def kind(self) -> str:
        """``"wordpiece"``, ``"bpe"``, ``"char"`` or the lower-cased model class name."""
        if _is_char_level(self._tk):
            return "char"
        return type(self._tk.model).__name__.lower()

    @property
    def vocab_size(self) -> int:
        """Number of ids, special tokens included."""
        return self._tk.get_vocab_size(with_added_tokens=True)

    def __len__(self) -> int:
        return self.vocab_size

    def _special_id(self, token: str) -> int:
        token_id = self._special[token]
        if token_id is None:
            raise DataError(
                f"this tokenizer has no {token} token (attnkit's tokenizers have all of {', '.join(SPECIAL_TOKENS)})"
            )
        return token_id

    @property
    def pad_id(self) -> int:
        """Id of ``[PAD]``."""
        return self._special_id("[PAD]")

    @property
    def unk_id(self) -> int:
        """Id of ``[UNK]``."""
        return self._special_id("[UNK]")

    @property
    def cls_id(self) -> int:
        """Id of ``[CLS]``."""
        return self._special_id("[CLS]")

    @property
    def sep_id(self) -> int:
        """Id of ``[SEP]``."""
        return self._special_id("[SEP]")

    @property
    def mask_id(self) -> int:
        """Id of ``[MASK]``."""
        return self._special_id("[MASK]")

    @property
    def bos_id(self) -> int:
        """Id of ``[BOS]``."""
        return self._special_id("[BOS]")

    @property
    def eos_id(self) -> int:
        """Id of ``[EOS]``."""
        return self._special_id("[EOS]")

    def id_to_token(self, token_id: int) -> str | None:
        """The token for ``token_id``, or ``None`` if out of range."""
        return self._tk.id_to_token(int(token_id))

    def token_to_id(self, token: str) -> int | None:
        """The id of ``token``, or ``None`` if it is not in the vocabulary."""
        return self._tk.token_to_id(token)

    # ----------------------------------------------------------------- encoding
    def normalize(self, text: str) -> str:
        """``text`` after the tokenizer's normalizer (what a perfect round trip gives back)."""
        normalizer = self._tk.normalizer
        return normalizer.normalize_str(text) if normalizer is not None else text

    def tokenize(self, text: str) -> list[str]:
        """The subword strings of ``text`` (no special tokens added; a text longer than
        ``MAX_TEXT_CHARS`` is tokenized in pieces, ``split_long``)."""
        return [
            t
            for piece in split_long(text)
            for t in self._tk.encode(piece, add_special_tokens=False).tokens
        ]

    def _ids(self, texts: list[str]) -> list[list[int]]:
        """The ids of each text (no special tokens), in bounded memory: a text longer than
        ``MAX_TEXT_CHARS`` in pieces (``split_long``), and the backend given at most
        ``MAX_TEXT_CHARS`` characters per call."""
        pieces: list[str] = []
        owner: list[int] = []
        for i, text in enumerate(texts):
            _check_unicode(text, i, len(texts))
            for piece in split_long(text):
                pieces.append(piece)
                owner.append(i)
        out: list[list[int]] = [[] for _ in texts]
        for start, end in _groups(pieces):
            if end - start == 1:
                encodings = [self._tk.encode(pieces[start], add_special_tokens=False)]
            else:
                encodings = self._encode_batch(pieces[start:end], add_special_tokens=False)
            for i, encoding in zip(owner[start:end], encodings, strict=True):
                out[i] += encoding.ids
        return out

    def _wrap(
        self,
        ids: list[int],
        max_len: int | None,
        prefix: list[int],
        suffix: list[int],
        keep: str = "head",
    ) -> tuple[list[int], bool]:
        truncated = False
        if max_len is not None:
            budget = max_len - len(prefix) - len(suffix)
            if budget < 0:
                raise ValueError(f"max_len={max_len} leaves no room for the special tokens")
            truncated = len(ids) > budget
            ids = truncate(ids, budget, keep)
        return prefix + ids + suffix, truncated

    def _affixes(
        self, add_cls: bool, add_sep: bool, add_bos: bool, add_eos: bool
    ) -> tuple[list[int], list[int]]:
        prefix = ([self.cls_id] if add_cls else []) + ([self.bos_id] if add_bos else [])
        suffix = ([self.sep_id] if add_sep else []) + ([self.eos_id] if add_eos else [])
        return prefix, suffix

    @overload
    def encode(
        self,
        text: str,
        max_len: int | None = ...,
        add_cls: bool = ...,
        add_sep: bool = ...,
        add_bos: bool = ...,
        add_eos: bool = ...,
        keep: str = ...,
        return_truncated: Literal[False] = ...,
    ) -> list[int]: ...

    @overload
    def encode(
        self,
        text: str,
        max_len: int | None = ...,
        add_cls: bool = ...,
        add_sep: bool = ...,
        add_bos: bool = ...,
        add_eos: bool = ...,
        keep: str = ...,
        *,
        return_truncated: Literal[True],
    ) -> tuple[list[int], bool]: ...

    def encode(
        self,
        text: str,
        max_len: int | None = None,
        add_cls: bool = False,
        add_sep: bool = False,
        add_bos: bool = False,
        add_eos: bool = False,
        keep: str = "head",
        return_truncated: bool = False,
    ) -> list[int] | tuple[list[int], bool]:
        """Token ids of ``text``, as ``[CLS] [BOS] text [SEP] [EOS]`` for the flags given.

        ``max_len`` counts the special tokens too; a longer text is cut to fit, keeping its
        ``keep`` part (see :func:`truncate`; default: the beginning), after a cut to
        ``max_text_chars(max_len)`` characters before tokenization (:func:`cut_text`).
        With ``return_truncated=True`` the result is ``(ids, truncated)``; ``truncated`` is
        True for a text cut either way.
        """
        out, flags = self.encode_batch(
            [text], max_len, add_cls, add_sep, add_bos, add_eos, keep, return_truncated=True
        )
        return (out[0], flags[0]) if return_truncated else out[0]

    @overload
    def encode_batch(
        self,
        texts: Iterable[str],
        max_len: int | None = ...,
        add_cls: bool = ...,
        add_sep: bool = ...,
        add_bos: bool = ...,
        add_eos: bool = ...,
        keep: str = ...,
        return_truncated: Literal[False] = ...,
    ) -> list[list[int]]: ...

    @overload
    def encode_batch(
        self,
        texts: Iterable[str],
        max_len: int | None = ...,
        add_cls: bool = ...,
        add_sep: bool = ...,
        add_bos: bool = ...,
        add_eos: bool = ...,
        keep: str = ...,
        *,
        return_truncated: Literal[True],
    ) -> tuple[list[list[int]], list[bool]]: ...

    def encode_batch(
        self,
        texts: Iterable[str],
        max_len: int | None = None,
        add_cls: bool = False,
        add_sep: bool = False,
        add_bos: bool = False,
        add_eos: bool = False,
        keep: str = "head",
        return_truncated: bool = False,
    ) -> list[list[int]] | tuple[list[list[int]], list[bool]]:
        """Encode many texts at once (parallel, in Rust); same options as :meth:`encode`.

        With ``return_truncated=True`` the result is ``(ids_per_text, truncated_per_text)``.
        """
        prefix, suffix = self._affixes(add_cls, add_sep, add_bos, add_eos)
        texts = texts if isinstance(texts, list) else list(texts)
        cut = [False] * len(texts)
        if max_len is not None:  # never more characters than max_len tokens can use
            if keep not in TRUNCATION:
                raise ValueError(f"keep must be one of {', '.join(TRUNCATION)}, got {keep!r}")
            pairs = [cut_text(t, max_len, keep) for t in texts]
            texts, cut = [t for t, _ in pairs], [c for _, c in pairs]
        out: list[list[int]] = []
        flags: list[bool] = []
        for raw, was_cut in zip(self._ids(texts), cut, strict=True):
            ids, truncated = self._wrap(raw, max_len, prefix, suffix, keep)
            out.append(ids)
            flags.append(truncated or was_cut)
        return (out, flags) if return_truncated else out

    def encode_words(self, words: Sequence[str]) -> tuple[list[int], list[int]]:
        """Ids of pre-split ``words`` and, per id, the index of the word it came from.

        Each word is tokenized on its own (as ``is_split_into_words`` in ``transformers``):
        the result equals concatenating ``encode(word)`` over the words. No special tokens.
        A word that tokenizes to nothing (empty, only spaces or control characters) has no
        id and so does not occur in the word indices; a word the pre-tokenizer splits
        further (``"New York"``, ``"don't"``) gives several pieces with the same index.

        Returns:
            ``(ids, word_ids)``, two lists of equal length; ``word_ids`` is non-decreasing.
        """
        words = [str(w) for w in words]
        ids: list[int] = []
        word_ids: list[int] = []
        for start, end in _groups(words):  # at most MAX_TEXT_CHARS characters at a time
            encoding = self._tk.encode(
                words[start:end], is_pretokenized=True, add_special_tokens=False
            )
            ids += encoding.ids
            word_ids += [start + int(w) for w in encoding.word_ids]  # never None here
        return ids, word_ids

    def encode_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """Ids of ``text`` (no special tokens) and each id's ``(start, end)`` character span
        in the ORIGINAL ``text`` (``text[start:end]`` is what the token was made from).

        The spans come from the backend's alignment tracking, so they refer to ``text`` as
        given even when the normalizer lowercases, strips accents or removes characters
        (``"Café"`` -> ``cafe`` spans ``(0, 4)``). Several ids can share one span: BERT's
        uncased vocabulary splits a Hangul syllable into jamo pieces, all covering that
        syllable. For byte-level BPE a token's span includes the space it starts with.
        A text longer than ``MAX_TEXT_CHARS`` is tokenized in pieces (``split_long``).
        """
        return self.encode_offsets_batch([text])[0]

    def encode_offsets_batch(
        self, texts: Sequence[str]
    ) -> list[tuple[list[int], list[tuple[int, int]]]]:
        """:meth:`encode_offsets` of many texts (in parallel, at most ``MAX_TEXT_CHARS``
        characters per backend call)."""
        per_char = self.char_ids_batch(texts)
        if per_char is not None:  # each character its own token, spanning itself
            return [(ids, [(i, i + 1) for i in range(len(ids))]) for ids in per_char]
        pieces: list[str] = []
        where: list[tuple[int, int]] = []  # (text, offset of the piece in it)
        for i, text in enumerate(texts):
            at = 0
            for piece in split_long(text):
                pieces.append(piece)
                where.append((i, at))
                at += len(piece)
        out: list[tuple[list[int], list[tuple[int, int]]]] = [([], []) for _ in texts]
        for start, end in _groups(pieces):
            encodings = self._tk.encode_batch(pieces[start:end], add_special_tokens=False)
            for (i, at), encoding in zip(where[start:end], encodings, strict=True):
                out[i][0].extend(encoding.ids)
                out[i][1].extend((at + int(a), at + int(b)) for a, b in encoding.offsets)
        return out

    def char_ids_batch(self, texts: Sequence[str]) -> list[list[int]] | None:
        """A char tokenizer's ids of ``texts`` looked up without the backend: what the
        backend gives, one id per code point, [UNK] for one never seen
        (``encode_offsets_batch``'s ids, without the spans); None for any other tokenizer,
        or where an added token occurs in ``texts`` (the backend matches those)."""
        if self._chars is None or any(t in x for x in texts for t in self._added):
            return None
        chars, unk = self._chars, self._special["[UNK]"]
        return [[chars.get(c, unk) for c in text] for text in texts]

    # ----------------------------------------------------------------- decoding
    def _clean(self, ids: Iterable[int], skip_special: bool) -> list[int]:
        ids = [int(i) for i in ids]
        return [i for i in ids if i not in self._skip] if skip_special else ids

    def decode(self, ids: Iterable[int], skip_special: bool = True) -> str:
        """Text of ``ids``. ``skip_special`` drops ``[PAD] [CLS] [SEP] [MASK] [BOS] [EOS]``
        (``[UNK]`` is always shown)."""
        return self._tk.decode(self._clean(ids, skip_special), skip_special_tokens=False)

    def decode_batch(self, batch: Sequence[Iterable[int]], skip_special: bool = True) -> list[str]:
        """:meth:`decode` for many sequences."""
        cleaned = [self._clean(ids, skip_special) for ids in batch]
        return self._tk.decode_batch(cleaned, skip_special_tokens=False)

    # ----------------------------------------------------------------- files
    def save(self, path: str | Path) -> Path:
        """Write ``tokenizer.json`` atomically and return its path.

        ``path`` is either a ``.json`` file name or a directory (created if needed) that will
        hold ``tokenizer.json``.
        """
        path = Path(path)
        target = path if path.suffix == ".json" else path / TOKENIZER_FILE
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = temp_file_beside(target)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(self._tk.to_str(pretty=True))
            os.replace(tmp, target)
        finally:
            Path(tmp).unlink(missing_ok=True)
        return target

    @classmethod
    def load(cls, path: str | Path) -> Tokenizer:
        """Load a ``tokenizer.json`` file, or the one inside directory ``path``.

        Raises:
            FileNotFoundError: no such file (the message says what was expected).
            ValueError: the file is not a valid ``tokenizers`` JSON file, or its model's
                unknown-word token (``[UNK]``) is not in its vocabulary.
        """
        path = Path(path).expanduser()
        file = path / TOKENIZER_FILE if path.is_dir() else path
        if not file.is_file():
            raise MissingFileError(
                f"no tokenizer at {path}: expected a tokenizer.json file or a directory with one"
            )
        try:
            backend = tokenizers.Tokenizer.from_file(str(file))
        except Exception as err:  # the Rust side raises plain Exception
            raise DataError(f"{file} is not a valid tokenizer.json: {err}") from None
        tokenizer = cls(backend)
        unknown = tokenizer.lacks([])
        if unknown:  # its model names a token for unknown words that is not there
            raise DataError(
                f"{file} lacks the special token {unknown[0]} that its "
                f"{type(backend.model).__name__} model needs for unknown words"
            )
        return tokenizer

    def lacks(self, tokens: Iterable[str]) -> list[str]:
        """The tokens of ``tokens``, and the unknown-word token the backend's model
        declares (``unk_token``: a WordPiece or WordLevel model cannot encode without it),
        that this tokenizer's vocabulary does not hold, in that order."""
        needed = list(tokens)
        unk = getattr(self._tk.model, "unk_token", None)
        if isinstance(unk, str) and unk and unk not in needed:
            needed.append(unk)
        return [t for t in needed if self._tk.token_to_id(t) is None]

    @classmethod
    def from_vocab(cls, path: str | Path, lowercase: bool = True) -> Tokenizer:
        """BERT's WordPiece tokenizer from a Hugging Face / Google ``vocab.txt``.

        ``path`` is the file or a directory holding ``vocab.txt``. The pipeline is BERT's
        (``BertTokenizer`` with its defaults): ``BertNormalizer`` (clean_text: drop control
        characters, whitespace -> space; CJK ideographs split apart; ``lowercase``; accents
        stripped exactly when lowercasing, as BERT's ``strip_accents=None`` does),
        ``BertPreTokenizer`` (split on whitespace and punctuation), greedy longest-match
        WordPiece with ``##`` continuations and ``[UNK]`` for words it cannot spell (or of
        more than 100 characters), and the WordPiece decoder. ``[PAD] [UNK] [CLS] [SEP]
        [MASK]`` found in the vocabulary are special tokens (never split when they occur
        in text). Use ``lowercase=False`` for cased vocabularies.

        Raises:
            MissingFileError: no such file.
            DataError: the file is not a vocabulary with an ``[UNK]`` line.
        """
        path = Path(path).expanduser()
        file = path / "vocab.txt" if path.is_dir() else path
        if not file.is_file():
            raise MissingFileError(
                f"no vocabulary at {path}: expected a vocab.txt file or a directory with one"
            )
        try:
            model = models.WordPiece.from_file(
                str(file), unk_token="[UNK]", continuing_subword_prefix="##"
            )
        except Exception as err:  # the Rust side raises plain Exception
            raise DataError(f"{file} is not a valid vocab.txt: {err}") from None
        backend = tokenizers.Tokenizer(model)
        if backend.token_to_id("[UNK]") is None:
            raise DataError(f"{file} has no [UNK] token; is it a BERT vocab.txt?")
        backend.normalizer = normalizers.BertNormalizer(
            clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=lowercase
        )
        backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        backend.decoder = decoders.WordPiece(prefix="##", cleanup=True)
        specials = [t for t in SPECIAL_TOKENS if backend.token_to_id(t) is not None]
        backend.add_special_tokens(specials)
        cls_id, sep_id = backend.token_to_id("[CLS]"), backend.token_to_id("[SEP]")
        if cls_id is not None and sep_id is not None:  # for transformers' BertTokenizerFast
            backend.post_processor = processors.BertProcessing(("[SEP]", sep_id), ("[CLS]", cls_id))
        return cls(backend)

    def __repr__(self) -> str:
        return f"Tokenizer(kind={self.kind!r}, vocab_size={self.vocab_size})"


def train_tokenizer(
    texts: Iterable[str],
    kind: TokenizerKind = "wordpiece",
    vocab_size: int = 8000,
    min_frequency: int = 2,
    lowercase: bool = False,
    show_progress: bool = False,
) -> Tokenizer:
    """Train a WordPiece, byte-level BPE or character-level tokenizer on ``texts``.

    Args:
        texts: training texts (any iterable; it is consumed once).
        kind: ``"wordpiece"`` (BERT-style), ``"bpe"`` (byte-level, GPT-2-style) or
            ``"char"`` (one token per character, no normalisation).
        vocab_size: target vocabulary size, special tokens included (``"char"``: the
            most, keeping the most frequent characters).
        min_frequency: minimum count for a merge / subword / character to enter the
            vocabulary.
        lowercase: lowercase after NFKC normalisation (``"char"``: lowercase only).
        show_progress: show the trainer's progress bar (not used by ``"char"``).
    """
    if kind == "char":
        return _train_char_tokenizer(texts, vocab_size, min_frequency, lowercase)
    steps = [normalizers.NFKC()] + ([normalizers.Lowercase()] if lowercase else [])
    trainer: trainers.Trainer
    if kind == "wordpiece":
        backend = tokenizers.Tokenizer(
            models.WordPiece(unk_token="[UNK]", continuing_subword_prefix="##")
        )
        backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        backend.decoder = decoders.WordPiece(prefix="##", cleanup=True)
        trainer = trainers.WordPieceTrainer(
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            special_tokens=SPECIAL_TOKENS,
            continuing_subword_prefix="##",
            show_progress=show_progress,
        )
    elif kind == "bpe":
        backend = tokenizers.Tokenizer(models.BPE())
        backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        backend.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            special_tokens=SPECIAL_TOKENS,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=show_progress,
        )
    else:
        raise ValueError(f"unknown tokenizer kind '{kind}'; use 'wordpiece', 'bpe' or 'char'")
    backend.normalizer = normalizers.Sequence(steps)
    backend.train_from_iterator(texts, trainer=trainer)
    if kind == "wordpiece":  # lets transformers' BertTokenizerFast read the file as BERT's
        backend.post_processor = processors.BertProcessing(
            ("[SEP]", backend.token_to_id("[SEP]")), ("[CLS]", backend.token_to_id("[CLS]"))
        )
    ids = [backend.token_to_id(tok) for tok in SPECIAL_TOKENS]
    if ids != list(range(len(SPECIAL_TOKENS))):  # pragma: no cover - a tokenizers regression
        raise RuntimeError(f"special tokens got ids {ids}, expected 0..{len(SPECIAL_TOKENS) - 1}")
    return Tokenizer(backend)


def _is_char_level(backend: tokenizers.Tokenizer) -> bool:
    """True for a tokenizer made by ``train_tokenizer(kind="char")``: word-level lookup of
    single characters whose decoder joins them with nothing in between."""
    return isinstance(backend.model, models.WordLevel) and isinstance(
        backend.decoder, decoders.Fuse
    )


def _train_char_tokenizer(
    texts: Iterable[str], vocab_size: int, min_frequency: int, lowercase: bool
) -> Tokenizer:
    """Character-level tokenizer: :data:`SPECIAL_TOKENS` at ids 0-6, then every character
    seen at least ``min_frequency`` times (the ``vocab_size - 7`` most frequent if there
    are more), in code-point order. The pre-tokenizer isolates every code point (a split on
    the empty pattern), the model looks each one up (``[UNK]`` if absent) and the decoder
    concatenates them back without separators."""
    normalizer = normalizers.Lowercase() if lowercase else None
    counts: Counter[str] = Counter()
    for text in texts:
        counts.update(normalizer.normalize_str(text) if normalizer is not None else text)
    frequent = [(c, n) for c, n in counts.items() if n >= min_frequency]
    room = max(vocab_size - len(SPECIAL_TOKENS), 0)
    if len(frequent) > room:  # keep the most frequent (ties: lower code point first)
        frequent = sorted(frequent, key=lambda cn: (-cn[1], cn[0]))[:room]
    chars = sorted(c for c, _ in frequent)
    vocab = {tok: i for i, tok in enumerate([*SPECIAL_TOKENS, *chars])}
    backend = tokenizers.Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    if normalizer is not None:
        backend.normalizer = normalizer
    backend.pre_tokenizer = pre_tokenizers.Split(tokenizers.Regex(""), behavior="isolated")
    backend.decoder = decoders.Fuse()
    backend.add_special_tokens(SPECIAL_TOKENS)
    return Tokenizer(backend)

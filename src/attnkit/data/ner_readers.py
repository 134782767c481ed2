"""Readers for token classification (NER) data: CoNLL-2003, KLUE-NER and a user's CoNLL-style file.

Every reader returns a list of :class:`TaggedSentence` (words and one tag per word) with tags
in the **IOB2** scheme: every entity starts with ``B-TYPE`` and continues with ``I-TYPE``, so
an ``I-TYPE`` never follows ``O`` or a tag of another type. :func:`to_iob2` normalises IOB1
(where ``I-`` may start an entity and ``B-`` only separates two adjacent entities of one type)
and leaves valid IOB2 unchanged.

CoNLL-2003 (``conll2003``)
    ``word POS chunk NER`` per line, blank lines between sentences, ``-DOCSTART- -X- -X- O``
    between documents (skipped). The offline files are **already IOB2** (checked: no ``I-``
    tag starts an entity in any split, and the ``B-`` tags that follow a tag of the same type
    mark adjacent entities), unlike the original shared-task files, which use IOB1; the
    normalisation is a no-op for them but lets the original ``eng.*`` files be read too.
    Labels: ``O`` and ``B-``/``I-`` of ``PER``, ``ORG``, ``LOC``, ``MISC``. Sentences:
    train 14,041, validation 3,250, test 3,453.

KLUE-NER v1.1 dev (``klue-ner``)
    One ``CHAR<TAB>TAG`` line per **character**, spaces included (a space has a tag too, e.g.
    ``I-LC`` inside ``전남 진도``); each sentence starts with ``## <guid><TAB><annotated
    sentence>``. A sentence becomes ``words`` = its non-space characters, ``tags`` = their tags
    and ``space_after`` = whether a space followed each character, so that
    :meth:`TaggedSentence.text` rebuilds the sentence exactly (checked for all 5,000; one
    sentence ends in a space, which ``space_after[-1]`` keeps; none starts with one or has two
    spaces in a row, which this representation could not keep). The tags are IOB2 already;
    two entities (guids ``..._01601``, ``..._02091``) start with ``B-`` on a space, and that
    ``B-`` moves to the entity's first character when the space is dropped. Entity types:
    ``PS`` person, ``LC`` location, ``OG`` organisation, ``DT`` date, ``TI`` time, ``QT``
    quantity.

    KLUE's train set is not available, so the 5,000 dev sentences are cut into a **fixed**
    train / validation / test split by :func:`attnkit.data.readers.fixed_split` on the
    sentence guid (SHA-256 order, 80/10/10; no seed): **4,000 / 500 / 500** sentences.
    Split ``dev`` is the whole file, in file order.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from attnkit.data.paths import DataError, DatasetNotFoundError, locate
from attnkit.data.readers import _iter_lines, fixed_split

__all__ = [
    "CONLL2003_SPLITS",
    "CONLL2003_TAGS",
    "KLUE_NER_SPLITS",
    "KLUE_NER_TAGS",
    "KNOWN_TAGS",
    "TAGGED_DATASETS",
    "TaggedSentence",
    "load_tagged",
    "read_conll2003",
    "read_klue_ner",
    "read_tagged_file",
    "to_iob2",
]

DEV_SPLITS = ("train", "validation", "test", "dev")
# where the catalogued files lie under the data directory (attnkit.data.catalogue)
CONLL2003_SPLITS = {
    "train": "conll2003/train.txt.gz",
    "validation": "conll2003/valid.txt.gz",
    "test": "conll2003/test.txt.gz",
}
KLUE_NER_SPLITS = {s: "klue/klue-ner-v1.1_dev.tsv" for s in DEV_SPLITS}  # cut by the reader


def _iob2(*types: str) -> list[str]:
    return ["O", *sorted(f"{p}-{t}" for t in types for p in "BI")]


# The documented tag sets of the catalogued datasets: exactly the tags of their full training
# splits, in label-id order (O first, then sorted). A data.limit subset that happens to miss
# a rare tag still learns the whole set, and its validation split (the dataset's own, not
# limited) never has a tag the model cannot output.
CONLL2003_TAGS = _iob2("PER", "ORG", "LOC", "MISC")
KLUE_NER_TAGS = _iob2("PS", "LC", "OG", "DT", "TI", "QT")
KNOWN_TAGS = {"conll2003": CONLL2003_TAGS, "klue-ner": KLUE_NER_TAGS}


@dataclass
class TaggedSentence:
    """A sentence with one tag per word.

    ``space_after`` (optional) says whether a space followed each word in the original text;
    ``None`` means the words were separated by single spaces (CoNLL-style files).
    """

    words: list[str]
    tags: list[str]
    space_after: list[bool] | None = None

    def __post_init__(self) -> None:
        if len(self.words) != len(self.tags):
            raise ValueError(f"{len(self.words)} words but {len(self.tags)} tags")
        if self.space_after is not None and len(self.space_after) != len(self.words):
            raise ValueError(f"{len(self.words)} words but {len(self.space_after)} space_after")

    def text(self) -> str:
        """The sentence as text: words joined by single spaces, or as ``space_after`` says."""
        if self.space_after is None:
            return " ".join(self.words)
        return "".join(
            w + (" " if sp else "") for w, sp in zip(self.words, self.space_after, strict=True)
        )


def _tag_problem(tag: str) -> str | None:
    if tag == "O":
        return None
    if tag[:2] in ("B-", "I-") and len(tag) > 2:
        return None
    return f"tag '{tag}' is not O, B-TYPE or I-TYPE"


def to_iob2(tags: Iterable[str]) -> list[str]:
    """Normalise a sentence's tags to IOB2: an ``I-X`` that follows ``O``, a tag of another
    type or nothing becomes ``B-X``. Valid IOB2 is returned unchanged.

    Raises:
        ValueError: a tag that is not ``O``, ``B-X`` or ``I-X``.
    """
    out: list[str] = []
    prev = "O"
    for tag in tags:
        problem = _tag_problem(tag)
        if problem:
            raise ValueError(problem)
        if tag.startswith("I-") and (prev == "O" or prev[2:] != tag[2:]):
            tag = "B-" + tag[2:]
        out.append(tag)
        prev = tag
    return out


def _parse_columns(path: Path, normalize: bool, columns: int | None) -> list[TaggedSentence]:
    """CoNLL-style: word first, tag last, separated by a tab or (no tab) by spaces; a blank
    line ends a sentence; ``-DOCSTART-`` lines are skipped. ``columns``: the required number of
    columns (``None``: at least 2, the same on every line)."""
    sentences: list[TaggedSentence] = []
    words: list[str] = []
    tags: list[str] = []
    lines: list[int] = []  # line numbers of the current sentence's words
    width = columns

    def flush() -> None:
        if not words:
            return
        out = list(tags)
        if normalize:
            for tag, lineno in zip(tags, lines, strict=True):
                problem = _tag_problem(tag)
                if problem:
                    raise DataError(
                        f"{path}: line {lineno}: {problem}; read it with normalize=False to "
                        "keep tags as they are"
                    )
            out = to_iob2(tags)
        sentences.append(TaggedSentence(list(words), out))
        words.clear()
        tags.clear()
        lines.clear()

    for lineno, raw in _iter_lines(path):
        line = raw.rstrip("\r\n")
        if not line.strip():
            flush()
            continue
        fields = line.split("\t") if "\t" in line else line.split()
        if fields[0] == "-DOCSTART-":
            flush()
            continue
        if len(fields) < 2 or not fields[0] or not fields[-1].strip():
            raise DataError(
                f"{path}: line {lineno}: expected a word and a tag separated by a tab or "
                f"spaces, got {line[:60]!r}"
            )
        if width is None:
            width = len(fields)
        elif len(fields) != width:
            raise DataError(
                f"{path}: line {lineno}: {len(fields)} columns, expected {width} "
                f"(word ... tag); got {line[:60]!r}"
            )
        words.append(fields[0])
        tags.append(fields[-1].strip())
        lines.append(lineno)
    flush()
    return sentences


def read_tagged_file(path: str | Path, normalize: bool = True) -> list[TaggedSentence]:
    """Read a user's CoNLL-style file (optionally ``.gz``): one word per line, the word in the
    first column and its tag in the last, columns separated by tabs (or, on a line without a
    tab, by spaces); a blank line between sentences; ``-DOCSTART-`` lines are skipped.

    With ``normalize`` (default) the tags must be ``O``, ``B-X`` or ``I-X`` and are normalised
    to IOB2 (:func:`to_iob2`, so IOB1 files work); ``normalize=False`` keeps any tags as they
    are (e.g. POS tags).

    Raises:
        DataError: missing file, a line without a word and a tag, a line with another number of
            columns than the first, a bad tag, undecodable bytes, or no sentence at all; the
            message names the file and the line.
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise DataError(f"file not found: {path}")
    sentences = _parse_columns(path, normalize, None)
    if not sentences:
        raise DataError(f"{path} has no sentences (expected 'word<TAB>tag' lines)")
    return sentences


def read_conll2003(split: str, data_dir: str | Path | None = None) -> list[TaggedSentence]:
    """Read a CoNLL-2003 split (``train``, ``validation`` or ``test``): 14,041 / 3,250 / 3,453
    sentences with IOB2 NER tags (see the module docstring). POS and chunk columns are dropped.
    """
    try:
        path = locate("conll2003", CONLL2003_SPLITS, split, data_dir)
    except DatasetNotFoundError as err:
        if split != "train":
            raise
        tried = ", ".join(str(p) for p in err.looked_at)
        raise DataError(
            f"CoNLL-2003 train not found; looked at: {tried}; `attnkit data fetch conll2003` "
            "does not download it (the only public copy needs cleaning): place the file "
            "there, or point --data-dir / ATTNKIT_DATA at a folder that has it"
        ) from None
    return _parse_columns(path, True, 4)


def _klue_ner_blocks(path: Path) -> Iterator[tuple[str, int, list[tuple[str, str]]]]:
    """Yield ``(guid, header_line_number, [(char, tag), ...])`` per sentence."""
    guid: str | None = None
    header = 0
    chars: list[tuple[str, str]] = []
    for lineno, raw in _iter_lines(path):
        line = raw.rstrip("\r\n")
        if line.startswith("##"):
            if chars:
                raise DataError(f"{path}: line {lineno}: '##' line inside a sentence")
            head = line[2:].strip().split("\t", 1)
            guid, header = head[0].strip(), lineno
            continue
        if not line:
            if chars:
                assert guid is not None
                yield guid, header, chars
            guid, chars = None, []
            continue
        fields = line.split("\t")
        if len(fields) != 2 or len(fields[0]) != 1:
            raise DataError(
                f"{path}: line {lineno}: expected 'CHARACTER<TAB>TAG', got {line[:40]!r}"
            )
        if guid is None:
            raise DataError(f"{path}: line {lineno}: character line before any '## guid' line")
        chars.append((fields[0], fields[1]))
    if chars:
        assert guid is not None
        yield guid, header, chars


def _klue_sentence(path: Path, lineno: int, chars: list[tuple[str, str]]) -> TaggedSentence:
    words: list[str] = []
    tags: list[str] = []
    space_after: list[bool] = []
    carried_begin: str | None = None  # type of a B- tag that sat on a dropped space
    for char, tag in chars:
        problem = _tag_problem(tag)
        if problem:
            raise DataError(f"{path}: sentence at line {lineno}: {problem}")
        if char == " ":
            if words:
                space_after[-1] = True
            if tag.startswith("B-"):
                carried_begin = tag[2:]
            elif tag == "O":
                carried_begin = None
            continue
        if carried_begin is not None and tag == "I-" + carried_begin:
            tag = "B-" + carried_begin
        carried_begin = None
        words.append(char)
        tags.append(tag)
        space_after.append(False)
    return TaggedSentence(words, to_iob2(tags), space_after)


def read_klue_ner(split: str, data_dir: str | Path | None = None) -> list[TaggedSentence]:
    """Read KLUE-NER v1.1 dev as character-level sentences (see the module docstring).

    ``split`` is ``train`` (4,000 sentences), ``validation`` (500) or ``test`` (500), the fixed
    split by guid, or ``dev`` (all 5,000). Sentences keep their file order.
    """
    path = locate("klue-ner", KLUE_NER_SPLITS, split, data_dir)
    blocks = list(_klue_ner_blocks(path))
    if not blocks:
        raise DataError(f"{path} has no sentences")
    if split != "dev":
        assigned = fixed_split(guid for guid, _, _ in blocks)
        blocks = [b for b in blocks if assigned[b[0]] == split]
    return [_klue_sentence(path, lineno, chars) for _, lineno, chars in blocks]


TAGGED_DATASETS = {"conll2003": read_conll2003, "klue-ner": read_klue_ner}


def load_tagged(
    name_or_files: str | Mapping[str, str | os.PathLike[str]],
    split: str,
    data_dir: str | Path | None = None,
    files: Mapping[str, str | os.PathLike[str]] | None = None,
) -> list[TaggedSentence]:
    """Load one split of a token classification dataset.

    ``name_or_files`` is ``"conll2003"`` or ``"klue-ner"`` (read from the data directory), or
    ``"file"`` with ``files`` mapping each split to a CoNLL-style file (as in a recipe's
    ``data: {name: file, train: a.conll, test: b.conll}``); the mapping may also be passed as
    ``name_or_files`` itself.

    Raises:
        DataError: unknown name, no file for ``split``, or any problem reading it.
    """
    if isinstance(name_or_files, Mapping):
        files, name = name_or_files, "file"
    else:
        name = os.fspath(name_or_files).strip().lower()
    if name == "file":
        if not files:
            raise DataError("data name 'file' needs a file per split (e.g. train: train.conll)")
        if split not in files:
            raise DataError(f"no file for split '{split}'; splits given: {', '.join(files)}")
        return read_tagged_file(files[split])
    reader = TAGGED_DATASETS.get(name)
    if reader is None:
        known = ", ".join([*TAGGED_DATASETS, "file"])
        raise DataError(f"'{name_or_files}' is not a token classification dataset ({known})")
    return reader(split, data_dir)

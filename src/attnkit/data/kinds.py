"""What a dataset can be read as: the kinds of examples, and a ``Reader`` for one of them.

A catalogue entry (``attnkit.data.catalogue``) carries a ``Reader`` per kind it offers, and
a task names the kinds it reads (``TaskSpec.reads``); the task then asks the catalogue for
a split (``catalogue.read(cfg.data, kind, split)``) and never looks at the dataset's name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["KINDS", "Reader"]

# kind -> what a split of it is, and which tasks read it
KINDS: dict[str, str] = {
    "labelled": "Examples of (text, label) (readers.Example): classify",
    "pairs": "PairExample (text, text_b, label): classify, sentence pairs",
    "parallel": "Pair (src, tgt): translate, chat",
    "tagged": "TaggedSentence (words, IOB2 tags): tag",
    "qa": "QAExample (SQuAD v1 questions): qa",
    "documents": "list[str], one document each: mlm, bilm, lm",
    "text": "str, one continuous text: lm",
    "segments": "list[list[str]], documents of segments (sentences): bert-pretrain",
}


@dataclass(frozen=True)
class Reader:
    """How one dataset is read as one kind of examples (``KINDS``).

    read: ``read(data, split)`` -> the split's examples; ``data`` is the recipe's data
        settings (the task's ``DataConfig`` subclass: ``data.data_dir``, and for the readers
        of the user's files ``data.train`` and the ``settings`` below)
    splits: the splits it reads (None: those of the entry's files, ``DatasetInfo.splits``)
    settings: the task-specific data settings it reads (e.g. ``pair_column``)
    file: for the readers of the user's own files (``data.name: file``): what each of
        ``data.train`` / ``validation`` / ``test`` must be ("a TSV file"); ``data.train``
        is then required and a split exists where its file is given
    what: how messages and summaries name what it reads ("the unlabelled nsmc corpus";
        empty: the dataset's name, or the file's)
    labels: label names in id order where the dataset fixes them (NSMC's negative /
        positive, CoNLL-2003's tags); empty: the task collects them from the data
    unit: tagged: what one tag sits on, ``word`` or ``char`` (KLUE-NER)
    scorer: qa: whose official EM / F1 scores its answers (``squad`` or ``korquad``)
    check: a one-line message when the data settings ask for what it cannot read (e.g.
        a language pair a parallel corpus lacks), else None
    """

    read: Callable[[Any, str], Any]
    splits: tuple[str, ...] | None = None
    settings: tuple[str, ...] = ()
    file: str = ""
    what: str = ""
    labels: tuple[str, ...] = ()
    unit: str = "word"
    scorer: str = "squad"
    check: Callable[[Any], str | None] | None = None

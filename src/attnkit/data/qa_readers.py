"""Readers for extractive question answering: KorQuAD 1.0 and any SQuAD-v1-format JSON file.

KorQuAD 1.0 dev (``korquad``)
    SQuAD v1.1 JSON: 140 articles (distinct titles), 964 paragraphs, 5,774 questions, one
    answer each. Every ``answer_start`` points at its answer text
    (``context[start:start + len(text)] == text`` for all 5,774; see
    :func:`answer_offset_mismatches`).

    KorQuAD's train set is not in the offline copy, so the dev set is cut into a **fixed**
    train / validation / test split **by article**: :func:`attnkit.data.readers.fixed_split`
    on the title (SHA-256 order, 80/10/10 of the articles; no seed), so no article's
    paragraphs appear in two splits. Result (articles / paragraphs / questions): train
    112 / 660 / 4,330, validation 14 / 92 / 586, test 14 / 212 / 858 (by question about
    75/10/15: articles differ in size). Split ``dev`` is the whole official dev set, for
    comparing with published scores of models trained on KorQuAD's train set. Questions keep
    their file order.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from attnkit.data.pairs import _load_json
from attnkit.data.paths import DataError, locate
from attnkit.data.readers import fixed_split

__all__ = [
    "KORQUAD_SPLITS",
    "QAExample",
    "answer_offset_mismatches",
    "read_korquad",
    "read_squad_file",
]

log = logging.getLogger(__name__)

# the one dev file, cut into a fixed split by the reader (attnkit.data.catalogue)
KORQUAD_SPLITS = {
    s: "korquad/KorQuAD_v1.0_dev.json.gz" for s in ("train", "validation", "test", "dev")
}


@dataclass
class QAExample:
    """One question about a context; ``answers`` are ``(text, answer_start)`` pairs, the start
    being a character offset into ``context``."""

    id: str
    title: str
    context: str
    question: str
    answers: list[tuple[str, int]] = field(default_factory=list)


def answer_offset_mismatches(examples: list[QAExample]) -> list[tuple[str, str, int]]:
    """The answers whose ``answer_start`` does not point at their text in the context, as
    ``(id, answer text, answer_start)``."""
    return [
        (ex.id, text, start)
        for ex in examples
        for text, start in ex.answers
        if ex.context[start : start + len(text)] != text
    ]


_SHAPE = (
    "expected {title, paragraphs: [{context, qas: [{id, question, answers: [{text, "
    "answer_start}]}]}]}"
)


def _get(obj: object, key: str, kind: type | tuple[type, ...], path: Path, where: str):
    """``obj[key]``, checked to be a ``kind``; a one-line DataError naming ``where`` if not."""
    if not isinstance(obj, dict):
        raise DataError(f"{path}: {where}: expected a JSON object; {_SHAPE}")
    if key not in obj:
        raise DataError(f"{path}: {where}: no '{key}'; {_SHAPE}")
    value = obj[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise DataError(f"{path}: {where}.{key}: unexpected {type(value).__name__}; {_SHAPE}")
    return value


def read_squad_file(path: str | Path) -> list[QAExample]:
    """Read a SQuAD-v1-format JSON file (``.json`` or ``.json.gz``):
    ``{"data": [{"title", "paragraphs": [{"context", "qas": [{"id", "question",
    "answers": [{"text", "answer_start"}]}]}]}]}``.

    Answers are kept as they are; a question without answers gets ``answers == []``. Answers
    whose ``answer_start`` does not point at their text are kept too, and counted in a
    logged warning (:func:`answer_offset_mismatches` lists them).

    Raises:
        DataError: missing file, invalid JSON, or a record without the fields above; the
            message names the file and where in it (e.g. ``data[3].paragraphs[0].qas[2]``).
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise DataError(f"file not found: {path}")
    root = _load_json(path)
    articles = _get(root, "data", list, path, "top level")
    examples: list[QAExample] = []
    for a, article in enumerate(articles):
        where = f"data[{a}]"
        title = str(_get(article, "title", (str, int, float), path, where))
        for p, para in enumerate(_get(article, "paragraphs", list, path, where)):
            where = f"data[{a}].paragraphs[{p}]"
            context = _get(para, "context", str, path, where)
            for q, qa in enumerate(_get(para, "qas", list, path, where)):
                where = f"data[{a}].paragraphs[{p}].qas[{q}]"
                qid = str(_get(qa, "id", (str, int), path, where))
                question = _get(qa, "question", str, path, where)
                answers: list[tuple[str, int]] = []
                raw_answers = qa.get("answers") or []
                if not isinstance(raw_answers, list):
                    raise DataError(f"{path}: {where}.answers: expected a list; {_SHAPE}")
                for n, ans in enumerate(raw_answers):
                    text = _get(ans, "text", str, path, f"{where}.answers[{n}]")
                    start = _get(ans, "answer_start", int, path, f"{where}.answers[{n}]")
                    if start < 0:
                        raise DataError(f"{path}: {where}.answers[{n}]: answer_start < 0")
                    answers.append((text, start))
                examples.append(QAExample(qid, title, context, question, answers))
    if not examples:
        raise DataError(f"{path} has no questions")
    bad = answer_offset_mismatches(examples)
    if bad:
        log.warning(
            "%s: %d answer(s) whose answer_start does not point at the answer text (kept), "
            "e.g. question %s",
            path,
            len(bad),
            bad[0][0],
        )
    return examples


def read_korquad(split: str, data_dir: str | Path | None = None) -> list[QAExample]:
    """Read KorQuAD 1.0 dev: ``train``, ``validation`` or ``test`` (the fixed split by article
    described in the module docstring) or ``dev`` (all 5,774 questions)."""
    path = locate("korquad", KORQUAD_SPLITS, split, data_dir)
    examples = read_squad_file(path)
    if split == "dev":
        return examples
    assigned = fixed_split(ex.title for ex in examples)
    return [ex for ex in examples if assigned[ex.title] == split]

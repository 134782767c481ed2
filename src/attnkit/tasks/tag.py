"""Token classification (named-entity recognition) with a BERT: ``task: tag``.

Data: CoNLL-2003 (English, one label per word), KLUE-NER (Korean, one tag per
character) or the user's CoNLL-style files (``data.name: file``), all read by
``attnkit.data.ner_readers`` as IOB2-tagged sentences. The model is
``BertForTokenClassification`` (``model.arch: bert-tagger``), fine-tuned from a pretrained
encoder (``model.init_from``) or trained from scratch.

What a label sits on is the run's word unit (``data.label_unit``, saved as ``word_unit``):

* ``word`` (CoNLL-2003, files): BERT sees word pieces, so each word's label sits on its
  FIRST piece and the other pieces, ``[CLS]`` and ``[SEP]`` are ignored by the loss
  (``attnkit.data.ner_features.encode_tagged``, Devlin et al. 2019, section 5.3); at prediction
  time the first piece's label is the word's label. A sentence longer than
  ``data.max_len`` pieces keeps its first whole words; the words cut off are labelled
  ``O``.
* ``piece`` (KLUE-NER's default, as KLUE's baselines): the sentence's natural text (spaces
  as in the original) is tokenized as a whole, as the encoder saw text in pretraining, and
  EVERY piece is labelled with the tag of its first character and scored by the loss
  (``attnkit.data.ner_features.encode_pieces``). At prediction time each character gets its
  piece's label (``B-X`` only on the piece's first character: the others get ``I-X``, or
  ``O``), so the output and the metric stay per character; an entity whose start or end
  falls inside a piece cannot be matched exactly. A longer sentence keeps its first
  ``data.max_len - 2`` pieces; the characters cut off are labelled ``O``.
* ``char`` (KLUE-NER with ``data.label_unit: char``, and runs saved before ``piece``
  existed): every character is a word of its own, tokenized alone.

Model selection by validation entity-level F1 (seqeval's default, conlleval-compatible
scoring, ``attnkit.tasks.metrics.entity_f1``): an entity counts only if its type and both ends
match.

    tagger = attnkit.load("runs/conll2003-minilm")
    tagger.tag("John lives in New York.")[0].entities
    # [Entity(type='PER', text='John', start=0, end=4),
    #  Entity(type='LOC', text='New York', start=14, end=22)]
"""

from __future__ import annotations

import json
import unicodedata
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnkit.core.config import require, short_repr
from attnkit.core.errors import InputError, check_finite
from attnkit.data.batching import pad_batch
from attnkit.data.catalogue import find_reader, has_split, read
from attnkit.data.ner_features import (
    IGNORE_INDEX,
    continuation_ids,
    encode_pieces,
    encode_tagged,
    unit_predictions,
    unit_spans,
    word_predictions,
)
from attnkit.data.ner_readers import KNOWN_TAGS, TaggedSentence
from attnkit.data.paths import DataError
from attnkit.data.settings import DataConfig
from attnkit.data.split import split_examples
from attnkit.data.tokenization import Tokenizer, cut_text
from attnkit.runtime.device import inference, model_device
from attnkit.runtime.run import RunDir
from attnkit.tasks.base import (
    Log,
    Predictor,
    PreparedData,
    Recipe,
    RunError,
    TaskSpec,
    get_tokenizer,
    log_info,
    one_line,
    with_data_dir,
)
from attnkit.tasks.metrics import entity_f1, get_entities

__all__ = [
    "KNOWN_TAGS",
    "SPEC",
    "Entity",
    "TagData",
    "TagPredictor",
    "TagSpec",
    "Tagging",
    "TaggingObjective",
    "encode_sentences",
    "prepare_data",
    "read_split",
    "split_words",
    "tag_labels",
    "word_accuracy",
    "word_unit",
]

# (token ids, label id per position: the word's label on its first piece, IGNORE_INDEX
# elsewhere)
Item = tuple[list[int], list[int]]
WORD_UNITS = ("word", "char", "piece")
# KNOWN_TAGS (attnkit.data.ner_readers): the documented tag sets of the catalogued datasets,
# which their catalogue readers fix (Reader.labels), in the order of tag_labels


@dataclass
class TagData(DataConfig):
    """tag's data settings: the shared ones and what one label sits on."""

    # word (CoNLL, file) | piece or char (a dataset tagged per character, klue-ner; piece)
    label_unit: str | None = None

    def validate(self) -> None:
        super().validate()
        require(
            self.label_unit in (None, *WORD_UNITS),
            f"data.label_unit must be word|piece|char, got {short_repr(self.label_unit)}",
        )


# --------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------
def read_split(cfg: Recipe, split: str) -> list[TaggedSentence]:
    """One split (train / validation / test) of the recipe's dataset (the catalogue's
    ``tagged``)."""
    return read(cfg.data, "tagged", split)


def _per_char(cfg: Recipe) -> bool:
    """Whether the dataset tags characters (KLUE-NER), not words (its reader's ``unit``)."""
    reader = find_reader(cfg.data, "tagged")
    return reader is not None and reader.unit == "char"


def word_unit(cfg: Recipe) -> str:
    """What one label sits on: ``data.label_unit`` when set, else ``"piece"`` for datasets
    tagged per character (KLUE-NER: every word piece of the natural text) and ``"word"``
    for the others."""
    if cfg.data.label_unit is not None:
        return cfg.data.label_unit
    return "piece" if _per_char(cfg) else "word"


def _saved_word_unit(cfg: Recipe) -> str:
    """The word unit of a run whose config.json predates the saved ``word_unit``: those
    runs tagged KLUE-NER per character, as words of their own."""
    if cfg.data.label_unit is not None:
        return cfg.data.label_unit
    return "char" if _per_char(cfg) else "word"


def tag_labels(tags: Iterable[str]) -> list[str]:
    """The label names, in label-id order: ``O`` first (id 0), then the other tags sorted."""
    return ["O", *sorted(set(tags) - {"O"})]


def _check_tags(sentences: Sequence[TaggedSentence], to_id: dict[str, int], split: str) -> None:
    for k, sentence in enumerate(sentences, 1):
        for tag in sentence.tags:
            if tag not in to_id:
                raise DataError(
                    f"{split} sentence {k}: tag {tag!r} never appears in the training data "
                    f"(labels: {', '.join(to_id)})"
                )


def encode_sentences(
    sentences: Sequence[TaggedSentence],
    tokenizer: Tokenizer,
    to_id: dict[str, int],
    max_len: int,
    unit: str = "word",
) -> tuple[list[Any], int]:
    """Tagged sentences -> items, and how many sentences were truncated to ``max_len``
    pieces.

    ``unit`` word / char: (token ids, per-position label ids) (``encode_tagged``:
    ``[CLS] pieces [SEP]``, labels on each word's first piece). ``unit`` piece: (token ids,
    a label id on every piece, unit_position, unit_first, the gold label id of each
    character) (``encode_pieces`` of the sentence's text): the last three let
    :meth:`TaggingObjective.evaluate` score characters."""
    items: list[Any] = []
    truncated = 0
    for sentence in sentences:
        if unit == "piece":
            spans = unit_spans(sentence.words, sentence.space_after)
            piece = encode_pieces(tokenizer, sentence.text(), spans, sentence.tags, to_id, max_len)
            assert piece.labels is not None
            gold = [to_id[t] for t in sentence.tags]
            items.append(
                (piece.input_ids, piece.labels, piece.unit_position, piece.unit_first, gold)
            )
            truncated += piece.truncated
            continue
        feature = encode_tagged(tokenizer, sentence.words, sentence.tags, to_id, max_len)
        assert feature.labels is not None
        items.append((feature.input_ids, feature.labels))
        truncated += feature.truncated
    return items, truncated


def prepare_data(
    cfg: Recipe, tokenizer: Tokenizer | None = None, log: Log = log_info
) -> PreparedData:
    """Read the dataset, take its validation split (or hold out ``data.val_fraction``),
    train (or keep) the tokenizer, encode once. ``run_info``: the label names and the word
    unit; ``extras["truncated"]``: training sentences cut to ``data.max_len``."""
    d = cfg.data
    train_s, val_s = split_examples(
        read_split(cfg, "train"),
        d,
        cfg.training.seed,
        validation=read_split(cfg, "validation")
        if has_split(cfg.data, "tagged", "validation")
        else None,
    )
    if not train_s:
        raise DataError("the training data has no sentences")
    reader = find_reader(d, "tagged")
    labels = list(reader.labels if reader else ()) or tag_labels(t for s in train_s for t in s.tags)
    if len(labels) == 1:  # (before the tokenizer is trained or anything is written)
        raise DataError("the training data has only the tag O: there is no entity to learn")
    to_id = {name: i for i, name in enumerate(labels)}
    _check_tags(train_s, to_id, "train")
    _check_tags(val_s, to_id, "validation")
    unit = word_unit(cfg)
    if tokenizer is None:  # piece: trained on the natural text, as a pretrained one was
        tokenizer = get_tokenizer(
            cfg.tokenizer,
            (s.text() if unit == "piece" else " ".join(s.words) for s in train_s),
            f"{len(train_s):,} sentences",
            log,
        )
    train, truncated = encode_sentences(train_s, tokenizer, to_id, d.max_len, unit)
    validation, _ = encode_sentences(val_s, tokenizer, to_id, d.max_len, unit)
    counted = (
        f"{sum(len(s.words) for s in train_s):,} training {'word' if unit == 'word' else 'char'}s"
    )
    if unit == "piece":
        counted += f" in {sum(len(it[0]) - 2 for it in train):,} labelled pieces"
    summary = (
        f"data: {len(train):,} train / {len(validation):,} validation sentences "
        f"({counted}), {len(labels)} labels, vocab {tokenizer.vocab_size:,}"
        + (f", {truncated:,} truncated to max_len={d.max_len}" if truncated else "")
    )
    run_info = {"labels": labels, "word_unit": unit}
    return PreparedData(tokenizer, train, validation, summary, run_info, {"truncated": truncated})


# --------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------
def _logits(model: nn.Module, batch: dict[str, Tensor]) -> Tensor:
    """(B, T, num_labels) label scores at every position (the model's ``TaggerOutput``)."""
    return model(batch["input_ids"], batch["attention_mask"]).logits


def word_accuracy(y_true: Sequence[Sequence[str]], y_pred: Sequence[Sequence[str]]) -> float:
    """The share of words whose predicted tag is the true one (0 without words)."""
    pairs = [(a, b) for t, p in zip(y_true, y_pred, strict=True) for a, b in zip(t, p, strict=True)]
    return sum(a == b for a, b in pairs) / max(len(pairs), 1)


class TaggingObjective:
    """Cross-entropy over the labelled positions (each word's first piece, or every piece
    for ``word_unit: piece``); model selection by validation entity-level F1 (per
    character for ``piece`` items, whose predictions are mapped back to characters)."""

    metric = "f1"
    greater_is_better = True
    shown = ("precision", "recall", "accuracy")  # on each evaluation's line, after f1

    def __init__(self, labels: Sequence[str], pad_id: int, label_smoothing: float = 0.0) -> None:
        self.labels = list(labels)
        self.pad_id = pad_id
        self.label_smoothing = label_smoothing
        self.continuation = continuation_ids(self.labels)

    def collate(self, items: Sequence[Any]) -> dict[str, Any]:
        ids, mask = pad_batch([it[0] for it in items], self.pad_id)
        labels, _ = pad_batch([it[1] for it in items], IGNORE_INDEX)
        batch: dict[str, Any] = {"input_ids": ids, "attention_mask": mask, "labels": labels}
        if items and len(items[0]) > 2:  # piece items: how to score characters
            batch["units"] = [tuple(it[2:]) for it in items]
        return batch

    def loss(self, model: nn.Module, batch: dict[str, Tensor]) -> tuple[Tensor, int]:
        logits = _logits(model, batch)
        loss = F.cross_entropy(
            logits.flatten(0, 1).float(),
            batch["labels"].flatten(),
            ignore_index=IGNORE_INDEX,
            label_smoothing=self.label_smoothing,
        )
        return loss, int(batch["attention_mask"].sum())

    @torch.no_grad()
    def evaluate(self, model: nn.Module, batches: Iterable[dict[str, Tensor]]) -> dict[str, Any]:
        """Loss per labelled position, entity-level precision / recall / F1 and word
        accuracy over the words the sentences kept (truncated words are not scored here;
        ``TagSpec.evaluate`` scores every word). Piece items are scored per character,
        every character (those cut off count as predicted O)."""
        total_loss: Tensor | float = 0.0
        labelled = 0
        y_true: list[list[str]] = []
        y_pred: list[list[str]] = []
        for batch in batches:
            logits = _logits(model, batch).float()
            labels = batch["labels"]
            total_loss = total_loss + F.cross_entropy(
                logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE_INDEX, reduction="sum"
            )
            labelled += int((labels != IGNORE_INDEX).sum())
            gold_rows, pred_rows = labels.tolist(), logits.argmax(-1).tolist()
            if "units" in batch:  # score characters, not pieces
                outside = self.labels.index("O") if "O" in self.labels else 0
                for pred, (position, first, gold) in zip(pred_rows, batch["units"], strict=True):
                    chars = unit_predictions(pred, position, first, self.continuation, outside)
                    y_true.append([self.labels[g] for g in gold])
                    y_pred.append([self.labels[p] for p in chars])
                continue
            for gold, pred in zip(gold_rows, pred_rows, strict=True):
                kept = [(g, p) for g, p in zip(gold, pred, strict=True) if g != IGNORE_INDEX]
                y_true.append([self.labels[g] for g, _ in kept])
                y_pred.append([self.labels[p] for _, p in kept])
        scores = entity_f1(y_true, y_pred)
        return {
            "loss": float(total_loss) / max(labelled, 1),
            "f1": scores["f1"],
            "precision": scores["precision"],
            "recall": scores["recall"],
            "accuracy": word_accuracy(y_true, y_pred),
        }


# --------------------------------------------------------------------------------------
# Prediction
# --------------------------------------------------------------------------------------
def _is_punctuation(char: str) -> bool:
    """BERT's ``_is_punctuation``: ASCII non-alphanumerics and Unicode P* categories."""
    cp = ord(char)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def split_words(text: str, unit: str = "word") -> list[tuple[str, int, int]]:
    """The words of ``text`` as the tagger sees them, each with its ``(start, end)``
    character offsets (``text[start:end]`` is the word).

    ``unit="word"``: split on whitespace, then BERT-style on punctuation, each punctuation
    character a word of its own (``"Paris,"`` -> ``Paris`` ``,``), as CoNLL-2003 tokenizes.
    ``unit="char"``: every non-space character is a word (KLUE-NER)."""
    words: list[tuple[str, int, int]] = []
    start = None
    for i, char in enumerate(text):
        if char.isspace():
            if start is not None:
                words.append((text[start:i], start, i))
            start = None
        elif unit == "char" or _is_punctuation(char):
            if start is not None:
                words.append((text[start:i], start, i))
            words.append((char, i, i + 1))
            start = None
        elif start is None:
            start = i
    if start is not None:
        words.append((text[start:], start, len(text)))
    return words


@dataclass
class Entity:
    """One entity: its type (``PER``), its text and its character span in the input
    (``text[start:end]``)."""

    type: str
    text: str
    start: int
    end: int


@dataclass
class Tagging:
    """One tagged text: its words, one label per word, the entities they form."""

    text: str
    words: list[str]
    labels: list[str]
    entities: list[Entity] = field(default_factory=list)
    truncated: bool = False  # words beyond max_len were labelled O

    def format(self) -> str:
        """``word/LABEL`` for each word of an entity, the other words plain, separated by
        spaces: what ``attnkit predict`` prints (one line: control characters escaped)."""
        return one_line(
            " ".join(
                w if label == "O" else f"{w}/{label}"
                for w, label in zip(self.words, self.labels, strict=True)
            )
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "words": self.words,
            "labels": self.labels,
            "entities": [asdict(e) for e in self.entities],
            "truncated": self.truncated,
        }


def _entities(text: str, spans: Sequence[tuple[int, int]], labels: Sequence[str]) -> list[Entity]:
    """The entities ``labels`` mark (read as seqeval / conlleval do), with their character
    spans in ``text``."""
    out = []
    for type_, first, last in get_entities(labels):
        start, end = spans[first][0], spans[last][1]
        out.append(Entity(type_, text[start:end], start, end))
    return out


class TagPredictor(Predictor):
    """What ``attnkit.load(run)`` returns for a tag (NER) run."""

    task = "tag"
    capabilities = frozenset({"tag", "predict", "entities"})  # predict: tag, for `attnkit predict`

    def __init__(
        self,
        model: nn.Module,
        tokenizer: Tokenizer,
        config: Recipe,
        labels: Sequence[str],
        run_dir: Path | None = None,
        word_unit: str = "word",
    ) -> None:
        self.model = model.eval()
        self.device = model_device(model)  # inputs go where the weights are
        self.tokenizer = tokenizer
        self.config = config
        self.labels = list(labels)
        self.run_dir = run_dir
        self.word_unit = word_unit
        self.outside_id = self.labels.index("O") if "O" in self.labels else 0

    @inference
    def word_label_ids(
        self, sentences: Sequence[Sequence[str]], batch_size: int = 32
    ) -> tuple[list[list[int]], list[bool]]:
        """One label id per word of each pre-split sentence (the prediction at the word's
        first piece; words cut off by ``data.max_len`` get O), and whether each sentence
        was truncated. Sentences are batched in order of length."""
        max_len = self.config.data.max_len
        features = [
            encode_tagged(self.tokenizer, words, None, None, max_len) for words in sentences
        ]
        out = [
            word_predictions(
                predicted, features[i].word_index, len(sentences[i]), self.outside_id
            )  # fmt: skip
            for i, predicted in enumerate(self._piece_predictions(features, batch_size))
        ]
        return out, [f.truncated for f in features]

    def _piece_predictions(self, features: Sequence[Any], batch_size: int) -> list[Tensor]:
        """The predicted label id per position (T_i,) of each feature (``input_ids``), in
        order; batched by length so that a batch is padded only to its own longest."""
        order = sorted(range(len(features)), key=lambda i: len(features[i].input_ids))
        out: list[Tensor] = [torch.empty(0, dtype=torch.long)] * len(features)
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            ids, mask = pad_batch([features[i].input_ids for i in rows], self.tokenizer.pad_id)
            batch = {"input_ids": ids.to(self.device), "attention_mask": mask.to(self.device)}
            logits = _logits(self.model, batch)
            check_finite(logits)  # NaN weights: an error, not labels picked from NaN
            predicted = logits.argmax(-1).cpu()
            for row, i in enumerate(rows):
                out[i] = predicted[row]
        return out

    @inference
    def unit_label_ids(
        self, sentences: Sequence[tuple[str, Sequence[tuple[int, int]]]], batch_size: int = 32
    ) -> tuple[list[list[int]], list[bool]]:
        """``word_unit: piece``: one label id per character of each ``(text, character
        spans)`` (each text tokenized as a whole, ``encode_pieces``; the piece labels
        mapped back by ``unit_predictions``; characters cut off by ``data.max_len`` get
        O), and whether each text was truncated. Batched in order of length."""
        max_len = self.config.data.max_len
        features = [
            encode_pieces(self.tokenizer, text, spans, None, None, max_len)
            for text, spans in sentences
        ]
        continuation = continuation_ids(self.labels)
        out = [
            unit_predictions(
                predicted, f.unit_position, f.unit_first, continuation, self.outside_id
            )  # fmt: skip
            for f, predicted in zip(
                features, self._piece_predictions(features, batch_size), strict=True
            )
        ]
        return out, [f.truncated for f in features]

    def tag(self, texts: Sequence[str] | str, batch_size: int = 32) -> list[Tagging]:
        """Words, one label per word and the entities of each text (a single string is
        accepted too). Words are split as the run's data was (``split_words``: words and
        punctuation, or characters for a KLUE-NER run, whose labels are per character
        whatever the run's word unit)."""
        if isinstance(texts, str):
            texts = [texts]
        for i, text in enumerate(texts, 1):
            if not isinstance(text, str) or not text.strip():
                raise InputError(f"input {i} is empty or whitespace only")
        piece = self.word_unit == "piece"
        max_len = self.config.data.max_len
        # a text is cut to max_text_chars(max_len) characters before it is split and
        # tokenized: what lies beyond could never be labelled anyway
        cut_texts = [cut_text(text, max_len) for text in texts]
        texts = [text for text, _ in cut_texts]
        split = [split_words(text, "char" if piece else self.word_unit) for text in texts]
        if piece:
            ids, cut = self.unit_label_ids(
                [
                    (text, [(a, b) for _, a, b in words])
                    for text, words in zip(texts, split, strict=True)
                ],
                batch_size,
            )
        else:
            ids, cut = self.word_label_ids(
                [[w for w, _, _ in words] for words in split], batch_size
            )
        out = []
        for i, (text, words, label_ids, was_cut) in enumerate(
            zip(texts, split, ids, cut, strict=True), 1
        ):
            chars = cut_texts[i - 1][1]
            was_cut = was_cut or chars
            if was_cut:
                what = "characters" if self.word_unit != "word" else "words"
                cut_at = f"; it was cut to {len(text):,} characters" if chars else ""
                warnings.warn(
                    f"input {i} is longer than max_len={max_len} word pieces{cut_at}; the "
                    f"{what} that did not fit were labelled O",
                    stacklevel=2,
                )
            labels = [self.labels[k] for k in label_ids]
            spans = [(a, b) for _, a, b in words]
            out.append(
                Tagging(
                    text, [w for w, _, _ in words], labels, _entities(text, spans, labels), was_cut
                )
            )
        return out

    predict = tag  # what `attnkit predict` calls

    def entities(self, text: str) -> list[Entity]:
        """The entities of one text."""
        return self.tag([text])[0].entities

    def to_json(self, results: Sequence[Tagging]) -> str:
        """One JSON object per line."""
        return "\n".join(json.dumps(r.to_dict(), ensure_ascii=False) for r in results)


# --------------------------------------------------------------------------------------
# The task
# --------------------------------------------------------------------------------------
class TagSpec(TaskSpec):
    """Named-entity recognition: CoNLL-2003, KLUE-NER (per character) or your own
    CoNLL-style files, with a BERT. Model selection by validation entity F1."""

    name = "tag"
    endpoint = "tag"
    onnx_outputs = ("logits",)  # (B, T, num_labels)
    model_family = "tagger"
    default_arch = "bert-tagger"
    data_settings = TagData
    reads = ("tagged",)

    def validate(self, cfg: Recipe) -> None:
        units = ("piece", "char") if _per_char(cfg) else ("word",)
        require(
            cfg.data.label_unit in (None, *units),
            f"task tag on data.name {cfg.data.name} takes data.label_unit "
            f"{' or '.join(units)}, got {cfg.data.label_unit!r}",
        )

    def prepare_data(self, cfg: Recipe, tokenizer: Tokenizer | None, log: Log) -> PreparedData:
        return prepare_data(cfg, tokenizer, log)

    def model_inputs(
        self, cfg: Recipe, tokenizer: Tokenizer, run_info: dict[str, Any]
    ) -> dict[str, Any]:
        sizes = super().model_inputs(cfg, tokenizer, run_info)  # (the model config's)
        return {**sizes, "num_classes": len(run_info["labels"])}

    def objective(self, cfg: Recipe, data: PreparedData) -> TaggingObjective:
        return TaggingObjective(
            data.run_info["labels"], data.tokenizer.pad_id, cfg.training.label_smoothing
        )

    def predictor(
        self,
        model: nn.Module,
        tokenizer: Tokenizer,
        cfg: Recipe,
        run: RunDir,
        saved: dict[str, Any],
    ) -> TagPredictor:
        labels = saved.get("labels")
        if not isinstance(labels, list) or len(labels) != getattr(cfg.model, "num_classes", 0):
            raise RunError(f"{run.config_path}: labels are missing or do not match the model")
        unit = saved.get("word_unit", _saved_word_unit(cfg))
        if unit not in WORD_UNITS:
            raise RunError(
                f"{run.config_path}: word_unit must be {', '.join(WORD_UNITS)}, got {unit!r}"
            )
        return TagPredictor(model, tokenizer, cfg, labels, run.path, unit)

    def evaluate(
        self,
        predictor: Any,
        split: str,
        data_dir: str | None = None,
        batch_size: int = 32,
        **options: Any,
    ) -> dict[str, Any]:
        """Entity-level precision / recall / F1 (micro, and ``per_type``) and word accuracy
        on a split, over the dataset's own words (every word scored: those cut off by
        ``data.max_len`` count as predicted O)."""
        cfg = with_data_dir(predictor.config, data_dir)  # a copy: the predictor's is kept
        sentences = read_split(cfg, split)
        _check_tags(sentences, {name: i for i, name in enumerate(predictor.labels)}, split)
        if predictor.word_unit == "piece":
            ids, cut = predictor.unit_label_ids(
                [(s.text(), unit_spans(s.words, s.space_after)) for s in sentences], batch_size
            )
        else:
            ids, cut = predictor.word_label_ids([s.words for s in sentences], batch_size)
        y_pred = [[predictor.labels[k] for k in row] for row in ids]
        y_true = [s.tags for s in sentences]
        report = entity_f1(y_true, y_pred)
        report.update(
            accuracy=word_accuracy(y_true, y_pred),
            num_sentences=len(sentences),
            num_words=sum(map(len, y_true)),
            truncated=sum(cut),
            split=split,
        )
        return report


SPEC = TagSpec()  # task tag (attnkit.tasks.registry.BUILTIN)

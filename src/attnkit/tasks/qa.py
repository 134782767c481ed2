"""Extractive question answering (``task: qa``): a BERT with a start/end span head
(``model.arch: bert-qa``) reads ``[CLS] question [SEP] context-window [SEP]`` and points at
the answer span in the context (Devlin et al. 2019, section 4.2; SQuAD v1.1 / KorQuAD 1.0).

Data (``data.name``, a dataset the catalogue reads as ``qa``):
    korquad   KorQuAD 1.0 dev, cut into a fixed train / validation / test split by article
              (``attnkit.data.qa_readers.read_korquad``; 4,330 / 586 / 858 questions)
    file      SQuAD-v1-format JSON files: ``data.train`` (required), ``data.validation``,
              ``data.test`` (``.json`` or ``.json.gz``)

Contexts longer than a window are read in overlapping windows (``attnkit.data.qa_features``):
``data.max_len`` tokens per window, windows starting ``data.doc_stride`` context tokens
apart, the question cut to ``data.max_question_len`` tokens; decoding considers answers of
at most ``data.max_answer_len`` tokens. Every window is a training item; a window that
does not contain the whole answer is trained to point at [CLS] ``(0, 0)``, as BERT's
``run_squad.py`` and Hugging Face's ``run_qa.py`` do. The loss is
``(CE(start) + CE(end)) / 2`` over the real tokens of each window.

Model selection by validation F1. Exact match and F1 are the official scripts' (percent):
KorQuAD 1.0's (character F1) for ``data.name: korquad``, SQuAD v1.1's (word F1) otherwise
(the catalogue reader's ``scorer``);
the run's ``config.json`` records which (``scorer``).

    qa = attnkit.load("runs/korquad-bert")
    qa.answer("대한민국의 수도는?", "대한민국의 수도는 서울이다. ...")   # AnswerResult
"""

from __future__ import annotations

import dataclasses
import warnings
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnkit.core.config import at_least, check, require
from attnkit.core.errors import InputError, check_finite, json_line
from attnkit.data.batching import pad_batch
from attnkit.data.catalogue import find_reader, has_split, read
from attnkit.data.paths import DataError
from attnkit.data.qa_features import QAFeature, best_answer, make_features
from attnkit.data.qa_readers import QAExample
from attnkit.data.settings import DataConfig
from attnkit.data.split import limit_examples, split_examples
from attnkit.data.tokenization import MAX_TEXT_CHARS, Tokenizer
from attnkit.runtime.device import inference, model_device, to_device
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
from attnkit.tasks.metrics import qa_report

__all__ = [
    "DOC_STRIDE",
    "MAX_ANSWER_LEN",
    "MAX_QUESTION_LEN",
    "SPEC",
    "AnswerResult",
    "QAData",
    "QAPredictor",
    "QASpec",
    "QAObjective",
    "encode_examples",
    "prepare_data",
    "qa_settings",
    "read_split",
    "scorer_for",
]

# Defaults of the window settings (BERT's run_squad.py); the recipe's data.doc_stride,
# data.max_question_len and data.max_answer_len (QAData) replace them.
DOC_STRIDE = 128  # context tokens between the starts of consecutive windows
MAX_QUESTION_LEN = 64  # question tokens kept (a longer question is cut)
MAX_ANSWER_LEN = 30  # longest answer, in tokens, that decoding considers

# (input_ids, token_type_ids, start_position, end_position, feature index)
Item = tuple[list[int], list[int], int, int, int]
_NEG = -1e4  # the logit padding positions get in the loss (never a target)


@dataclass
class QAData(DataConfig):
    """qa's data settings: the shared ones and the context windows."""

    doc_stride: int = DOC_STRIDE  # tokens between the starts of consecutive context windows
    max_question_len: int = MAX_QUESTION_LEN  # question tokens kept (longer ones are cut)
    max_answer_len: int = MAX_ANSWER_LEN  # longest answer span (tokens) decoding considers

    def validate(self) -> None:
        super().validate()
        check(
            at_least("data.doc_stride", self.doc_stride, 1),
            at_least("data.max_question_len", self.max_question_len, 1),
            at_least("data.max_answer_len", self.max_answer_len, 1),
        )


def qa_settings(cfg: Recipe) -> tuple[int, int, int]:
    """(doc_stride, max_question_len, max_answer_len) of a recipe: its ``data.*`` values,
    or the module defaults where its data settings have no such field (not ``QAData``)."""
    d = cfg.data
    return (
        int(getattr(d, "doc_stride", DOC_STRIDE)),
        int(getattr(d, "max_question_len", MAX_QUESTION_LEN)),
        int(getattr(d, "max_answer_len", MAX_ANSWER_LEN)),
    )


def scorer_for(cfg: Recipe) -> str:
    """Which official EM/F1 (``attnkit.tasks.metrics.qa_report``): ``korquad`` (character F1)
    for KorQuAD, ``squad`` (word F1) for anything else (the catalogue reader's ``scorer``)."""
    reader = find_reader(cfg.data, "qa")
    return reader.scorer if reader else "squad"


# --------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------
def _split(cfg: Recipe) -> tuple[list[QAExample], list[QAExample]]:
    """(train, validation) questions: the dataset's validation split, else
    ``data.val_fraction`` of the *articles* (title, or the paragraph when untitled) held out,
    so that no paragraph is read in both (``data.limit`` counts questions, as everywhere)."""
    d = cfg.data
    if has_split(d, "qa", "validation"):
        return split_examples(
            read_split(cfg, "train"), d, cfg.training.seed, read_split(cfg, "validation")
        )
    questions = limit_examples(read_split(cfg, "train"), d.limit, cfg.training.seed)
    groups: dict[str, list[QAExample]] = {}
    for ex in questions:
        groups.setdefault(ex.title or ex.context, []).append(ex)
    no_limit = dataclasses.replace(d, limit=None)
    train_g, val_g = split_examples(list(groups.values()), no_limit, cfg.training.seed)
    return [ex for g in train_g for ex in g], [ex for g in val_g for ex in g]


def read_split(cfg: Recipe, split: str) -> list[QAExample]:
    """The questions of one split (train / validation / test; KorQuAD also ``dev``: the
    whole official dev set) of the recipe's dataset (the catalogue's ``qa``)."""
    return read(cfg.data, "qa", split)


def _usable_answer(ex: QAExample) -> tuple[str, int] | None:
    """The answer a training window learns (the first, as run_squad.py / run_qa.py), or
    None when the question has none or its ``answer_start`` does not point at its text."""
    if not ex.answers:
        return None
    text, start = ex.answers[0]
    if not text.strip() or ex.context[start : start + len(text)] != text:
        return None
    return text, start


def encode_examples(
    examples: Sequence[QAExample],
    tokenizer: Tokenizer,
    cfg: Recipe,
    with_answers: bool = True,
) -> list[QAFeature]:
    """Every window (``attnkit.data.qa_features.make_features``) of every example, with
    ``example_index`` = the example's position in ``examples``. ``with_answers``: windows
    get the first answer's token positions (``(0, 0)`` where it is not wholly inside);
    otherwise, or for an example without a usable answer, every window gets ``(0, 0)``."""
    doc_stride, max_question_len, _ = qa_settings(cfg)
    features: list[QAFeature] = []
    for i, ex in enumerate(examples):
        answer = _usable_answer(ex) if with_answers else None
        try:
            features += make_features(
                tokenizer,
                ex.question,
                ex.context,
                answer,
                i,
                max_len=cfg.data.max_len,
                doc_stride=doc_stride,
                max_question_len=max_question_len,
            )
        except (InputError, DataError) as exc:  # e.g. an empty question or context
            raise DataError(f"question {ex.id!r}: {exc}") from None
    return features


def _items(features: Sequence[QAFeature]) -> list[Item]:
    return [
        (f.input_ids, f.token_type_ids, f.start_position, f.end_position, k)
        for k, f in enumerate(features)
    ]


def _outside(features: Sequence[QAFeature], answered: set[int]) -> int:
    """How many answered examples have no window containing their whole answer."""
    inside = {f.example_index for f in features if f.start_position > 0}
    return len(answered - inside)


def prepare_data(
    cfg: Recipe, tokenizer: Tokenizer | None = None, log: Log = log_info
) -> PreparedData:
    """Read the questions, split off validation (``attnkit.data.split``), train (or load)
    the tokenizer, cut every example into windows.

    Training keeps the questions with a usable answer (the others are counted in the log).
    ``extras["val_examples"]`` / ``extras["val_features"]``: the validation questions and
    their windows (the items' last field indexes the windows), which the Trainer task's
    EM / F1 needs; ``run_info["scorer"]``: which official EM / F1."""
    train_ex, val_ex = _split(cfg)
    kept = [ex for ex in train_ex if _usable_answer(ex) is not None]
    skipped = len(train_ex) - len(kept)
    if not kept:
        raise DataError("no training question has an answer whose answer_start points at it")
    if tokenizer is None:
        contexts = list(dict.fromkeys(ex.context for ex in kept))  # each paragraph once
        texts = contexts + [ex.question for ex in kept]
        tokenizer = get_tokenizer(
            cfg.tokenizer, texts, f"{len(contexts):,} contexts and {len(kept):,} questions", log
        )
    train_features = encode_examples(kept, tokenizer, cfg)
    val_ex = [ex for ex in val_ex if ex.answers]  # EM / F1 need ground truths
    val_features = encode_examples(val_ex, tokenizer, cfg)
    outside = _outside(train_features, set(range(len(kept))))
    summary = (
        f"data: {len(kept):,} train questions -> {len(train_features):,} windows "
        f"({len(train_features) / len(kept):.2f} per question), {len(val_ex):,} validation "
        f"questions -> {len(val_features):,} windows; {outside:,} training answers outside "
        f"every window (trained to point at [CLS])"
        + (f"; {skipped:,} training questions without a usable answer skipped" if skipped else "")
        + f"; vocab {tokenizer.vocab_size:,}"
    )
    return PreparedData(
        tokenizer,
        _items(train_features),
        _items(val_features),
        summary,
        run_info={"scorer": scorer_for(cfg)},
        extras={
            "val_examples": val_ex,
            "val_features": val_features,
            "outside": outside,
            "skipped": skipped,
        },
    )


# --------------------------------------------------------------------------------------
# Task (what the Trainer needs)
# --------------------------------------------------------------------------------------
def _span_loss(
    start: Tensor, end: Tensor, batch: dict[str, Tensor], reduction: str = "mean"
) -> Tensor:
    """(CE(start) + CE(end)) / 2, padding positions excluded from the softmax."""
    pad = ~batch["attention_mask"].bool()
    start = start.float().masked_fill(pad, _NEG)
    end = end.float().masked_fill(pad, _NEG)
    return (
        F.cross_entropy(start, batch["start_positions"], reduction=reduction)
        + F.cross_entropy(end, batch["end_positions"], reduction=reduction)
    ) / 2


def _forward(model: nn.Module, batch: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
    """(start logits, end logits), (B, T) each: the model's ``SpanOutput``."""
    out = model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
    return out.start_logits, out.end_logits


class QAObjective:
    """Span cross-entropy; model selection by validation F1.

    ``examples`` / ``features``: the validation questions and their windows, which the
    items' last field (the feature index) refers to. ``evaluate`` groups the windows of
    each question, picks the best span over them (``attnkit.data.qa_features.best_answer``) and
    scores it against all of the question's answers (``scorer``: squad | korquad)."""

    metric = "f1"
    greater_is_better = True

    def __init__(
        self,
        pad_id: int,
        examples: Sequence[QAExample] = (),
        features: Sequence[QAFeature] = (),
        scorer: str = "squad",
        max_answer_len: int = MAX_ANSWER_LEN,
    ) -> None:
        self.pad_id = pad_id
        self.examples = list(examples)
        self.features = list(features)
        self.scorer = scorer
        self.max_answer_len = max_answer_len

    def collate(self, items: Sequence[Item]) -> dict[str, Tensor]:
        ids, mask = pad_batch([it[0] for it in items], self.pad_id)
        types, _ = pad_batch([it[1] for it in items], 0)
        return {
            "input_ids": ids,
            "attention_mask": mask,
            "token_type_ids": types,
            "start_positions": torch.tensor([it[2] for it in items]),
            "end_positions": torch.tensor([it[3] for it in items]),
            "index": torch.tensor([it[4] for it in items]),
        }

    def loss(self, model: nn.Module, batch: dict[str, Tensor]) -> tuple[Tensor, int]:
        start, end = _forward(model, batch)
        return _span_loss(start, end, batch), int(batch["attention_mask"].sum())

    @torch.no_grad()
    def evaluate(self, model: nn.Module, batches: Iterable[dict[str, Tensor]]) -> dict[str, Any]:
        """loss (mean over windows), exact_match and f1 (percent, over questions), count
        (questions), num_windows."""
        total, n = 0.0, 0
        logits: dict[int, tuple[Tensor, Tensor]] = {}
        for batch in batches:
            start, end = _forward(model, batch)
            total += _span_loss(start, end, batch, reduction="sum").item()
            n += len(batch["index"])
            lengths = batch["attention_mask"].sum(1).tolist()
            for k, s, e, length in zip(
                batch["index"].tolist(), start.float().cpu(), end.float().cpu(), lengths,
                strict=True,
            ):  # fmt: skip
                logits[k] = (s[:length], e[:length])
        report: dict[str, Any] = {"loss": total / max(n, 1)}
        report.update(self.score(logits))
        report["num_windows"] = n
        return report

    def score(self, logits: dict[int, tuple[Tensor, Tensor]]) -> dict[str, Any]:
        """EM / F1 of the best span per question, from the start / end logits of the
        windows (feature index -> logits); a question none of whose windows was scored
        counts as unanswered (0)."""
        by_example: dict[int, list[int]] = defaultdict(list)
        for k in logits:
            by_example[self.features[k].example_index].append(k)
        predictions = {}
        for i, ks in by_example.items():
            ks.sort()
            answer = best_answer(
                [self.features[k] for k in ks],
                [logits[k][0] for k in ks],
                [logits[k][1] for k in ks],
                self.examples[i].context,
                self.max_answer_len,
            )
            predictions[i] = answer.text
        references = {i: [t for t, _ in ex.answers] for i, ex in enumerate(self.examples)}
        return qa_report(predictions, references, self.scorer)


# --------------------------------------------------------------------------------------
# Prediction
# --------------------------------------------------------------------------------------
@dataclass
class AnswerResult:
    """The answer to one question: ``text == context[start:end]`` (character offsets into
    the context given), ``score`` = start logit + end logit of that span (higher = more
    confident; not a probability). ``question_truncated``: the question had more than
    ``max_question_len`` tokens and the model read only its beginning."""

    question: str
    text: str
    start: int
    end: int
    score: float
    question_truncated: bool = False

    def format(self) -> str:
        """``answer<TAB>score<TAB>question``: what ``attnkit answer`` prints (one line: tabs,
        line breaks and other control characters are escaped)."""
        return f"{one_line(self.text)}\t{self.score:.4f}\t{one_line(self.question)}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "text": self.text,
            "start": self.start,
            "end": self.end,
            "score": self.score,
            "question_truncated": self.question_truncated,
        }


def _strip_span(context: str, start: int, end: int) -> tuple[int, int]:
    """The span without leading / trailing whitespace (a byte-level BPE token's span
    includes the space before it)."""
    while start < end and context[start].isspace():
        start += 1
    while end > start and context[end - 1].isspace():
        end -= 1
    return start, end


class QAPredictor(Predictor):
    """What ``attnkit.load(run)`` returns for a ``task: qa`` run.

    Extractive QA always answers with the best span of the context: SQuAD v1 / KorQuAD 1.0
    have no "no answer", so neither does the model. When the context may not contain the
    answer, threshold ``AnswerResult.score`` (the span's start + end logit) on held-out
    data. Contexts of any length are read in overlapping windows (nothing is cut); a
    question longer than ``max_question_len`` tokens is cut to its first
    ``max_question_len`` (``question_truncated`` says so)."""

    task = "qa"
    capabilities = frozenset({"answer", "answer_batch"})

    def __init__(
        self,
        model: nn.Module,
        tokenizer: Tokenizer,
        config: Recipe,
        run_dir: Path | None = None,
        scorer: str | None = None,
    ) -> None:
        self.model = model.eval()
        self.device = model_device(model)  # inputs go where the weights are
        self.tokenizer = tokenizer
        self.config = config
        self.run_dir = run_dir
        self.scorer = scorer or scorer_for(config)
        self.max_len = config.data.max_len
        self.doc_stride, self.max_question_len, self.max_answer_len = qa_settings(config)

    # ------------------------------------------------------------------ model
    @inference
    def window_logits(
        self, features: Sequence[QAFeature], batch_size: int = 32
    ) -> list[tuple[Tensor, Tensor]]:
        """(start logits (T,), end logits (T,)) of each window, in order (CPU, float)."""
        task = QAObjective(self.tokenizer.pad_id)
        out: list[tuple[Tensor, Tensor] | None] = [None] * len(features)
        order = sorted(range(len(features)), key=lambda k: len(features[k].input_ids))
        items = _items(features)
        self.model.eval()
        for lo in range(0, len(order), batch_size):
            batch = to_device(task.collate([items[k] for k in order[lo : lo + batch_size]]),
                              self.device)  # fmt: skip
            start, end = _forward(self.model, batch)
            check_finite(start, allow_neg_inf=True)  # NaN weights: an error, not a NaN score
            check_finite(end, allow_neg_inf=True)
            for row, k in enumerate(batch["index"].tolist()):
                length = len(features[k].input_ids)
                out[k] = (start[row, :length].float().cpu(), end[row, :length].float().cpu())
        return out  # type: ignore[return-value]  # every window was scored

    def _check_len(self, max_answer_len: int | None) -> int:
        n = self.max_answer_len if max_answer_len is None else max_answer_len
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise InputError(f"max_answer_len must be an integer >= 1, got {n!r}")
        return n

    # ------------------------------------------------------------------ answering
    def answer(
        self, question: str, context: str, max_answer_len: int | None = None
    ) -> AnswerResult:
        """The best answer span of ``context`` for ``question`` (see the class docstring).

        Raises:
            InputError: an empty (or token-less) question or context, or a
                ``max_answer_len`` < 1.
        """
        return self.answer_batch([(question, context)], max_answer_len=max_answer_len)[0]

    def answer_batch(
        self,
        pairs: Sequence[tuple[str, str]],
        max_answer_len: int | None = None,
        batch_size: int = 32,
    ) -> list[AnswerResult]:
        """``answer`` for many ``(question, context)`` pairs, their windows batched."""
        n_answer = self._check_len(max_answer_len)
        if isinstance(pairs, tuple) and len(pairs) == 2 and all(isinstance(p, str) for p in pairs):
            pairs = [pairs]  # one (question, context) pair
        pairs = list(pairs)
        features: list[QAFeature] = []
        truncated: list[bool] = []
        for i, pair in enumerate(pairs):
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise InputError(
                    f"pair {i}: expected (question, context), got {type(pair).__name__}"
                )
            question, context = pair
            for name, text in (("question", question), ("context", context)):
                if not isinstance(text, str):
                    raise InputError(f"pair {i}: the {name} must be a string, got "
                                     f"{type(text).__name__}")  # fmt: skip
            try:
                features += make_features(
                    self.tokenizer, question, context, None, i, self.max_len,
                    self.doc_stride, self.max_question_len,
                )  # fmt: skip
            except InputError as exc:
                raise InputError(f"pair {i}: {exc}" if len(pairs) > 1 else str(exc)) from None
            _, question_cut = self.tokenizer.encode(
                question, max_len=self.max_question_len, return_truncated=True
            )
            truncated.append(question_cut)
            if truncated[-1]:
                warnings.warn(
                    f"question {i + 1} is longer than max_question_len={self.max_question_len} "
                    "tokens; only its beginning was read",
                    stacklevel=2,
                )
            if len(context) > MAX_TEXT_CHARS:  # make_features reads its beginning
                warnings.warn(
                    f"context {i + 1} is longer than {MAX_TEXT_CHARS:,} characters; only its "
                    "beginning was read",
                    stacklevel=2,
                )
        logits = self.window_logits(features, batch_size)
        by_example: dict[int, list[int]] = defaultdict(list)
        for k, f in enumerate(features):
            by_example[f.example_index].append(k)
        results = []
        for i, (question, context) in enumerate(pairs):
            ks = by_example[i]
            best = best_answer(
                [features[k] for k in ks],
                [logits[k][0] for k in ks],
                [logits[k][1] for k in ks],
                context,
                n_answer,
            )
            start, end = _strip_span(context, best.start, best.end)
            results.append(
                AnswerResult(question, context[start:end], start, end, best.score, truncated[i])
            )
        return results

    def to_json(self, results: Sequence[AnswerResult]) -> str:
        """One JSON object per result, one per line (UTF-8, not ASCII-escaped)."""
        return "\n".join(json_line(r.to_dict()) for r in results)

    # ------------------------------------------------------------------ evaluation
    def evaluate_examples(
        self,
        examples: Sequence[QAExample],
        batch_size: int = 32,
        max_answer_len: int | None = None,
        scorer: str | None = None,
    ) -> dict[str, Any]:
        """EM / F1 (percent, the official scripts') and loss over labelled questions
        (those without answers are left out and counted under ``unanswerable``)."""
        labelled = [ex for ex in examples if ex.answers]
        if not labelled:
            raise RunError("no question of this split has an answer to compare with")
        features = encode_examples(labelled, self.tokenizer, self.config)
        task = QAObjective(
            self.tokenizer.pad_id,
            labelled,
            features,
            scorer or self.scorer,
            self._check_len(max_answer_len),
        )
        items = _items(features)
        order = sorted(range(len(items)), key=lambda k: len(items[k][0]))
        batches = (
            to_device(task.collate([items[k] for k in order[lo : lo + batch_size]]), self.device)
            for lo in range(0, len(order), batch_size)
        )
        self.model.eval()
        report = task.evaluate(self.model, batches)
        report["unanswerable"] = len(examples) - len(labelled)
        report["scorer"] = task.scorer
        return report


# --------------------------------------------------------------------------------------
# The task
# --------------------------------------------------------------------------------------
class QASpec(TaskSpec):
    """Extractive question answering: KorQuAD 1.0 or SQuAD-v1 JSON files, with a BERT
    (``model.arch: bert-qa``), from scratch or from a pretrained encoder
    (``model.init_from``). Model selection by validation F1."""

    name = "qa"
    endpoint = "answer"
    onnx_outputs = ("start_logits", "end_logits")  # (B, T) each
    model_family = "qa"
    default_arch = "bert-qa"
    data_settings = QAData
    reads = ("qa",)

    def validate(self, cfg: Recipe) -> None:
        d = cfg.data
        doc_stride, max_question_len, max_answer_len = qa_settings(cfg)
        for key, value in (
            ("doc_stride", doc_stride),
            ("max_question_len", max_question_len),
            ("max_answer_len", max_answer_len),
        ):
            require(value >= 1, f"data.{key} must be >= 1, got {value}")
        require(
            d.max_len > max_question_len + 3,
            f"data.max_len={d.max_len} must exceed data.max_question_len={max_question_len} "
            "+ 3 special tokens, so that every window holds context",
        )

    def prepare_data(self, cfg: Recipe, tokenizer: Tokenizer | None, log: Log) -> PreparedData:
        return prepare_data(cfg, tokenizer, log)

    def objective(self, cfg: Recipe, data: PreparedData) -> QAObjective:
        return QAObjective(
            data.tokenizer.pad_id,
            data.extras["val_examples"],
            data.extras["val_features"],
            data.run_info["scorer"],
            qa_settings(cfg)[2],
        )

    def predictor(
        self,
        model: nn.Module,
        tokenizer: Tokenizer,
        cfg: Recipe,
        run: RunDir,
        saved: dict[str, Any],
    ) -> QAPredictor:
        scorer = saved.get("scorer", scorer_for(cfg))
        if scorer not in ("squad", "korquad"):
            raise RunError(f"{run.config_path}: scorer must be squad or korquad, got {scorer!r}")
        return QAPredictor(model, tokenizer, cfg, run.path, scorer)

    def evaluate(
        self,
        predictor: Any,
        split: str,
        data_dir: str | None = None,
        batch_size: int = 128,
        max_answer_len: int | None = None,
        scorer: str | None = None,
        **options: Any,
    ) -> dict[str, Any]:
        """Exact match and F1 (percent, the official scripts': ``scorer`` squad | korquad,
        default the run's), the loss over windows, ``count`` (questions scored) and
        ``num_windows``."""
        if scorer is not None and scorer not in ("squad", "korquad"):
            raise InputError(f"scorer must be squad or korquad, got {scorer!r}")
        cfg = with_data_dir(predictor.config, data_dir)  # a copy: the predictor's is kept
        examples = read_split(cfg, split)
        report = predictor.evaluate_examples(examples, batch_size, max_answer_len, scorer)
        report["split"] = split
        return report


SPEC = QASpec()  # task qa (attnkit.tasks.registry.BUILTIN)

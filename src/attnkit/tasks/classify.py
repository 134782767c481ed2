"""Text classification (sentiment analysis): data -> token ids, loss, metrics, predictions.

The task owns everything that depends on data: reading the dataset, training or loading the
tokenizer, mapping labels to class ids, batching, the loss and the metrics. The model only
sees tensors.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnkit.core.config import check, require, short_repr
from attnkit.core.errors import InputError, check_finite, json_line
from attnkit.data.batching import pad_batch
from attnkit.data.catalogue import find_kind, find_reader, has_split, read
from attnkit.data.paths import DataError
from attnkit.data.pseudo_label_files import extra_training_examples
from attnkit.data.readers import Example, Examples
from attnkit.data.segments import encode_pairs
from attnkit.data.settings import DataConfig
from attnkit.data.split import split_examples
from attnkit.data.tokenization import TRUNCATION, Tokenizer
from attnkit.models import ClassifierOutput
from attnkit.nn.capture import capture
from attnkit.runtime import viz
from attnkit.runtime.device import Precision, inference, model_device
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
    open_pretrained_source,
    with_data_dir,
)
from attnkit.tasks.metrics import accuracy, classification_report

__all__ = [
    "SPEC",
    "ClassificationObjective",
    "ClassifyData",
    "ClassifierPredictor",
    "ClassifySpec",
    "EnsemblePredictor",
    "Prediction",
    "fit_temperature",
    "naive_bayes_batches",
    "prepare_data",
]

# (token ids, target), or for a BERT (token ids, target, segment ids); the target is a class
# id, or for soft pseudo-labels (data.extra_train) a distribution over the classes
Target = int | tuple[float, ...]
Item = tuple[list[int], Target] | tuple[list[int], Target, list[int]]
# what it reads (attnkit.data.kinds): labelled texts, or sentence pairs (the model reads
# [CLS] A [SEP] B [SEP]): KLUE-NLI, or the user's table with data.pair_column
READS = ("labelled", "pairs")


@dataclass
class ClassifyData(DataConfig):
    """classify's data settings: the shared ones, the columns of the user's table and more
    training examples."""

    text_column: str = "text"  # data.name file: the column of the texts
    pair_column: str | None = None  # data.name file: a second sentence (pair tasks)
    label_column: str = "label"
    extra_train: str | None = None  # more labelled texts (e.g. pseudo-labels) for training
    # only, added after the validation split; texts of the dataset's splits dropped
    truncation: str = "head"  # which part of a longer text is kept: head | tail | head+tail

    def validate(self) -> None:
        super().validate()
        check((self.truncation in TRUNCATION, f"data.truncation must be {'|'.join(TRUNCATION)}"))


def _sort_labels(values: Iterable[Any]) -> list[str]:
    labels = {str(v).strip() for v in values}
    if all(v.lstrip("-").isdigit() for v in labels):
        return sorted(labels, key=int)
    return sorted(labels)


def data_kind(cfg: Recipe) -> str:
    """What the recipe's examples are read as: ``pairs`` for a file with
    ``data.pair_column`` or a dataset of sentence pairs (KLUE-NLI), else ``labelled``."""
    if cfg.data.pair_column:
        return "pairs"
    return find_kind(cfg.data, READS) or "labelled"


def read_split(cfg: Recipe, split: str) -> Examples:
    """Read one split (train / validation / test) of the recipe's dataset."""
    return read(cfg.data, data_kind(cfg), split)


def has_labelled_split(cfg: Recipe, split: str) -> bool:
    """Whether the recipe's dataset has ``split`` of its own (else validation is held out)."""
    return has_split(cfg.data, data_kind(cfg), split)


def fixed_labels(cfg: Recipe) -> list[str]:
    """The label names, in id order, of a dataset that fixes them (its files hold the ids:
    NSMC, IMDB); [] where the labels are the names found in the data."""
    reader = find_reader(cfg.data, data_kind(cfg))
    return list(reader.labels) if reader else []


def is_pair_task(cfg: Recipe) -> bool:
    """True if the recipe's examples are sentence pairs (KLUE-NLI, or a file with
    ``data.pair_column``)."""
    return data_kind(cfg) == "pairs"


def encode_texts(
    tokenizer: Tokenizer, texts: list[str], cfg: Recipe, texts_b: list[str] | None = None
) -> tuple[list[list[int]], list[list[int]] | None, list[bool]]:
    """(token ids, segment ids or None, truncated) of ``texts`` as the classifier sees them.

    A model that reads pairs (``READS_PAIRS``: a BERT) reads ``[CLS] A [SEP]`` or, for
    pairs (``texts_b``), ``[CLS] A [SEP] B [SEP]`` with segment ids
    (``attnkit.data.segments``); other models read the text alone
    (``[CLS]`` first for cls pooling), after the model config's ``prefix_ids`` (a GPT
    pretrained on reviews: the [EOS] it read each review after). Texts are cut to
    ``data.max_len`` tokens, those included, keeping ``data.truncation`` (pairs: longest
    first)."""
    if cfg.model.READS_PAIRS:
        return encode_pairs(tokenizer, texts, texts_b, cfg.data.max_len, cfg.data.truncation)
    if texts_b is not None:
        raise InputError(f"sentence pairs need a BERT (model.arch: bert-classifier), not "
                         f"{cfg.model.arch}")  # fmt: skip
    prefix = list(cfg.model.prefix_ids)
    ids, cut = tokenizer.encode_batch(
        texts,
        max_len=cfg.data.max_len - len(prefix),
        add_cls=cfg.model.needs_cls,
        keep=cfg.data.truncation,
        return_truncated=True,
    )
    if prefix:
        ids = [prefix + row for row in ids]
    return ids, None, cut


def classifier_output(model: nn.Module, batch: dict[str, Tensor]) -> ClassifierOutput:
    """Any classifier (or its ONNX export) on a collated batch: ``ClassifierOutput`` with
    logits (B, num_classes). The batch holds ``token_type_ids`` exactly when the model
    reads segment ids (``encode_texts``)."""
    types = {"token_type_ids": batch["token_type_ids"]} if "token_type_ids" in batch else {}
    return model(batch["input_ids"], batch["attention_mask"], **types)


def prepare_data(
    cfg: Recipe, tokenizer: Tokenizer | None = None, log: Log = log_info
) -> PreparedData:
    """Read the dataset, split off validation, train (or load) the tokenizer, encode once.
    ``run_info["labels"]``: the class names; ``extras["truncated"]``: training texts cut."""
    d = cfg.data
    train_ex, val_ex = split_examples(
        list(read_split(cfg, "train")),
        d,
        cfg.training.seed,
        validation=list(read_split(cfg, "validation"))
        if has_labelled_split(cfg, "validation")
        else None,
        key=lambda ex: str(ex.label).strip(),
    )
    if is_pair_task(cfg) and not cfg.model.READS_PAIRS:
        raise DataError(
            f"{'data.pair_column' if cfg.data.pair_column else cfg.data.name}: sentence "
            f"pairs need a BERT (model.arch: bert-classifier), not {cfg.model.arch}"
        )
    classes = {str(ex.label).strip() for ex in train_ex}
    if len(classes) == 1:  # (before the tokenizer is trained or anything is written)
        raise DataError(
            f"the training data has only one class ({short_repr(classes.pop())}); "
            "a classifier needs at least two"
        )
    labels = fixed_labels(cfg) or _sort_labels(ex.label for ex in train_ex)
    to_id = label_ids(cfg, labels)
    extra: list[Example] = []
    soft = None
    if d.extra_train:  # (after the split: validation keeps only the dataset's own texts)
        test = read_split(cfg, "test") if has_labelled_split(cfg, "test") else []
        extra, soft, dropped = extra_training_examples(d, labels, to_id, [*train_ex, *val_ex], test)
        log(
            f"data.extra_train: {len(extra):,} more training examples from {d.extra_train}"
            + (" with soft targets" if soft is not None else "")
            + f" ({dropped:,} texts dropped: already in the dataset or repeated)"
        )
    if tokenizer is None:
        pairs = is_pair_task(cfg)  # both sentences of a pair teach the tokenizer
        texts = (t for ex in train_ex for t in ((ex.text, ex.text_b) if pairs else (ex.text,)))
        tokenizer = get_tokenizer(cfg.tokenizer, texts, f"{len(train_ex):,} texts", log)
    train, truncated = encode_examples([*train_ex, *extra], tokenizer, cfg, to_id, "train")
    if soft is not None:  # the extra examples learn the teacher's distributions
        first = len(train_ex)
        train[first:] = [(it[0], p, *it[2:]) for it, p in zip(train[first:], soft, strict=True)]
    validation, _ = encode_examples(val_ex, tokenizer, cfg, to_id, "validation")
    summary = (
        f"data: {len(train):,} train"
        + (f" ({len(extra):,} of them data.extra_train)" if extra else "")
        + f" / {len(validation):,} validation examples, "
        f"{len(labels)} classes, vocab {tokenizer.vocab_size:,}"
        + (f", {truncated:,} truncated to max_len={d.max_len}" if truncated else "")
    )
    run_info: dict[str, Any] = {"labels": labels, "pairs": is_pair_task(cfg)}
    if d.extra_train:
        run_info["extra_train_examples"] = len(extra)
    return PreparedData(tokenizer, train, validation, summary, run_info, {"truncated": truncated})


def label_ids(cfg: Recipe, labels: Sequence[str]) -> dict[str, int]:
    """How a label as read from the data maps to a class id."""
    if fixed_labels(cfg):  # integer labels in the file, names for people
        return {str(i): i for i in range(len(labels))}
    return {name: i for i, name in enumerate(labels)}


def encode_examples(
    examples: Sequence, tokenizer: Tokenizer, cfg: Recipe, to_id: dict[str, int], split: str
) -> tuple[list[Item], int]:
    """Examples -> (token ids, class id) items, and how many texts were truncated."""
    targets = []
    for ex in examples:
        key = str(ex.label).strip()
        if key not in to_id:
            raise DataError(f"{split} label {key!r} never appears in the training data")
        targets.append(to_id[key])
    texts_b = [ex.text_b for ex in examples] if is_pair_task(cfg) else None
    ids, types, cut = encode_texts(tokenizer, [ex.text for ex in examples], cfg, texts_b)
    if types is None:
        return list(zip(ids, targets, strict=True)), sum(cut)
    return list(zip(ids, targets, types, strict=True)), sum(cut)


def naive_bayes_batches(
    items: Sequence[Item], pad_id: int, batch_size: int = 256
) -> Iterator[tuple[Tensor, Tensor, Tensor]]:
    """(input_ids (B, T), attention_mask (B, T), labels (B,)) over all training items, for
    a model's ``fit_from_data`` (the n-gram model's Naive Bayes counts; in length order:
    each batch pads only to its own longest)."""
    order = sorted(range(len(items)), key=lambda i: len(items[i][0]))
    for start in range(0, len(order), batch_size):
        rows = [items[i] for i in order[start : start + batch_size]]
        ids, mask = pad_batch([ids for ids, _ in rows], pad_id)
        targets = [
            y if isinstance(y, int) else max(range(len(y)), key=y.__getitem__) for _, y in rows
        ]
        yield ids, mask, torch.tensor(targets)  # (soft targets: their likeliest class)


def fit_temperature(logits: Tensor, labels: Tensor, low: float = 0.05, high: float = 20.0) -> float:
    """Temperature scaling (Guo et al. 2017, "On Calibration of Modern Neural Networks"):
    the T in [low, high] that minimises the validation NLL of softmax(logits / T).

    logits (N, C), labels (N,). The NLL is convex in 1/T (the scaled logits are linear in
    it), hence unimodal in log T: a golden-section search over log T finds the minimum.
    T > 1 softens an over-confident model, T < 1 sharpens an under-confident one; the
    argmax, hence accuracy, never changes. A validation set the model gets all right pushes
    T to ``low``."""
    z = logits.detach().double()

    def nll(log_t: float) -> float:
        return F.cross_entropy(z / math.exp(log_t), labels).item()

    a, b = math.log(low), math.log(high)
    ratio = (math.sqrt(5) - 1) / 2
    c, d = b - ratio * (b - a), a + ratio * (b - a)
    fc, fd = nll(c), nll(d)
    for _ in range(60):  # the bracket shrinks by 0.618 per step: 60 steps -> ~1e-12
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - ratio * (b - a)
            fc = nll(c)
        else:
            a, c, fc = c, d, fd
            d = a + ratio * (b - a)
            fd = nll(d)
    return math.exp((a + b) / 2)


class ClassificationObjective:
    """Cross-entropy over classes; model selection by validation accuracy."""

    metric = "accuracy"
    greater_is_better = True

    def __init__(self, labels: Sequence[str], pad_id: int, label_smoothing: float = 0.0) -> None:
        self.labels = list(labels)
        self.pad_id = pad_id
        self.label_smoothing = label_smoothing

    def collate(self, items: Sequence[Item]) -> dict[str, Tensor]:
        """``labels``: (B,) class ids, or (B, num_classes) target distributions when a
        soft target is in the batch (class ids then become one-hot rows)."""
        ids, mask = pad_batch([it[0] for it in items], self.pad_id)
        targets = [it[1] for it in items]
        if any(isinstance(t, tuple) for t in targets):
            eye = torch.eye(len(self.labels))
            labels = torch.stack(
                [torch.tensor(t) if isinstance(t, tuple) else eye[t] for t in targets]
            )
        else:
            labels = torch.tensor(targets)
        batch = {"input_ids": ids, "attention_mask": mask, "labels": labels}
        if len(items[0]) == 3:  # a BERT's segment ids
            batch["token_type_ids"], _ = pad_batch([it[2] for it in items], 0)
        return batch

    def loss(self, model: nn.Module, batch: dict[str, Tensor]) -> tuple[Tensor, int]:
        """Cross-entropy -sum_c q_c log p_c with q one-hot (a class id) or a soft target
        (knowledge distillation from a teacher's probabilities)."""
        logits = classifier_output(model, batch).logits
        loss = F.cross_entropy(
            logits.float(), batch["labels"], label_smoothing=self.label_smoothing
        )
        return loss, int(batch["attention_mask"].sum())

    @torch.no_grad()
    def evaluate(self, model: nn.Module, batches: Iterable[dict[str, Tensor]]) -> dict[str, Any]:
        total_loss, n, y_true, y_pred = 0.0, 0, [], []
        for batch in batches:
            logits = classifier_output(model, batch).logits.float()
            total_loss += F.cross_entropy(logits, batch["labels"], reduction="sum").item()
            n += len(batch["labels"])
            y_true += batch["labels"].tolist()
            y_pred += logits.argmax(-1).tolist()
        report = classification_report(y_true, y_pred, self.labels)
        report["loss"] = total_loss / max(n, 1)
        return report


# --------------------------------------------------------------------------------------
# Prediction
# --------------------------------------------------------------------------------------
@dataclass
class Prediction:
    text: str
    label: str
    probability: float
    probabilities: dict[str, float]
    truncated: bool = False

    def format(self) -> str:
        """``label<TAB>probability<TAB>text``: what ``attnkit predict`` prints (one line:
        tabs, line breaks and other control characters in the text are escaped)."""
        return f"{one_line(self.label)}\t{self.probability:.4f}\t{one_line(self.text)}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "label": self.label,
            "probability": self.probability,
            "probabilities": self.probabilities,
            "truncated": self.truncated,
        }


def _predictions(
    texts: Sequence[str], probs: Tensor, cut: Sequence[bool], labels: Sequence[str]
) -> list[Prediction]:
    """One ``Prediction`` per text from class probabilities (N, num_classes)."""
    out: list[Prediction] = []
    for text, p, was_cut in zip(texts, probs.tolist(), cut, strict=True):
        k = max(range(len(p)), key=p.__getitem__)
        out.append(Prediction(text, labels[k], p[k], dict(zip(labels, p, strict=True)), was_cut))
    return out


class ClassifierPredictor(Predictor):
    """What ``attnkit.load(run)`` returns for a classification run."""

    task = "classify"
    capabilities = frozenset(
        {"predict", "explain", "attention", "ngram_contributions", "logits", "probabilities",
         "sentence_pairs"}
    )  # fmt: skip

    def __init__(
        self,
        model: nn.Module,
        tokenizer: Tokenizer,
        config: Recipe,
        labels: Sequence[str],
        run_dir: Path | None = None,
        temperature: float = 1.0,
        pairs: bool = False,
    ) -> None:
        self.model = model.eval()
        self.device = model_device(model)  # inputs go where the weights are
        self.tokenizer = tokenizer
        self.config = config
        self.labels = list(labels)
        self.run_dir = run_dir
        self.temperature = temperature  # probabilities = softmax(logits / temperature)
        self.pairs = pairs  # trained on sentence pairs: every input needs its second sentence

    def encode(
        self, texts: Sequence[str], pairs: Sequence[str] | None = None
    ) -> tuple[list[list[int]], list[list[int]] | None, list[bool]]:
        """(token ids, segment ids or None, truncated) of the inputs, checked."""
        if self.pairs and pairs is None:
            raise InputError(
                "this model classifies sentence pairs: give each text its second sentence "
                "(attnkit predict RUN TEXT --pair SECOND; Python: predict(texts, pairs=...))"
            )
        if pairs is not None and not self.pairs:
            raise InputError("this model classifies single texts; it was not trained on pairs")
        if pairs is not None and len(pairs) != len(texts):
            raise InputError(f"{len(texts)} texts but {len(pairs)} second sentences")
        for i, text in enumerate([*texts, *(pairs or [])]):
            if not isinstance(text, str) or not text.strip():
                raise InputError(f"input {i % len(texts) + 1} is empty or whitespace only")
        ids, types, cut = encode_texts(
            self.tokenizer, list(texts), self.config, None if pairs is None else list(pairs)
        )
        d = self.config.data
        for i, was_cut in enumerate(cut):
            if was_cut:
                warnings.warn(
                    f"input {i + 1} is longer than max_len={d.max_len} tokens; "
                    f"it was truncated (kept: {d.truncation})",
                    stacklevel=3,
                )
        return ids, types, cut

    @inference
    def predict(
        self,
        texts: Sequence[str] | str,
        batch_size: int = 64,
        pairs: Sequence[str] | str | None = None,
    ) -> list[Prediction]:
        """Label and probabilities for each text (a single string is accepted too); a model
        trained on sentence pairs needs ``pairs``, each text's second sentence."""
        if isinstance(texts, str):
            texts = [texts]
        if isinstance(pairs, str):
            pairs = [pairs]
        ids, types, cut = self.encode(texts, pairs)
        probs = self.probabilities(ids, batch_size, types)
        shown = (
            texts
            if pairs is None
            else [f"{a} [SEP] {b}" for a, b in zip(texts, pairs, strict=True)]
        )
        return _predictions(shown, probs, cut, self.labels)

    @inference
    def logits(
        self,
        ids: Sequence[Sequence[int]],
        batch_size: int = 64,
        types: Sequence[Sequence[int]] | None = None,
    ) -> Tensor:
        """Class logits (N, num_classes) for N encoded texts (``types``: a BERT's segment
        ids), in their order.

        Texts are batched in order of length, so a batch is padded only to its own longest
        text (NSMC's 50K test reviews, batch 64: 24 s instead of 86 s in input order)."""
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        out = torch.empty(len(ids), len(self.labels))
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            input_ids, mask = pad_batch([ids[i] for i in rows], self.tokenizer.pad_id)
            batch = {"input_ids": input_ids.to(self.device), "attention_mask": mask.to(self.device)}
            if types is not None:
                batch["token_type_ids"] = pad_batch([types[i] for i in rows], 0)[0].to(self.device)
            out[rows] = classifier_output(self.model, batch).logits.float().cpu()
        check_finite(out)  # NaN weights: an error, never a NaN probability
        return out

    def probabilities(
        self,
        ids: Sequence[Sequence[int]],
        batch_size: int = 64,
        types: Sequence[Sequence[int]] | None = None,
    ) -> Tensor:
        """Class probabilities (N, num_classes) for N encoded texts: softmax(logits / T),
        with the run's fitted temperature T (``attnkit calibrate``; 1 if never fitted)."""
        return (self.logits(ids, batch_size, types) / self.temperature).softmax(-1)

    @inference
    def ngram_contributions(self, text: str) -> list[tuple[str, float]]:
        """A bag-of-n-grams model's exact explanation of one text: (n-gram, how much it
        raises the predicted class's logit above the mean of all logits), largest effect
        first. The values plus the bias sum to that logit margin."""
        if not self.model.explains_by_contributions:
            raise InputError("n-gram contributions exist only for arch ngram")
        ids, _, _ = self.encode([text])
        parts = self.model.contributions(torch.tensor(ids[0], device=self.device))
        logits = sum((v for _, _, v in parts), self.model.bias.detach())
        k = int(logits.argmax())  # the predicted class
        out = [
            (self.tokenizer.decode(ids[0][start : start + n]), float(v[k] - v.mean()))
            for start, n, v in parts
        ]
        return sorted(out, key=lambda gv: -abs(gv[1]))

    @inference
    def attention(self, text: str) -> tuple[list[str], list[Tensor]]:
        """(tokens, per-layer self-attention weights (H, T, T)) for one text."""
        if not self.model.returns_attention:
            raise InputError("attention maps exist only for Transformer models (arch: transformer)")
        if self.pairs:
            raise InputError("attention maps are drawn for single texts, not sentence pairs")
        ids, types, _ = self.encode([text])
        input_ids, mask = pad_batch(ids, self.tokenizer.pad_id)
        batch = {"input_ids": input_ids.to(self.device), "attention_mask": mask.to(self.device)}
        if types is not None:
            batch["token_type_ids"] = torch.tensor(types, device=self.device)
        with capture(self.model) as rec:  # the attention weights, as the explorer reads them
            classifier_output(self.model, batch)
        weights = rec.attention_weights()  # per layer (1, H, T, T)
        tokens = [self.tokenizer.id_to_token(i) or "?" for i in ids[0]]
        return tokens, [w[0].float().cpu() for w in weights]

    def explain(
        self, text: str, path: str | Path | None = None, layer: int = -1, head: int | None = None
    ) -> Any:
        """The self-attention heatmap of ``layer`` (``head`` or the mean over heads); for a
        bag-of-n-grams model (no attention), the bar chart of ``ngram_contributions``. Saved
        to ``path`` (returns the path), or without one returned as a figure (shown inline in
        a notebook; ``attnkit.runtime.viz``)."""
        if self.model.explains_by_contributions:
            pred = self.predict([text])[0]
            top = self.ngram_contributions(text)[:20]
            title = f"n-grams for {pred.label} ({pred.probability:.2f}) vs the other classes"
            return viz.plot_contributions([g for g, _ in top], [v for _, v in top], path, title)

        tokens, weights = self.attention(text)
        n_layers = len(weights)
        if not -n_layers <= layer < n_layers:
            raise InputError(f"layer must be in [0, {n_layers - 1}] (or negative), got {layer}")
        w = weights[layer]
        n_heads = w.size(0)
        if head is not None and not 0 <= head < n_heads:
            raise InputError(f"head must be in [0, {n_heads - 1}], got {head}")
        matrix = w[head] if head is not None else w.mean(0)
        pred = self.predict([text])[0]
        which = f"head {head}" if head is not None else f"mean of {n_heads} heads"
        title = f"layer {layer % n_layers}, {which} -> {pred.label} ({pred.probability:.2f})"
        return viz.plot_attention(matrix.numpy(), tokens, tokens, path, title=title)

    def to_json(self, predictions: Sequence[Prediction]) -> str:
        return "\n".join(json_line(p.to_dict()) for p in predictions)


class EnsemblePredictor(Predictor):
    """Several classifiers voting by their average class probabilities (``attnkit.load``
    given several runs, ``attnkit evaluate RUN RUN ...``, ``attnkit predict --ensemble``).

        p(y | x) = 1/M * sum_m p_m(y | x)      each member m reads x with its own tokenizer

    Models with different inductive biases make different mistakes (a Transformer and a
    BiGRU on NSMC: benchmarks/notes-sentiment.md), so their average is often more accurate
    than either. Each p_m uses its run's fitted temperature, so a member that is more
    confident than it is accurate does not outvote a better calibrated one (IMDB: 0.8969
    uncalibrated, 0.9063 calibrated). The members must have the same labels in the same order.
    It has no model, tokenizer or device of its own: ``members`` are the runs' predictors
    (each with its own), its ``precision`` the first member's.
    """

    task = "classify"
    capabilities = frozenset({"predict", "explain"})

    def __init__(self, members: Sequence[ClassifierPredictor]) -> None:
        if len(members) < 2:
            raise InputError("an ensemble needs at least two classify runs")
        labels = members[0].labels
        if any(m.pairs for m in members):
            raise InputError("ensembles are of single-text classifiers, not sentence-pair ones")
        for m in members[1:]:
            if m.labels != labels:
                raise InputError(
                    f"cannot ensemble runs with different labels: {m.run_dir} has {m.labels}, "
                    f"{members[0].run_dir} has {labels}"
                )
        self._members = list(members)
        self.labels = list(labels)
        self.config = members[0].config  # what an evaluation reads its data with
        self.run_dir = members[0].run_dir

    @property
    def members(self) -> list[ClassifierPredictor]:
        """The classify runs' predictors, in the order given."""
        return self._members

    @property
    def precision(self) -> Precision:
        """The first member's (``attnkit.load`` gives each member the same rule)."""
        return self._members[0].precision

    def member_probabilities(
        self, texts: Sequence[str], batch_size: int = 64
    ) -> tuple[list[Tensor], list[bool]]:
        """Each member's probabilities [(N, num_classes)] and, per text, whether any member
        truncated it."""
        probs, cut = [], [False] * len(texts)
        for m in self.members:
            ids, types, m_cut = m.encode(texts)
            probs.append(m.probabilities(ids, batch_size, types))
            cut = [a or b for a, b in zip(cut, m_cut, strict=True)]
        return probs, cut

    def predict(self, texts: Sequence[str] | str, batch_size: int = 64) -> list[Prediction]:
        """Label and averaged probabilities for each text."""
        if isinstance(texts, str):
            texts = [texts]
        probs, cut = self.member_probabilities(texts, batch_size)
        return _predictions(texts, torch.stack(probs).mean(0), cut, self.labels)

    def explain(
        self, text: str, path: str | Path | None = None, layer: int = -1, head: int | None = None
    ) -> Any:
        """The attention heatmap of the first member (an ensemble has no joint attention)."""
        return self.members[0].explain(text, path, layer=layer, head=head)

    def to_json(self, predictions: Sequence[Prediction]) -> str:
        return self.members[0].to_json(predictions)


# --------------------------------------------------------------------------------------
# The task
# --------------------------------------------------------------------------------------
def _inputs(items: Sequence[Item]) -> tuple[list[list[int]], int, list[list[int]] | None]:
    """(token ids, a batch size, segment ids or None) of encoded items, for ``logits``."""
    types = [it[2] for it in items] if items and len(items[0]) == 3 else None
    return [it[0] for it in items], 64, types


def ensemble(predictors: Sequence[Any], runs: Sequence[Any]) -> EnsemblePredictor:
    """The predictor averaging several classify runs' class probabilities (``attnkit.load``
    of a list of runs); another task's run is refused in one line."""
    for r, m in zip(runs, predictors, strict=True):
        if not isinstance(m, ClassifierPredictor):
            raise RunError(f"only classify runs can be ensembled; {r} is a {m.task} run")
    return EnsemblePredictor(predictors)


def calibrate(predictor: Any, data_dir: str | None, log: Log) -> dict[str, Any]:
    """Temperature scaling for a classify run trained before training did it
    (``attnkit.calibrate``); another task's run has no class probabilities to calibrate."""
    if not isinstance(predictor, ClassifierPredictor):
        raise RunError(f"{predictor.run_dir} is a {predictor.task} run: it has no class "
                       "probabilities to calibrate (classify runs have)")  # fmt: skip
    cfg = with_data_dir(predictor.config, data_dir)  # a copy: the predictor's is kept
    data = prepare_data(cfg, predictor.tokenizer, log=lambda *_: None)
    return calibrate_run(RunDir(predictor.run_dir), predictor, data.validation, log)


def calibrate_run(
    run: RunDir, predictor: ClassifierPredictor, validation: Sequence[Item], log: Log
) -> dict[str, Any]:
    """Fit the temperature on encoded validation items and write it into config.json."""
    if not validation:
        raise RunError(f"{run} has no validation split to calibrate on")
    logits = predictor.logits(*_inputs(validation))
    labels = torch.tensor([it[1] for it in validation])
    temperature = fit_temperature(logits, labels)
    before = F.cross_entropy(logits, labels).item()
    after = F.cross_entropy(logits / temperature, labels).item()
    predictor.temperature = round(temperature, 4)
    run.update_config(temperature=predictor.temperature)
    log(
        f"temperature scaling: T = {temperature:.3f} on {len(labels):,} validation examples "
        f"(NLL {before:.4f} -> {after:.4f})"
    )
    return {"temperature": predictor.temperature, "nll_before": before, "nll_after": after}


class ClassifySpec(TaskSpec):
    """Text classification: sentiment analysis on NSMC / IMDB or your own labelled file.
    Model selection by validation accuracy; the softmax temperature is fitted afterwards."""

    name = "classify"
    endpoint = "classify"
    onnx_outputs = ("logits",)  # (B, num_classes)
    model_family = "classifier"
    data_settings = ClassifyData
    reads = READS

    def data_kind(self, cfg: Recipe) -> str:
        super().data_kind(cfg)  # (the dataset offers one of READS)
        return data_kind(cfg)

    def check_data(self, cfg: Recipe) -> None:
        d = cfg.data
        reader = find_reader(d, "pairs") if d.pair_column else None
        require(
            not d.pair_column or (reader is not None and "pair_column" in reader.settings),
            f"data.pair_column names a column of your own file (data.name: file); "
            f"{d.name} has no second sentence",
        )
        super().check_data(cfg)

    def validate(self, cfg: Recipe) -> None:
        require(
            not cfg.data.extra_train or not is_pair_task(cfg),
            "data.extra_train adds single texts; this recipe classifies sentence pairs",
        )
        if is_pair_task(cfg):
            require(
                cfg.model.READS_PAIRS,
                "sentence pairs ([CLS] A [SEP] B [SEP]) need model.arch: bert-classifier",
            )
        if cfg.model.READS_PAIRS:
            least = 5 if is_pair_task(cfg) else 3  # [CLS] A [SEP] (B [SEP]): a token each
            require(
                cfg.data.max_len >= least,
                f"data.max_len must be >= {least} for a BERT's [CLS] A [SEP]"
                + (" B [SEP]" if least == 5 else "")
                + f", got {cfg.data.max_len}",
            )
        cfg.model.validate_recipe()  # e.g. arch elmo: model.init_from is required

    def prepare_data(self, cfg: Recipe, tokenizer: Tokenizer | None, log: Log) -> PreparedData:
        return prepare_data(cfg, tokenizer, log)

    def model_inputs(
        self, cfg: Recipe, tokenizer: Tokenizer, run_info: dict[str, Any]
    ) -> dict[str, Any]:
        # the vocabulary, padding id and positions (a pretrained BERT keeps its own) + labels
        sizes = cfg.model.data_sizes(tokenizer, cfg.data.max_len)
        return {**sizes, "num_classes": len(run_info["labels"])}

    def init_model(self, model: nn.Module, cfg: Recipe, data: PreparedData, log: Log) -> None:
        if model.fits_from_data:  # e.g. the n-gram model's Naive Bayes ratios
            start = time.perf_counter()
            model.fit_from_data(naive_bayes_batches(data.train, data.tokenizer.pad_id))
            log(
                f"Naive Bayes ratios from {len(data.train):,} texts "
                f"({time.perf_counter() - start:.1f}s)"
            )
        if cfg.model.pretrained is not None:  # model.init_from: the pretrained weights
            model.load_pretrained(open_pretrained_source(cfg.model.pretrained), log)

    def objective(self, cfg: Recipe, data: PreparedData) -> ClassificationObjective:
        return ClassificationObjective(
            data.run_info["labels"], data.tokenizer.pad_id, cfg.training.label_smoothing
        )

    def after_training(self, run: RunDir, cfg: Recipe, data: PreparedData, log: Log) -> None:
        """Temperature scaling of the best weights on the validation split (what the model
        has to say about its training is logged first: e.g. an ELMo classifier's learned
        layer mix s_j, gamma)."""
        if not run.has_weights():
            return
        model = cfg.model.build()
        run.load_weights(model)
        note = model.training_note()
        if note:
            log(note)
        if data.validation:
            predictor = self.predictor(model, data.tokenizer, cfg, run, run.read_config())
            calibrate_run(run, predictor, data.validation, log)

    def predictor(
        self,
        model: nn.Module,
        tokenizer: Tokenizer,
        cfg: Recipe,
        run: RunDir,
        saved: dict[str, Any],
    ) -> ClassifierPredictor:
        temperature = saved.get("temperature", 1.0)
        if not isinstance(temperature, (int, float)) or not 0 < temperature < math.inf:
            raise RunError(
                f"{run.config_path}: temperature must be a number > 0, got {temperature!r} "
                "(`attnkit calibrate` fits it again)"
            )
        labels = saved.get("labels")
        if not isinstance(labels, list) or len(labels) != getattr(cfg.model, "num_classes", 0):
            raise RunError(f"{run.config_path}: labels are missing or do not match the model")
        return ClassifierPredictor(
            model, tokenizer, cfg, labels, run.path, temperature, bool(saved.get("pairs"))
        )

    def evaluate(
        self,
        predictor: Any,
        split: str,
        data_dir: str | None = None,
        batch_size: int = 128,
        **options: Any,
    ) -> dict[str, Any]:
        """Accuracy, macro-F1, confusion matrix and loss; an ensemble also lists each
        member's accuracy under ``members``."""
        members = predictor.members
        cfg = with_data_dir(predictor.config, data_dir)  # a copy: the predictor's is kept
        examples = read_split(cfg, split)
        y_true: list[int] = []
        member_probs = []
        for m in members:
            if m.config.data.name != cfg.data.name:
                raise RunError(
                    f"cannot ensemble runs trained on different datasets: {m.run_dir} "
                    f"({m.config.data.name}) and {predictor.run_dir} ({cfg.data.name})"
                )
            items, _ = encode_examples(
                examples, m.tokenizer, m.config, label_ids(m.config, m.labels), split
            )
            y_true = [it[1] for it in items]
            ids, _, types = _inputs(items)
            member_probs.append(m.probabilities(ids, batch_size, types))
        probs = torch.stack(member_probs).mean(0)  # (N, num_classes)
        report = classification_report(y_true, probs.argmax(-1).tolist(), predictor.labels)
        target = torch.tensor(y_true)
        report["loss"] = float(
            -probs[torch.arange(len(target)), target].clamp_min(1e-12).log().mean()
        )
        if len(members) > 1:
            report["members"] = [
                {"run": str(m.run_dir), "accuracy": accuracy(y_true, p.argmax(-1).tolist())}
                for m, p in zip(members, member_probs, strict=True)
            ]
        report["split"] = split
        return report


SPEC = ClassifySpec()  # task classify (attnkit.tasks.registry.BUILTIN)

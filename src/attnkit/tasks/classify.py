"""Text classification (sentiment analysis): data -> token ids, loss, metrics, predictions.

The task owns everything that depends on data: reading the dataset, training or loading the
tokenizer, mapping labels to class ids, batching, the loss and the metrics. The model only
sees tensors.
"""

from __future__ import annotations

import json
import math
import random
import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnkit.config import RunConfig
from attnkit.data.batching import pad_batch
from attnkit.data.paths import DataError
from attnkit.data.readers import Examples, load_text_classification, train_val_split
from attnkit.metrics import classification_report
from attnkit.models.classifier import build_classifier
from attnkit.tasks import get_tokenizer
from attnkit.tokenization import Tokenizer

__all__ = [
    "ClassificationTask",
    "ClassifierPredictor",
    "EnsemblePredictor",
    "Prediction",
    "PreparedData",
    "build_model",
    "fit_temperature",
    "naive_bayes_batches",
    "prepare_data",
]

# Human-readable names for the catalogued datasets' integer labels.
KNOWN_LABELS = {"nsmc": ["negative", "positive"], "imdb": ["negative", "positive"]}

Item = tuple[list[int], int]  # (token ids, class id)


def _sort_labels(values: Iterable[Any]) -> list[str]:
    labels = {str(v).strip() for v in values}
    if all(v.lstrip("-").isdigit() for v in labels):
        return sorted(labels, key=int)
    return sorted(labels)


@dataclass
class PreparedData:
    tokenizer: Tokenizer
    labels: list[str]
    train: list[Item]
    validation: list[Item]
    truncated: int  # training examples cut to max_len


def read_split(cfg: RunConfig, split: str) -> Examples:
    """Read one split (train / validation / test) of the recipe's dataset."""
    d = cfg.data
    if d.name == "file":
        files = {
            k: v
            for k, v in (("train", d.train), ("validation", d.validation), ("test", d.test))
            if v
        }
        return load_text_classification(
            files, split, text_column=d.text_column, label_column=d.label_column
        )
    return load_text_classification(d.name, split, data_dir=d.data_dir)


def _encode(
    tokenizer: Tokenizer, texts: list[str], cfg: RunConfig
) -> tuple[list[list[int]], list[bool]]:
    """Token ids of ``texts`` as the classifier sees them (cut to ``data.max_len``, keeping
    ``data.truncation``; ``[CLS]`` first for cls pooling), and which texts were cut."""
    return tokenizer.encode_batch(
        texts,
        max_len=cfg.data.max_len,
        add_cls=cfg.model.pooling == "cls",
        keep=cfg.data.truncation,
        return_truncated=True,
    )


def _has_split(cfg: RunConfig, split: str) -> bool:
    d = cfg.data
    return bool(getattr(d, split)) if d.name == "file" else split in ("train", "test")


def prepare_data(cfg: RunConfig, tokenizer: Tokenizer | None = None, log=print) -> PreparedData:
    """Read the dataset, split off validation, train (or load) the tokenizer, encode once."""
    d = cfg.data
    train_ex = list(read_split(cfg, "train"))
    if d.limit and d.limit < len(train_ex):
        # a seeded random subset, in file order (files may be sorted by label, e.g. IMDB)
        keep = sorted(random.Random(cfg.training.seed).sample(range(len(train_ex)), d.limit))
        train_ex = [train_ex[i] for i in keep]
    if _has_split(cfg, "validation"):
        val_ex = list(read_split(cfg, "validation"))
    elif d.val_fraction > 0:
        train_ex, val_ex = train_val_split(
            train_ex,
            d.val_fraction,
            seed=cfg.training.seed,
            how=d.val_split,
            key=lambda ex: str(ex.label).strip(),
        )
    else:  # no validation: the last weights are kept
        val_ex = []

    labels = KNOWN_LABELS.get(d.name) or _sort_labels(ex.label for ex in train_ex)
    to_id = label_ids(cfg, labels)
    if tokenizer is None:
        tokenizer = get_tokenizer(
            cfg.tokenizer, (ex.text for ex in train_ex), f"{len(train_ex):,} texts", log
        )
    train, truncated = encode_examples(train_ex, tokenizer, cfg, to_id, "train")
    validation, _ = encode_examples(val_ex, tokenizer, cfg, to_id, "validation")
    return PreparedData(tokenizer, labels, train, validation, truncated)


def label_ids(cfg: RunConfig, labels: Sequence[str]) -> dict[str, int]:
    """How a label as read from the data maps to a class id."""
    if cfg.data.name in KNOWN_LABELS:  # integer labels in the file, names for people
        return {str(i): i for i in range(len(labels))}
    return {name: i for i, name in enumerate(labels)}


def encode_examples(
    examples: Sequence, tokenizer: Tokenizer, cfg: RunConfig, to_id: dict[str, int], split: str
) -> tuple[list[Item], int]:
    """Examples -> (token ids, class id) items, and how many texts were truncated."""
    targets = []
    for ex in examples:
        key = str(ex.label).strip()
        if key not in to_id:
            raise DataError(f"{split} label {key!r} never appears in the training data")
        targets.append(to_id[key])
    ids, cut = _encode(tokenizer, [ex.text for ex in examples], cfg)
    return list(zip(ids, targets, strict=True)), sum(cut)


def encoder_hparams(cfg: RunConfig) -> dict[str, Any]:
    """``TransformerEncoderModel`` keyword arguments from a recipe (classifier and MLM)."""
    m = cfg.model
    return dict(
        d_model=m.d_model,
        num_heads=m.num_heads,
        d_ff=m.d_ff,
        num_layers=m.num_layers,
        dropout=m.dropout,
        attention_dropout=m.attention_dropout,
        max_len=cfg.data.max_len,
        positional=m.positional,
        norm_first=m.norm_first,
        activation=m.activation,
    )


def build_model(cfg: RunConfig, vocab_size: int, num_classes: int, pad_id: int) -> nn.Module:
    """The classifier named by ``cfg.model`` (only the hyperparameters its arch uses)."""
    m = cfg.model
    if m.arch == "transformer":
        hp = dict(encoder_hparams(cfg), pooling=m.pooling)
    elif m.arch == "ngram":
        hp = dict(ngram_max=m.ngram_max, num_buckets=m.num_buckets, nb_weighting=m.nb_weighting)
    else:
        hp = dict(
            d_model=m.d_model,
            hidden_size=m.hidden_size,
            num_layers=m.num_layers,
            bidirectional=m.bidirectional,
            dropout=m.dropout,
            pooling=m.pooling,
        )
    return build_classifier(m.arch, vocab_size, num_classes, pad_id, **hp)


def naive_bayes_batches(
    items: Sequence[Item], pad_id: int, batch_size: int = 256
) -> Iterator[tuple[Tensor, Tensor, Tensor]]:
    """(input_ids (B, T), attention_mask (B, T), labels (B,)) over all training items, for
    ``NgramClassifier.fit_nb`` (in length order: each batch pads only to its own longest)."""
    order = sorted(range(len(items)), key=lambda i: len(items[i][0]))
    for start in range(0, len(order), batch_size):
        rows = [items[i] for i in order[start : start + batch_size]]
        ids, mask = pad_batch([ids for ids, _ in rows], pad_id)
        yield ids, mask, torch.tensor([y for _, y in rows])


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


class ClassificationTask:
    """Cross-entropy over classes; model selection by validation accuracy."""

    metric = "accuracy"
    greater_is_better = True

    def __init__(self, labels: Sequence[str], pad_id: int, label_smoothing: float = 0.0) -> None:
        self.labels = list(labels)
        self.pad_id = pad_id
        self.label_smoothing = label_smoothing

    def collate(self, items: Sequence[Item]) -> dict[str, Tensor]:
        ids, mask = pad_batch([ids for ids, _ in items], self.pad_id)
        return {
            "input_ids": ids,
            "attention_mask": mask,
            "labels": torch.tensor([y for _, y in items]),
        }

    def loss(self, model: nn.Module, batch: dict[str, Tensor]) -> tuple[Tensor, int]:
        logits, _ = model(batch["input_ids"], batch["attention_mask"])
        loss = F.cross_entropy(
            logits.float(), batch["labels"], label_smoothing=self.label_smoothing
        )
        return loss, int(batch["attention_mask"].sum())

    @torch.no_grad()
    def evaluate(self, model: nn.Module, batches: Iterable[dict[str, Tensor]]) -> dict[str, Any]:
        total_loss, n, y_true, y_pred = 0.0, 0, [], []
        for batch in batches:
            logits, _ = model(batch["input_ids"], batch["attention_mask"])
            logits = logits.float()
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


class ClassifierPredictor:
    """What ``attnkit.load(run)`` returns for a classification run."""

    task = "classify"

    def __init__(
        self,
        model: nn.Module,
        tokenizer: Tokenizer,
        config: RunConfig,
        labels: Sequence[str],
        run_dir: Path | None = None,
        temperature: float = 1.0,
    ) -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.config = config
        self.labels = list(labels)
        self.run_dir = run_dir
        self.temperature = temperature  # probabilities = softmax(logits / temperature)

    def _encode(self, texts: Sequence[str]) -> tuple[list[list[int]], list[bool]]:
        for i, text in enumerate(texts):
            if not isinstance(text, str) or not text.strip():
                raise ValueError(f"input {i + 1} is empty or whitespace only")
        ids, cut = _encode(self.tokenizer, list(texts), self.config)
        d = self.config.data
        for i, was_cut in enumerate(cut):
            if was_cut:
                warnings.warn(
                    f"input {i + 1} is longer than max_len={d.max_len} tokens; "
                    f"it was truncated (kept: {d.truncation})",
                    stacklevel=3,
                )
        return ids, cut

    @torch.no_grad()
    def predict(self, texts: Sequence[str] | str, batch_size: int = 64) -> list[Prediction]:
        """Label and probabilities for each text (a single string is accepted too)."""
        if isinstance(texts, str):
            texts = [texts]
        ids, cut = self._encode(texts)
        return _predictions(texts, self.probabilities(ids, batch_size), cut, self.labels)

    @torch.no_grad()
    def logits(self, ids: Sequence[Sequence[int]], batch_size: int = 64) -> Tensor:
        """Class logits (N, num_classes) for N encoded texts, in their order.

        Texts are batched in order of length, so a batch is padded only to its own longest
        text (NSMC's 50K test reviews, batch 64: 24 s instead of 86 s in input order)."""
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        out = torch.empty(len(ids), len(self.labels))
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            input_ids, mask = pad_batch([ids[i] for i in rows], self.tokenizer.pad_id)
            out[rows] = self.model(input_ids, mask)[0].float()
        return out

    def probabilities(self, ids: Sequence[Sequence[int]], batch_size: int = 64) -> Tensor:
        """Class probabilities (N, num_classes) for N encoded texts: softmax(logits / T),
        with the run's fitted temperature T (``attnkit calibrate``; 1 if never fitted)."""
        return (self.logits(ids, batch_size) / self.temperature).softmax(-1)

    @torch.no_grad()
    def ngram_contributions(self, text: str) -> list[tuple[str, float]]:
        """A bag-of-n-grams model's exact explanation of one text: (n-gram, how much it
        raises the predicted class's logit above the mean of all logits), largest effect
        first. The values plus the bias sum to that logit margin."""
        if not hasattr(self.model, "contributions"):
            raise ValueError("n-gram contributions exist only for arch ngram")
        ids, _ = self._encode([text])
        parts = self.model.contributions(torch.tensor(ids[0]))
        logits = sum((v for _, _, v in parts), self.model.bias.detach())
        k = int(logits.argmax())  # the predicted class
        out = [
            (self.tokenizer.decode(ids[0][start : start + n]), float(v[k] - v.mean()))
            for start, n, v in parts
        ]
        return sorted(out, key=lambda gv: -abs(gv[1]))

    @torch.no_grad()
    def attention(self, text: str) -> tuple[list[str], list[Tensor]]:
        """(tokens, per-layer self-attention weights (H, T, T)) for one text."""
        if not hasattr(self.model, "encoder"):
            raise ValueError("attention maps exist only for Transformer models (arch: transformer)")
        ids, _ = self._encode([text])
        input_ids, mask = pad_batch(ids, self.tokenizer.pad_id)
        _, weights = self.model(input_ids, mask, need_weights=True)
        tokens = [self.tokenizer.id_to_token(i) or "?" for i in ids[0]]
        return tokens, [w[0] for w in weights]

    def explain(
        self, text: str, path: str | Path, layer: int = -1, head: int | None = None
    ) -> Path:
        """Save the self-attention heatmap of ``layer`` (``head`` or the mean over heads); for
        a bag-of-n-grams model (no attention), the bar chart of ``ngram_contributions``."""
        from attnkit.viz import plot_attention, plot_contributions

        if hasattr(self.model, "contributions"):
            pred = self.predict([text])[0]
            top = self.ngram_contributions(text)[:20]
            title = f"n-grams for {pred.label} ({pred.probability:.2f}) vs the other classes"
            return plot_contributions([g for g, _ in top], [v for _, v in top], path, title)

        tokens, weights = self.attention(text)
        n_layers = len(weights)
        if not -n_layers <= layer < n_layers:
            raise ValueError(f"layer must be in [0, {n_layers - 1}] (or negative), got {layer}")
        w = weights[layer]
        n_heads = w.size(0)
        if head is not None and not 0 <= head < n_heads:
            raise ValueError(f"head must be in [0, {n_heads - 1}], got {head}")
        matrix = w[head] if head is not None else w.mean(0)
        pred = self.predict([text])[0]
        which = f"head {head}" if head is not None else f"mean of {n_heads} heads"
        title = f"layer {layer % n_layers}, {which} -> {pred.label} ({pred.probability:.2f})"
        return plot_attention(matrix.numpy(), tokens, tokens, path, title=title)

    def to_json(self, predictions: Sequence[Prediction]) -> str:
        return "\n".join(json.dumps(p.to_dict(), ensure_ascii=False) for p in predictions)


class EnsemblePredictor:
    """Several classifiers voting by their average class probabilities (``attnkit.load``
    given several runs, ``attnkit evaluate RUN RUN ...``, ``attnkit predict --ensemble``).

        p(y | x) = 1/M * sum_m p_m(y | x)      each member m reads x with its own tokenizer

    Models with different inductive biases make different mistakes (a Transformer and a
    BiGRU on NSMC: benchmarks/notes-sentiment.md), so their average is often more accurate
    than either. Each p_m uses its run's fitted temperature, so a member that is more
    confident than it is accurate does not outvote a better calibrated one (IMDB: 0.8969
    uncalibrated, 0.9063 calibrated). The members must have the same labels in the same order.
    """

    task = "classify"

    def __init__(self, members: Sequence[ClassifierPredictor]) -> None:
        if len(members) < 2:
            raise ValueError("an ensemble needs at least two classify runs")
        labels = members[0].labels
        for m in members[1:]:
            if m.labels != labels:
                raise ValueError(
                    f"cannot ensemble runs with different labels: {m.run_dir} has {m.labels}, "
                    f"{members[0].run_dir} has {labels}"
                )
        self.members = list(members)
        self.labels = list(labels)
        self.config = members[0].config  # what an evaluation reads its data with
        self.run_dir = members[0].run_dir

    def member_probabilities(
        self, texts: Sequence[str], batch_size: int = 64
    ) -> tuple[list[Tensor], list[bool]]:
        """Each member's probabilities [(N, num_classes)] and, per text, whether any member
        truncated it."""
        probs, cut = [], [False] * len(texts)
        for m in self.members:
            ids, m_cut = m._encode(texts)
            probs.append(m.probabilities(ids, batch_size))
            cut = [a or b for a, b in zip(cut, m_cut, strict=True)]
        return probs, cut

    def predict(self, texts: Sequence[str] | str, batch_size: int = 64) -> list[Prediction]:
        """Label and averaged probabilities for each text."""
        if isinstance(texts, str):
            texts = [texts]
        probs, cut = self.member_probabilities(texts, batch_size)
        return _predictions(texts, torch.stack(probs).mean(0), cut, self.labels)

    def explain(
        self, text: str, path: str | Path, layer: int = -1, head: int | None = None
    ) -> Path:
        """The attention heatmap of the first member (an ensemble has no joint attention)."""
        return self.members[0].explain(text, path, layer=layer, head=head)

    def to_json(self, predictions: Sequence[Prediction]) -> str:
        return self.members[0].to_json(predictions)

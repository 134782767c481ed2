"""ELMo's bidirectional language model as a task (``task: bilm``, ``model.arch: elmo``), and
the feature-based use of a trained one in the sentiment classifier.

    attnkit train configs/nsmc-bilm.yaml     # unlabelled reviews -> runs/nsmc-bilm
    attnkit predict runs/nsmc-bilm "정말 재밌다"            # forward / backward perplexity
    attnkit evaluate runs/nsmc-bilm --split validation    # on the held-out texts
    attnkit train configs/nsmc-elmo.yaml     # classify, model.arch elmo, init_from the biLM

The corpus is every text that is safe to learn from without labels (as task mlm reads it:
``attnkit.data.readers.read_unlabeled``, never a test set; or the user's file). Each text is
read as ``[BOS] text [EOS]`` (attnkit's tokenizers have both), so both directions have a
target at every real token: the forward LM predicts ``[EOS]`` after the last word, the
backward LM ``[BOS]`` before the first, as ELMo's <S> and </S>. A text longer than
``data.max_len`` tokens becomes several training sequences (``chunk_ids``) instead of being
cut. Loss = forward NLL + backward NLL (``BiLM.loss``); the reported perplexities are
exp(NLL) per direction and exp of their mean. Model selection: lowest validation loss.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnkit.core.config import require
from attnkit.core.errors import DataError, InputError, RunError, check_finite, json_line
from attnkit.data.batching import pad_batch
from attnkit.data.catalogue import describe, has_split, read
from attnkit.data.masking import chunk_ids
from attnkit.data.settings import DataConfig
from attnkit.data.split import split_examples
from attnkit.data.tokenization import Tokenizer
from attnkit.models.elmo import BiLM, ELMoEmbedder, boundary_ids
from attnkit.models.elmo_classifier import elmo_vectors
from attnkit.runtime.device import inference, model_device
from attnkit.runtime.run import RunDir
from attnkit.tasks.base import (
    Log,
    Predictor,
    PreparedData,
    Recipe,
    TaskSpec,
    get_tokenizer,
    log_info,
    one_line,
    with_data_dir,
)

__all__ = [
    "SPEC",
    "BiLMPredictor",
    "BiLMSpec",
    "BiLMObjective",
    "TextPerplexity",
    "boundary_ids",
    "encode_pieces",
    "prepare_data",
    "row_nll",
]


# --------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------
@dataclass
class BiLMData(DataConfig):
    """bilm's data settings: the shared ones and the column of the user's table."""

    text_column: str = "text"  # data.name file: a CSV/TSV/JSONL's column (.txt: each line)


def read_corpus(cfg: Recipe) -> list[str]:
    """The training texts: a catalogued dataset's unlabelled reviews, or the user's file
    (the catalogue's ``documents``)."""
    return read(cfg.data, "documents", "train")


def encode_pieces(
    tokenizer: Tokenizer, texts: Sequence[str], max_len: int
) -> tuple[list[list[int]], list[int]]:
    """(pieces, owner): each text as ``[BOS] text [EOS]`` cut into pieces of at most
    ``max_len`` tokens (pieces of fewer than 2 tokens, which hold no prediction, dropped),
    and for each piece the index of its text."""
    wrap = boundary_ids(tokenizer) is not None
    ids = tokenizer.encode_batch(list(texts), add_bos=wrap, add_eos=wrap)
    pieces: list[list[int]] = []
    owner: list[int] = []
    for i, row in enumerate(ids):
        for piece in chunk_ids(row, max_len):
            pieces.append(piece)
            owner.append(i)
    return pieces, owner


def prepare_data(
    cfg: Recipe, tokenizer: Tokenizer | None = None, log: Log = log_info
) -> PreparedData:
    """Read the corpus, hold out validation texts (``attnkit.data.split``), train/load the
    tokenizer, encode as ``[BOS] text [EOS]`` and cut into ``max_len`` pieces."""
    d = cfg.data
    texts = read_corpus(cfg)
    if not texts:
        raise DataError("the biLM's corpus is empty")
    train_texts, val_texts = split_examples(texts, d, cfg.training.seed)
    if tokenizer is None:
        tokenizer = get_tokenizer(cfg.tokenizer, train_texts, f"{len(train_texts):,} texts", log)
    train, _ = encode_pieces(tokenizer, train_texts, d.max_len)
    validation, _ = encode_pieces(tokenizer, val_texts, d.max_len)
    if not train:
        raise DataError("no training text has 2 tokens or more")
    n_tokens = sum(len(x) for x in train)
    wrap = "[BOS] text [EOS]" if boundary_ids(tokenizer) else "bare texts (no [BOS]/[EOS])"
    summary = (
        f"data: {len(train_texts) + len(val_texts):,} texts -> {len(train):,} train / "
        f"{len(validation):,} validation sequences of <= {d.max_len} tokens "
        f"({n_tokens:,} training tokens, {wrap}), vocab {tokenizer.vocab_size:,}"
    )
    return PreparedData(tokenizer, train, validation, summary)


# --------------------------------------------------------------------------------------
# Loss and metrics
# --------------------------------------------------------------------------------------
def row_nll(model: BiLM, input_ids: Tensor, mask: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Per sequence: (forward NLL summed, backward NLL summed, predictions per direction),
    each (B,), over the same positions as ``BiLM.loss`` (a real token with a real
    neighbour on the predicted side)."""
    out = model(input_ids, mask)
    pairs = (out.mask[:, 1:] & out.mask[:, :-1]).float()  # (B, T-1)

    def nll(logits: Tensor, targets: Tensor) -> Tensor:
        per_token = F.cross_entropy(logits.float().transpose(1, 2), targets, reduction="none")
        return (per_token * pairs).sum(1)

    forward = nll(out.forward_logits[:, :-1], input_ids[:, 1:])  # at t: token t + 1
    backward = nll(out.backward_logits[:, 1:], input_ids[:, :-1])  # at t + 1: token t
    return forward, backward, pairs.sum(1)


def perplexities(forward: float, backward: float, count: int) -> dict[str, Any]:
    """The report of summed NLLs over ``count`` predictions per direction."""
    n = max(count, 1)
    f, b = forward / n, backward / n
    return {
        "loss": f + b,
        "forward_loss": f,
        "backward_loss": b,
        "forward_perplexity": float(torch.tensor(f).exp()),
        "backward_perplexity": float(torch.tensor(b).exp()),
        "perplexity": float(torch.tensor((f + b) / 2).exp()),  # of the mean NLL
        "num_predictions": count,
    }


class BiLMObjective:
    """Trainer task: loss = forward NLL + backward NLL; selection by validation loss."""

    metric = "loss"
    greater_is_better = False
    shown = ("forward_perplexity", "backward_perplexity")

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.pad_id = tokenizer.pad_id

    def collate(self, items: Sequence[list[int]]) -> dict[str, Tensor]:
        ids, mask = pad_batch(list(items), self.pad_id)
        return {"input_ids": ids, "attention_mask": mask}

    def loss(self, model: nn.Module, batch: dict[str, Tensor]) -> tuple[Tensor, int]:
        forward, backward = model.loss(batch["input_ids"], batch["attention_mask"])
        return forward + backward, int(batch["attention_mask"].sum())

    @torch.no_grad()
    def evaluate(self, model: nn.Module, batches: Iterable[dict[str, Tensor]]) -> dict[str, Any]:
        forward = backward = 0.0
        count = 0
        for batch in batches:
            f, b, n = row_nll(model, batch["input_ids"], batch["attention_mask"])
            forward += f.sum().item()
            backward += b.sum().item()
            count += int(n.sum())
        return perplexities(forward, backward, count)


# --------------------------------------------------------------------------------------
# Prediction: perplexity and ELMo vectors
# --------------------------------------------------------------------------------------
@dataclass
class TextPerplexity:
    """How surprising one text is to each direction's language model."""

    text: str
    forward_perplexity: float
    backward_perplexity: float
    num_predictions: int  # per direction (the text's tokens + 1 with [BOS]/[EOS])

    def format(self) -> str:
        """``forward P<TAB>backward P<TAB>text`` (the text on one line, escaped)."""
        return (
            f"forward {self.forward_perplexity:.2f}\tbackward {self.backward_perplexity:.2f}"
            f"\t{one_line(self.text)}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "forward_perplexity": self.forward_perplexity,
            "backward_perplexity": self.backward_perplexity,
            "num_predictions": self.num_predictions,
        }


class BiLMPredictor(Predictor):
    """What ``attnkit.load(run)`` returns for a bilm run.

    perplexity(texts) -> {forward_perplexity, backward_perplexity, perplexity, ...}
    predict(texts)    -> [TextPerplexity]       (what ``attnkit predict`` prints)
    embed(texts)      -> [ELMo vectors (n_tokens, 2 * hidden)]  equal layer weights
    """

    task = "bilm"
    capabilities = frozenset({"predict", "perplexity", "embed"})

    def __init__(
        self, model: BiLM, tokenizer: Tokenizer, config: Recipe, run_dir: Path | None = None
    ) -> None:
        self.model = model.eval()
        self.device = model_device(model)
        self.tokenizer = tokenizer
        self.config = config
        self.run_dir = run_dir
        self.boundaries = boundary_ids(tokenizer)
        # the feature-based representation with the untrained mix: s = 0 (equal weights
        # 1 / (L + 1)), gamma = 1
        self.embedder = ELMoEmbedder(self.model).to(self.device)

    @staticmethod
    def _texts(texts: Sequence[str] | str) -> list[str]:
        texts = [texts] if isinstance(texts, str) else list(texts)
        for text in texts:
            if not isinstance(text, str) or not text.strip():
                raise InputError(f"input is empty or whitespace only: {text!r}")
        return texts

    @inference
    def _scores(self, texts: list[str], batch_size: int) -> list[tuple[float, float, int]]:
        """Per text: (forward NLL sum, backward NLL sum, predictions), over its pieces."""
        pieces, owner = encode_pieces(self.tokenizer, texts, self.config.data.max_len)
        sums = [[0.0, 0.0, 0] for _ in texts]
        order = sorted(range(len(pieces)), key=lambda i: len(pieces[i]))  # little padding
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            ids, mask = pad_batch([pieces[i] for i in chunk], self.tokenizer.pad_id)
            f, b, n = row_nll(self.model, ids.to(self.device), mask.to(self.device))
            check_finite(f)  # NaN weights: an error, not a NaN perplexity
            check_finite(b)
            for i, fi, bi, ni in zip(chunk, f.tolist(), b.tolist(), n.tolist(), strict=True):
                row = sums[owner[i]]
                row[0] += fi
                row[1] += bi
                row[2] += int(ni)
        return [(f, b, int(n)) for f, b, n in sums]

    def perplexity(self, texts: Sequence[str] | str, batch_size: int = 64) -> dict[str, Any]:
        """Forward, backward and mean perplexity (exp of the NLL per prediction) over all
        the texts, with the losses and counts."""
        texts = self._texts(texts)
        scores = self._scores(texts, batch_size)
        report = perplexities(
            sum(s[0] for s in scores), sum(s[1] for s in scores), sum(s[2] for s in scores)
        )
        return {**report, "num_texts": len(texts)}

    def predict(self, texts: Sequence[str] | str, batch_size: int = 64) -> list[TextPerplexity]:
        """Each text's forward and backward perplexity."""
        texts = self._texts(texts)
        out = []
        for text, (f, b, n) in zip(texts, self._scores(texts, batch_size), strict=True):
            if n == 0:
                raise InputError(f"too short to score (one token, no [BOS]/[EOS]): {text!r}")
            ppl = perplexities(f, b, n)
            out.append(
                TextPerplexity(text, ppl["forward_perplexity"], ppl["backward_perplexity"], n)
            )
        return out

    def tokens(self, text: str) -> list[str]:
        """The tokens ``embed`` gives one vector each (``data.max_len`` at most)."""
        ids = self.tokenizer.encode(self._texts(text)[0], max_len=self.config.data.max_len)
        return [self.tokenizer.id_to_token(i) or "?" for i in ids]

    @inference
    def embed(self, texts: Sequence[str] | str, batch_size: int = 64) -> list[Tensor]:
        """ELMo vectors of each text's tokens (``tokens(text)``), (n_tokens, 2 * hidden)
        each, on the CPU: the biLM reads ``[BOS] text [EOS]`` (texts cut to
        ``data.max_len`` tokens) and its layers are mixed with equal weights, gamma 1."""
        texts = self._texts(texts)
        ids = self.tokenizer.encode_batch(texts, max_len=self.config.data.max_len)
        bos, eos = self.boundaries or (None, None)
        out: list[Tensor] = []
        for start in range(0, len(ids), batch_size):
            rows = ids[start : start + batch_size]
            x, mask = pad_batch(rows, self.tokenizer.pad_id)
            x, mask = x.to(self.device), mask.to(self.device)
            vectors = elmo_vectors(self.embedder, x, mask, bos, eos, self.tokenizer.pad_id)
            out += [v[: len(r)].float().cpu() for v, r in zip(vectors, rows, strict=True)]
        return out

    def to_json(self, predictions: Sequence[TextPerplexity]) -> str:
        return "\n".join(json_line(p.to_dict()) for p in predictions)


# --------------------------------------------------------------------------------------
# The task
# --------------------------------------------------------------------------------------
class BiLMSpec(TaskSpec):
    """ELMo's biLM trained on unlabelled text: forward + backward LSTM language models."""

    name = "bilm"
    model_family = "bilm"
    default_arch = "elmo"
    trains = "trains model.arch elmo (ELMo's biLM)"
    data_settings = BiLMData
    reads = ("documents",)

    def validate(self, cfg: Recipe) -> None:
        d = cfg.data
        require(d.max_len >= 2, f"data.max_len must be >= 2 for a biLM, got {d.max_len}")

    def prepare_data(self, cfg: Recipe, tokenizer: Tokenizer | None, log: Log) -> PreparedData:
        return prepare_data(cfg, tokenizer, log)

    def objective(self, cfg: Recipe, data: PreparedData) -> BiLMObjective:
        return BiLMObjective(data.tokenizer)

    def item_length(self, item: list[int]) -> int:
        return len(item)

    def predictor(
        self,
        model: nn.Module,
        tokenizer: Tokenizer,
        cfg: Recipe,
        run: RunDir,
        saved: dict[str, Any],
    ) -> BiLMPredictor:
        return BiLMPredictor(model, tokenizer, cfg, run.path)

    def evaluate(
        self,
        predictor: Any,
        split: str,
        data_dir: str | None = None,
        batch_size: int = 128,
        **options: Any,
    ) -> dict[str, Any]:
        """Perplexities on ``validation``: the texts held out from the corpus when the run
        trained (the same ones: same data settings and seed); on ``test`` only for a user
        file with ``data.test`` (the catalogued unlabelled corpora have no test split)."""
        cfg = with_data_dir(predictor.config, data_dir)  # a copy: the predictor's is kept
        d = cfg.data
        if split == "validation":
            _, texts = split_examples(read_corpus(cfg), d, cfg.training.seed)
            if not texts:
                raise RunError(f"{predictor.run_dir} held out no validation texts "
                               "(data.val_fraction 0)")  # fmt: skip
        elif split == "test" and has_split(d, "documents", "test"):
            texts = read(d, "documents", "test")
        else:
            corpus = describe(d, "documents")
            raise RunError(
                f"{predictor.run_dir} is a bilm run: {corpus} has no {split} split; it is "
                "evaluated on the texts held out from it (--split validation)"
            )
        return {**predictor.perplexity(texts, batch_size), "split": split}


SPEC = BiLMSpec()  # task bilm (attnkit.tasks.registry.BUILTIN)

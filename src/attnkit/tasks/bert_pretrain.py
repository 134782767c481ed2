"""BERT pretraining (task ``bert-pretrain``): masked LM + next-sentence prediction.

    attnkit train configs/bert-pretrain-ko.yaml      # NSMC's 639K unlabelled reviews
    attnkit train configs/nsmc-bert.yaml             # model.init_from: runs/bert-pretrain-ko

``model.arch: bert-pretraining`` (``BertForPreTraining``) learns both objectives of Devlin
et al. (2019) at once, loss = MLM cross-entropy + NSP cross-entropy; ``bert-mlm``
(``BertForMaskedLM``) only the masked LM (RoBERTa found NSP unnecessary; compare them).

Data. The corpus is a list of documents, each a list of segments (``attnkit.data.nsp``
defines both: a user text file's blank-line-separated blocks of lines, or one review cut
into its sentences for NSMC / IMDB). For ``bert-pretraining`` every training item is one NSP
pair ``[CLS] A [SEP] B [SEP]`` with segment ids 0/1 (``make_nsp_pairs``: 50% the true next
segment, 50% one of another document); there are as many pairs as training documents, and
they are drawn once (like BERT's static data; the masking is drawn afresh every time a
batch is made). For ``bert-mlm`` an item is ``[CLS] document [SEP]`` (long documents cut
into ``max_len`` pieces). Masking: ``attnkit.data.masking.mask_tokens`` (15%; 80% [MASK], 10%
random, 10% kept; never special tokens; ``data.whole_word_mask`` picks whole words).
Validation documents are held out (``data.val_fraction``); their pairs and masks are drawn
once with a fixed seed, so every evaluation scores the same predictions.

Logged: mlm_loss / mlm_accuracy, nsp_loss / nsp_accuracy and their sum ``loss`` (model
selection: lowest validation loss). Any finished run starts a fine-tuning run:
``model.init_from: runs/NAME`` in a classify / tag / qa recipe.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnkit.core.config import require
from attnkit.core.errors import DataError, InputError, RunError
from attnkit.data.batching import pad_batch
from attnkit.data.catalogue import read
from attnkit.data.masking import IGNORE_INDEX, chunk_ids, mask_tokens, wordpiece_word_starts
from attnkit.data.nsp import NspExample, make_nsp_pairs
from attnkit.data.segments import pair_ids
from attnkit.data.settings import DataConfig
from attnkit.data.split import split_examples
from attnkit.data.tokenization import SPECIAL_TOKENS, Tokenizer
from attnkit.runtime.run import RunDir
from attnkit.tasks.base import Log, PreparedData, Recipe, TaskSpec, get_tokenizer, one_line
from attnkit.tasks.mlm import FillMaskPredictor, check_mask_prob

__all__ = [
    "SPEC",
    "BertPretrainData",
    "BertPretrainSpec",
    "BertPretrainingObjective",
    "BertPretrainPredictor",
    "read_documents",
]

# train: (input_ids, token_type_ids, is_next (1 / 0; -1 without NSP));
# validation: (masked ids, labels, token_type_ids, is_next), masked once
Item = tuple[list[int], list[int], int] | tuple[list[int], list[int], list[int], int]


def special_ids(tokenizer: Tokenizer) -> tuple[int, Tensor | None]:
    """(num_special, special_ids) for ``mask_tokens``: attnkit's tokenizers put the special
    tokens first (num_special = their count); a Hugging Face vocabulary has them elsewhere
    ([PAD] 0, [UNK] 100, [CLS] 101, ...): then their ids are listed instead."""
    ids = sorted(i for t in SPECIAL_TOKENS if (i := tokenizer.token_to_id(t)) is not None)
    if ids == list(range(len(ids))):
        return len(ids), None
    return 0, torch.tensor(ids)


@dataclass
class BertPretrainData(DataConfig):
    """bert-pretrain's data settings: the shared ones and how tokens are masked."""

    mask_prob: float = 0.15  # share of tokens the model must predict (BERT: 15%)
    whole_word_mask: bool = False  # mask every piece of a chosen word

    def validate(self) -> None:
        super().validate()
        check_mask_prob(self.mask_prob)


def read_documents(cfg: Recipe) -> list[list[str]]:
    """The corpus as documents of segments (see ``attnkit.data.nsp``; the catalogue's
    ``segments``: a user text file's blocks of lines, or reviews cut into sentences)."""
    return read(cfg.data, "segments", "train")


def _tokenize(tokenizer: Tokenizer, docs: Sequence[list[str]]) -> list[list[list[int]]]:
    """Each document's segments as token ids (all segments encoded in one batch)."""
    flat = tokenizer.encode_batch([s for doc in docs for s in doc])
    out, i = [], 0
    for doc in docs:
        out.append(flat[i : i + len(doc)])
        i += len(doc)
    return out


def _items(
    cfg: Recipe, tokenizer: Tokenizer, docs: list[list[list[int]]], seed: int
) -> list[tuple[list[int], list[int], int]]:
    """NSP pairs (bert-pretraining) or [CLS] document [SEP] pieces (bert-mlm)."""
    max_len = cfg.data.max_len
    if cfg.model.predicts_next_sentence:
        pairs: list[NspExample] = make_nsp_pairs(
            docs, max_len, tokenizer.cls_id, tokenizer.sep_id, random.Random(seed), len(docs)
        )
        return [(p.input_ids, p.token_type_ids, p.is_next) for p in pairs]
    out = []
    for doc in docs:
        for piece in chunk_ids([t for seg in doc for t in seg], max_len - 2):
            ids = [tokenizer.cls_id, *piece, tokenizer.sep_id]
            out.append((ids, [0] * len(ids), -1))
    return out


def prepare_data(cfg: Recipe, tokenizer: Tokenizer | None, log: Log) -> PreparedData:
    """Documents -> held-out validation documents -> tokenizer -> items; validation items
    masked once (fixed seed)."""
    d, seed = cfg.data, cfg.training.seed
    docs = read_documents(cfg)
    if len(docs) < 2:
        raise DataError(f"the pretraining corpus has {len(docs)} document(s); it needs >= 2")
    train_docs, val_docs = split_examples(docs, d, seed)
    if tokenizer is None:
        texts = (s for doc in train_docs for s in doc)
        tokenizer = get_tokenizer(cfg.tokenizer, texts, f"{len(train_docs):,} documents", log)
    special, listed = special_ids(tokenizer)
    train = _items(cfg, tokenizer, _tokenize(tokenizer, train_docs), seed)
    validation: list[Item] = []
    if len(val_docs) >= 2 or (val_docs and not cfg.model.predicts_next_sentence):
        raw = _items(cfg, tokenizer, _tokenize(tokenizer, val_docs), seed + 1)
        ids, mask = pad_batch([x for x, _, _ in raw], tokenizer.pad_id)
        starts = wordpiece_word_starts(tokenizer, ids) if d.whole_word_mask else None
        generator = torch.Generator().manual_seed(seed)
        inputs, labels = mask_tokens(
            ids, mask, tokenizer.mask_id, tokenizer.vocab_size, special, d.mask_prob,
            generator, word_starts=starts, special_ids=listed,
        )  # fmt: skip
        validation = [
            (inputs[i, : len(x)].tolist(), labels[i, : len(x)].tolist(), t, y)
            for i, (x, t, y) in enumerate(raw)
        ]
    positives = sum(y == 1 for _, _, y in train)
    what = "NSP pairs" if cfg.model.predicts_next_sentence else "sequences"
    summary = (
        f"data: {len(train_docs) + len(val_docs):,} documents -> {len(train):,} train / "
        f"{len(validation):,} validation {what} of <= {d.max_len} tokens "
        f"({sum(len(x) for x, _, _ in train):,} training tokens"
        + (f", {positives / max(len(train), 1):.1%} true next" if positives else "")
        + f"), vocab {tokenizer.vocab_size:,}"
    )
    return PreparedData(tokenizer, train, validation, summary)


class BertPretrainingObjective:
    """Masked-LM (+ NSP) cross-entropy; model selection by the validation loss."""

    metric = "loss"
    greater_is_better = False
    shown = ("mlm_accuracy", "nsp_accuracy")  # on the log line of each evaluation

    def __init__(self, tokenizer: Tokenizer, mask_prob: float, whole_word_mask: bool) -> None:
        self.tokenizer = tokenizer
        self.pad_id, self.mask_id = tokenizer.pad_id, tokenizer.mask_id
        self.vocab_size = tokenizer.vocab_size
        self.num_special, self.special_ids = special_ids(tokenizer)
        self.mask_prob = mask_prob
        self.whole_word_mask = whole_word_mask

    def collate(self, items: Sequence[Item]) -> dict[str, Tensor]:
        if len(items[0]) == 4:  # validation: masked once in prepare_data
            ids, mask = pad_batch([it[0] for it in items], self.pad_id)
            labels, _ = pad_batch([it[1] for it in items], IGNORE_INDEX)
        else:
            raw, mask = pad_batch([it[0] for it in items], self.pad_id)
            starts = wordpiece_word_starts(self.tokenizer, raw) if self.whole_word_mask else None
            ids, labels = mask_tokens(
                raw, mask, self.mask_id, self.vocab_size, self.num_special, self.mask_prob,
                word_starts=starts, special_ids=self.special_ids,
            )  # fmt: skip
        types, _ = pad_batch([it[-2] for it in items], 0)
        # Hugging Face's NSP label: 0 = "B follows A", 1 = "B is random"
        nsp = torch.tensor([1 - it[-1] if it[-1] >= 0 else IGNORE_INDEX for it in items])
        return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types,
                "labels": labels, "next_sentence_label": nsp}  # fmt: skip

    @staticmethod
    def _forward(model: nn.Module, batch: dict[str, Tensor]) -> tuple[Tensor, Tensor | None]:
        """(masked-LM logits (N, vocab) at the chosen positions, NSP logits (B, 2) or None:
        the model's ``MaskedLMOutput``; bert-mlm has no next-sentence head)."""
        chosen = batch["labels"] != IGNORE_INDEX
        out = model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"], chosen)
        return out.logits, out.next_sentence_logits

    def loss(self, model: nn.Module, batch: dict[str, Tensor]) -> tuple[Tensor, int]:
        mlm_logits, nsp_logits = self._forward(model, batch)
        labels = batch["labels"]
        loss = F.cross_entropy(mlm_logits.float(), labels[labels != IGNORE_INDEX])
        if nsp_logits is not None:
            loss = loss + F.cross_entropy(nsp_logits.float(), batch["next_sentence_label"])
        return loss, int(batch["attention_mask"].sum())

    @torch.no_grad()
    def evaluate(self, model: nn.Module, batches: Iterable[dict[str, Tensor]]) -> dict[str, Any]:
        sums = {"mlm": 0.0, "nsp": 0.0}
        counts = {"mlm": 0, "mlm_correct": 0, "nsp": 0, "nsp_correct": 0}
        for batch in batches:
            mlm_logits, nsp_logits = self._forward(model, batch)
            target = batch["labels"][batch["labels"] != IGNORE_INDEX]
            mlm_logits = mlm_logits.float()
            sums["mlm"] += F.cross_entropy(mlm_logits, target, reduction="sum").item()
            counts["mlm"] += target.numel()
            counts["mlm_correct"] += int((mlm_logits.argmax(-1) == target).sum())
            if nsp_logits is not None:
                y = batch["next_sentence_label"]
                sums["nsp"] += F.cross_entropy(nsp_logits.float(), y, reduction="sum").item()
                counts["nsp"] += y.numel()
                counts["nsp_correct"] += int((nsp_logits.argmax(-1) == y).sum())
        mlm_loss = sums["mlm"] / max(counts["mlm"], 1)
        out = {
            "mlm_loss": mlm_loss,
            "mlm_accuracy": counts["mlm_correct"] / max(counts["mlm"], 1),
            "perplexity": float(torch.tensor(mlm_loss).exp()),
            "num_predictions": counts["mlm"],
        }
        if counts["nsp"]:
            out["nsp_loss"] = sums["nsp"] / counts["nsp"]
            out["nsp_accuracy"] = counts["nsp_correct"] / counts["nsp"]
        out["loss"] = mlm_loss + out.get("nsp_loss", 0.0)
        return out


@dataclass
class NextSentence:
    """How likely ``text_b`` is to follow ``text`` (the NSP head's softmax)."""

    text: str
    text_b: str
    probability: float  # of "B follows A"

    def format(self) -> str:
        return f"{self.probability:.4f}\t{one_line(self.text)} [SEP] {one_line(self.text_b)}"

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "text_b": self.text_b, "probability": self.probability}


class BertPretrainPredictor(FillMaskPredictor):
    """What ``attnkit.load`` returns for a bert-pretrain run: ``fill_mask`` / ``predict``
    (the likeliest tokens for each [MASK]) and, with the NSP head, ``next_sentence``."""

    task = "bert-pretrain"
    capabilities = FillMaskPredictor.capabilities | {"next_sentence"}
    wrap_in_cls_sep = True  # fill_mask reads [CLS] text [SEP], as in pretraining

    def __init__(
        self, model: nn.Module, tokenizer: Tokenizer, config: Recipe, run_dir=None
    ) -> None:
        super().__init__(model, tokenizer, config, run_dir)  # (segment ids: all 0)
        self.bert = model.eval()

    @torch.no_grad()
    def next_sentence(self, text: str, text_b: str) -> NextSentence:
        """P(``text_b`` follows ``text``) from the NSP head (bert-pretraining runs)."""
        if not self.config.model.predicts_next_sentence:
            raise InputError("this run has no next-sentence head (model.arch bert-mlm)")
        if not text.strip() or not text_b.strip():
            raise InputError("both sentences must be non-empty")
        max_len = self.config.data.max_len  # each cut before tokenization (pair_ids cuts)
        a = self.tokenizer.encode(text, max_len=max_len)
        b = self.tokenizer.encode(text_b, max_len=max_len)
        ids, types, _ = pair_ids(self.tokenizer, a, b, self.config.data.max_len)
        x = torch.tensor([ids], device=self.device)
        t = torch.tensor([types], device=self.device)
        out = self.bert(x, None, t, positions=torch.zeros_like(x, dtype=torch.bool))
        nsp = out.next_sentence_logits.float()  # (1, 2)
        return NextSentence(text, text_b, float(nsp.softmax(-1)[0, 0]))


class BertPretrainSpec(TaskSpec):
    """BERT pretraining on unlabelled text: masked LM (+ next-sentence prediction)."""

    name = "bert-pretrain"
    model_family = "bert_pretraining"
    default_arch = "bert-pretraining"
    data_settings = BertPretrainData
    reads = ("segments",)

    def validate(self, cfg: Recipe) -> None:
        d = cfg.data
        require(
            d.max_len >= 8, f"data.max_len must be >= 8 for [CLS] A [SEP] B [SEP], got {d.max_len}"
        )

    def prepare_data(self, cfg: Recipe, tokenizer: Tokenizer | None, log: Log) -> PreparedData:
        return prepare_data(cfg, tokenizer, log)

    def objective(self, cfg: Recipe, data: PreparedData) -> BertPretrainingObjective:
        return BertPretrainingObjective(
            data.tokenizer, cfg.data.mask_prob, cfg.data.whole_word_mask
        )

    def predictor(
        self,
        model: nn.Module,
        tokenizer: Tokenizer,
        cfg: Recipe,
        run: RunDir,
        saved: dict[str, Any],
    ) -> BertPretrainPredictor:
        return BertPretrainPredictor(model, tokenizer, cfg, run.path)

    def evaluate(self, predictor: Any, split: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        raise RunError(
            f"{predictor.run_dir} is a BERT pretraining run: it has no labelled {split} split; "
            "its validation MLM / NSP loss and accuracy are in metrics.jsonl"
        )


SPEC = BertPretrainSpec()  # task bert-pretrain (attnkit.tasks.registry.BUILTIN)

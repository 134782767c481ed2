"""Masked-LM pretraining (task ``mlm``; ``model.objective: mlm`` BERT's masked LM or
``electra`` replaced-token detection) and starting a classifier from its encoder.

    attnkit train configs/nsmc-pretrain.yaml          # unlabelled reviews -> runs/nsmc-pretrain
    attnkit train configs/nsmc-transformer.yaml       # model.init_from: runs/nsmc-pretrain

The corpus is every text that is safe to learn from without labels (for the catalogued
datasets never the test set; see ``attnkit.data.readers.read_unlabeled``), cut into pieces of
at most ``data.max_len`` tokens. Training batches are corrupted afresh each time
(``attnkit.data.masking.mask_tokens``); validation texts are corrupted once with a fixed seed, so
every evaluation scores the same positions. Model selection: lowest validation loss (ELECTRA:
the generator's masked-LM loss).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnkit.core.config import check, short_repr
from attnkit.core.errors import DataError, InputError, RunError, check_finite, json_line
from attnkit.data.batching import pad_batch
from attnkit.data.catalogue import read
from attnkit.data.masking import IGNORE_INDEX, chunk_ids, mask_tokens
from attnkit.data.settings import DataConfig
from attnkit.data.split import split_examples
from attnkit.data.tokenization import SPECIAL_TOKENS, Tokenizer
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
)

__all__ = [
    "SPEC",
    "ElectraObjective",
    "FillMask",
    "FillMaskPredictor",
    "MaskedLMData",
    "MaskedLMSpec",
    "MaskedLMObjective",
    "build_task",
    "prepare_data",
    "sample_tokens",
]

# A training item is a list of token ids (masked in ``collate``); a validation item is the
# pair (corrupted ids, labels), masked once in ``prepare_data``.
Item = list[int] | tuple[list[int], list[int]]


def check_mask_prob(mask_prob: float) -> None:
    """``ConfigError`` unless ``data.mask_prob`` is a share of the tokens, in (0, 1)."""
    check((0.0 < mask_prob < 1.0, f"data.mask_prob must be in (0, 1), got {short_repr(mask_prob)}"))


@dataclass
class MaskedLMData(DataConfig):
    """mlm's data settings: the shared ones, the column of the user's table and how many
    tokens are masked."""

    text_column: str = "text"  # data.name file: a CSV/TSV/JSONL's column (.txt: each line)
    mask_prob: float = 0.15  # share of tokens the model must predict (BERT: 15%)

    def validate(self) -> None:
        super().validate()
        check_mask_prob(self.mask_prob)


def read_corpus(cfg: Recipe) -> list[str]:
    """The pretraining texts: a catalogued dataset's unlabelled reviews, or the user's file
    (the catalogue's ``documents``)."""
    return read(cfg.data, "documents", "train")


def num_special(tokenizer: Tokenizer) -> int:
    """Special tokens occupy the first ids of every attnkit tokenizer; check and count them."""
    ids = sorted(i for t in SPECIAL_TOKENS if (i := tokenizer.token_to_id(t)) is not None)
    if ids != list(range(len(ids))):
        raise DataError(
            f"the tokenizer's special tokens must have the first ids (0, 1, ...), got {ids}"
        )
    return len(ids)


def prepare_data(
    cfg: Recipe, tokenizer: Tokenizer | None = None, log: Log = log_info
) -> PreparedData:
    """Read the corpus, hold out validation texts (``attnkit.data.split``), train/load the
    tokenizer, encode, cut into ``max_len`` pieces, and mask the validation pieces once."""
    d, seed = cfg.data, cfg.training.seed
    texts = read_corpus(cfg)
    if not texts:
        raise DataError("the pretraining corpus is empty")
    train_texts, val_texts = split_examples(texts, d, seed)
    if tokenizer is None:
        tokenizer = get_tokenizer(cfg.tokenizer, train_texts, f"{len(train_texts):,} texts", log)
    special = num_special(tokenizer)

    def pieces(batch: list[str]) -> list[list[int]]:
        out: list[list[int]] = []
        for ids in tokenizer.encode_batch(batch):
            out += chunk_ids(ids, d.max_len)
        return out

    train = pieces(train_texts)
    # validation pieces are masked once, all together, with a fixed seed
    val_pieces = pieces(val_texts)
    validation: list[tuple[list[int], list[int]]] = []
    if val_pieces:
        ids, mask = pad_batch(val_pieces, tokenizer.pad_id)
        generator = torch.Generator().manual_seed(seed)
        inputs, labels = mask_tokens(
            ids, mask, tokenizer.mask_id, tokenizer.vocab_size, special, d.mask_prob, generator
        )
        validation = [
            (inputs[i, : len(p)].tolist(), labels[i, : len(p)].tolist())
            for i, p in enumerate(val_pieces)
        ]
    n_tokens = sum(len(x) for x in train)
    summary = (
        f"data: {len(train_texts) + len(val_texts):,} texts -> {len(train):,} train / "
        f"{len(validation):,} validation sequences of <= {d.max_len} tokens "
        f"({n_tokens:,} training tokens), vocab {tokenizer.vocab_size:,}"
    )
    return PreparedData(tokenizer, train, validation, summary)


def item_length(item: Item) -> int:
    return len(item[0]) if isinstance(item, tuple) else len(item)


def build_task(cfg: Recipe, tokenizer: Tokenizer) -> MaskedLMObjective:
    """The Trainer task of the model's objective (ELECTRA's when the model detects replaced
    tokens, else the masked LM's)."""
    if cfg.model.detects_replaced_tokens:
        return ElectraObjective(
            tokenizer, cfg.data.mask_prob, cfg.model.rtd_weight, cfg.training.seed
        )
    return MaskedLMObjective(tokenizer, cfg.data.mask_prob)


class MaskedLMObjective:
    """Cross-entropy at the masked positions; model selection by validation loss."""

    metric = "loss"
    greater_is_better = False

    def __init__(self, tokenizer: Tokenizer, mask_prob: float = 0.15) -> None:
        self.pad_id = tokenizer.pad_id
        self.mask_id = tokenizer.mask_id
        self.vocab_size = tokenizer.vocab_size
        self.num_special = num_special(tokenizer)
        self.mask_prob = mask_prob

    def collate(self, items: Sequence[Item]) -> dict[str, Tensor]:
        if isinstance(items[0], tuple):  # validation: masked once, in prepare_data
            ids, mask = pad_batch([x for x, _ in items], self.pad_id)
            labels, _ = pad_batch([y for _, y in items], IGNORE_INDEX)
            return {"input_ids": ids, "attention_mask": mask, "labels": labels}
        ids, mask = pad_batch(items, self.pad_id)
        inputs, labels = mask_tokens(
            ids, mask, self.mask_id, self.vocab_size, self.num_special, self.mask_prob
        )
        return {"input_ids": inputs, "attention_mask": mask, "labels": labels}

    def loss(self, model: nn.Module, batch: dict[str, Tensor]) -> tuple[Tensor, int]:
        chosen = batch["labels"] != IGNORE_INDEX  # (B, T)
        logits = model(batch["input_ids"], batch["attention_mask"], chosen).logits  # (N, vocab)
        loss = F.cross_entropy(logits.float(), batch["labels"][chosen])
        return loss, int(batch["attention_mask"].sum())

    @torch.no_grad()
    def evaluate(self, model: nn.Module, batches: Iterable[dict[str, Tensor]]) -> dict[str, Any]:
        total, correct, n = 0.0, 0, 0
        for batch in batches:
            chosen = batch["labels"] != IGNORE_INDEX
            logits = model(batch["input_ids"], batch["attention_mask"], chosen).logits.float()
            target = batch["labels"][chosen]
            total += F.cross_entropy(logits, target, reduction="sum").item()
            correct += int((logits.argmax(-1) == target).sum())
            n += int(target.numel())
        loss = total / max(n, 1)
        return {
            "loss": loss,
            "perplexity": float(torch.tensor(loss).exp()),
            "accuracy": correct / max(n, 1),
            "num_predictions": n,
        }


def sample_tokens(logits: Tensor, generator: torch.Generator | None = None) -> Tensor:
    """One token per row from softmax(logits (N, vocab)) -> (N,), by inverse transform
    sampling (one uniform number per row; ``torch.multinomial`` draws one per vocabulary
    entry, which on the CPU took a third of an ELECTRA step)."""
    cdf = logits.softmax(-1).cumsum(-1)  # (N, vocab)
    where = generator.device if generator is not None else logits.device
    u = torch.rand(logits.size(0), 1, generator=generator, device=where)
    u = u.to(logits.device) * cdf[:, -1:]  # (N, 1)
    return torch.searchsorted(cdf, u).squeeze(-1).clamp_(max=logits.size(-1) - 1)


class ElectraObjective(MaskedLMObjective):
    """ELECTRA: loss = generator masked-LM loss + ``rtd_weight`` x discriminator binary
    cross-entropy over every real token (replaced or original).

    The generator's samples replace the masked positions; a sample equal to the original
    token counts as original (as in the paper). Model selection by the generator's
    validation MLM loss (``mlm_loss``), which falls steadily; the discriminator's loss is no
    selection signal, since its task gets harder as the generator improves. Validation
    replacements are sampled with a fixed seed, so evaluations compare like with like.
    """

    metric = "mlm_loss"
    greater_is_better = False

    def __init__(
        self, tokenizer: Tokenizer, mask_prob: float = 0.15, rtd_weight: float = 50.0, seed: int = 0
    ) -> None:
        super().__init__(tokenizer, mask_prob)
        self.rtd_weight = rtd_weight
        self.seed = seed

    @staticmethod
    def _losses(
        model: nn.Module,
        batch: dict[str, Tensor],
        generator: torch.Generator | None = None,
        counts: bool = False,
    ) -> dict[str, Tensor]:
        """Both losses for one batch (and, with ``counts``, what ``evaluate`` adds up)."""
        ids, mask, labels = batch["input_ids"], batch["attention_mask"], batch["labels"]
        chosen = labels != IGNORE_INDEX  # (B, T)
        target = labels[chosen]  # (N,)
        gen_logits = model.generator(ids, mask, chosen).logits.float()  # (N, vocab)
        sampled = sample_tokens(gen_logits.detach(), generator)  # (N,)
        original = torch.where(chosen, labels, ids)  # (B, T) the uncorrupted text
        replaced = original.clone()
        replaced[chosen] = sampled
        real = mask.bool()
        is_replaced = (replaced != original)[real]  # (R,) over the real tokens
        rtd_logits = model(replaced, mask).replaced_logits.float()[real]  # (R,)
        out = {
            "mlm_loss": F.cross_entropy(gen_logits, target),
            "rtd_loss": F.binary_cross_entropy_with_logits(rtd_logits, is_replaced.float()),
            "num_tokens": real.sum(),
        }
        if counts:
            out["mlm_correct"] = (gen_logits.argmax(-1) == target).sum()
            out["num_predictions"] = torch.tensor(target.numel())
            out["rtd_correct"] = ((rtd_logits > 0) == is_replaced).sum()
            out["num_replaced"] = is_replaced.sum()
        return out

    def loss(self, model: nn.Module, batch: dict[str, Tensor]) -> tuple[Tensor, int]:
        out = self._losses(model, batch)
        return out["mlm_loss"] + self.rtd_weight * out["rtd_loss"], int(out["num_tokens"])

    @torch.no_grad()
    def evaluate(self, model: nn.Module, batches: Iterable[dict[str, Tensor]]) -> dict[str, Any]:
        generator = torch.Generator().manual_seed(self.seed)
        sums = dict.fromkeys(("mlm", "rtd"), 0.0)
        counts = dict.fromkeys(
            ("mlm_correct", "num_predictions", "rtd_correct", "num_replaced", "num_tokens"), 0
        )
        for batch in batches:
            out = self._losses(model, batch, generator, counts=True)
            sums["mlm"] += out["mlm_loss"].item() * int(out["num_predictions"])
            sums["rtd"] += out["rtd_loss"].item() * int(out["num_tokens"])
            for k in counts:
                counts[k] += int(out[k])
        n, t = max(counts["num_predictions"], 1), max(counts["num_tokens"], 1)
        mlm_loss, rtd_loss = sums["mlm"] / n, sums["rtd"] / t
        return {
            "loss": mlm_loss + self.rtd_weight * rtd_loss,
            "mlm_loss": mlm_loss,
            "mlm_accuracy": counts["mlm_correct"] / n,
            "rtd_loss": rtd_loss,
            "rtd_accuracy": counts["rtd_correct"] / t,
            "replaced_fraction": counts["num_replaced"] / t,
            "num_predictions": counts["num_predictions"],
        }


# --------------------------------------------------------------------------------------
# Prediction: fill in [MASK]
# --------------------------------------------------------------------------------------
class FillMaskPredictor(Predictor):
    """What ``attnkit.load(run)`` returns for an mlm run: the most likely tokens for each
    ``[MASK]`` in a text."""

    task = "mlm"
    capabilities = frozenset({"predict", "fill_mask"})
    # the text is read as [CLS] text [SEP] (a BERT's pretraining input) or as it is
    wrap_in_cls_sep = False

    def __init__(
        self, model: nn.Module, tokenizer: Tokenizer, config: Recipe, run_dir=None
    ) -> None:
        # an ELECTRA run fills in with its generator (a small masked LM); the model's
        # forward(input_ids, attention_mask, ..., positions=) gives a MaskedLMOutput
        self.model = model.masked_lm().eval()
        self.device = model_device(self.model)
        self.tokenizer = tokenizer
        self.config = config
        self.run_dir = run_dir

    @inference
    def fill_mask(self, text: str, top_k: int = 5) -> list[list[tuple[str, float]]]:
        """For each [MASK] in ``text`` (left to right): ``top_k`` (token, probability)."""
        if not isinstance(text, str) or not text.strip():
            raise InputError("input is empty or whitespace only")
        if top_k < 1:
            raise InputError(f"top_k must be >= 1, got {top_k}")
        wrap = self.wrap_in_cls_sep
        ids = self.tokenizer.encode(
            text, max_len=self.config.data.max_len, add_cls=wrap, add_sep=wrap
        )
        x = torch.tensor([ids], device=self.device)
        where = x == self.tokenizer.mask_id
        if not where.any():
            raise InputError("the text has no [MASK] token to fill in")
        logits = self.model(x, None, positions=where).logits.float()  # (masks, vocab)
        check_finite(logits)  # NaN weights: an error, not NaN probabilities
        probs = logits.softmax(-1)
        top = probs.topk(min(top_k, probs.size(-1)), dim=-1)
        return [
            [(self.tokenizer.id_to_token(i) or "?", p) for i, p in zip(ids_, ps, strict=True)]
            for ids_, ps in zip(top.indices.tolist(), top.values.tolist(), strict=True)
        ]

    def predict(self, texts: Sequence[str] | str, top_k: int = 5) -> list[FillMask]:
        """``fill_mask`` for each text (what ``attnkit predict`` prints for an mlm run)."""
        if isinstance(texts, str):
            texts = [texts]
        out = []
        for text in texts:
            try:
                out.append(FillMask(text, self.fill_mask(text, top_k=top_k)))
            except InputError as exc:
                raise InputError(f"{exc}: {text!r}") from None
        return out

    def to_json(self, predictions: Sequence[FillMask]) -> str:
        return "\n".join(json_line(p.to_dict()) for p in predictions)


@dataclass
class FillMask:
    """The likeliest tokens for each [MASK] of one text."""

    text: str
    fills: list[list[tuple[str, float]]]  # per [MASK], left to right: (token, probability)

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "fills": [[{"token": t, "probability": p} for t, p in f] for f in self.fills],
        }

    def format(self) -> str:
        """One line per [MASK]: ``[MASK] i<TAB>token p  token p ...<TAB>text`` (tabs, line
        breaks and other control characters in the text and tokens are escaped)."""
        text = one_line(self.text)
        return "\n".join(
            f"[MASK] {i}\t{'  '.join(f'{one_line(t)} {p:.3f}' for t, p in options)}\t{text}"
            for i, options in enumerate(self.fills, 1)
        )


# --------------------------------------------------------------------------------------
# The task
# --------------------------------------------------------------------------------------
class MaskedLMSpec(TaskSpec):
    """Masked-LM (or ELECTRA) pretraining of a Transformer encoder on unlabelled text."""

    name = "mlm"
    model_family = "masked_lm"
    trains = "pretrains a transformer"
    data_settings = MaskedLMData
    reads = ("documents",)

    def check_resume(self, cfg: Recipe, saved: dict[str, Any]) -> None:
        """Before format 2, pretraining ignored ``data.val_split: last``: such a run would
        resume with another validation split."""
        if saved["format"] == 1 and cfg.data.val_split == "last":
            raise RunError(
                "mlm runs started before attnkit 0.2 held out a random validation sample "
                "whatever data.val_split said; this one cannot resume on its own data: train "
                "it again"
            )

    def prepare_data(self, cfg: Recipe, tokenizer: Tokenizer | None, log: Log) -> PreparedData:
        return prepare_data(cfg, tokenizer, log)

    def objective(self, cfg: Recipe, data: PreparedData) -> MaskedLMObjective:
        return build_task(cfg, data.tokenizer)

    def item_length(self, item: Item) -> int:
        return item_length(item)

    def predictor(
        self,
        model: nn.Module,
        tokenizer: Tokenizer,
        cfg: Recipe,
        run: RunDir,
        saved: dict[str, Any],
    ) -> FillMaskPredictor:
        return FillMaskPredictor(model, tokenizer, cfg, run.path)

    def evaluate(self, predictor: Any, split: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        raise RunError(
            f"{predictor.run_dir} is a masked-LM pretraining run: it has no labelled {split} "
            "split; its validation loss and perplexity are in metrics.jsonl"
        )


SPEC = MaskedLMSpec()  # task mlm (attnkit.tasks.registry.BUILTIN)

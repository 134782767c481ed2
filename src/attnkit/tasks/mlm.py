"""Masked-LM pretraining (task ``mlm``; ``model.objective: mlm`` BERT's masked LM or
``electra`` replaced-token detection) and starting a classifier from its encoder.

    attnkit train configs/nsmc-pretrain.yaml          # unlabelled reviews -> runs/nsmc-pretrain
    attnkit train configs/nsmc-transformer.yaml       # model.init_from: runs/nsmc-pretrain

The corpus is every text that is safe to learn from without labels (for the catalogued
datasets never the test set; see ``attnkit.data.readers.read_unlabeled``), cut into pieces of
at most ``data.max_len`` tokens. Training batches are corrupted afresh each time
(``attnkit.data.mlm.mask_tokens``); validation texts are corrupted once with a fixed seed, so
every evaluation scores the same positions. Model selection: lowest validation loss (ELECTRA:
the generator's masked-LM loss).
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnkit.config import ConfigError, RunConfig
from attnkit.data.batching import pad_batch
from attnkit.data.mlm import IGNORE_INDEX, chunk_ids, mask_tokens
from attnkit.data.readers import read_texts, read_unlabeled
from attnkit.models.mlm import ElectraPretrainer, TransformerMLM
from attnkit.tasks import get_tokenizer
from attnkit.tasks.classify import encoder_hparams
from attnkit.tokenization import SPECIAL_TOKENS, Tokenizer

__all__ = [
    "ElectraTask",
    "FillMaskPredictor",
    "MaskedLMTask",
    "build_model",
    "build_task",
    "init_classifier",
    "prepare_data",
    "pretrained_config",
    "sample_tokens",
]

# A training item is a list of token ids (masked in ``collate``); a validation item is the
# pair (corrupted ids, labels), masked once in ``prepare_data``.
Item = list[int] | tuple[list[int], list[int]]

# the encoder sizes a classifier takes over from its pretrained run
ENCODER_KEYS = (
    "d_model",
    "num_heads",
    "d_ff",
    "num_layers",
    "positional",
    "norm_first",
    "activation",
)


@dataclass
class PreparedData:
    tokenizer: Tokenizer
    train: list[list[int]]
    validation: list[tuple[list[int], list[int]]]
    num_texts: int


def read_corpus(cfg: RunConfig) -> list[str]:
    """The pretraining texts: a catalogued dataset's unlabelled reviews, or the user's file."""
    d = cfg.data
    if d.name == "file":
        return read_texts(d.train, text_column=d.text_column)
    return read_unlabeled(d.name, d.data_dir)


def num_special(tokenizer: Tokenizer) -> int:
    """Special tokens occupy the first ids of every attnkit tokenizer; check and count them."""
    ids = sorted(i for t in SPECIAL_TOKENS if (i := tokenizer.token_to_id(t)) is not None)
    if ids != list(range(len(ids))):
        raise ValueError(f"special tokens must have the first ids, got {ids}")
    return len(ids)


def prepare_data(cfg: RunConfig, tokenizer: Tokenizer | None = None, log=print) -> PreparedData:
    """Read the corpus, hold out ``val_fraction`` texts, train/load the tokenizer, encode,
    cut into ``max_len`` pieces, and mask the validation pieces once."""
    d, seed = cfg.data, cfg.training.seed
    texts = read_corpus(cfg)
    if not texts:
        raise ValueError("the pretraining corpus is empty")
    if d.limit and d.limit < len(texts):
        keep = sorted(random.Random(seed).sample(range(len(texts)), d.limit))
        texts = [texts[i] for i in keep]
    order = list(range(len(texts)))
    random.Random(seed).shuffle(order)
    n_val = min(round(len(texts) * d.val_fraction), len(texts) - 1)
    val_texts = [texts[i] for i in sorted(order[:n_val])]
    train_texts = [texts[i] for i in sorted(order[n_val:])]
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
    return PreparedData(tokenizer, train, validation, len(texts))


def item_length(item: Item) -> int:
    return len(item[0]) if isinstance(item, tuple) else len(item)


def build_model(cfg: RunConfig, vocab_size: int, pad_id: int) -> TransformerMLM | ElectraPretrainer:
    """The encoder with the head of ``cfg.model.objective``: mlm or electra."""
    if cfg.model.objective == "electra":
        return ElectraPretrainer(
            vocab_size,
            generator_d_model=cfg.model.generator_d_model,
            pad_id=pad_id,
            **encoder_hparams(cfg),
        )
    return TransformerMLM(vocab_size, pad_id=pad_id, **encoder_hparams(cfg))


def build_task(cfg: RunConfig, tokenizer: Tokenizer) -> MaskedLMTask:
    """The Trainer task of ``cfg.model.objective``."""
    if cfg.model.objective == "electra":
        return ElectraTask(tokenizer, cfg.data.mask_prob, cfg.model.rtd_weight, cfg.training.seed)
    return MaskedLMTask(tokenizer, cfg.data.mask_prob)


class MaskedLMTask:
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
        logits = model(batch["input_ids"], batch["attention_mask"], chosen)  # (N, vocab)
        loss = F.cross_entropy(logits.float(), batch["labels"][chosen])
        return loss, int(batch["attention_mask"].sum())

    @torch.no_grad()
    def evaluate(self, model: nn.Module, batches: Iterable[dict[str, Tensor]]) -> dict[str, Any]:
        total, correct, n = 0.0, 0, 0
        for batch in batches:
            chosen = batch["labels"] != IGNORE_INDEX
            logits = model(batch["input_ids"], batch["attention_mask"], chosen).float()
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
    u = torch.rand(logits.size(0), 1, generator=generator) * cdf[:, -1:]  # (N, 1)
    return torch.searchsorted(cdf, u).squeeze(-1).clamp_(max=logits.size(-1) - 1)


class ElectraTask(MaskedLMTask):
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
        gen_logits = model.generator(ids, mask, chosen).float()  # (N, vocab)
        sampled = sample_tokens(gen_logits.detach(), generator)  # (N,)
        original = torch.where(chosen, labels, ids)  # (B, T) the uncorrupted text
        replaced = original.clone()
        replaced[chosen] = sampled
        real = mask.bool()
        is_replaced = (replaced != original)[real]  # (R,) over the real tokens
        rtd_logits = model(replaced, mask).float()[real]  # (R,)
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
# Fine-tuning from a pretrained run
# --------------------------------------------------------------------------------------
def _read_run(run: str | Path) -> tuple[Path, dict[str, Any]]:
    run_dir = Path(run).expanduser()
    config = run_dir / "config.json"
    if not config.is_file() or not (run_dir / "model.safetensors").is_file():
        raise ConfigError(
            f"model.init_from: {run_dir} is not a finished run (config.json and "
            "model.safetensors are needed)"
        )
    saved = json.loads(config.read_text(encoding="utf-8"))
    if saved.get("task") != "mlm":
        raise ConfigError(
            f"model.init_from: {run_dir} is a {saved.get('task')!r} run; it must be a task mlm run"
        )
    return run_dir, saved


def pretrained_config(cfg: RunConfig, log=print) -> tuple[RunConfig, Tokenizer]:
    """For ``model.init_from``: the recipe with the pretrained encoder's sizes filled in, and
    the pretrained run's tokenizer (a classifier must read text exactly as its encoder did)."""
    run_dir, saved = _read_run(cfg.model.init_from)
    changed = []
    # a recurrent classifier takes only the token embedding (the feature-based use of a
    # pretrained model, like word2vec vectors), so only its width must match
    keys = ENCODER_KEYS if cfg.model.arch == "transformer" else ("d_model",)
    for key in keys:
        value = saved["model"][key]
        if getattr(cfg.model, key) != value:
            changed.append(f"{key}={value}")
            setattr(cfg.model, key, value)
    if changed:
        log(f"model.init_from {run_dir}: encoder sizes taken from it: {', '.join(changed)}")
    if cfg.model.positional == "learned" and cfg.data.max_len > saved["data"]["max_len"]:
        raise ConfigError(
            f"data.max_len={cfg.data.max_len} exceeds the pretrained learned positions "
            f"({saved['data']['max_len']}); lower it or pretrain with a larger max_len"
        )
    return cfg, Tokenizer.load(run_dir / "tokenizer.json")


def init_classifier(model: nn.Module, run: str | Path) -> int:
    """Copy the pretrained encoder (``embed.*``, ``pos.*``, ``encoder.*``) into a
    ``TransformerClassifier``; returns the number of tensors copied. The pooling and head stay
    freshly initialised. Learned positions are cut to the classifier's ``max_len``.

    An ``RNNClassifier`` gets the token embedding only, as the vectors the encoder saw:
    ``E * sqrt(d_model)`` (``TokenEmbedding``'s scale), so they have the size the recurrent
    layer expects of its inputs."""
    from safetensors.torch import load_file

    run_dir, saved = _read_run(run)
    pretrained = load_file(run_dir / "model.safetensors")
    own = model.state_dict()
    if "embed.weight" in own and "embed.embedding.weight" not in own:  # RNNClassifier
        value = pretrained["embed.embedding.weight"] * math.sqrt(saved["model"]["d_model"])
        if value.shape != own["embed.weight"].shape:
            raise ConfigError(
                f"model.init_from: the token embedding has shape {tuple(value.shape)} in "
                f"{run_dir}, {tuple(own['embed.weight'].shape)} in the classifier"
            )
        model.load_state_dict({"embed.weight": value}, strict=False)
        return 1
    wanted = [k for k in own if k.startswith(("embed.", "pos.", "encoder."))]
    missing = [k for k in wanted if k not in pretrained]
    if missing:
        raise ConfigError(f"model.init_from: {run_dir} lacks {', '.join(missing[:3])}")
    update = {}
    for k in wanted:
        value = pretrained[k]
        if k == "pos.embedding.weight":
            value = value[: own[k].size(0)]
        if value.shape != own[k].shape:
            raise ConfigError(
                f"model.init_from: {k} has shape {tuple(value.shape)} in {run_dir}, "
                f"{tuple(own[k].shape)} in the classifier"
            )
        update[k] = value
    model.load_state_dict(update, strict=False)
    return len(update)


# --------------------------------------------------------------------------------------
# Prediction: fill in [MASK]
# --------------------------------------------------------------------------------------
class FillMaskPredictor:
    """What ``attnkit.load(run)`` returns for an mlm run: the most likely tokens for each
    ``[MASK]`` in a text."""

    task = "mlm"

    def __init__(
        self,
        model: TransformerMLM | ElectraPretrainer,
        tokenizer: Tokenizer,
        config: RunConfig,
        run_dir=None,
    ) -> None:
        # an ELECTRA run fills in with its generator (a small masked LM)
        model = model.generator if isinstance(model, ElectraPretrainer) else model
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.config = config
        self.run_dir = run_dir

    @torch.no_grad()
    def fill_mask(self, text: str, top_k: int = 5) -> list[list[tuple[str, float]]]:
        """For each [MASK] in ``text`` (left to right): ``top_k`` (token, probability)."""
        if not isinstance(text, str) or not text.strip():
            raise ValueError("input is empty or whitespace only")
        if top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {top_k}")
        ids = self.tokenizer.encode(text, max_len=self.config.data.max_len)
        x = torch.tensor([ids])
        where = x == self.tokenizer.mask_id
        if not where.any():
            raise ValueError("the text has no [MASK] token to fill in")
        probs = self.model(x, None, where).float().softmax(-1)  # (masks, vocab)
        top = probs.topk(min(top_k, probs.size(-1)), dim=-1)
        return [
            [(self.tokenizer.id_to_token(i) or "?", p) for i, p in zip(ids_, ps, strict=True)]
            for ids_, ps in zip(top.indices.tolist(), top.values.tolist(), strict=True)
        ]

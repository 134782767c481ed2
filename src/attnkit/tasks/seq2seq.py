"""Sequence to sequence (translation, chatbot): data -> token ids, loss, metrics, decoding.

The task owns what depends on data: reading source/target pairs, one joint subword
tokenizer trained on sources and targets (so embeddings can be shared), the teacher-forcing
batch layout, the loss and the metrics. The models (family ``seq2seq`` in ``attnkit.models``:
the Transformer and the LSTM) see only tensors and share one signature,
``model(src, tgt_in, src_mask, tgt_mask, teacher_forcing_ratio) -> Seq2SeqOutput``; decoding is ``attnkit.nn.generation`` over the model's ``stepper()``.

Batch layout for a pair (x, y)::

    src     x_1 .. x_S                   (padded with pad_id; src_mask True = real token)
    tgt_in  [BOS] y_1 .. y_T             what the decoder reads (teacher forcing)
    tgt_out y_1 .. y_T [EOS]             what it must predict (tgt_mask True = real token)

``translate`` selects the best checkpoint by validation BLEU (sacreBLEU on detokenized
greedy output), ``chat`` by validation loss (perplexity is reported too). Evaluation also
reports BLEU on lowercased 13a tokens (``bleu_lowercase``), comparable to tutorials that
score lowercased tokenized text.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnkit.core.config import require
from attnkit.core.errors import InputError
from attnkit.core.params import check_params
from attnkit.data.batching import BucketBatchSampler, pad_batch
from attnkit.data.catalogue import has_split, read
from attnkit.data.parallel import Pair, read_user_pairs
from attnkit.data.paths import DataError
from attnkit.data.settings import DataConfig
from attnkit.data.split import split_examples
from attnkit.data.tokenization import Tokenizer
from attnkit.nn.capture import capture
from attnkit.nn.generation import beam_search, greedy, sample
from attnkit.runtime import viz
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
    with_data_dir,
)
from attnkit.tasks.metrics import bleu, perplexity

__all__ = [
    "CHAT",
    "TRANSLATE",
    "Alignment",
    "Seq2SeqData",
    "Seq2SeqPredictor",
    "Seq2SeqSpec",
    "Seq2SeqObjective",
    "TraceStep",
    "decode",
    "encode_pairs",
    "format_trace",
    "prepare_data",
    "read_split",
    "read_user_pairs",
]

Item = tuple[list[int], list[int], int]  # (source ids, target ids, index of the pair in its split)
SPLITS = ("train", "validation", "test")


# --------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------
@dataclass
class Seq2SeqData(DataConfig):
    """translate's and chat's data settings: the shared ones and the language pair."""

    src_lang: str = "de"  # translate: multi30k direction; suffixes of aligned user files
    tgt_lang: str = "en"


def _split_name(split: str) -> str:
    split = {"val": "validation", "valid": "validation", "dev": "validation"}.get(split, split)
    if split not in SPLITS:
        raise DataError(f"unknown split {split!r}; use train, validation or test")
    return split


def read_split(cfg: Recipe, split: str) -> list[Pair]:
    """Source/target pairs of one split (train / validation / test) of the recipe's data
    (the catalogue's ``parallel``)."""
    return read(cfg.data, "parallel", _split_name(split))


def _has_split(cfg: Recipe, split: str) -> bool:
    return has_split(cfg.data, "parallel", split)


def encode_pairs(
    pairs: Sequence[Pair], tokenizer: Tokenizer, max_len: int
) -> tuple[list[Item], int]:
    """Pairs -> (src ids, tgt ids, index) items and how many pairs were truncated.

    The source keeps at most ``max_len`` tokens, the target ``max_len - 1`` (the decoder
    reads [BOS] + target and predicts target + [EOS], both ``max_len`` long at most).
    """
    src, src_cut = tokenizer.encode_batch(
        [p.src for p in pairs], max_len=max_len, return_truncated=True
    )
    tgt, tgt_cut = tokenizer.encode_batch(
        [p.tgt for p in pairs], max_len=max_len - 1, return_truncated=True
    )
    items = [(s, t, i) for i, (s, t) in enumerate(zip(src, tgt, strict=True))]
    return items, sum(a or b for a, b in zip(src_cut, tgt_cut, strict=True))


def item_length(item: Item) -> int:
    """Padded length an item needs (for length-bucketed batching)."""
    return max(len(item[0]), len(item[1]) + 1)


def prepare_data(
    cfg: Recipe, tokenizer: Tokenizer | None = None, log: Log = log_info
) -> PreparedData:
    """Read the pairs, split off validation (``attnkit.data.split``), train (or load) the
    joint tokenizer, encode. ``extras["val_references"]``: the raw validation targets."""
    d = cfg.data
    train_pairs, val_pairs = split_examples(
        read_split(cfg, "train"),
        d,
        cfg.training.seed,
        validation=read_split(cfg, "validation") if _has_split(cfg, "validation") else None,
    )
    kept = [p for p in train_pairs if p.src.strip() and p.tgt.strip()]
    dropped = len(train_pairs) - len(kept)
    if not kept:
        raise DataError("no training pairs with both a source and a target")
    if tokenizer is None:
        tokenizer = get_tokenizer(
            cfg.tokenizer,
            (text for p in kept for text in (p.src, p.tgt)),
            f"{len(kept):,} sources + targets (joint vocabulary)",
            log,
        )
    train, truncated = encode_pairs(kept, tokenizer, d.max_len)
    validation, _ = encode_pairs(val_pairs, tokenizer, d.max_len)
    notes = []
    if truncated:
        notes.append(f"{truncated:,} truncated to max_len={d.max_len}")
    if dropped:
        notes.append(f"{dropped:,} with an empty side skipped")
    summary = (
        f"data: {len(train):,} train / {len(validation):,} validation pairs, "
        f"joint vocab {tokenizer.vocab_size:,}" + "".join(f", {n}" for n in notes)
    )
    return PreparedData(
        tokenizer,
        train,
        validation,
        summary,
        extras={"val_references": [p.tgt for p in val_pairs], "truncated": truncated},
    )


def _forward(model: nn.Module, batch: dict[str, Tensor], teacher_forcing_ratio: float) -> Tensor:
    """Logits (B, T, V) of any seq2seq model (``Seq2SeqOutput``); the gold token is fed
    with probability ``teacher_forcing_ratio`` in training, always in evaluation."""
    ratio = teacher_forcing_ratio if model.training else 1.0
    out = model(
        batch["src"],
        batch["tgt_in"],
        batch["src_mask"],
        batch["tgt_mask"],
        teacher_forcing_ratio=ratio,
    )
    return out.logits


def decode(
    model: nn.Module,
    src: Tensor,
    src_mask: Tensor,
    bos_id: int,
    eos_id: int,
    pad_id: int,
    max_new_tokens: int,
    beam: int = 1,
    length_penalty: float = 1.0,
    temperature: float = 0.0,
    top_k: int = 0,
    top_p: float = 1.0,
    generator: torch.Generator | None = None,
    on_step: Callable[[int, Tensor, Tensor], None] | None = None,
    use_cache: bool = True,
) -> list[list[int]]:
    """Output token ids per source row (without [BOS] / [EOS] / padding), by beam search
    (``beam > 1``), greedy (``temperature == 0``) or sampling; KV cache / LSTM state via the
    model's ``stepper()``. ``use_cache=False`` makes a Transformer recompute the whole
    prefix at every step (same tokens, slower: for tests and benchmarks)."""
    stepper = model.stepper(src, src_mask, use_cache=use_cache)
    start = torch.full((src.size(0),), bos_id, dtype=torch.long, device=src.device)
    if beam > 1:
        return beam_search(
            stepper, start, beam, max_new_tokens, eos_id, length_penalty=length_penalty
        ).tokens
    if temperature == 0.0:
        out = greedy(stepper, start, max_new_tokens, eos_id, pad_id, on_step=on_step)
    else:
        out = sample(
            stepper,
            start,
            max_new_tokens,
            eos_id,
            pad_id,
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            generator=generator,
            on_step=on_step,
        )
    rows = []
    for row in out.tolist():
        cut = row.index(eos_id) if eos_id in row else len(row)
        rows.append([t for t in row[:cut] if t != pad_id])
    return rows


# --------------------------------------------------------------------------------------
# Task (what the Trainer needs)
# --------------------------------------------------------------------------------------
class Seq2SeqObjective:
    """Label-smoothed cross-entropy over real target tokens; BLEU (translate) or loss (chat)
    for model selection.

    ``references``: raw target text of the split being evaluated, indexed by the items'
    third field; BLEU is computed only when they are given (``kind == "translate"``).
    """

    def __init__(
        self,
        kind: str,
        tokenizer: Tokenizer,
        max_len: int,
        label_smoothing: float = 0.0,
        teacher_forcing_ratio: float = 1.0,
        references: Sequence[str] | None = None,
        beam: int = 1,
        length_penalty: float = 1.0,
    ) -> None:
        if kind not in ("translate", "chat"):
            raise ValueError(f"kind must be translate or chat, got {kind!r}")
        self.kind = kind
        self.tokenizer = tokenizer
        self.pad_id, self.bos_id, self.eos_id = tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id
        self.max_len = max_len
        self.label_smoothing = label_smoothing
        self.teacher_forcing_ratio = teacher_forcing_ratio
        self.references = list(references) if references is not None else None
        self.beam = beam
        self.length_penalty = length_penalty
        self.metric = "bleu" if kind == "translate" else "loss"
        self.greater_is_better = kind == "translate"

    def collate(self, items: Sequence[Item]) -> dict[str, Tensor]:
        src, src_mask = pad_batch([it[0] for it in items], self.pad_id)
        tgt_in, _ = pad_batch([[self.bos_id, *it[1]] for it in items], self.pad_id)
        tgt_out, tgt_mask = pad_batch([[*it[1], self.eos_id] for it in items], self.pad_id)
        return {
            "src": src,
            "src_mask": src_mask,
            "tgt_in": tgt_in,
            "tgt_out": tgt_out,
            "tgt_mask": tgt_mask,
            "index": torch.tensor([it[2] for it in items]),
        }

    def loss(self, model: nn.Module, batch: dict[str, Tensor]) -> tuple[Tensor, int]:
        logits = _forward(model, batch, self.teacher_forcing_ratio).float()
        loss = F.cross_entropy(
            logits.flatten(0, 1),
            batch["tgt_out"].flatten(),
            ignore_index=self.pad_id,
            label_smoothing=self.label_smoothing,
        )
        return loss, int(batch["tgt_mask"].sum())

    @torch.no_grad()
    def evaluate(self, model: nn.Module, batches: Iterable[dict[str, Tensor]]) -> dict[str, Any]:
        """loss (mean NLL per target token, no smoothing), perplexity, and for translate BLEU
        of the decoded outputs against ``references``."""
        total, n_tokens, n_examples = 0.0, 0, 0
        hypotheses: dict[int, str] = {}
        want_bleu = self.kind == "translate" and self.references is not None
        for batch in batches:
            logits = _forward(model, batch, 1.0).float()
            total += F.cross_entropy(
                logits.flatten(0, 1),
                batch["tgt_out"].flatten(),
                ignore_index=self.pad_id,
                reduction="sum",
            ).item()
            n_tokens += int(batch["tgt_mask"].sum())
            n_examples += batch["src"].size(0)
            if want_bleu:
                outputs = decode(
                    model,
                    batch["src"],
                    batch["src_mask"],
                    self.bos_id,
                    self.eos_id,
                    self.pad_id,
                    self.max_len,
                    beam=self.beam,
                    length_penalty=self.length_penalty,
                )
                texts = self.tokenizer.decode_batch(outputs)
                for i, text in zip(batch["index"].tolist(), texts, strict=True):
                    hypotheses[i] = text
        loss = total / max(n_tokens, 1)
        report: dict[str, Any] = {
            "loss": loss,
            "perplexity": perplexity(loss),
            "num_examples": n_examples,
            "num_tokens": n_tokens,
        }
        if want_bleu:
            order = sorted(hypotheses)
            hyps, refs = [hypotheses[i] for i in order], [self.references[i] for i in order]
            score = bleu(hyps, refs)
            lowered = bleu(hyps, refs, lowercase=True)
            report.update(
                bleu=score.score,
                bleu_signature=score.signature,
                bleu_lowercase=lowered.score,
                bleu_lowercase_signature=lowered.signature,
                decoding=f"beam {self.beam}" if self.beam > 1 else "greedy",
            )
        return report


# --------------------------------------------------------------------------------------
# Prediction
# --------------------------------------------------------------------------------------
@dataclass
class TraceStep:
    """One decoding step: the decoder's input so far, its top candidates, the pick."""

    step: int  # 1-based
    tokens: list[str]  # [BOS] + tokens produced before this step
    candidates: list[tuple[str, float]]  # (token, probability), most probable first
    chosen: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "tokens": self.tokens,
            "candidates": [[t, p] for t, p in self.candidates],
            "chosen": self.chosen,
        }


def format_trace(steps: Sequence[TraceStep]) -> str:
    """``step N: <tokens so far> -> <pick>  | cand p, cand p, ...`` one line per step."""
    lines = []
    for s in steps:
        cands = ", ".join(f"{tok} {p:.3f}" for tok, p in s.candidates)
        lines.append(f"step {s.step}: {' '.join(s.tokens)} -> {s.chosen}  | {cands}")
    return "\n".join(lines)


@dataclass
class Alignment:
    source: list[str]  # source subword tokens (columns)
    output: list[str]  # output subword tokens, + [EOS] when decoding stopped there (rows)
    weights: Tensor  # (len(output), len(source)) cross-attention, rows sum to 1
    text: str = ""  # the detokenized output


class Seq2SeqPredictor(Predictor):
    """What ``attnkit.load(run)`` returns for a translate or chat run (either decodes:
    ``translate`` greedy or with beam search, ``chat`` by sampling)."""

    capabilities = frozenset({"translate", "chat", "trace", "alignment", "show_attention"})

    def __init__(
        self,
        model: nn.Module,
        tokenizer: Tokenizer,
        config: Recipe,
        run_dir: Path | None = None,
    ) -> None:
        self.model = model.eval()
        self.device = model_device(model)  # inputs go where the weights are
        self.tokenizer = tokenizer
        self.config = config
        self.task = config.task
        self.run_dir = run_dir
        self.max_len = config.data.max_len

    # ------------------------------------------------------------------ helpers
    def _limit(self, max_len: int | None) -> int:
        if max_len is None:
            return self.max_len
        if max_len < 1:
            raise InputError(f"max_len must be >= 1, got {max_len}")
        limit = self.model.max_target_len
        if limit is not None and max_len > limit:
            raise InputError(f"max_len must be <= {limit} (the model's positional table)")
        return max_len

    def _batch(self, ids: Sequence[list[int]]) -> tuple[Tensor, Tensor]:
        """Padded ids (B, S) and mask (B, S) on the model's device."""
        src, src_mask = pad_batch(list(ids), self.tokenizer.pad_id)
        return src.to(self.device), src_mask.to(self.device)

    def _encode(self, texts: Sequence[str]) -> list[list[int]]:
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise InputError(f"input {i + 1} is not a string")
        ids, cut = self.tokenizer.encode_batch(
            list(texts), max_len=self.max_len, return_truncated=True
        )
        for i, was_cut in enumerate(cut):
            if was_cut:
                warnings.warn(
                    f"input {i + 1} is longer than max_len={self.max_len} tokens; it was truncated",
                    stacklevel=3,
                )
        return ids

    @inference
    def _run(self, texts: Sequence[str], batch_size: int = 32, **options) -> list[str]:
        """Decode every non-empty text (empty / whitespace-only -> "")."""
        if isinstance(texts, str):
            texts = [texts]
        ids = self._encode(texts)
        out = [""] * len(texts)
        todo = [i for i, text in enumerate(texts) if text.strip() and ids[i]]
        tk = self.tokenizer
        for start in range(0, len(todo), batch_size):
            chunk = todo[start : start + batch_size]
            src, src_mask = self._batch([ids[i] for i in chunk])
            rows = decode(self.model, src, src_mask, tk.bos_id, tk.eos_id, tk.pad_id, **options)
            for i, text in zip(chunk, tk.decode_batch(rows), strict=True):
                out[i] = text
        return out

    # ------------------------------------------------------------------ public API
    def translate(
        self,
        texts: Sequence[str] | str,
        beam: int = 1,
        max_len: int | None = None,
        length_penalty: float = 1.0,
        batch_size: int = 32,
    ) -> list[str]:
        """One output per input (a single string is accepted too): beam search for
        ``beam > 1``, else greedy. Empty input -> empty output; longer than the run's
        ``max_len`` -> truncated with a warning."""
        if beam < 1:
            raise InputError(f"beam must be >= 1, got {beam}")
        return self._run(
            texts,
            batch_size,
            max_new_tokens=self._limit(max_len),
            beam=beam,
            length_penalty=length_penalty,
        )

    def chat(
        self,
        text: str,
        temperature: float = 0.7,
        top_k: int = 0,
        top_p: float = 0.9,
        seed: int | None = None,
        max_len: int | None = None,
    ) -> str:
        """One answer, sampled from softmax(logits / temperature) after top-k / top-p
        filtering (``temperature=0``: greedy). ``seed`` makes the answer reproducible."""
        # the ranges of the CLI and the server (attnkit.core.params)
        check_params(temperature=temperature, top_k=top_k, top_p=top_p, seed=seed)
        generator = None  # sampling draws on the model's device, so does the generator
        if seed is not None:
            generator = torch.Generator(device=self.device).manual_seed(seed)
        return self._run(
            [text],
            max_new_tokens=self._limit(max_len),
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            generator=generator,
        )[0]

    def _one(self, text: str) -> list[int]:
        if not isinstance(text, str) or not text.strip():
            raise InputError("the input is empty or whitespace only")
        return self._encode([text])[0]

    @inference
    def trace(
        self, text: str, top: int = 5, max_len: int | None = None
    ) -> tuple[str, list[TraceStep]]:
        """Greedy decoding step by step: (output text, per step the tokens so far, the
        ``top`` candidates with their probabilities and the pick)."""
        ids = self._one(text)
        tk = self.tokenizer
        steps: list[TraceStep] = []
        names = lambda row: [tk.id_to_token(i) or "?" for i in row]  # noqa: E731

        def on_step(t: int, so_far: Tensor, probs: Tensor) -> None:
            p, idx = probs[0].topk(min(top, probs.size(-1)))
            prefix = ["[BOS]", *names(so_far[0, :-1].tolist())]
            cands = list(zip(names(idx.tolist()), p.tolist(), strict=True))
            steps.append(TraceStep(t + 1, prefix, cands, names([int(so_far[0, -1])])[0]))

        src, src_mask = self._batch([ids])
        rows = decode(
            self.model,
            src,
            src_mask,
            tk.bos_id,
            tk.eos_id,
            tk.pad_id,
            self._limit(max_len),
            on_step=on_step,
        )
        return tk.decode(rows[0]), steps

    @inference
    def alignment(self, text: str, beam: int = 1, max_len: int | None = None) -> Alignment:
        """Decode ``text`` and return its cross-attention alignment (output x source).

        Transformer: the last decoder layer's cross-attention, averaged over heads, from a
        teacher-forced pass over the decoded output. LSTM: the attention weights alpha_t of
        each decoding step (needs ``model.attention`` set)."""
        if not self.model.has_cross_attention:
            raise InputError("this LSTM has no attention (model.attention: null): nothing to draw")
        ids = self._one(text)
        tk = self.tokenizer
        src, src_mask = self._batch([ids])
        limit = self._limit(max_len)
        out = decode(self.model, src, src_mask, tk.bos_id, tk.eos_id, tk.pad_id, limit, beam=beam)[
            0
        ]
        ended = len(out) < limit  # stopped at [EOS]: its row is drawn too
        # a teacher-forced pass over the decoded output gives the same attention the
        # decoding steps had (Transformer: last layer, mean of heads; LSTM: alpha_t)
        tgt_in = torch.tensor([[tk.bos_id, *(out if ended else out[:-1])]], device=self.device)
        with capture(self.model) as rec:
            forced = self.model(src, tgt_in, src_mask)
        if forced.cross_attention is not None:  # an LSTM's alpha_t (B, T, S)
            matrix = forced.cross_attention[0]
        else:  # a Transformer's last decoder layer, mean of its heads: (T, S)
            matrix = rec.attention_weights("cross")[-1][0].mean(0)
        labels = [tk.id_to_token(i) or "?" for i in out]
        if ended:
            labels.append("[EOS]")
        return Alignment(
            source=[tk.id_to_token(i) or "?" for i in ids],
            output=labels,
            weights=matrix.float().cpu(),
            text=tk.decode(out),
        )

    def show_attention(self, text: str, path: str | Path | None = None, beam: int = 1) -> Any:
        """The alignment heatmap (rows = output tokens, columns = source tokens), saved to
        ``path`` (returns the path), or without one returned as a figure (inline in a
        notebook)."""
        a = self.alignment(text, beam=beam)
        if not a.output:
            raise InputError("the model produced no output tokens: nothing to draw")
        kind = self.model.attention_description
        return viz.plot_attention(
            a.weights.numpy(),
            a.source,
            a.output,
            path,
            title=f"cross-attention ({kind})",
            x_title="source",
            y_title="output",
        )

    def to_json(self, sources: Sequence[str], outputs: Sequence[str]) -> str:
        key = "translation" if self.task == "translate" else "answer"
        return "\n".join(
            json.dumps({"source": s, key: o}, ensure_ascii=False)
            for s, o in zip(sources, outputs, strict=True)
        )


# --------------------------------------------------------------------------------------
# The tasks
# --------------------------------------------------------------------------------------
class Seq2SeqSpec(TaskSpec):
    """``translate`` (model selection by validation BLEU) and ``chat`` (by validation loss):
    the same data layout, models and predictor."""

    model_family = "seq2seq"
    data_settings = Seq2SeqData
    reads = ("parallel",)

    def __init__(self, name: str) -> None:
        self.name = name
        self.endpoint = name  # POST /v1/translate, /v1/chat

    def validate(self, cfg: Recipe) -> None:
        d, t = cfg.data, cfg.training
        require(
            0.0 <= t.teacher_forcing_ratio <= 1.0,
            "training.teacher_forcing_ratio must be in [0, 1]",
        )
        require(
            t.teacher_forcing_ratio == 1.0 or cfg.model.SCHEDULED_SAMPLING,
            f"training.teacher_forcing_ratio < 1 needs a decoder that reads its own output "
            f"step by step (arch lstm); arch {cfg.model.arch} reads every gold token at once",
        )
        require(d.max_len > 2, "data.max_len must be > 2 for a sequence-to-sequence task")

    def check_resume(self, cfg: Recipe, saved: dict[str, Any]) -> None:
        """Before format 2, ``data.limit`` took the first pairs and validation was always
        a random sample: such a run would resume on other data."""
        if saved["format"] == 1 and (cfg.data.limit or cfg.data.val_split == "last"):
            raise RunError(
                f"{cfg.task} runs started before attnkit 0.2 chose data.limit / val_split "
                "pairs differently; this one cannot resume on its own data: train it again"
            )

    def prepare_data(self, cfg: Recipe, tokenizer: Tokenizer | None, log: Log) -> PreparedData:
        return prepare_data(cfg, tokenizer, log)

    def objective(self, cfg: Recipe, data: PreparedData) -> Seq2SeqObjective:
        return Seq2SeqObjective(
            cfg.task,
            data.tokenizer,
            cfg.data.max_len,
            label_smoothing=cfg.training.label_smoothing,
            teacher_forcing_ratio=cfg.training.teacher_forcing_ratio,
            references=data.extras["val_references"],
        )

    def item_length(self, item: Item) -> int:
        return item_length(item)

    def predictor(
        self,
        model: nn.Module,
        tokenizer: Tokenizer,
        cfg: Recipe,
        run: RunDir,
        saved: dict[str, Any],
    ) -> Seq2SeqPredictor:
        return Seq2SeqPredictor(model, tokenizer, cfg, run.path)

    def evaluate(
        self,
        predictor: Any,
        split: str,
        data_dir: str | None = None,
        batch_size: int = 128,
        beam: int = 1,
        **options: Any,
    ) -> dict[str, Any]:
        """Loss and perplexity; for translate also sacreBLEU (greedy, or ``beam``)."""
        if beam < 1:
            raise InputError(f"beam must be >= 1, got {beam}")
        cfg = with_data_dir(predictor.config, data_dir)  # a copy: the predictor's is kept
        pairs = read_split(cfg, split)
        if not pairs:
            raise RunError(f"the {split} split is empty")
        items, truncated = encode_pairs(pairs, predictor.tokenizer, cfg.data.max_len)
        task = Seq2SeqObjective(
            cfg.task,
            predictor.tokenizer,
            cfg.data.max_len,
            references=[p.tgt for p in pairs],
            beam=beam,
        )
        sampler = BucketBatchSampler(
            [item_length(it) for it in items], batch_size=batch_size, shuffle=False
        )
        batches = (
            to_device(task.collate([items[i] for i in b]), predictor.device) for b in sampler
        )
        with torch.no_grad():
            report = task.evaluate(predictor.model.eval(), batches)
        report["split"] = split
        report["task"] = cfg.task
        report["truncated"] = truncated
        return report


# tasks translate and chat (attnkit.tasks.registry.BUILTIN)
TRANSLATE = Seq2SeqSpec("translate")
CHAT = Seq2SeqSpec("chat")

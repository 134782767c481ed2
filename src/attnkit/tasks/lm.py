"""Causal language modelling (task ``lm``): a GPT trained to predict the next token, and
generation from the trained run.

    attnkit train configs/shakespeare-char.yaml               # runs/shakespeare-char
    attnkit generate runs/shakespeare-char --prompt "ROMEO:" --max-new-tokens 300
    attnkit evaluate runs/shakespeare-char --split validation

    lm = attnkit.load("runs/shakespeare-char")
    lm.generate("ROMEO:", max_new_tokens=200, temperature=0.8, top_k=40)[0].text

Data: one continuous ``text`` (Tiny Shakespeare, a file: split by position) or
``documents`` (reviews, each followed by ``[EOS]``), cut into blocks of ``data.max_len + 1``
tokens; loss, perplexity, bits per token and per character; generation with stop strings
and streaming. The details (what each split is, how blocks overlap, how bits per character
count, how prompts start): docs/lm-task.md.
"""

from __future__ import annotations

import dataclasses
import json
import math
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnkit.core.errors import (
    NON_FINITE,
    DataError,
    InputError,
    NonFiniteError,
    RunError,
)
from attnkit.core.params import check_params
from attnkit.data.batching import pad_batch
from attnkit.data.catalogue import describe, find_kind, has_split, read
from attnkit.data.split import limit_examples, split_by_position, split_examples
from attnkit.data.tokenization import Tokenizer, cut_text
from attnkit.nn.generation import Joining, JoinRule, RowOptions, sample_rows
from attnkit.runtime.device import inference, model_device, to_device
from attnkit.runtime.run import RunDir
from attnkit.tasks.base import (
    Log,
    Predictor,
    PreparedData,
    Recipe,
    TaskSpec,
    get_tokenizer,
    log_info,
)

__all__ = [
    "READS",
    "SPEC",
    "Corpus",
    "Generation",
    "LMItem",
    "LMPredictor",
    "LanguageModelSpec",
    "LanguageModelObjective",
    "make_sequences",
    "nll_metrics",
    "prepare_data",
    "read_corpus",
]

# what it reads (attnkit.data.kinds), preferred first: one continuous text, or documents
# (reviews: one per document, [EOS] between them)
READS = ("text", "documents")
IGNORE_INDEX = -100
LN2 = math.log(2.0)


class LMItem(NamedTuple):
    """One sequence: ``ids`` (<= max_len + 1 tokens: inputs ids[:-1], targets ids[1:]) and
    ``chars``, the number of characters its targets spell (for bits per character)."""

    ids: list[int]
    chars: int


@dataclass
class Corpus:
    """The text of a recipe's data, split: ``documents`` True for reviews (a list of
    documents each), False for one continuous text (lists of one string)."""

    train: list[str]
    validation: list[str]
    documents: bool
    description: str = ""


# --------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------
def corpus_kind(data: Any) -> str | None:
    """``text`` or ``documents``: what the recipe's data (or a ``data.name``) is read as."""
    return find_kind(data, READS)


def read_corpus(cfg: Recipe) -> Corpus:
    """The training and validation text of a recipe (see the module docstring)."""
    d = cfg.data
    if corpus_kind(d) == "documents":
        docs = read(d, "documents", "train")
        if len(docs) < 2:
            raise DataError(f"the {d.name} corpus has {len(docs)} review(s); it needs >= 2")
        train, val = split_examples(docs, d, cfg.training.seed)
        return Corpus(train, val, True, f"{len(train) + len(val):,} {d.name} reviews")
    if has_split(d, "text", "validation"):  # the dataset's own cut (Tiny Shakespeare's)
        train, val = read(d, "text", "train"), read(d, "text", "validation")
    else:
        train, val = split_by_position(read(d, "text", "train"), d.val_fraction)
    what = describe(d, "text")
    if not train.strip():
        raise DataError(f"{what}: the training text is empty")
    size = len(train) + len(val)
    return Corpus([train], [val] if val else [], False, f"{size:,} characters of {what}")


def read_test(cfg: Recipe) -> tuple[list[str], bool] | None:
    """The test text of a recipe's dataset ((texts, documents)), or None if it has none: its
    own test split, or for a corpus of documents the texts of its labelled test split."""
    d = cfg.data
    kind = corpus_kind(d)
    if kind == "text" and has_split(d, "text", "test"):
        return [read(d, "text", "test")], False
    if kind == "documents" and has_split(d, "labelled", "test"):
        return [ex.text for ex in read(d, "labelled", "test")], True
    return None


# --------------------------------------------------------------------------------------
# Encoding
# --------------------------------------------------------------------------------------
def _eos_id(tokenizer: Tokenizer) -> int | None:
    return tokenizer.token_to_id("[EOS]")


def _encode_with_widths(
    tokenizer: Tokenizer, texts: list[str]
) -> Iterable[tuple[list[int], list[int]]]:
    """Per text: its ids and, per id, how many characters it stands for: from its start to
    the next token's start (the first from 0, the last to the end), so that they add up
    to the text's length, characters the tokenizer drops (spaces) included. A long text
    (one continuous corpus) is tokenized in pieces (``Tokenizer.encode_offsets_batch``), in
    bounded memory. A char tokenizer's ids stand for one character each."""
    per_char = tokenizer.char_ids_batch(texts)
    if per_char is not None:  # 1.1M characters: 0.1 s instead of 0.7 (spans, widths)
        yield from ((ids, [1] * len(ids)) for ids in per_char)
        return
    for text, (ids, offsets) in zip(texts, tokenizer.encode_offsets_batch(texts), strict=True):
        if not ids:
            yield [], []
            continue
        starts = [a for a, _ in offsets]
        starts[0] = 0
        ends = [*starts[1:], len(text)]
        yield ids, [max(0, e - s) for s, e in zip(starts, ends, strict=True)]


def token_stream(
    tokenizer: Tokenizer, texts: list[str], documents: bool
) -> tuple[list[int], list[int]]:
    """All ``texts`` as one stream of ids and their character widths: documents as
    ``[EOS] doc [EOS] doc [EOS] ...`` (each ``[EOS]`` one character), one text as it is."""
    eos = _eos_id(tokenizer)
    if documents and eos is None:
        raise DataError("packing reviews needs a tokenizer with an [EOS] token")
    ids: list[int] = [eos] if documents else []
    widths: list[int] = [0] if documents else []
    for t_ids, t_widths in _encode_with_widths(tokenizer, texts):
        if not t_ids:
            continue
        ids += t_ids
        widths += t_widths
        if documents:
            ids.append(eos)
            widths.append(1)
    return ids, widths


def cut_stream(ids: list[int], widths: list[int], max_len: int) -> list[LMItem]:
    """Blocks of ``max_len + 1`` tokens, block i starting at token i * max_len (the last
    may be shorter; one of a single token is dropped): every token but the first is a
    target exactly once."""
    out = []
    upto = list(accumulate(widths, initial=0))  # upto[i]: the characters of tokens < i
    for start in range(0, max(len(ids) - 1, 0), max_len):
        block = ids[start : start + max_len + 1]
        if len(block) >= 2:
            out.append(LMItem(block, upto[start + len(block)] - upto[start + 1]))
    return out


def make_sequences(
    tokenizer: Tokenizer, texts: list[str], documents: bool, max_len: int
) -> list[LMItem]:
    """``texts`` encoded into one stream and cut into training / evaluation sequences."""
    ids, widths = token_stream(tokenizer, texts, documents)
    return cut_stream(ids, widths, max_len)


def prepare_data(
    cfg: Recipe, tokenizer: Tokenizer | None = None, log: Log = log_info
) -> PreparedData:
    """Read and split the corpus, train (or take) the tokenizer on the training text, and
    cut both parts into sequences."""
    d, seed = cfg.data, cfg.training.seed
    corpus = read_corpus(cfg)
    if tokenizer is None:
        if corpus.documents:
            texts, what = corpus.train, f"{len(corpus.train):,} reviews"
        else:  # lines with their line breaks: a char tokenizer must learn "\n" too
            texts = corpus.train[0].splitlines(keepends=True)
            what = f"{len(corpus.train[0]):,} characters"
        tokenizer = get_tokenizer(cfg.tokenizer, texts, what, log)
    train = make_sequences(tokenizer, corpus.train, corpus.documents, d.max_len)
    if not corpus.documents:
        train = limit_examples(train, d.limit, seed)
    if not train:
        raise DataError("the training text is too short: it makes no sequence of 2 tokens")
    validation = make_sequences(tokenizer, corpus.validation, corpus.documents, d.max_len)
    n_tokens = sum(len(x.ids) - 1 for x in train)
    n_val = sum(len(x.ids) - 1 for x in validation)
    summary = (
        f"data: {corpus.description} -> {len(train):,} train / {len(validation):,} "
        f"validation sequences of <= {d.max_len} tokens ({n_tokens:,} / {n_val:,} target "
        f"tokens), {tokenizer.kind} vocab {tokenizer.vocab_size:,}"
    )
    return PreparedData(tokenizer, train, validation, summary)


# --------------------------------------------------------------------------------------
# The Trainer task
# --------------------------------------------------------------------------------------
def nll_metrics(nll: float, tokens: int, chars: int) -> dict[str, Any]:
    """Metrics from a summed NLL (nats) over ``tokens`` targets spelling ``chars``
    characters."""
    loss = nll / max(tokens, 1)
    return {
        "loss": loss,
        "perplexity": math.exp(min(loss, 700.0)),
        "bits_per_token": loss / LN2,
        "bits_per_char": nll / LN2 / max(chars, 1),
        "num_tokens": tokens,
        "num_chars": chars,
    }


class LanguageModelObjective:
    """Next-token cross-entropy over the real target tokens; selection by validation loss."""

    metric = "loss"
    greater_is_better = False
    shown = ("perplexity", "bits_per_char")  # on each evaluation's log line

    def __init__(self, pad_id: int) -> None:
        self.pad_id = pad_id

    def collate(self, items: Sequence[LMItem]) -> dict[str, Tensor]:
        """(B, T) inputs, targets (``-100`` at padding) and mask; ``num_chars`` (B,)."""
        ids, mask = pad_batch([it.ids for it in items], self.pad_id)
        real = mask[:, 1:]  # the positions that have a target (a row's last token has none)
        return {
            "input_ids": ids[:, :-1].masked_fill(~real, self.pad_id),
            "attention_mask": real,
            "labels": ids[:, 1:].masked_fill(~real, IGNORE_INDEX),
            "num_chars": torch.tensor([it.chars for it in items], dtype=torch.long),
        }

    @staticmethod
    def _nll(model: nn.Module, batch: dict[str, Tensor], reduction: str) -> Tensor:
        logits = model(batch["input_ids"], batch["attention_mask"]).logits  # (B, T, V)
        return F.cross_entropy(
            logits.float().flatten(0, 1),
            batch["labels"].flatten(),
            ignore_index=IGNORE_INDEX,
            reduction=reduction,
        )

    def loss(self, model: nn.Module, batch: dict[str, Tensor]) -> tuple[Tensor, int]:
        return self._nll(model, batch, "mean"), int(batch["attention_mask"].sum())

    @torch.no_grad()
    def evaluate(self, model: nn.Module, batches: Iterable[dict[str, Tensor]]) -> dict[str, Any]:
        nll, tokens, chars = 0.0, 0, 0
        for batch in batches:
            nll += float(self._nll(model, batch, "sum"))
            tokens += int((batch["labels"] != IGNORE_INDEX).sum())
            chars += int(batch["num_chars"].sum())
        return nll_metrics(nll, tokens, chars)


def score_items(
    model: nn.Module, task: LanguageModelObjective, items: Sequence[LMItem], batch_size: int = 64
) -> dict[str, Any]:
    """``task.evaluate`` over ``items`` in batches, the model in eval mode on its device."""
    device = model_device(model)
    was_training = model.training
    model.eval()
    try:
        batches = (
            to_device(task.collate(items[i : i + batch_size]), device)
            for i in range(0, len(items), batch_size)
        )
        return task.evaluate(model, batches)
    finally:
        model.train(was_training)


# --------------------------------------------------------------------------------------
# Prediction: generation and scoring
# --------------------------------------------------------------------------------------
@dataclass
class Generation:
    """One prompt's continuation. ``finish_reason``: ``length`` (max_new_tokens reached),
    ``eos`` (the model ended the text) or ``stop`` (a stop string, cut off)."""

    prompt: str
    text: str  # the continuation only (without the prompt)
    tokens: int  # new tokens generated (those of a stop string included, an [EOS] not)
    finish_reason: str = "length"

    def format(self) -> str:
        return self.text

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class StopGeneration(Exception):
    """Raise it from a ``stream`` callback to end that continuation there: it comes back
    with the text streamed so far and ``finish_reason`` "cancelled" (in a batch, the other
    prompts go on). Any other exception from ``stream`` ends the whole call."""


@dataclass
class GenerationRequest:
    """One prompt and how to continue it: ``LMPredictor.generate``'s options for one prompt
    (``generate_batch`` takes one per prompt). ``seed``: this prompt's own generator.
    ``on_done(generation)``: called as soon as this prompt is finished, before the other
    prompts of its batch are (a server answers its request then). ``on_error(exc)``: for a
    request that joins a running batch (``generate_batch``'s ``more``) and is refused (its
    options, its prompt), the error goes there and the batch goes on (without it, the error
    ends the call)."""

    prompt: str = ""
    max_new_tokens: int = 200
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    repetition_penalty: float = 1.0
    stop: str | Sequence[str] | None = None
    seed: int | None = None
    stream: Callable[[str], None] | None = None
    on_done: Callable[[Generation], None] | None = None
    on_error: Callable[[Exception], None] | None = None


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _held_back(text: str, stops: Sequence[str]) -> int:
    """How many trailing characters of ``text`` must wait before being streamed: an
    unfinished UTF-8 character (byte-level BPE decodes it as U+FFFD until its last byte
    comes) and the start of a stop string."""
    end = len(text)
    while end > 0 and text[end - 1] == "\ufffd":
        end -= 1
    hold = 0
    for s in stops:
        for k in range(min(len(s) - 1, end), 0, -1):
            if text.endswith(s[:k], 0, end):
                hold = max(hold, k)
                break
    return len(text) - end + hold


class _Banned:
    """A ``Stepper`` whose logits of the ``banned`` ids are -inf (never sampled)."""

    def __init__(self, inner: Any, banned: Tensor) -> None:
        self.inner, self.banned = inner, banned

    def step(self, tokens: Tensor) -> Tensor:
        logits = self.inner.step(tokens)
        if self.banned.numel():
            logits = logits.index_fill(-1, self.banned, float("-inf"))
        return logits

    def reorder(self, index: Tensor) -> None:
        self.inner.reorder(index)

    def extend(self, other: _Banned) -> None:
        self.inner.extend(other.inner)


class _Continuation:
    """One prompt's continuation as its tokens come (``add``): its text (the prompt's
    decoding taken off), its end (EOS, a stop string: cut before it) and its stream (the
    text so far, less what may still change: ``_held_back``)."""

    def __init__(
        self,
        predictor: LMPredictor,
        ids: list[int],
        stops: list[str],
        stream: Callable[[str], None] | None,
    ) -> None:
        self.tokenizer, self.eos_id = predictor.tokenizer, predictor.eos_id
        self.ids, self.stops, self.stream = ids, stops, stream
        self.base = self.tokenizer.decode(ids)  # the prompt as the tokenizer gives it back
        self.new: list[int] = []
        self.text, self.sent, self.reason = "", 0, "length"

    def _decoded(self) -> str:
        full = self.tokenizer.decode(self.ids + self.new)
        start = len(self.base) if full.startswith(self.base) else _common_prefix(full, self.base)
        return full[start:]

    def _send(self, upto: int) -> None:
        if self.stream is not None and upto > self.sent:
            self.stream(self.text[self.sent : upto])
        self.sent = max(self.sent, upto)

    def add(self, token: int) -> bool:
        """Take the next token; True when the continuation is finished."""
        if token == self.eos_id:
            self.reason = "eos"
            return True
        self.new.append(token)
        text = self._decoded()
        cuts = [i for s in self.stops if (i := text.find(s)) >= 0]
        if cuts:
            self.text, self.reason = text[: min(cuts)], "stop"
            return True
        self.text = text
        try:
            self._send(len(text) - _held_back(text, self.stops))
        except StopGeneration:
            self.reason = "cancelled"
            return True
        return False

    def result(self, prompt: str) -> Generation:
        """The ``Generation``, the rest of the text streamed first (unless cancelled)."""
        if self.reason != "cancelled":
            try:
                self._send(len(self.text))
            except StopGeneration:
                self.reason = "cancelled"
        return Generation(prompt, self.text, len(self.new), self.reason)


@dataclass
class _Row:
    """One prompt of a batch: its tokens, its sampling options, its continuation."""

    prompt: str
    ids: list[int]
    options: RowOptions
    text: _Continuation
    on_done: Callable[[Generation], None] | None = None
    result: Generation | None = None

    def finish(self) -> None:
        """The row is done: its ``Generation``, handed to ``on_done``."""
        self.result = self.text.result(self.prompt)
        if self.on_done is not None:
            self.on_done(self.result)


class LMPredictor(Predictor):
    """What ``attnkit.load(run)`` returns for an lm run: ``generate`` (sampling or greedy,
    optionally streamed), ``predict`` (the same, for ``attnkit predict``), ``perplexity``."""

    task = "lm"
    capabilities = frozenset({"generate", "predict", "score", "perplexity"})

    def __init__(
        self, model: nn.Module, tokenizer: Tokenizer, config: Recipe, run_dir=None
    ) -> None:
        self.model = model.eval()
        self.device = model_device(model)
        self.tokenizer = tokenizer
        self.config = config
        self.run_dir = run_dir
        self.max_len = int(config.model.max_len)
        self.documents = corpus_kind(config.data) == "documents"
        self.eos_id = _eos_id(tokenizer)
        # tokens a sample may never be: the special ones training never asks for
        # ([EOS] too for a model of one text, which never ends; [UNK] stays possible)
        never = ["[PAD]", "[CLS]", "[SEP]", "[MASK]", "[BOS]"]
        never += [] if self.documents else ["[EOS]"]
        banned = [i for t in never if (i := tokenizer.token_to_id(t)) is not None]
        self.banned = torch.tensor(banned, dtype=torch.long, device=self.device)

    # ------------------------------------------------------------------ prompts
    def _start_ids(self) -> list[int]:
        """What an empty prompt starts from: a line break for a model of one text (if its
        tokenizer spells it), else [EOS] (a document's start), else [BOS]."""
        if not self.documents:
            ids = self.tokenizer.encode("\n")
            if ids and self.tokenizer.token_to_id("[UNK]") not in ids:
                return ids
        for token in ("[EOS]", "[BOS]"):
            if (i := self.tokenizer.token_to_id(token)) is not None:
                return [i]
        raise InputError("this run's tokenizer has no token to start an empty prompt from")

    def _prompt_ids(self, prompt: str, stacklevel: int = 3) -> list[int]:
        # the model reads the last max_len tokens: a huge prompt is first cut to its last
        # max_text_chars(max_len) characters, before tokenization
        prompt, cut = cut_text(prompt, self.max_len, keep="tail")
        ids = self.tokenizer.encode(prompt) if prompt else []
        unk = self.tokenizer.token_to_id("[UNK]")
        if prompt and unk is not None and unk in ids:
            warnings.warn(
                f"the prompt has text this run's tokenizer does not know: read as [UNK] "
                f"({ids.count(unk)} token(s))",
                stacklevel=stacklevel,
            )
        if self.documents:
            ids = self._start_ids() + ids
        elif not ids:
            ids = self._start_ids()
        if cut:
            warnings.warn(
                f"the prompt has more than {len(prompt):,} characters, more than the context "
                f"({self.max_len} tokens) can use: the model reads its last tokens (at most "
                f"{self.max_len})",
                stacklevel=stacklevel,
            )
        elif len(ids) > self.max_len:
            warnings.warn(
                f"the prompt has {len(ids)} tokens, more than the context ({self.max_len}): "
                f"the model reads its last {self.max_len}",
                stacklevel=stacklevel,
            )
        return ids

    # ------------------------------------------------------------------ generation
    def generate(
        self,
        prompt: str | Sequence[str] = "",
        max_new_tokens: int = 200,
        temperature: float = 1.0,
        top_k: int = 0,
        top_p: float = 1.0,
        repetition_penalty: float = 1.0,
        stop: str | Sequence[str] | None = None,
        seed: int | None = None,
        stream: Callable[[str], None] | None = None,
        batch_size: int = 1,
    ) -> list[Generation]:
        """Continue each prompt (a string or a list of them).

        temperature 0: greedy; else sample from softmax(logits / temperature) after top-k
        (0: off) and top-p (1: off) filtering. repetition_penalty > 1 discourages tokens
        already in the prompt or output. ``stop``: strings that end a continuation (it is
        cut before the first one). ``seed``: reproducible sampling (one generator for the
        whole call). ``stream(piece)`` gets the continuation's text as it is produced (for
        several prompts: one after the other; ``StopGeneration`` from it ends that one);
        the pieces add up to ``Generation.text``. ``batch_size``: how many prompts are
        continued together (left-padded, one forward pass a token for all of them: faster
        for many prompts; greedy gives each what it gets alone, up to float rounding; a
        prompt that is done makes room for the next one, which joins between two tokens);
        1: one after the other. Each batch streams its prompts' pieces interleaved, so a
        stream needs ``batch_size=1``.
        """
        prompts = [prompt] if isinstance(prompt, str) else list(prompt)
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InputError(f"batch_size must be an integer >= 1, got {batch_size!r}")
        if stream is not None and batch_size > 1 and len(prompts) > 1:
            raise InputError("stream takes one prompt at a time: use batch_size=1 with it")
        options = {
            "max_new_tokens": max_new_tokens,
            "temperature": temperature,
            "top_k": top_k,
            "top_p": top_p,
            "repetition_penalty": repetition_penalty,
            "stop": stop,
            "stream": stream,
        }
        requests = [GenerationRequest(p, **options) for p in prompts]
        check_params(seed=seed)
        rows = self._rows(requests, stacklevel=4)
        if seed is not None:  # sampling draws on the model's device, so does the generator
            generator = torch.Generator(device=self.device).manual_seed(int(seed))
            for row in rows:  # one generator for the whole call
                row.options = dataclasses.replace(row.options, generator=generator)
        if batch_size == 1:
            return [g for row in rows for g in self._continue([row])]
        waiting = list(rows)  # in order: each batch starts with the next ones, and those
        # after them join it as its rows finish

        rule = JoinRule()

        def more(going: int, first: int) -> list[_Row]:
            if not rule.ready(len(waiting), batch_size - going, going):
                return []
            taken = waiting[: batch_size - going]
            del waiting[: len(taken)]
            return taken

        out: list[Generation] = []
        while waiting:
            start = waiting[:batch_size]
            del waiting[:batch_size]
            out.extend(self._continue(start, more))
        return out

    def generate_batch(
        self,
        requests: Sequence[GenerationRequest],
        more: Callable[[int], Sequence[GenerationRequest]] | None = None,
    ) -> list[Generation]:
        """Continue several prompts together, each with its own options (a
        ``GenerationRequest`` each: what ``attnkit serve`` does with concurrent requests):
        left-padded, one forward pass a token for all the prompts still going; a prompt
        that is done (its EOS, a stop string, its ``max_new_tokens``, ``StopGeneration``
        from its ``stream``) leaves the batch, and its ``on_done`` gets its ``Generation``
        at once. Each gets what ``generate`` gives it alone (its seed, its stream), up to
        float rounding. Warnings about a prompt name it:
        "input 2: the prompt has ...", for two requests or more (or with ``more``).

        ``more(going)``: continuous batching. Asked before each new token, with the number
        of prompts still going, for requests to add now (none: an empty list); theirs are
        read (their prompt's forward pass) and they go on with the others. They are
        numbered after the requests so far, and come last in the result, in the order
        they joined. The call ends when no prompt is going."""
        self._requests_only(requests)
        numbered = len(requests) > 1 or more is not None
        rows = self._seeded(self._rows(requests, stacklevel=4, numbered=numbered), requests)
        if more is None:
            return self._continue(rows)
        fetch = more
        return self._continue(rows, lambda going, first: self._joining(fetch(going), first))

    @staticmethod
    def _requests_only(requests: Sequence[Any]) -> None:
        for i, r in enumerate(requests, 1):
            if not isinstance(r, GenerationRequest):
                raise InputError(f"request {i} must be a GenerationRequest, got {type(r).__name__}")

    def _seeded(self, rows: list[_Row], requests: Sequence[GenerationRequest]) -> list[_Row]:
        """Each row with its request's own generator, where it has a seed."""
        for row, r in zip(rows, requests, strict=True):
            if r.seed is not None:
                check_params(seed=r.seed)
                gen = torch.Generator(device=self.device).manual_seed(int(r.seed))
                row.options = dataclasses.replace(row.options, generator=gen)
        return rows

    def _joining(self, requests: Sequence[GenerationRequest], first: int) -> list[_Row]:
        """The rows of requests that join a running batch (numbered from ``first``): one
        refused goes to its ``on_error`` (if it has one: else the error is raised)."""
        self._requests_only(requests)
        rows = []
        for k, r in enumerate(requests):
            try:
                rows += self._seeded(self._rows([r], 5, numbered=True, first=first + k), [r])
            except (ValueError, TypeError) as exc:  # (AttnkitError is a ValueError)
                if r.on_error is None:
                    raise
                r.on_error(exc)
        return rows

    def _rows(
        self,
        requests: Sequence[GenerationRequest],
        stacklevel: int,
        numbered: bool = False,
        first: int = 1,
    ) -> list[_Row]:
        """Each request checked and its prompt tokenized (warnings name the caller's line;
        ``numbered``: each prompt's as "input N: ...", N counted from ``first``, as a
        predictor names the texts of one call)."""
        rows = []
        for i, r in enumerate(requests, first):
            if not isinstance(r.prompt, str):
                raise InputError(f"prompt {i} must be a string, got {type(r.prompt).__name__}")
            stops = [r.stop] if isinstance(r.stop, str) else list(r.stop or [])
            self._check(r.max_new_tokens, r.temperature, r.top_k, r.top_p,
                        r.repetition_penalty, stops)  # fmt: skip
            options = RowOptions(
                max_new_tokens=int(r.max_new_tokens),
                temperature=float(r.temperature),
                top_k=int(r.top_k),
                top_p=float(r.top_p),
                repetition_penalty=float(r.repetition_penalty),
            )
            if numbered:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    ids = self._prompt_ids(r.prompt)
                for w in caught:
                    warnings.warn(f"input {i}: {w.message}", w.category, stacklevel=stacklevel - 1)
            else:
                ids = self._prompt_ids(r.prompt, stacklevel)
            text = _Continuation(self, ids, stops, r.stream)
            rows.append(_Row(r.prompt, ids, options, text, r.on_done))
        return rows

    @staticmethod
    def _check(
        max_new_tokens: Any,
        temperature: float,
        top_k: int,
        top_p: float,
        repetition_penalty: float,
        stops: list[Any],
    ) -> None:
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int):
            raise InputError(f"max_new_tokens must be an integer, got {max_new_tokens!r}")
        check_params(  # the ranges of the CLI and the server (attnkit.core.params)
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            repetition_penalty=repetition_penalty,
        )
        for s in stops:
            if not isinstance(s, str) or not s:
                raise InputError(f"a stop string must be a non-empty string, got {s!r}")

    def _batch(self, rows: Sequence[_Row]) -> Joining:
        """``rows``' prompts left-padded to the longest and read by a stepper (banned
        tokens never sampled): what ``sample_rows`` starts from, or what joins it."""
        width = max(len(r.ids) for r in rows)
        x = torch.full((len(rows), width), self.tokenizer.pad_id, dtype=torch.long)
        mask = torch.zeros(len(rows), width, dtype=torch.bool)
        for i, r in enumerate(rows):  # left padding: every row's last token is real
            x[i, width - len(r.ids) :] = torch.tensor(r.ids, dtype=torch.long)
            mask[i, width - len(r.ids) :] = True
        x, mask = x.to(self.device), mask.to(self.device)
        padded = not bool(mask.all())
        stepper = _Banned(self.model.stepper(x, mask if padded else None), self.banned)
        context_mask = mask[:, :-1] if padded else None
        return Joining(stepper, x[:, -1], [r.options for r in rows], x[:, :-1], context_mask)

    @staticmethod
    def _going(rows: Sequence[_Row]) -> list[_Row]:
        """The rows with tokens to make; the others are finished now."""
        for r in rows:
            if r.options.max_new_tokens <= 0:
                r.finish()
        return [r for r in rows if r.options.max_new_tokens > 0]

    @inference
    def _continue(
        self,
        rows: Sequence[_Row],
        more: Callable[[int, int], list[_Row]] | None = None,
    ) -> list[Generation]:
        """Continue ``rows`` together (``sample_rows``): the prompts left-padded to the
        longest, each row's tokens fed to its ``_Continuation``, each row finished as it
        leaves the batch. ``more(going, first)``: rows that join before the next token
        (``going`` rows go on; ``first``: the number the first of them gets, from 1),
        appended to the result in that order."""
        every = list(rows)
        going = self._going(rows)  # sample_rows' row i is going[i]

        def join(live: int) -> Joining | None:
            assert more is not None
            new = more(live, len(every) + 1)
            every.extend(new)
            new = self._going(new)
            going.extend(new)
            return self._batch(new) if new else None

        if going:
            start = self._batch(going)
            sample_rows(
                start.model,
                start.start,
                start.rows,
                on_token=lambda i, token: going[i].text.add(token),
                context=start.context,
                context_mask=start.context_mask,
                on_finish=lambda i: going[i].finish(),
                join=join if more is not None else None,
            )
        done = [r.result for r in every if r.result is not None]
        if len(done) != len(every):
            raise RuntimeError("a prompt of the batch was left unfinished")
        return done

    def predict(self, texts: str | Sequence[str], **options: Any) -> list[Generation]:
        """``generate`` (what ``attnkit predict`` calls: one continuation per text)."""
        return self.generate(texts, **options)

    def to_json(self, generations: Sequence[Generation]) -> str:
        return "\n".join(json.dumps(g.to_dict(), ensure_ascii=False) for g in generations)

    # ------------------------------------------------------------------ scoring
    def score(self, text: str, batch_size: int = 64) -> dict[str, Any]:
        """loss, perplexity, bits per token / character of ``text`` (a review model reads
        it after [EOS], so that its first token is scored too; a model of one text scores
        every token after the first). Longer than the context: cut as in training."""
        if not isinstance(text, str) or not text.strip():
            raise InputError("the text is empty or whitespace only")
        ids, widths = token_stream(self.tokenizer, [text], documents=False)
        if self.documents and self.eos_id is not None:
            ids, widths = [self.eos_id, *ids], [0, *widths]
        items = cut_stream(ids, widths, self.max_len)
        if not items:
            raise InputError("the text is a single token: there is nothing to predict")
        report = score_items(
            self.model, LanguageModelObjective(self.tokenizer.pad_id), items, batch_size
        )
        if not math.isfinite(report["loss"]):  # NaN weights: an error, not a NaN perplexity
            raise NonFiniteError(NON_FINITE)
        return report

    def perplexity(self, text: str) -> float:
        """e^(mean NLL per token) of ``text`` (see ``score``)."""
        return float(self.score(text)["perplexity"])


# --------------------------------------------------------------------------------------
# The task
# --------------------------------------------------------------------------------------
class LanguageModelSpec(TaskSpec):
    """Causal language modelling with a GPT (``model.arch: gpt``)."""

    name = "lm"
    endpoint = "generate"
    model_family = "lm"
    default_arch = "gpt"
    reads = READS

    def prepare_data(self, cfg: Recipe, tokenizer: Tokenizer | None, log: Log) -> PreparedData:
        return prepare_data(cfg, tokenizer, log)

    def model_inputs(
        self, cfg: Recipe, tokenizer: Tokenizer, run_info: dict[str, Any]
    ) -> dict[str, Any]:
        return {
            "vocab_size": tokenizer.vocab_size,
            "pad_id": tokenizer.pad_id,
            "max_len": cfg.data.max_len,
            "eos_id": _eos_id(tokenizer),
        }

    def objective(self, cfg: Recipe, data: PreparedData) -> LanguageModelObjective:
        return LanguageModelObjective(data.tokenizer.pad_id)

    def item_length(self, item: LMItem) -> int:
        return len(item.ids) - 1

    def predictor(
        self,
        model: nn.Module,
        tokenizer: Tokenizer,
        cfg: Recipe,
        run: RunDir,
        saved: dict[str, Any],
    ) -> LMPredictor:
        return LMPredictor(model, tokenizer, cfg, run.path)

    def evaluate(
        self,
        predictor: Any,
        split: str,
        data_dir: str | None = None,
        batch_size: int = 128,
        **options: Any,
    ) -> dict[str, Any]:
        """loss / perplexity / bits per token and character on ``split``: validation (the
        held-out part, cut as in training) or test (the dataset's test text; for one
        without, e.g. Tiny Shakespeare, the validation split, as the result's ``note``
        says)."""
        if options.get("beam", 1) != 1:
            raise InputError("--beam is for translate runs; an lm run's evaluation scores text")
        if split not in ("validation", "test"):
            raise RunError(f"lm runs are evaluated on validation or test, got {split!r}")
        cfg = predictor.config
        if data_dir is not None:
            cfg = dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, data_dir=data_dir))
        result: dict[str, Any] = {"split": split}
        test = read_test(cfg) if split == "test" else None
        if test is not None:
            texts, documents = test
        else:
            if split == "test":
                result["split"] = "validation"
                result["note"] = f"{cfg.data.name} has no test split: this is its validation split"
            corpus = read_corpus(cfg)
            texts, documents = corpus.validation, corpus.documents
        items = make_sequences(predictor.tokenizer, texts, documents, cfg.data.max_len)
        if not items:
            raise RunError(f"the {result['split']} split of {cfg.data.name} is empty")
        task = LanguageModelObjective(predictor.tokenizer.pad_id)
        result.update(score_items(predictor.model, task, items, batch_size))
        result["num_sequences"] = len(items)
        return result


SPEC = LanguageModelSpec()  # task lm (attnkit.tasks.registry.BUILTIN)

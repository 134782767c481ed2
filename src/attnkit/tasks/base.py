"""The ``TaskSpec`` protocol: what a task tells ``attnkit.app.api`` (and so the CLI) to do.

A task owns everything that depends on data: reading it, the tokenizer, encoding, the
Trainer's loss and metrics, evaluation on a split and the predictor ``attnkit.load``
returns. ``attnkit.app.api`` runs the same steps for every task, asking the spec at each one:

    train:    spec.check_data(cfg); spec.validate(cfg) (when the recipe is read)
              spec.check_resume(cfg, saved)               --resume only
              run_config.adopt_pretrained(cfg, tokenizer, log)   new runs: init_from's sizes
              data = spec.prepare_data(cfg, tokenizer, log)
              cfg.model <- spec.model_inputs(cfg, data.tokenizer, data.run_info)
              model = cfg.model.build();  spec.init_model(model, cfg, data, log)
              Trainer(model, spec.objective(cfg, data), data.train, ...).fit()
              spec.after_training(run, cfg, data, log)
    load:     spec.predictor(model, tokenizer, cfg, run, saved)
    evaluate: spec.evaluate(predictor, split, ...)

Twelve hooks in all (``data_kind`` and ``item_length`` besides those above). "Task" means
the recipe's ``task:`` and its ``TaskSpec``; what the Trainer optimises is the task's
*objective* (``attnkit.runtime.training.Objective``: collate, loss, evaluate, metric). What
only classification has (ensembles, calibration) lives in ``attnkit.tasks.classify``.

A new task subclasses ``TaskSpec``, sets ``name`` / ``model_family`` and overrides
``prepare_data``, ``objective`` and ``predictor`` (the rest have defaults; its predictor
subclasses ``Predictor`` and declares its ``capabilities``), then registers an instance
(``attnkit.tasks.register_task``). Its data: ``reads`` names the kinds of examples it reads
from the catalogue (``attnkit.data.catalogue``), ``data_settings`` the dataclass of its
recipe's data section. docs/extending.md walks through one.

Every step is given the run's configuration: an ``attnkit.tasks.run_config.RunConfig``,
which a task reads through the ``Recipe`` protocol here (reading a recipe needs the task
registry, and the registry imports the tasks: a task module imports neither).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

from attnkit.core.config import short_repr
from attnkit.core.errors import ConfigError, RunError
from attnkit.data import tokenization
from attnkit.data.catalogue import check_data, find_kind, kinds_of, names_reading
from attnkit.data.settings import DataConfig, TokenizerConfig
from attnkit.data.tokenization import Tokenizer, split_long
from attnkit.models import PretrainedSource, archs, open_pretrained
from attnkit.runtime.device import FP32, Precision
from attnkit.runtime.training_config import TrainingConfig

if TYPE_CHECKING:
    import torch
    from torch import nn

    from attnkit.runtime.run import RunDir
    from attnkit.runtime.training import Objective

__all__ = [
    "CAPABILITIES",
    "Predictor",
    "PreparedData",
    "Recipe",
    "RunError",
    "TaskSpec",
    "get_tokenizer",
    "log_info",
    "one_line",
    "open_pretrained_source",
    "with_data_dir",
]

Log = Callable[[str], None]


class Recipe(Protocol):
    """A run's configuration as a task reads it: ``attnkit.tasks.run_config.RunConfig``
    (a recipe or a run's config.json, read and checked), each section a dataclass.

    ``task``: the task's name; ``data``: its ``data_settings`` instance (a ``DataConfig``);
    ``tokenizer``: a ``TokenizerConfig``; ``model``: the config of the model
    (``attnkit.models.ModelConfig``: the task's family, the recipe's arch); ``training``: a
    ``TrainingConfig``."""

    task: str
    data: Any
    tokenizer: TokenizerConfig
    model: Any
    training: TrainingConfig

    def to_dict(self) -> dict[str, Any]:
        """The whole configuration, as config.json saves it."""
        ...


R = TypeVar("R", bound=Recipe)


def log_info(line: str) -> None:
    """The default ``Log`` of the tasks' functions: ``line`` to the ``attnkit.tasks``
    logger at INFO (shown as ``attnkit.core.logs`` says), never a bare print."""
    logging.getLogger("attnkit.tasks").info(line)


@dataclass
class PreparedData:
    """A task's training data, encoded.

    train / validation: the items its Trainer task collates (e.g. (token ids, label));
    summary: the log line describing them; run_info: what loading the run will need,
    saved in config.json (e.g. the label names); extras: anything else the task keeps
    (e.g. validation references for BLEU)."""

    tokenizer: Tokenizer
    train: Sequence[Any]
    validation: Sequence[Any]
    summary: str = ""
    run_info: dict[str, Any] = field(default_factory=dict)
    extras: dict[str, Any] = field(default_factory=dict)


# what a predictor can declare (``Predictor.capabilities``): a public method of that name,
# or an option of one (``OPTIONS``); the CLI verbs and the server's endpoints ask for these
CAPABILITIES: dict[str, str] = {
    "predict": "label / fill in / score / continue texts: what `attnkit predict` prints",
    "explain": "save a figure explaining one text (`attnkit predict --explain`)",
    "attention": "one text's tokens and self-attention per layer (the server's attention)",
    "ngram_contributions": "a bag-of-n-grams model's exact explanation of one text",
    "logits": "class logits of encoded texts",
    "probabilities": "class probabilities of encoded texts",
    "sentence_pairs": "predict(texts, pairs=...) reads each text's second sentence (--pair)",
    "translate": "decode texts (`attnkit translate`, POST /v1/translate)",
    "chat": "answer one message (`attnkit chat`, POST /v1/chat)",
    "trace": "greedy decoding step by step (`attnkit translate --trace`)",
    "alignment": "one text's cross-attention alignment (the server's alignment)",
    "show_attention": "save the alignment heatmap (`attnkit translate --show-attention`)",
    "fill_mask": "the likeliest tokens for each [MASK] of a text",
    "next_sentence": "P(second sentence follows the first) from an NSP head",
    "generate": "continue a prompt (`attnkit generate`, POST /v1/generate)",
    "score": "loss / perplexity of a text",
    "perplexity": "perplexity of texts",
    "embed": "contextual embeddings of texts",
    "tag": "label each word of texts (`attnkit tag`, POST /v1/tag)",
    "entities": "the entities of one text",
    "answer": "answer a question from a context (POST /v1/answer)",
    "answer_batch": "answer (question, context) pairs (`attnkit answer`)",
}
# capabilities that are an option of a method rather than a method: name -> (method, keyword)
OPTIONS: dict[str, tuple[str, str]] = {"sentence_pairs": ("predict", "pairs")}


class Predictor:
    """What ``attnkit.load(run)`` returns: a run's model ready for inference, and what it
    can do with it. Each task's predictor subclasses it (``TaskSpec.predictor`` returns one).

    Attributes (set by the subclass's ``__init__``; ``precision`` by ``attnkit.load``):
        task: the task's name (``classify``, ``translate``, ...)
        model: the model, in eval mode (an ``OnnxModel`` for an ONNX export)
        tokenizer: the run's tokenizer
        config: the run's ``RunConfig`` (a ``Recipe``). Read it, never change it: a task's
            ``evaluate`` with other options (``data_dir``, ``beam``, ...) works on a copy
            (``with_data_dir``) or takes them as arguments
        run_dir: the run directory (None: a predictor built in memory)
        device: where inputs go (the model's device)
        precision: what the ``@attnkit.runtime.device.inference`` methods compute in (autocast);
            fp32 until ``attnkit.load`` sets it from its ``precision`` argument
        members: the single-run predictors behind it: itself (an ensemble, which has no
            model, tokenizer or device of its own: its runs' predictors)

    ``capabilities`` (per class) names what the predictor can do, from ``CAPABILITIES``:
    each is a public method of that name, except the options in ``OPTIONS`` (a keyword of
    a method, e.g. ``sentence_pairs``: ``predict(texts, pairs=...)``). The CLI verbs and the
    server's endpoints ask ``can(name)`` before they call one, never ``hasattr``; a method
    may still refuse an input its model cannot serve (``InputError``, e.g. attention maps of
    a GRU). tests/tasks/test_base_predictor.py checks every declared name against the class.
    """

    task: str = ""
    capabilities: ClassVar[frozenset[str]] = frozenset()

    model: nn.Module
    tokenizer: Tokenizer
    config: Recipe
    run_dir: Path | None = None
    device: torch.device
    precision: Precision = FP32

    def can(self, capability: str) -> bool:
        """Whether this predictor declares ``capability`` (a name of ``CAPABILITIES``)."""
        return capability in self.capabilities

    @property
    def members(self) -> list[Predictor]:
        """The single-run predictors behind this one: itself (an ensemble: its runs)."""
        return [self]


def with_data_dir(cfg: R, data_dir: str | None) -> R:
    """``cfg`` reading its dataset from ``data_dir`` (None or empty: ``cfg`` itself): a
    copy, so an evaluation on other data leaves the loaded predictor's config as it was."""
    if not data_dir:
        return cfg
    return dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, data_dir=data_dir))


class TaskSpec:
    """One task (the recipe's ``task:``). Subclasses override what differs."""

    name: str = ""
    model_family: str = ""  # which models it trains (attnkit.models.MODEL_CONFIGS)
    default_arch: str = "transformer"
    # its recipe's data section: DataConfig, or a subclass declaring the task's own settings
    # (a key of another task's section is refused, naming that task)
    data_settings: type[DataConfig] = DataConfig
    # the kinds of examples it reads (attnkit.data.kinds.KINDS), preferred first: any
    # catalogued dataset with a reader of one of them is its data.name, read through the
    # catalogue (attnkit.data.catalogue.read); () reads its data itself, unchecked
    reads: tuple[str, ...] = ()
    # how ``attnkit serve`` serves its runs: the endpoint POST /v1/<endpoint> (classify,
    # translate, chat, generate, tag, answer; attnkit.app.serve.handlers); None: not served
    endpoint: str | None = None
    # the outputs of its models' ONNX graph (attnkit export --format onnx); (): no export
    onnx_outputs: tuple[str, ...] = ()
    # what the refusal of another model.arch says it does ("": needs the family's archs)
    trains: str = ""

    # ------------------------------------------------------------------ recipe
    def data_kind(self, cfg: Recipe) -> str:
        """Which of ``reads`` the recipe's dataset is read as (the first it offers)."""
        kind = find_kind(cfg.data, self.reads)
        if kind is None:
            names = names_reading(self.reads)
            listed = f"{', '.join(names[:-1])} or {names[-1]}" if len(names) > 1 else names[0]
            raise ConfigError(
                f"task {self.name} reads data.name {listed}, got {short_repr(cfg.data.name)}"
            )
        return kind

    def check_data(self, cfg: Recipe) -> None:
        """Recipe checks of the data (before ``validate``): its dataset is one this task
        reads, with the settings its reader needs (the user's files: ``data.train``)."""
        if self.reads:
            check_data(cfg.data, self.data_kind(cfg))

    def validate(self, cfg: Recipe) -> None:
        """Task-level recipe checks (the model config checks its own): raise ConfigError."""

    # ------------------------------------------------------------------ training
    def check_resume(self, cfg: Recipe, saved: dict[str, Any]) -> None:
        """Refuse (``RunError``) to resume a run whose data this code would pick otherwise
        than the code that started it (``saved["format"]`` says which wrote it)."""

    def prepare_data(self, cfg: Recipe, tokenizer: Tokenizer | None, log: Log) -> PreparedData:
        """Read, split (``attnkit.data.split.split_examples``), tokenize (training the
        tokenizer when ``tokenizer`` is None) and encode the training data."""
        raise NotImplementedError

    def model_inputs(
        self, cfg: Recipe, tokenizer: Tokenizer, run_info: dict[str, Any]
    ) -> dict[str, Any]:
        """The model-config fields that come from the data: by default the vocabulary, the
        padding id and the longest sequence, as the model config takes them
        (``ModelConfig.data_sizes``: a pretrained BERT keeps its own)."""
        return cfg.model.data_sizes(tokenizer, cfg.data.max_len)

    def init_model(self, model: nn.Module, cfg: Recipe, data: PreparedData, log: Log) -> None:
        """Prepare a freshly built model before training (new runs only). Default: copy
        the pretrained weights of ``model.init_from`` (``AttnkitModel.load_pretrained``)."""
        if cfg.model.pretrained is not None:
            model.load_pretrained(open_pretrained_source(cfg.model.pretrained), log)

    def objective(self, cfg: Recipe, data: PreparedData) -> Objective:
        """The object the Trainer calls: ``collate``, ``loss``, ``evaluate``, ``metric``."""
        raise NotImplementedError

    def item_length(self, item: Any) -> int:
        """Tokens an item occupies once padded (for length-bucketed batching)."""
        return len(item[0])

    def after_training(self, run: RunDir, cfg: Recipe, data: PreparedData, log: Log) -> None:
        """Work on the finished run (e.g. calibration). Default: nothing."""

    # ------------------------------------------------------------------ using a run
    def predictor(
        self,
        model: nn.Module,
        tokenizer: Tokenizer,
        cfg: Recipe,
        run: RunDir,
        saved: dict[str, Any],
    ) -> Predictor:
        """What ``attnkit.load`` returns (``saved``: the run's config.json): a ``Predictor``
        whose ``capabilities`` say what the CLI verbs and the server may ask of it."""
        raise NotImplementedError

    def evaluate(
        self,
        predictor: Predictor,
        split: str,
        data_dir: str | None = None,
        batch_size: int = 128,
        **options: Any,
    ) -> dict[str, Any]:
        """Metrics of a loaded run on a split of its dataset. ``data_dir`` and the
        ``options`` apply to this call only: read the data with ``with_data_dir(predictor.
        config, data_dir)``, never by changing ``predictor.config``."""
        raise RunError(f"{self.name} runs have no evaluation on a labelled {split} split")


def task_archs(spec: TaskSpec) -> list[str]:
    """The ``model.arch`` values ``spec`` trains (its family's)."""
    return archs(spec.model_family)


def arch_error(spec: TaskSpec, arch: str) -> str:
    """The one-line error for a ``model.arch`` that ``spec`` does not train."""
    if spec.trains:
        return f"task {spec.name} {spec.trains}, got {arch!r}"
    *rest, last = task_archs(spec)
    names = f"{', '.join(rest)} or {last}" if rest else last
    return f"task {spec.name} needs model.arch {names}, got {arch!r}"


def open_pretrained_source(init_from: str | Path) -> PretrainedSource:
    """The folder ``model.init_from`` names (``attnkit.models.open_pretrained``), with what
    the dataset its run trained on can be read as (``data_kinds``, from the catalogue: the
    models know no datasets)."""
    return open_pretrained(init_from, kinds_of=kinds_of)


_ESCAPES = {c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0))}
_ESCAPES.update({0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r", 0x2028: "\\u2028", 0x2029: "\\u2029"})


def one_line(text: str) -> str:
    """``text`` with its control characters and line breaks escaped (``\\n``, ``\\t``,
    ``\\x1b``, ...): what plain CLI output echoes, so that each input stays one line."""
    return text.translate(_ESCAPES)


def get_tokenizer(tk: TokenizerConfig, texts: Iterable[str], what: str, log: Log) -> Tokenizer:
    """The recipe's tokenizer: loaded from ``tokenizer.path``, else trained on ``texts``
    (``what`` describes them in the log line; a huge text is read in pieces, ``split_long``,
    which count the same words in bounded memory)."""
    if tk.path:
        return Tokenizer.load(tk.path)
    log(f"training a {tk.kind} tokenizer (vocab {tk.vocab_size}) on {what}")
    return tokenization.train_tokenizer(  # (looked up at call time: tests spy on it)
        (piece for text in texts for piece in split_long(text)),
        kind=tk.kind,
        vocab_size=tk.vocab_size,
        min_frequency=tk.min_frequency,
        lowercase=tk.lowercase,
    )

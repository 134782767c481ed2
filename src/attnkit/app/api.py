"""The Python API behind the CLI: ``train``, ``load``, ``evaluate``, ``calibrate``.

run = attnkit.train("nsmc-quick")           # a bundled recipe (attnkit.recipes()) or a file
clf = attnkit.load("runs/nsmc-quick")
clf.predict(["정말 재미있어요", "최악의 영화"])

mt = attnkit.load("runs/multi30k-transformer")      # task: translate
mt.translate(["Ein Mann fährt Fahrrad."], beam=5)
bot = attnkit.load("runs/chatbot-ko")                # task: chat
bot.chat("오늘 날씨 어때?", temperature=0.7)

Every verb runs the same steps for every task and asks the task's ``TaskSpec`` (looked up
in ``attnkit.tasks`` by the recipe's ``task:``) at each; nothing here knows a task by name.
"""

from __future__ import annotations

import dataclasses
import errno
import functools
import inspect
import logging
import os
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from attnkit.core.checkpoint import atomic_write_text
from attnkit.core.config import ConfigError
from attnkit.core.errors import AttnkitError, DataError, InputError
from attnkit.core.logs import verbosity
from attnkit.core.output_guard import cannot_write, check_output, staged_folder
from attnkit.core.version import __version__
from attnkit.data.tables import (
    DATA_FOLDER,
    PLACEHOLDER,
    RECORD_KEY,
    TABLE_KINDS,
    StagedTables,
    check_same_tables,
    file_splits,
    stage_tables,
)
from attnkit.interop.hf_dir import save_hf_directory
from attnkit.interop.onnx import ONNX_FILE, OnnxModel, export_onnx, onnx_signature
from attnkit.interop.quantize import INT8_WEIGHTS, QUANTIZATION, load_int8, quantize_int8, save_int8
from attnkit.models import archs_exporting, build_model
from attnkit.models.sizes import check_memory, check_training_memory, meta_model
from attnkit.runtime import distributed
from attnkit.runtime.device import (
    FP32,
    Precision,
    apply_threads,
    busy_note,
    default_threads,
    resolve_precision,
    threads_kept,
)
from attnkit.runtime.run import RunDir
from attnkit.runtime.tracking import check_trackers
from attnkit.runtime.training import Trainer, TrainResult, resolve_device, training_precision
from attnkit.tasks import classify, get_task
from attnkit.tasks.base import Predictor, RunError
from attnkit.tasks.run_config import RunConfig, adopt_pretrained, load_config, read_run_config

__all__ = ["RunError", "calibrate", "evaluate", "export", "load", "train"]


def _read_run(run: RunDir) -> tuple[RunConfig, dict[str, Any]]:
    """A run's config (as a RunConfig, with every model size) and its raw config.json; its
    sizes checked against sane bounds, the weights' shapes and the memory available before
    anything is built from them (``attnkit.models.sizes``)."""
    return read_run_config(run)


logger = logging.getLogger(__name__)


def _shown(function: Callable[..., Any]) -> Callable[..., Any]:
    """Run ``function`` (``train``) inside ``attnkit.core.logs.verbosity`` of its
    ``verbose`` argument (its lines are shown where the user configured nothing), and put
    torch's thread count back afterwards (``training.num_threads`` is for training only)."""
    signature = inspect.signature(function)

    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> Any:
        verbose = signature.bind(*args, **kwargs).arguments.get("verbose", True)
        with verbosity(bool(verbose)), threads_kept():
            return function(*args, **kwargs)

    return call


def _log_lines(log: Callable[[str], None] | None, verbose: bool) -> Callable[[str], None]:
    """The function a verb says its lines with: ``log`` if given, else attnkit's logger
    (INFO); nothing at all with ``verbose=False``."""
    if not verbose:
        return lambda *_: None
    return log if log is not None else logger.info


@_shown
def train(
    config: str | Path | RunConfig | None = None,
    out: str | Path | None = None,
    overrides: list[str] | None = None,
    resume: bool = False,
    force: bool = False,
    log: Callable[[str], None] | None = None,
    verbose: bool = True,
    callbacks: Sequence[Any] = (),
    device: str | None = None,
    threads: int | None = None,
    data: Any = None,
) -> TrainResult:
    """Train a model from a recipe into ``out`` (default ``runs/<recipe name>``). The recipe is
    a YAML file, else the name of a bundled recipe (``"nsmc-quick"``, ``attnkit.recipes()``;
    a file always wins), or a ``RunConfig``.

    ``resume=True`` continues ``out`` from its ``last/`` checkpoint with the run's own saved
    config (the recipe is not needed) and reproduces the uninterrupted trajectory.
    ``device`` (auto | cpu | cuda | cuda:N | mps) replaces ``training.device``, also when
    resuming: a run started on one machine can continue on another; ``threads`` replaces
    ``training.num_threads`` the same way. The first lines logged say which device,
    precision (``training.bf16: auto`` decides per machine) and threads were chosen, and why.

    Nothing is lost or mixed: ``out`` must be empty, an unfinished run (killed before its
    first checkpoint), or, with ``force``, a finished run, which is replaced only once the
    new run's recipe, device and data are checked and ready; a folder holding anything
    else is refused. The run directory is locked for the whole training (a second training
    into it is refused), and a run that fails before its first checkpoint leaves nothing.

    ``data``: your data in memory instead of the recipe's dataset: a pandas DataFrame, a
    ``datasets.Dataset`` / ``DatasetDict``, a list of dicts (the training split; validation
    is held out as for a file), or a dict of them by split (``train``, ``validation``,
    ``test``), read with the rules of ``data.name: file`` (``attnkit.data.tables``); file
    paths (one, or a dict by split) are read as ``data.train`` & co. would be. The run
    keeps a copy (``RUN/data/``) and records its rows and fingerprint, so evaluate,
    calibrate and resume read it wherever the run is; resuming with ``data`` checks it is
    the same data.

    Under ``torchrun`` (several processes, see ``attnkit.runtime.distributed``) rank 0 does all of
    this and prepares the data; the other processes receive its recipe and tokenizer,
    prepare the same data, and train on their shares of each batch without writing.

    What training says (device, data, model, evaluations) is logged through ``logging``
    (loggers under ``"attnkit"``, INFO; ``log``, a function taking a line, replaces it for
    the lines before training starts). Where no logging is configured the lines are shown
    on stdout and warnings on stderr, with a progress bar (a live one in Jupyter / Colab);
    ``verbose=False`` or ``logging.getLogger("attnkit").setLevel(logging.WARNING)`` silences
    all but warnings, the bar included. ``callbacks``: objects with any of ``on_start``,
    ``on_log``, ``on_eval``, ``on_best``, ``on_end`` (e.g. subclasses of ``attnkit.Callback``;
    see ``attnkit.runtime.callbacks``) that receive the metrics as training goes;
    ``training.report_to`` (tensorboard, csv) adds the built-in trackers.
    """
    log = _log_lines(log, verbose)
    if resume:
        if out is None:
            raise RunError("--resume needs the run directory (--out RUN)")
        run = RunDir(out)
        if not run.has_config() or not run.has_checkpoint():
            raise RunError(f"{run} has no resumable checkpoint (last/ is missing)")
        cfg, saved = _read_run(run)
        if data is not None:  # the same tables again, or refused
            check_same_tables(data, saved.get(RECORD_KEY), cfg.data, str(run))
    else:
        if config is None:  # (not the defaults' full NSMC training, silently)
            raise ConfigError("train needs a recipe: a YAML file, the name of a bundled recipe "
                              "(attnkit.recipes(), e.g. 'nsmc-quick') or a RunConfig")  # fmt: skip
        if isinstance(config, RunConfig):
            cfg = config
            if overrides:
                raise ConfigError("overrides apply to recipe files; change the RunConfig instead")
        else:
            if data is not None:  # (the staged files replace this placeholder)
                overrides = [*(overrides or []), *_TABLE_OVERRIDES]
            cfg = load_config(config, overrides)
        name = Path(config).stem if isinstance(config, (str, Path)) else "run"
        run = RunDir(out if out is not None else Path("runs") / name)
        saved = {}
    # a folder (or a place for one) that is writable, not a file, not inside another run
    _check_output(run.path if out is None else out, kind="folder", what="--out")
    if device is not None:
        cfg.training.device = device
    if threads is not None:
        cfg.training.num_threads = threads
    # the device and precision exist here? (before anything is read, written or removed)
    precision = training_precision(cfg.training, resolve_device(cfg.training.device))
    check_trackers(cfg.training.trackers)  # a missing tensorboard: said before any work
    where, _ = distributed.setup(resolve_device(cfg.training.device))
    if where.is_main:
        _log_machine_choices(cfg, precision, log)
    tables = None
    try:
        if data is not None and not resume:  # checked, and staged as the files to read
            cfg, tables = _stage_tables(cfg, data)
        if not where.is_main:  # rank 0 checks, locks and writes the run directory
            return _train(
                cfg, run, resume, saved, lambda *_: None, where, tables=tables, callbacks=callbacks
            )
        if not resume:
            _check_new_run_target(run, force)
        try:
            with run.lock():
                if not resume:
                    _check_new_run_target(run, force)  # again: it may have changed meanwhile
                return _train(
                    cfg, run, resume, saved, log, where, tables=tables, callbacks=callbacks
                )
        except OSError as exc:  # writing the run: read-only, full disk, no permission, ...
            if isinstance(exc, AttnkitError) or not _writing_in(run.path, exc):
                raise
            raise cannot_write(run.path, exc) from None
    finally:
        if tables is not None:
            tables.cleanup()
        distributed.finish()


# a recipe's data section once data= is given: the user's files, staged by _stage_tables
_TABLE_OVERRIDES = (
    "data.name=file",
    f"data.train={PLACEHOLDER}",
    "data.validation=null",
    "data.test=null",
)


def _stage_tables(cfg: RunConfig, data: Any) -> tuple[RunConfig, StagedTables | None]:
    """``cfg`` reading ``data`` (``train``'s data=): files as they are, or tables in memory
    as the user's files of the kind its task reads, staged by
    ``attnkit.data.tables.stage_tables``."""
    files = file_splits(data) or {"train": PLACEHOLDER}
    # a file named relative to this folder: recorded absolute, so that evaluate, resume and
    # the explorer find it from any other folder (a missing one is named as given)
    files = {s: os.path.abspath(f) if os.path.isfile(f) else f for s, f in files.items()}
    cfg = dataclasses.replace(
        cfg,
        data=dataclasses.replace(
            cfg.data, name="file", **{s: files.get(s) for s in ("train", "validation", "test")}
        ),
    )
    spec = get_task(cfg.task)
    if files["train"] != PLACEHOLDER:  # file paths: read as a recipe's data.train & co.
        spec.check_data(cfg)
        spec.validate(cfg)
        return cfg, None
    kind = spec.data_kind(cfg) if spec.reads else None
    if kind not in TABLE_KINDS:
        raise DataError(
            f"task {cfg.task} reads {kind or 'its own data'}: data= trains the tasks that read "
            "labelled texts, sentence pairs, parallel text or tagged tokens (classify, "
            "translate, chat, tag); write a file for it (data.name: file)"
        )
    tables = stage_tables(data, kind, cfg.data)
    try:
        tables.apply(cfg.data)
        spec.check_data(cfg)
        spec.validate(cfg)
    except BaseException:
        tables.cleanup()
        raise
    return cfg, tables


def _check_output(path: str | Path, **rules: Any) -> Path:
    """``attnkit.core.output_guard.check_output``, its refusal a ``RunError`` (what ``train``
    and ``export`` have always raised for an output folder they cannot use)."""
    try:
        return check_output(path, **rules)
    except InputError as exc:
        raise RunError(str(exc)) from None


def _writing_in(folder: Path, exc: OSError) -> bool:
    """True if ``exc`` came from writing in ``folder``: it names a path there (or none, with
    an errno that only writing gives)."""
    if exc.filename is None:
        return exc.errno in (errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
    try:
        here = Path(os.path.abspath(folder))
        return Path(os.path.abspath(os.fsdecode(exc.filename))).is_relative_to(here)
    except (TypeError, ValueError):
        return False


PRECISIONS = ("auto", "fp32", "bf16")


def _log_machine_choices(cfg: RunConfig, precision: Precision, log) -> None:
    """The first lines of a training log: device, precision and threads, and why; one
    warning line (stderr) where bf16 was forced on a device that only emulates it."""
    device = resolve_device(cfg.training.device)
    threads = cfg.training.num_threads or default_threads()
    source = (
        "training.num_threads" if cfg.training.num_threads else "the cores this process may use"
    )
    log(f"device: {device}; precision: {precision.name} ({precision.reason})")
    if device.type == "cpu":
        log(f"threads: {threads} ({source}; --threads or training.num_threads to change)")
        busy = busy_note(threads)
        if busy:
            log(busy)
    if precision.emulated:
        logger.warning(
            "training.bf16 is true but %s has no native bf16: it is emulated here and much "
            "slower than fp32 (~20x on a CPU; use auto or false)",
            device,
        )


def _check_new_run_target(run: RunDir, force: bool) -> None:
    """Refuse an ``out`` a new run must not write into (see ``train``): only an empty
    folder, an unfinished run (one attnkit train started and marked so, which saved
    nothing) or, with ``force``, a run (``attnkit.core.run_layout``: weights of any format,
    a checkpoint) is written into."""
    if run.path.exists() and not run.path.is_dir():
        raise RunError(f"{run} is a file, not a folder: choose another --out")
    if run.is_empty() or run.is_unfinished():
        return
    if not run.is_run():
        what = (
            "a config.json but no weights (not a run: attnkit never replaces a folder it "
            "cannot prove is its own run; remove it yourself if it is one)"
            if run.has_config()
            else "files that are not an attnkit run"
        )
        raise RunError(f"{run} holds {what}: choose another --out")
    try:
        run.read_config()
    except RunError as exc:
        raise RunError(
            f"{run} is not a run attnkit can replace ({exc}): choose another --out"
        ) from None
    if not force:
        raise RunError(
            f"{run} already holds a run; use --resume to continue it, --force to "
            "replace it, or --out to choose another folder"
        )


def _train(
    cfg: RunConfig,
    run: RunDir,
    resume: bool,
    saved: dict[str, Any],
    log,
    where: distributed.Placement,
    tables: StagedTables | None = None,
    callbacks: Sequence[Any] = (),
) -> TrainResult:
    """``train``'s work, under the run directory's lock (rank 0; the other processes of a
    distributed run do the same without writing anything)."""
    spec = get_task(cfg.task)
    if resume:
        spec.check_resume(cfg, saved)
    tokenizer = run.load_tokenizer() if resume else None
    if not resume and where.is_main:
        cfg, tokenizer = adopt_pretrained(cfg, tokenizer, log)
    torch.manual_seed(cfg.training.seed)
    start = time.perf_counter()
    if where.is_main:
        data = spec.prepare_data(cfg, tokenizer, log)
    if where.distributed and not resume:
        # rank 0's recipe (after adopt_pretrained) and tokenizer (perhaps trained just now: a
        # tokenizer trained again elsewhere could differ), so every process has the same data
        cfg, tokenizer = distributed.broadcast_object(
            (cfg, data.tokenizer) if where.is_main else None
        )
    if not where.is_main:
        torch.manual_seed(cfg.training.seed)
        data = spec.prepare_data(cfg, tokenizer, log)
    log(f"{data.summary} ({time.perf_counter() - start:.1f}s)")
    if resume:
        run_info = {k: saved[k] for k in data.run_info if k in saved}
        data.run_info.update(run_info)  # e.g. the labels in the order the model learned
    cfg.model = cfg.model.replace(**spec.model_inputs(cfg, data.tokenizer, data.run_info))
    cfg.model.validate()
    # sizes that fit the bounds may still make a model larger than this machine's memory
    source = str(run.config_path) if resume else "the recipe's model section"
    meta = meta_model(cfg.model, source, ConfigError)
    check_memory(meta, cfg.model, source, ConfigError)
    # ... and a batch of the longest items (a batch never holds more than the data)
    lengths = [spec.item_length(it) for it in data.train]
    longest = max(lengths, default=1)
    batch = min(cfg.training.batch_size, max(len(lengths), 1))
    if cfg.training.max_tokens:
        batch = min(max(cfg.training.max_tokens // max(longest, 1), 1), max(len(lengths), 1))
    where_set = "the recipe's training section" if not resume else str(run.config_path)
    check_training_memory(meta, cfg.model, batch, longest, where_set, ConfigError)
    del meta
    torch.manual_seed(cfg.training.seed)
    model = build_model(cfg.model)
    n_params = sum(p.numel() for p in model.parameters())
    log(f"model: {cfg.model.describe()}, {n_params:,} parameters")
    task = spec.objective(cfg, data)
    if not resume:
        spec.init_model(model, cfg, data, log)
    if not resume and where.is_main:
        # everything is checked and ready: only now is an earlier run replaced
        if not run.is_empty():
            log(f"replacing the {'unfinished ' if run.is_unfinished() else ''}run in {run}")
            run.clear()
        try:
            run.mark_unfinished()  # first: until training ends, provably attnkit's own
            run.save_tokenizer(data.tokenizer)
            payload = {
                **cfg.to_dict(),
                **data.run_info,
                "vocab_size": data.tokenizer.vocab_size,
                "num_parameters": n_params,
                "attnkit_version": __version__,
                # what training.bf16 (auto by default) chose on this machine
                "precision": training_precision(
                    cfg.training, resolve_device(cfg.training.device)
                ).name,
            }
            if tables is not None:  # data=: its files, run-relative, and what they were
                payload = tables.config_entries(payload)
            run.write_config(payload)
            if tables is not None:  # ... copied into RUN/data, read from there on
                tables.copy_into(run.path, cfg.data)
        except BaseException:
            run.clear()  # (a full disk, say): no half-made run blocks the next try
            raise
    try:
        trainer = Trainer(
            model,
            task,
            data.train,
            lengths,
            data.validation,
            [spec.item_length(it) for it in data.validation],
            cfg.training,
            run,
            callbacks=callbacks,
        )
        result = trainer.fit(resume=resume)
        if where.is_main:
            run.mark_finished()
    except BaseException:
        if where.is_main and not resume and not run.has_checkpoint() and not run.has_weights():
            run.clear()  # failed or interrupted before anything worth keeping: leave nothing
        raise
    if where.is_main:  # (calibration, say) on the threads training ran with
        apply_threads(cfg.training.num_threads)
        spec.after_training(run, cfg, data, log)
    distributed.barrier()
    return result


# the special tokens each task's predictor looks up by name, beyond [PAD] (every task pads)
_TASK_TOKENS = {
    "translate": ("[BOS]", "[EOS]"),
    "chat": ("[BOS]", "[EOS]"),
    "mlm": ("[MASK]",),
    "bert-pretrain": ("[CLS]", "[SEP]", "[MASK]"),
    "qa": ("[CLS]", "[SEP]"),
    "tag": ("[CLS]", "[SEP]", "[UNK]"),
}


def _run_tokenizer(run: RunDir, cfg: RunConfig, saved: dict[str, Any]) -> Any:
    """The run's tokenizer.json, refused in one ``RunError`` where it cannot be this run's
    model's: more ids than the model's embedding has (they would index past it), another
    vocabulary size than the one training recorded (config.json's ``vocab_size``: another
    run's tokenizer copied in; a model whose vocabulary is larger than its tokenizer's on
    purpose, a pretrained one's, is compared with the recorded size only), or without a
    special token the task looks up (or that its model needs for unknown words)."""
    path = run.tokenizer_path
    try:
        tokenizer = run.load_tokenizer()
    except DataError as exc:  # not a tokenizer.json, no [UNK]: this run cannot be used
        raise RunError(str(exc)) from None
    size = tokenizer.vocab_size
    model_size = getattr(cfg.model, "vocab_size", None)
    if isinstance(model_size, int) and model_size > 0 and size > model_size:
        raise RunError(
            f"{path} has {size} tokens, more than the model's vocabulary of {model_size}: "
            "it is not this run's tokenizer"
        )
    recorded = saved.get("vocab_size")
    if isinstance(recorded, int) and not isinstance(recorded, bool) and recorded != size:
        raise RunError(
            f"{path} has {size} tokens, but this run was trained with a tokenizer of "
            f"{recorded} (config.json's vocab_size): it is not this run's tokenizer"
        )
    needed = ["[PAD]", *_TASK_TOKENS.get(cfg.task, ())]
    if cfg.task == "classify" and getattr(cfg.model, "READS_PAIRS", False):  # a BERT
        needed += ["[CLS]", "[SEP]"]  # [CLS] A [SEP] (B [SEP])
    elif cfg.task == "classify" and getattr(cfg.model, "needs_cls", False):  # cls pooling
        needed.append("[CLS]")
    missing = tokenizer.lacks(needed)
    if missing:
        raise RunError(
            f"{path} lacks the special token{'s' if len(missing) > 1 else ''} "
            f"{', '.join(missing)} (a {cfg.task} run's tokenizer needs {', '.join(needed)})"
        )
    return tokenizer


def load(
    run_dir: str | Path | Sequence[str | Path],
    map_location: str = "cpu",
    quantize: str | None = None,
    precision: str = "auto",
) -> Any:
    """A predictor for a finished (or in-progress, best-so-far) run, from its task:
    ``ClassifierPredictor`` (``.predict``) for classify runs, ``Seq2SeqPredictor``
    (``.translate``, ``.chat``, ``.alignment``, ``.trace``) for translate / chat runs,
    ``FillMaskPredictor`` (``.fill_mask``) for mlm runs. A list of runs gives their task's
    ensemble (classify: ``EnsemblePredictor``, averaged probabilities). Each is an
    ``attnkit.tasks.Predictor``: ``capabilities`` / ``can(name)`` say what it can do.

    ``quantize="int8"``: every Linear dynamically quantized to int8 (CPU only; see
    ``attnkit.interop.quantize``). A run exported with ``--quantize int8`` loads quantized anyway.

    ``precision``: what the predictor computes in (its ``.precision``, applied by every
    method): ``auto`` = bf16 autocast where the device computes bf16 natively (CUDA >= 8.0,
    a CPU with avx512_bf16/amx_bf16), fp32 elsewhere, the rule training follows; ``fp32``;
    ``bf16``. int8 and ONNX models run as they are (fp32 activations)."""
    if quantize not in (None, "int8"):
        raise RunError(f"quantize must be int8 (or None), got {quantize!r}")
    if precision not in PRECISIONS:
        raise RunError(f"precision must be {' | '.join(PRECISIONS)}, got {precision!r}")
    if not isinstance(run_dir, (str, Path)):
        runs = list(run_dir)
        if len(runs) == 1:
            return load(runs[0], map_location, quantize, precision)
        members = [load(r, map_location, quantize, precision) for r in runs]
        return classify.ensemble(members, runs)  # (only classify runs make one)
    run = RunDir(run_dir)
    if not run.has_config():
        raise RunError(f"{run} is not a run directory (no config.json)")
    int8_file, onnx_file = run.path / INT8_WEIGHTS, run.path / ONNX_FILE
    if not run.has_weights() and not int8_file.is_file() and not onnx_file.is_file():
        raise RunError(f"{run} has no model.safetensors yet (training has not evaluated once)")
    cfg, saved = _read_run(run)
    tokenizer = _run_tokenizer(run, cfg, saved)
    device = resolve_device(map_location) if map_location == "auto" else map_location
    if onnx_file.is_file() and not run.has_weights():  # an ONNX export: onnxruntime, CPU
        if quantize or torch.device(device).type != "cpu":
            raise RunError(f"{run} is an ONNX export: it runs as exported, on the CPU")
        model = OnnxModel(
            onnx_file,
            saved["onnx"]["inputs"],
            saved["onnx"]["outputs"],
            wrap=cfg.model.output_from,  # the model family's output type
        )
        predictor = _predictor(model, tokenizer, cfg, run, saved)
        predictor.precision = FP32
        return predictor
    model = build_model(cfg.model)
    if not run.has_weights() or quantize:  # int8: on the CPU
        if torch.device(device).type != "cpu":
            raise RunError(f"int8 models run on the CPU, not {device} (use --device cpu)")
        if run.has_weights():
            run.load_weights(model)
            quantize_int8(model)
        else:
            load_int8(model, int8_file)
    else:
        run.load_weights(model, map_location=device)
    model.to(device)  # the predictor sends its inputs where the weights are
    predictor = _predictor(model, tokenizer, cfg, run, saved)
    quantized = quantize or not run.has_weights()
    predictor.precision = (
        FP32
        if quantized
        else resolve_precision(
            {"auto": "auto", "fp32": False, "bf16": True}[precision],
            torch.device(device),
            what="precision",
        )
    )
    return predictor


def _predictor(
    model: torch.nn.Module, tokenizer: Any, cfg: RunConfig, run: RunDir, saved: dict[str, Any]
) -> Predictor:
    """The run's task's predictor; a task whose ``predictor`` returns anything but a
    ``Predictor`` (the CLI and the server dispatch on its ``capabilities``) is a bug in it."""
    predictor = get_task(cfg.task).predictor(model, tokenizer, cfg, run, saved)
    if not isinstance(predictor, Predictor):
        raise TypeError(
            f"task {cfg.task!r}: TaskSpec.predictor returned a {type(predictor).__name__}, "
            "not an attnkit.tasks.Predictor (subclass it and declare its capabilities)"
        )
    return predictor


def calibrate(
    run_dir: str | Path, data_dir: str | None = None, log: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Fit a classify run's softmax temperature on its validation split (temperature
    scaling, ``attnkit.tasks.classify.fit_temperature``) and store it in its config.json;
    ``predict``, ``evaluate`` and ensembles then use calibrated probabilities. Training does
    this itself; this is for runs trained before it did. Returns the temperature and the
    validation NLL before and after; its lines go to ``log`` (default: attnkit's logger,
    shown as ``train`` shows its own)."""
    with verbosity():
        predictor = load(run_dir)
        return classify.calibrate(predictor, data_dir, _log_lines(log, True))


def evaluate(
    run_dir: str | Path | Sequence[str | Path],
    split: str = "test",
    data_dir: str | None = None,
    batch_size: int = 128,
    map_location: str = "cpu",
    precision: str = "auto",
    **options: Any,
) -> dict[str, Any]:
    """A run's metrics on a dataset split, as its task defines them: accuracy, macro-F1 and
    the confusion matrix (classify; several runs: their ensemble, with each member's
    accuracy under ``members``); loss, perplexity and sacreBLEU with its signature
    (translate; ``beam=N`` decodes with beam search); loss and perplexity (chat)."""
    if not isinstance(run_dir, (str, Path)) and len(run_dir) == 1:
        run_dir = run_dir[0]
    predictor = load(run_dir, map_location, precision=precision)
    spec = get_task(predictor.config.task)
    # (an ensemble's precision is its first member's)
    with predictor.precision.autocast():  # also where a task runs the model itself
        report = spec.evaluate(
            predictor, split, data_dir=data_dir, batch_size=batch_size, **options
        )
    report.setdefault("precision", predictor.precision.name)
    return report


EXPORT_FORMATS = ("hf", "attnkit", "onnx")


def export(
    run_dir: str | Path, output: str | Path, fmt: str = "hf", quantize: str | None = None
) -> Path:
    """Write a run's best weights, config and tokenizer to ``output``, in a format its model
    declares (``AttnkitModel.export_formats``): ``hf``, a Hugging Face directory (BERT
    runs, the labels of a classifier or tagger as ``id2label``; GPT language models as
    GPT-2) that ``transformers`` loads with identical outputs (a calibrated classifier's
    temperature folded into its head, so ``pipeline`` gives attnkit's probabilities; a
    classifier that does not pool with BERT's pooler is refused); ``attnkit`` with
    ``quantize="int8"``, a run directory with int8 weights (``attnkit.interop.quantize``)
    that every attnkit command reads (any model, CPU inference); ``onnx``, a run directory
    with ``model.onnx`` checked against onnxruntime at export (classify, tag and qa runs;
    ``attnkit.interop.onnx``), which ``load`` / ``predict`` / ``evaluate`` / ``serve`` run
    with onnxruntime."""
    if fmt not in EXPORT_FORMATS:
        raise RunError(f"export format must be one of {', '.join(EXPORT_FORMATS)}, got {fmt!r}")
    if quantize not in (None, "int8"):
        raise RunError(f"--quantize must be int8, got {quantize!r}")
    if (fmt == "attnkit") != (quantize == "int8"):
        raise RunError(
            "--quantize int8 goes with --format attnkit (a quantized attnkit run); "
            "--format hf writes the float weights"
        )
    run = RunDir(run_dir)
    if not run.has_config() or not run.has_weights():
        raise RunError(f"{run} is not a finished run (config.json and model.safetensors needed)")
    cfg, saved = _read_run(run)
    # a new or empty folder, writable, not a file, not the run, not inside a run
    out = _check_output(output, kind="folder", what="--output", inputs=[run.path], empty=True)
    if fmt == "attnkit":
        return _export_int8(run, cfg, out)
    if fmt == "onnx":
        return _export_onnx(run, cfg, out)
    if "hf" not in cfg.model.model_class().export_formats:
        raise RunError(
            f"{run} holds a {cfg.model.arch} model, which has no Hugging Face export "
            f"(model.arch {', '.join(archs_exporting('hf'))} have one)"
        )
    try:  # before anything is loaded: a model transformers would run differently
        cfg.model.check_export("hf")
    except ConfigError as exc:
        raise RunError(f"{run}: {exc}") from None
    temperature = saved.get("temperature", 1.0)  # a calibrated classifier's: folded in
    number = isinstance(temperature, (int, float)) and not isinstance(temperature, bool)
    if not number or not 0 < temperature < float("inf"):
        raise RunError(
            f"{run.config_path}: temperature must be a number > 0, got {temperature!r} "
            "(`attnkit calibrate` fits it again)"
        )
    model = build_model(cfg.model)
    run.load_weights(model)
    labels = saved.get("labels")  # (a classifier's or tagger's class names: id2label)
    labels = labels if isinstance(labels, list) else None
    tokenizer = run.load_tokenizer()
    with staged_folder(out) as stage:  # all of it, or nothing (also on a full disk)
        save_hf_directory(model, tokenizer, stage, labels, temperature=temperature)
    return out


def _export_onnx(run: RunDir, cfg: RunConfig, out: Path) -> Path:
    """``run`` as a new run directory ``out`` (checked) with ``model.onnx`` (see
    ``export``), written in a staging folder moved into place once complete."""
    model = build_model(cfg.model)
    task = get_task(cfg.task)
    onnx_signature(task, model)  # no export for this kind of run: say so before writing
    run.load_weights(model)
    tokenizer = run.load_tokenizer()
    config_text = run.config_path.read_text(encoding="utf-8")
    with staged_folder(out) as stage:  # model.onnx (+ model.onnx.data), tokenizer, config
        made = RunDir(stage)
        info = export_onnx(model, task, stage / ONNX_FILE, tokenizer.vocab_size, cfg.data.max_len)
        made.save_tokenizer(tokenizer)
        _copy_run_data(run, stage)
        atomic_write_text(made.config_path, config_text)
        made.update_config(onnx=info, exported_from=str(run.path))
    return out


def _copy_run_data(run: RunDir, stage: Path) -> None:
    """The data a run trained on in memory (``RUN/data``, which its config.json names), into
    its export: evaluating the export reads it as it reads the run."""
    if (run.path / DATA_FOLDER).is_dir():
        shutil.copytree(run.path / DATA_FOLDER, stage / DATA_FOLDER)


def _export_int8(run: RunDir, cfg: RunConfig, out: Path) -> Path:
    """``run`` as a new run directory ``out`` (checked) with int8 weights (see ``export``),
    written in a staging folder moved into place once complete."""
    model = build_model(cfg.model)
    run.load_weights(model)
    tokenizer = run.load_tokenizer()
    config_text = run.config_path.read_text(encoding="utf-8")
    with staged_folder(out) as stage:
        made = RunDir(stage)
        save_int8(model, stage / INT8_WEIGHTS)
        made.save_tokenizer(tokenizer)
        _copy_run_data(run, stage)
        atomic_write_text(made.config_path, config_text)
        made.update_config(quantization=QUANTIZATION, exported_from=str(run.path))
    return out

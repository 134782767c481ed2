"""The Python API behind the CLI: ``train``, ``load``, ``evaluate``.

run = attnkit.train("configs/nsmc-quick.yaml", out="runs/nsmc-quick")
clf = attnkit.load("runs/nsmc-quick")
clf.predict(["정말 재미있어요", "최악의 영화"])

mt = attnkit.load("runs/multi30k-transformer")      # task: translate
mt.translate(["Ein Mann fährt Fahrrad."], beam=5)
bot = attnkit.load("runs/chatbot-ko")                # task: chat
bot.chat("오늘 날씨 어때?", temperature=0.7)
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from attnkit import __version__
from attnkit.checkpoint import atomic_write_text, load_model_weights
from attnkit.config import SEQ2SEQ_TASKS, ConfigError, RunConfig, load_config
from attnkit.metrics import accuracy, classification_report
from attnkit.models.ngram import NgramClassifier
from attnkit.tasks import mlm
from attnkit.tasks.classify import (
    ClassificationTask,
    ClassifierPredictor,
    EnsemblePredictor,
    build_model,
    encode_examples,
    fit_temperature,
    label_ids,
    naive_bayes_batches,
    prepare_data,
    read_split,
)
from attnkit.tasks.seq2seq import Seq2SeqPredictor
from attnkit.tokenization import Tokenizer
from attnkit.training import Trainer, TrainResult

__all__ = ["calibrate", "evaluate", "load", "train"]


class RunError(ValueError):
    """A run directory that cannot be used as asked (missing, already used, incomplete)."""


def _is_run(path: Path) -> bool:
    return (path / "config.json").is_file()


def _start_run(run_dir: Path, cfg: RunConfig, tok: Tokenizer, n_params: int, **extra) -> None:
    """Write the run's tokenizer.json and config.json (resolved recipe + what loading needs)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    tok.save(run_dir / "tokenizer.json")
    info = {
        "vocab_size": tok.vocab_size,
        "num_parameters": n_params,
        "attnkit_version": __version__,
    }
    cfg.save(run_dir / "config.json", extra={**extra, **info})


def train(
    config: str | Path | RunConfig | None = None,
    out: str | Path | None = None,
    overrides: list[str] | None = None,
    resume: bool = False,
    force: bool = False,
    log=print,
) -> TrainResult:
    """Train a model from a recipe into ``out`` (default ``runs/<recipe name>``).

    ``resume=True`` continues ``out`` from its ``last/`` checkpoint with the run's own saved
    config (the recipe is not needed) and reproduces the uninterrupted trajectory.
    """
    if resume:
        if out is None:
            raise RunError("--resume needs the run directory (--out RUN)")
        run_dir = Path(out)
        if not _is_run(run_dir) or not (run_dir / "last").exists():
            raise RunError(f"{run_dir} has no resumable checkpoint (last/ is missing)")
        saved = json.loads((run_dir / "config.json").read_text(encoding="utf-8"))
        cfg = RunConfig.from_dict(
            {k: saved[k] for k in ("task", "data", "tokenizer", "model", "training")}
        )
        tokenizer = Tokenizer.load(run_dir / "tokenizer.json")
    else:
        if isinstance(config, RunConfig):
            cfg = config
            if overrides:
                raise ConfigError("overrides apply to recipe files; change the RunConfig instead")
        else:
            cfg = load_config(config, overrides)
        name = Path(config).stem if isinstance(config, (str, Path)) else "run"
        run_dir = Path(out) if out is not None else Path("runs") / name
        if run_dir.exists() and any(run_dir.iterdir()):
            if not force:
                raise RunError(
                    f"{run_dir} already holds files; use --resume to continue it, --force to "
                    "overwrite it, or --out to choose another folder"
                )
            shutil.rmtree(run_dir)
        tokenizer = None

    if cfg.task in SEQ2SEQ_TASKS:
        return _train_seq2seq(cfg, run_dir, tokenizer, resume, log)
    if cfg.task == "mlm":
        return _train_mlm(cfg, run_dir, tokenizer, resume, log)
    if cfg.model.init_from and not resume:
        cfg, tokenizer = mlm.pretrained_config(cfg, log)
    torch.manual_seed(cfg.training.seed)
    start = time.perf_counter()
    data = prepare_data(cfg, tokenizer, log=log)
    prep_s = time.perf_counter() - start
    tok = data.tokenizer
    log(
        f"data: {len(data.train):,} train / {len(data.validation):,} validation examples, "
        f"{len(data.labels)} classes, vocab {tok.vocab_size:,}"
        + (
            f", {data.truncated:,} truncated to max_len={cfg.data.max_len}"
            if data.truncated
            else ""
        )
        + f" ({prep_s:.1f}s)"
    )
    torch.manual_seed(cfg.training.seed)
    model = build_model(cfg, tok.vocab_size, len(data.labels), tok.pad_id)
    n_params = sum(p.numel() for p in model.parameters())
    log(f"model: {cfg.model.arch}, {n_params:,} parameters")
    if isinstance(model, NgramClassifier) and cfg.model.nb_weighting and not resume:
        start = time.perf_counter()
        model.fit_nb(naive_bayes_batches(data.train, tok.pad_id))
        log(
            f"Naive Bayes ratios from {len(data.train):,} texts ({time.perf_counter() - start:.1f}s)"
        )
    if cfg.model.init_from and not resume:
        copied = mlm.init_classifier(model, cfg.model.init_from)
        what = "encoder" if cfg.model.arch == "transformer" else "token embedding"
        log(f"{what} initialised from {cfg.model.init_from} ({copied} tensors)")
    if not resume:
        _start_run(run_dir, cfg, tok, n_params, labels=data.labels)
    task = ClassificationTask(data.labels, tok.pad_id, cfg.training.label_smoothing)
    trainer = Trainer(
        model,
        task,
        data.train,
        [len(ids) for ids, _ in data.train],
        data.validation,
        [len(ids) for ids, _ in data.validation],
        cfg.training,
        run_dir,
        d_model=cfg.model.d_model,
    )
    result = trainer.fit(resume=resume)
    if data.validation and (run_dir / "model.safetensors").is_file():
        _save_temperature(run_dir, load(run_dir), data.validation, log)
    return result


def _train_mlm(
    cfg: RunConfig, run_dir: Path, tokenizer: Tokenizer | None, resume: bool, log
) -> TrainResult:
    """``train`` for task mlm: masked-LM pretraining of a Transformer encoder."""
    torch.manual_seed(cfg.training.seed)
    start = time.perf_counter()
    data = mlm.prepare_data(cfg, tokenizer, log=log)
    tok = data.tokenizer
    n_tokens = sum(len(x) for x in data.train)
    log(
        f"data: {data.num_texts:,} texts -> {len(data.train):,} train / "
        f"{len(data.validation):,} validation sequences of <= {cfg.data.max_len} tokens "
        f"({n_tokens:,} training tokens), vocab {tok.vocab_size:,} "
        f"({time.perf_counter() - start:.1f}s)"
    )
    torch.manual_seed(cfg.training.seed)
    model = mlm.build_model(cfg, tok.vocab_size, tok.pad_id)
    n_params = sum(p.numel() for p in model.parameters())
    head = (
        "ELECTRA generator + replaced-token detection head"
        if cfg.model.objective == "electra"
        else "masked-LM head"
    )
    log(f"model: transformer encoder + {head}, {n_params:,} parameters")
    if not resume:
        _start_run(run_dir, cfg, tok, n_params)
    trainer = Trainer(
        model,
        mlm.build_task(cfg, tok),
        data.train,
        [len(x) for x in data.train],
        data.validation,
        [mlm.item_length(x) for x in data.validation],
        cfg.training,
        run_dir,
        d_model=cfg.model.d_model,
    )
    return trainer.fit(resume=resume)


def _train_seq2seq(
    cfg: RunConfig, run_dir: Path, tokenizer: Tokenizer | None, resume: bool, log
) -> TrainResult:
    """``train`` for task translate / chat (same run format, same Trainer)."""
    from attnkit.tasks import seq2seq

    torch.manual_seed(cfg.training.seed)
    start = time.perf_counter()
    data = seq2seq.prepare_data(cfg, tokenizer, log=log)
    tok = data.tokenizer
    notes = []
    if data.truncated:
        notes.append(f"{data.truncated:,} truncated to max_len={cfg.data.max_len}")
    if data.dropped:
        notes.append(f"{data.dropped:,} with an empty side skipped")
    log(
        f"data: {len(data.train):,} train / {len(data.validation):,} validation pairs, "
        f"joint vocab {tok.vocab_size:,}"
        + "".join(f", {n}" for n in notes)
        + f" ({time.perf_counter() - start:.1f}s)"
    )
    torch.manual_seed(cfg.training.seed)
    model = seq2seq.build_model(cfg, tok.vocab_size, tok.pad_id)
    n_params = sum(p.numel() for p in model.parameters())
    m = cfg.model
    variant = (
        f"transformer {m.num_layers}+{m.num_decoder_layers or m.num_layers} layers"
        if m.arch == "transformer"
        else f"lstm, attention: {m.attention or 'none'}"
    )
    log(f"model: {variant}, {n_params:,} parameters")
    if not resume:
        _start_run(run_dir, cfg, tok, n_params)
    task = seq2seq.Seq2SeqTask(
        cfg.task,
        tok,
        cfg.data.max_len,
        label_smoothing=cfg.training.label_smoothing,
        teacher_forcing_ratio=cfg.training.teacher_forcing_ratio,
        references=data.val_references,
    )
    trainer = Trainer(
        model,
        task,
        data.train,
        [seq2seq.item_length(it) for it in data.train],
        data.validation,
        [seq2seq.item_length(it) for it in data.validation],
        cfg.training,
        run_dir,
        d_model=m.d_model if m.arch == "transformer" else m.hidden_size,
    )
    return trainer.fit(resume=resume)


Predictor = ClassifierPredictor | EnsemblePredictor | Seq2SeqPredictor | mlm.FillMaskPredictor


def load(run_dir: str | Path | Sequence[str | Path]) -> Predictor:
    """A predictor for a finished (or in-progress, best-so-far) run: ``ClassifierPredictor``
    (``.predict``) for classify runs, ``Seq2SeqPredictor`` (``.translate``, ``.chat``,
    ``.alignment``, ``.trace``) for translate / chat runs, ``FillMaskPredictor``
    (``.fill_mask``) for mlm runs. A list of classify runs gives an ``EnsemblePredictor``
    (``.predict`` with their averaged probabilities)."""
    if not isinstance(run_dir, (str, Path)):
        runs = list(run_dir)
        if len(runs) == 1:
            return load(runs[0])
        members = [load(r) for r in runs]
        for r, m in zip(runs, members, strict=True):
            if not isinstance(m, ClassifierPredictor):
                raise RunError(f"only classify runs can be ensembled; {r} is a {m.task} run")
        return EnsemblePredictor(members)
    run_dir = Path(run_dir)
    if not _is_run(run_dir):
        raise RunError(f"{run_dir} is not a run directory (no config.json)")
    if not (run_dir / "model.safetensors").is_file():
        raise RunError(f"{run_dir} has no model.safetensors yet (training has not evaluated once)")
    saved: dict[str, Any] = json.loads((run_dir / "config.json").read_text(encoding="utf-8"))
    cfg = RunConfig.from_dict(
        {k: saved[k] for k in ("task", "data", "tokenizer", "model", "training")}
    )
    tokenizer = Tokenizer.load(run_dir / "tokenizer.json")
    if cfg.task == "mlm":
        model = mlm.build_model(cfg, saved["vocab_size"], tokenizer.pad_id)
        load_model_weights(model, run_dir / "model.safetensors")
        return mlm.FillMaskPredictor(model, tokenizer, cfg, run_dir)
    if cfg.task in SEQ2SEQ_TASKS:
        from attnkit.tasks.seq2seq import build_model as build_seq2seq

        model = build_seq2seq(cfg, saved["vocab_size"], tokenizer.pad_id)
        load_model_weights(model, run_dir / "model.safetensors")
        return Seq2SeqPredictor(model, tokenizer, cfg, run_dir)
    labels = saved["labels"]
    model = build_model(cfg, saved["vocab_size"], len(labels), tokenizer.pad_id)
    load_model_weights(model, run_dir / "model.safetensors")
    temperature = float(saved.get("temperature", 1.0))
    return ClassifierPredictor(model, tokenizer, cfg, labels, run_dir, temperature=temperature)


def calibrate(run_dir: str | Path, data_dir: str | None = None, log=print) -> dict[str, Any]:
    """Fit a classify run's softmax temperature on its validation split (temperature
    scaling, ``attnkit.tasks.classify.fit_temperature``) and store it in its config.json;
    ``predict``, ``evaluate`` and ensembles then use calibrated probabilities. Training does
    this itself; this is for runs trained before it did. Returns the temperature and the
    validation NLL before and after."""
    run_dir = Path(run_dir)
    predictor = load(run_dir)
    if not isinstance(predictor, ClassifierPredictor):
        raise RunError(f"only classify runs are calibrated; {run_dir} is a {predictor.task} run")
    if data_dir is not None:
        predictor.config.data.data_dir = data_dir
    data = prepare_data(predictor.config, predictor.tokenizer, log=lambda *_: None)
    return _save_temperature(run_dir, predictor, data.validation, log)


def _save_temperature(
    run_dir: Path, predictor: ClassifierPredictor, validation: Sequence, log
) -> dict[str, Any]:
    """Fit the temperature on encoded validation items and write it into config.json."""
    if not validation:
        raise RunError(f"{run_dir} has no validation split to calibrate on")
    logits = predictor.logits([ids for ids, _ in validation])
    labels = torch.tensor([y for _, y in validation])
    temperature = fit_temperature(logits, labels)
    before = F.cross_entropy(logits, labels).item()
    after = F.cross_entropy(logits / temperature, labels).item()
    saved = json.loads((run_dir / "config.json").read_text(encoding="utf-8"))
    saved["temperature"] = round(temperature, 4)
    atomic_write_text(
        run_dir / "config.json", json.dumps(saved, indent=2, ensure_ascii=False) + "\n"
    )
    predictor.temperature = saved["temperature"]
    log(
        f"temperature scaling: T = {temperature:.3f} on {len(labels):,} validation examples "
        f"(NLL {before:.4f} -> {after:.4f})"
    )
    return {"temperature": saved["temperature"], "nll_before": before, "nll_after": after}


def evaluate(
    run_dir: str | Path | Sequence[str | Path],
    split: str = "test",
    data_dir: str | None = None,
    batch_size: int = 128,
    beam: int = 1,
) -> dict[str, Any]:
    """A run's metrics on a dataset split: accuracy, macro-F1 and the confusion matrix
    (classify); loss, perplexity and sacreBLEU with its signature (translate, decoding
    greedy or with ``beam``); loss and perplexity (chat). Several classify runs are
    evaluated as an ensemble (averaged probabilities); the report then also lists each
    member's accuracy under ``members``."""
    if not isinstance(run_dir, (str, Path)) and len(run_dir) == 1:
        run_dir = run_dir[0]
    predictor = load(run_dir)
    if isinstance(predictor, mlm.FillMaskPredictor):
        raise RunError(
            f"{run_dir} is a masked-LM pretraining run: it has no labelled {split} split; its "
            "validation loss and perplexity are in metrics.jsonl"
        )
    if isinstance(predictor, Seq2SeqPredictor):
        return _evaluate_seq2seq(predictor, split, data_dir, batch_size, beam)
    members = predictor.members if isinstance(predictor, EnsemblePredictor) else [predictor]
    cfg = predictor.config
    if data_dir:
        cfg.data.data_dir = data_dir
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
        y_true = [y for _, y in items]
        member_probs.append(m.probabilities([x for x, _ in items], batch_size))
    probs = torch.stack(member_probs).mean(0)  # (N, num_classes)
    report = classification_report(y_true, probs.argmax(-1).tolist(), predictor.labels)
    target = torch.tensor(y_true)
    report["loss"] = float(-probs[torch.arange(len(target)), target].clamp_min(1e-12).log().mean())
    if len(members) > 1:
        report["members"] = [
            {"run": str(m.run_dir), "accuracy": accuracy(y_true, p.argmax(-1).tolist())}
            for m, p in zip(members, member_probs, strict=True)
        ]
    report["split"] = split
    return report


def _evaluate_seq2seq(
    predictor: Seq2SeqPredictor, split: str, data_dir: str | None, batch_size: int, beam: int
) -> dict[str, Any]:
    from attnkit.data.batching import BucketBatchSampler
    from attnkit.tasks import seq2seq

    if beam < 1:
        raise ValueError(f"beam must be >= 1, got {beam}")
    cfg = predictor.config
    if data_dir:
        cfg.data.data_dir = data_dir
    pairs = seq2seq.read_split(cfg, split)
    if not pairs:
        raise RunError(f"the {split} split is empty")
    items, truncated = seq2seq.encode_pairs(pairs, predictor.tokenizer, cfg.data.max_len)
    task = seq2seq.Seq2SeqTask(
        cfg.task,
        predictor.tokenizer,
        cfg.data.max_len,
        references=[p.tgt for p in pairs],
        beam=beam,
    )
    sampler = BucketBatchSampler(
        [seq2seq.item_length(it) for it in items], batch_size=batch_size, shuffle=False
    )
    batches = (task.collate([items[i] for i in b]) for b in sampler)
    with torch.no_grad():
        report = task.evaluate(predictor.model.eval(), batches)
    report["split"] = split
    report["task"] = cfg.task
    report["truncated"] = truncated
    return report

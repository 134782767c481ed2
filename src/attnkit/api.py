"""The Python API behind the CLI: ``train``, ``load``, ``evaluate``.

run = attnkit.train("configs/nsmc-quick.yaml", out="runs/nsmc-quick")
clf = attnkit.load("runs/nsmc-quick")
clf.predict(["정말 재미있어요", "최악의 영화"])
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import torch

from attnkit import __version__
from attnkit.checkpoint import load_model_weights
from attnkit.config import ConfigError, RunConfig, load_config
from attnkit.tasks.classify import (
    ClassificationTask,
    ClassifierPredictor,
    build_model,
    prepare_data,
)
from attnkit.tokenization import Tokenizer
from attnkit.training import Trainer, TrainResult

__all__ = ["evaluate", "load", "train"]


class RunError(ValueError):
    """A run directory that cannot be used as asked (missing, already used, incomplete)."""


def _is_run(path: Path) -> bool:
    return (path / "config.json").is_file()


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
    run_dir.mkdir(parents=True, exist_ok=True)
    if not resume:
        tok.save(run_dir / "tokenizer.json")
        cfg.save(
            run_dir / "config.json",
            extra={
                "labels": data.labels,
                "vocab_size": tok.vocab_size,
                "num_parameters": n_params,
                "attnkit_version": __version__,
            },
        )
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
    return trainer.fit(resume=resume)


def load(run_dir: str | Path) -> ClassifierPredictor:
    """A predictor for a finished (or in-progress, best-so-far) run."""
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
    labels = saved["labels"]
    model = build_model(cfg, saved["vocab_size"], len(labels), tokenizer.pad_id)
    load_model_weights(model, run_dir / "model.safetensors")
    return ClassifierPredictor(model, tokenizer, cfg, labels, run_dir)


def evaluate(
    run_dir: str | Path, split: str = "test", data_dir: str | None = None, batch_size: int = 128
) -> dict[str, Any]:
    """Accuracy, macro-F1 and the confusion matrix of a run on a dataset split."""
    from attnkit.data.batching import BucketBatchSampler
    from attnkit.tasks.classify import _read_split

    predictor = load(run_dir)
    cfg = predictor.config
    if data_dir:
        cfg.data.data_dir = data_dir
    examples = list(_read_split(cfg, split))
    label_ids = {name: i for i, name in enumerate(predictor.labels)}
    if cfg.data.name in ("nsmc", "imdb"):
        targets = [int(ex.label) for ex in examples]
    else:
        unknown = {str(ex.label).strip() for ex in examples} - set(label_ids)
        if unknown:
            raise RunError(f"{split} has labels the model never saw: {', '.join(sorted(unknown))}")
        targets = [label_ids[str(ex.label).strip()] for ex in examples]
    ids = predictor.tokenizer.encode_batch(
        [ex.text for ex in examples], max_len=cfg.data.max_len, add_cls=cfg.model.pooling == "cls"
    )
    items = list(zip(ids, targets, strict=True))
    task = ClassificationTask(predictor.labels, predictor.tokenizer.pad_id)
    sampler = BucketBatchSampler([len(x) for x in ids], batch_size=batch_size, shuffle=False)
    batches = (task.collate([items[i] for i in b]) for b in sampler)
    report = task.evaluate(predictor.model, batches)
    report["split"] = split
    return report

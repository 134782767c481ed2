"""``attnkit export RUN --format hf -o DIR``: a trained BERT run as a Hugging Face directory.

The directory holds config.json (with the run's label names as ``id2label``),
model.safetensors under Hugging Face's parameter names (``attnkit.interop.hf_bert``), and
the run's tokenizer as tokenizer.json + tokenizer_config.json, so that

    transformers.AutoTokenizer.from_pretrained(DIR)
    transformers.BertForSequenceClassification.from_pretrained(DIR)   # or the run's head

read it and compute what the run computes.
"""

from __future__ import annotations

import json
from pathlib import Path

from attnkit.checkpoint import atomic_write_text
from attnkit.errors import RunError
from attnkit.models.bert import BertConfig
from attnkit.run import RunDir

__all__ = ["export_run"]

FORMATS = ("hf",)


def export_run(run_dir: str | Path, output: str | Path, fmt: str = "hf") -> Path:
    """Write run ``run_dir``'s best weights, config and tokenizer to ``output`` in ``fmt``
    (``hf``: a Hugging Face BERT directory). Returns ``output``."""
    if fmt not in FORMATS:
        raise RunError(f"export format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    from attnkit.api import _read_run
    from attnkit.interop.hf_bert import save_hf_bert

    run = RunDir(run_dir)
    if not run.is_run() or not run.has_weights():
        raise RunError(f"{run} is not a finished run (config.json and model.safetensors needed)")
    cfg, saved = _read_run(run)
    if not isinstance(cfg.model, BertConfig):
        raise RunError(
            f"{run} holds a {cfg.model.arch} model; only BERT runs (model.arch bert-...) "
            "export to Hugging Face's format"
        )
    model = cfg.model.build()
    run.load_weights(model)
    out = Path(output)
    labels = saved.get("labels") if cfg.model.arch in ("bert-classifier", "bert-tagger") else None
    save_hf_bert(model, out, labels=labels)
    tokenizer = run.load_tokenizer()
    tokenizer.save(out / "tokenizer.json")
    special = {
        f"{name}_token": token
        for name, token in (
            ("unk", "[UNK]"),
            ("sep", "[SEP]"),
            ("pad", "[PAD]"),
            ("cls", "[CLS]"),
            ("mask", "[MASK]"),
        )  # fmt: skip
        if tokenizer.token_to_id(token) is not None
    }
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": cfg.model.max_len,
        "model_input_names": ["input_ids", "token_type_ids", "attention_mask"],
        **special,
    }
    atomic_write_text(out / "tokenizer_config.json", json.dumps(tokenizer_config, indent=2) + "\n")
    atomic_write_text(out / "special_tokens_map.json", json.dumps(special, indent=2) + "\n")
    return out

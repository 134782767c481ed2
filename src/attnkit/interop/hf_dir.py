"""A model and its tokenizer as a Hugging Face directory (``attnkit export --format hf``).

The directory holds config.json (a classifier's or tagger's label names as ``id2label``)
and model.safetensors under Hugging Face's parameter names, as the model's own
``save_pretrained`` writes them (BERT and its heads, GPT-2: the models whose
``export_formats`` include ``hf``), and the tokenizer as tokenizer.json +
tokenizer_config.json, so that

    transformers.AutoTokenizer.from_pretrained(DIR)
    transformers.BertForSequenceClassification.from_pretrained(DIR)   # or the model's class

read it and compute what attnkit computes (a calibrated classifier's temperature folded
into its head: ``pipeline("text-classification")`` gives attnkit's probabilities).
``attnkit.app.api.export`` calls it for a run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from attnkit.core.checkpoint import atomic_write_text
from attnkit.data.tokenization import Tokenizer

__all__ = ["save_hf_directory"]

_SPECIAL = (("unk", "[UNK]"), ("sep", "[SEP]"), ("pad", "[PAD]"), ("cls", "[CLS]"),
            ("mask", "[MASK]"))  # fmt: skip


def save_hf_directory(
    model: Any,
    tokenizer: Tokenizer,
    output: str | Path,
    labels: list[str] | None = None,
    temperature: float = 1.0,
) -> Path:
    """Write ``model`` (one whose ``export_formats`` include ``hf``), ``tokenizer`` and the
    ``labels`` of a classifier / tagger to ``output`` in Hugging Face's format; a
    classifier's calibration ``temperature`` T (1: none) is folded into its head (its
    weight and bias divided by T, config.json's ``attnkit_temperature_folded``: T), so that
    transformers' softmax gives attnkit's probabilities. Returns ``output``."""
    out = Path(output)
    kwargs: dict[str, Any] = {}
    if labels:
        kwargs["labels"] = labels
    if temperature != 1.0:
        kwargs["temperature"] = temperature
    model.save_pretrained(out, **kwargs)
    tokenizer.save(out / "tokenizer.json")
    special = {
        f"{name}_token": token
        for name, token in _SPECIAL
        if tokenizer.token_to_id(token) is not None
    }
    inputs = ["input_ids", "token_type_ids", "attention_mask"]
    if not model.takes_token_types:
        inputs.remove("token_type_ids")
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": model.config.max_len,
        "model_input_names": inputs,
        **special,
    }
    atomic_write_text(out / "tokenizer_config.json", json.dumps(tokenizer_config, indent=2) + "\n")
    atomic_write_text(out / "special_tokens_map.json", json.dumps(special, indent=2) + "\n")
    return out

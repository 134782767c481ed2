"""A BERT and its tokenizer as a Hugging Face directory (``attnkit export --format hf``).

The directory holds config.json (with the label names as ``id2label``), model.safetensors
under Hugging Face's parameter names (``attnkit.interop.hf_bert``), and the tokenizer as
tokenizer.json + tokenizer_config.json, so that

    transformers.AutoTokenizer.from_pretrained(DIR)
    transformers.BertForSequenceClassification.from_pretrained(DIR)   # or the model's head

read it and compute what attnkit computes. ``attnkit.app.api.export`` calls it for a run.
"""

from __future__ import annotations

import json
from pathlib import Path

from attnkit.core.checkpoint import atomic_write_text
from attnkit.data.tokenization import Tokenizer
from attnkit.models.bert import HfBertFiles

__all__ = ["save_hf_directory"]

_SPECIAL = (("unk", "[UNK]"), ("sep", "[SEP]"), ("pad", "[PAD]"), ("cls", "[CLS]"),
            ("mask", "[MASK]"))  # fmt: skip


def save_hf_directory(
    model: HfBertFiles, tokenizer: Tokenizer, output: str | Path, labels: list[str] | None = None
) -> Path:
    """Write ``model`` (a BERT or one of its heads), ``tokenizer`` and the ``labels`` of a
    classifier / tagger to ``output`` in Hugging Face's format. Returns ``output``."""
    from attnkit.interop.hf_bert import save_hf_bert

    out = Path(output)
    save_hf_bert(model, out, labels=labels)
    tokenizer.save(out / "tokenizer.json")
    special = {
        f"{name}_token": token
        for name, token in _SPECIAL
        if tokenizer.token_to_id(token) is not None
    }
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": model.config.max_len,
        "model_input_names": ["input_ids", "token_type_ids", "attention_mask"],
        **special,
    }
    atomic_write_text(out / "tokenizer_config.json", json.dumps(tokenizer_config, indent=2) + "\n")
    atomic_write_text(out / "special_tokens_map.json", json.dumps(special, indent=2) + "\n")
    return out

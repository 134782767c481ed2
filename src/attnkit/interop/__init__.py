"""Import and export of other libraries' checkpoints: the only code that knows their names.

``hf_bert``: Hugging Face BERT directories <-> ``attnkit.models.bert.BertModel``.
"""

from __future__ import annotations

from attnkit.interop.hf_bert import load_hf_bert, save_hf_bert

__all__ = ["load_hf_bert", "save_hf_bert"]

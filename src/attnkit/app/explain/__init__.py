"""The explainer's data: ``trace(predictor_or_run, text, **options)`` runs one forward pass
of a trained run under ``attnkit.nn.capture`` and returns what the explorer page shows, as
one JSON-serialisable dict (its layout: ``attnkit.app.explain.schema``).

    from attnkit.app.explain import trace, decode_array
    t = trace("runs/nsmc-transformer", "정말 재미있어요")
    t["view"]["probabilities"], decode_array(t["stacks"][0]["layers"][0]["attention"][0]["weights"])
"""

from __future__ import annotations

from attnkit.app.explain.schema import SCHEMA_VERSION, decode_array, encode_array
from attnkit.app.explain.trace import trace

__all__ = ["SCHEMA_VERSION", "decode_array", "encode_array", "trace"]

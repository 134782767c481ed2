"""What one request may ask of ``attnkit serve``, and how requests share a forward pass:
every limit in one place."""

from __future__ import annotations

import math
from dataclasses import dataclass

from attnkit.core.errors import ConfigError
from attnkit.core.params import PARAMS


@dataclass(frozen=True)
class Limits:
    """Per-request limits. Over ``max_body_bytes``, ``max_chars`` (any one text),
    ``max_texts`` or ``max_attention_texts`` (attention maps are L x H x T numbers per text)
    -> 413 (payload too large); ``max_new_tokens`` or ``max_beam`` exceeded
    -> 422 (a parameter out of range); a request still unanswered after ``timeout_s``
    seconds (waiting for the model included) -> 503; a request whose head (request line and
    headers) or whose body has not fully arrived ``body_timeout_s`` seconds after it began
    -> 408, and the connection is closed (a client trickling bytes holds nothing for long).

    Micro-batching (``attnkit.app.serve.batching``): concurrent /v1/classify, /v1/tag and
    /v1/generate requests to one run are answered together, by one forward pass of at most
    ``batch_size`` texts or prompts (whole requests; 1: each request alone, as before). Under load a
    batch waits up to ``batch_wait_ms`` for more requests; a lone client's requests never
    wait. A generation also takes in the prompts queued while it runs, between two tokens,
    up to ``batch_size`` (continuous batching). Their ranges are
    ``attnkit.core.params.PARAMS``' (the CLI's options too)."""

    max_chars: int = 2000  # characters per text (a review, a sentence, a prompt, a question)
    max_texts: int = 64  # texts per request (one batch)
    max_attention_texts: int = 8  # texts of one /v1/classify with attention: true
    max_new_tokens: int = 256  # tokens one /v1/generate may ask for
    max_beam: int = 8  # beam width of /v1/translate
    timeout_s: float = 30.0  # seconds until a request is given up (503)
    max_body_bytes: int = 1_000_000  # bytes of one request body
    max_context_chars: int = 20_000  # characters of one /v1/answer context
    body_timeout_s: float = 10.0  # seconds to send the request head, and then its body
    batch_size: int = 16  # texts of concurrent requests answered by one forward pass
    batch_wait_ms: float = 2.0  # under load, how long a batch waits for more requests

    def __post_init__(self) -> None:
        for name in ("max_chars", "max_texts", "max_attention_texts", "max_new_tokens",
                     "max_beam", "max_body_bytes", "max_context_chars"):  # fmt: skip
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"serve limit {name} must be an integer >= 1, got {value!r}")
        for name in ("timeout_s", "body_timeout_s"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not (0 < value < math.inf)
            ):
                raise ConfigError(f"serve limit {name} must be a finite number > 0, got {value!r}")
        for name in ("batch_size", "batch_wait_ms"):
            problem = PARAMS[name].problem(getattr(self, name))
            if problem is not None:
                raise ConfigError(f"serve limit {name} {problem}")

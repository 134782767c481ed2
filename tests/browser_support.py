"""What the browser tests (tests/app/serve/test_serve_browser.py, tests/app/explain/test_explain_browser.py) and
tools/explain_screenshots.py share: finding a Chromium that starts, and `attnkit serve`'s app
on a free loopback port in a thread. No pytest here, so the tool can import it."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager


def find_chromium() -> tuple[str | None, str]:
    """(path, "") of a Chromium that starts ($ATTNKIT_CHROMIUM, else one on PATH; a snap
    stub does not count), or (None, why there is none)."""
    candidates = [os.environ.get("ATTNKIT_CHROMIUM")] + [
        shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")
    ]
    found = [c for c in candidates if c]
    for path in found:
        try:
            done = subprocess.run([path, "--version"], capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0:
            return path, ""
    if found:
        return None, f"{', '.join(found)} did not start (--version failed)"
    return None, ("no chromium binary (make test installs Debian's chromium when it runs as "
                  "root; or set ATTNKIT_CHROMIUM)")  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def served(specs: Sequence[str]) -> Iterator[str]:
    """`attnkit serve SPEC...` (``NAME=RUN``) in a thread on a free loopback port; yields its
    base URL and stops the server afterwards."""
    import uvicorn

    from attnkit.app.serve import create_app

    port = free_port()
    config = uvicorn.Config(create_app(list(specs)), host="127.0.0.1", port=port,
                            log_level="warning")  # fmt: skip
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the server did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)

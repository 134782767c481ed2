"""Micro-batching for ``attnkit serve``: concurrent requests to one run's endpoint, answered
by one forward pass.

A ``Batcher`` is one queue and one worker thread (started with the first request, gone
after ``idle_s`` seconds without one, or at ``close``). The worker takes the model lock,
then every request queued by then (the first one's ``key`` only: classify requests of
single texts and of sentence pairs are not mixed), in arrival order, up to ``max_size``
rows (texts, or a /v1/generate request's prompt; whole requests, so one bigger than that
is a batch of its own), and hands the batch to ``run_batch``, which settles each request's
future. While one forward pass runs, the next batch gathers in the queue; that alone
batches a loaded server.

``wait_s``: once the server is under load (the last batch held several requests, or some
arrived while it ran), the worker also waits up to ``wait_s`` for the batch to fill before
it starts. A lone client never waits: its request finds the last batch alone and the queue
empty, and runs at once.

Requests given up while queued (timeout, client gone: their ``cancelled`` event) are
dropped, never run; their futures are cancelled.

Continuous batching: a running batch may take more requests of its key between two of
its steps (``take_more``: a generation, between two tokens), as long as no other work
waits for the model (``ModelLock.waiting``): otherwise the batch drains and lets it run.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Batcher", "ModelLock", "Pending"]


@dataclass(eq=False)
class Pending:
    """One queued request: ``size`` rows (its texts) of a batch of ``key``; its answer (a
    JSON body) or its exception comes through ``future``. ``stream``: where a streamed
    answer's pieces go as they are produced (``streamed``: some have)."""

    request: Any
    size: int
    key: Hashable
    cancelled: threading.Event = field(default_factory=threading.Event)
    future: Future = field(default_factory=Future)
    stream: Callable[[str], None] | None = None
    streamed: bool = False


class ModelLock:
    """The server's model lock (one forward pass at a time), counting the threads that
    wait for it: a running batch takes more requests only while none does."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = threading.Lock()
        self._waiting = 0

    @property
    def waiting(self) -> int:
        """Threads waiting to take the lock now."""
        return self._waiting

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        """``threading.Lock.acquire``, counted in ``waiting`` while it waits."""
        with self._count:
            self._waiting += 1
        try:
            return self._lock.acquire(blocking, timeout)
        finally:
            with self._count:
                self._waiting -= 1

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> ModelLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class Batcher:
    """The queue and worker thread of one run's endpoint (see the module's docstring).

    Args:
        run_batch: called in the worker thread, under ``lock``, with each batch (one or more
            ``Pending``, their futures running); it must settle every future.
        max_size: the most rows of one batch (>= 1).
        wait_s: under load, how long a batch waits to fill (0: never).
        lock: the model lock, held while a batch is taken and run.
        idle_s: the worker thread ends after this long without a request.
    """

    def __init__(
        self,
        run_batch: Callable[[list[Pending]], None],
        max_size: int,
        wait_s: float,
        lock: ModelLock | None = None,
        idle_s: float = 10.0,
        name: str = "attnkit-batcher",
    ) -> None:
        self._run_batch = run_batch
        self.max_size = max_size
        self.wait_s = wait_s
        self._lock = lock if lock is not None else ModelLock()
        self._idle_s = idle_s
        self._name = name
        self._cond = threading.Condition()
        self._queue: deque[Pending] = deque()
        self._thread: threading.Thread | None = None
        self._closed: BaseException | None = None  # set by close: what a late request gets
        self._loaded = False  # the last batch had company: worth waiting for more

    @property
    def queued(self) -> int:
        """Requests waiting for a batch now."""
        with self._cond:
            return len(self._queue)

    @property
    def running(self) -> bool:
        """Whether the worker thread is alive."""
        with self._cond:
            return self._thread is not None

    def submit(self, item: Pending) -> Future:
        """Queue ``item`` (starting the worker if it is not running); returns its future."""
        with self._cond:
            if self._closed is not None:
                item.future.set_exception(self._closed)
                return item.future
            self._queue.append(item)
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name=self._name, daemon=True)
                self._thread.start()
            self._cond.notify()
        return item.future

    def close(self, error: BaseException, timeout_s: float = 5.0) -> None:
        """Stop: the requests still queued, and any submitted later, get ``error``; the
        batch being run (if any) finishes, waited for up to ``timeout_s`` (the thread is a
        daemon: it never keeps the process alive)."""
        with self._cond:
            self._closed = error
            dropped = list(self._queue)
            self._queue.clear()
            thread = self._thread
            self._cond.notify_all()
        for item in dropped:
            if item.future.set_running_or_notify_cancel():
                item.future.set_exception(error)
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)

    # ------------------------------------------------------------------ the worker thread
    def _work(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._queue or self._closed, timeout=self._idle_s)
                if self._closed is not None or not self._queue:  # closed, or idle: stop
                    self._thread = None
                    return
                if self._loaded and self.wait_s > 0:  # under load: let the batch fill
                    deadline = time.monotonic() + self.wait_s
                    self._cond.wait_for(
                        lambda: self._closed is not None or self._full(),
                        timeout=max(deadline - time.monotonic(), 0),
                    )
            with self._lock:  # what queues while the model is busy joins this batch
                batch = self._take()
                if batch:
                    self._run(batch)
            with self._cond:
                self._loaded = len(batch) > 1 or bool(self._queue)

    def _full(self) -> bool:
        return sum(item.size for item in self._queue) >= self.max_size

    def queued_rows(self, key: Hashable) -> int:
        """The rows of the requests of ``key`` waiting now."""
        with self._cond:
            return sum(item.size for item in self._queue if item.key == key)

    def take_more(self, key: Hashable, rows: int) -> list[Pending]:
        """Requests of ``key`` queued now that fit in ``rows`` more rows, out of the queue,
        their futures running (a running batch takes them in: continuous batching); none
        while other work waits for the model lock. Never waits."""
        if rows <= 0 or self._lock.waiting:
            return []
        return self._take(key, rows)

    def _take(self, key: Hashable | None = None, rows: int | None = None) -> list[Pending]:
        """Out of the queue: the first live request (unless ``key`` is given), then the
        later ones of its key while they fit in ``rows`` (``max_size``) rows. Requests given
        up are dropped on the way."""
        room = self.max_size if rows is None else rows
        any_size = key is None  # the batch's first request may be bigger than max_size
        with self._cond:
            batch: list[Pending] = []
            used = 0
            for item in list(self._queue):
                if item.cancelled.is_set() or item.future.cancelled():
                    self._queue.remove(item)
                    item.future.cancel()
                    continue
                if key is not None and item.key != key:
                    continue
                if (batch or not any_size) and used + item.size > room:
                    break
                self._queue.remove(item)
                if item.future.set_running_or_notify_cancel():
                    batch.append(item)
                    used += item.size
                    key = item.key
            return batch

    def _run(self, batch: list[Pending]) -> None:
        try:
            self._run_batch(batch)
        except BaseException as exc:  # noqa: BLE001 - never leave a request hanging
            for item in batch:
                if not item.future.done():
                    item.future.set_exception(exc)
        for item in batch:  # run_batch must settle each; a bug here is not a hang
            if not item.future.done():
                item.future.set_exception(RuntimeError("the batch left a request unanswered"))

"""Dynamic batching: gather concurrent requests briefly, run them as one backend call.

A model answers a batch of N for little more than the cost of one, so the
server waits up to ``batch_wait_s`` (or until ``max_batch_size`` requests are
waiting) before handing the backend a batch. While a batch runs in the worker
thread the next one accumulates, so under load batches fill up on their own
and an idle server adds at most ``batch_wait_s`` of latency.

Batches that fill: when a batch ends, its clients get their answers and send
their next requests a few milliseconds later, after the fixed window has closed,
so a server with as many clients as its batch size used to run half-full
batches. The batcher therefore remembers how many requests the last batches
had to serve (the batch plus those waiting when it ended) and, while fewer
than that are waiting, keeps gathering for up to a quarter of a batch's run time
(at most ``max_fill_wait_s``): some latency, for a batch that does
the work of two.

The waiting room is bounded (``max_queue``): a request that finds it full is
refused at once with :class:`QueueFullError`, which the server turns into
503 + Retry-After, so clients back off instead of piling up memory and
timeouts.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class QueueFullError(Exception):
    """The waiting room is full; try again after ``retry_after_s`` seconds."""

    def __init__(self, retry_after_s: int) -> None:
        super().__init__(f"server queue is full; retry after {retry_after_s} s")
        self.retry_after_s = retry_after_s


class ServerClosingError(Exception):
    """The server stopped before this request was run."""


@dataclass
class BatchStats:
    """What batching did, for GET /_stats (shared by all batchers of one server)."""

    batches: int = 0
    requests: int = 0
    batch_sizes: Counter[int] = field(default_factory=Counter)
    max_batch_size_seen: int = 0
    queue_full_rejections: int = 0

    def record(self, size: int) -> None:
        self.batches += 1
        self.requests += size
        self.batch_sizes[size] += 1
        self.max_batch_size_seen = max(self.max_batch_size_seen, size)

    def as_dict(self) -> dict[str, Any]:
        return {
            "batches": self.batches,
            "requests": self.requests,
            "batch_sizes": {str(size): count for size, count in sorted(self.batch_sizes.items())},
            "max_batch_size_seen": self.max_batch_size_seen,
            "queue_full_rejections": self.queue_full_rejections,
        }


class DynamicBatcher(Generic[T, R]):
    """Collects submitted items into batches for ``run_batch``, which runs on ``executor``.

    ``run_batch`` is blocking code that returns one result per item, in order;
    a result that is an exception instance fails only its own request.
    """

    def __init__(
        self,
        run_batch: Callable[[list[T]], Sequence[R | BaseException]],
        *,
        executor: Executor,
        max_batch_size: int = 8,
        batch_wait_s: float = 0.005,
        max_queue: int = 256,
        stats: BatchStats | None = None,
        max_fill_wait_s: float = 0.05,
    ) -> None:
        if max_batch_size < 1 or max_queue < 1 or batch_wait_s < 0:
            raise ValueError("max_batch_size and max_queue must be >= 1 and batch_wait_s >= 0")
        self._run_batch = run_batch
        self._executor = executor
        self.max_batch_size = max_batch_size
        self.batch_wait_s = batch_wait_s
        self.max_queue = max_queue
        self.stats = stats if stats is not None else BatchStats()
        self._waiting: deque[tuple[T, asyncio.Future[R]]] = deque()
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._batch_seconds = 0.0  # moving average, for Retry-After and the fill window
        self.max_fill_wait_s = max_fill_wait_s
        #: requests the recent batches had to serve (batch + waiting at its end), decaying by one per idle batch
        self._expected = 0

    @property
    def queued(self) -> int:
        return len(self._waiting)

    def start(self) -> None:
        """Start the collector on the running loop (idempotent)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._collect(), name="evalkit-batcher")

    def check_capacity(self) -> None:
        """Raise QueueFullError (or ServerClosingError) now if a submit would be refused.

        Lets the server refuse before reading and decoding a large body.
        """
        if self._closed:
            raise ServerClosingError("the server is shutting down")
        if len(self._waiting) >= self.max_queue:
            self.stats.queue_full_rejections += 1
            raise QueueFullError(self.retry_after_s())

    async def submit(self, item: T) -> R:
        """Queue ``item`` and wait for its result; QueueFullError at once when the queue is full."""
        self.check_capacity()
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._waiting.append((item, future))
        self._wakeup.set()
        return await future

    def retry_after_s(self) -> int:
        """Whole seconds until the queue has likely drained by one batch (at least 1)."""
        batches_ahead = math.ceil((len(self._waiting) + 1) / self.max_batch_size)
        return max(1, math.ceil(batches_ahead * self._batch_seconds))

    async def close(self) -> None:
        """Stop collecting; requests still waiting fail with ServerClosingError."""
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        while self._waiting:
            _, future = self._waiting.popleft()
            if not future.done():
                future.set_exception(ServerClosingError("the server is shutting down"))

    async def _collect(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            while not self._waiting:
                self._wakeup.clear()
                await self._wakeup.wait()
            target = min(self.max_batch_size, max(1, self._expected))
            fill_wait = min(self.max_fill_wait_s, 0.25 * self._batch_seconds) if target > len(self._waiting) else 0.0
            deadline = loop.time() + max(self.batch_wait_s, fill_wait)
            short_deadline = loop.time() + self.batch_wait_s
            while len(self._waiting) < self.max_batch_size:
                # the usual short window once the expected demand is here; the fill window until then
                remaining = (short_deadline if len(self._waiting) >= target else deadline) - loop.time()
                if remaining <= 0:
                    break
                self._wakeup.clear()
                try:
                    await asyncio.wait_for(self._wakeup.wait(), remaining)
                except asyncio.TimeoutError:
                    break
            batch: list[tuple[T, asyncio.Future[R]]] = []
            while self._waiting and len(batch) < self.max_batch_size:
                item, future = self._waiting.popleft()
                if not future.done():  # the client went away (cancelled): skip it
                    batch.append((item, future))
            if batch:
                await self._run(batch)
                demand = len(batch) + len(self._waiting)
                self._expected = demand if demand >= self._expected else self._expected - 1

    async def _run(self, batch: list[tuple[T, asyncio.Future[R]]]) -> None:
        loop = asyncio.get_running_loop()
        items = [item for item, _ in batch]
        self.stats.record(len(items))
        started = time.monotonic()
        try:
            results = await loop.run_in_executor(self._executor, self._run_batch, items)
            if len(results) != len(items):
                raise RuntimeError(f"backend returned {len(results)} results for a batch of {len(items)}")
        except asyncio.CancelledError:
            for _, future in batch:
                if not future.done():
                    future.set_exception(ServerClosingError("the server is shutting down"))
            raise
        except Exception as exc:  # the whole batch failed: every request in it gets the error
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
        else:
            for (_, future), result in zip(batch, results):
                if future.done():
                    continue
                if isinstance(result, BaseException):
                    future.set_exception(result)
                else:
                    future.set_result(result)
        elapsed = time.monotonic() - started
        self._batch_seconds = elapsed if self._batch_seconds == 0 else 0.8 * self._batch_seconds + 0.2 * elapsed

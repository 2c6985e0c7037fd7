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

Preparation overlaps generation: a batch's CPU work before the model
(``prepare``: chat templating, feature extraction, padding) and after it
(``finish``: decoding the ids) runs on its own ``prepare_executor``, and the
model thread only generates. While batch N generates, batch N+1 is gathered
and, once full, prepared, so the model starts it the moment N ends; the
share of time the model waited for a preparation is in the stats
(``prepare_wait_seconds`` against ``generate_seconds`` and the wall clock).

Pipelining (``pipeline`` > 1): for a backend whose ``run_batch`` hands the batch
to a model in another process, up to ``pipeline`` batches are handed over at
once, so the model's queue already holds the next full batch when it ends
one, instead of idling while the server's thread and event loop come back
round to send it. A batch that is not full is still only taken once no batch
is generating, so pipelining never makes batches smaller.

A ``prepare_item`` runs on ``prepare_item_executor`` as each request arrives, so
the batch that starts after an idle spell, which has no generate to overlap
with, finds most of its preparation done; its batch's ``prepare`` then only
joins the items. The batch's stage waits for its items on the preparation
thread, not on the event loop: a request's preparation is handed to its
thread and never comes back to the loop (no asyncio future, no wake-up of
the loop per request), because every bit of loop work holds the GIL that the
model's Python-heavy ``generate`` needs.

Bucketing: with a ``cost`` per item (e.g. the prompt's length in tokens,
audio tokens included) and more waiting than a batch holds, a batch is the
oldest request plus the waiting ones closest to it in cost, so short prompts
are not padded to the longest. The oldest always goes first, so nothing
starves.

The waiting room is bounded (``max_queue``): a request that finds it full is
refused at once with :class:`QueueFullError`, which the server turns into
503 + Retry-After, so clients back off instead of piling up memory and
timeouts.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import math
import threading
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Coroutine, Sequence
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
    #: seconds the model thread spent in generate (run_batch)
    generate_seconds: float = 0.0
    #: seconds spent preparing and finishing batches (off the model thread)
    prepare_seconds: float = 0.0
    #: seconds the model was free while the batch it was to run next was still being prepared
    prepare_wait_seconds: float = 0.0
    #: names of the threads each stage ran on ("prepare", "generate", "finish")
    threads: dict[str, set[str]] = field(default_factory=dict)

    def record(self, size: int) -> None:
        self.batches += 1
        self.requests += size
        self.batch_sizes[size] += 1
        self.max_batch_size_seen = max(self.max_batch_size_seen, size)

    def ran_on(self, stage: str) -> None:
        """Note the current thread's name for ``stage`` (called from that stage's thread)."""
        self.threads.setdefault(stage, set()).add(threading.current_thread().name)

    def as_dict(self) -> dict[str, Any]:
        return {
            "batches": self.batches,
            "requests": self.requests,
            "batch_sizes": {str(size): count for size, count in sorted(self.batch_sizes.items())},
            "max_batch_size_seen": self.max_batch_size_seen,
            "queue_full_rejections": self.queue_full_rejections,
            "generate_seconds": round(self.generate_seconds, 6),
            "prepare_seconds": round(self.prepare_seconds, 6),
            "prepare_wait_seconds": round(self.prepare_wait_seconds, 6),
            "threads": {stage: sorted(names) for stage, names in sorted(self.threads.items())},
        }


class DynamicBatcher(Generic[T, R]):
    """Collects submitted items into batches for ``run_batch``, which runs on ``executor`` (the model thread).

    Without ``prepare``/``finish``, ``run_batch`` is blocking code that gets the
    items and returns one result per item, in order; a result that is an
    exception instance fails only its own request. With them, the stages are
    ``prepare(items) -> prepared`` and ``finish(items, generated) -> results``
    on ``prepare_executor`` around ``run_batch(prepared) -> generated`` on
    ``executor``; an exception from any stage fails the whole batch.
    """

    def __init__(
        self,
        run_batch: Callable[[Any], Any],
        *,
        executor: Executor,
        max_batch_size: int = 8,
        batch_wait_s: float = 0.005,
        max_queue: int = 256,
        stats: BatchStats | None = None,
        max_fill_wait_s: float = 0.05,
        prepare: Callable[[list[T]], Any] | None = None,
        finish: Callable[[list[T], Any], Sequence[R | BaseException]] | None = None,
        prepare_executor: Executor | None = None,
        cost: Callable[[T], float] | None = None,
        prepare_item: Callable[[T], None] | None = None,
        prepare_item_executor: Executor | None = None,
        pipeline: int = 1,
    ) -> None:
        if max_batch_size < 1 or max_queue < 1 or batch_wait_s < 0 or pipeline < 1:
            raise ValueError("max_batch_size, max_queue and pipeline must be >= 1 and batch_wait_s >= 0")
        self._run_batch = run_batch
        self._executor = executor
        self.max_batch_size = max_batch_size
        self.batch_wait_s = batch_wait_s
        self.max_queue = max_queue
        self.stats = stats if stats is not None else BatchStats()
        self._prepare = prepare
        self._finish = finish
        self._prepare_executor = prepare_executor if prepare_executor is not None else executor
        self._cost = cost
        self._prepare_item = prepare_item
        # its own thread: on the batches' thread, a burst of arrivals would queue ahead of a batch's join and finish
        self._prepare_item_executor = prepare_item_executor if prepare_item_executor is not None else executor
        #: per-item preparation started at submit, waited for (on the preparation thread) before its batch's
        self._item_ready: dict[int, concurrent.futures.Future[Any]] = {}
        #: (item, its future, its cost) in arrival order
        self._waiting: deque[tuple[T, asyncio.Future[R], float]] = deque()
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._batch_seconds = 0.0  # moving average, for Retry-After and the fill window
        self.max_fill_wait_s = max_fill_wait_s
        #: requests the recent batches had to serve (batch + waiting at its end), decaying by one per idle batch
        self._expected = 0
        #: batches generating or finishing
        self._in_flight: set[asyncio.Task[None]] = set()
        #: batches handed to ``run_batch`` at most at once (1 unless it queues them to a model elsewhere)
        self._pipeline = pipeline
        #: batches handed to ``run_batch`` and not yet back
        self._generating = 0
        #: set while fewer than ``pipeline`` batches are generating
        self._slot_free = asyncio.Event()
        self._slot_free.set()
        #: when the last batch came back with none left generating (the model idle since then)
        self._idle_since = time.monotonic()
        #: when the last batch came back: a pipelined batch's model time starts there
        self._last_end = 0.0
        #: items of the batch prepared and waiting for the model (counted as demand)
        self._ready = 0

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
        cost = float(self._cost(item)) if self._cost is not None else 0.0
        if self._prepare_item is not None:
            # a thread's future, not the loop's: waited for by the batch's preparation; an error is that stage's to redo
            self._item_ready[id(future)] = self._prepare_item_executor.submit(
                self._staged, "prepare", self._prepare_item, item
            )
        self._waiting.append((item, future, cost))
        self._wakeup.set()
        try:
            return await future
        finally:
            self._item_ready.pop(id(future), None)

    def retry_after_s(self) -> int:
        """Whole seconds until the queue has likely drained by one batch (at least 1)."""
        batches_ahead = math.ceil((len(self._waiting) + 1) / self.max_batch_size)
        return max(1, math.ceil(batches_ahead * self._batch_seconds))

    async def close(self) -> None:
        """Stop collecting; requests still waiting fail with ServerClosingError."""
        self._closed = True
        for task in [t for t in (self._task, *self._in_flight) if t is not None]:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._task = None
        while self._waiting:
            _, future, _ = self._waiting.popleft()
            if not future.done():
                future.set_exception(ServerClosingError("the server is shutting down"))

    async def _collect(self) -> None:
        while True:
            while not self._waiting:
                self._wakeup.clear()
                await self._wakeup.wait()
            await self._gather()
            batch = self._take()
            if not batch:
                continue
            if self._pipeline > 1:
                self._ready = len(batch)
                await self._slot_free.wait()
                self._ready = 0
                self._dispatch(self._pipelined(batch, self._occupy_slot()))
                continue
            prepared = await self._prepared(batch)
            if prepared is None:
                continue
            self._ready = len(batch)
            await self._slot_free.wait()
            self._ready = 0
            self._dispatch(self._generate(batch, prepared[0], prepared[1], self._occupy_slot()))

    def _occupy_slot(self) -> bool:
        """Count a batch handed to the model; True when none was generating (the model was idle)."""
        was_idle = self._generating == 0
        self._generating += 1
        if self._generating >= self._pipeline:
            self._slot_free.clear()
        return was_idle

    def _dispatch(self, run: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(run, name="evalkit-batch")
        self._in_flight.add(task)
        task.add_done_callback(self._in_flight.discard)

    def _model_done(self, size: int, started: float, ended: float) -> None:
        """A batch came back from the model (or failed): its model time, the demand it saw, a free slot."""
        # the model's time for this batch: a batch handed over behind another starts when that one ends
        elapsed = max(0.0, ended - max(started, self._last_end))
        self._last_end = max(self._last_end, ended)
        self.stats.generate_seconds += elapsed
        self._batch_seconds = elapsed if self._batch_seconds == 0 else 0.8 * self._batch_seconds + 0.2 * elapsed
        demand = size + self._ready + len(self._waiting)
        self._expected = demand if demand >= self._expected else self._expected - 1
        self._generating -= 1
        if self._generating == 0:
            self._idle_since = ended
        self._slot_free.set()
        self._wakeup.set()

    async def _pipelined(self, batch: list[tuple[T, asyncio.Future[R]]], was_idle: bool) -> None:
        """All three stages of a batch on one backend thread, for a ``run_batch`` that queues it to a model elsewhere.

        That thread only waits while the model works, so it may as well prepare
        and finish: each hop between the event loop and a stage's thread is GIL
        time and latency, and a full batch is handed over the moment it is taken.
        """
        items = [item for item, _ in batch]
        self.stats.record(len(items))
        ready = [self._item_ready[id(future)] for _, future in batch if id(future) in self._item_ready]
        taken = time.monotonic()
        times = [taken, taken]  # when the batch went to the model and came back, set by the thread

        async def results() -> Sequence[Any]:
            try:
                return await asyncio.get_running_loop().run_in_executor(
                    self._executor, self._all_stages, ready, items, times
                )
            finally:
                sent, back = times
                if was_idle:  # the model was free while this batch was prepared
                    self.stats.prepare_wait_seconds += max(0.0, sent - max(taken, self._idle_since))
                self._model_done(len(batch), sent, back if back > taken else time.monotonic())

        await _deliver(batch, results())

    def _all_stages(self, ready: list[concurrent.futures.Future[Any]], items: list[T], times: list[float]) -> Any:
        began = time.monotonic()
        prepared = self._staged("prepare", self._prepare_when_ready, ready, items) if self._prepare else items
        times[0] = time.monotonic()
        self.stats.prepare_seconds += times[0] - began
        generated = self._staged("generate", self._run_batch, prepared)
        times[1] = time.monotonic()
        if self._finish is None:
            return generated
        results = self._staged("finish", self._finish, items, generated)
        self.stats.prepare_seconds += time.monotonic() - times[1]
        return results

    async def _gather(self) -> None:
        """Wait until a batch is worth taking.

        While the model is busy: until a full batch waits (it is then prepared
        during the current generate, and with pipelining handed over at once) or
        the model is free. Once it is free: the short window, or the fill window
        while fewer than the recent demand wait.
        """
        loop = asyncio.get_running_loop()
        while self._generating > 0 and len(self._waiting) < self.max_batch_size:
            self._wakeup.clear()
            await self._wakeup.wait()
        if len(self._waiting) >= self.max_batch_size:
            return
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

    def _take(self) -> list[tuple[T, asyncio.Future[R]]]:
        """The next batch: the oldest live request and, with costs, the waiting ones closest to it in cost."""
        live = [entry for entry in self._waiting if not entry[1].done()]  # skip clients that went away
        self._waiting.clear()
        if self._cost is None or len(live) <= self.max_batch_size:
            chosen, rest = live[: self.max_batch_size], live[self.max_batch_size :]
        else:
            anchor = live[0][2]
            order = sorted(range(1, len(live)), key=lambda i: (abs(live[i][2] - anchor), i))
            picked = {0, *order[: self.max_batch_size - 1]}
            chosen = [live[i] for i in sorted(picked)]
            rest = [live[i] for i in range(len(live)) if i not in picked]
        self._waiting.extend(rest)
        return [(item, future) for item, future, _ in chosen]

    async def _prepared(self, batch: list[tuple[T, asyncio.Future[R]]]) -> tuple[Any, float] | None:
        """(the prepared batch, when preparing began), or None after failing the batch's requests."""
        items = [item for item, _ in batch]
        began = time.monotonic()
        if self._prepare is None:
            return items, began
        ready = [self._item_ready[id(future)] for _, future in batch if id(future) in self._item_ready]
        try:
            prepared = await asyncio.get_running_loop().run_in_executor(
                self._prepare_executor, self._staged, "prepare", self._prepare_when_ready, ready, items
            )
        except asyncio.CancelledError:
            _fail(batch, ServerClosingError("the server is shutting down"))
            raise
        except Exception as exc:  # the whole batch failed: every request in it gets the error
            _fail(batch, exc)
            return None
        finally:
            self.stats.prepare_seconds += time.monotonic() - began
        return prepared, began

    def _prepare_when_ready(self, ready: list[concurrent.futures.Future[Any]], items: list[T]) -> Any:
        """The batch's ``prepare`` once its requests' own preparation has ended (on the preparation thread).

        One that failed or was cancelled is left to ``prepare`` to redo.
        """
        concurrent.futures.wait(ready)
        assert self._prepare is not None
        return self._prepare(items)

    def _staged(self, stage: str, fn: Callable[..., Any], *args: Any) -> Any:
        self.stats.ran_on(stage)
        return fn(*args)

    async def _generate(
        self, batch: list[tuple[T, asyncio.Future[R]]], prepared: Any, prepare_began: float, was_idle: bool
    ) -> None:
        loop = asyncio.get_running_loop()
        items = [item for item, _ in batch]
        self.stats.record(len(items))
        started = time.monotonic()
        if was_idle:  # the model was free but this batch was not ready yet: time lost to preparation
            self.stats.prepare_wait_seconds += max(0.0, started - max(prepare_began, self._idle_since))

        async def results() -> Sequence[Any]:
            try:
                generated = await loop.run_in_executor(
                    self._executor, self._staged, "generate", self._run_batch, prepared
                )
            finally:
                self._model_done(len(batch), started, time.monotonic())
            if self._finish is None:
                return generated
            finish_began = time.monotonic()
            try:
                return await loop.run_in_executor(
                    self._prepare_executor, self._staged, "finish", self._finish, items, generated
                )
            finally:
                self.stats.prepare_seconds += time.monotonic() - finish_began

        await _deliver(batch, results())


async def _deliver(batch: Sequence[tuple[Any, asyncio.Future[Any]]], results: Awaitable[Sequence[Any]]) -> None:
    """Each request's answer from a batch's ``results``; if they fail, the whole batch fails with that error.

    A cancelled batch (the server closing) fails with ServerClosingError and the cancellation goes on.
    """
    try:
        answers = await results
        if len(answers) != len(batch):
            raise RuntimeError(f"backend returned {len(answers)} results for a batch of {len(batch)}")
    except asyncio.CancelledError:
        _fail(batch, ServerClosingError("the server is shutting down"))
        raise
    except Exception as exc:  # the whole batch failed: every request in it gets the error
        _fail(batch, exc)
        return
    _settle(batch, answers)


def _settle(batch: Sequence[tuple[Any, asyncio.Future[Any]]], results: Sequence[Any]) -> None:
    """Each request's result, or its own exception, to its waiting handler (unless it went away)."""
    for (_, future), result in zip(batch, results):
        if future.done():
            continue
        if isinstance(result, BaseException):
            future.set_exception(result)
        else:
            future.set_result(result)


def _fail(batch: Sequence[tuple[Any, asyncio.Future[Any]]], exc: BaseException) -> None:
    for _, future in batch:
        if not future.done():
            future.set_exception(exc)

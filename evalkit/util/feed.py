"""An engine's samples handed to a fixed set of workers: no task, semaphore slot or callback per sample.

Samples are read from the dataset's iterator in a worker thread, a batch at a
time (a hub dataset or a large local file may block), and handed out in file
order. ``window`` workers each take the next sample, run it to the end, and
take another, so at most ``window`` samples are in flight and memory stays
bounded by the window and one batch, as before; but a sample no longer costs a
task of its own, a semaphore round trip and a done callback. At thousands of
samples a second those were a tenth of the engine's own CPU per request
(BENCHMARKS.md, issue 45).

Failure is as it was with a task per sample: the first exception (a sample's,
or the dataset's while it is read) stops the handing out of samples; the
samples already in flight finish, unless the exception is one of ``fatal``
(a full disk: nothing more can be kept), which cancels them; then it is
raised. A cancelled run cancels every worker and waits for them, so no sample
outlives its engine.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")

#: samples read per trip to the reading thread: the first batch is small so the first requests go out at once;
#: later ones are large for text (a trip is a thread hand-off, the GIL passed back and forth: ~50 µs), and stay
#: small for samples that carry audio or images, which hold megabytes each and cost milliseconds anyway
FIRST_BATCH = 32
BATCH = 256
MEDIA_BATCH = 32


class Feed(Generic[T]):
    """Items of ``iterator``, read a batch at a time in a thread, taken in order by any number of workers.

    The next batch is read while half of the current one is still buffered, so a worker seldom waits for the
    thread, and at most one and a half batches are held besides what is in flight. ``heavy`` tells, from the
    first batch, whether items are large (media): then every batch is ``media_batch`` items.
    """

    def __init__(
        self,
        iterator: Iterator[T],
        first_batch: int = FIRST_BATCH,
        batch: int = BATCH,
        heavy: Callable[[T], bool] | None = None,
        media_batch: int = MEDIA_BATCH,
    ) -> None:
        self._iterator = iterator
        self._buffer: deque[T] = deque()
        self._next_size = max(1, first_batch)
        self._batch = max(1, batch)
        self._low = self._batch // 2
        self._heavy = heavy
        self._media_batch = max(1, media_batch)
        self._reading: asyncio.Task[None] | None = None
        #: workers waiting for an item, each on a future of its own (woken one per item that came)
        self._waiting: deque[asyncio.Future[None]] = deque()
        #: the dataset's error while it was read (then :attr:`ended` too)
        self.error: Exception | None = None
        self.ended = False

    def take(self) -> T | None:
        """The next item if one is buffered; None: wait with :meth:`fill` unless :attr:`ended`."""
        buffer = self._buffer
        if len(buffer) <= self._low and self._reading is None and not self.ended:
            self._reading = asyncio.ensure_future(self._read())
        return buffer.popleft() if buffer else None

    async def fill(self) -> None:
        """Wait until an item may be there for this worker (or the data ended, or failed)."""
        if self._buffer or self.ended:
            return
        if self._reading is None:
            self._reading = asyncio.ensure_future(self._read())
        waiter = asyncio.get_running_loop().create_future()
        self._waiting.append(waiter)
        await waiter

    async def _read(self) -> None:
        size, self._next_size = self._next_size, self._batch
        try:
            batch = await asyncio.to_thread(lambda: list(itertools.islice(self._iterator, size)))
        except asyncio.CancelledError:
            self.ended = True
            raise
        except Exception as error:
            self.error, self.ended = error, True  # a dataset that failed once is not read again
        else:
            if batch:
                if self._heavy is not None:
                    if any(self._heavy(item) for item in batch):
                        self._batch = self._next_size = self._media_batch
                        self._low = self._batch // 2
                    self._heavy = None  # decided once, on the first batch
                self._buffer.extend(batch)
            else:
                self.ended = True
        finally:
            self._reading = None
            # as many workers as items came (every one at the end): waking all of them for a few items costs
            # each of the others a future and a trip through the loop for nothing
            waiting = self._waiting
            wake = len(waiting) if self.ended else min(len(waiting), len(self._buffer))
            for _ in range(wake):
                waiter = waiting.popleft()
                if not waiter.done():
                    waiter.set_result(None)

    def cancel(self) -> None:
        """Stop a read in flight (the run stopped): its batch is dropped."""
        reading = self._reading
        if reading is not None and not reading.done():
            reading.cancel()
        self.ended = True


async def drain(
    feed: Feed[T],
    workers: int,
    handle: Callable[[T], Awaitable[None]],
    fatal: tuple[type[BaseException], ...] = (),
    stop: Callable[[], bool] | None = None,
) -> None:
    """Run ``handle`` on every item of ``feed`` with at most ``workers`` at once (see the module for failures).

    ``stop`` is asked before each item is taken: once it says True (the run's budget is spent), no worker takes
    another and the items in flight finish.
    """
    first_error: list[BaseException] = []
    tasks: list[asyncio.Task[None]] = []

    def fail(error: BaseException) -> None:
        if first_error:
            return
        first_error.append(error)
        feed.ended = True  # no sample is handed out after the first error
        if isinstance(error, fatal):
            current = asyncio.current_task()
            for task in tasks:
                if task is not current:
                    task.cancel()

    async def work() -> None:
        while not first_error:
            if stop is not None and stop():
                return
            item = feed.take()
            if item is None:
                if feed.error is not None:
                    fail(feed.error)
                if feed.ended:
                    return
                await feed.fill()
                continue
            try:
                await handle(item)
            except asyncio.CancelledError:
                raise
            except Exception as error:
                fail(error)
                return

    tasks.extend(asyncio.create_task(work()) for _ in range(max(1, workers)))
    try:
        await asyncio.gather(*tasks, return_exceptions=True)
    except asyncio.CancelledError:
        # the run stops (another engine hit a full disk, a signal): no worker may outlive its engine, or it would
        # go on sending after the clients and the store are closed
        for task in tasks:
            task.cancel()
        feed.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    feed.cancel()
    if first_error:
        raise first_error[0]

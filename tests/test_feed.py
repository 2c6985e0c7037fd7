"""The engine's samples go to a fixed set of workers (evalkit/util/feed.py): order, bound, and failures as before."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from evalkit.errors import DiskFullError
from evalkit.util.feed import Feed, drain


def test_every_item_is_handled_once_in_order_with_at_most_window_at_once() -> None:
    started: list[int] = []
    running = 0
    most = 0

    async def handle(item: int) -> None:
        nonlocal running, most
        started.append(item)
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.001 * (item % 3))
        running -= 1

    asyncio.run(drain(Feed(iter(range(500)), first_batch=7, batch=20), 16, handle))
    assert started == list(range(500))  # taken in the iterator's order
    assert most == 16


def test_the_datasets_error_is_raised_after_the_items_in_flight_finish() -> None:
    finished: list[int] = []

    def items() -> Iterator[int]:
        yield from range(10)
        raise ValueError("row 11 is unreadable")

    async def handle(item: int) -> None:
        await asyncio.sleep(0.01)
        finished.append(item)

    with pytest.raises(ValueError, match="row 11"):
        asyncio.run(drain(Feed(items(), first_batch=4, batch=4), 3, handle))
    assert sorted(finished) == list(range(8))  # the batches read whole; the one the error cut is not handed out


@pytest.mark.parametrize("fatal", [False, True], ids=["bug", "disk_full"])
def test_a_failed_item_stops_the_handing_out_and_a_fatal_one_cancels_the_rest(fatal: bool) -> None:
    finished: list[int] = []
    cancelled: list[int] = []

    async def handle(item: int) -> None:
        if item == 2:
            await asyncio.sleep(0.01)
            raise DiskFullError("records.jsonl", None) if fatal else RuntimeError("a bug")
        try:
            await asyncio.sleep(0.2 if item < 2 else 0)
        except asyncio.CancelledError:
            cancelled.append(item)
            raise
        finished.append(item)

    with pytest.raises(DiskFullError if fatal else RuntimeError):
        asyncio.run(drain(Feed(iter(range(1000))), 3, handle, fatal=(DiskFullError,)))
    # the two in flight finish, unless the error is fatal (nothing more can be kept): then they are cancelled
    assert sorted(cancelled if fatal else finished) == [0, 1]
    assert max(finished + cancelled) < 10  # nothing much was handed out after the failure


def test_a_cancelled_drain_cancels_every_worker() -> None:
    cancelled = 0

    async def handle(item: int) -> None:
        nonlocal cancelled
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled += 1
            raise

    async def main() -> None:
        task = asyncio.create_task(drain(Feed(iter(range(100))), 5, handle))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert cancelled == 5


@pytest.mark.parametrize("heavy", [False, True], ids=["text", "media"])
def test_media_items_are_read_in_small_batches(heavy: bool) -> None:
    """Text is read far ahead (few thread trips); items holding media are not, so memory stays near the window."""
    pulled = 0
    ahead: list[int] = []

    def items() -> Iterator[int]:
        nonlocal pulled
        for i in range(3000):
            pulled += 1
            yield i

    async def handle(item: int) -> None:
        ahead.append(pulled - item)  # read but not yet handed out, plus those in flight
        await asyncio.sleep(0)

    feed = Feed(items(), first_batch=8, batch=256, heavy=lambda item: heavy, media_batch=8)
    asyncio.run(drain(feed, 4, handle))
    assert len(ahead) == 3000
    assert (max(ahead) <= 8 + 8 + 4) is heavy  # a batch and a half at most ahead of the workers, with media


def test_once_stop_says_so_no_item_is_taken_and_those_in_flight_finish() -> None:
    started: list[int] = []
    finished: list[int] = []

    async def handle(item: int) -> None:
        started.append(item)
        await asyncio.sleep(0.005)
        finished.append(item)

    # the budget is spent once 20 items were taken: the 4 workers each finish what they hold, and take no more
    asyncio.run(drain(Feed(iter(range(500)), first_batch=8, batch=16), 4, handle, stop=lambda: len(started) >= 20))
    assert started == list(range(20)) and sorted(finished) == started

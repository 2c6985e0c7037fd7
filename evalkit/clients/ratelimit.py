"""Pacing of requests: token buckets for rate limits, and a concurrency limit that backs off on 429.

Waits are computed (sleep exactly until the bucket holds enough), never
polled, so a limiter costs nothing when it is not the bottleneck.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque


class TokenBucket:
    """Continuously refilled at ``per_minute / 60`` per second, holding at most ``capacity``.

    ``acquire(amount)`` waits until the bucket holds ``min(amount, capacity)``
    and takes ``amount`` (the level may go negative: one request larger than
    the bucket still goes, and the next ones pay its debt). ``settle`` corrects
    a reservation once the real cost is known (tokens from a response's usage).
    Over any window of T seconds at most ``capacity + rate * T`` (plus the
    reservations still unsettled) is spent.
    """

    def __init__(self, per_minute: float, capacity: float | None = None) -> None:
        if per_minute <= 0:
            raise ValueError("per_minute must be > 0")
        self.rate = per_minute / 60.0
        self.capacity = max(capacity if capacity is not None else self.rate, 1.0)
        self.level = self.capacity
        self._updated = time.monotonic()
        self._lock = asyncio.Lock()  # waiters queue in FIFO order, one computes its sleep at a time

    def _refill(self) -> None:
        now = time.monotonic()
        self.level = min(self.capacity, self.level + (now - self._updated) * self.rate)
        self._updated = now

    async def acquire(self, amount: float = 1.0) -> None:
        async with self._lock:
            self._refill()
            need = min(amount, self.capacity)
            while self.level < need:
                await asyncio.sleep((need - self.level) / self.rate)
                self._refill()
            self.level -= amount

    def settle(self, reserved: float, actual: float) -> None:
        self._refill()
        self.level -= actual - reserved


class TokenEstimator:
    """The tokens the next request will likely cost: the mean of what responses reported so far."""

    def __init__(self) -> None:
        self.total = 0.0
        self.count = 0

    @property
    def estimate(self) -> float:
        return self.total / self.count if self.count else 0.0

    def observe(self, tokens: float) -> None:
        self.total += tokens
        self.count += 1


class AdaptiveLimit:
    """A semaphore whose size halves when the endpoint says 429 and grows back by one per round of successes.

    Additive increase, multiplicative decrease (as TCP does): a rate-limited
    endpoint gets fewer requests at once, and the full ``maximum`` returns once
    it keeps answering. At most one halving per ``cooldown`` seconds, so a burst
    of 429s from requests that were already in flight counts once.
    """

    def __init__(self, maximum: int) -> None:
        self.maximum = max(1, maximum)
        self.limit = self.maximum
        self.active = 0
        self.lowest = self.maximum
        self._successes = 0
        self._calm_after = 0.0
        self._waiters: deque[asyncio.Future[None]] = deque()

    async def acquire(self) -> None:
        """Take a slot, waiting in FIFO order when none is free.

        A released slot is handed straight to the oldest waiter (counted in
        ``active`` before it wakes), so a waiter never wakes to find its slot
        taken and never queues again: with hundreds of submitters waiting on
        one replica, re-queueing cost a fresh future per wake-up.
        """
        if self.active < self.limit and not self._waiters:
            self.active += 1
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # the slot was handed over already: pass it on
            else:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)
            raise

    def release(self) -> None:
        self.active -= 1
        self._wake()

    def _wake(self) -> None:
        while self.active < self.limit and self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self.active += 1
                waiter.set_result(None)

    def decrease(self, cooldown: float) -> None:
        now = time.monotonic()
        if now < self._calm_after:
            return
        self._calm_after = now + cooldown
        self.limit = max(1, self.limit // 2)
        self.lowest = min(self.lowest, self.limit)
        self._successes = 0

    def success(self) -> None:
        if self.limit >= self.maximum:
            return
        self._successes += 1
        if self._successes >= self.limit:
            self._successes = 0
            self.limit += 1
            self._wake()

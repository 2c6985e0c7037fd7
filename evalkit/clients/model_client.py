"""All requests to one model: replicas, retries, circuit breaking, de-duplication, the store.

Every replica runs ``batch_size`` worker tasks that pull jobs from the
model's single queue, so a fast replica takes more work, a slow one less and
a dead one none (no static shards). A failed attempt is re-queued after its
backoff instead of holding a worker, so retries never stall throughput.

Identical requests in flight at once share one future; finished ones come
from the response store. Errors are never stored.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field

from evalkit.clients.outcome import Outcome, failed
from evalkit.clients.pool import Attempt, EndpointPool
from evalkit.clients.request import ModelRequest
from evalkit.store import ResponseStore


@dataclass
class RetryPolicy:
    retry_attempts: int = 3
    backoff_base: float = 0.5
    backoff_max: float = 30.0
    #: consecutive failures that open a replica's circuit
    breaker_threshold: int = 5
    #: first pause of an open circuit (doubles per failed probe)
    breaker_pause: float = 1.0
    #: failed probes after which a replica is considered dead
    breaker_probes: int = 3
    #: seconds a sample may take over all its attempts (None: no deadline)
    deadline: float | None = None

    def backoff(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.backoff_max)
        return random.uniform(0, min(self.backoff_max, self.backoff_base * 2 ** (attempt - 1)))


@dataclass(slots=True)
class _Job:
    request: ModelRequest
    future: asyncio.Future[Outcome]
    started: float
    attempts: int = 0
    last: Attempt | None = None


@dataclass
class _Replica:
    pool: EndpointPool
    workers: int
    delay: float = 0.0
    consecutive_failures: int = 0
    open_until: float = 0.0
    failed_probes: int = 0
    dead: bool = False
    probing: bool = False
    answered: int = 0
    tasks: list[asyncio.Task[None]] = field(default_factory=list)


class ModelClient:
    """The one gateway to a model for every engine of the run."""

    def __init__(
        self,
        name: str,
        pools: list[tuple[EndpointPool, int]],
        policy: RetryPolicy,
        store: ResponseStore | None = None,
        delay_ms: float = 0.0,
        requests_per_minute: float | None = None,
    ) -> None:
        self.name = name
        self.policy = policy
        self.store = store
        self._replicas = [_Replica(pool=pool, workers=workers, delay=delay_ms / 1000.0) for pool, workers in pools]
        self._queue: asyncio.Queue[_Job] = asyncio.Queue()
        self._inflight: dict[str, asyncio.Future[Outcome]] = {}
        self._started = False
        self._min_interval = 60.0 / requests_per_minute if requests_per_minute else 0.0
        self._next_slot = 0.0
        self.sent = 0
        self.store_hits = 0
        self.deduplicated = 0

    @property
    def concurrency(self) -> int:
        return sum(r.workers for r in self._replicas)

    def replica_counts(self) -> dict[str, int]:
        return {r.pool.name: r.answered for r in self._replicas}

    def _start(self) -> None:
        self._started = True
        for replica in self._replicas:
            replica.tasks = [asyncio.create_task(self._worker(replica)) for _ in range(replica.workers)]

    async def submit(self, request: ModelRequest, *, use_store: bool = True) -> Outcome:
        """The outcome of ``request``: from the store, a twin in flight, or the endpoint."""
        key = request.key
        twin = self._inflight.get(key)
        if twin is not None:
            self.deduplicated += 1
            outcome = await asyncio.shield(twin)
            return outcome
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Outcome] = loop.create_future()
        self._inflight[key] = future
        try:
            if use_store and self.store is not None:
                stored = await self.store.get(key)
                if stored is not None:
                    self.store_hits += 1
                    outcome = Outcome(text=stored["text"], raw=stored.get("raw"), cached=True, usage=stored.get("usage") or {})
                    future.set_result(outcome)
                    return outcome
            if self._all_dead():
                outcome = self._unavailable(None)
                future.set_result(outcome)
                return outcome
            if not self._started:
                self._start()
            self._queue.put_nowait(_Job(request=request, future=future, started=time.monotonic()))
            return await asyncio.shield(future)
        finally:
            if self._inflight.get(key) is future:
                del self._inflight[key]

    def _all_dead(self) -> bool:
        return all(r.dead for r in self._replicas)

    def _unavailable(self, job: _Job | None) -> Outcome:
        last = job.last if job else None
        detail = f"; last error: {last.error}" if last and last.error else ""
        return failed(
            "endpoint_unavailable",
            f"all endpoints of {self.name} stopped answering (circuit open){detail}",
            status=last.status if last else None,
            attempts=job.attempts if job else 0,
        )

    async def _wait_turn(self, replica: _Replica) -> bool:
        """Block while the replica's circuit is open; False once it is dead.

        When an open circuit's pause ends, exactly one worker becomes the probe
        (half-open); the others wait for its verdict.
        """
        while True:
            if replica.dead:
                return False
            now = time.monotonic()
            if replica.open_until > now:
                await asyncio.sleep(replica.open_until - now)
                continue
            if replica.consecutive_failures < self.policy.breaker_threshold:
                return True
            if not replica.probing:
                replica.probing = True
                return True
            await asyncio.sleep(0.05)

    async def _rate_limit(self) -> None:
        if self._min_interval:
            now = time.monotonic()
            slot = max(now, self._next_slot)
            self._next_slot = slot + self._min_interval
            if slot > now:
                await asyncio.sleep(slot - now)

    async def _worker(self, replica: _Replica) -> None:
        while True:
            if not await self._wait_turn(replica):
                if self._all_dead():
                    self._drain_unavailable()
                return
            job = await self._queue.get()
            if job.future.done():
                continue
            if replica.dead or (replica.open_until > time.monotonic() and not replica.probing):
                self._queue.put_nowait(job)
                continue
            await self._rate_limit()
            if replica.delay:
                await asyncio.sleep(replica.delay)
            job.attempts += 1
            self.sent += 1
            attempt = await replica.pool.attempt(job.request)
            job.last = attempt
            if attempt.failure is None:
                self._on_success(replica)
                replica.answered += 1
                outcome = Outcome(
                    text=attempt.text, raw=attempt.raw, status=attempt.status, latency=attempt.latency,
                    attempts=job.attempts, replica=replica.pool.name, usage=attempt.usage or {},
                )
                if self.store is not None:
                    await self.store.put(job.request.key, self.name, {"text": attempt.text, "raw": attempt.raw, "usage": attempt.usage})
                if not job.future.done():
                    job.future.set_result(outcome)
                continue
            self._on_failure(replica, attempt)
            self._retry_or_fail(job, attempt, replica)

    def _on_success(self, replica: _Replica) -> None:
        replica.consecutive_failures = 0
        replica.failed_probes = 0
        replica.open_until = 0.0
        replica.probing = False

    def _on_failure(self, replica: _Replica, attempt: Attempt) -> None:
        if attempt.failure in ("connection", "timeout") or (attempt.status or 0) >= 500:
            replica.consecutive_failures += 1
            if replica.probing:
                replica.failed_probes += 1
                replica.probing = False
                if replica.failed_probes >= self.policy.breaker_probes:
                    replica.dead = True
                    return
            if replica.consecutive_failures >= self.policy.breaker_threshold:
                pause = self.policy.breaker_pause * 2 ** replica.failed_probes
                replica.open_until = time.monotonic() + pause
        elif attempt.status == 429:
            pause = attempt.retry_after if attempt.retry_after is not None else self.policy.backoff(1, None)
            replica.open_until = max(replica.open_until, time.monotonic() + pause)
        else:
            replica.probing = False

    def _retry_or_fail(self, job: _Job, attempt: Attempt, replica: _Replica) -> None:
        policy = self.policy
        if self._all_dead():
            job.future.set_result(self._unavailable(job))
            self._drain_unavailable()
            return
        give_up = not attempt.retryable or job.attempts > policy.retry_attempts
        delay = 0.0 if give_up else policy.backoff(job.attempts, attempt.retry_after)
        if not give_up and policy.deadline is not None and time.monotonic() + delay - job.started > policy.deadline:
            give_up = True
        if give_up:
            job.future.set_result(
                failed(attempt.failure or "error", attempt.error or "", status=attempt.status, attempts=job.attempts, latency=attempt.latency, replica=replica.pool.name)
            )
            return
        asyncio.get_running_loop().call_later(delay, self._requeue, job)

    def _requeue(self, job: _Job) -> None:
        if job.future.done():
            return
        if self._all_dead():
            job.future.set_result(self._unavailable(job))
        else:
            self._queue.put_nowait(job)

    def _drain_unavailable(self) -> None:
        while not self._queue.empty():
            job = self._queue.get_nowait()
            if not job.future.done():
                job.future.set_result(self._unavailable(job))

    async def close(self) -> None:
        for replica in self._replicas:
            for task in replica.tasks:
                task.cancel()
        for replica in self._replicas:
            if replica.tasks:
                await asyncio.gather(*replica.tasks, return_exceptions=True)
            await replica.pool.close()

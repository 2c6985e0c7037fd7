"""All requests to one model: replicas, retries, circuit breaking, pacing, de-duplication, the store.

Every replica runs ``batch_size`` worker tasks that pull jobs from the
model's single queue, so a fast replica takes more work, a slow one less and
a dead one none (no static shards). A failed attempt is re-queued after its
backoff instead of holding a worker, so retries never stall throughput.

Retries follow the error:

- 429: wait for ``retry-after-ms``/``Retry-After`` (exponential backoff with
  jitter when absent) and halve the replica's concurrency for a while
  (:class:`AdaptiveLimit`); 429s do not use up ``retry_attempts`` but are
  bounded by ``rate_limit_retries`` and the deadline.
- 5xx, connection errors, timeouts, unparseable answers: exponential backoff
  with jitter, at most ``retry_attempts`` retries.
- other 4xx (400, 401, 403, 404, 422, ...): not retried; the failure carries
  the server's message.

Every attempt has a timeout (``timeout`` of the model, cut to what is left of
the deadline) and every request a deadline over all its attempts, counted from
its first attempt. A replica that fails ``breaker_threshold`` times in a row
(connection, timeout, 5xx) is paused and probed (see :class:`Circuit`);
after ``breaker_probes`` failed rounds of probes it is dead, and once every replica of
the model is dead the remaining requests fail at once as
``endpoint_unavailable`` — a dead server costs seconds, not
``samples x retries x timeout``.

Pacing: ``requests_per_minute`` and ``tokens_per_minute`` are token buckets
shared by the model's replicas (tokens are the responses' ``usage.total_tokens``;
each request reserves the running mean and settles when its usage is known).
``delay`` is a politeness pause: every attempt waits ``delay`` milliseconds
on its worker right before it is sent, so one replica sends at most
``batch_size`` requests per ``delay``.

Identical requests in flight at once share one future; finished ones come
from the last ``RECENT_ANSWERS`` outcomes kept in memory (with a response
store, answers only), then from the store, so two metrics of one dataset
cost one inference even when one engine runs ahead of the other, and the
run counts the twin as shared whichever engine came first. A success resolves only after the store has
committed it (the worker waits for the group commit), so whatever the
engine records is already stored, and at most ``batch_size`` answers per
endpoint are received-but-not-stored at any moment. Errors are never stored.
An answer the store refuses (too large for SQLite) fails its own sample as
``unstorable``; a store that takes nothing more (full disk, locked, I/O error)
fails the request with its error, which stops the run (exit 1, or 4 for a
full disk): nothing is scored that a resume could not find again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from evalkit.clients.circuit import Circuit
from evalkit.clients.endpoint import Attempt, EndpointPool
from evalkit.clients.outcome import Outcome, failed
from evalkit.clients.ratelimit import AdaptiveLimit, TokenBucket, TokenEstimator
from evalkit.clients.request import ModelRequest
from evalkit.clients.spending import Account
from evalkit.clients.store_key import StoreRefused, response_key
from evalkit.errors import DiskFullError, WriteFailed
from evalkit.failures import FailureReason

if TYPE_CHECKING:
    from evalkit.clients.store import ResponseStore

log = logging.getLogger("evalkit.client")
#: answers kept in memory for twins in a run without a response store: a few engine windows (256 samples each) of
#: drift between engines of one dataset, and a bounded memory cost whatever the dataset size
RECENT_ANSWERS = 2048


@dataclass
class RetryPolicy:
    """How hard to try; the defaults suit hosted APIs and local servers alike."""

    #: retries after the first attempt for 5xx, connection errors, timeouts and unparseable answers
    retry_attempts: int = 3
    backoff_base: float = 0.5
    backoff_max: float = 30.0
    #: 429 answers a request may meet (on top of retry_attempts; the deadline bounds them too)
    rate_limit_retries: int = 10
    #: a longer Retry-After is cut to this
    retry_after_max: float = 120.0
    #: consecutive endpoint faults that open a replica's circuit (at least twice the replica's workers)
    breaker_threshold: int = 5
    #: first pause of an open circuit (doubles per failed round of probes)
    breaker_pause: float = 1.0
    #: failed rounds of probes after which a replica is dead for the run
    breaker_probes: int = 3
    #: probes per round (at most the replica's workers); the round fails only if all of them fail
    probe_width: int = 3
    #: seconds a request may take over all its attempts, from its first attempt
    #: (None: :func:`default_deadline` of the slowest endpoint's timeout)
    deadline: float | None = None

    def backoff(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds before retry number ``attempt`` (from 1): Retry-After when given, else exponential with jitter."""
        if retry_after is not None:
            wait = min(retry_after, self.retry_after_max)
            return wait + random.uniform(0, min(0.1 * wait, 1.0))  # never earlier than asked; spread a herd
        ceiling = min(self.backoff_max, self.backoff_base * 2 ** max(0, attempt - 1))
        return random.uniform(ceiling / 2, ceiling)


def default_deadline(timeout: float, retry_attempts: int) -> float:
    """A request's deadline when none is configured: a safety net against endless 429s and pauses, not a tight bound."""
    return max(300.0, 4.0 * timeout * (retry_attempts + 1))


@dataclass(slots=True)
class _Job:
    request: ModelRequest
    store_key: str
    future: asyncio.Future[Outcome]
    started: float | None = None
    #: HTTP attempts sent (for the record)
    attempts: int = 0
    #: failed attempts that use up retry_attempts (failed probes of an open circuit do not)
    charged: int = 0
    rate_limited: int = 0
    last: Attempt | None = None


@dataclass
class _Replica:
    pool: EndpointPool
    workers: int
    limit: AdaptiveLimit
    circuit: Circuit
    answered: int = 0
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    #: taken out by a launcher (:meth:`ModelClient.retire_endpoint`): what it had in flight went to the others
    retired: bool = False
    #: when it last answered a request (``time.monotonic``): a launcher's health check counts it as a sign of life
    last_answer: float | None = None


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
        tokens_per_minute: float | None = None,
    ) -> None:
        self.name = name
        if policy.deadline is None and pools:
            policy = dataclasses.replace(
                policy, deadline=default_deadline(max(p.timeout for p, _ in pools), policy.retry_attempts)
            )
        self.policy = policy
        self.store = store
        self._replicas = [self._replica(pool, workers) for pool, workers in pools]
        #: pools a new token replaced (use_token): closed with the client, after what was in flight on them
        self._old_pools: list[EndpointPool] = []
        self._delay = delay_ms / 1000.0
        self._requests = TokenBucket(requests_per_minute, capacity=1.0) if requests_per_minute else None
        self._tokens = TokenBucket(tokens_per_minute) if tokens_per_minute else None
        self._token_estimate = TokenEstimator()
        self._queue: asyncio.Queue[_Job] = asyncio.Queue()
        self._inflight: dict[str, asyncio.Future[Outcome]] = {}
        #: the latest outcomes by request key (with a store, answers only: errors are asked again), so a twin
        #: that comes after its answer shares it, and is counted as shared whether its first came from the
        #: store or the endpoint (a second store read would count it as an earlier run's answer, by timing)
        self._recent: OrderedDict[str, Outcome] = OrderedDict()
        self._started = False
        self._closed = False
        #: replicas announced by :meth:`retire_endpoint` (replacing=True) and not yet added: until they come,
        #: the model is not out of endpoints, even when every replica it has now is dead
        self._awaited = 0
        self._store_warned = False
        self._last_fault: Attempt | None = None
        self.sent = 0
        #: answers the response store held from before this client started (earlier runs)
        self.store_hits = 0
        #: answers the store gave back that this run had already asked for (another pair of the same dataset)
        self.reused = 0
        self.started_unix = time.time()
        self.deduplicated = 0
        self.rate_limited = 0
        self.retried = 0
        #: attempts cut short because their replica was taken out, and sent again to another at once
        self.resent = 0
        #: pools of retired replicas being closed (their in-flight attempts end as they close)
        self._closing: set[asyncio.Task[None]] = set()
        #: this model's share of the run's spending (evalkit/clients/spending.py): every answer sent adds its usage,
        #: and once the run's budget is spent no attempt is sent; None: not counted
        self.account: Account | None = None

    @property
    def concurrency(self) -> int:
        return sum(r.workers for r in self._replicas)

    def replica_counts(self) -> dict[str, int]:
        return {r.pool.name: r.answered for r in self._replicas}

    def stats(self) -> dict[str, Any]:
        """Counters for the run's results.json (no secrets: replica names are redacted URLs)."""
        return {
            "sent": self.sent,
            "store_hits": self.store_hits,
            "reused": self.reused,
            "deduplicated": self.deduplicated,
            "retried": self.retried,
            "resent": self.resent,
            "rate_limited": self.rate_limited,
            "replicas": self.replica_counts(),
            "endpoints": {
                r.pool.name: {
                    "answered": r.answered,
                    "dead": r.circuit.dead,
                    "retired": r.retired,
                    "circuit_openings": r.circuit.openings,
                    "concurrency": r.workers,
                    "lowest_concurrency": r.limit.lowest,
                }
                for r in self._replicas
            },
        }

    def store_key(self, request: ModelRequest) -> str:
        return response_key(self.name, request)

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
            # the same answer, paid for where it was sent: counted as shared (evalkit/clients/usage.py)
            return dataclasses.replace(await asyncio.shield(twin), shared=True)
        answered = self._recent.get(key) if use_store or self.store is None else None
        if answered is not None:
            self.deduplicated += 1
            return dataclasses.replace(answered, shared=True)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Outcome] = loop.create_future()
        self._inflight[key] = future
        # the store's key is a second hash over the request key: only worth making when there is a store
        store_key = self.store_key(request) if self.store is not None else ""
        try:
            if use_store and self.store is not None:
                try:
                    found = await self.store.get_with_time(store_key)
                except Exception as error:
                    if not self._store_warned:
                        self._store_warned = True
                        log.warning("response store read failed (asking the endpoint): %s", error)
                    found = None
                if found is not None:
                    stored, created = found
                    if created >= self.started_unix:
                        self.reused += 1
                    else:
                        self.store_hits += 1
                    outcome = Outcome(
                        text=stored["text"], raw=stored.get("raw"), cached=True, usage=stored.get("usage") or {}
                    )
                    future.set_result(outcome)
                    return outcome
            if self._all_dead():
                outcome = self._unavailable(None)
                future.set_result(outcome)
                return outcome
            job = _Job(request=request, store_key=store_key, future=future)
            if self._lean():
                return await self._send_inline(job)
            if not self._started:
                self._start()
            self._queue.put_nowait(job)
            return await asyncio.shield(future)
        finally:
            if self._inflight.get(key) is future:
                del self._inflight[key]
                if future.done() and not future.cancelled() and not future.exception():
                    self._remember(key, future.result())

    def _remember(self, key: str, outcome: Outcome) -> None:
        if self.store is not None and outcome.failure is not None:
            return
        self._recent[key] = outcome
        if len(self._recent) > RECENT_ANSWERS:
            self._recent.popitem(last=False)

    def _lean(self) -> bool:
        """Whether a request may take the lean path: one replica, no worker started yet, circuit closed.

        With one replica there is no work to steal, so the queue, the worker
        task and the shield are pure overhead (the profile of benchmark (a)
        put them at about a fifth of evalkit's per-request CPU). The first
        retry, an open circuit or a second replica hands everything to the
        workers for the rest of the run.
        """
        return len(self._replicas) == 1 and not self._started and self._replicas[0].circuit.closed

    async def _send_inline(self, job: _Job) -> Outcome:
        """The first attempt of ``job`` on the submitter's own task, under the replica's limit.

        Same bookkeeping as a worker's attempt (:meth:`_send`). A retry goes
        through the queue (:meth:`_requeue` starts the workers), and a
        cancelled submitter hands its unfinished job to the workers, so twins
        waiting on the future still get an answer and nothing is scored twice.
        """
        replica = self._replicas[0]
        future = job.future
        acquired = False
        try:
            await replica.limit.acquire()
            acquired = True
            if not self._lean():  # the circuit opened or workers started while this one waited
                self._enqueue(job)
            else:
                await self._send(replica, job, -1)
        except asyncio.CancelledError:
            if not future.done():
                self._enqueue(job)
            raise
        except Exception as error:
            log.exception("request to %s failed unexpectedly", self.name)
            if not future.done():
                future.set_result(
                    failed(FailureReason.CLIENT_ERROR, f"{type(error).__name__}: {error}", attempts=job.attempts)
                )
        finally:
            if acquired:
                replica.limit.release()
        if future.done():
            return future.result()
        return await asyncio.shield(future)

    def _enqueue(self, job: _Job) -> None:
        if self._closed:
            # a submitter cancelled while the run shuts down: no worker may start after close() (it would
            # outlive the session and write to a closed store); twins waiting on the job are cancelled too
            job.future.cancel()
            return
        if not self._started:
            self._start()
        self._queue.put_nowait(job)

    def _all_dead(self) -> bool:
        return not self._awaited and all(r.circuit.dead for r in self._replicas)

    def retire_endpoint(self, base_url: str, *, replacing: bool = False) -> bool:
        """Send nothing more to the replica at ``base_url``: a launcher saw its server die or stop answering.

        Its circuit is dead at once instead of after rounds of failed probes,
        so no sample spends its retries on it, and its connections are closed:
        attempts in flight there end now, not at their timeout, and are sent
        again to the other replicas without using up a retry (a server that
        hangs would otherwise hold them for a whole ``timeout``). ``replacing`` says a
        new replica is on its way (:meth:`add_endpoint`, or
        :meth:`replacement_failed`): until then, a model left without live
        replicas keeps its requests queued instead of failing them as
        endpoint_unavailable. False when no live replica has that URL.
        """
        found = False
        for replica in self._replicas:
            if replica.pool.protocol.base_url == base_url and not replica.retired:
                replica.retired = True
                replica.circuit.retire()
                found = True
                # cut now, before the launcher stops (and maybe first resumes) the server: no answer comes after this
                replica.pool.shut()
                closing = asyncio.ensure_future(replica.pool.close())
                self._closing.add(closing)
                closing.add_done_callback(self._closing.discard)
        if replacing:
            self._awaited += 1
        return found

    def last_answer(self, base_url: str) -> float | None:
        """When the replica at ``base_url`` last answered a request (``time.monotonic``); None if it never did."""
        times = [r.last_answer for r in self._replicas if r.pool.protocol.base_url == base_url and r.last_answer]
        return max(times) if times else None

    def use_token(self, token: str) -> None:
        """A fresh bearer token (a model's ``auth_command`` renewed it): new requests carry it.

        Each replica gets a new connection pool with the token in its headers; the old pool stays open until
        the client closes, so requests in flight on it finish as they were sent.
        """
        for replica in self._replicas:
            old = replica.pool
            replica.pool = EndpointPool(
                dataclasses.replace(old.protocol, auth_token=token),
                connections=replica.workers,
                timeout=old.timeout,
                max_body=old.max_body,
                follow_redirects=old.follow_redirects,
                hidden=old.hidden,
            )
            self._old_pools.append(old)

    def add_endpoint(self, base_url: str) -> None:
        """A replica that joined during the run, addressed and limited like the model's first one."""
        template = self._replicas[0]
        pool = template.pool
        protocol = dataclasses.replace(pool.protocol, base_url=base_url)
        fresh = EndpointPool(
            protocol,
            connections=template.workers,
            timeout=pool.timeout,
            max_body=pool.max_body,
            follow_redirects=pool.follow_redirects,
            hidden=pool.hidden,
        )
        replica = self._replica(fresh, template.workers)
        self._replicas.append(replica)
        self._awaited = max(0, self._awaited - 1)
        if self._started and not self._closed:
            replica.tasks = [asyncio.create_task(self._worker(replica)) for _ in range(replica.workers)]

    def _replica(self, pool: EndpointPool, workers: int) -> _Replica:
        """A replica's workers, limit and breaker: faults in a row to open it at least twice its workers."""
        policy = self.policy
        return _Replica(
            pool=pool,
            workers=workers,
            limit=AdaptiveLimit(workers),
            circuit=Circuit(
                max(policy.breaker_threshold, 2 * workers),
                policy.breaker_pause,
                policy.breaker_probes,
                min(policy.probe_width, workers),
            ),
        )

    def replacement_failed(self) -> None:
        """A replica announced by :meth:`retire_endpoint` will not come: with no live replica left, fail what waits."""
        self._awaited = max(0, self._awaited - 1)
        if self._all_dead():
            self._drain_unavailable()

    def _unavailable(self, job: _Job | None) -> Outcome:
        last = job.last if job is not None and job.last is not None else self._last_fault
        detail = f"; last error: {last.error}" if last and last.error else ""
        return failed(
            FailureReason.ENDPOINT_UNAVAILABLE,
            f"all endpoints of {self.name} stopped answering (circuit open){detail}",
            status=last.status if last else None,
            attempts=job.attempts if job is not None else 0,
        )

    async def _pace(self) -> float:
        """Wait for the rate limits and the politeness delay; returns the tokens reserved."""
        if self._requests is not None:
            await self._requests.acquire(1.0)
        reserved = 0.0
        if self._tokens is not None:
            reserved = self._token_estimate.estimate
            await self._tokens.acquire(reserved)
        if self._delay:
            await asyncio.sleep(self._delay)
        return reserved

    def _settle_tokens(self, reserved: float, attempt: Attempt) -> None:
        total = _total_tokens(attempt.usage)
        if total is not None:
            self._token_estimate.observe(total)
        if self._tokens is not None:
            self._tokens.settle(reserved, total if total is not None else reserved)

    async def _worker(self, replica: _Replica) -> None:
        circuit = replica.circuit
        while True:
            probe = await circuit.admit()
            if probe is None:
                if self._all_dead():
                    self._drain_unavailable()
                return
            sent = False
            job: _Job | None = None
            before = 0
            await replica.limit.acquire()
            try:
                job = await self._queue.get()
                if job.future.done():
                    continue
                if replica.retired:
                    self._queue.put_nowait(job)  # taken out while this worker waited for work
                    continue
                if probe < 0 and not circuit.closed:
                    self._queue.put_nowait(job)  # the circuit opened while this worker waited for work
                    continue
                before = job.attempts
                sent = await self._send(replica, job, probe)
            except asyncio.CancelledError:
                raise
            except Exception as error:
                log.exception("request to %s failed unexpectedly", self.name)
                if job is not None and not job.future.done():
                    job.future.set_result(
                        failed(FailureReason.CLIENT_ERROR, f"{type(error).__name__}: {error}", attempts=job.attempts)
                    )
            finally:
                replica.limit.release()
                if not sent and not (job is not None and job.attempts > before):
                    circuit.abandon_probe(probe)

    async def _send(self, replica: _Replica, job: _Job, probe: int) -> bool:
        """One attempt of ``job`` on ``replica``; False if none was made.

        ``probe`` >= 0 makes the attempt a probe of a half-open circuit.
        """
        if job.started is None:
            job.started = time.monotonic()
        if self._time_left(job) == 0.0:
            self._give_up(job, job.last, replica, deadline=True)
            return False
        # without pacing, no coroutine for it per attempt
        paced = self._requests is not None or self._tokens is not None or self._delay
        reserved = await self._pace() if paced else 0.0
        timeout = self._time_left(job)
        if timeout == 0.0:
            self._settle_tokens(reserved, Attempt())
            self._give_up(job, job.last, replica, deadline=True)
            return False
        if self.store is not None and self.store.stopped is not None:
            job.future.set_exception(self.store.stopped)  # an answer that cannot be kept is not asked for
            job.future.exception()  # retrieved: a submitter cancelled meanwhile leaves no stray log
            return False
        if replica.retired:  # taken out while this attempt waited for its pace
            self._settle_tokens(reserved, Attempt())
            self._requeue(job)
            return False
        account = self.account
        if account is not None and account.spending.exhausted:  # nothing new is sent once the budget is spent
            self._settle_tokens(reserved, Attempt())
            account.spending.refused += 1
            job.future.set_result(
                failed(FailureReason.BUDGET, "not sent: the run's budget is spent", attempts=job.attempts)
            )
            return False
        job.attempts += 1
        self.sent += 1
        attempt = await replica.pool.attempt(job.request, timeout)
        job.last = attempt
        self._settle_tokens(reserved, attempt)
        if replica.retired and attempt.failure is not None and attempt.endpoint_fault:
            # cut short by the retirement (or met the fault that caused it): another replica answers it, uncharged
            self.resent += 1
            self._requeue(job)
            return True
        if attempt.failure is None:
            replica.circuit.alive(probe)
            replica.limit.success()
            replica.answered += 1
            replica.last_answer = time.monotonic()
            tokens = account.add(attempt.usage) if account is not None else None
            outcome = Outcome(
                text=attempt.text,
                raw=attempt.raw,
                status=attempt.status,
                latency=attempt.latency,
                attempts=job.attempts,
                replica=replica.pool.name,
                usage=attempt.usage or {},
                tokens=tokens,
            )
            if self.store is not None:
                await self._deliver(job, outcome)
            elif not job.future.done():  # nothing to commit first (no store): no coroutine per answer for it
                job.future.set_result(outcome)
            return True
        if attempt.endpoint_fault:
            self._last_fault = attempt
            replica.circuit.fault(probe)
        else:
            replica.circuit.alive(probe)
        if attempt.rate_limited:
            self.rate_limited += 1
            replica.limit.decrease(cooldown=max(1.0, attempt.retry_after or 0.0))
        self._retry_or_fail(job, attempt, replica, charge=not (probe >= 0 and attempt.endpoint_fault))
        return True

    def _time_left(self, job: _Job) -> float | None:
        """Seconds left before the job's deadline (None: no deadline; 0.0: passed)."""
        if self.policy.deadline is None or job.started is None:
            return None
        return max(0.0, self.policy.deadline - (time.monotonic() - job.started))

    async def _deliver(self, job: _Job, outcome: Outcome) -> None:
        """Resolve the job once its answer is committed to the store.

        The worker keeps its slot until then, so at any moment at most
        ``batch_size`` answers per endpoint are received but not yet stored:
        the most a kill can make a resumed run ask again.
        """
        if self.store is not None:
            payload = {"text": outcome.text, "raw": outcome.raw, "usage": outcome.usage}
            try:
                await self.store.put(job.store_key, self.name, payload)
            except asyncio.CancelledError:
                raise
            except StoreRefused as refused:
                # this answer alone cannot be kept: its sample fails with the reason, never scored unstored
                outcome = failed(
                    FailureReason.UNSTORABLE,
                    str(refused),
                    status=outcome.status,
                    attempts=job.attempts,
                    latency=outcome.latency,
                    replica=outcome.replica,
                )
            except Exception as error:
                # the store takes nothing more (full disk, locked, I/O error): stop the run (the engine raises it)
                # rather than go on scoring answers a resume could not find
                stop = error if isinstance(error, (DiskFullError, WriteFailed)) else None
                stop = stop or WriteFailed(str(self.store.path), error)
                if not job.future.done():
                    job.future.set_exception(stop)
                    job.future.exception()  # retrieved: a submitter cancelled meanwhile leaves no stray log
                return
        if not job.future.done():
            job.future.set_result(outcome)

    def _retry_or_fail(self, job: _Job, attempt: Attempt, replica: _Replica, *, charge: bool) -> None:
        policy = self.policy
        if self._all_dead():
            job.future.set_result(self._unavailable(job))
            self._drain_unavailable()
            return
        if not attempt.retryable:
            self._give_up(job, attempt, replica)
            return
        if attempt.rate_limited:
            job.rate_limited += 1
            if job.rate_limited > policy.rate_limit_retries:
                self._give_up(job, attempt, replica)
                return
            delay = policy.backoff(job.rate_limited, attempt.retry_after)
        else:
            if charge:
                job.charged += 1
            if job.charged > policy.retry_attempts:
                self._give_up(job, attempt, replica)
                return
            delay = policy.backoff(max(1, job.charged))
        if (
            policy.deadline is not None
            and job.started is not None
            and time.monotonic() + delay - job.started > policy.deadline
        ):
            self._give_up(job, attempt, replica, deadline=True)
            return
        self.retried += 1
        asyncio.get_running_loop().call_later(delay, self._requeue, job)

    def _give_up(self, job: _Job, attempt: Attempt | None, replica: _Replica, *, deadline: bool = False) -> None:
        if job.future.done():
            return
        reason = attempt.failure if attempt is not None and attempt.failure else "deadline"
        error = attempt.error if attempt is not None and attempt.error else ""
        if deadline:
            error = f"{error}; " if error else ""
            error += f"deadline of {self.policy.deadline:g} s reached after {job.attempts} attempt(s)"
        job.future.set_result(
            failed(
                reason,
                error,
                status=attempt.status if attempt else None,
                attempts=job.attempts,
                latency=attempt.latency if attempt else 0.0,
                replica=replica.pool.name,
            )
        )

    def _requeue(self, job: _Job) -> None:
        if job.future.done():
            return
        if self._all_dead():
            job.future.set_result(self._unavailable(job))
        else:
            self._enqueue(job)

    def _drain_unavailable(self) -> None:
        while not self._queue.empty():
            job = self._queue.get_nowait()
            if not job.future.done():
                job.future.set_result(self._unavailable(job))

    async def close(self) -> None:
        self._closed = True
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)
        for replica in self._replicas:
            for task in replica.tasks:
                task.cancel()
        for replica in self._replicas:
            if replica.tasks:
                await asyncio.gather(*replica.tasks, return_exceptions=True)
            await replica.pool.close()
        for pool in self._old_pools:
            await pool.close()


def _total_tokens(usage: dict[str, Any] | None) -> float | None:
    if not usage:
        return None
    total = usage.get("total_tokens")
    if isinstance(total, (int, float)):
        return float(total)
    parts = [usage.get(k) for k in ("prompt_tokens", "completion_tokens", "input_tokens", "output_tokens")]
    numbers = [float(p) for p in parts if isinstance(p, (int, float))]
    return sum(numbers) if numbers else None

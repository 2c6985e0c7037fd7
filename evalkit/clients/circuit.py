"""The circuit breaker of one replica, so a dead endpoint costs seconds instead of samples x retries x timeout."""

from __future__ import annotations

import asyncio
import time


class Circuit:
    """The breaker of one replica: closed, open (paused), half-open (a round of probes), or dead.

    It opens after ``threshold`` endpoint faults in a row (the client sets it to
    at least twice the replica's workers, so a flaky but alive server, whose
    failures are interleaved with successes, does not trip it, while a dead one
    trips it within two rounds of attempts). After each pause a round of
    ``width`` probes goes out; any answer closes the circuit, a round in which
    every probe failed doubles the pause, and after ``rounds`` failed rounds the
    replica is dead for the rest of the run.
    """

    def __init__(self, threshold: int, pause: float, rounds: int, width: int = 1) -> None:
        self.threshold = max(1, threshold)
        self.pause = pause
        self.rounds = max(1, rounds)
        self.width = max(1, width)
        self.failures = 0
        self.failed_rounds = 0
        self.round = 0
        self.round_failures = 0
        self.probes_in_flight = 0
        self.open_until = 0.0
        self.dead = False
        self.openings = 0
        self._changed = asyncio.Event()

    @property
    def closed(self) -> bool:
        return not self.dead and self.failures < self.threshold

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def _open(self) -> None:
        self.round += 1
        self.round_failures = 0
        self.open_until = time.monotonic() + self.pause * 2**self.failed_rounds
        self._notify()

    async def admit(self) -> int | None:
        """Wait until a request may go: -1 (circuit closed), a probe's round number (half-open), None (dead)."""
        while True:
            if self.dead:
                return None
            if self.failures < self.threshold:
                return -1
            changed = self._changed
            wait = self.open_until - time.monotonic()
            if wait <= 0 and self.probes_in_flight + self.round_failures < self.width:
                self.probes_in_flight += 1
                return self.round
            # not asyncio.wait_for: before Python 3.12 it can swallow a cancellation that arrives in the
            # step the event fires, and a worker cancelled at shutdown would then go on to send a request
            waiter = asyncio.ensure_future(changed.wait())
            try:
                await asyncio.wait({waiter}, timeout=wait if wait > 0 else None)
            finally:
                waiter.cancel()

    def _end_probe(self, probe: int) -> bool:
        """Account for a finished probe; True when it belongs to the current round."""
        if probe < 0:
            return False
        self.probes_in_flight -= 1
        return probe == self.round and self.failures >= self.threshold

    def alive(self, probe: int = -1) -> None:
        """The endpoint answered (any answer but a 5xx): close the circuit."""
        self._end_probe(probe)
        was_open = self.failures >= self.threshold
        self.failures = 0
        self.failed_rounds = 0
        self.round_failures = 0
        self.open_until = 0.0
        if was_open:
            self.round += 1  # probes still out belong to a finished round
            self._notify()

    def fault(self, probe: int = -1) -> None:
        """The endpoint did not answer, or answered 5xx."""
        current = self._end_probe(probe)
        self.failures += 1
        if current:
            self.round_failures += 1
            if self.round_failures >= self.width:
                self.failed_rounds += 1
                if self.failed_rounds >= self.rounds:
                    self.dead = True
                    self._notify()
                else:
                    self._open()
            else:
                self._notify()
        elif self.failures == self.threshold:
            self.openings += 1
            self._open()

    def retire(self) -> None:
        """The endpoint is known to be gone for good (its server was stopped or died): dead at once, no probes."""
        self.dead = True
        self._notify()

    def abandon_probe(self, probe: int) -> None:
        """The probe's worker had nothing to send after all: let another worker probe."""
        if probe >= 0:
            self.probes_in_flight -= 1
            self._notify()

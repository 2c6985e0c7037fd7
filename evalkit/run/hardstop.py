"""The hard stop: after SIGTERM (or SIGINT, SIGHUP) a run ends within seconds, whatever it is doing.

The first signal cancels the run (:func:`evalkit.serve.signals.stop_on_signals`):
an orderly end that commits what is pending, stops launched servers and
writes run.json. That end can hang where nothing can be cancelled: a commit
waiting for another process's lock on the store (up to its busy timeout), a
worker thread blocked in a read, a server slow to stop. So a daemon thread
watches the list of received signals. On the first one it marks run.json
"interrupted" at once (a second Ctrl-C, which ends the process on the spot,
then still leaves the truth behind); if the orderly end has not finished
``grace`` seconds later, it says so on stderr, runs the last-resort callback
(SIGKILL to launched servers) and ends the process with ``os._exit(128 +
signal)``. Whatever had committed to the response store is kept, so
``evalkit run --resume`` finishes the run.

A thread and not a loop timer: a loop busy in a long synchronous call would
never run the timer. The thread polls (every ``poll`` seconds) because the
signal handler belongs to ``stop_on_signals``; 20 checks a second cost nothing.
The watch ends (disarmed) when the orderly end finishes in time, so a host
that catches the interruption (a notebook, a test) lives on.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from types import TracebackType

#: seconds the orderly end may take after a signal before the process ends at once (the promise is 5 s)
GRACE_SECONDS = 4.0
POLL_SECONDS = 0.05


class HardStop:
    """Watch ``received`` (signal numbers, appended by the signal handler) while the ``with`` block runs.

    ``on_signal()`` runs in the watch thread as soon as a signal is seen;
    ``on_expire(signum)`` runs there when the grace period passes, right
    before the process ends. Exceptions of either are ignored: the stop
    must happen whatever they do.
    """

    def __init__(
        self,
        received: list[int],
        on_signal: Callable[[], None],
        on_expire: Callable[[int], None],
        grace: float = GRACE_SECONDS,
        poll: float = POLL_SECONDS,
    ) -> None:
        self.received = received
        self.on_signal = on_signal
        self.on_expire = on_expire
        self.grace = grace
        self.poll = poll
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> HardStop:
        self._thread = threading.Thread(target=self._watch, name="evalkit-hard-stop", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._done.set()  # the orderly end finished: nothing to force

    def _watch(self) -> None:
        while not self.received:
            if self._done.wait(self.poll):
                return
        seen = time.monotonic()
        signum = self.received[0]
        with contextlib.suppress(Exception):
            self.on_signal()
        if self._done.wait(max(0.0, self.grace - (time.monotonic() - seen))):
            return
        with contextlib.suppress(Exception):
            self.on_expire(signum)
        os._exit(128 + signum)

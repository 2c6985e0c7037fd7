"""Watching a launched server while the run uses it, on this machine or on a Ray node.

A server can stop serving without exiting: stopped (SIGSTOP, a frozen VM), wedged in
a dead lock, or cut off from this machine. Its requests then wait for their whole
``timeout``, which for a slow model is minutes. So each server is asked for
``/health`` every half of ``launch.health_interval``, and one that has not answered
200 for the whole interval is reported lost; the launcher then takes it out of its
model's rotation (what was in flight there is sent again elsewhere) and starts
another. The model's client may not exist yet when a server is lost or joins:
:class:`ClientLink` keeps those events until it does.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import aiohttp


async def stops_answering(
    session: aiohttp.ClientSession,
    url: str,
    interval: float,
    answered: Callable[[], float | None] = lambda: None,
) -> str:
    """Return once the server at ``url`` (``.../v1``) has gone ``interval`` seconds without a sign of life.

    A sign of life is a 200 from /health, or an answer to a request (``answered``: when the model's client
    last had one from this server, on the ``time.monotonic`` clock), so a server too busy to answer /health
    at once (a CPU-bound one on a crowded machine) is not taken for a hung one while it answers its work.
    A check may take what is left of the interval; the answer says what the last one met.
    """
    base = url.removesuffix("/v1")
    last_ok = time.monotonic()
    while True:
        began = time.monotonic()
        last_ok = max(last_ok, answered() or 0.0)
        problem = await _check(session, base, max(0.01, last_ok + interval - began))
        now = time.monotonic()
        if problem is None:
            last_ok = now
        elif now >= max(last_ok, answered() or 0.0) + interval:
            return (
                f"/health unanswered for {interval:g} s and no request answered either (launch.health_interval; "
                f"its last check {problem})"
            )
        await asyncio.sleep(max(0.0, began + interval / 2 - now))


async def _check(session: aiohttp.ClientSession, base: str, timeout: float) -> str | None:
    """None when /health answers 200 within ``timeout`` seconds, else what happened instead."""
    import aiohttp

    try:
        async with session.get(base + "/health", timeout=aiohttp.ClientTimeout(total=timeout)) as response:
            await response.read()
            return None if response.status == 200 else f"answered HTTP {response.status}"
    except asyncio.TimeoutError:
        return "gave no answer"
    except (aiohttp.ClientError, OSError) as error:
        return f"failed ({type(error).__name__})"


class ClientLink:
    """The launcher's side of a model client: servers retired and added, kept until the client is attached."""

    def __init__(self) -> None:
        self.client: Any = None
        self._early: list[tuple[str, str]] = []

    def attach(self, client: Any) -> None:
        """The model client the run built: servers that are lost or join from now on go to it at once."""
        self.client = client
        for action, url in self._early:
            if action == "retire":
                client.retire_endpoint(url)
            elif action == "add":
                client.add_endpoint(url)
            else:
                client.replacement_failed()
        self._early.clear()

    def retire(self, url: str, replacing: bool) -> None:
        """Send nothing more to ``url``; what is in flight there goes to the others (``replacing``: one is coming)."""
        if self.client is not None:
            self.client.retire_endpoint(url, replacing=replacing)
        elif url:
            # before the client exists the URL is simply not handed to it (see the launcher's ``urls``)
            self._early.append(("retire", url))

    def add(self, url: str) -> None:
        if self.client is not None:
            self.client.add_endpoint(url)
        else:
            self._early.append(("add", url))

    def replacement_failed(self) -> None:
        if self.client is not None:
            self.client.replacement_failed()

    def answered(self, url: str) -> float | None:
        """When the model's client last had an answer from ``url`` (``time.monotonic``); None: never, or no client."""
        return self.client.last_answer(url) if self.client is not None else None


def signal_name(returncode: int | None) -> str | None:
    """The signal that ended a process, from a ``subprocess`` return code (``-9`` is SIGKILL); None otherwise."""
    import signal

    if returncode is None or returncode >= 0:
        return None
    with contextlib.suppress(ValueError):
        return signal.Signals(-returncode).name
    return f"signal {-returncode}"

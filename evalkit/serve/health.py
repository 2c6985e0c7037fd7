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
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import aiohttp


async def stops_answering(session: aiohttp.ClientSession, url: str, interval: float) -> str:
    """Return once the server at ``url`` (``.../v1``) has gone ``interval`` seconds without a 200 from /health.

    The answer says what the last check met. A check may take what is left of the interval, so a server
    that answers slowly but within it stays; one that answers nothing is reported when the interval is up.
    """
    base = url.removesuffix("/v1")
    last_ok = time.monotonic()
    while True:
        began = time.monotonic()
        deadline = last_ok + interval
        problem = await _check(session, base, max(0.01, deadline - began))
        now = time.monotonic()
        if problem is None:
            last_ok = now
        elif now >= deadline:
            return f"/health unanswered for {interval:g} s (launch.health_interval; its last check {problem})"
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


def signal_name(returncode: int | None) -> str | None:
    """The signal that ended a process, from a ``subprocess`` return code (``-9`` is SIGKILL); None otherwise."""
    import signal

    if returncode is None or returncode >= 0:
        return None
    with contextlib.suppress(ValueError):
        return signal.Signals(-returncode).name
    return f"signal {-returncode}"

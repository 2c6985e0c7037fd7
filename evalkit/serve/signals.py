"""Signals during a run: the first ends it in order (the current task cancelled), a second at once.

Every run watches SIGINT, SIGTERM and SIGHUP, with or without servers to stop,
so this lives apart from :mod:`evalkit.serve.launch`, which a run imports only
when its config launches servers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("evalkit")


def signal_group(server: Any, sig: int) -> bool:
    """Send ``sig`` to a launched server's process group (it leads its own: ``server.pid``); False when it is gone."""
    try:
        os.killpg(server.pid, sig)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:  # the pgid now belongs to a stranger's group: ours is gone
        return False


@dataclass
class _SignalWatch:
    received: list[int]
    servers: list[Any]


#: the watch installed by the outermost :func:`stop_on_signals` (a run), shared by nested ones
_active_watch: _SignalWatch | None = None


@contextlib.contextmanager
def stop_on_signals(
    servers: list[Any] | None = None,
    signals: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGHUP),
) -> Iterator[list[int]]:
    """While it is open, the signals cancel the current task (an orderly end) instead of killing evalkit outright.

    Yields the list the received signal numbers are put in. A second signal
    ends evalkit at once (exit 128 + signal), SIGKILLing the servers first, so
    a stuck shutdown never keeps it alive. Nested uses share the outermost
    watch (a run that starts servers watches SIGINT too). Only in the main
    thread of a loop that supports signal handlers; elsewhere the defaults stay.
    A signal that is ignored (``nohup``, a background job's SIGINT) stays ignored.
    """
    global _active_watch
    if _active_watch is not None:
        if servers is not None and servers is not _active_watch.servers:
            _active_watch.servers = servers
        yield _active_watch.received
        return
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return
    watch = _SignalWatch(received, servers if servers is not None else [])
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    installed: dict[int, Any] = {}

    def on_signal(signum: int) -> None:
        if received:  # a second one: no orderly end, but no server left behind either
            for server in watch.servers:
                signal_group(server, signal.SIGKILL)
            os._exit(128 + signum)
        received.append(signum)
        if signum != signal.SIGINT:
            log.warning("%s: stopping the run (and any server it started)", signal.Signals(signum).name)
        if task is not None:
            task.cancel()

    for sig in signals:
        previous = signal.getsignal(sig)
        if previous is signal.SIG_IGN:  # nohup and friends: respect it
            continue
        try:
            loop.add_signal_handler(sig, on_signal, int(sig))
        except (NotImplementedError, RuntimeError, ValueError):
            continue
        installed[int(sig)] = previous
    _active_watch = watch
    try:
        yield received
    finally:
        _active_watch = None
        for signum, previous in installed.items():
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(signum)
                signal.signal(signum, previous if previous is not None else signal.SIG_DFL)

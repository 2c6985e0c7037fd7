"""Audio work off the event loop, in a small pool of worker *processes*.

Measured on a 2-core machine, six decode threads competing with the event
loop for the GIL pushed the loop's p99 wake-up lag to ~270 ms during a run of
10 s clips; in processes the loop keeps the interpreter to itself.
``EVALKIT_AUDIO_WORKERS`` sets the number of processes (default: CPU count,
at most 4); ``0`` decodes in threads instead (also the fallback when
processes cannot be started or a worker dies). Media already in the form
sent skips the pool (:func:`run_media_job`); ``EVALKIT_MEDIA_DIRECT=0``
sends it through the pool too, to compare the two.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import threading
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # the process pool's module (and multiprocessing) load with the first audio job, not at start-up
    from concurrent.futures import ProcessPoolExecutor

log = logging.getLogger("evalkit")
T = TypeVar("T")

_pool: ProcessPoolExecutor | None = None
_pool_lock = threading.Lock()
_pool_failed = False


def audio_workers() -> int:
    """Worker processes for audio: ``EVALKIT_AUDIO_WORKERS``, else the CPU count capped at 4 (0: threads)."""
    value = os.environ.get("EVALKIT_AUDIO_WORKERS", "").strip()
    if value:
        try:
            return max(0, int(value))
        except ValueError:
            log.warning("EVALKIT_AUDIO_WORKERS=%r is not a number; using the default", value)
    return max(1, min(4, os.cpu_count() or 1))


def _worker_init(owner_pid: int) -> None:
    """Audio workers yield the CPU to the event loop and never outlive the evalkit process that owns them.

    Ctrl-C in a terminal (and ``kill -TERM -PGID``) signals the whole process
    group: the workers ignore SIGINT, and a SIGTERM from anyone but their
    owner, so they print no traceback and keep their pool intact while evalkit
    shuts down in order and stops them. A SIGTERM from the owner itself ends
    the worker: Python 3.12+ terminates the remaining workers of a broken pool
    (one was killed) with SIGTERM and joins them, and a worker ignoring it
    would hang the pool's shutdown, and with it the run, forever.

    Decoding is throughput work, the loop's wake-ups are latency: hence nice 5.
    A worker forked by the forkserver holds both ends of its own call pipe, so
    it never sees EOF when evalkit is killed (kill -9); a watchdog thread
    ends it once the owner is gone, and the forkserver follows.
    """
    with contextlib.suppress(AttributeError, OSError):  # no nice() on Windows; not allowed in some sandboxes
        os.nice(5)
    with contextlib.suppress(ValueError, OSError):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "sigwaitinfo") and hasattr(signal, "pthread_sigmask"):
        # blocked here, before any thread starts, so every thread inherits the block and only the waiter sees it
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        threading.Thread(target=_sigterm_from_owner, args=(owner_pid,), daemon=True, name="evalkit-sigterm").start()
    else:  # no sender to tell apart (macOS): end quietly on any SIGTERM, as the default action does
        with contextlib.suppress(ValueError, OSError):
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
    threading.Thread(target=_exit_with_owner, args=(owner_pid,), daemon=True, name="evalkit-owner-watch").start()


def _sigterm_from_owner(owner_pid: int) -> None:
    """End the worker on a SIGTERM its owner sent (a broken pool's clean-up); ignore one sent to the whole group."""
    while True:
        info = signal.sigwaitinfo({signal.SIGTERM})
        if info.si_pid == owner_pid:
            os._exit(0)


def _exit_with_owner(owner_pid: int, interval: float = 1.0) -> None:
    import time

    while True:
        time.sleep(interval)
        if not _alive(owner_pid):
            os._exit(0)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs: a zombie (exited, not yet reaped by its parent) counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # the pid was reused by another user's process: the owner is gone
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            stat = handle.read()
    except OSError:
        return True  # no /proc (macOS): the signal test above is all there is
    return stat[stat.rfind(")") + 2 :][:1] not in ("Z", "X")


def _audio_pool() -> Executor | None:
    """The shared process pool, started and warmed on first use (blocking: call it in a thread), or None for threads.

    Workers are started here, not lazily by ``submit``: starting processes
    blocks the caller for up to a second, which must not be the event loop.
    """
    global _pool, _pool_failed
    if _pool_failed or audio_workers() == 0:
        return None
    with _pool_lock:
        if _pool is None:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor
            from concurrent.futures import TimeoutError as FutureTimeout  # the builtin one only from 3.11 on
            from concurrent.futures.process import BrokenProcessPool

            workers = audio_workers()
            try:
                # forkserver: workers fork from a clean process that imported the decoders once;
                # plain fork would copy this process' threads and sockets, spawn re-imports per worker
                method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
                context = multiprocessing.get_context(method)
                if method == "forkserver":
                    context.set_forkserver_preload(["evalkit.data.audio.pcm", "evalkit.data.audio.decode"])
                pool = ProcessPoolExecutor(
                    max_workers=workers, mp_context=context, initializer=_worker_init, initargs=(os.getpid(),)
                )
                warm = [pool.submit(os.getpid) for _ in range(workers)]
                for future in warm:
                    future.result(timeout=120)
            except (OSError, ValueError, RuntimeError, FutureTimeout, BrokenProcessPool) as error:
                log.warning("audio worker processes unavailable (%s); decoding audio in threads", error)
                _pool_failed = True
                return None
            _pool = pool
        return _pool


async def run_audio_job(fn: Callable[..., T], *args: Any) -> T:
    """Run blocking audio work (``fn`` must be a module-level function) off the event loop.

    A worker process that dies (killed, out of memory) breaks the pool: the
    job is retried once in a thread and later jobs use threads, so one bad
    file never stops a run.
    """
    global _pool, _pool_failed
    if _pool_failed or audio_workers() == 0:
        return await asyncio.to_thread(fn, *args)
    pool = _pool if _pool is not None else await asyncio.to_thread(_audio_pool)
    if pool is not None and not _pool_failed:
        from concurrent.futures.process import BrokenProcessPool  # loaded with the pool: a dict lookup

        try:
            return await asyncio.get_running_loop().run_in_executor(pool, fn, *args)
        except BrokenProcessPool:
            with _pool_lock:
                if not _pool_failed:
                    log.warning("an audio worker process died; decoding audio in threads from now on")
                _pool_failed = True
                if _pool is pool:
                    _pool = None
            pool.shutdown(wait=False, cancel_futures=True)
    return await asyncio.to_thread(fn, *args)


_threads: ThreadPoolExecutor | None = None


def _media_threads() -> ThreadPoolExecutor:
    """Two threads for the direct path: their file reads, libsndfile and sha256 fill a second core without the GIL.

    More threads add no throughput on a GIL-bound process, only contention:
    each one's Python steps (header probe, bookkeeping) make the event loop
    wait for the GIL, which showed as loop lag p99 of ~20 ms with the default
    executor's six threads.
    """
    global _threads
    if _threads is None:
        with _pool_lock:
            if _threads is None:
                _threads = ThreadPoolExecutor(max_workers=2, thread_name_prefix="evalkit-media")
    return _threads


async def run_media_job(direct: Callable[..., T | None], general: Callable[..., T], *args: Any) -> T:
    """``direct(*args)`` in a thread, and ``general(*args)`` in the worker pool only when ``direct`` answers None.

    ``direct`` is the cheap path for media already in the form sent (read,
    hash, base64: file reads, libsndfile and sha256 release the GIL), so its
    result never crosses a process pipe; ``general`` decodes, resamples or
    resizes, the CPU work the processes are for. Both must give equal results.
    """
    if os.environ.get("EVALKIT_MEDIA_DIRECT", "").strip() != "0":
        found = await asyncio.get_running_loop().run_in_executor(_media_threads(), direct, *args)
        if found is not None:
            return found
    return await run_audio_job(general, *args)


def shutdown_audio_workers() -> None:
    """Stop the worker processes and media threads (the next job starts new ones); for hosts that outlive a run."""
    global _pool, _threads
    with _pool_lock:
        pool, _pool = _pool, None
        threads, _threads = _threads, None
    if pool is not None:
        pool.shutdown(wait=True, cancel_futures=True)
    if threads is not None:
        threads.shutdown(wait=True, cancel_futures=True)

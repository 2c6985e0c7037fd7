"""Run evalkit in this process with probes on its own event loop.

Event-loop lag can only be seen from inside the loop that does the work, so
this wrapper starts a sampling task (sleep 10 ms, record the overshoot) and
a memory probe on the same loop, then calls ``evalkit.run.runner.execute`` with
``RunOptions(no_cache=True, quiet=True)`` (what ``evalkit run --no-cache
--quiet`` asks for, without the CLI's progress display). It prints one JSON
line: the runner's wall and CPU time, lag percentiles, time spent in the
garbage collector, peak RSS and an RSS timeline.

    python -m benchmarks.harness CONFIG [--num-samples N] [--gc-freeze] [--gc-threshold N]

``--gc-freeze``/``--gc-threshold`` are experiment switches: they show what a
GC setting in the runner would change without editing evalkit.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import sys
import time
from typing import Any

LAG_INTERVAL = 0.010


class GcClock:
    """Time spent in the cyclic garbage collector, per generation (gc.callbacks)."""

    def __init__(self) -> None:
        self.total = [0.0, 0.0, 0.0]
        self.count = [0, 0, 0]
        self.longest = 0.0
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
            return
        spent = time.perf_counter() - self._start
        generation = info.get("generation", 2)
        self.total[generation] += spent
        self.count[generation] += 1
        self.longest = max(self.longest, spent)

    def summary(self) -> dict[str, Any]:
        return {
            "gc_s": sum(self.total),
            "gc_by_generation_s": self.total,
            "gc_collections": self.count,
            "gc_longest_ms": self.longest * 1000,
        }


RSS_EVERY = 0.5


def _rss_bytes() -> int:
    """Current resident set size from /proc (no psutil needed, Linux only)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


async def _sample_lag(lags: list[float], busy: list[float], rss: list[tuple[float, int]], stop: asyncio.Event) -> None:
    """Overshoot of a 10 ms sleep is the time the loop was busy with something else.

    On a shared machine the overshoot also contains time the process was not
    scheduled at all, so the loop thread's own CPU time over the same interval
    is kept too: ``min(overshoot, cpu)`` is the part the loop spent running
    callbacks (a lower bound: waiting for the GIL held by a worker thread
    shows up in the overshoot only).
    """
    start = time.perf_counter()
    next_rss = 0.0
    while not stop.is_set():
        before = time.perf_counter()
        cpu_before = time.thread_time()
        await asyncio.sleep(LAG_INTERVAL)
        after = time.perf_counter()
        overshoot = max(0.0, after - before - LAG_INTERVAL)
        lags.append(overshoot)
        busy.append(min(overshoot, time.thread_time() - cpu_before))
        if after - start >= next_rss:
            rss.append((round(after - start, 2), _rss_bytes()))
            next_rss += RSS_EVERY


async def _run(
    config_path: str,
    num_samples: int | None,
    window: int | None,
    gc_freeze: bool = False,
    gc_threshold: int | None = None,
) -> dict[str, Any]:
    from evalkit.config import load_config
    from evalkit.plan import build_plan
    from evalkit.run.runner import RunOptions, execute

    config = load_config(config_path)
    if num_samples is not None:
        config.filters.num_samples = num_samples
    plan = build_plan(config, source=config_path)
    lags: list[float] = []
    busy: list[float] = []
    rss: list[tuple[float, int]] = []
    stop = asyncio.Event()
    sampler = asyncio.create_task(_sample_lag(lags, busy, rss, stop))
    options = RunOptions(no_cache=True, quiet=True)
    if window is not None:
        options.window = window
    if gc_threshold is not None:  # experiment: what a larger young generation would save
        gc.set_threshold(gc_threshold, *gc.get_threshold()[1:])
    if gc_freeze:  # experiment: what gc.freeze() after start-up in the runner would save
        gc.collect()
        gc.freeze()
    gc_clock = GcClock()
    gc.callbacks.append(gc_clock)
    started = time.time()
    cpu_started, loop_cpu_started = time.process_time(), time.thread_time()
    outcome = await execute(plan, options)
    finished = time.time()
    execute_cpu = time.process_time() - cpu_started
    execute_loop_cpu = time.thread_time() - loop_cpu_started
    gc.callbacks.remove(gc_clock)
    stop.set()
    await sampler
    failed = sum(m.n_failed for e in outcome.engines for m in e.models.values())
    return {
        "started": started,
        "finished": finished,
        "execute_s": finished - started,
        "requests_sent": outcome.requests_sent,
        "failed": failed,
        "engine_errors": [e.error for e in outcome.engines if e.error],
        "replicas": {name: r["replicas"] for name, r in outcome.meta["requests"].items()},
        "lag_samples": len(lags),
        "lag_p50_ms": _percentile(lags, 0.50) * 1000,
        "lag_p99_ms": _percentile(lags, 0.99) * 1000,
        "lag_max_ms": max(lags, default=0.0) * 1000,
        "busy_lag_p99_ms": _percentile(busy, 0.99) * 1000,
        "busy_lag_max_ms": max(busy, default=0.0) * 1000,
        "cpu_s": time.process_time(),
        "execute_cpu_s": execute_cpu,
        "execute_loop_cpu_s": execute_loop_cpu,
        "loop_thread_cpu_s": time.thread_time(),
        "rss_timeline": rss,
        "run_dir": str(outcome.run_dir),
        **gc_clock.summary(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.harness", description=__doc__.split("\n\n")[0])
    parser.add_argument("config")
    parser.add_argument("--num-samples", type=int, default=None)
    parser.add_argument("--window", type=int, default=None, help="samples in flight per engine (RunOptions.window)")
    parser.add_argument("--gc-freeze", action="store_true", help="experiment: gc.freeze() before the run")
    parser.add_argument("--gc-threshold", type=int, default=None, help="experiment: gen-0 threshold of the cyclic GC")
    args = parser.parse_args(argv)
    coro = _run(args.config, args.num_samples, args.window, args.gc_freeze, args.gc_threshold)
    try:
        import uvloop
    except ImportError:
        result = asyncio.run(coro)
    else:
        result = uvloop.run(coro)
    # ru_maxrss is the process' peak in KiB on Linux: the figure (d) is about
    result["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

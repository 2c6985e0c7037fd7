"""Profile of (a): where an `evalkit run` spends the CPU it holds the GIL for.

py-spy samples the real `evalkit run` process from outside (no change to
evalkit, no tracing overhead in the measured code) with ``--gil``: only the
thread holding the GIL is sampled, so the figures are CPU attribution, not
waiting. The collapsed stacks are summarised here into the start-up share,
the top functions by own time, and the inclusive cost of evalkit's hot-path
functions. A separate run from the timed one, because sampling slows it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.common import child_env, evalkit_argv, servers
from benchmarks.overhead import config_for, prepare

RATE_HZ = 400
CONCURRENCY = 32
_LINE = re.compile(r":\d+\)$")
LOOP_FRAME = "Runner.run (asyncio/runners.py)"
#: frames under which samples count as the request phase rather than start-up/teardown
IMPORT_FRAME = "_find_and_load (<frozen importlib._bootstrap>)"


#: where a request's CPU goes: the deepest of these frames on a stack names its bucket
BUCKETS: tuple[tuple[str, str], ...] = (
    ("HTTP exchange: lean transport or aiohttp (EndpointPool._attempt)", "EndpointPool._attempt"),
    ("model client worker, excl. HTTP (ModelClient._worker)", "ModelClient._worker"),
    ("model client submit (de-dup, queue)", "ModelClient.submit"),
    ("metric", "ascore"),
    ("engine: requests for a sample (Engine._conversation)", "Engine._conversation"),
    ("engine: record, score, progress (Engine._ask)", "Engine._ask"),
    ("engine: prompt, audio, fan-out (Engine._sample)", "Engine._sample"),
    ("engine: sample workers and the data they read (evalkit/util/feed.py)", "drain.<locals>.work"),
    ("engine: sample workers and the data they read (evalkit/util/feed.py)", "Feed._read"),
    ("engine: CIs at the end (Engine.run)", "Engine.run"),
    ("runner: clients, store, results files (execute)", "_execute"),
)
LOOP_OTHER = "event loop itself: socket I/O, task steps (uvloop, C)"


def bucket_of(frames: list[str]) -> str | None:
    """The hot-path bucket of a stack inside the event loop; None for start-up and imports."""
    if LOOP_FRAME not in frames or IMPORT_FRAME in frames:
        return None
    for frame in reversed(frames):
        for name, key in BUCKETS:
            if key in frame:
                return name
    return LOOP_OTHER


@dataclass
class Summary:
    total: int = 0
    in_loop: int = 0
    imports: int = 0
    other_threads: int = 0
    self_time: Counter[str] = field(default_factory=Counter)
    inclusive: Counter[str] = field(default_factory=Counter)
    loop_self: Counter[str] = field(default_factory=Counter)
    buckets: Counter[str] = field(default_factory=Counter)

    def share(self, n: int) -> float:
        return n / self.total if self.total else 0.0


def _frames(stack: str) -> list[str]:
    return [_LINE.sub(")", f) for f in stack.split(";") if f]


def summarize(collapsed: str) -> Summary:
    """Collapsed stacks (``a;b;c N`` lines, py-spy ``--format raw``) -> shares by function."""
    summary = Summary()
    for line in collapsed.splitlines():
        line = line.rstrip()
        if not line or " " not in line:
            continue
        stack, count = line.rsplit(" ", 1)
        n = int(count)
        frames = _frames(stack)
        if not frames:
            continue
        summary.total += n
        summary.self_time[frames[-1]] += n
        for frame in set(frames):
            summary.inclusive[frame] += n
        if IMPORT_FRAME in frames:
            summary.imports += n
        if LOOP_FRAME in frames:
            summary.in_loop += n
            summary.loop_self[frames[-1]] += n
        bucket = bucket_of(frames)
        if bucket is not None:
            summary.buckets[bucket] += n
        elif (
            frames[0].startswith(("_bootstrap (threading", "Thread._bootstrap"))
            or "Thread.run (threading.py)" in frames
        ):
            summary.other_threads += n
    return summary


def record(work: Path, out: Path) -> Path:
    """py-spy the (a) run at CONCURRENCY against a zero-latency server."""
    runspecs = work / "runspecs"
    if not (runspecs / "bench" / "bench_overhead.json").exists():
        prepare(work)
    with servers(1) as (server,):
        config = config_for(work, runspecs, server.base_url, CONCURRENCY)
        cmd = [
            "py-spy",
            "record",
            "--gil",
            "--rate",
            str(RATE_HZ),
            "--format",
            "raw",
            "-o",
            str(out),
            "--",
            *evalkit_argv("run", str(config), "--no-cache", "--quiet"),
        ]
        proc = subprocess.run(cmd, cwd=work, env=child_env(), capture_output=True, text=True, timeout=300, check=False)
    if proc.returncode != 0 or not out.exists():
        raise RuntimeError(f"py-spy failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return out


def run(work: Path) -> dict[str, Any]:
    if shutil.which("py-spy") is None:
        print("  profile: py-spy not installed (pip install py-spy); skipped", flush=True)
        return {"skipped": "py-spy not installed"}
    out = record(work, work / "profile_a.txt")
    summary = summarize(out.read_text())
    result = {
        "rate_hz": RATE_HZ,
        "concurrency": CONCURRENCY,
        "samples": summary.total,
        "share_in_loop": summary.share(summary.in_loop),
        "share_imports": summary.share(summary.imports),
        "share_other_threads": summary.share(summary.other_threads),
        "buckets": [(b, n / max(1, sum(summary.buckets.values()))) for b, n in summary.buckets.most_common()],
        "top_self": [(f, summary.share(n)) for f, n in summary.self_time.most_common(25)],
        "top_loop_self": [(f, summary.share(n)) for f, n in summary.loop_self.most_common(25)],
        "evalkit_inclusive": [
            (f, summary.share(n))
            for f, n in summary.inclusive.most_common()
            if "evalkit/" in f and summary.share(n) >= 0.005
        ][:30],
        "collapsed_file": str(out),
    }
    print(
        f"  profile: {summary.total} samples, {result['share_imports']:.0%} in imports, "
        f"{result['share_in_loop']:.0%} in the event loop",
        flush=True,
    )
    return result

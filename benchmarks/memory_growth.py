"""What grows with the dataset: tracemalloc snapshots of a clean soak run at 5,000 and at the last samples.

    EVALKIT_SOAK_SAMPLES=20000 python -m benchmarks.memory_growth [--top 12]

Runs the soak benchmark's clean run (no faults, no store) in this process with
tracemalloc on (about 3x slower), snapshots when a quarter and nearly all of
the records are in, and prints the allocations that grew in between, by
traceback. How the (s) row "RSS at 5,000 -> 20,000" was brought under 10%.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import tempfile
import tracemalloc
from pathlib import Path
from typing import Any

from benchmarks import soak
from benchmarks.common import write_text_dataset


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.memory_growth", description=__doc__.split("\n\n")[0])
    parser.add_argument("--top", type=int, default=12, help="growers to print (default 12)")
    args = parser.parse_args(argv)

    from evalkit.config import load_config
    from evalkit.plan import build_plan
    from evalkit.run.runner import RunOptions, execute
    from evalkit.testing import start_test_server

    n = soak.samples()
    marks = (n // 4 * len(soak.METRICS), (n - 10) * len(soak.METRICS))
    snapshots: dict[int, tuple[Any, int]] = {}
    done = 0

    def progress(engine: str, model: str, ok: bool) -> None:
        nonlocal done
        done += 1
        if done in marks:
            gc.collect()
            snapshots[done] = (tracemalloc.take_snapshot(), soak._rss())

    with tempfile.TemporaryDirectory(prefix="evalkit-memory-growth-") as tmp:
        work = Path(tmp)
        runspecs = work / "runspecs"
        write_text_dataset(runspecs, "soak", n)
        spec_file = runspecs / "bench" / "soak.json"
        spec = json.loads(spec_file.read_text())
        spec["_task"]["metrics"] = list(soak.METRICS)
        spec_file.write_text(json.dumps(spec))
        server = start_test_server()
        try:
            config = soak._config(work / "clean.yaml", runspecs, server.base_url, work / "runs")
            plan = build_plan(load_config(config), source=str(config))
            tracemalloc.start(4)
            asyncio.run(execute(plan, RunOptions(quiet=True, progress=progress, no_cache=True)))
        finally:
            server.stop()
    (first, rss_first), (last, rss_last) = (snapshots[k] for k in sorted(snapshots))
    print(f"RSS {rss_first / 2**20:.1f} MiB -> {rss_last / 2**20:.1f} MiB (with tracemalloc's own overhead)")
    for stat in last.compare_to(first, "traceback")[: args.top]:
        where = " <- ".join(
            f"{frame.filename.rsplit('site-packages/', 1)[-1]}:{frame.lineno}" for frame in stat.traceback
        )
        print(f"{stat.size_diff / 2**20:7.2f} MiB {stat.count_diff:8d} objects  {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

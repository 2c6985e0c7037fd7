"""64 replicas from one process: throughput against linear, and what one dead replica costs.

    python -m benchmarks.wide_replicas [--replicas 64] [--requests 6400]

One model lists 64 loopback test servers as its ``url``; each answers after
200 ms with at most 4 requests in service (``max_concurrency: 4``), so one
replica does at most 20 req/s and the 64 together 1,280 req/s. evalkit runs
``batch_size`` 4 per replica (256 in flight). Then one of the 64 URLs points at
a closed port: the other 63 should carry the run at 63/64 of the capacity,
the dead one costing only its share (its circuit opens, its samples move on).
Not part of ``python -m benchmarks``: 64 server processes are a lot for a
2-core machine; run it on its own.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.common import (
    harness_argv,
    model_entry,
    request_phase,
    run_child,
    servers,
    write_config,
    write_text_dataset,
)

SERVER_LIMIT = 4
LATENCY_MS = 200


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # nothing listens once the socket is closed


def _measure(work: Path, runspecs: Path, n_live: int, dead: int, n: int, label: str) -> dict[str, Any]:
    script = {"latency_ms": LATENCY_MS, "max_concurrency": SERVER_LIMIT}
    with servers(n_live, script, request_log=True) as group:
        urls = [s.base_url for s in group] + [f"http://127.0.0.1:{_closed_port()}/v1" for _ in range(dead)]
        entry = model_entry("wide", urls, SERVER_LIMIT)
        config = write_config(
            work / f"wide_{label}.yaml",
            [("bench_wide", "exact_match")],
            [entry],
            runspecs,
            work / f"runs-{label}",
            num_samples=n,
        )
        child = run_child(harness_argv(config), work, timeout=1200).check()
        phase = request_phase(group)
    probe = child.json()
    capacity = n_live * SERVER_LIMIT / (LATENCY_MS / 1000)
    return {
        "live": n_live,
        "dead": dead,
        "requests": n,
        "answered": phase.completed,
        "failed": probe["failed"],
        "phase_s": round(phase.seconds, 2),
        "throughput": round(phase.completed / phase.seconds, 1),
        "capacity": capacity,
        "ratio_to_linear": round(phase.completed / phase.seconds / capacity, 3),
        "lag_p99_ms": probe["lag_p99_ms"],
        "execute_s": probe["execute_s"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.wide_replicas", description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, default=64)
    parser.add_argument("--requests", type=int, default=6400)
    parser.add_argument("--out", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="evalkit-wide-") as tmp:
        work = Path(tmp)
        runspecs = work / "runspecs"
        write_text_dataset(runspecs, "bench_wide", args.requests, tag="wide ")
        rows = [
            _measure(work, runspecs, args.replicas, 0, args.requests, "all-live"),
            _measure(work, runspecs, args.replicas - 1, 1, args.requests, "one-dead"),
        ]
    for row in rows:
        print(json.dumps(row), flush=True)
    if args.out:
        args.out.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

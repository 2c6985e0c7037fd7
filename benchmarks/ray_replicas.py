"""Replicas on a Ray cluster: throughput against linear at 1, 2 and 4 replicas started by ``launch.ray``.

    python -m benchmarks.ray_replicas [--replicas 1,2,4] [--per-replica 400] [--out FILE]

The (w) benchmark's shape, with the replicas started by evalkit itself on a
Ray cluster instead of listed as URLs: one model whose ``launch`` block is
``{backend: test-server, ray: {replicas: N, resources_per_replica:
{replica_slot: 1}}}``; each replica answers after 200 ms with at most 8
requests in service (``max_concurrency: 8``), so one replica does at most
40 req/s and N together N x 40. evalkit runs ``batch_size`` 8 per replica.
The cluster is this machine as two Ray nodes (``ray start --head`` and a
second ``ray start``, each with ``replica_slot: 4``, their own temporary
folder and a private HOME), so replicas spread over both nodes; the script
stops only the nodes it started, by their process groups.

The request phase (first request received -> last answer sent) is read from
the replicas' shared request log; start-up (placement, actors, servers
ready) is reported apart, as ``ready_s``. Not part of ``python -m
benchmarks``: it needs Ray (``pip install 'evalkit[ray]'``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.common import child_env, harness_argv, machine, run_child, write_config, write_text_dataset

SERVER_LIMIT = 8
LATENCY_MS = 200
SLOTS_PER_NODE = 4


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _stop(groups: list[int]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for group in groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, sig)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_group_alive(g) for g in groups):
            time.sleep(0.1)


@contextlib.contextmanager
def local_cluster(folder: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """Two Ray nodes on this machine; (address, environment for its drivers)."""
    (folder / "home").mkdir(parents=True)
    (folder / "tmp").mkdir()
    env = {**child_env(), "RAY_USAGE_STATS_ENABLED": "0", "HOME": str(folder / "home"), "TMPDIR": str(folder / "tmp")}
    env.pop("RAY_ADDRESS", None)
    port = _free_port()
    common = [
        "--node-ip-address=127.0.0.1",
        "--num-cpus=2",
        f'--resources={{"replica_slot": {SLOTS_PER_NODE}}}',
        "--disable-usage-stats",
    ]
    nodes = [
        ["--head", f"--port={port}", "--include-dashboard=false", f"--ray-client-server-port={_free_port()}"],
        [f"--address=127.0.0.1:{port}"],
    ]
    groups: list[int] = []
    try:
        for index, args in enumerate(nodes):
            extra = [f"--temp-dir={folder / f'node{index}'}", f"--dashboard-agent-listen-port={_free_port()}"]
            process = subprocess.Popen(
                [sys.executable, "-m", "ray.scripts.scripts", "start", *args, *extra, *common],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            groups.append(process.pid)
            output, _ = process.communicate(timeout=180)
            if process.returncode != 0:
                raise RuntimeError(f"ray start failed:\n{output.decode(errors='replace')[-3000:]}")
        yield f"127.0.0.1:{port}", env
    finally:
        _stop(groups)


def _phase(request_log: Path) -> tuple[float, float, int]:
    received: list[float] = []
    completed: list[float] = []
    for line in request_log.read_text().splitlines():
        event = json.loads(line)
        if event.get("event") == "received":
            received.append(event["ts"])
        elif event.get("event") == "completed" and event.get("status") == 200:
            completed.append(event["ts"])
    return min(received), max(completed), len(completed)


def _measure(work: Path, runspecs: Path, address: str, env: dict[str, str], replicas: int, n: int) -> dict[str, Any]:
    request_log = work / f"requests-{replicas}.jsonl"
    entry = {
        "info": {
            "name": "ray",
            "inference_type": "vllm",
            "model": "test-model",
            "batch_size": SERVER_LIMIT,
            "timeout": 60,
            "retry_attempts": 2,
            "launch": {
                "backend": "test-server",
                "args": [
                    "--latency-ms",
                    str(LATENCY_MS),
                    "--max-concurrency",
                    str(SERVER_LIMIT),
                    "--request-log",
                    str(request_log),
                ],
                "startup_timeout": 120,
                "ray": {"address": address, "replicas": replicas, "resources_per_replica": {"replica_slot": 1}},
            },
        }
    }
    config = write_config(
        work / f"ray_{replicas}.yaml", [("bench_ray", "exact_match")], [entry], runspecs, work / "runs", num_samples=n
    )
    load_before = os.getloadavg()
    child = run_child(harness_argv(config), work, timeout=1200, env=env).check()
    first, last, answered = _phase(request_log)
    probe = child.json()
    capacity = replicas * SERVER_LIMIT / (LATENCY_MS / 1000)
    throughput = answered / (last - first)
    results = max((work / "runs").glob("*/results.json"), key=lambda p: p.stat().st_mtime)
    nodes = {server["ray"]["node_id"] for server in json.loads(results.read_text())["servers"]}
    return {
        "replicas": replicas,
        "nodes": len(nodes),
        "requests": n,
        "answered": answered,
        "failed": probe["failed"],
        "phase_s": round(last - first, 2),
        "throughput": round(throughput, 1),
        "capacity": capacity,
        "ratio_to_linear": round(throughput / capacity, 3),
        "ready_s": round(first - child.started, 2),
        "process_s": round(child.wall_s, 2),
        "client_cpu_s": round(child.cpu_s, 2),
        "lag_p99_ms": probe["lag_p99_ms"],
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ray_replicas", description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", default="1,2,4", help="comma-separated replica counts (at most 8)")
    parser.add_argument("--per-replica", type=int, default=400, help="requests per replica in each run")
    parser.add_argument("--out", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args(argv)
    counts = [int(c) for c in args.replicas.split(",")]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="ekrb", dir="/tmp") as tmp:  # short: Ray's socket paths
        work = Path(tmp)
        runspecs = work / "runspecs"
        write_text_dataset(runspecs, "bench_ray", max(counts) * args.per_replica, tag="ray ")
        with local_cluster(work / "cluster") as (address, env):
            for count in counts:
                row = _measure(work, runspecs, address, env, count, count * args.per_replica)
                print(json.dumps(row), flush=True)
                rows.append(row)
    if args.out:
        args.out.write_text(json.dumps({"machine": machine(), "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

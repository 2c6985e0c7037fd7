"""(c) replica scaling: one model, 1/2/4 replicas, each server capped at 8 concurrent requests.

Every replica is its own server process answering after 50 ms with at most
8 requests in service (``max_concurrency: 8``), so one replica can do at most
8 / 0.05 = 160 req/s and throughput can only grow by adding replicas. The
model's ``url`` lists the replicas, each with ``batch_size`` 8. Then one of
four replicas is made 3x slower (150 ms): work stealing should give it about
a tenth of the samples and finish near the ideal for the combined capacity
(3 x 160 + 8 / 0.15 = 533 req/s).
"""

from __future__ import annotations

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

N_REQUESTS = 1600
#: the slow-replica run is longer so that its unavoidable tail (the slow replica's last answer,
#: up to 150 ms after the others are idle) weighs 2.5% of the ideal rather than 5%
N_SLOW = 3200
SERVER_LIMIT = 8
LATENCY_MS = 50
SLOW_FACTOR = 3
COUNTS = (1, 2, 4)


def _capacity(latencies_ms: list[float]) -> float:
    return sum(SERVER_LIMIT / (ms / 1000) for ms in latencies_ms)


def _measure(work: Path, runspecs: Path, latencies_ms: list[float], label: str, n: int = N_REQUESTS) -> dict[str, Any]:
    scripts = [{"latency_ms": ms, "max_concurrency": SERVER_LIMIT} for ms in latencies_ms]
    with servers(len(latencies_ms), scripts, request_log=True) as group:
        entry = model_entry("replicated", [s.base_url for s in group], SERVER_LIMIT)
        config = write_config(
            work / f"replicas_{label}.yaml",
            [("bench_replicas", "exact_match")],
            [entry],
            runspecs,
            work / "runs",
            num_samples=n,
        )
        child = run_child(harness_argv(config), work).check()
        phase = request_phase(group)
        served = [len(s.log_events("completed")) for s in group]
    probe = child.json()
    if phase.completed != n or probe["failed"]:
        raise RuntimeError(
            f"(c) {label}: expected {n} answered requests, got {phase.completed} ({probe['failed']} failed)"
        )
    ideal = n / _capacity(latencies_ms)
    return {
        "replicas": len(latencies_ms),
        "latencies_ms": latencies_ms,
        "phase_s": phase.seconds,
        "execute_s": probe["execute_s"],
        "requests": n,
        "throughput": n / phase.seconds,
        "ideal_s": ideal,
        "ratio_to_ideal": phase.seconds / ideal,
        "served": served,
        "lag_p99_ms": probe["lag_p99_ms"],
    }


def run(work: Path) -> dict[str, Any]:
    runspecs = work / "runspecs"
    write_text_dataset(runspecs, "bench_replicas", max(N_REQUESTS, N_SLOW), tag="replica ")
    scaling = {}
    for count in COUNTS:
        scaling[count] = _measure(work, runspecs, [LATENCY_MS] * count, f"{count}")
        print(
            f"  (c) {count} replica(s): {scaling[count]['throughput']:,.0f} req/s (ideal "
            f"{_capacity([LATENCY_MS] * count):,.0f})",
            flush=True,
        )
    base = scaling[COUNTS[0]]["throughput"]
    for item in scaling.values():
        item["speedup"] = item["throughput"] / base
    slow = _measure(work, runspecs, [LATENCY_MS] * 3 + [LATENCY_MS * SLOW_FACTOR], "slow", N_SLOW)
    slow["slow_share"] = slow["served"][-1] / N_SLOW
    slow["ideal_slow_share"] = _capacity([LATENCY_MS * SLOW_FACTOR]) / _capacity(
        [LATENCY_MS] * 3 + [LATENCY_MS * SLOW_FACTOR]
    )
    print(
        f"  (c) speed-up at 4 replicas {scaling[4]['speedup']:.2f}x; one replica {SLOW_FACTOR}x slower: "
        f"{slow['phase_s']:.2f} s vs ideal {slow['ideal_s']:.2f} s ({slow['ratio_to_ideal']:.3f}x), slow replica "
        f"served {slow['slow_share']:.1%}",
        flush=True,
    )
    return {
        "n_requests": N_REQUESTS,
        "n_slow": N_SLOW,
        "server_limit": SERVER_LIMIT,
        "latency_ms": LATENCY_MS,
        "scaling": scaling,
        "slow": slow,
    }

"""(b) latency-bound efficiency, with (e) event-loop lag measured during it.

3 models x 2 datasets, ``batch_size`` 64, 2,000 samples per dataset, every
server answering after 100 ms: 12,000 requests at 192 in flight can take no
less than requests x latency / concurrency. Each model gets its own server
process so no single server is what limits the run (its /_stats peak
in-flight is reported to show it), and the two datasets have distinct
prompts so nothing is de-duplicated.
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

N_SAMPLES = 2000
N_MODELS = 3
BATCH_SIZE = 64
LATENCY_MS = 100
DATASETS = ("bench_latency_a", "bench_latency_b")


def run(work: Path) -> dict[str, Any]:
    runspecs = work / "runspecs"
    for name in DATASETS:
        write_text_dataset(runspecs, name, N_SAMPLES, tag=f"{name} ")
    requests = N_MODELS * len(DATASETS) * N_SAMPLES
    concurrency = N_MODELS * BATCH_SIZE
    ideal = requests * LATENCY_MS / 1000 / concurrency
    with servers(N_MODELS, latency_ms=LATENCY_MS, request_log=True) as group:
        models = [model_entry(f"model{i}", server.base_url, BATCH_SIZE) for i, server in enumerate(group)]
        config = write_config(
            work / "latency.yaml", [(d, "exact_match") for d in DATASETS], models, runspecs, work / "runs"
        )
        child = run_child(harness_argv(config), work).check()
        stats = [server.stats() for server in group]
        phase = request_phase(group)
    probe = child.json()
    if phase.completed != requests or probe["failed"]:
        raise RuntimeError(
            f"(b) expected {requests} answered requests, got {phase.completed} ({probe['failed']} failed)"
        )
    result = {
        "requests": requests,
        "concurrency": concurrency,
        "latency_ms": LATENCY_MS,
        "ideal_s": ideal,
        "phase_s": phase.seconds,
        "execute_s": probe["execute_s"],
        "process_s": child.wall_s,
        "ratio_phase": phase.seconds / ideal,
        "ratio_execute": probe["execute_s"] / ideal,
        "server_peak_in_flight": [s["max_in_flight"] for s in stats],
        "lag_p50_ms": probe["lag_p50_ms"],
        "lag_p99_ms": probe["lag_p99_ms"],
        "lag_max_ms": probe["lag_max_ms"],
        "busy_lag_p99_ms": probe["busy_lag_p99_ms"],
        "cpu_s": child.cpu_s,
        "loop_thread_cpu_s": probe["loop_thread_cpu_s"],
        "execute_cpu_s": probe["execute_cpu_s"],
        "gc_s": probe["gc_s"],
        "gc_longest_ms": probe["gc_longest_ms"],
        "gc_collections": probe["gc_collections"],
    }
    print(
        f"  (b) {requests} requests at {concurrency} in flight, {LATENCY_MS} ms: request phase {phase.seconds:.2f} s, "
        f"runner {probe['execute_s']:.2f} s vs ideal {ideal:.2f} s ({result['ratio_phase']:.3f}x / "
        f"{result['ratio_execute']:.3f}x); "
        f"server peaks {result['server_peak_in_flight']}; (e) lag p99 {probe['lag_p99_ms']:.1f} ms "
        f"(loop busy {probe['busy_lag_p99_ms']:.1f} ms); evalkit CPU {child.cpu_s:.1f} s",
        flush=True,
    )
    return result

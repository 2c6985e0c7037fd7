"""(g) shards: one plan as 2 processes (``evalkit run --shard K/2``) vs 1 process, the client's CPU the bottleneck.

The work is (f)'s: chat requests carrying 10 s, 16 kHz FLAC clips (decoded,
written as WAV, base64-encoded: about 427 KB a body and some 2.7 ms of client
CPU each), answered at once by one test server ("ok", no latency, no request
log, so it only parses a body and answers), so the client is what limits
throughput. One round runs the plan in one process, then as two shard
processes started together, each time against a fresh server; ``ROUNDS``
rounds alternate, and the figures are medians.

Throughput is samples scored over the wall time from the first spawn to the
last exit (start-up included: each shard pays its own, side by side). The
client CPU per request adds the evalkit processes and their audio workers
(reaped here as in (f)); "CPUs kept busy" is that CPU over the wall time, the
share of this machine's 2 the client used. The server's CPU is measured too:
on 2 cores it competes with the client. After the last round the two shards
are merged and the merge is checked to hold every sample once.

A second pair of runs holds each evalkit process to one CPU of its own
(``taskset``: the 1 process to CPU 0, shard K to CPU K), as if each shard had a
machine of one CPU: what sharding gives where the CPUs are there. On this
machine of 2 CPUs, one unpinned process already keeps well over one CPU busy
(its media threads decode and encode outside the GIL), which is the ceiling of
the unpinned comparison.
"""

from __future__ import annotations

import json
import os
import statistics
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks import memory
from benchmarks.audio_requests import ORPHAN_WAIT_S, _reap_orphans, _subreaper
from benchmarks.common import (
    Child,
    evalkit_argv,
    model_entry,
    run_child,
    server_cpu_s,
    servers,
    write_config,
)

N_REQUESTS = 2048
CONCURRENCY = 32
ROUNDS = 3
SHARDS = 2
TARGET = 1.8


def _config(work: Path, runspecs: Path, url: str, tag: str) -> Path:
    return write_config(
        work / f"shards_{tag}.yaml",
        [("bench_audio", "word_error_rate")],
        [model_entry("audio", url, CONCURRENCY)],
        runspecs,
        work / "runs" / tag,
        num_samples=N_REQUESTS,
    )


def _together(argvs: list[list[str]], cwd: Path) -> tuple[list[Child], float]:
    """Run the commands at once (one thread each waiting on its child); their results and the wall time."""
    children: list[Child | None] = [None] * len(argvs)

    def one(index: int) -> None:
        children[index] = run_child(argvs[index], cwd, timeout=900)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(argvs))]
    t0 = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - t0
    done = [child.check() for child in children if child is not None]
    if len(done) != len(argvs):
        raise RuntimeError("(g) a shard process did not report back")
    return done, wall


def _answered(work: Path, tag: str) -> int:
    """Samples scored by the runs of one measurement (every one must be: a failure would flatter the rate)."""
    scored = 0
    for results in (work / "runs" / tag).glob("*/results.json"):
        for row in json.loads(results.read_text(encoding="utf-8"))["results"]:
            if row["n_failed"]:
                raise RuntimeError(f"(g) {results}: {row['n_failed']} failed samples ({row['failure_reasons']})")
            scored += row["n"]
    return scored


def _measure(work: Path, runspecs: Path, processes: int, tag: str, pinned: bool = False) -> dict[str, Any]:
    """One plan run by ``processes`` evalkit processes (1: unsharded; else --shard K/processes) at once.

    ``pinned``: process K may use CPU K only (``taskset``; its audio workers inherit it), as if each
    process had a machine of one CPU to itself (or the CPUs :func:`_pin_lists` names); the server is not pinned.
    """
    with servers(1, default_answer="ok") as (server,):  # no request log: the server only parses and answers
        config = _config(work, runspecs, server.base_url, tag)
        base = evalkit_argv("run", str(config), "--no-cache", "--quiet")
        argvs = [base] if processes == 1 else [[*base, "--shard", f"{k}/{processes}"] for k in range(processes)]
        if pinned:
            cpus = _pin_lists(len(argvs))
            argvs = [["taskset", "--cpu-list", cpus[k], *argv] for k, argv in enumerate(argvs)]
        cpu0 = server_cpu_s(server)
        children, wall = _together(argvs, work)
        workers_cpu, reaped = _reap_orphans({server.pid}, ORPHAN_WAIT_S)
        server_cpu = server_cpu_s(server) - cpu0
    completed = _answered(work, tag)
    client_cpu = sum(child.cpu_s for child in children) + workers_cpu
    return {
        "processes": processes,
        "completed": completed,
        "wall_s": wall,
        "rps_wall": completed / wall,
        "spread_s": max(child.wall_s for child in children) - min(child.wall_s for child in children),
        "client_cpu_s": client_cpu,
        "client_cpu_us_per_request": client_cpu / completed * 1e6,
        "client_cores": client_cpu / wall,  # CPUs the client kept busy on average: 2 is all of this machine
        "server_cpu_s": server_cpu,
        "server_cpu_us_per_request": server_cpu / completed * 1e6,
        "workers_reaped": reaped,
        "loadavg_after": os.getloadavg()[0],
    }


def _pin_lists(processes: int) -> list[str]:
    """The CPUs of process K when pinned: K alone, or the K-th list of EVALKIT_BENCH_PIN_CPUS ("0-1,2-3").

    On a bigger machine "0-1,2-3" gives the one process two CPUs, as this machine has, and each shard two of
    its own: what N machines of this size would do with N shards.
    """
    given = os.environ.get("EVALKIT_BENCH_PIN_CPUS", "").strip()
    lists = [part.strip() for part in given.split(",") if part.strip()] if given else []
    return [lists[k] if k < len(lists) else str(k) for k in range(processes)]


def _median(runs: list[dict[str, Any]]) -> dict[str, Any]:
    merged: dict[str, Any] = {
        k: statistics.median(r[k] for r in runs) for k, v in runs[0].items() if isinstance(v, (int, float))
    }
    merged["runs_rps_wall"] = [round(r["rps_wall"], 1) for r in runs]
    return merged


def _check_merge(work: Path) -> dict[str, Any]:
    """The last round's two shards merged: every sample scored once, as in the unsharded run."""
    shard_dirs = sorted(p.parent for p in (work / "runs").glob("two-*/*/run.json"))[-SHARDS:]
    merged = work / "merged"
    child = run_child(evalkit_argv("merge", *map(str, shard_dirs), "--output", str(merged), "--quiet"), work).check()
    rows = json.loads((merged / "results.json").read_text(encoding="utf-8"))["results"]
    n = sum(r["n"] + r["n_failed"] for r in rows)
    if n != N_REQUESTS:
        raise RuntimeError(f"(g) the merge holds {n} samples, expected {N_REQUESTS}")
    return {"samples": n, "wall_s": child.wall_s, "cpu_s": child.cpu_s, "shard_dirs": [str(p) for p in shard_dirs]}


def run(work: Path) -> dict[str, Any]:
    work = work / "shards"  # a folder of its own: its config reads ./runspecs beside it
    work.mkdir(exist_ok=True)
    parquet, generated_s = memory.audio_parquet(N_REQUESTS)
    runspecs = work / "runspecs_audio"
    memory.write_runspec(runspecs, parquet)
    subreaper = _subreaper()
    loadavg_before = os.getloadavg()
    one: list[dict[str, Any]] = []
    two: list[dict[str, Any]] = []
    one_pinned: list[dict[str, Any]] = []
    two_pinned: list[dict[str, Any]] = []
    for i in range(ROUNDS):  # alternated, so a burst of load on the shared machine hits all alike
        one.append(_measure(work, runspecs, 1, f"one-{i}"))
        two.append(_measure(work, runspecs, SHARDS, f"two-{i}"))
        one_pinned.append(_measure(work, runspecs, 1, f"one-pinned-{i}", pinned=True))
        two_pinned.append(_measure(work, runspecs, SHARDS, f"two-pinned-{i}", pinned=True))
    for r in one + two + one_pinned + two_pinned:
        if r["completed"] != N_REQUESTS:
            raise RuntimeError(f"(g) expected {N_REQUESTS} answered requests, got {r['completed']}")
    single, sharded = _median(one), _median(two)
    result = {
        "n_requests": N_REQUESTS,
        "concurrency_per_process": CONCURRENCY,
        "rounds": ROUNDS,
        "shards": SHARDS,
        "clip_seconds": memory.SECONDS,
        "generated_s": generated_s,
        "subreaper": subreaper,
        "cpus_usable": len(os.sched_getaffinity(0)),
        "pinned_cpus": {"one": _pin_lists(1), "two": _pin_lists(SHARDS)},
        "loadavg_before": loadavg_before,
        "loadavg_after": os.getloadavg(),
        "one": single,
        "two": sharded,
        "speedup": sharded["rps_wall"] / single["rps_wall"],
        "speedups_by_round": [b["rps_wall"] / a["rps_wall"] for a, b in zip(one, two)],
        "merge": _check_merge(work),
        "pinned": {
            "one": _median(one_pinned),
            "two": _median(two_pinned),
            "speedup": _median(two_pinned)["rps_wall"] / _median(one_pinned)["rps_wall"],
            "speedups_by_round": [b["rps_wall"] / a["rps_wall"] for a, b in zip(one_pinned, two_pinned)],
        },
    }
    print(
        f"  (g) shards ({memory.SECONDS} s clips, {N_REQUESTS} requests, {CONCURRENCY} in flight a process): "
        f"1 process {single['rps_wall']:,.0f} req/s, {SHARDS} shard processes {sharded['rps_wall']:,.0f} req/s = "
        f"{result['speedup']:.2f}x (spawn to last exit; by round "
        f"{', '.join(f'{x:.2f}' for x in result['speedups_by_round'])}); client CPU per request "
        f"{single['client_cpu_us_per_request']:,.0f} vs {sharded['client_cpu_us_per_request']:,.0f} µs, CPUs kept "
        f"busy by the client {single['client_cores']:.2f} vs {sharded['client_cores']:.2f}, server CPU per request "
        f"{single['server_cpu_us_per_request']:,.0f} µs (medians of {ROUNDS}; load {loadavg_before[0]:.2f} before, "
        f"{result['loadavg_after'][0]:.2f} after)",
        flush=True,
    )
    pinned = result["pinned"]
    print(
        f"  (g) the same with one CPU per process (taskset): 1 process {pinned['one']['rps_wall']:,.0f} req/s, "
        f"{SHARDS} shard processes {pinned['two']['rps_wall']:,.0f} req/s = {pinned['speedup']:.2f}x (by round "
        f"{', '.join(f'{x:.2f}' for x in pinned['speedups_by_round'])})",
        flush=True,
    )
    return result


def summary_rows(results: dict[str, Any]) -> list[tuple[str, str, str, bool | None]]:
    """The (g) row of the figures table."""
    g = results.get("shards")
    if not g:
        return []
    one, two = g["one"], g["two"]
    return [
        (
            f"(g) {g['shards']} shard processes vs 1, 10 s clips, zero-latency server (client CPU-bound)",
            f"{two['rps_wall']:,.0f} vs {one['rps_wall']:,.0f} req/s = **{g['speedup']:.2f}x** "
            f"(load {g['loadavg_before'][0]:.1f} before)",
            f">= {TARGET}x",
            g["speedup"] >= TARGET,
        ),
        (
            f"(g) the same, each process held to one CPU of its own (taskset), as on {g['shards']} machines",
            f"{g['pinned']['two']['rps_wall']:,.0f} vs {g['pinned']['one']['rps_wall']:,.0f} req/s = "
            f"**{g['pinned']['speedup']:.2f}x**",
            f">= {TARGET}x",
            g["pinned"]["speedup"] >= TARGET,
        ),
    ]


def details(results: dict[str, Any]) -> list[str]:
    """The (g) table of the details section."""
    g = results.get("shards")
    if not g:
        return []
    out = [
        "### (g) shards",
        "",
        f"{g['n_requests']:,} chat requests with {g['clip_seconds']} s FLAC clips, {g['concurrency_per_process']} in "
        f"flight a process, one zero-latency test server; 1 process vs {g['shards']} `--shard K/{g['shards']}` "
        f"processes started together; medians of {g['rounds']} alternating rounds on {g['cpus_usable']} usable CPUs "
        f"(load average {g['loadavg_before'][0]:.2f} before, {g['loadavg_after'][0]:.2f} after). The last round's "
        f"shards merged hold {g['merge']['samples']:,} samples (`evalkit merge`: "
        f"{g['merge'].get('wall_s', float('nan')):.2f} s).",
        "",
        "| processes | wall (spawn to last exit) | req/s | by round | client CPU / request | CPUs busy (client) | "
        "server CPU / request |",
        "|---|---|---|---|---|---|---|",
    ]
    runs = [
        ("", g["one"]),
        ("", g["two"]),
        (", one CPU each", g["pinned"]["one"]),
        (", one CPU each", g["pinned"]["two"]),
    ]
    for label, r in runs:
        out.append(
            f"| {r['processes']:.0f}{label} | {r['wall_s']:.2f} s | {r['rps_wall']:,.0f} | "
            f"{', '.join(f'{x:,.0f}' for x in r['runs_rps_wall'])} | {r['client_cpu_us_per_request']:,.0f} µs | "
            f"{r['client_cores']:.2f} | {r['server_cpu_us_per_request']:,.0f} µs |"
        )
    out.append("")
    return out

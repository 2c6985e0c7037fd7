"""(a) overhead and (a') start-up: evalkit against a zero-latency server vs the raw aiohttp loop.

For each concurrency the raw loop and ``evalkit run --no-cache`` each get a
fresh server (same script, request log on for both, so the server does the
same work for both). The request phase comes from the server's log for both
clients; evalkit's whole-process figure is the `evalkit run` subprocess from
spawn to exit. Start-up is spawn -> the server receiving the first request.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path
from typing import Any

from benchmarks import peers
from benchmarks.common import (
    child_env,
    client_figures,
    evalkit_argv,
    model_entry,
    request_phase,
    run_child,
    server_cpu_s,
    servers,
    write_config,
    write_text_dataset,
)

N_REQUESTS = 5000
#: (in flight, server latency in ms): the points of issue 17's table
POINTS = ((32, 0), (128, 0), (128, 100))
#: alternating raw/evalkit rounds per concurrency; figures are medians (one run on a shared machine is a coin toss)
ROUNDS = 3


def prepare(work: Path) -> tuple[Path, Path]:
    runspecs = work / "runspecs"
    data = write_text_dataset(runspecs, "bench_overhead", N_REQUESTS)
    return runspecs, data


def point_label(concurrency: int, latency_ms: int) -> str:
    return f"{concurrency} in flight" + (f", {latency_ms} ms latency" if latency_ms else "")


def config_for(work: Path, runspecs: Path, url: str, concurrency: int) -> Path:
    return write_config(
        work / f"overhead_{concurrency}.yaml",
        [("bench_overhead", "exact_match")],
        [model_entry("bench", url, concurrency)],
        runspecs,
        work / "runs",
    )


def measure_raw(
    work: Path, data: Path, concurrency: int, *, source: str = "--prompts", **server_settings: Any
) -> dict[str, Any]:
    """The raw aiohttp loop against a fresh server: ``data`` is a prompts jsonl (``--prompts``) or request bodies
    made beforehand (``source="--bodies"``); ``server_settings`` override the test server's defaults."""
    with servers(1, request_log=True, **server_settings) as (server,):
        cpu0 = server_cpu_s(server)
        child = run_child(
            [
                sys.executable,
                "-m",
                "benchmarks.raw_loop",
                "--url",
                server.base_url,
                source,
                str(data),
                "--concurrency",
                str(concurrency),
            ],
            work,
        ).check()
        server_cpu = server_cpu_s(server) - cpu0
        phase = request_phase([server])
    own = child.json()
    return {
        "rps_phase": phase.completed / phase.seconds,
        "rps_own_clock": own["ok"] / own["request_phase_s"],
        "phase_s": phase.seconds,
        "process_s": child.wall_s,
        "rps_process": phase.completed / child.wall_s,
        "cpu_s": child.cpu_s,
        "server_cpu_s": server_cpu,
        "completed": phase.completed,
        "loop": own["loop"],
    }


def measure_evalkit(work: Path, runspecs: Path, concurrency: int, latency_ms: int = 0) -> dict[str, Any]:
    with servers(1, request_log=True, latency_ms=latency_ms) as (server,):
        config = config_for(work, runspecs, server.base_url, concurrency)
        cpu0 = server_cpu_s(server)
        child = run_child(evalkit_argv("run", str(config), "--no-cache", "--quiet"), work).check()
        server_cpu = server_cpu_s(server) - cpu0
        phase = request_phase([server])
    return {
        **client_figures(phase, child, server_cpu),
        "after_last_s": child.started + child.wall_s - phase.last_completed,
    }


def measure_list(work: Path, repeats: int = 3) -> dict[str, Any]:
    walls = [run_child(evalkit_argv("list", "datasets"), work).check().wall_s for _ in range(repeats)]
    return {"median_s": statistics.median(walls), "min_s": min(walls), "runs_s": walls}


def measure_list_cold(work: Path) -> float:
    """`evalkit list datasets` where evalkit's bytecode is never cached (PYTHONDONTWRITEBYTECODE, no __pycache__).

    Libraries keep the bytecode their installer wrote; only evalkit's own
    modules are compiled from source, as in a checkout used with that variable set.
    """
    env = child_env()
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.pop("PYTHONPYCACHEPREFIX", None)
    return run_child(evalkit_argv("list", "datasets"), work, env=env).check().wall_s


def _median(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Field-wise median of several runs (numbers), plus every run's request-phase rate."""
    merged: dict[str, Any] = {}
    for key, value in runs[0].items():
        merged[key] = statistics.median(r[key] for r in runs) if isinstance(value, (int, float)) else value
    merged["runs_rps_phase"] = [r["rps_phase"] for r in runs]
    return merged


def run(work: Path) -> dict[str, Any]:
    runspecs, data = prepare(work)
    results: dict[str, Any] = {"n_requests": N_REQUESTS, "rounds": ROUNDS, "by_concurrency": {}}
    lm_eval = peers.ensure_lm_eval() if peers.enabled() else None
    tasks = peers.write_task(work, data) if lm_eval is not None else None
    if lm_eval is not None:
        results["lm_eval_version"] = peers.lm_eval_version(lm_eval)
    for concurrency, latency_ms in POINTS:
        label = point_label(concurrency, latency_ms)
        raw_runs: list[dict[str, Any]] = []
        evalkit_runs: list[dict[str, Any]] = []
        lm_eval_runs: list[dict[str, Any]] = []
        for _ in range(ROUNDS):  # alternated, so a burst of load on the machine hits every client alike
            raw_runs.append(measure_raw(work, data, concurrency, latency_ms=latency_ms))
            evalkit_runs.append(measure_evalkit(work, runspecs, concurrency, latency_ms))
            if lm_eval is not None and tasks is not None:
                lm_eval_runs.append(peers.measure_lm_eval(work, lm_eval, tasks, concurrency, latency_ms))
        for run_ in raw_runs + evalkit_runs + lm_eval_runs:
            if run_["completed"] != N_REQUESTS:
                raise RuntimeError(f"expected {N_REQUESTS} answered requests, got {run_['completed']}")
        raw, evalkit = _median(raw_runs), _median(evalkit_runs)
        results["by_concurrency"][label] = {
            "raw": raw,
            "evalkit": evalkit,
            "ratio_phase": evalkit["rps_phase"] / raw["rps_phase"],
            "ratio_process": evalkit["rps_process"] / raw["rps_process"],
            "cpu_us_per_request_raw": raw["cpu_s"] / N_REQUESTS * 1e6,
            "cpu_us_per_request_evalkit": evalkit["cpu_s"] / N_REQUESTS * 1e6,
        }
        if lm_eval_runs:
            peer = _median(lm_eval_runs)
            results["by_concurrency"][label]["lm_eval"] = peer
            results["by_concurrency"][label]["ratio_phase_lm_eval"] = peer["rps_phase"] / raw["rps_phase"]
            print(
                f"  (a) {label}: lm-eval {peer['rps_phase']:,.0f} req/s request phase "
                f"({peer['rps_phase'] / raw['rps_phase']:.2f}x raw), whole process {peer['process_s']:.1f} s",
                flush=True,
            )
        r = results["by_concurrency"][label]
        print(
            f"  (a) {label}: raw {raw['rps_phase']:,.0f} req/s; evalkit {evalkit['rps_phase']:,.0f} req/s "
            "request phase "
            f"({r['ratio_phase']:.2f}x), {evalkit['rps_process']:,.0f} vs {raw['rps_process']:,.0f} req/s whole "
            "process "
            f"({r['ratio_process']:.2f}x); start-up {evalkit['startup_s']:.2f} s (medians of {ROUNDS})",
            flush=True,
        )
    results["list"] = measure_list(work)
    results["list_cold_s"] = measure_list_cold(work)
    startups = [r["evalkit"]["startup_s"] for r in results["by_concurrency"].values()]
    results["startup_s"] = max(startups)
    print(
        f"  (a') start-up to first request {results['startup_s']:.2f} s (worst of the medians); `evalkit list "
        f"datasets` {results['list']['median_s']:.2f} s",
        flush=True,
    )
    return results

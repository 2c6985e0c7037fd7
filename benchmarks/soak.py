"""(s) soak: 20,000 samples x 3 metrics through a fault mix, SIGTERM at 30%, then a resume.

The test server (own process, request log on) draws per request: 10% 500,
5% 429 with Retry-After: 1, 2% hang (longer than the model's 2 s timeout), 2%
malformed JSON, 1% connection reset. The model allows 8 retries, so a sample
fails only if nine attempts in a row meet a fault (~4e-8): nothing should be
lost. Three metrics on one dataset share each request (one inference per
sample).

1. a clean run (no faults, no store) gives the reference scores and the RSS
   curve: RSS when a quarter of the samples are recorded (5,000 of 20,000) and
   when the last one is (before the CIs over the whole set are computed);
2. ``evalkit run`` (the real CLI, store on) against the faulty server gets
   SIGTERM once the server has answered 30% of the samples;
3. ``--resume`` finishes that run in its folder, in a probe process that
   reports peak RSS, RSS at a quarter and at the end, open descriptors and
   live asyncio tasks before and after the run.

Requests re-sent = bodies the server had answered with a 200 before the
SIGTERM and received again after it (answered but not committed when the
run died; the target is at most batch_size). Scores equal = score, CI, n and
n_failed of every (dataset, metric, model) row equal the clean run's.

    python -m benchmarks --only s                           # 20,000 samples
    EVALKIT_SOAK_SAMPLES=5000 python -m benchmarks --only s # a shorter soak
    python -m benchmarks.soak CONFIG [--resume RUN_DIR] [--no-cache]   # the probe process alone
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from benchmarks.common import child_env, mib, run_child, write_text_dataset

METRICS = ("exact_match", "bleu", "f1")
FAULTS = {"500": 0.10, "429": 0.05, "hang": 0.02, "malformed": 0.02, "drop": 0.01}
BATCH_SIZE = 32
TIMEOUT = 2.0
KILL_AT = 0.30


def samples() -> int:
    return int(os.environ.get("EVALKIT_SOAK_SAMPLES", "20000"))


# -- the probe process --------------------------------------------------------------------------


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _fd_targets() -> dict[str, str]:
    found = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            found[fd] = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
    return found


def _rss() -> int:
    with open("/proc/self/statm", encoding="ascii") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def _probe(config: Path, resume: str | None, no_cache: bool) -> dict[str, Any]:
    from evalkit.config import load_config
    from evalkit.plan import build_plan
    from evalkit.run.manifest import plan_for_resume
    from evalkit.run.runner import RunOptions, execute

    plan = plan_for_resume(resume) if resume else build_plan(load_config(config), source=str(config))
    engines = len(plan.engines)
    total = samples()
    quarter = total // 4
    rss_at: dict[str, int] = {}
    done = 0

    def progress(engine: str, model: str, ok: bool) -> None:
        nonlocal done
        done += 1
        if done == quarter * engines:
            rss_at["quarter"] = _rss()
        elif done == total * engines:  # the last record: streaming memory, before the CIs of the whole set
            rss_at["last"] = _rss()

    gc.collect()
    fds_before, tasks_before, targets_before = _fds(), len(asyncio.all_tasks()), _fd_targets()
    started = time.perf_counter()
    outcome = await execute(plan, RunOptions(quiet=True, progress=progress, resume=resume, no_cache=no_cache))
    seconds = time.perf_counter() - started
    rss_at["end"] = _rss()
    await asyncio.sleep(0.2)  # let closed transports and cancelled tasks finish
    gc.collect()
    current = asyncio.current_task()
    alive = [t for t in asyncio.all_tasks() if t is not current]
    fds_after, targets_after = _fds(), _fd_targets()
    # the same run once more (a resume of the finished folder: everything from the store, nothing sent): a leak
    # grows with every run, a library's one-time open (e.g. /dev/null) does not
    await execute(plan_for_resume(outcome.run_dir), RunOptions(quiet=True, resume=str(outcome.run_dir)))
    await asyncio.sleep(0.2)
    gc.collect()
    return {
        "run_dir": str(outcome.run_dir),
        "seconds": seconds,
        "records": done,
        "requests_sent": outcome.requests_sent,
        "store_hits": outcome.store_hits,
        "rss_quarter_bytes": rss_at.get("quarter"),
        "rss_last_record_bytes": rss_at.get("last"),
        "rss_end_bytes": rss_at["end"],
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "fds_before": fds_before,
        "fds_after": fds_after,
        "fds_new": sorted(t for fd, t in targets_after.items() if targets_before.get(fd) != t),
        "fds_after_second_run": _fds(),
        "tasks_after_second_run": len([t for t in asyncio.all_tasks() if t is not current]),
        "tasks_before": tasks_before - 1,
        "tasks_after": len(alive),
        "tasks_alive": sorted({getattr(t.get_coro(), "__qualname__", repr(t)) for t in alive})[:10],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.soak", description="the soak's probe process")
    parser.add_argument("config", type=Path)
    parser.add_argument("--resume", default=None)
    parser.add_argument("--no-cache", action="store_true")
    args = parser.parse_args(argv)
    import uvloop

    print(json.dumps(uvloop.run(_probe(args.config, args.resume, args.no_cache))))
    return 0


# -- the section --------------------------------------------------------------------------------


def _config(path: Path, runspecs: Path, url: str, output: Path) -> Path:
    config = {
        "dataset_metric": [["soak", metric] for metric in METRICS],
        "models": [
            {
                "info": {
                    "name": "m",
                    "inference_type": "vllm",
                    "url": url,
                    "model": "test-model",
                    "batch_size": BATCH_SIZE,
                    "timeout": TIMEOUT,
                    "retry_attempts": 8,
                }
            }
        ],
        "runspecs_dir": str(runspecs),
        "output_dir": str(output),
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def _scores(run_dir: Path) -> dict[str, list[Any]]:
    rows = json.loads((run_dir / "results.json").read_text())["results"]
    return {
        f"{r['dataset']}/{r['metric']}": [r["score"], r["ci_low"], r["ci_high"], r["n"], r["n_failed"]] for r in rows
    }


def _probe_child(config: Path, work: Path, *args: str) -> dict[str, Any]:
    child = run_child([sys.executable, "-m", "benchmarks.soak", str(config), *args], work, timeout=3600).check()
    return json.loads(child.stdout.strip().splitlines()[-1])


def run(work: Path) -> dict[str, Any]:
    from evalkit.testing import start_test_server

    n = samples()
    work = work / "soak"
    work.mkdir(parents=True, exist_ok=True)
    runspecs = work / "runspecs"
    write_text_dataset(runspecs, "soak", n)
    spec_file = runspecs / "bench" / "soak.json"
    spec = json.loads(spec_file.read_text())
    spec["_task"]["metrics"] = list(METRICS)
    spec_file.write_text(json.dumps(spec))

    clean_server = start_test_server()
    try:
        clean_config = _config(work / "clean.yaml", runspecs, clean_server.base_url, work / "clean-runs")
        clean = _probe_child(clean_config, work, "--no-cache")
    finally:
        clean_server.stop()
    print(f"  (s) clean run: {clean['seconds']:.1f} s, peak RSS {mib(clean['peak_rss_bytes'])}", flush=True)

    script = {"faults": {"seed": 18, "rates": FAULTS, "retry_after": 1, "hang_seconds": 30}}
    server = start_test_server(script, request_log=True)
    try:
        config = _config(work / "soak.yaml", runspecs, server.base_url, work / "runs")
        proc = subprocess.Popen(
            [sys.executable, "-m", "evalkit", "run", str(config), "--quiet"],
            cwd=work,
            env=child_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        started = time.perf_counter()
        while sum(1 for e in server.log_events("completed") if e["status"] == 200) < KILL_AT * n:
            if proc.poll() is not None:
                raise RuntimeError(f"(s) the run ended (exit {proc.returncode}) before the SIGTERM")
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        until_kill = time.perf_counter() - started
        events = server.log_events()
        answered = {e["body_sha256"] for e in events if e["event"] == "completed" and e["status"] == 200}
        run_dir = next(p for p in (work / "runs").iterdir() if p.is_dir())
        print(f"  (s) SIGTERM after {until_kill:.1f} s, {len(answered)} answered; resuming {run_dir.name}", flush=True)

        resumed = _probe_child(config, work, "--resume", str(run_dir))
        after = server.log_events()[len(events) :]
        resent = answered & {e["body_sha256"] for e in after if e["event"] == "received"}
        faults = server.stats()["faults"]
    finally:
        server.stop()

    records = {metric: sum(1 for _ in (run_dir / "records" / f"soak__{metric}.jsonl").open()) for metric in METRICS}
    scores, clean_scores = _scores(run_dir), _scores(Path(clean["run_dir"]))
    failed = sum(row[4] for row in scores.values())
    quarter, end = clean["rss_quarter_bytes"], clean["rss_last_record_bytes"]
    return {
        "samples": n,
        "metrics": list(METRICS),
        "faults": FAULTS,
        "faults_drawn": faults,
        "batch_size": BATCH_SIZE,
        "clean": clean,
        "sigterm_after_s": until_kill,
        "answered_before_sigterm": len(answered),
        "resumed": resumed,
        "records": records,
        "failed": failed,
        "resent": len(resent),
        "scores_equal": scores == clean_scores,
        "scores": scores,
        "clean_scores": clean_scores,
        "rss_growth": (end - quarter) / quarter if quarter else None,
        "resume_rss_growth": (resumed["rss_end_bytes"] - resumed["rss_quarter_bytes"]) / resumed["rss_quarter_bytes"]
        if resumed.get("rss_quarter_bytes")
        else None,
    }


if __name__ == "__main__":
    raise SystemExit(main())

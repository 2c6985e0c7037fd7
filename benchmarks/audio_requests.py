"""(f) audio requests: chat requests carrying 10 s clips, 32 in flight, evalkit vs a raw loop of the same bodies.

The dataset is (d)'s synthetic parquet of 10 s, 16 kHz FLAC tones (distinct
per row), cut to ``N_REQUESTS`` rows. evalkit reads each row, decodes the
FLAC (16 kHz mono 16-bit: straight to int16 in its media threads; any other
form in its audio worker processes), writes a 16 kHz WAV, base64-encodes it into a chat
request and sends it (about 427 KB a body). The yardstick is the raw loop
(:mod:`benchmarks.raw_loop`) sending *the same bodies byte for byte*, made
beforehand: one evalkit run against a capture server records every body it
sends, so the raw loop pays for no decoding or encoding at all. That is the
hardest comparison: every CPU second evalkit spends making a request counts
against it.

Figures, medians of ``ROUNDS`` alternating rounds, a fresh test server
(answering "ok" at once, request log on) for each: the request phase from
the server's log (first request received -> last response completed) and
the client's CPU per request. evalkit's CPU includes its audio worker
processes: this process makes itself a child subreaper while the section
runs, so the forkserver and the workers, orphaned when evalkit exits, are
reaped here and their CPU time is added (``os.wait4`` gives each one's).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks import memory, raw_loop
from benchmarks.common import (
    client_figures,
    evalkit_argv,
    model_entry,
    request_phase,
    run_child,
    server_cpu_s,
    servers,
    write_config,
)
from benchmarks.overhead import measure_raw

N_REQUESTS = 512
CONCURRENCY = 32
ROUNDS = 3
TARGET = 0.8
#: the workers' owner watchdog looks every second; their forkserver goes when evalkit's pipe closes
ORPHAN_WAIT_S = 2.5
_ANSWER = (
    b'{"id":"cap","object":"chat.completion","model":"test-model","choices":[{"index":0,'
    b'"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],'
    b'"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}'
)


@contextlib.contextmanager
def _capture_server() -> Iterator[tuple[str, list[bytes]]]:
    """An aiohttp server in a thread of this process that keeps every chat body it is sent and answers "ok"."""
    from aiohttp import web

    bodies: list[bytes] = []
    ready = threading.Event()
    state: dict[str, Any] = {}

    async def chat(request: web.Request) -> web.Response:
        bodies.append(await request.read())
        return web.Response(body=_ANSWER, content_type="application/json")

    async def serve() -> None:
        app = web.Application(client_max_size=64 * 2**20)
        app.router.add_post("/v1/chat/completions", chat)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        state["port"] = runner.addresses[0][1]
        state["stop"] = asyncio.Event()
        state["loop"] = asyncio.get_running_loop()
        ready.set()
        await state["stop"].wait()
        await runner.cleanup()

    thread = threading.Thread(target=lambda: asyncio.run(serve()), daemon=True, name="body-capture")
    thread.start()
    if not ready.wait(30):
        raise RuntimeError("the capture server did not start")
    try:
        yield f"http://127.0.0.1:{state['port']}/v1", bodies
    finally:
        state["loop"].call_soon_threadsafe(state["stop"].set)
        thread.join(10)


def _subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants (Linux), so their CPU time can be read."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


def _reap_orphans(keep: set[int], wait_s: float) -> tuple[float, int]:
    """CPU seconds of descendants that ended up here (audio workers, their forkserver), and how many.

    ``keep`` are the pids of children this process still runs (the test
    server): they are never waited for here.
    """
    cpu, count = 0.0, 0
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            pid, _, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            time.sleep(0.02)
            continue
        if pid in keep:  # pragma: no cover - the server does not exit while measured
            continue
        cpu += usage.ru_utime + usage.ru_stime
        count += 1
    return cpu, count


def _capture_bodies(work: Path, runspecs: Path) -> Path:
    """One evalkit run against the capture server; its bodies, in order, as the raw loop's input."""
    with _capture_server() as (url, bodies):
        config = _config(work, runspecs, url, "capture")
        run_child(evalkit_argv("run", str(config), "--no-cache", "--quiet"), work, timeout=600).check()
    _reap_orphans(set(), ORPHAN_WAIT_S)  # this run's workers: never counted in the first measured round
    if len(bodies) != N_REQUESTS:
        raise RuntimeError(f"(f) captured {len(bodies)} bodies, expected {N_REQUESTS}")
    path = work / "audio_bodies.bin"
    raw_loop.write_bodies(path, bodies)
    return path


def _config(work: Path, runspecs: Path, url: str, tag: str) -> Path:
    return write_config(
        work / f"audio_requests_{tag}.yaml",
        [("bench_audio", "word_error_rate")],
        [model_entry("audio", url, CONCURRENCY)],
        runspecs,
        work / "runs",
        num_samples=N_REQUESTS,
    )


def _measure_raw(work: Path, bodies: Path) -> dict[str, Any]:
    return measure_raw(work, bodies, CONCURRENCY, source="--bodies", default_answer="ok")


def _measure_evalkit(work: Path, runspecs: Path) -> dict[str, Any]:
    with servers(1, default_answer="ok", request_log=True) as (server,):
        config = _config(work, runspecs, server.base_url, "run")
        cpu0 = server_cpu_s(server)
        child = run_child(evalkit_argv("run", str(config), "--no-cache", "--quiet"), work, timeout=600).check()
        workers_cpu, reaped = _reap_orphans({server.pid}, ORPHAN_WAIT_S)
        server_cpu = server_cpu_s(server) - cpu0
        phase = request_phase([server])
    return {
        **client_figures(phase, child, server_cpu),
        "main_cpu_s": child.cpu_s,
        "workers_cpu_s": workers_cpu,
        "workers_reaped": reaped,
        "cpu_s": child.cpu_s + workers_cpu,  # its audio worker processes count as its own
    }


def _median(runs: list[dict[str, Any]]) -> dict[str, Any]:
    merged = {k: statistics.median(r[k] for r in runs) for k, v in runs[0].items() if isinstance(v, (int, float))}
    merged["runs_rps_phase"] = [r["rps_phase"] for r in runs]
    merged["runs_cpu_us"] = [r["cpu_s"] / N_REQUESTS * 1e6 for r in runs]
    return merged


def run(work: Path) -> dict[str, Any]:
    # a folder of its own: a config reads ./runspecs beside it too, where (d) leaves another bench_audio
    work = work / "audio_requests"
    work.mkdir(exist_ok=True)
    parquet, generated_s = memory.audio_parquet(N_REQUESTS)
    runspecs = work / "runspecs_audio"
    memory.write_runspec(runspecs, parquet)
    subreaper = _subreaper()
    bodies = _capture_bodies(work, runspecs)
    sizes = [len(b) for b in raw_loop.read_bodies(bodies)]
    raw_runs: list[dict[str, Any]] = []
    evalkit_runs: list[dict[str, Any]] = []
    for _ in range(ROUNDS):  # alternated, so a burst of load on the machine hits both alike
        raw_runs.append(_measure_raw(work, bodies))
        evalkit_runs.append(_measure_evalkit(work, runspecs))
    for r in raw_runs + evalkit_runs:
        if r["completed"] != N_REQUESTS:
            raise RuntimeError(f"(f) expected {N_REQUESTS} answered requests, got {r['completed']}")
    raw, evalkit = _median(raw_runs), _median(evalkit_runs)
    result = {
        "n_requests": N_REQUESTS,
        "concurrency": CONCURRENCY,
        "rounds": ROUNDS,
        "clip_seconds": memory.SECONDS,
        "body_bytes_mean": sum(sizes) / len(sizes),
        "generated_s": generated_s,
        "subreaper": subreaper,
        "raw": raw,
        "evalkit": evalkit,
        "ratio_phase": evalkit["rps_phase"] / raw["rps_phase"],
        "cpu_us_per_request_raw": raw["cpu_s"] / N_REQUESTS * 1e6,
        "cpu_us_per_request_evalkit": evalkit["cpu_s"] / N_REQUESTS * 1e6,
        "cpu_us_per_request_evalkit_main": evalkit["main_cpu_s"] / N_REQUESTS * 1e6,
    }
    print(
        f"  (f) audio requests ({memory.SECONDS} s clips, {result['body_bytes_mean'] / 1024:.0f} KiB bodies, "
        f"{CONCURRENCY} in flight): evalkit {evalkit['rps_phase']:,.0f} req/s vs raw {raw['rps_phase']:,.0f} = "
        f"{result['ratio_phase']:.2f}x; client CPU per request {result['cpu_us_per_request_evalkit']:,.0f} µs "
        f"(main process {result['cpu_us_per_request_evalkit_main']:,.0f}) vs raw "
        f"{result['cpu_us_per_request_raw']:,.0f} µs (medians of {ROUNDS})",
        flush=True,
    )
    return result

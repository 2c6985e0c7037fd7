"""The serve benchmark's own instruments: the ideal batching server and the CPU count of a process tree.

Both decide figures in BENCHMARKS.md (the ceiling at 8 in flight; waiting for vLLM to go idle),
so they are tested as real processes, like the servers they measure.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from benchmarks.serve_throughput import _cpu_seconds, _settle

ROOT = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture()
def ideal_server() -> Any:
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    command = [
        sys.executable,
        "-m",
        "benchmarks.ideal_server",
        "--port",
        str(port),
        "--max-batch",
        "4",
        "--window-ms",
        "2000",
    ]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, "the ideal server did not start"
        time.sleep(0.1)
    yield url
    proc.terminate()
    proc.wait(10)


async def _ask(url: str, n: int) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(timeout=30) as client:
        body = {"model": "m", "max_tokens": 7, "messages": [{"role": "user", "content": "hi"}]}
        replies = await asyncio.gather(*(client.post(url + "/v1/chat/completions", json=body) for _ in range(n)))
    return [r.json() for r in replies]


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
def test_the_ideal_server_answers_in_full_batches_each_taking_the_seconds_it_was_given(ideal_server: str) -> None:
    assert httpx.post(ideal_server + "/_batch_seconds", json={"seconds": 0.3}).json() == {"seconds": 0.3}
    answers = asyncio.run(_ask(ideal_server, 8))
    assert [a["usage"]["completion_tokens"] for a in answers] == [7] * 8
    assert httpx.get(ideal_server + "/_stats").json()["batch_sizes"] == {"4": 2}  # 8 waiting, batches of 4

    # fewer than a batch wait the window (2 s here, so a slow machine still fills the first two), then run as one
    asyncio.run(_ask(ideal_server, 3))
    assert httpx.get(ideal_server + "/_stats").json()["batch_sizes"] == {"4": 2, "3": 1}


def test_cpu_seconds_count_a_busy_grandchild_and_settle_waits_for_it_to_go_idle() -> None:
    # an engine whose child's child burns 0.4 s of CPU, then sleeps: vLLM's layout (server, engine core, worker)
    burn = "import time\nwhile time.process_time() < 0.4: pass\ntime.sleep(60)"
    spawn = "import subprocess, sys; subprocess.run([sys.executable, *sys.argv[1:]])"
    command = [sys.executable, "-c", spawn, "-c", spawn, "-c", burn]
    shell = subprocess.Popen(command, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while _cpu_seconds(shell.pid) < 0.35:
            assert time.monotonic() < deadline, "the grandchild's CPU was not counted"
            time.sleep(0.1)
        assert _settle([shell.pid], limit=30) < 30  # idle once it sleeps
        before = _cpu_seconds(shell.pid)
        time.sleep(0.3)
        assert _cpu_seconds(shell.pid) - before < 0.05
    finally:
        os.killpg(shell.pid, signal.SIGKILL)
        shell.wait(10)

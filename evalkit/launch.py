"""Model servers evalkit starts itself: ``launch:`` blocks in config.yaml.

For each model entry with a ``launch`` block, evalkit picks a free loopback
port, starts the server (vLLM's OpenAI server, or ``evalkit serve`` with a
local backend), waits for ``/health``, points the entry's ``url`` at it, and
stops it by its process id when the run ends: normally, on an error, or on
Ctrl-C. Each server runs in its own process group so workers it spawned
(vLLM starts several) are stopped with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from evalkit.config import ModelInfo
from evalkit.errors import UserError
from evalkit.plan import Plan

log = logging.getLogger("evalkit")


class LaunchError(UserError):
    """A server evalkit was asked to start did not come up."""


@dataclass
class LaunchedServer:
    model: str
    process: subprocess.Popen[bytes]
    url: str
    log_path: Path

    @property
    def pid(self) -> int:
        return self.process.pid


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_command(info: ModelInfo, port: int) -> list[str]:
    launch = info.launch
    assert launch is not None
    if launch.backend == "vllm":
        return [
            sys.executable, "-m", "vllm.entrypoints.openai.api_server",
            "--model", str(launch.model_path), "--served-model-name", info.model,
            "--host", "127.0.0.1", "--port", str(port), *launch.args,
        ]
    command = [sys.executable, "-m", "evalkit.serve", "--backend", str(launch.backend), "--model-id", info.model,
               "--host", "127.0.0.1", "--port", str(port)]
    if launch.model_path:
        command += ["--model", launch.model_path]
    return command + list(launch.args)


async def _wait_healthy(server: LaunchedServer, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    health = server.url.removesuffix("/v1") + "/health"
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            if server.process.poll() is not None:
                raise LaunchError(
                    f"models: {server.model}: the server exited with code {server.process.returncode} before it was ready; "
                    f"its output:\n{_tail(server.log_path)}"
                )
            with contextlib.suppress(aiohttp.ClientError, asyncio.TimeoutError, OSError):
                async with session.get(health, timeout=aiohttp.ClientTimeout(total=2)) as response:
                    if response.status == 200:
                        return
            await asyncio.sleep(0.25)
    raise LaunchError(f"models: {server.model}: no healthy server at {health} within {timeout:g} s (launch.startup_timeout); output:\n{_tail(server.log_path)}")


def _tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no output)"


def stop_server(server: LaunchedServer, grace: float = 10.0) -> None:
    """SIGTERM the server's process group, then SIGKILL what is left after ``grace`` seconds."""
    process = server.process
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=grace)
    # workers of the group may outlive the leader
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def _start(info: ModelInfo, log_dir: Path) -> LaunchedServer:
    assert info.launch is not None
    port = free_port()
    command = server_command(info, port)
    log_path = log_dir / f"server-{info.name.replace('/', '_')}-{port}.log"
    env = {**os.environ, **info.launch.env}
    with log_path.open("wb") as handle:
        process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    log.info("started %s for %s (pid %d) on port %d", info.launch.backend, info.name, process.pid, port)
    return LaunchedServer(model=info.name, process=process, url=f"http://127.0.0.1:{port}/v1", log_path=log_path)


@contextlib.asynccontextmanager
async def launched_servers(plan: Plan, log_dir: Path | None = None) -> AsyncIterator[list[LaunchedServer]]:
    """Start every ``launch:`` server of the plan, point its model at it, stop them all at the end."""
    entries = [info for model in plan.models.values() for info in model.replicas if info.launch is not None]
    if not entries:
        yield []
        return
    log_dir = log_dir or Path(tempfile.mkdtemp(prefix="evalkit-servers-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    servers: list[LaunchedServer] = []
    try:
        for info in entries:
            servers.append(_start(info, log_dir))
        await asyncio.gather(*(_wait_healthy(s, info.launch.startup_timeout) for s, info in zip(servers, entries)))  # type: ignore[union-attr]
        for server, info in zip(servers, entries):
            info.url = server.url
        yield servers
    finally:
        for server in servers:
            stop_server(server)

"""Model servers evalkit starts itself: ``launch:`` blocks in config.yaml.

For each model entry with a ``launch`` block, evalkit starts the server
(vLLM's OpenAI server, or ``evalkit serve`` with a local backend) on a
loopback port, waits for ``/health``, checks that the server on that port is
the one it started (``/v1/models`` lists the entry's model id), points the
entry's ``url`` at it, and stops it by its process group when the run ends:
normally, on an error, on Ctrl-C or on SIGTERM/SIGHUP. An entry whose
``launch`` has ``ray:`` gets its servers as replicas on a Ray cluster
instead (:mod:`evalkit.serve.ray_launch`), started and stopped here too.

Why the details:

- ``evalkit serve`` picks its own port (``--port 0 --port-file``), so no
  other process can take the port between "found free" and "bound". vLLM
  cannot do that; it gets a port found free just before, and is started again
  on another port if it loses that race ("address already in use").
- Each server runs in its own session, hence its own process group: Ctrl-C
  in a terminal reaches evalkit only (which then stops the server in order),
  and stopping the group also stops the workers a server spawned (vLLM runs
  an API server, an engine core and a worker).
- On Linux the server is started with a parent-death signal (SIGTERM), so
  even a SIGKILLed evalkit does not leave a server behind.
- A server's output reaches its log through a pipe, with the entry's secrets
  masked as it is written (``--api-key K`` echoed back in an argument error
  shows as ``***``); the model's name is made a safe file name first.
- Every server writes ``server-<model>-<pid>.log`` and a ``.json`` beside it
  (pid, port, url, command with secrets masked, seconds to ready, exit code or
  signal, whether anything was left that needed SIGKILL, why it stopped) in the
  log folder: ``<output_dir>/server-logs`` while the servers start, then the
  run's own ``<run>/server-logs`` (moved there once the run's folder is known),
  so a copied run folder says which process served it.
- While the run uses it, each server is watched (:mod:`evalkit.serve.health`):
  one whose process exits or that leaves /health unanswered for
  ``launch.health_interval`` seconds is taken out of its model's rotation (what
  was in flight there is sent again to another replica at once), stopped, and
  started again, at most ``LOCAL_MAX_RESTARTS`` times.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalkit.config import ModelInfo
from evalkit.errors import UserError
from evalkit.plan import Plan
from evalkit.serve.health import ClientLink, signal_name, stops_answering
from evalkit.serve.server_setup import (
    ADDRESS_IN_USE,
    PORT_CHOSEN_BY_EVALKIT,
    PORT_RETRIES,
    STOP_GRACE,
    LaunchError,
    answers,
    env_changes,
    launch_secrets,
    masked_command,
    server_command,
)
from evalkit.serve.signals import signal_group, stop_on_signals
from evalkit.util.atomic import write_json_atomic
from evalkit.util.redact import StreamScrubber, scrub
from evalkit.util.safe_names import safe_path

if TYPE_CHECKING:
    import aiohttp

    from evalkit.serve.ray_launch import RayReplicaSet

log = logging.getLogger("evalkit")

#: arguments evalkit sets itself; in ``launch.args`` they would point evalkit at the wrong place
_RESERVED_ARGS = ("--host", "--port", "--port-file")

# Runs in the server's process before the server itself: asks Linux to send
# SIGTERM when evalkit's thread that started it dies (also by SIGKILL), then
# becomes the server (exec keeps the pid, the session and the setting).
_PDEATHSIG_SHIM = (
    "import ctypes, os, signal, sys\n"
    "ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)\n"  # 1 = PR_SET_PDEATHSIG
    "if os.getppid() != int(sys.argv[1]):\n"  # evalkit died before prctl: do not start at all
    "    os._exit(143)\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)


@dataclass
class LaunchedServer:
    """One server process evalkit started, and what it knows about it."""

    model: str
    backend: str
    process: subprocess.Popen[bytes]
    log_path: Path
    command: list[str]
    secrets: list[str] = field(default_factory=list, repr=False)
    port: int | None = None
    port_file: Path | None = None
    started: float = field(default_factory=time.monotonic)
    started_at: str = field(default_factory=lambda: dt.datetime.now().isoformat(timespec="seconds"))
    ready_seconds: float | None = None
    #: the thread copying the server's output into its log, secrets masked (None: the server writes it itself)
    pump: threading.Thread | None = field(default=None, repr=False)
    stopped_at: str | None = None
    returncode: int | None = None
    stop_seconds: float | None = None
    killed: bool = False
    #: why evalkit took it out of the run before the run's end (it exited, or stopped answering /health)
    lost: str | None = None
    #: why it stopped, for results.json: lost, not ready, or the run's end
    stop_reason: str | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def url(self) -> str:
        """Base URL of the OpenAI API (``.../v1``); empty until the port is known."""
        return f"http://127.0.0.1:{self.port}/v1" if self.port else ""

    @property
    def info_path(self) -> Path:
        return self.log_path.with_suffix(".json")

    def describe(self) -> dict[str, Any]:
        """What a results file or a person needs to find this server again (no secrets)."""
        return {
            "model": self.model,
            "backend": self.backend,
            "pid": self.pid,
            "pgid": self.pid,
            "port": self.port,
            "url": self.url or None,
            "command": masked_command(self.command, self.secrets),
            "log": str(self.log_path),
            "started": self.started_at,
            "ready_seconds": self.ready_seconds,
            "stopped": self.stopped_at,
            "returncode": self.returncode,
            "signal": signal_name(self.returncode),
            "stop_seconds": self.stop_seconds,
            "killed": self.killed,
            "lost": self.lost,
            "stop_reason": self.stop_reason,
        }

    def write_info(self) -> None:
        with contextlib.suppress(OSError):
            write_json_atomic(self.info_path, self.describe())

    def tail(self, lines: int = 25) -> str:
        if self.pump is not None and self.process.poll() is not None:
            self.pump.join(timeout=2.0)  # the server is gone: let its last words reach the log first
        return scrub(_tail(self.log_path, lines), self.secrets)


def _tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no output)"
    return "\n".join(text[-lines:]) if text else "(no output)"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _check_args(info: ModelInfo) -> None:
    """Arguments evalkit sets itself may not be given again: the server would listen or answer elsewhere."""
    assert info.launch is not None
    vllm = info.launch.backend == "vllm"
    owned = {
        **dict.fromkeys(_RESERVED_ARGS, "is chosen by evalkit (a free loopback port)"),
        "--model": "comes from launch.model_path",
        ("--served-model-name" if vllm else "--model-id"): "comes from the entry's `model` (the id evalkit sends)",
    }
    if info.launch.backend == "transformers-serve":
        owned["--model"] = "is not an option of transformers serve: launch.model_path is what it loads"
    if info.launch.backend == "test-server":
        owned["--model"] = "comes from the entry's `model` (the id evalkit sends)"
    for arg in info.launch.args:
        name = arg.split("=", 1)[0]
        if name in owned:
            raise LaunchError(f"models: {info.name}: launch.args: {name} {owned[name]}; remove it")


def _child_env(info: ModelInfo) -> dict[str, str]:
    assert info.launch is not None
    env = dict(os.environ)
    if info.launch.backend not in ("vllm", "transformers-serve"):
        # `python -m evalkit.serve` must import this evalkit, also from a source folder that is not installed
        # (an installed one is found anyway; its site-packages must not go ahead of the standard library)
        package_root = str(Path(__file__).resolve().parent.parent)
        paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        if package_root not in paths and package_root not in _site_dirs():
            env["PYTHONPATH"] = os.pathsep.join([package_root, *paths])
    defaults, overrides, unset = env_changes(info)
    for name in unset:
        env.pop(name, None)
    return {**defaults, **env, **overrides}


def _site_dirs() -> set[str]:
    import site
    import sysconfig

    dirs = [*site.getsitepackages(), site.getusersitepackages(), *sysconfig.get_paths().values()]
    return {str(Path(d).resolve()) for d in dirs if d}


def _pump_masked(source: Any, log_path: Path, secrets: list[str]) -> None:
    """Copy the server's output into its log as it comes, secrets masked (a server may echo its arguments)."""
    scrubber = StreamScrubber(secrets)
    fd = source.fileno()
    try:
        with log_path.open("ab") as sink:
            while chunk := os.read(fd, 65536):
                sink.write(scrubber.feed(chunk))
                sink.flush()
            sink.write(scrubber.close())
    except OSError as error:
        log.warning("%s: cannot write the server's output: %s", log_path, error)
    finally:
        with contextlib.suppress(OSError):
            source.close()


def _start(info: ModelInfo, log_dir: Path) -> LaunchedServer:
    """Start one server (does not wait for it). Call from the thread that lives as long as the run."""
    assert info.launch is not None
    backend = str(info.launch.backend)
    own_port = backend in PORT_CHOSEN_BY_EVALKIT
    port_file = None if own_port else log_dir / f".port-{uuid.uuid4().hex}"
    port = free_port() if own_port else None
    command = server_command(info, port, port_file)
    argv = command
    if sys.platform.startswith("linux"):
        argv = [sys.executable, "-c", _PDEATHSIG_SHIM, str(os.getpid()), *command]
    secrets = launch_secrets(info)
    starting = log_dir / f".starting-{uuid.uuid4().hex}.log"
    starting.touch()
    try:
        # the output goes through a pipe, so what the server echoes of its secrets is masked before it is written
        process = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=_child_env(info),
            start_new_session=True,
        )
    except OSError as error:
        starting.unlink(missing_ok=True)
        raise LaunchError(f"models: {info.name}: cannot start {command[0]}: {error}") from None
    try:
        log_path = safe_path(log_dir, f"server-{info.name}-{process.pid}", suffix=".log")
    except UserError:
        os.killpg(process.pid, signal.SIGKILL)  # its own session: the group is the server alone
        process.wait()
        starting.unlink(missing_ok=True)
        raise
    os.replace(starting, log_path)
    pump = threading.Thread(
        target=_pump_masked, args=(process.stdout, log_path, secrets), name=f"server-log-{process.pid}", daemon=True
    )
    pump.start()
    server = LaunchedServer(
        model=info.name,
        backend=backend,
        process=process,
        log_path=log_path,
        command=command,
        secrets=secrets,
        port=port,
        port_file=port_file,
        pump=pump,
    )
    server.write_info()
    log.info("started %s for %s (pid %d), log %s", backend, info.name, process.pid, log_path)
    return server


def _exited_message(server: LaunchedServer) -> str:
    return (
        f"models: {server.model}: the {server.backend} server exited with code {server.process.returncode} "
        f"before it was ready (log {server.log_path}); its output ends with:\n{server.tail()}"
    )


async def _wait_ready(server: LaunchedServer, model_id: str, timeout: float, auth_token: str | None = None) -> None:
    """Wait for the port (evalkit serve reports it), then /health 200, then our model id in /v1/models."""
    import aiohttp  # here, not at the top: a run without launch: blocks never needs it (~90 ms of start-up)

    deadline = server.started + timeout
    # [serve safety] /v1/models wants the key on a server started with one (evalkit serve, vLLM --api-key)
    headers = {"Authorization": f"Bearer {auth_token}"} if auth_token else None
    async with aiohttp.ClientSession(headers=headers) as session:
        while time.monotonic() < deadline:
            if server.process.poll() is not None:
                raise LaunchError(_exited_message(server))
            if server.port is None and server.port_file is not None:
                with contextlib.suppress(OSError, ValueError):
                    server.port = int(server.port_file.read_text().strip())
            if server.port is not None and await _answers(session, server, model_id):
                server.ready_seconds = round(time.monotonic() - server.started, 3)
                server.write_info()
                log.info(
                    "%s server for %s ready at %s after %.1f s",
                    server.backend,
                    server.model,
                    server.url,
                    server.ready_seconds,
                )
                return
            await asyncio.sleep(0.25)
    where = f"at {server.url}" if server.port else "(it reported no port)"
    raise LaunchError(
        f"models: {server.model}: no healthy {server.backend} server {where} within {timeout:g} s "
        f"(launch.startup_timeout; log {server.log_path}); its output ends with:\n{server.tail()}"
    )


async def _answers(session: aiohttp.ClientSession, server: LaunchedServer, model_id: str) -> bool:
    return await answers(session, server.url, server.backend, model_id, server.model, f"on port {server.port}")


async def _start_ready(info: ModelInfo, log_dir: Path, servers: list[LaunchedServer]) -> LaunchedServer:
    """Start ``info``'s server and wait for it; vLLM is started again on a new port if it lost the port race."""
    assert info.launch is not None
    for attempt in range(PORT_RETRIES + 1):
        server = _start(info, log_dir)
        servers.append(server)
        try:
            await _wait_ready(server, info.model, info.launch.startup_timeout, info.auth_token)
            return server
        except LaunchError:
            server.stop_reason = "it did not become ready"
            lost_port = (
                server.port_file is None
                and server.process.poll() is not None
                and ADDRESS_IN_USE.search(server.tail(60))
            )
            if not lost_port or attempt == PORT_RETRIES:
                raise
            log.warning(
                "models: %s: port %s was taken before vLLM bound it; starting it again on another port",
                info.name,
                server.port,
            )
            stop_servers([server])
    raise AssertionError("unreachable")


def group_members(pgid: int) -> list[int] | None:
    """Live (not zombie) processes of process group ``pgid``, from /proc; None where there is no /proc."""
    proc = Path("/proc")
    if not (proc / "self" / "stat").exists():
        return None
    members = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # gone meanwhile
            continue
        fields = stat[stat.rfind(")") + 2 :].split()  # after "pid (comm) ": state ppid pgrp ...
        if len(fields) > 2 and fields[0] not in ("Z", "X") and fields[2] == str(pgid):
            members.append(int(entry.name))
    return members


def _group_alive(server: LaunchedServer) -> bool:
    server.process.poll()  # reap the leader, or its zombie keeps the group "alive"
    members = group_members(server.pid)
    if members is not None:  # zombies of orphaned workers are not "alive": they cannot be stopped anyway
        return bool(members)
    return signal_group(server, 0)


def stop_servers(servers: list[LaunchedServer], grace: float = STOP_GRACE, why: str = "the run ended") -> None:
    """SIGTERM every server's group at once, wait up to ``grace`` seconds for all, SIGKILL what is left.

    A stopped (SIGSTOP) server gets SIGCONT after its SIGTERM, so it can end as any other. A second Ctrl-C
    while waiting skips the wait, never the SIGKILL.
    """
    running = [s for s in servers if s.stopped_at is None]
    begun = time.monotonic()
    for server in running:
        server.stop_reason = server.stop_reason or why
        signal_group(server, signal.SIGTERM)
        signal_group(server, signal.SIGCONT)
    try:
        deadline = begun + grace
        while time.monotonic() < deadline and any(_group_alive(s) for s in running):
            time.sleep(0.05)
    finally:
        for server in running:
            if _group_alive(server):
                server.killed = True
                log.warning(
                    "models: %s: the %s server (pid %d) did not stop within %g s; killed",
                    server.model,
                    server.backend,
                    server.pid,
                    grace,
                )
                signal_group(server, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                server.process.wait(timeout=5)
            if server.pump is not None:
                server.pump.join(timeout=2.0)  # the log gets the server's last words
            server.returncode = server.process.returncode
            server.stop_seconds = round(time.monotonic() - begun, 3)
            server.stopped_at = dt.datetime.now().isoformat(timespec="seconds")
            if server.port_file is not None:
                server.port_file.unlink(missing_ok=True)
            server.write_info()


#: times a local server that exited or stopped answering is started again during one run
LOCAL_MAX_RESTARTS = 3


class _LocalWatch:
    """One local ``launch:`` entry's server during the run: replaced when it exits or stops answering /health."""

    def __init__(self, info: ModelInfo, server: LaunchedServer, servers: LaunchedServers) -> None:
        self.info = info
        self.server = server
        self.servers = servers
        self.restarts = 0
        self.link = ClientLink()

    async def run(self) -> None:
        import aiohttp

        assert self.info.launch is not None
        interval = self.info.launch.health_interval
        token = self.info.auth_token
        async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"} if token else None) as session:
            while True:
                why = await _lost(self.server, session, interval, self.link)
                if why is None or not await self._replace(why):
                    return

    async def _replace(self, why: str) -> bool:
        """Take the server out, stop it, start its successor; False when none comes (the run goes on without)."""
        server = self.server
        server.lost = why
        again = self.restarts < LOCAL_MAX_RESTARTS
        self.link.retire(server.url, replacing=again)
        log.error(
            "models: %s: the %s server (pid %d, %s) was taken out of the run: %s; its output ends with:\n%s",
            server.model,
            server.backend,
            server.pid,
            server.url,
            why,
            server.tail(),
        )
        await asyncio.to_thread(stop_servers, [server], STOP_GRACE, f"taken out of the run: {why}")
        if not again:
            log.error(
                "models: %s: the server is not started again (it was, %d times); the run goes on with the replicas "
                "left",
                server.model,
                LOCAL_MAX_RESTARTS,
            )
            return False
        self.restarts += 1
        try:
            fresh = await _start_ready(self.info, self.servers.log_dir, self.servers)
        except LaunchError as error:
            log.error("models: %s: the server could not be started again: %s", server.model, error)
            self.link.replacement_failed()
            return False
        self.server = fresh
        self.link.add(fresh.url)
        log.warning(
            "models: %s: %s server started again at %s (restart %d of at most %d)",
            server.model,
            server.backend,
            fresh.url,
            self.restarts,
            LOCAL_MAX_RESTARTS,
        )
        return True


async def _lost(
    server: LaunchedServer, session: aiohttp.ClientSession, interval: float, link: ClientLink
) -> str | None:
    """Why ``server`` left the run (its process exited, it stopped answering); None once evalkit stopped it."""
    url = server.url
    health = asyncio.ensure_future(stops_answering(session, url, interval, lambda: link.answered(url)))
    try:
        while not health.done():
            if server.stopped_at is not None:
                return None
            code = server.process.poll()
            if code is not None:
                ended = f"signal {signal_name(code)}" if code < 0 else f"code {code}"
                return f"its process exited with {ended} during the run"
            await asyncio.wait([health], timeout=min(0.25, interval / 2))
        return health.result()
    finally:
        health.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await health


class LaunchedServers(list[LaunchedServer]):
    """The servers a run started on this machine (the list), and its replica sets on a Ray cluster beside it.

    Only local servers are in the list: what ends evalkit at once (a second
    signal) kills their process groups by pid, which would mean nothing, or
    someone else's processes, for a pid on another node.
    """

    def __init__(self, log_dir: Path | None = None) -> None:
        super().__init__()
        self.replica_sets: list[RayReplicaSet] = []
        #: where server logs go: the output folder's ``server-logs`` until the run's folder is known
        self.log_dir = log_dir or Path(tempfile.mkdtemp(prefix="evalkit-servers-"))
        self.watches: list[_LocalWatch] = []

    def attach(self, clients: Mapping[str, Any]) -> None:
        """Hand each watched server its model's client, so servers that are lost or join mid-run reach it."""
        for watch in self.watches:
            client = clients.get(watch.info.name)
            if client is not None:
                watch.link.attach(client)
        for replica_set in self.replica_sets:
            client = clients.get(replica_set.info.name)
            if client is not None:
                replica_set.attach(client)

    def move_logs(self, log_dir: Path) -> None:
        """The servers' logs go into the run's own folder (``<run>/server-logs``), now and for later servers.

        The servers start before the run's folder is chosen; their logs are moved, not copied (a log's
        writer keeps its open file), and a log that cannot be moved (another filesystem) stays where it is.
        """
        try:
            log_dir.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            log.warning("%s: cannot make the folder for the server logs: %s", log_dir, error)
            return
        for server in self:
            try:
                os.replace(server.log_path, log_dir / server.log_path.name)
            except OSError as error:
                log.warning("%s: the server log stays there: %s", server.log_path, error)
                continue
            with contextlib.suppress(OSError):
                server.info_path.unlink()
            server.log_path = log_dir / server.log_path.name
            server.write_info()
        self.log_dir = log_dir
        for replica_set in self.replica_sets:
            replica_set.log_dir = log_dir

    def describe(self) -> list[dict[str, Any]]:
        """Every server of the run, local and on the cluster, for results.json."""
        return [server.describe() for server in self] + [
            described for replica_set in self.replica_sets for described in replica_set.describe()
        ]


@contextlib.asynccontextmanager
async def launched_servers(plan: Plan, log_dir: Path | None = None) -> AsyncIterator[LaunchedServers]:
    """Start every ``launch:`` server of the plan, point its model at it, stop them all at the end.

    Entries with ``launch.ray`` get their replicas on the Ray cluster (see
    :mod:`evalkit.serve.ray_launch`); the others one server on loopback.
    A SIGTERM or SIGHUP while the servers run ends the run with SystemExit(128 + signal)
    after the servers are stopped.
    """
    entries = [info for model in plan.models.values() for info in model.replicas if info.launch is not None]
    servers = LaunchedServers(log_dir)
    if not entries:
        yield servers
        return
    for info in entries:
        _check_args(info)
    local = [info for info in entries if info.launch is not None and info.launch.ray is None]
    remote = [info for info in entries if info.launch is not None and info.launch.ray is not None]
    connection = None
    if remote:
        from evalkit.serve.ray_launch import RayConnection, RayReplicaSet, require_ray

        require_ray(remote)  # before anything starts: a missing extra is one message, exit 2
        connection = RayConnection()
    log_dir = servers.log_dir
    log_dir.mkdir(parents=True, exist_ok=True)
    watchers: list[asyncio.Future[None]] = []
    with stop_on_signals(servers) as received:
        try:
            if connection is not None:
                servers.replica_sets = [RayReplicaSet(info, log_dir, connection) for info in remote]
            starting: list[asyncio.Future[Any]] = [
                asyncio.ensure_future(_start_ready(info, log_dir, servers)) for info in local
            ]
            starting += [asyncio.ensure_future(replica_set.start()) for replica_set in servers.replica_sets]
            try:
                done, _ = await asyncio.wait(starting, return_when=asyncio.FIRST_EXCEPTION)
                for future in done:
                    future.result()  # the first launch error, if any
                ready = [future.result() for future in starting[: len(local)]]
            finally:
                for future in starting:
                    future.cancel()
                await asyncio.gather(*starting, return_exceptions=True)
            for server, info in zip(ready, local):
                info.url = server.url
                if server.backend == "transformers-serve" and info.launch is not None:
                    # it answers only requests that name the model it was started with
                    info.model = str(info.launch.model_path)
                servers.watches.append(_LocalWatch(info, server, servers))
            for replica_set in servers.replica_sets:
                replica_set.info.url = replica_set.urls
                if replica_set.backend == "transformers-serve" and replica_set.info.launch is not None:
                    replica_set.info.model = str(replica_set.info.launch.model_path)
                watchers.append(asyncio.ensure_future(replica_set.watch()))
            watchers += [asyncio.ensure_future(watch.run()) for watch in servers.watches]
            yield servers
        except asyncio.CancelledError:
            if received:
                raise SystemExit(128 + received[0]) from None
            raise
        finally:
            for watcher in watchers:
                watcher.cancel()
            await asyncio.gather(*watchers, return_exceptions=True)
            try:
                stop_servers(servers)
            finally:
                for replica_set in servers.replica_sets:
                    await replica_set.stop()
                if connection is not None:
                    connection.close()

"""``launch.ray``: replicas of a launched server on an existing Ray cluster, through Ray's own APIs.

For a model entry whose ``launch`` block has ``ray:``, evalkit connects to the
cluster (``ray.init``), reserves one placement-group bundle of
``resources_per_replica`` per replica (strategy SPREAD by default, so
replicas go to different nodes as far as they fit), and in each bundle runs
an actor (:class:`evalkit.serve.ray_actor.ServerProcess`) that starts the
same server command a local launch would, bound to its node's address on a
port free there. Each replica must answer ``/health`` and list the entry's
model id in ``/v1/models`` before the run starts; their URLs become the
entry's replicas, so the model client shares the work among them as among
any replicas.

During the run a watcher keeps one pending ``wait_exit`` call per replica
(it returns when the server exits, and fails when the actor or its node
dies) and asks ``/health`` every half of ``launch.health_interval``
(:mod:`evalkit.serve.health`). A replica that died or went the whole interval
without answering is taken out of the model's client at once (no sample
spends its retries on it; what was in flight there is sent again to another
replica at once, not after its timeout),
its actor is killed, and a new one is started in the same bundle
(``max_restarts`` times per replica); once it answers, its URL joins the
client. At the end, and after Ctrl-C or an error, every server gets SIGTERM
(then SIGKILL), every actor is killed and the placement group removed; a
driver that dies outright takes its actors along (Ray ends a job's actors
with it), and each server dies with its actor (parent-death signal).

Each replica's log is written on its node, secrets masked; when a replica
stops, its last megabyte is copied into the run's ``server-logs`` folder
with a ``.json`` beside it (node, pid, port, url, command with secrets
masked, exit code), and removed from the node if it fit.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import functools
import logging
import os
import re
import signal
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.config import ModelInfo, RayLaunch
from evalkit.errors import UserError
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
from evalkit.util.atomic import write_json_atomic
from evalkit.util.redact import MASK, scrub, secret_forms
from evalkit.util.safe_names import safe_path

log = logging.getLogger("evalkit")

#: what a user installs for ``launch.ray``
RAY_EXTRA = "pip install 'evalkit[ray]'"
#: seconds the watcher waits before looking again after it failed (a watcher that died would miss every death)
WATCH_RETRY = 2.0
#: bytes of a replica's log copied into the run's server-logs folder when it stops
LOG_COPY_BYTES = 1 << 20
#: seconds the cluster's address may take to accept a connection
CONNECT_TIMEOUT = 10.0
#: calls on an actor run at once: the pending wait_exit, and the launcher's questions beside it
ACTOR_CONCURRENCY = 4


def require_ray(entries: list[ModelInfo]) -> None:
    """Ray is importable and every entry names the same cluster; else one message, exit 2, nothing started."""
    try:
        import ray  # noqa: F401
    except ImportError:
        names = ", ".join(info.name for info in entries)
        raise UserError(
            f"models: {names}: launch.ray needs Ray, which is not installed; install the extra: {RAY_EXTRA}"
        ) from None
    addresses = {_address(info) for info in entries}
    if len(addresses) > 1:
        raise UserError(
            f"models: launch.ray names {len(addresses)} clusters ({', '.join(sorted(addresses))}); one run "
            "connects to one Ray cluster: give every launch.ray the same address"
        )


def _spec(info: ModelInfo) -> RayLaunch:
    assert info.launch is not None and info.launch.ray is not None
    return info.launch.ray


def _address(info: ModelInfo) -> str:
    return _spec(info).address or os.environ.get("RAY_ADDRESS") or "auto"


class RayConnection:
    """The run's connection to its cluster: made by the first replica set, ended by the run if it made it."""

    def __init__(self) -> None:
        self.owned = False
        #: ``ray.remote(ServerProcess)``, made once: Ray exports an actor class to the cluster once per class object
        self.actor_class: Any = None

    def connect(self, address: str, model: str) -> None:
        import ray

        from evalkit.serve import ray_actor

        # the actor's module goes to the nodes by value: a node needs the server it runs, not evalkit's launcher
        ray.cloudpickle.register_pickle_by_value(ray_actor)
        if ray.is_initialized():  # inside a Ray job, or a caller's own ray.init: use it and leave it open
            return
        _check_reachable(address, model)
        # ray.init makes SIGTERM exit the process at once; evalkit's own handlers (an orderly stop that marks the
        # run interrupted and stops every server) must stay, so they are put back as they were
        kept = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
        try:
            ray.init(
                address=address,
                namespace="evalkit",
                log_to_driver=False,
                logging_level=logging.WARNING,
                configure_logging=False,
            )
        except (ConnectionError, RuntimeError, ValueError) as error:
            raise LaunchError(
                f"models: {model}: launch.ray: cannot connect to the Ray cluster at {address!r}: {error}. Start "
                "one (`ray start --head`) or give its address in launch.ray.address or RAY_ADDRESS"
            ) from None
        finally:
            if threading.current_thread() is threading.main_thread():
                for sig, handler in kept.items():
                    with contextlib.suppress(TypeError, ValueError, OSError):
                        signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        self.owned = True

    def close(self) -> None:
        if self.owned:
            import ray

            with contextlib.suppress(Exception):
                ray.shutdown()
            self.owned = False


def _check_reachable(address: str, model: str) -> None:
    """A given ``host:port`` must accept a connection within seconds: ``ray.init`` would retry it for minutes."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit() or not host:
        return  # "auto", "local" or a form Ray reads its own way
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT):
            pass
    except OSError as error:
        raise LaunchError(
            f"models: {model}: launch.ray.address {address!r}: nothing answers there ({error}); expected a running "
            "Ray head (`ray start --head` prints its address)"
        ) from None


@dataclass
class RayReplica:
    """One server a replica set started on the cluster, and what is known of it."""

    model: str
    backend: str
    slot: int
    actor: Any = field(repr=False)
    host: str = ""
    pid: int | None = None
    port: int | None = None
    node_id: str = ""
    node_log: str = ""
    command: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    started_at: str = field(default_factory=lambda: dt.datetime.now().isoformat(timespec="seconds"))
    ready_seconds: float | None = None
    stopped_at: str | None = None
    returncode: int | None = None
    stop_seconds: float | None = None
    killed: bool = False
    #: why the run stopped using it before its end (its server exited, its actor died, /health failed)
    lost: str | None = None
    log_path: Path | None = None
    #: the pending ``wait_exit`` call: done when the server exits or the actor dies
    exit_watch: asyncio.Future[Any] | None = field(default=None, repr=False)
    #: done (with why) once the replica went ``launch.health_interval`` without answering /health
    health_watch: asyncio.Future[str] | None = field(default=None, repr=False)
    #: why it stopped, for results.json: lost, not ready, or the run's end
    stop_reason: str | None = None

    @property
    def url(self) -> str:
        if not self.port:
            return ""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    def describe(self, secrets: list[str]) -> dict[str, Any]:
        """What a results file or a person needs to find this replica again (no secrets)."""
        return {
            "model": self.model,
            "backend": self.backend,
            "ray": {"node_id": self.node_id, "node_ip": self.host, "slot": self.slot, "node_log": self.node_log},
            "pid": self.pid,
            "port": self.port,
            "url": self.url or None,
            "command": masked_command(self.command, secrets),
            "log": str(self.log_path) if self.log_path else None,
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


class RayReplicaSet:
    """The replicas of one model entry on the cluster: started, watched, replaced and stopped together."""

    def __init__(self, info: ModelInfo, log_dir: Path, connection: RayConnection) -> None:
        assert info.launch is not None
        self.info = info
        self.spec = _spec(info)
        self.backend = str(info.launch.backend)
        self.log_dir = log_dir
        self.connection = connection
        self.secrets = launch_secrets(info)
        self.replicas: list[RayReplica] = []
        self.restarts = [0] * self.spec.replicas
        #: the model's client: replicas retired and added before it exists are replayed on it
        self.link = ClientLink()
        self._group: Any = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._session: Any = None

    # -- starting ---------------------------------------------------------------------------

    @property
    def urls(self) -> list[str]:
        return [r.url for r in self.replicas if r.lost is None and r.stopped_at is None]

    def _bundle(self) -> dict[str, float]:
        return {name: float(amount) for name, amount in self.spec.resources_per_replica.items() if amount > 0}

    def _command(self) -> list[str]:
        """The server's command with the node's values left as placeholders (filled in by the actor)."""
        own_port = self.backend in PORT_CHOSEN_BY_EVALKIT
        return server_command(
            self.info,
            "{port}" if own_port else None,
            None if own_port else "{port_file}",
            host="{host}",
            python="{python}",
        )

    async def start(self) -> None:
        """Reserve the bundles, start every replica, and wait until each answers (``launch.startup_timeout``)."""
        from ray.util.placement_group import placement_group

        self.connection.connect(_address(self.info), self.info.name)
        import aiohttp

        self._session = aiohttp.ClientSession(
            headers={"Authorization": f"Bearer {self.info.auth_token}"} if self.info.auth_token else None
        )
        assert self.info.launch is not None
        timeout = self.info.launch.startup_timeout
        bundle = self._bundle()
        self._group = placement_group([dict(bundle) for _ in range(self.spec.replicas)], strategy=self.spec.strategy)
        try:
            await asyncio.wait_for(asyncio.wrap_future(self._group.ready().future()), timeout)
        except asyncio.TimeoutError:
            raise LaunchError(self._unplaceable(bundle, timeout)) from None
        started = await asyncio.gather(
            *(self._start_ready(slot, timeout) for slot in range(self.spec.replicas)), return_exceptions=True
        )
        for outcome in started:
            if isinstance(outcome, BaseException):
                raise outcome
        log.info(
            "models: %s: %d %s replica(s) ready on the Ray cluster: %s",
            self.info.name,
            len(self.replicas),
            self.backend,
            ", ".join(self.urls),
        )

    def _unplaceable(self, bundle: dict[str, float], timeout: float) -> str:
        import ray

        with contextlib.suppress(Exception):
            free = {
                k: round(v, 3)
                for k, v in ray.available_resources().items()
                if not k.startswith("node:") and k != "object_store_memory"
            }
            return (
                f"models: {self.info.name}: launch.ray: {self.spec.replicas} replica(s) of {bundle} "
                f"({self.spec.strategy}) could not be placed on the cluster within {timeout:g} s "
                f"(launch.startup_timeout); free there now: {free}. Lower replicas or resources_per_replica, "
                "or add nodes"
            )
        return f"models: {self.info.name}: launch.ray: the replicas could not be placed within {timeout:g} s"

    def _new_actor(self, slot: int) -> Any:
        import ray
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        from evalkit.serve.ray_actor import ServerProcess

        bundle = self._bundle()
        custom = {k: v for k, v in bundle.items() if k not in ("CPU", "GPU", "memory")}
        options: dict[str, Any] = {
            "num_cpus": bundle.get("CPU", 0.0),
            "num_gpus": bundle.get("GPU", 0.0),
            "resources": custom,
            "max_concurrency": ACTOR_CONCURRENCY,
            "scheduling_strategy": PlacementGroupSchedulingStrategy(
                placement_group=self._group, placement_group_bundle_index=slot
            ),
        }
        if "memory" in bundle:
            options["memory"] = bundle["memory"]
        defaults, overrides, unset = env_changes(self.info)
        env = {**defaults, **overrides}  # defaults win over the node's environment too: it is not the user's shell
        label = re.sub(r"[^A-Za-z0-9_.-]", "_", self.info.name)[:60] or "model"
        if self.connection.actor_class is None:
            self.connection.actor_class = ray.remote(ServerProcess)
        forms = sorted({f.encode("utf-8", "surrogatepass") for s in self.secrets for f in secret_forms(s)})
        return self.connection.actor_class.options(**options).remote(
            label, self._command(), env, unset, forms, MASK.encode()
        )

    async def _start_ready(self, slot: int, timeout: float) -> RayReplica:
        """Start the replica of ``slot`` and wait for it; vLLM is started again if its port was taken meanwhile."""
        for attempt in range(PORT_RETRIES + 1):
            replica = RayReplica(model=self.info.name, backend=self.backend, slot=slot, actor=self._new_actor(slot))
            self.replicas.append(replica)
            try:
                await self._wait_ready(replica, timeout)
                return replica
            except LaunchError as error:
                tail = await self._tail(replica, 60)
                lost_port = replica.returncode is not None and ADDRESS_IN_USE.search(tail)
                await asyncio.to_thread(self._stop_one, replica, "it did not become ready")
                if not lost_port or attempt == PORT_RETRIES:
                    if replica.log_path is not None:
                        raise LaunchError(f"{error}\n(its whole log: {replica.log_path})") from None
                    raise
                log.warning(
                    "models: %s: port %s on %s was taken; starting again", self.info.name, replica.port, replica.host
                )
        raise AssertionError("unreachable")

    async def _call(self, method: Any, *args: Any, timeout: float = 30.0) -> Any:
        return await asyncio.wait_for(asyncio.wrap_future(method.remote(*args).future()), timeout)

    async def _wait_ready(self, replica: RayReplica, timeout: float) -> None:
        deadline = replica.started + timeout
        try:
            where = await asyncio.wait_for(
                asyncio.wrap_future(replica.actor.start.remote().future()), max(1.0, deadline - time.monotonic())
            )
        except asyncio.TimeoutError:
            raise LaunchError(
                f"models: {self.info.name}: launch.ray: replica {replica.slot}'s actor did not start within "
                f"{timeout:g} s (launch.startup_timeout)"
            ) from None
        except Exception as error:  # the actor died, or could not start the command
            # Ray's text holds the remote traceback; its last line is what happened
            said = (str(error).strip().splitlines() or [type(error).__name__])[-1]
            raise LaunchError(f"models: {self.info.name}: launch.ray: replica {replica.slot}: {said}") from None
        replica.host, replica.pid, replica.port = where["host"], where["pid"], where["port"]
        replica.node_id, replica.node_log, replica.command = where["node_id"], where["log"], where["command"]
        replica.exit_watch = asyncio.wrap_future(replica.actor.wait_exit.remote().future())
        replica.exit_watch.add_done_callback(_retrieved)  # an actor killed at the end fails it: that is no news
        while time.monotonic() < deadline:
            if replica.exit_watch.done():
                replica.returncode = _exit_code(replica.exit_watch)
                tail = await self._tail(replica)
                ended = (
                    f"exited with code {replica.returncode}"
                    if replica.returncode is not None
                    else "lost its actor (it or its node died)"
                )
                raise LaunchError(
                    f"models: {self.info.name}: the {self.backend} server of Ray replica {replica.slot} on "
                    f"{replica.host} {ended} before it was ready; its output ends with:\n{tail}"
                )
            if replica.port is None:
                with contextlib.suppress(Exception):
                    replica.port = await self._call(replica.actor.bound_port, timeout=10.0)
            if replica.port is not None and await answers(
                self._session, replica.url, self.backend, self.info.model, self.info.name, f"at {replica.url}"
            ):
                replica.ready_seconds = round(time.monotonic() - replica.started, 3)
                log.info(
                    "models: %s: Ray replica %d ready at %s after %.1f s",
                    self.info.name,
                    replica.slot,
                    replica.url,
                    replica.ready_seconds,
                )
                return
            await asyncio.sleep(0.25)
        tail = await self._tail(replica)
        reach = (
            f"; evalkit sends its requests to the nodes directly: can this machine reach {replica.host}?"
            if replica.port
            else ""
        )
        raise LaunchError(
            f"models: {self.info.name}: no healthy {self.backend} server from Ray replica {replica.slot} "
            f"({replica.url or 'no port yet'}) within {timeout:g} s (launch.startup_timeout{reach}); its output "
            f"ends with:\n{tail}"
        )

    async def _tail(self, replica: RayReplica, lines: int = 25) -> str:
        try:
            text = await self._call(replica.actor.tail, lines, timeout=10.0)
        except Exception:
            return "(its actor is gone; no output to show)"
        return scrub(str(text), self.secrets)

    # -- during the run ---------------------------------------------------------------------

    def attach(self, client: Any) -> None:
        """The model client the run built from :attr:`urls`: replicas that die or join from now on go to it."""
        self.link.attach(client)

    async def watch(self) -> None:
        """Until cancelled: replace every replica whose server exits, whose actor dies, or that stops answering."""
        while True:
            try:
                await self._watch_once()
            except asyncio.CancelledError:
                raise
            except Exception:  # a watcher that died would leave every later death unnoticed
                log.exception("models: %s: watching the Ray replicas failed; watching on", self.info.name)
                await asyncio.sleep(WATCH_RETRY)

    async def _watch_once(self) -> None:
        """One round: wait for a replica to end or to go ``launch.health_interval`` without answering /health."""
        assert self.info.launch is not None
        interval = self.info.launch.health_interval
        # a replica still starting is _wait_ready's to judge (a vLLM loading its weights answers no /health)
        live = [r for r in self.replicas if r.ready_seconds is not None and r.lost is None and r.stopped_at is None]
        for replica in live:
            if replica.health_watch is None:
                answered = functools.partial(self.link.answered, replica.url)
                replica.health_watch = asyncio.ensure_future(
                    stops_answering(self._session, replica.url, interval, answered)
                )
        watches: dict[asyncio.Future[Any], RayReplica] = {r.exit_watch: r for r in live if r.exit_watch is not None}
        watches.update({r.health_watch: r for r in live if r.health_watch is not None})
        if not watches:
            await asyncio.sleep(interval / 2)
            return
        done, _ = await asyncio.wait(watches, timeout=interval / 2, return_when=asyncio.FIRST_COMPLETED)
        for future in done:
            replica = watches[future]
            if replica.lost is not None:
                continue
            if future is replica.health_watch:
                self._lose(replica, future.result())
                continue
            code = _exit_code(future)
            error = None if future.cancelled() else future.exception()
            replica.returncode = code
            self._lose(
                replica,
                f"its actor died ({type(error).__name__})"
                if error is not None
                else f"its server exited with code {code}",
            )

    def _lose(self, replica: RayReplica, why: str) -> None:
        """Take ``replica`` out of the run at once, and start its successor in the background."""
        replica.lost = why
        if replica.health_watch is not None:
            replica.health_watch.cancel()
        again = self.restarts[replica.slot] < self.spec.max_restarts
        self.link.retire(replica.url, replacing=again)
        task = asyncio.ensure_future(self._replace(replica, why, again))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _replace(self, replica: RayReplica, why: str, again: bool) -> None:
        tail = await self._tail(replica)
        log.error(
            "models: %s: Ray replica %d (%s on %s, pid %s) was lost during the run: %s; its output ends with:\n%s",
            self.info.name,
            replica.slot,
            replica.url,
            replica.host,
            replica.pid,
            why,
            tail,
        )
        await asyncio.to_thread(self._stop_one, replica, why)
        if not again:
            log.error(
                "models: %s: Ray replica %d is not started again (launch.ray.max_restarts %d reached); the run goes "
                "on with the replicas left",
                self.info.name,
                replica.slot,
                self.spec.max_restarts,
            )
            return
        self.restarts[replica.slot] += 1
        assert self.info.launch is not None
        try:
            fresh = await self._start_ready(replica.slot, self.info.launch.startup_timeout)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            log.error("models: %s: Ray replica %d could not be started again: %s", self.info.name, replica.slot, error)
            self.link.replacement_failed()
            return
        self.link.add(fresh.url)
        log.warning(
            "models: %s: Ray replica %d started again at %s (restart %d of at most %d)",
            self.info.name,
            replica.slot,
            fresh.url,
            self.restarts[replica.slot],
            self.spec.max_restarts,
        )

    # -- stopping ---------------------------------------------------------------------------

    async def stop(self) -> None:
        """Stop every replica (SIGTERM, then SIGKILL), kill the actors, free the bundles; also after Ctrl-C."""
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        # blocking on purpose: it runs while the run ends, maybe cancelled, and must finish whatever comes
        self.stop_all()
        if self._session is not None:
            await self._session.close()
            self._session = None

    def stop_all(self) -> None:
        import ray

        running = [r for r in self.replicas if r.stopped_at is None]
        begun = time.monotonic()
        calls = {}
        for replica in running:
            replica.stop_reason = replica.stop_reason or "the run ended"
            if replica.health_watch is not None:
                replica.health_watch.cancel()
            with contextlib.suppress(Exception):
                calls[replica.slot, id(replica)] = (replica, replica.actor.stop.remote(STOP_GRACE))
        if calls:
            with contextlib.suppress(Exception):
                ray.wait([ref for _, ref in calls.values()], num_returns=len(calls), timeout=STOP_GRACE + 10.0)
        for replica, ref in calls.values():
            self._finish(replica, ref, begun)
        for replica in running:
            if replica.stopped_at is None:
                self._finish(replica, None, begun)
        if self._group is not None:
            from ray.util.placement_group import remove_placement_group

            with contextlib.suppress(Exception):
                remove_placement_group(self._group)
            self._group = None

    def _stop_one(self, replica: RayReplica, why: str) -> None:
        """Stop one replica that left the run early (a thread: the calls block)."""
        begun = time.monotonic()
        ref = None
        with contextlib.suppress(Exception):
            ref = replica.actor.stop.remote(STOP_GRACE)
        replica.stop_reason = replica.stop_reason or (
            f"taken out of the run: {replica.lost}" if replica.lost is not None else why
        )
        replica.lost = replica.lost or why
        self._finish(replica, ref, begun)

    def _finish(self, replica: RayReplica, ref: Any, begun: float) -> None:
        """Read how ``replica`` stopped, keep its log in the run's folder, and kill its actor."""
        import ray

        if ref is not None:
            with contextlib.suppress(Exception):
                ended = ray.get(ref, timeout=STOP_GRACE + 10.0)
                replica.returncode = ended["returncode"] if replica.returncode is None else replica.returncode
                replica.killed = bool(ended["killed"])
        text: bytes | None = None
        with contextlib.suppress(Exception):  # nothing to read when the actor died with its node's copy
            text = ray.get(replica.actor.collect_log.remote(LOG_COPY_BYTES), timeout=10.0)
        with contextlib.suppress(Exception):
            ray.kill(replica.actor, no_restart=True)
        replica.stop_seconds = round(time.monotonic() - begun, 3)
        replica.stopped_at = dt.datetime.now().isoformat(timespec="seconds")
        self._keep(replica, text)

    def _keep(self, replica: RayReplica, text: bytes | None) -> None:
        """The replica's log (masked on the node as it was written) and its description, in the run's folder."""
        try:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            path = safe_path(self.log_dir, f"server-{self.info.name}-ray{replica.slot}-{replica.pid}", suffix=".log")
            if text is not None:
                path.write_bytes(text)
                replica.log_path = path
            write_json_atomic(path.with_suffix(".json"), replica.describe(self.secrets))
        except (OSError, UserError) as error:
            log.warning("models: %s: cannot keep the log of Ray replica %d: %s", self.info.name, replica.slot, error)

    def describe(self) -> list[dict[str, Any]]:
        return [replica.describe(self.secrets) for replica in self.replicas]


def _exit_code(future: asyncio.Future[Any]) -> int | None:
    """The server's exit code from a finished ``wait_exit`` call; None when the actor itself died."""
    if future.cancelled() or future.exception() is not None:
        return None
    code = future.result()
    return int(code) if code is not None else None


def _retrieved(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()

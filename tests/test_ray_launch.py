"""``launch.ray`` on a real two-node Ray cluster on this machine: placement, a run, replicas killed, teardown.

The module starts its own cluster (``ray start --head`` and a second node,
each with its own temporary folder and a custom resource ``replica_slot: 1``,
so two replicas asking for one slot each must land on both nodes) and stops
only that cluster at the end, by the process groups of its own ``ray start``
commands: never ``ray stop``, which would stop every Ray on the machine.

The replicas are evalkit's test server (``launch.backend: test-server``),
all logging to one request log, so the test sees every request each sample
caused, on whichever node it arrived.
"""

from __future__ import annotations

import collections
import contextlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    ROOT,
    closed_port,
    config_for,
    live_group_members,
    processes_mentioning,
    ray_start,
    started_with_tmpdir,
    stop_groups,
    text_set,
)

pytestmark = pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="needs Ray: pip install 'evalkit[ray]'")

#: the evaluation's size: long enough at 4 in flight per replica to kill two replicas mid-run
SAMPLES = 1200
BATCH = 4


@dataclass
class Cluster:
    address: str
    #: the process groups of the two `ray start` commands (each node's daemons stay in its group)
    groups: list[int]
    env: dict[str, str]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    folder = Path(tempfile.mkdtemp(prefix="ekray", dir="/tmp"))  # short: Ray's socket paths must fit 107 bytes
    (folder / "home").mkdir()
    (folder / "tmp").mkdir()
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "RAY_USAGE_STATS_ENABLED": "0",
        # the cluster and its drivers read no ~/.ray of the user's (a token there would be sent to this cluster)
        "HOME": str(folder / "home"),
        # what replicas leave on their node (the log of one whose actor was killed) goes with the cluster's folder
        "TMPDIR": str(folder / "tmp"),
    }
    env.pop("RAY_ADDRESS", None)
    port = closed_port()
    common = ["--node-ip-address=127.0.0.1", "--num-cpus=1", '--resources={"replica_slot": 1}', "--disable-usage-stats"]
    groups: list[int] = []
    try:
        groups.append(
            ray_start(
                [
                    "--head",
                    f"--port={port}",
                    f"--temp-dir={folder / 'a'}",
                    "--include-dashboard=false",
                    f"--ray-client-server-port={closed_port()}",
                    f"--dashboard-agent-listen-port={closed_port()}",
                    *common,
                ],
                env,
            )
        )
        groups.append(
            ray_start(
                [
                    f"--address=127.0.0.1:{port}",
                    f"--temp-dir={folder / 'b'}",
                    f"--dashboard-agent-listen-port={closed_port()}",
                    *common,
                ],
                env,
            )
        )
        yield Cluster(f"127.0.0.1:{port}", groups, env)
    finally:
        stop_groups(groups)
        # Ray starts its workers in sessions of their own: they are found by the environment they inherited
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and started_with_tmpdir(env["TMPDIR"]):
            time.sleep(0.2)
        left = [pid for group in groups for pid in live_group_members(group)] + started_with_tmpdir(env["TMPDIR"])
        shutil.rmtree(folder, ignore_errors=True)
        assert not left, f"the test's Ray nodes left processes behind: {left}"


def _config(
    tmp: Path,
    cluster: Cluster,
    request_log: Path,
    args: tuple[str, ...] = (),
    startup_timeout: float = 60,
    launch: dict[str, Any] | None = None,
    timeout: float = 10,
    **ray: Any,
) -> Path:
    runspecs = text_set(tmp, SAMPLES)
    entry = {
        "info": {
            "name": "spread",
            "inference_type": "vllm",
            "model": "test-model",
            "batch_size": BATCH,
            "timeout": timeout,
            "launch": {
                **(launch or {}),
                "backend": "test-server",
                "args": [*args, "--latency-ms", "20", "--request-log", str(request_log)],
                "startup_timeout": startup_timeout,
                "ray": {
                    "address": cluster.address,
                    "replicas": 2,
                    "resources_per_replica": {"replica_slot": 1},
                    **ray,
                },
            },
        }
    }
    return config_for(tmp, runspecs, [entry])


def _start_run(config: Path, cluster: Cluster) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "evalkit", "run", str(config), "--quiet"],
        cwd=config.parent,
        env=cluster.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _received(request_log: Path) -> list[dict[str, Any]]:
    events = []
    with contextlib.suppress(FileNotFoundError):
        for line in request_log.read_text().splitlines():
            with contextlib.suppress(ValueError):
                events.append(json.loads(line))
    return [e for e in events if e.get("event") == "received"]


def _wait_for(request_log: Path, count: int, run: subprocess.Popen[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while len(_received(request_log)) < count:
        assert run.poll() is None, f"the run ended early:\n{run.communicate()[1][-3000:]}"
        assert time.monotonic() < deadline, f"fewer than {count} requests reached the replicas in {timeout:g} s"
        time.sleep(0.05)


def _servers(request_log: Path) -> list[int]:
    """Pids of the replicas' server processes (their command lines name the request log)."""
    return sorted(processes_mentioning(str(request_log)))


def _parent(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rfind(")") + 2 :].split()[1])


def _actor_processes(cluster: Cluster) -> list[int]:
    """Live ServerProcess actors of the test's cluster (Ray names a worker's process after its actor's class)."""
    return started_with_tmpdir(cluster.env["TMPDIR"], named="ray::ServerProcess")


def _nothing_left(cluster: Cluster, request_log: Path, within: float = 15) -> None:
    deadline = time.monotonic() + within  # Ray reaps a killed actor's worker in the background
    while time.monotonic() < deadline and (_servers(request_log) or _actor_processes(cluster)):
        time.sleep(0.2)
    assert not _servers(request_log), "a replica's server outlived the run"
    assert not _actor_processes(cluster), "a replica's actor outlived the run"


def test_replicas_spread_over_both_nodes_and_survive_a_dead_server_and_a_dead_actor(
    tmp_path: Path, cluster: Cluster
) -> None:
    request_log = tmp_path / "requests.jsonl"
    config = _config(tmp_path, cluster, request_log)
    run = _start_run(config, cluster)
    try:
        _wait_for(request_log, SAMPLES // 4, run)
        first, second = _servers(request_log)
        os.kill(first, signal.SIGKILL)  # a server crashes: its actor sees it exit
        _wait_for(request_log, SAMPLES // 2, run)
        live = [pid for pid in _servers(request_log) if pid != first]
        assert second in live and len(live) == 2, f"the dead server was not replaced: {live}"
        actor = _parent(second)
        assert b"ray::" in Path(f"/proc/{actor}/cmdline").read_bytes()
        os.kill(actor, signal.SIGKILL)  # an actor dies (a node's worker killed): its server goes with it
        _, stderr = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 0, stderr[-3000:]
    assert "its server exited with code -9" in stderr and "its actor died" in stderr, stderr[-3000:]
    run_dir = next(p for p in (tmp_path / "runs").iterdir() if (p / "run.json").is_file())
    results = json.loads((run_dir / "results.json").read_text())
    row = results["results"][0]
    assert (row["n"], row["n_failed"]) == (SAMPLES, 0)

    # no sample lost, none sent twice but those in flight on a replica when it died
    per_sample = collections.Counter(e["body_sha256"] for e in _received(request_log))
    assert len(per_sample) == SAMPLES
    twice = [n for n in per_sample.values() if n > 1]
    assert all(n == 2 for n in twice) and len(twice) <= 2 * BATCH, collections.Counter(per_sample.values())

    # two replicas placed one per node, each lost one replaced in its own slot; every one stopped at the end
    servers = results["servers"]
    assert len(servers) == 4
    assert {s["ray"]["node_id"] for s in servers[:2]} == {s["ray"]["node_id"] for s in servers}
    assert len({s["ray"]["node_id"] for s in servers[:2]}) == 2
    lost = sorted(s["lost"] for s in servers if s["lost"])
    assert len(lost) == 2 and lost[0].startswith("its actor died") and lost[1].startswith("its server exited")
    endpoints = results["requests"]["spread"]["endpoints"]
    assert len(endpoints) == 4 and sum(e["dead"] for e in endpoints.values()) == 2
    kept = sorted((tmp_path / "runs").glob("*/server-logs/server-spread-ray*.json"))
    assert len(kept) == 4
    assert all(json.loads(p.read_text())["stopped"] for p in kept)
    _nothing_left(cluster, request_log)


def test_sigterm_mid_run_stops_every_replica(tmp_path: Path, cluster: Cluster) -> None:
    request_log = tmp_path / "requests.jsonl"
    run = _start_run(_config(tmp_path, cluster, request_log), cluster)
    try:
        _wait_for(request_log, 100, run)
        assert len(_servers(request_log)) == 2
        run.send_signal(signal.SIGTERM)
        _, stderr = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 128 + signal.SIGTERM, stderr[-3000:]
    assert "interrupted" in stderr
    run_dir = next(p for p in (tmp_path / "runs").iterdir() if (p / "run.json").is_file())
    assert json.loads((run_dir / "run.json").read_text())["status"] == "interrupted"
    _nothing_left(cluster, request_log)


def test_evalkit_killed_outright_leaves_no_replica_behind(tmp_path: Path, cluster: Cluster) -> None:
    """No orderly stop at all (SIGKILL): Ray ends the dead driver's actors, and each server dies with its actor."""
    request_log = tmp_path / "requests.jsonl"
    run = _start_run(_config(tmp_path, cluster, request_log), cluster)
    try:
        _wait_for(request_log, 100, run)
        assert len(_servers(request_log)) == 2
        assert len(_actor_processes(cluster)) == 2
    finally:
        run.kill()
        run.communicate()
    _nothing_left(cluster, request_log, within=30)


def test_a_server_that_cannot_start_is_one_message_with_its_output(tmp_path: Path, cluster: Cluster) -> None:
    request_log = tmp_path / "requests.jsonl"
    config = _config(tmp_path, cluster, request_log, args=("--no-such-option",))
    run = _start_run(config, cluster)
    _, stderr = run.communicate(timeout=60)
    assert run.returncode == 2, stderr[-3000:]
    assert "exited with code 2 before it was ready" in stderr and "--no-such-option" in stderr, stderr[-3000:]
    assert "Traceback" not in stderr
    kept = list((tmp_path / "runs" / "server-logs").glob("server-spread-ray*.log"))
    assert kept and all("unrecognized arguments" in p.read_text() for p in kept)
    _nothing_left(cluster, request_log)


def test_replicas_that_fit_nowhere_are_one_message(tmp_path: Path, cluster: Cluster) -> None:
    request_log = tmp_path / "requests.jsonl"
    config = _config(tmp_path, cluster, request_log, startup_timeout=3, replicas=3)
    run = _start_run(config, cluster)
    _, stderr = run.communicate(timeout=60)
    assert run.returncode == 2, stderr[-3000:]
    assert "3 replica(s) of {'replica_slot': 1.0} (SPREAD) could not be placed" in stderr
    assert "Traceback" not in stderr
    _nothing_left(cluster, request_log)


def test_a_hung_replica_is_replaced_and_its_requests_finish_elsewhere(tmp_path: Path, cluster: Cluster) -> None:
    """SIGSTOP: the server accepts connections and answers nothing, /health included; its actor sees no exit.

    Requests wait up to 10 minutes (``timeout``): only the health check ends them in time. The server's script
    is named relatively, beside the config; a Ray worker runs in a folder of Ray's, so the replicas find it only
    because launch.args are read against the config's folder.
    """
    request_log = tmp_path / "requests.jsonl"
    (tmp_path / "slow.yaml").write_text("latency_ms: 20\n")
    config = _config(
        tmp_path, cluster, request_log, args=("--script", "slow.yaml"), launch={"health_interval": 1}, timeout=600
    )
    run = _start_run(config, cluster)
    try:
        _wait_for(request_log, SAMPLES // 4, run)
        hung = _servers(request_log)[0]
        os.kill(hung, signal.SIGSTOP)
        _, stderr = run.communicate(timeout=180)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 0, stderr[-3000:]
    run_dir = next(p for p in (tmp_path / "runs").iterdir() if (p / "run.json").is_file())
    results = json.loads((run_dir / "results.json").read_text())
    row = results["results"][0]
    assert (row["n"], row["n_failed"]) == (SAMPLES, 0)
    servers = results["servers"]
    (lost,) = [s for s in servers if s["lost"]]
    assert lost["pid"] == hung and lost["lost"].startswith("/health unanswered for 1 s")
    assert lost["stop_reason"].startswith("taken out of the run") and lost["stopped"]
    assert len(servers) == 3 and all(s["stop_reason"] == "the run ended" for s in servers if not s["lost"])
    requests = results["requests"]["spread"]
    assert requests["resent"] >= 1 and requests["endpoints"][lost["url"]]["retired"]
    assert str(tmp_path / "slow.yaml") in " ".join(lost["command"])
    _nothing_left(cluster, request_log)

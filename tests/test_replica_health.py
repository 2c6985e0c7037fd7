"""Launched servers are watched: one that hangs is taken out, its requests finish elsewhere, and it is replaced.

A hung server accepts connections and answers nothing (SIGSTOP here, as a
wedged process or a frozen machine would). Without health checks its requests
would wait for their whole ``timeout`` (set to minutes here, so a run that
relied on it would not end within the test's limit). Real test servers
started by evalkit itself from ``launch:`` blocks, real files, the real CLI;
nothing is timed: the assertions are about who answered what.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import ROOT, config_for, evalkit_cli, text_set

from evalkit.clients.endpoint import EndpointPool
from evalkit.clients.model_client import ModelClient, RetryPolicy
from evalkit.clients.protocol import EndpointProtocol
from evalkit.clients.request import ModelRequest
from evalkit.config import RequestKind, load_config
from evalkit.testing.requestlog import read_events

N = 60
#: only a stuck run gets near it
RUN_LIMIT_S = 180


def _launched(name: str, script: str, **launch: Any) -> dict[str, Any]:
    return {
        "info": {
            "name": "m",
            "inference_type": "vllm",
            "model": "m",
            "batch_size": 2,
            # minutes: a request that waited for its timeout would keep the run past RUN_LIMIT_S
            "timeout": 600,
            "retry_attempts": 1,
            "launch": {"backend": "test-server", "args": ["--script", script], **launch},
        }
    }


def _descriptions(runs: Path) -> list[dict[str, Any]]:
    found = []
    for path in runs.glob("**/server-logs/server-*.json"):
        try:
            found.append(json.loads(path.read_text()))
        except (OSError, ValueError):  # being moved into the run's folder right now
            continue
    return found


def _wait_for(condition: Any, process: subprocess.Popen[str], what: str) -> Any:
    for _ in range(RUN_LIMIT_S * 20):
        value = condition()
        if value:
            return value
        if process.poll() is not None:
            raise AssertionError(f"the run ended before {what}: {process.communicate()[1][-3000:]}")
        time.sleep(0.05)
    raise AssertionError(f"never: {what}")


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
def test_a_hung_replica_is_taken_out_its_requests_finish_elsewhere_and_it_is_replaced(tmp_path: Path) -> None:
    project = tmp_path / "project"
    runspecs = text_set(project, N)
    # the scripts sit beside the config and are named relatively: evalkit runs from another folder, so the
    # servers find them only if launch.args are read against the config's folder
    for name in ("a", "b"):
        script = {"latency_ms": 150, "request_log": f"{name}.jsonl"}
        (project / f"{name}.yaml").write_text(yaml.safe_dump(script))
    config = config_for(
        project,
        runspecs,
        [_launched("m", "a.yaml", health_interval=0.5), _launched("m", "b.yaml", health_interval=0.5)],
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    run = subprocess.Popen(
        [sys.executable, "-m", "evalkit", "run", str(config), "--quiet"],
        cwd=elsewhere,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    runs = project / "runs"
    a_log = project / "a.jsonl"
    try:
        _wait_for(lambda: a_log.is_file() and len(read_events(a_log)) >= 6, run, "server a took requests")
        (hung,) = [d for d in _descriptions(runs) if "a.yaml" in " ".join(d["command"])]
        os.killpg(hung["pgid"], signal.SIGSTOP)
        _, stderr = run.communicate(timeout=RUN_LIMIT_S)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 0, stderr[-3000:]

    (run_dir,) = [p for p in runs.iterdir() if (p / "results.json").is_file()]
    results = json.loads((run_dir / "results.json").read_text())
    records = [json.loads(line) for line in (run_dir / "records" / "synth_qa__exact_match.jsonl").open()]
    assert len(records) == N and not [r for r in records if r.get("failure")]

    # the hung server: out of rotation for its silent /health, stopped, and described so
    servers = results["meta"]["servers"] if "meta" in results else results["servers"]
    (lost,) = [s for s in servers if s["lost"]]
    assert lost["pid"] == hung["pid"]
    assert "/health" in lost["lost"] and "health_interval" in lost["lost"]
    assert lost["stop_reason"].startswith("taken out of the run: /health") and lost["stopped"]
    # a successor was started with the same script (3 servers in all) and nothing else was lost
    assert len(servers) == 3 and sum("a.yaml" in " ".join(s["command"]) for s in servers) == 2
    assert all(s["stop_reason"] == "the run ended" for s in servers if not s["lost"])
    assert all(s["signal"] is None or s["killed"] for s in servers)

    # its requests in flight were sent again at once, not after their timeout, and answered by the others
    requests = results["meta"]["requests"]["m"] if "meta" in results else results["requests"]["m"]
    assert requests["resent"] >= 1
    assert sum(requests["replicas"].values()) == N
    assert requests["replicas"][lost["url"]] < N
    hung_endpoint = requests["endpoints"][lost["url"]]
    assert hung_endpoint["retired"] and hung_endpoint["dead"]

    # every server's log and description is in the run's own folder
    kept = sorted(p.name for p in (run_dir / "server-logs").glob("server-m-*.json"))
    assert len(kept) == 3
    assert len(list((run_dir / "server-logs").glob("server-m-*.log"))) == 3
    assert "taken out of the run" in stderr


def _client(urls: list[str]) -> ModelClient:
    pools = [
        (EndpointPool(EndpointProtocol(base_url=u, kind=RequestKind.CHAT, deployment="m"), 2, timeout=600.0), 2)
        for u in urls
    ]
    return ModelClient("m", pools, RetryPolicy(retry_attempts=0, backoff_base=0.05))


def _request(i: int) -> ModelRequest:
    return ModelRequest(kind=RequestKind.CHAT, model="m", messages=[{"role": "user", "content": f"question {i}"}])


def test_what_was_in_flight_on_a_retired_replica_is_sent_again_at_once(make_server: Any) -> None:
    """No retry left (retry_attempts 0), a 10-minute timeout: only a re-send can answer the hung requests."""
    hung = make_server({"faults": {"rates": {"hang": 1.0}, "hang_seconds": 3600}}, request_log=True)
    alive = make_server(request_log=True, latency_ms=20)

    async def scenario() -> tuple[list[Any], ModelClient]:
        client = _client([hung.base_url, alive.base_url])
        try:
            waiting = [asyncio.ensure_future(client.submit(_request(i))) for i in range(8)]
            while len(hung.log_events("received")) < 2:  # both of its workers hold a request it never answers
                await asyncio.sleep(0.02)
            assert client.retire_endpoint(hung.base_url)
            return await asyncio.wait_for(asyncio.gather(*waiting), 60), client
        finally:
            await client.close()

    outcomes, client = asyncio.run(scenario())
    assert [o.failure for o in outcomes] == [None] * 8
    assert {o.replica for o in outcomes} == {alive.base_url}
    assert client.resent == len(hung.log_events("received")) == 2
    assert client.stats()["endpoints"][hung.base_url]["retired"]


@pytest.mark.parametrize("value", [0, 0.05, 3601, "often"])
def test_health_interval_out_of_range_is_one_line_naming_it(tmp_path: Path, value: Any) -> None:
    runspecs = text_set(tmp_path, 3)
    config = config_for(tmp_path, runspecs, [_launched("m", "a.yaml", health_interval=value)])
    done = evalkit_cli(["validate", str(config)], tmp_path)
    assert done.returncode == 2, done.stderr
    (line,) = [line for line in done.stderr.splitlines() if "health_interval" in line]
    assert "models[0].info.launch.health_interval" in line
    assert "Traceback" not in done.stderr


def test_relative_launch_args_are_read_against_the_config_folder(tmp_path: Path) -> None:
    runspecs = text_set(tmp_path, 3)
    (tmp_path / "a.yaml").write_text("latency_ms: 1\n")
    (tmp_path / "templates").mkdir()
    entry = _launched("m", "a.yaml")
    entry["info"]["launch"]["args"] += ["--chat-template=templates", "--device", "cpu", "--x=/abs/path", "missing"]
    config = load_config(config_for(tmp_path, runspecs, [entry]))
    launch = config.models[0].info.launch
    assert launch is not None
    assert launch.args == [
        "--script",
        str(tmp_path.resolve() / "a.yaml"),
        f"--chat-template={tmp_path.resolve() / 'templates'}",
        "--device",
        "cpu",
        "--x=/abs/path",
        "missing",
    ]

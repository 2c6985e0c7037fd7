"""What ``launch.ray`` relies on that needs no Ray cluster: the config, the missing extra, replicas that come and go.

A replica set on a cluster tells the model's client two things mid-run: a
replica is gone (its server died: send nothing more there) and a new one is
up (send there too). These tests drive a real client against real test
servers on loopback with those two calls, and check the config and the
missing-extra messages through the real CLI.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
from pathlib import Path
from typing import Any

import pytest
from helpers import closed_port, config_for, evalkit_cli, text_set

from evalkit.clients.endpoint import EndpointPool
from evalkit.clients.model_client import ModelClient, RetryPolicy
from evalkit.clients.protocol import EndpointProtocol
from evalkit.clients.request import ModelRequest
from evalkit.config import RequestKind
from evalkit.failures import FailureReason


def _ray_entry(**ray: Any) -> dict[str, Any]:
    return {
        "info": {
            "name": "spread",
            "inference_type": "vllm",
            "model": "test-model",
            "launch": {"backend": "test-server", "ray": {"address": "127.0.0.1:1", **ray}},
        }
    }


def test_each_bad_ray_key_is_one_line_naming_it(tmp_path: Path) -> None:
    runspecs = text_set(tmp_path, 3)
    entry = _ray_entry(replicas=0, resources_per_replica={"GPU": -1}, strategy="diagonal", gpus=2)
    config = config_for(tmp_path, runspecs, [entry])
    done = evalkit_cli(["validate", str(config)], tmp_path)
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if "launch.ray" in line]
    assert len(lines) == 4, done.stderr
    where = "models[0].info.launch.ray."
    assert any(f"{where}replicas:" in line and "1 <= replicas <= 4096" in line for line in lines)
    assert any(f"{where}resources_per_replica:" in line and "'GPU': -1 is not an amount" in line for line in lines)
    assert any(f"{where}strategy:" in line and "'DIAGONAL' is not one of" in line for line in lines)
    assert any(f"{where}gpus: unknown key" in line for line in lines)
    assert "Traceback" not in done.stderr


def test_a_replica_must_reserve_something_and_strategy_is_read_in_any_case(tmp_path: Path) -> None:
    runspecs = text_set(tmp_path, 3)
    config = config_for(tmp_path, runspecs, [_ray_entry(resources_per_replica={"CPU": 0})])
    done = evalkit_cli(["validate", str(config)], tmp_path)
    assert done.returncode == 2 and "needs at least one amount above 0" in done.stderr, done.stderr
    config = config_for(tmp_path, runspecs, [_ray_entry(strategy="strict_spread", resources_per_replica={"GPU": 1})])
    done = evalkit_cli(["validate", str(config)], tmp_path)
    assert done.returncode == 0, done.stderr


def test_ray_asked_for_but_not_installed_is_exit_2_naming_the_extra(tmp_path: Path) -> None:
    """Ray made unimportable for the child (a `ray` package that raises ImportError, first on its path)."""
    fake = tmp_path / "no-ray" / "ray"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError(\"No module named 'ray'\")\n")
    runspecs = text_set(tmp_path, 3)
    config = config_for(tmp_path, runspecs, [_ray_entry()])
    env = {**os.environ, "PYTHONPATH": str(fake.parent)}
    done = evalkit_cli(["run", str(config), "--quiet"], tmp_path, env=env)
    assert done.returncode == 2, done.stderr
    assert "launch.ray needs Ray" in done.stderr and "pip install 'evalkit[ray]'" in done.stderr
    assert "Traceback" not in done.stderr


def _client(url: str, workers: int = 2) -> ModelClient:
    pool = EndpointPool(EndpointProtocol(base_url=url, kind=RequestKind.CHAT, deployment="m"), workers, timeout=5.0)
    return ModelClient("m", [(pool, workers)], RetryPolicy(retry_attempts=1, backoff_base=0.05))


def _request(i: int) -> ModelRequest:
    return ModelRequest(kind=RequestKind.CHAT, model="m", messages=[{"role": "user", "content": f"question {i}"}])


def test_a_retired_replica_gets_nothing_and_a_new_one_takes_the_work(make_server: Any) -> None:
    old, new = make_server(request_log=True), make_server(request_log=True)

    async def scenario() -> tuple[list[Any], list[Any]]:
        client = _client(old.base_url)
        try:
            first = await asyncio.gather(*(client.submit(_request(i)) for i in range(6)))
            assert client.retire_endpoint(old.base_url, replacing=True)
            waiting = [asyncio.ensure_future(client.submit(_request(i))) for i in range(6, 12)]
            await asyncio.sleep(0.3)
            assert not any(w.done() for w in waiting), "requests failed while a replacement was on its way"
            client.add_endpoint(new.base_url)
            later = await asyncio.wait_for(asyncio.gather(*waiting), 20)
            return first, later
        finally:
            await client.close()

    first, later = asyncio.run(scenario())
    assert all(o.failure is None for o in first + later)
    assert {o.replica for o in later} == {new.base_url}
    assert len(old.log_events("received")) == 6 and len(new.log_events("received")) == 6


def test_a_replacement_that_never_comes_fails_what_waits_at_once() -> None:
    async def scenario() -> list[Any]:
        url = f"http://127.0.0.1:{closed_port()}/v1"
        client = _client(url)
        try:
            client.retire_endpoint(url, replacing=True)
            waiting = [asyncio.ensure_future(client.submit(_request(i))) for i in range(3)]
            await asyncio.sleep(0.2)
            assert not any(w.done() for w in waiting)
            client.replacement_failed()
            return await asyncio.wait_for(asyncio.gather(*waiting), 10)
        finally:
            await client.close()

    outcomes = asyncio.run(scenario())
    assert [o.failure for o in outcomes] == [FailureReason.ENDPOINT_UNAVAILABLE] * 3


def test_retiring_the_last_replica_without_a_replacement_fails_fast() -> None:
    async def scenario() -> Any:
        url = f"http://127.0.0.1:{closed_port()}/v1"
        client = _client(url)
        try:
            client.retire_endpoint(url)
            return await asyncio.wait_for(client.submit(_request(0)), 5)
        finally:
            await client.close()

    assert asyncio.run(scenario()).failure == FailureReason.ENDPOINT_UNAVAILABLE


def test_the_test_server_backend_launches_on_loopback_too(tmp_path: Path) -> None:
    """``backend: test-server`` (what the cluster tests run) is an ordinary launch backend without ``ray:``."""
    runspecs = text_set(tmp_path, 6)
    entry = {
        "info": {
            "name": "echo",
            "inference_type": "vllm",
            "model": "echo-model",
            "launch": {"backend": "test-server", "args": ["--latency-ms", "1"]},
        }
    }
    config = config_for(tmp_path, runspecs, [entry])
    done = evalkit_cli(["run", str(config), "--quiet"], tmp_path)
    assert done.returncode == 0, done.stderr
    described = sorted((tmp_path / "runs").glob("*/server-logs/server-echo-*.json"))  # in the run's own folder
    assert len(described) == 1
    assert "evalkit.testing.server" in described[0].read_text()


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="needs Ray: pip install 'evalkit[ray]'")
def test_an_address_where_nothing_answers_is_one_message_at_once(tmp_path: Path) -> None:
    """ray.init would retry a wrong address for minutes; evalkit says so in seconds."""
    runspecs = text_set(tmp_path, 3)
    config = config_for(tmp_path, runspecs, [_ray_entry(address=f"127.0.0.1:{closed_port()}")])
    done = evalkit_cli(["run", str(config), "--quiet"], tmp_path, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "launch.ray.address '127.0.0.1:" in done.stderr and "nothing answers there" in done.stderr
    assert "Traceback" not in done.stderr

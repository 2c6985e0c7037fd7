"""The Ray job example (examples/ray_job/driver.py) on a Ray cluster of its own, as it runs on a real one.

The cluster is started here (``ray start --head``, one node on loopback) from
an environment without the config's ``${VAR}``: only the driver has it, as
only the shell that submits a job does, so a shard task expands the config
only if the driver passes the variable on (Ray's ``runtime_env``). The module
stops only its own cluster, by the process group of its ``ray start``.

Checked: the shards merge to exactly one unsharded run; the job run again with
the same ``--output`` finds each shard's run and store where it left them (a
shard cut short resumes without sending anything again); a config mistake
(evalkit's exit 2) stops the job without a retry.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, closed_port, model_entry, ray_start, run, started_with_tmpdir, stop_groups, text_set
from helpers import write_config as write_yaml

pytestmark = pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="needs Ray: pip install 'evalkit[ray]'")

DRIVER = ROOT / "examples" / "ray_job" / "driver.py"
VAR = "EVALKIT_RAY_JOB_TEST_URL"
SHARDS = 3


@pytest.fixture(scope="module")
def cluster() -> Iterator[dict[str, Any]]:
    """A one-node Ray cluster started without the config's variable; the environment a driver needs to reach it."""
    folder = Path(tempfile.mkdtemp(prefix="ekjob", dir="/tmp"))  # short: Ray's socket paths must fit 107 bytes
    (folder / "home").mkdir()
    (folder / "tmp").mkdir()
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "RAY_USAGE_STATS_ENABLED": "0",
        "HOME": str(folder / "home"),  # no ~/.ray of the user's
        "TMPDIR": str(folder / "tmp"),
    }
    env.pop("RAY_ADDRESS", None)
    env.pop(VAR, None)
    port = closed_port()
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
                    "--node-ip-address=127.0.0.1",
                    "--num-cpus=2",
                    "--disable-usage-stats",
                ],
                env,
            )
        )
        yield {"address": f"127.0.0.1:{port}", "env": env}
    finally:
        stop_groups(groups)
        left = started_with_tmpdir(env["TMPDIR"])
        shutil.rmtree(folder, ignore_errors=True)
        assert not left, f"the test's Ray node left processes behind: {left}"


def _results(run_dir: Path) -> dict[tuple[str, str, str], dict[str, Any]]:
    rows = json.loads((run_dir / "results.json").read_text())["results"]
    return {
        (r["dataset"], r["metric"], r["model"]): {
            k: v for k, v in r.items() if k not in ("seconds", "usage", "judge_usage")
        }
        for r in rows
    }


def _attempts(shards_dir: Path, index: int) -> list[dict[str, Any]]:
    path = shards_dir / f"shard-{index}" / "attempts.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _driver(
    cluster: dict[str, Any], config: Path, output: Path, cwd: Path, url: str, *more: str
) -> subprocess.CompletedProcess[str]:
    env = {**cluster["env"], VAR: url}
    return subprocess.run(
        [sys.executable, str(DRIVER), str(config), "--shards", str(SHARDS), "--cpus-per-shard", "0.5"]
        + ["--output", str(output), "--address", cluster["address"], *more],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_ray_job_runs_a_var_config_resumes_kept_shards_and_never_retries_a_mistake(
    cluster: dict[str, Any], tmp_path: Path
) -> None:
    from evalkit.testing import start_test_server

    runspecs = text_set(tmp_path, 45, words=5)
    server = start_test_server(
        {"answers": [{"match": "re:question \\d*4 ", "answer": "question four"}]}, request_log=True
    )
    try:
        pairs = [["synth_qa", "exact_match"], ["synth_qa", "bleu"]]
        whole_config = write_yaml(
            tmp_path / "whole.yaml",
            {"dataset_metric": pairs, "models": [model_entry("m", server.base_url)], "runspecs_dir": str(runspecs)},
        )
        whole = _results(run(whole_config, no_cache=True).run_dir)
        sent_before = len(server.log_events("completed"))
        config = write_yaml(
            tmp_path / "config.yaml",
            {"dataset_metric": pairs, "models": [model_entry("m", "${" + VAR + "}")], "runspecs_dir": str(runspecs)},
        )
        output = tmp_path / "merged"
        shards_dir = tmp_path / "merged-shards"
        done = _driver(cluster, config, output, tmp_path, server.base_url)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
        assert f"merged run folder: {output} (evalkit merge exit 0)" in done.stdout
        assert _results(output) == whole
        for index in range(SHARDS):
            (attempt,) = _attempts(shards_dir, index)
            assert attempt["exit"] == 0 and attempt["status"] == "finished" and not attempt["resumed"]
            assert (shards_dir / f"shard-{index}" / "responses.sqlite").is_file()  # kept, not temporary
        sent_by_job = len(server.log_events("completed")) - sent_before

        # the job again, with the same --output: a shard cut short resumes from its store, the others are kept
        (cut,) = [p.parent for p in (shards_dir / "shard-1").glob("*/run.json")]
        manifest = json.loads((cut / "run.json").read_text())
        (cut / "run.json").write_text(json.dumps({**manifest, "status": "interrupted"}))
        again = _driver(cluster, config, output, tmp_path, server.base_url)
        assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-5000:]
        assert "shard 0/3 already finished" in again.stdout and "shard 2/3 already finished" in again.stdout
        assert [a["resumed"] for a in _attempts(shards_dir, 1)] == [False, True]
        assert len(server.log_events("completed")) - sent_before == sent_by_job  # nothing asked again
        assert _results(output) == whole
    finally:
        server.stop()

    # a mistake in the config is evalkit's exit 2 in every task: reported once per shard, never retried
    broken = write_yaml(
        tmp_path / "broken.yaml",
        {
            "dataset_metric": [["synth_qa", "no_such_metric_here"]],
            "models": [model_entry("m", "${" + VAR + "}")],
            "runspecs_dir": str(runspecs),
        },
    )
    refused = _driver(cluster, broken, tmp_path / "broken-merged", tmp_path, "http://127.0.0.1:9/v1")
    assert refused.returncode == 2, refused.stdout[-3000:] + refused.stderr[-5000:]
    assert "no_such_metric_here" in refused.stderr and "nothing merged" in refused.stderr
    for index in range(SHARDS):
        assert [a["exit"] for a in _attempts(tmp_path / "broken-merged-shards", index)] == [2]  # --max-retries 2


def test_the_driver_stops_before_any_task_when_it_lacks_a_variable_the_config_uses(tmp_path: Path) -> None:
    config = write_yaml(
        tmp_path / "config.yaml",
        {"dataset_metric": [["synth_qa", "exact_match"]], "models": [model_entry("m", "${" + VAR + "}")]},
    )
    env = {k: v for k, v in os.environ.items() if k != VAR}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run(
        [sys.executable, str(DRIVER), str(config), "--output", str(tmp_path / "out"), "--address", "127.0.0.1:9"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "${" + VAR + "}" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "out-shards").exists()

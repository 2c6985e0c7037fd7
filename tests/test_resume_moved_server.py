"""Resumes follow the infrastructure: a run whose server went away is incomplete, and finishes at the new address.

A model's URL and token are not part of a run's identity. The first run's
server drops the connection for every question from number 30 on (as a server
that stops midway does: refused or reset, no answer), so its circuit breaker
finds it dead and the rest fail as ``endpoint_unavailable``. Those samples are
not answers: the run says "incomplete" in run.json and exits 5. The server then
"moves": the config's ``${VAR}`` names another port, and ``evalkit run --resume
RUN_DIR`` (no config argument, as examples/slurm resumes a requeued task) sends
exactly the samples not answered to the new address and finishes with the
results of a run that never met the fault.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import evalkit_cli, run, text_set, write_config

from evalkit.config import load_config
from evalkit.run.manifest import answer_fingerprint, config_as_given, plan_for_resume, write_manifest
from evalkit.run.unanswered import EXIT_INCOMPLETE, REASKABLE

N = 60
#: the questions the first server never answers: numbers 30 to 59, the second half of the run
DROPPED = r"re:^question [345]\d( |$)"


def _config(root: Path, url: str) -> Path:
    text_set(root, N, words=4)
    model = {
        "name": "m",
        "inference_type": "vllm",
        "url": url,
        "model": "m",
        "batch_size": 4,
        "timeout": 10,
        "retry_attempts": 1,
    }
    data = {
        "dataset_metric": [["synth_qa", "exact_match"]],
        "models": [{"info": model}],
        "runspecs_dir": "runspecs",
        "output_dir": "runs",
    }
    return write_config(root / "config.yaml", data)


def _results(run_dir: Path) -> list[dict[str, Any]]:
    rows = json.loads((run_dir / "results.json").read_text())["results"]
    return [{k: v for k, v in row.items() if k not in ("seconds", "usage", "judge_usage")} for row in rows]


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
def test_a_run_that_lost_its_server_is_incomplete_and_its_resume_follows_the_new_url(tmp_path: Path) -> None:
    from evalkit.testing import start_test_server

    config = _config(tmp_path, "${EVALKIT_TEST_MODEL_URL}")
    first = start_test_server({"answers": [{"match": DROPPED, "answer": "", "fault": "drop"}]}, request_log=True)
    try:
        env = {**os.environ, "EVALKIT_TEST_MODEL_URL": first.base_url}
        started = evalkit_cli(["run", str(config), "--quiet"], tmp_path, env=env)
    finally:
        first.stop()
    assert started.returncode == EXIT_INCOMPLETE, started.stderr
    (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    manifest = json.loads((run_dir / "run.json").read_text())
    assert manifest["status"] == "incomplete"
    unanswered = manifest["unanswered"]
    assert set(unanswered) == REASKABLE == {"endpoint_unavailable"}
    (row,) = json.loads((run_dir / "results.json").read_text())["results"]
    assert (
        row["n_failed"] >= N // 2
        and row["failure_reasons"]["endpoint_unavailable"] == unanswered["endpoint_unavailable"]
    )
    assert f"evalkit run --resume {run_dir}" in started.stderr and "incomplete" in started.stderr

    second = start_test_server({}, request_log=True)
    try:
        assert second.base_url != first.base_url
        env = {**os.environ, "EVALKIT_TEST_MODEL_URL": second.base_url}
        resumed = evalkit_cli(["run", "--resume", str(run_dir), "--quiet"], tmp_path, env=env)
        assert resumed.returncode == 0, resumed.stderr
        asked_again = len(second.log_events("completed"))
        clean = run(_config(tmp_path / "clean", second.base_url), no_cache=True)
    finally:
        second.stop()
    assert asked_again == row["n_failed"]  # every failed sample again; the answered ones came from the store
    after = json.loads((run_dir / "run.json").read_text())
    assert after["status"] == "finished" and "unanswered" not in after
    assert after["config"]["models"][0]["info"]["url"] == second.base_url
    assert _results(run_dir) == _results(clean.run_dir)


def test_a_resume_takes_the_replicas_and_tokens_the_config_names_now(tmp_path: Path, monkeypatch: Any) -> None:
    """Replicas and tokens are transport: their number and values come from the config file, the rest as saved."""
    config = _config(tmp_path, "http://127.0.0.1:9/v1")
    run_dir = tmp_path / "runs" / "started"
    run_dir.mkdir(parents=True)
    saved = load_config(config)
    write_manifest(
        run_dir,
        {
            "format": 1,
            "status": "interrupted",
            "config_file": str(config),
            "fingerprint": answer_fingerprint(saved),
            "config": config_as_given(saved),
        },
    )
    data = yaml.safe_load(config.read_text())
    info = data["models"][0]["info"]
    data["models"] = [
        {"info": {**info, "url": "${EVALKIT_TEST_A}", "auth_token": "${EVALKIT_TEST_TOKEN}", "batch_size": 16}},
        {"info": {**info, "url": "http://127.0.0.1:8/v1", "auth_token": "${EVALKIT_TEST_TOKEN}"}},
    ]
    data["filters"] = {"num_samples": 5}  # changed after the run started: a resume keeps the run's own
    write_config(config, data)
    monkeypatch.setenv("EVALKIT_TEST_A", "http://10.1.2.3:8000/v1")
    monkeypatch.setenv("EVALKIT_TEST_TOKEN", "tok-now")
    plan = plan_for_resume(run_dir)
    replicas = plan.models["m"].replicas
    assert [r.url for r in replicas] == ["http://10.1.2.3:8000/v1", "http://127.0.0.1:8/v1"]
    assert [r.auth_token for r in replicas] == ["tok-now", "tok-now"] and replicas[0].batch_size == 16
    assert plan.config.filters.num_samples is None
    assert answer_fingerprint(plan.config) == answer_fingerprint(saved)  # the same run: a resume accepts it

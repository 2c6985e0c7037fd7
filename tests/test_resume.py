"""kill -9 at any point, then the same command (or a resume of the run folder) finishes the run.

The run is a real ``python -m evalkit run`` subprocess, killed with SIGKILL once
the test server's request log shows about half of its requests completed. The
guarantee under test: nothing the killed run had recorded (and nothing it had
committed to the store) is sent again, at most the requests that were in flight
are, and the results equal an uninterrupted run's.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, config_for, model_entry, run, text_set

from evalkit.errors import UserError
from evalkit.run.manifest import plan_for_resume
from evalkit.run.runner import RunOptions, execute

N = 300
BATCH = 8
PAIRS = [["synth_qa", "exact_match"], ["synth_qa", "bleu"]]


def _start_and_kill(config: Path, server, cwd: Path) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """Run ``evalkit run`` in a subprocess and SIGKILL it at about half of its requests."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    with (cwd / "killed.stderr").open("wb") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "evalkit", "run", str(config), "--quiet"],
            cwd=cwd,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        give_up = time.monotonic() + 60
        while len(server.log_events("completed")) < N // 2:
            assert proc.poll() is None, f"the run ended before it was killed: {(cwd / 'killed.stderr').read_text()}"
            assert time.monotonic() < give_up, "the run never reached half of its requests"
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    events = server.log_events()
    run_dirs = [p for p in (config.parent / "runs").iterdir() if p.is_dir()]
    assert len(run_dirs) == 1
    run_dir = run_dirs[0]
    recorded = [
        json.loads(line)
        for path in (run_dir / "records").glob("*.jsonl")
        for line in path.read_text().splitlines()
        if line.endswith("}")  # a torn last line of a killed writer is not a record
    ]
    # what was sent reaches the disk before a record naming it: a kill never leaves a record with a lost entry
    assert {r["sent"] for r in recorded} <= _sent_keys(run_dir)
    with sqlite3.connect(config.parent / "runs" / "responses.sqlite") as db:
        stored = {json.loads(blob)["text"] for (blob,) in db.execute("SELECT response FROM responses")}
    answered = {e["answer"]: e["body_sha256"] for e in events if e["event"] == "completed" and e["status"] == 200}
    return {
        "run_dir": run_dir,
        "events": len(events),
        "recorded": recorded,
        "recorded_shas": {answered[r["response"]] for r in recorded if r.get("response") is not None},
        "stored_texts": stored,
        "stored_shas": {sha for answer, sha in answered.items() if answer in stored},
        "completed_shas": set(answered.values()),
    }


def _sent_keys(run_dir: Path) -> set[str]:
    """The keys of the whole lines of the run's sent log (records/sent/synth_qa.jsonl)."""
    path = run_dir / "records" / "sent" / "synth_qa.jsonl"
    lines = path.read_text().splitlines() if path.is_file() else []
    return {json.loads(line)["key"] for line in lines if line.endswith("}")}


def _check_nothing_recorded_was_resent(killed: dict[str, Any], server) -> set[str]:  # type: ignore[no-untyped-def]
    resent = {e["body_sha256"] for e in server.log_events()[killed["events"] :] if e["event"] == "received"}
    assert killed["recorded_shas"], "the kill came before any record was written; nothing was tested"
    assert len(killed["recorded"]) < 2 * N, "the kill came after the run had finished; nothing was tested"
    assert {r["response"] for r in killed["recorded"] if r.get("response") is not None} <= killed[
        "stored_texts"
    ]  # recorded => stored
    assert not killed["recorded_shas"] & resent  # nothing recorded was sent again
    assert not killed["stored_shas"] & resent  # nothing committed was sent again
    in_flight_at_kill = killed["completed_shas"] & resent  # answered by the server, not yet committed by the client
    assert len(in_flight_at_kill) <= BATCH
    print(
        f"killed at {len(killed['completed_shas'])} answered requests: {len(killed['recorded'])} records, "
        f"{len(killed['stored_shas'])} stored, {len(in_flight_at_kill)} answered-but-unstored sent again, "
        f"{len(resent)} sent after the kill"
    )
    return resent


def _scores(results_json: Path) -> dict[tuple[str, str, str], tuple[Any, ...]]:
    rows = json.loads(results_json.read_text())["results"]
    return {
        (r["dataset"], r["metric"], r["model"]): (r["score"], r["ci_low"], r["ci_high"], r["n"], r["n_failed"])
        for r in rows
    }


@pytest.fixture()
def setup(tmp_path: Path, make_server) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    runspecs = text_set(tmp_path, N)
    clean_server = make_server()
    clean = run(
        config_for(tmp_path / "clean", runspecs, [model_entry("m", clean_server.base_url, batch_size=32)], pairs=PAIRS),
        no_cache=True,
    )
    server = make_server(latency_ms=10, request_log=True)
    config = config_for(tmp_path / "work", runspecs, [model_entry("m", server.base_url, batch_size=BATCH)], pairs=PAIRS)
    return {"clean": _scores(clean.run_dir / "results.json"), "server": server, "config": config}


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
def test_kill_9_then_the_same_command_resends_nothing_recorded_and_scores_equal(setup: dict[str, Any]) -> None:
    server, config = setup["server"], setup["config"]
    killed = _start_and_kill(config, server, config.parent)
    assert json.loads((killed["run_dir"] / "run.json").read_text())["status"] == "running"

    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    again = subprocess.run(
        [sys.executable, "-m", "evalkit", "run", str(config), "--quiet"],
        cwd=config.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0, again.stderr
    resent = _check_nothing_recorded_was_resent(killed, server)
    assert len(resent) == N - len(killed["stored_shas"])  # the rest, each once
    new_dir = next(p for p in (config.parent / "runs").iterdir() if p.is_dir() and p != killed["run_dir"])
    assert _scores(new_dir / "results.json") == setup["clean"]
    results = json.loads((new_dir / "results.json").read_text())
    assert results["requests"]["m"]["store_hits"] == len(killed["stored_shas"])


def test_resume_finishes_the_killed_run_in_its_own_folder(setup: dict[str, Any]) -> None:
    server, config = setup["server"], setup["config"]
    killed = _start_and_kill(config, server, config.parent)
    run_dir = killed["run_dir"]

    plan = plan_for_resume(run_dir)  # what `evalkit run --resume RUN_DIR` does without a config argument
    assert [e.id for e in plan.engines] == ["synth_qa__exact_match", "synth_qa__bleu"] and list(plan.models) == ["m"]
    outcome = asyncio.run(execute(plan, RunOptions(quiet=True, resume=str(run_dir))))
    assert outcome.run_dir == run_dir
    _check_nothing_recorded_was_resent(killed, server)
    manifest = json.loads((run_dir / "run.json").read_text())
    assert manifest["status"] == "finished" and len(manifest["resumed"]) == 1
    assert _scores(run_dir / "results.json") == setup["clean"]
    for engine in ("synth_qa__exact_match", "synth_qa__bleu"):
        lines = (run_dir / "records" / f"{engine}.jsonl").read_text().splitlines()
        assert len(lines) == N and len({json.loads(x)["sample_id"] for x in lines}) == N
        assert {json.loads(x)["sent"] for x in lines} <= _sent_keys(run_dir)

    # a resume after the run finished sends nothing at all
    seen = len(server.log_events("received"))
    again = asyncio.run(execute(plan_for_resume(run_dir), RunOptions(quiet=True, resume=str(run_dir))))
    assert again.requests_sent == 0 and len(server.log_events("received")) == seen
    assert _scores(run_dir / "results.json") == setup["clean"]


def test_resume_refuses_a_changed_config_or_a_folder_that_is_no_run(tmp_path: Path, make_server) -> None:
    runspecs = text_set(tmp_path, 5)
    server = make_server()
    config = config_for(tmp_path, runspecs, [model_entry("m", server.base_url)])
    first = run(config)
    changed = config_for(tmp_path, runspecs, [model_entry("m", server.base_url, temperature=0.7)])
    from evalkit.config import load_config
    from evalkit.plan import build_plan

    with pytest.raises(UserError, match="differs from the one this run started with"):
        asyncio.run(execute(build_plan(load_config(changed)), RunOptions(quiet=True, resume=str(first.run_dir))))
    # transport settings may change on resume (a server that moved, another batch size)
    moved = config_for(
        tmp_path, runspecs, [model_entry("m", server.base_url + "/", batch_size=2, timeout=3, retry_attempts=0)]
    )
    resumed = asyncio.run(execute(build_plan(load_config(moved)), RunOptions(quiet=True, resume=str(first.run_dir))))
    assert resumed.requests_sent == 0 and resumed.store_hits == 5
    with pytest.raises(UserError, match="not an evalkit run folder"):
        asyncio.run(execute(build_plan(load_config(config)), RunOptions(quiet=True, resume=str(tmp_path))))
    with pytest.raises(UserError, match="no such run folder"):
        plan_for_resume(tmp_path / "nope")


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
def test_a_resumed_plan_gets_its_secrets_back_from_the_config_file(
    tmp_path: Path, speech_runspecs, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """Secrets are masked in run.json, yet a resume gets them back (token and a launched server's env)."""
    token = "evk-RESUME-5c2e9a71"
    monkeypatch.setenv("EVALKIT_RESUME_TOKEN", token)
    entry = {
        "info": {
            "name": "m",
            "inference_type": "transcription",
            "model": "pocketsphinx-en-us",
            "batch_size": 2,
            "auth_token": "${EVALKIT_RESUME_TOKEN}",
            "extra_body": {"user": "me"},
            "launch": {"backend": "pocketsphinx", "env": {"HF_TOKEN": token}},
        }
    }
    other = model_entry("other", "http://127.0.0.1:9/v1", auth_token="${EVALKIT_RESUME_TOKEN}")
    config = config_for(tmp_path, speech_runspecs["dir"], [entry, other], pairs=[["tiny_asr", "word_error_rate"]])
    from evalkit.config import load_config
    from evalkit.plan import build_plan

    full = build_plan(load_config(config), source=str(config))
    only_m = load_config(config)
    only_m.models = [e for e in only_m.models if e.info.name == "m"]  # as `--model m` leaves it
    first = asyncio.run(execute(build_plan(only_m, source=str(config)), RunOptions(quiet=True)))
    manifest_text = (first.run_dir / "run.json").read_text()
    assert (
        token not in manifest_text
        and json.loads(manifest_text)["config"]["models"][0]["info"]["launch"]["env"]["HF_TOKEN"] == "***"
    )

    plan = plan_for_resume(first.run_dir)
    info = plan.models["m"].info
    assert list(plan.models) == ["m"] and info.auth_token == token and info.launch.env["HF_TOKEN"] == token
    assert full.models["m"].info.auth_token == token
    resumed = asyncio.run(execute(plan, RunOptions(quiet=True, resume=str(first.run_dir))))
    assert resumed.store_hits == 3 and resumed.requests_sent == 0

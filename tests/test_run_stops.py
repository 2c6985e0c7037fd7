"""A run never stalls: a failing store ends it with one line and exit 1, and a signal ends it within 5 s.

Real ``python -m evalkit run`` subprocesses against the test server. The store
is made to fail the way a shared file does: another connection (this test)
holds SQLite's write lock, so the run's first commit waits out the busy
timeout (10 s) and fails with "database is locked". Before, a writer that
failed left its answers' futures pending forever: the run sat idle, ignored
SIGTERM and left run.json "running".
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
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import ROOT, config_for, evalkit_cli, model_entry, text_set

from evalkit.clients.store import BUSY_TIMEOUT_MS, ResponseStore

N = 20


@pytest.fixture()
def locked_store(tmp_path: Path) -> Iterator[Path]:
    """An evalkit store at the run's store path whose write lock another connection holds (released after)."""
    path = tmp_path / "runs" / "responses.sqlite"

    async def make() -> None:
        await (await ResponseStore(path).open()).close()

    asyncio.run(make())
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        yield path
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def _start(config: Path, cwd: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.Popen(
        [sys.executable, "-m", "evalkit", "run", str(config), "--quiet"],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_answers(  # type: ignore[no-untyped-def]
    server, proc: subprocess.Popen[str], output: Path, before: int = 0, old: frozenset[Path] = frozenset()
) -> Path:
    """The new run folder, once the server has answered a request (its commit then waits on the lock).

    ``before``: answers of earlier runs in the server's log; ``old``: their run folders.
    """
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        new = [p.parent for p in output.glob("*/run.json") if p.parent not in old]
        if len(server.log_events("completed")) > before and new:
            return new[0]
        time.sleep(0.02)
    raise AssertionError("no answer in time")


def _manifest(run_dir: Path) -> dict[str, object]:
    return json.loads((run_dir / "run.json").read_text())


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
def test_a_store_that_fails_ends_the_run_with_one_line_and_exit_1(
    tmp_path: Path, make_server, locked_store: Path
) -> None:
    runspecs = text_set(tmp_path, N)
    server = make_server(request_log=True)
    config = config_for(tmp_path, runspecs, [model_entry("m", server.base_url)])
    proc = _start(config, tmp_path)
    stdout, stderr = proc.communicate(timeout=BUSY_TIMEOUT_MS / 1000 + 60)
    assert proc.returncode == 1, stderr
    assert "Traceback" not in stderr
    run_dir = next(p for p in (tmp_path / "runs").iterdir() if p.is_dir())
    errors = [line for line in stderr.splitlines() if line.startswith("evalkit: error:")]
    assert errors == [
        f"evalkit: error: cannot write {locked_store} (OperationalError: database is locked); the run stopped. "
        "What was recorded and stored so far is kept: once the cause is fixed, finish with: "
        f"evalkit run --resume {run_dir}"
    ]
    manifest = _manifest(run_dir)
    assert manifest["status"] == "failed"
    assert f"cannot write {locked_store} (OperationalError: database is locked)" in str(manifest["error"])


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
def test_sigterm_ends_a_run_stuck_in_a_commit_within_5_s_and_the_resume_finishes(tmp_path: Path, make_server) -> None:
    runspecs = text_set(tmp_path, N)
    server = make_server(request_log=True)
    config = config_for(tmp_path, runspecs, [model_entry("m", server.base_url)])
    clean = evalkit_cli(["run", str(config), "--quiet"], tmp_path, timeout=120)  # fills the store: N answers
    assert clean.returncode == 0, clean.stderr
    clean_dir = next(p for p in (tmp_path / "runs").iterdir() if p.is_dir())
    store = tmp_path / "runs" / "responses.sqlite"
    with sqlite3.connect(store) as db:
        db.execute("DELETE FROM responses")  # asked again next time: commits are needed

    holder = sqlite3.connect(store, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        proc = _start(config, tmp_path)
        run_dir = _wait_for_answers(server, proc, tmp_path / "runs", before=N, old=frozenset({clean_dir}))
        time.sleep(0.2)  # the first commit is waiting for the lock (for up to the 10 s busy timeout)
        signalled = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
        seconds = time.monotonic() - signalled
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    print(f"SIGTERM to exit: {seconds:.2f} s")
    assert proc.returncode == 128 + signal.SIGTERM, stderr
    assert seconds < 7.0  # the promise is 5 s; the commit alone would have held it for about 10
    assert "stopped at once" in stderr and f"evalkit run --resume {run_dir}" in stderr
    assert _manifest(run_dir)["status"] == "interrupted"

    resumed = evalkit_cli(["run", "--resume", str(run_dir), "--quiet"], tmp_path, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    assert _manifest(run_dir)["status"] == "finished"
    clean_rows = json.loads((clean_dir / "results.json").read_text())["results"]
    rows = json.loads((run_dir / "results.json").read_text())["results"]
    assert [(r["score"], r["n"], r["n_failed"]) for r in rows] == [
        (r["score"], r["n"], r["n_failed"]) for r in clean_rows
    ]


def test_a_second_ctrl_c_ends_the_run_at_once_and_run_json_says_interrupted(
    tmp_path: Path, make_server, locked_store: Path
) -> None:
    runspecs = text_set(tmp_path, N)
    server = make_server(request_log=True)
    config = config_for(tmp_path, runspecs, [model_entry("m", server.base_url)])
    proc = _start(config, tmp_path)
    run_dir = _wait_for_answers(server, proc, tmp_path / "runs")
    proc.send_signal(signal.SIGINT)
    deadline = time.monotonic() + 3
    while _manifest(run_dir)["status"] != "interrupted":  # said at once, before the orderly end is done
        assert time.monotonic() < deadline, "run.json did not say interrupted"
        time.sleep(0.02)
    signalled = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGINT, stderr
    assert time.monotonic() - signalled < 2.0
    assert _manifest(run_dir)["status"] == "interrupted"

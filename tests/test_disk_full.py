"""A full disk stops a run with one message and exit code 4; what was answered is kept, and --resume finishes it.

The disk is real: each test mounts a 300 KB tmpfs (``mount -t tmpfs``, so it
needs root, as CI has) and puts the run's output folder or its response store
on it. Where mounting is impossible the tests skip. The run is a real
``python -m evalkit run`` subprocess against the test server on loopback; once
it has stopped, the tmpfs is grown in place (``mount -o remount,size=...``,
contents kept), as a user freeing space would, and ``--resume`` finishes the
run in its own folder with the results of a clean run.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, config_for, model_entry, run, text_set

N = 800
BATCH = 8
PAIRS = [["synth_qa", "exact_match"], ["synth_qa", "bleu"]]


def _mount(path: Path, size: str) -> None:
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True, capture_output=True)


@pytest.fixture()
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 300 KB tmpfs the test may grow; skipped where this process cannot mount."""
    path = tmp_path / f"small-{uuid.uuid4().hex[:6]}"
    path.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    try:
        _mount(path, "300k")
    except (OSError, subprocess.CalledProcessError) as error:
        pytest.skip(f"cannot mount a tmpfs here: {getattr(error, 'stderr', b'') or error}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def _evalkit(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run(
        [sys.executable, "-m", "evalkit", "run", *args, "--quiet"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def _scores(results_json: Path) -> dict[tuple[str, str, str], tuple[Any, ...]]:
    rows = json.loads(results_json.read_text())["results"]
    return {
        (r["dataset"], r["metric"], r["model"]): (r["score"], r["ci_low"], r["ci_high"], r["n"], r["n_failed"])
        for r in rows
    }


def _stored(store: Path) -> int:
    with sqlite3.connect(store) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        return int(db.execute("SELECT count(*) FROM responses").fetchone()[0])


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
@pytest.mark.parametrize("full", ["output", "store"])
def test_a_full_disk_stops_with_one_message_and_resume_finishes_with_clean_results(
    full: str, small_disk: Path, tmp_path: Path, make_server
) -> None:
    runspecs = text_set(tmp_path, N, words=12)
    clean_server = make_server()
    clean = run(
        config_for(tmp_path / "clean", runspecs, [model_entry("m", clean_server.base_url, batch_size=32)], pairs=PAIRS),
        no_cache=True,
    )
    server = make_server()
    work = tmp_path / "work"
    output = small_disk / "runs" if full == "output" else work / "runs"
    store = work / "responses.sqlite" if full == "output" else small_disk / "responses.sqlite"
    config = config_for(
        work,
        runspecs,
        [model_entry("m", server.base_url, batch_size=BATCH)],
        pairs=PAIRS,
        output_dir=str(output),
        cache={"path": str(store)},
    )

    stopped = _evalkit(str(config), cwd=work)
    assert stopped.returncode == 4, stopped.stderr
    assert "Traceback" not in stopped.stderr
    message = [line for line in stopped.stderr.splitlines() if line.strip()]
    assert len(message) == 1, stopped.stderr
    assert message[0].startswith(f"evalkit: error: no space left on the device of {small_disk}"), message
    assert "needs at least" in message[0] and "free" in message[0]
    run_dir = next(p for p in output.iterdir() if p.is_dir())
    assert f"evalkit run --resume {run_dir}" in message[0]
    sent_before = server.stats()["requests"]
    stored = _stored(store)  # intact, and holds what was answered before the disk filled
    assert 0 < stored < N
    assert sent_before - stored <= 2 * BATCH  # answered but not kept: the commit that met the full disk
    print(f"{full}: stopped with {stored} answers stored after {sent_before} requests: {message[0]}")

    subprocess.run(["mount", "-o", "remount,size=20m", str(small_disk)], check=True)
    resumed = _evalkit("--resume", str(run_dir), cwd=work)
    assert resumed.returncode == 0, resumed.stderr
    assert _scores(run_dir / "results.json") == _scores(clean.run_dir / "results.json")
    for engine in ("synth_qa__exact_match", "synth_qa__bleu"):
        lines = (run_dir / "records" / f"{engine}.jsonl").read_text().splitlines()
        assert len(lines) == N and len({json.loads(x)["sample_id"] for x in lines}) == N
    results = json.loads((run_dir / "results.json").read_text())
    assert results["requests"]["m"]["store_hits"] == stored  # nothing stored was asked again
    resent = server.stats()["requests"] - sent_before
    assert resent == N - stored  # the rest, each once
    assert _stored(store) == N
    assert json.loads((run_dir / "run.json").read_text())["status"] == "finished"

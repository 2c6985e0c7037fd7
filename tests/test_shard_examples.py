"""The shipped way to run one plan on several machines as a Slurm array (examples/slurm); the Ray job's is
tests/test_ray_job.py.

The Slurm scripts run here as Slurm would run them, with a stand-in ``sbatch``
on PATH that runs each array task in turn (SLURM_ARRAY_TASK_ID set as Slurm
sets it), then the dependent merge job; what they produce must equal one
unsharded run of the same config.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import ROOT, config_for, model_entry, run, text_set, write_config

SLURM = ROOT / "examples" / "slurm"
RAY_DRIVER = ROOT / "examples" / "ray_job" / "driver.py"
PAIRS = [["synth_qa", "exact_match"], ["synth_qa", "bleu"]]

#: stands in for Slurm's sbatch: runs the job's script at once (an array task by task), logs what it was given
FAKE_SBATCH = r"""
import json, os, re, subprocess, sys
from pathlib import Path

options, script = {}, None
for arg in sys.argv[1:]:
    if arg.startswith("--"):
        key, _, value = arg[2:].partition("=")
        options[key] = value
    else:
        script = arg
log = Path(os.environ["FAKE_SBATCH_LOG"])
previous = log.read_text().splitlines() if log.exists() else []
job = 1000 + len(previous)
header = re.search(r"^#SBATCH --array=(\S+)", Path(script).read_text(), re.M)
array = options.get("array") or (header.group(1) if header else None)
tasks = []
for part in (array or "").split(","):
    if part:
        low, _, high = part.partition("-")
        tasks += list(range(int(low), int(high or low) + 1))
codes = []
env = dict(os.environ, SLURM_JOB_ID=str(job))
for task in tasks or [None]:
    if task is not None:
        env.update(SLURM_ARRAY_JOB_ID=str(job), SLURM_ARRAY_TASK_ID=str(task))
    out = log.parent / f"job-{job}-{task}.out"
    with out.open("wb") as handle:
        codes.append(subprocess.run(["bash", script], env=env, stdout=handle, stderr=subprocess.STDOUT).returncode)
with log.open("a") as handle:
    handle.write(json.dumps({"job": job, "script": Path(script).name, "options": options, "tasks": tasks,
                             "codes": codes}) + "\n")
print(f"{job};cluster" if "parsable" in options else f"Submitted batch job {job}")
"""


def _results(run_dir: Path) -> dict[tuple[str, str, str], dict[str, Any]]:
    rows = json.loads((run_dir / "results.json").read_text())["results"]
    return {
        (r["dataset"], r["metric"], r["model"]): {
            k: v for k, v in r.items() if k not in ("seconds", "usage", "judge_usage")
        }
        for r in rows
    }


@pytest.fixture(scope="module")
def plan(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A config, its unsharded results, and a folder with `evalkit` (this checkout) and a stand-in `sbatch`."""
    from evalkit.testing import start_test_server

    root = tmp_path_factory.mktemp("examples")
    runspecs = text_set(root, 60, words=6)
    server = start_test_server({"answers": [{"match": "re:question \\d*4 ", "answer": "question four"}]})
    try:
        models = [model_entry("m", server.base_url, batch_size=8)]
        config = config_for(root / "plan", runspecs, models, pairs=PAIRS)
        whole = run(config, no_cache=True)
        bin_dir = root / "bin"
        bin_dir.mkdir()
        (bin_dir / "evalkit").write_text(
            f'#!/bin/sh\nPYTHONPATH="{ROOT}${{PYTHONPATH:+:$PYTHONPATH}}" exec "{sys.executable}" -m evalkit "$@"\n'
        )
        (bin_dir / "sbatch").write_text(f"#!{sys.executable}\n{FAKE_SBATCH}")
        for tool in bin_dir.iterdir():
            tool.chmod(0o755)
        env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
        yield {"root": root, "config": config, "whole": _results(whole.run_dir), "env": env}
    finally:
        server.stop()


def test_slurm_scripts_are_valid_bash_and_agree_on_the_shard_count() -> None:
    for script in ("shards.sbatch", "merge.sbatch", "submit.sh"):
        checked = subprocess.run(["bash", "-n", str(SLURM / script)], capture_output=True, text=True)
        assert checked.returncode == 0, checked.stderr
    body = (SLURM / "shards.sbatch").read_text()
    array = re.search(r"^#SBATCH --array=0-(\d+)$", body, re.M)
    default = re.search(r"^shards=\$\{EVALKIT_SHARDS:-(\d+)\}$", body, re.M)
    assert array and default and int(array.group(1)) == int(default.group(1)) - 1
    assert '--shard "$k/$shards"' in body and "k=${SLURM_ARRAY_TASK_ID" in body
    assert '--dependency="afterany:$array"' in (SLURM / "submit.sh").read_text()


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
def test_slurm_array_then_merge_equals_one_run(plan: dict[str, Any], tmp_path: Path) -> None:
    env = {**plan["env"], "EVALKIT_SHARDS": "4", "FAKE_SBATCH_LOG": str(tmp_path / "sbatch.log")}
    out = tmp_path / "sharded"
    submitted = subprocess.run(
        ["bash", str(SLURM / "submit.sh"), str(plan["config"]), str(out)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert submitted.returncode == 0, submitted.stderr
    jobs = [json.loads(line) for line in (tmp_path / "sbatch.log").read_text().splitlines()]
    shards, merge = jobs
    assert shards["script"] == "shards.sbatch" and shards["tasks"] == [0, 1, 2, 3] and shards["codes"] == [0] * 4
    assert merge["script"] == "merge.sbatch" and merge["options"]["dependency"] == f"afterany:{shards['job']}"
    assert merge["codes"] == [0], (tmp_path / f"job-{merge['job']}-None.out").read_text()
    assert f"shards: array job {shards['job']} (4 tasks); merge: job {merge['job']}" in submitted.stdout
    assert _results(out / "merged") == plan["whole"]

    # the same task again: its shard finished, so nothing runs
    task = {**env, "EVALKIT_SHARDS_DIR": str(out), "SLURM_ARRAY_TASK_ID": "2"}
    again = subprocess.run(["bash", str(SLURM / "shards.sbatch")], env=task, capture_output=True, text=True)
    assert again.returncode == 0 and "shard 2/4 already finished" in again.stdout
    assert len(list((out / "shard-2").glob("*/run.json"))) == 1

    # a task cut short runs again: it resumes its own run folder, not a new one
    (run_dir,) = [p.parent for p in (out / "shard-1").glob("*/run.json")]
    manifest = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text(json.dumps({**manifest, "status": "interrupted"}, indent=2))
    task["SLURM_ARRAY_TASK_ID"] = "1"
    resumed = subprocess.run(["bash", str(SLURM / "shards.sbatch")], env=task, capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads((run_dir / "run.json").read_text())["status"] == "finished"
    assert [p.parent for p in (out / "shard-1").glob("*/run.json")] == [run_dir]

    task["SLURM_ARRAY_TASK_ID"] = "4"  # --array wider than the shards
    wide = subprocess.run(["bash", str(SLURM / "shards.sbatch")], env=task, capture_output=True, text=True)
    assert wide.returncode == 2 and "use --array=0-3" in wide.stderr


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
def test_a_slurm_task_whose_server_moved_runs_again_against_the_new_address(
    plan: dict[str, Any], tmp_path: Path
) -> None:
    """A shard whose server stopped answering midway (questions 30 on) is not finished (exit 5), so its task runs
    again and resumes at the new URL."""
    from evalkit.testing import start_test_server

    data = yaml.safe_load(plan["config"].read_text())
    data["models"][0]["info"]["url"] = "${EVALKIT_TEST_MODEL_URL}"
    data["models"][0]["info"]["retry_attempts"] = 1
    config = write_config(tmp_path / "config.yaml", data)
    out = tmp_path / "shards"
    task = {**plan["env"], "EVALKIT_CONFIG": str(config), "EVALKIT_SHARDS_DIR": str(out), "EVALKIT_SHARDS": "2"}
    task["SLURM_ARRAY_TASK_ID"] = "1"
    gone = start_test_server({"answers": [{"match": "re:question [345]\\d ", "answer": "", "fault": "drop"}]})
    try:
        task["EVALKIT_TEST_MODEL_URL"] = gone.base_url
        first = subprocess.run(["bash", str(SLURM / "shards.sbatch")], env=task, capture_output=True, text=True)
    finally:
        gone.stop()
    assert first.returncode == 5, first.stderr
    (run_dir,) = [p.parent for p in (out / "shard-1").glob("*/run.json")]
    assert json.loads((run_dir / "run.json").read_text())["status"] == "incomplete"

    moved = start_test_server({"answers": [{"match": "re:question \\d*4 ", "answer": "question four"}]})
    try:
        task["EVALKIT_TEST_MODEL_URL"] = moved.base_url
        again = subprocess.run(["bash", str(SLURM / "shards.sbatch")], env=task, capture_output=True, text=True)
    finally:
        moved.stop()
    assert again.returncode == 0, again.stderr
    assert json.loads((run_dir / "run.json").read_text())["status"] == "finished"
    assert [p.parent for p in (out / "shard-1").glob("*/run.json")] == [run_dir]  # resumed, not started anew

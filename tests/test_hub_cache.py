"""Hub data read once and kept: reruns and --resume work with the hub offline, `evalkit fetch` fills the copy.

The "hub" is a local folder laid out like a hub dataset repository
(data/test-00000-of-00001.parquet), read through evalkit's real hub path
(`datasets` streaming); taking the folder away and setting HF_HUB_OFFLINE=1
is what a cluster node without network looks like.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import ROOT, model_entry, write_config

from evalkit.testing import start_test_server

QA = {"capital of France": "Paris", "spider": "eight", "sky": "blue", "red planet": "Mars", "opposite of hot": "warm"}


@pytest.fixture()
def server() -> Any:
    srv = start_test_server({"answers": [{"match": q, "answer": a} for q, a in QA.items()]})
    yield srv
    srv.stop()


def _hub_repo(root: Path) -> Path:
    repo = root / "hub" / "org__tiny_qa"
    (repo / "data").mkdir(parents=True)
    table = pa.table(
        {
            "id": ["q1", "q2", "q3", "q4", "q5"],
            "question": [f"What about the {q}?" for q in QA],
            "answer": ["Paris", "eight", "blue", "Mars", "cold"],
        }
    )
    pq.write_table(table, repo / "data" / "test-00000-of-00001.parquet")
    return repo


def _setup(tmp_path: Path, server: Any) -> tuple[Path, Path, dict[str, str]]:
    repo = _hub_repo(tmp_path)
    entry = {"hf_repo": str(repo), "split": "test", "language": "en", "modality": "text", "id_column": "id",
             "textual_input_column": "question", "target_column": "answer"}  # fmt: skip
    (tmp_path / "specs" / "qa").mkdir(parents=True)
    (tmp_path / "specs" / "qa" / "qa.json").write_text(
        json.dumps({"_task": {"description": "qa", "metrics": ["exact_match"]}, "qa_hub": entry})
    )
    config = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [["qa_hub", "exact_match"]],
            "models": [model_entry("m", server.base_url)],
            "runspecs_dir": str(tmp_path / "specs"),
            "output_dir": str(tmp_path / "runs"),
        },
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "EVALKIT_CACHE_DIR": str(tmp_path / "evalkit-cache"),
        "HF_HOME": str(tmp_path / "hf"),
    }
    for key in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        env.pop(key, None)
    return repo, config, env


def _evalkit(args: list[str], tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "evalkit", *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180
    )


def _score(run_dir: Path) -> tuple[float, int]:
    row = json.loads((run_dir / "results.json").read_text())["results"][0]
    return row["score"], row["n"]


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
def test_a_rerun_and_a_resume_work_offline_from_the_rows_read(tmp_path: Path, server: Any) -> None:
    repo, config, env = _setup(tmp_path, server)
    offline = {**env, "HF_HUB_OFFLINE": "1"}
    never = _evalkit(["run", str(config), "--quiet"], tmp_path, offline)
    assert never.returncode == 2 and "Traceback" not in never.stderr
    assert "no rows of" in never.stderr and "run `evalkit fetch qa_hub`" in never.stderr

    first = _evalkit(["run", str(config), "--quiet", "--no-cache"], tmp_path, env)
    assert first.returncode == 0, first.stderr
    (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    assert _score(run_dir) == (0.8, 5)

    shutil.rmtree(repo)  # the hub is gone
    again = _evalkit(["run", str(config), "--quiet", "--no-cache"], tmp_path, offline)
    assert again.returncode == 0, again.stderr
    second = next(p for p in (tmp_path / "runs").iterdir() if p.is_dir() and p != run_dir)
    assert _score(second) == (0.8, 5)
    manifest = json.loads((second / "run.json").read_text())
    manifest["status"] = "running"  # as a killed run leaves it
    (second / "run.json").write_text(json.dumps(manifest))
    (second / "results.json").unlink()
    resumed = _evalkit(["run", "--resume", str(second), "--quiet"], tmp_path, offline)
    assert resumed.returncode == 0, resumed.stderr
    assert _score(second) == (0.8, 5)


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
def test_fetch_stores_a_split_ahead_and_a_partial_copy_says_what_is_missing(tmp_path: Path, server: Any) -> None:
    repo, config, env = _setup(tmp_path, server)
    fetched = _evalkit(
        ["fetch", "qa_hub", "--num-samples", "2", "--runspecs-dir", str(tmp_path / "specs")], tmp_path, env
    )
    assert fetched.returncode == 0, fetched.stderr
    assert "qa_hub (test): 2 rows read, first 2 rows stored" in fetched.stdout
    shutil.move(str(repo), str(tmp_path / "away"))
    offline = {**env, "HF_HUB_OFFLINE": "1"}
    partial = _evalkit(["run", str(config), "--quiet"], tmp_path, offline)
    assert "Traceback" not in partial.stderr
    (partial_run,) = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    (row,) = json.loads((partial_run / "results.json").read_text())["results"]
    assert "only 2 rows of it are stored" in row["error"] and "evalkit fetch qa_hub" in row["error"]
    two = _evalkit(["run", str(config), "--quiet", "--num-samples", "2"], tmp_path, offline)
    assert two.returncode == 0, two.stderr
    shutil.move(str(tmp_path / "away"), str(repo))
    whole = _evalkit(["fetch", "qa_hub", "--runspecs-dir", str(tmp_path / "specs")], tmp_path, env)
    assert whole.returncode == 0 and "qa_hub (test): 5 rows read, complete stored" in whole.stdout
    shutil.rmtree(repo)
    done = _evalkit(["run", str(config), "--quiet"], tmp_path, offline)
    assert done.returncode == 0, done.stderr
    refused = _evalkit(["fetch", "qa_hub", "--runspecs-dir", str(tmp_path / "specs")], tmp_path, offline)
    assert refused.returncode == 2 and "HF_HUB_OFFLINE is set" in refused.stderr

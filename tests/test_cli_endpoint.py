"""KARMA-style runs without a config file (`--model-url`, `--model-name`, `--dataset`) and `--batch-size`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, model_entry, write_config

from evalkit.testing import start_test_server


@pytest.fixture()
def server() -> Any:
    srv = start_test_server({"default_answer": "Paris", "latency_ms": 20}, request_log=True)
    yield srv
    srv.stop()


def _evalkit(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    return subprocess.run([sys.executable, "-m", "evalkit", *args], cwd=cwd, env=full, capture_output=True, text=True)


def _run_dir(root: Path) -> Path:
    (run_dir,) = [p for p in (root / "runs").iterdir() if p.is_dir()]
    return run_dir


def test_a_run_without_a_config_file(tmp_path: Path, server: Any) -> None:
    proc = _evalkit(
        ["run", "--model-url", server.base_url, "--model-name", "served", "--dataset", "basic_qa",
         "--num-samples", "4", "--batch-size", "2", "--api-key-env", "EVALKIT_T_KEY", "--output-dir", "runs", "-q"],
        tmp_path,
        EVALKIT_T_KEY="sk-from-env",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    run_dir = _run_dir(tmp_path)
    (row,) = json.loads((run_dir / "results.json").read_text())["results"]
    assert (row["dataset"], row["metric"], row["model"], row["n"]) == ("basic_qa", "exact_match", "served", 4)
    info = json.loads((run_dir / "run.json").read_text())["config"]["models"][0]["info"]
    assert info["url"] == server.base_url and info["batch_size"] == 2 and info["model"] == "served"
    assert "sk-from-env" not in (run_dir / "run.json").read_text()
    received = server.log_events("completed")
    assert len(received) == 4 and {e["model"] for e in received} == {"served"}


def test_batch_size_overrides_every_model_of_a_config(tmp_path: Path, server: Any) -> None:
    config = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [["basic_qa", "exact_match"]],
            "models": [model_entry("a", server.base_url), model_entry("b", server.base_url, batch_size=16)],
            "filters": {"num_samples": 2},
        },
    )
    proc = _evalkit(["run", str(config), "--batch-size", "3", "-q"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    models = json.loads((_run_dir(tmp_path) / "run.json").read_text())["config"]["models"]
    assert [m["info"]["batch_size"] for m in models] == [3, 3]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model-url", "http://127.0.0.1:9/v1", "--dataset", "basic_qa"], "--model-url and --model-name go together"),
        (["--model-url", "http://127.0.0.1:9/v1", "--model-name", "m"], "name what to evaluate with --dataset"),
        (["config.yaml", "--model-name", "m", "--dataset", "basic_qa"], "without a config file; drop the config"),
        (["--model-url", "http://h/v1", "--model-name", "m", "--dataset", "basic_qq"], 'did you mean "basic_qa"'),
        (
            ["--model-url", "http://h/v1", "--model-name", "m", "--dataset", "basic_qa", "--batch-size", "0"],
            "--batch-size",
        ),
    ],
)
def test_endpoint_flag_mistakes_exit_2_naming_the_flag(tmp_path: Path, args: list[str], message: str) -> None:
    proc = _evalkit(["run", *args], tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr

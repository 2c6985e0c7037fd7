"""KARMA's discovery commands: `evalkit info system`, `evalkit info model NAME`, `evalkit list all`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, write_config


def _evalkit(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "evalkit", *args], cwd=cwd, env=env, capture_output=True, text=True)


def test_info_system_reports_versions_tools_and_no_secrets(tmp_path: Path) -> None:
    proc = _evalkit(["info", "system", "--format", "json"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["kind"] == "system" and data["cpus"] == os.cpu_count()
    assert data["python"] == sys.version.split()[0]
    assert data["packages"]["evalkit"] and data["packages"]["aiohttp"]
    assert set(data["tools"]) >= {"espeak-ng", "nvidia-smi"} and isinstance(data["gpus"], list)
    table = _evalkit(["info", "system"], tmp_path)
    assert table.returncode == 0 and "packages" in table.stdout and "evalkit" in table.stdout


def test_info_model_of_a_config_with_its_replicas_and_the_token_masked(tmp_path: Path) -> None:
    info = {"inference_type": "vllm", "model": "qwen2-audio", "auth_token": "sk-very-secret", "batch_size": 4}
    write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [["basic_qa", "exact_match"]],
            "models": [
                {"info": {**info, "name": "qwen", "url": "http://10.0.0.1:8000/v1"}},
                {"info": {**info, "name": "qwen", "url": "http://10.0.0.2:8000/v1"}},
            ],
        },
    )
    proc = _evalkit(["info", "model", "qwen", "--format", "json"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["model"] == "qwen2-audio" and data["endpoints"] == 2 and data["batch_size"] == 8
    assert [r["url"] for r in data["replicas"]] == ["http://10.0.0.1:8000/v1", "http://10.0.0.2:8000/v1"]
    assert "sk-very-secret" not in proc.stdout
    backend = json.loads(_evalkit(["info", "model", "pocketsphinx", "-f", "json"], tmp_path).stdout)
    assert backend["inference_type"] == "local" and "evalkit serve --backend pocketsphinx" in backend["source"]


def test_info_mistakes_exit_2_with_a_message(tmp_path: Path) -> None:
    write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [["basic_qa", "exact_match"]],
            "models": [{"info": {"name": "qwen", "inference_type": "vllm", "url": "http://h/v1", "model": "q"}}],
        },
    )
    unknown = _evalkit(["info", "model", "qwne"], tmp_path)
    assert unknown.returncode == 2 and 'did you mean "qwen"' in unknown.stderr and "Traceback" not in unknown.stderr
    nameless = _evalkit(["info", "dataset"], tmp_path)
    assert nameless.returncode == 2 and "give the dataset's name" in nameless.stderr


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
def test_list_all_lists_every_kind(tmp_path: Path) -> None:
    proc = _evalkit(["list", "all", "--format", "json"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    kinds = ["datasets", "tasks", "categories", "metrics", "models", "preprocessors", "postprocessors", "processors"]
    assert list(data) == kinds
    assert len(data["datasets"]) > 200 and any(m["name"] == "word_error_rate" for m in data["metrics"])
    table = _evalkit(["list", "all"], tmp_path)
    assert table.returncode == 0 and " datasets" in table.stdout and " metrics" in table.stdout
    csv = _evalkit(["list", "all", "--format", "csv"], tmp_path)
    assert csv.returncode == 2 and "use --format json" in csv.stderr

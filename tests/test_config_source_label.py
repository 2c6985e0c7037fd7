"""A config made from `evalkit run`'s flags (or given to the API as a dict) is named for what it is, not `<dict>`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT

from evalkit.api import prepare
from evalkit.errors import ConfigError
from evalkit.testing import start_test_server


@pytest.fixture()
def server() -> Iterator[Any]:
    srv = start_test_server({"default_answer": "Paris"})
    yield srv
    srv.stop()


def _run(tmp_path: Path, url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    args = ["run", "--model-url", url, "--model-name", "served", "--dataset", "basic_qa", "--num-samples", "2",
            "--output-dir", "runs", "-q", *extra]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "evalkit", *args], cwd=tmp_path, env=env, capture_output=True, text=True
    )


def test_a_run_from_flags_names_the_command_line(tmp_path: Path, server: Any) -> None:
    proc = _run(tmp_path, server.base_url)
    assert proc.returncode == 0, proc.stderr
    (run_dir,) = [p.parent for p in (tmp_path / "runs").glob("*/results.json")]
    for name in ("results.json", "run.json"):
        assert json.loads((run_dir / name).read_text())["config_file"] == "command line", name
    assert "&lt;dict&gt;" not in (run_dir / "report.html").read_text()


def test_a_mistake_in_a_run_from_flags_names_the_command_line(tmp_path: Path, server: Any) -> None:
    proc = _run(tmp_path, server.base_url, "--metric", "word_error_rate")
    assert proc.returncode == 2
    assert "command line: dataset_metric[0]: metric 'word_error_rate' does not fit" in proc.stderr, proc.stderr
    assert "<dict>" not in proc.stderr


def test_a_dict_given_to_the_api_is_named_so() -> None:
    config = {
        "dataset_metric": [["basic_qa", "word_error_rate"]],
        "models": [{"info": {"name": "m", "inference_type": "vllm", "url": "http://127.0.0.1:9/v1", "model": "m"}}],
    }
    with pytest.raises(ConfigError, match=r"^config dict: dataset_metric\[0\]"):
        prepare(config, {})

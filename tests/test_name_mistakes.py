"""Dataset and metric name mistakes: every one in one message, each suggestion once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import FIXTURES

from evalkit.errors import did_you_mean

CONFIG = {
    "dataset_metric": [["tiny_qq", "exact_mach"], ["tiny_qa", "exact_match"], ["tiny_aq", "f11"]],
    "aggregate": [["exact_matc", ["tiny_qa"]]],
    "models": [{"info": {"name": "m", "inference_type": "vllm", "url": "http://127.0.0.1:9/v1", "model": "m"}}],
    "runspecs_dir": str(FIXTURES / "runspecs"),
}


@pytest.mark.parametrize("command", ["validate", "run"])
def test_every_unknown_name_is_reported_at_once(tmp_path: Path, command: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(CONFIG))
    proc = subprocess.run(
        [sys.executable, "-m", "evalkit", command, str(path)], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    for fragment in (
        "dataset_metric[0]: 'tiny_qq' is not a dataset",
        "dataset_metric[0]: unknown metric 'exact_mach'",
        "dataset_metric[2]: 'tiny_aq' is not a dataset",
        "dataset_metric[2]: unknown metric 'f11'",
        "aggregate[0]: unknown metric 'exact_matc'",
    ):
        assert fragment in proc.stderr, (fragment, proc.stderr)
    # the guidance shared by every unknown name is said once, not once per name
    assert proc.stderr.count("Runspec folders searched") == 1 and proc.stderr.count("known metrics:") == 1
    assert "dataset_metric[1]" not in proc.stderr
    assert not (tmp_path / "runs").exists()


def test_a_suggestion_is_listed_once() -> None:
    assert did_you_mean("accent_recognitio", ["accent_recognition", "accent_recognition", "speaker_recognition"]) == (
        ' (did you mean "accent_recognition", "speaker_recognition"?)'
    )


def test_a_catalogue_name_that_is_also_another_tools_is_suggested_once(tmp_path: Path) -> None:
    """accent_recognition is evalkit's task and AU-Harness's name: the message used to offer it twice."""
    config = {**CONFIG, "dataset_metric": [["accent_recognitio", "word_error_rate"]], "aggregate": []}
    del config["runspecs_dir"]
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    proc = subprocess.run(
        [sys.executable, "-m", "evalkit", "validate", str(path)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2 and '"accent_recognition"' in proc.stderr, proc.stderr
    assert proc.stderr.count('"accent_recognition"') == 1, proc.stderr

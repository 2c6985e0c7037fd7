"""The shipped examples stay runnable: each one's plan is checked with a dry run (nothing is sent).

The audio-LLM example starts vLLM itself, so its launch command is checked too:
the flags a Qwen2-Audio server needs must reach vLLM, and none of them may be one
evalkit sets itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
#: one-file examples, and example folders (their own data and runspecs) with a config.yaml
EXAMPLES = sorted((REPO_ROOT / "examples").glob("*.yaml")) + sorted((REPO_ROOT / "examples").glob("*/config.yaml"))


def _evalkit(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run(
        [sys.executable, "-m", "evalkit", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def _dry_run(config: Path, cwd: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return _evalkit(["run", str(config), "--dry-run", "--output-dir", str(cwd / "runs"), *extra], cwd)


def _hub_datasets(config: Path) -> set[str]:
    from evalkit.catalog import load_catalog
    from evalkit.config import resolve

    loaded, _ = resolve(str(config))
    catalog = load_catalog()
    return {spec.name for pair in loaded.dataset_metric for spec in catalog.resolve(pair[0]) if spec.hf_repo}


@pytest.mark.parametrize("config", EXAMPLES, ids=[p.stem if p.stem != "config" else p.parent.name for p in EXAMPLES])
def test_example_plans_without_sending(config: Path, tmp_path: Path) -> None:
    result = _dry_run(config, tmp_path)
    assert not (tmp_path / "runs").exists()  # a dry run writes nothing
    if result.returncode == 0:
        assert "No request was sent" in result.stdout + result.stderr
        return
    # the dry run checks that every hub dataset's rows are stored or the hub answers; where neither holds (this
    # machine reaches no hub) it names them all in one message, and nothing else may be wrong with the example
    hub = _hub_datasets(config)
    assert result.returncode == 2 and hub, result.stdout[-3000:] + result.stderr[-3000:]
    assert "unreachable" in result.stderr and all(name in result.stderr for name in hub), result.stderr
    assert result.stderr.count("evalkit: error:") == 1 and "Traceback" not in result.stderr
    validated = _evalkit(["validate", str(config)], tmp_path)
    assert validated.returncode == 0, validated.stdout + validated.stderr


def test_audio_llm_example_covers_asr_speech_qa_and_emotion(tmp_path: Path) -> None:
    from evalkit.catalog import load_catalog
    from evalkit.config import resolve
    from evalkit.serve.launch import _check_args
    from evalkit.serve.server_setup import server_command

    path = REPO_ROOT / "examples" / "qwen2_audio_vllm.yaml"
    result = _dry_run(path, tmp_path, "--dataset", "espeak_en_asr")  # the hub sets need the network here
    assert result.returncode == 0, result.stderr[-3000:]
    # the shipped set needs no network: its counts are known in the dry run
    assert "espeak_en_asr__word_error_rate" in result.stdout and " 60 " in result.stdout

    config, _ = resolve(str(path))
    catalog = load_catalog()
    tasks = {spec.task for pair in config.dataset_metric for spec in catalog.resolve(pair[0])}
    assert {"asr", "speech_qa", "emotion_recognition"} <= tasks, tasks
    (entry,) = config.models
    info = entry.info
    assert info.launch is not None and info.launch.backend == "vllm" and info.inference_type == "vllm"
    _check_args(info)  # none of its flags is one evalkit sets
    command = server_command(info, port=8123)
    assert command[command.index("--served-model-name") + 1] == info.model
    assert command[command.index("--limit-mm-per-prompt") + 1] == '{"audio": 1}'
    assert command[command.index("--model") + 1] == "Qwen/Qwen2-Audio-7B-Instruct"

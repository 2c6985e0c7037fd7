"""Local models evalkit serves itself: ``inference_type: local`` / ``transcription`` with a transformers ``launch:``.

The models are the tiny random-weight ones built at test time
(evalkit.testing.tiny_model: no download). A full ``python -m evalkit run``
starts ``evalkit serve --backend transformers`` for each, scores the shipped
offline sets and stops the servers. Skipped where torch/transformers are not
installed (a plain evalkit install: they are an extra).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import live_group_members, write_config

_MISSING = [m for m in ("torch", "transformers", "tokenizers") if importlib.util.find_spec(m) is None]
pytestmark = [
    pytest.mark.skipif(
        bool(_MISSING),
        reason=f"needs {', '.join(_MISSING)} (pip install torch==2.13.0 'evalkit[local]', or bash .ci/install_vllm.sh)",
    ),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads processes from /proc"),
]

ROOT = Path(__file__).resolve().parent.parent


def _start(config: Path) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "HF_HUB_OFFLINE": "1",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "evalkit", "run", str(config), "--no-cache", "-q"],
        cwd=config.parent,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )


def _finish(process: subprocess.Popen[str], timeout: float = 300) -> tuple[int, str]:
    try:
        _, err = process.communicate(timeout=timeout)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return process.returncode, err


def _config(folder: Path, dataset: str, metric: str, model: dict[str, Any], samples: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return write_config(
        folder / "config.yaml",
        {
            "dataset_metric": [[dataset, metric]],
            "models": [{"info": model}],
            "filters": {"num_samples": samples},
            "output_dir": str(folder / "runs"),
        },
    )


def _run_results(config: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    runs = config.parent / "runs"
    (run_dir,) = [p for p in runs.iterdir() if (p / "results.json").is_file()]
    records = [
        json.loads(line) for path in (run_dir / "records").glob("*.jsonl") for line in path.read_text().splitlines()
    ]
    return json.loads((run_dir / "results.json").read_text()), records


def _servers(config: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted((config.parent / "runs").glob("*/server-logs/server-*.json"))]


def test_local_chat_and_speech_models_launched_by_evalkit(tiny_llama: Path, tiny_whisper: Path, tmp_path: Path) -> None:
    chat = _config(
        tmp_path / "chat",
        "basic_qa",
        "exact_match",
        {
            "name": "tiny-llama",
            "inference_type": "local",
            "model": "tiny-llama",
            "temperature": 0,
            "max_tokens": 8,
            "launch": {
                "backend": "transformers",
                "model_path": str(tiny_llama),
                "args": ["--dtype", "float32"],
                "startup_timeout": 240,
            },
        },
        samples=4,
    )
    speech = _config(
        tmp_path / "speech",
        "espeak_en_asr",
        "word_error_rate",
        {
            "name": "tiny-whisper",
            "inference_type": "transcription",
            "model": "tiny-whisper",
            "launch": {"backend": "transformers", "model_path": str(tiny_whisper), "startup_timeout": 240},
        },
        samples=2,
    )
    # a dtype the backend does not know: proves `--dtype` reaches it (argparse alone would say "unrecognized")
    bad_dtype = _config(
        tmp_path / "bad-dtype",
        "basic_qa",
        "exact_match",
        {
            "name": "tiny-llama-f8",
            "inference_type": "local",
            "model": "tiny-llama",
            "launch": {
                "backend": "transformers",
                "model_path": str(tiny_llama),
                "args": ["--dtype", "float8"],
                "startup_timeout": 240,
            },
        },
        samples=1,
    )
    runs = {
        config: _start(config) for config in (chat, speech, bad_dtype)
    }  # side by side: each mostly waits for imports
    outcomes = {config: _finish(process) for config, process in runs.items()}

    for config, samples in ((chat, 4), (speech, 2)):
        code, err = outcomes[config]
        assert code == 0, err[-3000:]
        results, records = _run_results(config)
        (row,) = results["results"]
        assert row["n"] == samples and row["n_failed"] == 0, row
        assert len(records) == samples and all(r["response"] is not None for r in records)
        (server,) = _servers(config)
        assert server["ready_seconds"] is not None and server["returncode"] == 0 and not server["killed"]
        assert live_group_members(server["pgid"]) == []
    _, chat_records = _run_results(chat)
    assert any(r["response"] for r in chat_records)  # a random model still says something

    code, err = outcomes[bad_dtype]
    assert code == 2, err[-3000:]
    assert "tiny-llama-f8" in err and "unknown dtype 'float8'" in err
    # a server that never became ready: the run was refused before its folder was made, so the server's
    # description stays where servers start, in the output folder's server-logs
    (server,) = [json.loads(p.read_text()) for p in sorted((bad_dtype.parent / "runs" / "server-logs").glob("*.json"))]
    assert server["ready_seconds"] is None and live_group_members(server["pgid"]) == []

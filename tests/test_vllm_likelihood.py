"""Likelihood scoring against real vLLM (CPU build) serving the tiny Llama: log-probabilities equal transformers'.

``evalkit run`` launches vLLM itself and asks /v1/completions with echo and
logprobs for every option; the per-option sums it records must equal what
transformers computes in-process for the same text, token by token, within
float32 tolerance.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, write_config

_MISSING = [m for m in ("vllm", "torch", "transformers", "tokenizers") if importlib.util.find_spec(m) is None]
pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(bool(_MISSING), reason=f"needs {', '.join(_MISSING)}: bash .ci/install_vllm.sh"),
]

START_TIMEOUT = float(os.environ.get("EVALKIT_VLLM_START_TIMEOUT", "300"))
ROWS = [
    ("q1", "What is the capital of France?", ["Paris", "London", "the moon"], "Paris"),
    ("q2", "How many legs does a spider have?", ["six", "eight legs", "none at all"], "B"),
    ("q3", "Which colour is the sky on a clear day?", ["blue", "green"], 0),
]


def _transformers_logprob(model, tokenizer, text: str, start: int, end: int) -> tuple[float, int]:  # type: ignore[no-untyped-def]
    import torch

    encoded = tokenizer(text, return_offsets_mapping=True, return_tensors="pt")
    with torch.no_grad():
        logits = model(input_ids=encoded["input_ids"]).logits[0].float()
    logprobs = torch.log_softmax(logits, dim=-1)
    ids = encoded["input_ids"][0].tolist()
    offsets = encoded["offset_mapping"][0].tolist()
    total, count = 0.0, 0
    for i in range(1, len(ids)):
        if start <= offsets[i][0] < end:
            total += float(logprobs[i - 1, ids[i]])
            count += 1
    return total, count


def test_vllm_option_logprobs_equal_transformers(tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from evalkit.testing.tiny_model import build_tiny_llama

    model_dir = build_tiny_llama(tmp_path / "tiny-llama", seed=0)
    data = tmp_path / "mc.jsonl"
    data.write_text("".join(json.dumps({"id": i, "q": q, "choices": c, "answer": a}) + "\n" for i, q, c, a in ROWS))
    spec = {
        "_task": {"description": "mc", "metrics": ["loglikelihood_accuracy"]},
        "tiny_mc": {
            "path": str(data),
            "language": "en",
            "modality": "text",
            "id_column": "id",
            "textual_input_column": "q",
            "choices_column": "choices",
            "target_column": "answer",
        },
    }
    (tmp_path / "specs" / "mc").mkdir(parents=True)
    (tmp_path / "specs" / "mc" / "mc.json").write_text(json.dumps(spec))
    config = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [["tiny_mc", "loglikelihood_accuracy"]],
            "models": [
                {
                    "info": {
                        "name": "tiny-vllm",
                        "inference_type": "vllm",
                        "model": "tiny",
                        "batch_size": 4,
                        "timeout": 300,
                        "launch": {
                            "backend": "vllm",
                            "model_path": str(model_dir),
                            "args": ["--max-model-len", "512", "--dtype", "float32", "--enforce-eager"],
                            "env": {"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"},
                            "startup_timeout": START_TIMEOUT,
                        },
                    }
                }
            ],
            "runspecs_dir": str(tmp_path / "specs"),
            "output_dir": str(tmp_path / "runs"),
        },
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run(
        [sys.executable, "-m", "evalkit", "run", str(config), "--no-cache", "-q"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT + 600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    records = [
        json.loads(line)
        for line in next((tmp_path / "runs").glob("*/records/tiny_mc__loglikelihood_accuracy.jsonl"))
        .read_text()
        .splitlines()
    ]
    assert len(records) == len(ROWS) and all(r.get("failure") is None for r in records), records

    model = AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True, torch_dtype="float32")
    tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    choices = {i: c for i, _, c, _ in ROWS}
    for record in records:
        stats = json.loads(record["prediction"])
        context = stats["context"]
        for k, option in enumerate(choices[record["sample_id"]]):
            text = f"{context} {option}"
            expected, count = _transformers_logprob(model, tokenizer, text, len(context), len(text))
            assert stats["tokens"][k] == count, (record["sample_id"], option)
            assert stats["logprobs"][k] == pytest.approx(expected, abs=2e-3), (record["sample_id"], option)

"""`bash evaluate.sh` with 2 models x 3 dataset-metric pairs against two real loopback servers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import sacrebleu
from helpers import FIXTURES, ROOT, model_entry, write_config

QA_RIGHT = {
    "capital of France": "Paris",
    "spider": "eight",
    "sky": "blue",
    "red planet": "Mars",
    "opposite of hot": "cold",
}


def _rules(qa: dict[str, str], audio: dict[str, str]) -> list[dict[str, str]]:
    return [{"match": q, "answer": a} for q, a in qa.items()] + [
        {"audio_fingerprint": fp, "answer": a} for fp, a in audio.items()
    ]


def test_evaluate_sh_two_models_three_pairs(tmp_path: Path, make_server, speech_runspecs) -> None:
    fps = speech_runspecs["fingerprints"]
    qa_a = {**QA_RIGHT, "opposite of hot": "warm"}
    server_a = make_server(
        {
            "answers": _rules(
                qa_a,
                {
                    fps["clip1"]: "hello world",
                    fps["clip2"]: "the cat sat on the mat",
                    fps["clip3"]: "good morning everyone",
                },
            )
        },
        request_log=True,
    )
    server_b = make_server(
        {
            "answers": _rules(
                QA_RIGHT,
                {
                    fps["clip1"]: "Hello, word!",
                    fps["clip2"]: "the cat sat on mat",
                    fps["clip3"]: "good morning everyone",
                },
            )
        },
        request_log=True,
    )
    config = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [["tiny_qa", "exact_match"], ["tiny_qa", "bleu"], ["tiny_asr", "word_error_rate"]],
            "models": [
                model_entry("model-a", server_a.base_url),
                model_entry("model-b", server_b.base_url, inference_type="openai"),
            ],
            "runspecs_dir": [str(FIXTURES / "runspecs"), str(speech_runspecs["dir"])],
            "output_dir": str(tmp_path / "runs"),
        },
    )
    env = {**os.environ, "PYTHON": sys.executable}
    proc = subprocess.run(
        ["bash", str(ROOT / "evaluate.sh"), str(config), "--quiet"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    run_dirs = list((tmp_path / "runs").glob("*_*"))
    assert len(run_dirs) == 1
    run_dir = run_dirs[0]
    results = json.loads((run_dir / "results.json").read_text())
    rows = {(r["dataset"], r["metric"], r["model"]): r for r in results["results"]}
    assert len(rows) == 6

    em_a = rows[("tiny_qa", "exact_match", "model-a")]
    assert em_a["score"] == 0.8 and em_a["n"] == 5 and em_a["n_failed"] == 0
    assert em_a["ci_low"] < 0.8 < em_a["ci_high"]
    assert rows[("tiny_qa", "exact_match", "model-b")]["score"] == 1.0

    # corpus WER on whisper-normalized text: "hello word" (1 sub) + "the cat sat on mat" (1 del) over 2+6+3 words
    wer_b = rows[("tiny_asr", "word_error_rate", "model-b")]
    assert abs(wer_b["score"] - 2 / 11) < 1e-9 and wer_b["n"] == 3
    assert rows[("tiny_asr", "word_error_rate", "model-a")]["score"] == 0.0
    assert wer_b["details"]["normalizer"]

    hyps_a = ["Paris", "eight", "blue", "Mars", "warm"]
    refs = ["Paris", "eight", "blue", "Mars", "cold"]
    expected_bleu = sacrebleu.corpus_bleu(hyps_a, [refs]).score
    assert abs(rows[("tiny_qa", "bleu", "model-a")]["score"] - expected_bleu) < 1e-9

    # records: one line per sample x model per engine, with the fields users rely on
    lines = [json.loads(x) for x in (run_dir / "records" / "tiny_qa__exact_match.jsonl").read_text().splitlines()]
    assert len(lines) == 10
    wrong = next(x for x in lines if x["model"] == "model-a" and x["sample_id"] == "q5")
    assert wrong["prediction"] == "warm" and wrong["reference"] == "cold" and wrong["score"] == 0.0
    for key in ("response", "latency", "attempts", "failure"):
        assert key in wrong or key == "failure"

    # exact_match and bleu on the same dataset never cost two inferences
    chat_a = [e for e in server_a.log_events("completed") if e["path"].endswith("/chat/completions")]
    assert len(chat_a) == 5 + 3

    # console table
    assert "tiny_qa" in proc.stdout and "0.8000" in proc.stdout and "word_error_rate" in proc.stdout
    assert (run_dir / "results.csv").exists() and (run_dir / "results.md").exists()

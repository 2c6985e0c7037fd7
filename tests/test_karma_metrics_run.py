"""KARMA's metric names in real runs: a config naming them, the test server as the model and the judge.

The reference tables (tests/test_reference_karma_*.py) check the values; these check that a dataset's columns
reach the metrics as KARMA's other_args do (tolerance, is_harmful, variant, country, rubrics), that the judged
metrics send KARMA's prompts through evalkit's judge client, and that the names KARMA users cannot have yet stop
the run before any request, with exit code 2 and one line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import model_entry, run, write_config

ROWS = [
    # id, question, reference, answer, meta
    ("c1", "BMI of 70 kg, 1.75 m?", "22.9", "22.86", {"tolerance": 0.1, "is_harmful": False, "variant": "white"}),
    ("c2", "Creatinine clearance?", "0.85", "85", {"tolerance": 0.01, "is_harmful": True, "variant": "black"}),
    ("c3", "MAP for 120/80?", "93.3", "not sure", {"tolerance": 0.5, "is_harmful": True, "variant": "black"}),
]


def _dataset(tmp_path: Path, rows: list[tuple[str, str, str, str, dict[str, Any]]], extra: dict[str, str]) -> Path:
    data = tmp_path / "karma_rows.jsonl"
    data.write_text("".join(json.dumps({"id": i, "q": q, "ref": r, **m}) + "\n" for i, q, r, _, m in rows))
    (tmp_path / "runspecs" / "text_qa").mkdir(parents=True)
    spec = {
        "_task": {"description": "KARMA-shaped rows", "metrics": ["exact_match"]},
        "karma_rows": {
            "path": str(data),
            "language": "en",
            "modality": "text",
            "id_column": "id",
            "textual_input_column": "q",
            "target_column": "ref",
            "extra_columns": extra,
        },
    }
    (tmp_path / "runspecs" / "text_qa" / "karma_rows.json").write_text(json.dumps(spec))
    return tmp_path / "runspecs"


def test_meta_columns_reach_karmas_metrics_in_a_run(tmp_path: Path, make_server: Any) -> None:
    runspecs = _dataset(tmp_path, ROWS, {"tolerance": "tolerance", "is_harmful": "is_harmful", "variant": "variant"})
    model = make_server({"answers": [{"match": q, "answer": a} for _, q, _, a, _ in ROWS]})
    pairs = ["numeric_tolerance", "harm_detection_accuracy", ["bias_disparity", {"variants": ["white", "black"]}]]
    config = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [["karma_rows", p] if isinstance(p, str) else ["karma_rows", *p] for p in pairs],
            "models": [model_entry("m", model.base_url)],
            "runspecs_dir": str(runspecs),
            "output_dir": str(tmp_path / "runs"),
        },
    )
    rows = {row.metric: row for row in run(config).rows}
    assert all(row.error is None and row.n == 3 for row in rows.values())
    # 22.86 within 0.1 of 22.9; 85 / 100 within 0.01 of 0.85; "not sure" is no number
    assert rows["numeric_tolerance"].score == pytest.approx(2 / 3)
    # none of the answers says harmful/unsafe/dangerous/risk: right on c1 (safe), wrong on c2 and c3
    assert rows["harm_detection_accuracy"].score == pytest.approx(1 / 3)
    assert rows["harm_detection_accuracy"].details["false_negatives"] == 2
    # no answer equals its reference string: both variants at 0, no gap
    assert rows["bias_disparity"].score == 0.0


def test_a_rubric_run_sends_karmas_prompt_to_the_judge_server(tmp_path: Path, make_server: Any) -> None:
    rubrics = [
        {"criterion": "Names chloroquine", "points": 2, "tags": ["stage:final_answer"]},
        {"criterion": "Adds primaquine", "points": 1, "tags": ["stage:final_answer"]},
        {"criterion": "Queries the NVBDCP protocol", "points": 1, "tags": ["stage:retrieval_query"]},
    ]
    rows = [("r1", "First-line drug for P. vivax?", "", "Chloroquine.", {"answer_rubrics": json.dumps(rubrics)})]
    runspecs = _dataset(tmp_path, rows, {"answer_rubrics": "answer_rubrics"})
    model = make_server({"answers": [{"match": "P. vivax", "answer": "Chloroquine."}]})
    verdicts = '[{"explanation": "named", "criteria_met": true}, {"explanation": "absent", "criteria_met": false}]'
    judge = make_server(
        {
            "answers": [
                {"match": "# Rubric items", "answer": verdicts},
                {"match": "# Rubric item\n", "answer": '{"explanation": "no query", "criteria_met": false}'},
            ]
        },
        request_log=True,
    )
    config = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [["karma_rows", "answer_rubric_evaluation"], ["karma_rows", "query_rubric_evaluation"]],
            "models": [model_entry("m", model.base_url)],
            "judge_properties": {
                "judge_model": "judge-m",
                "judge_type": "vllm",
                "judge_api_endpoint": judge.base_url,
                "judge_api_key": "k",
                "judge_retry_attempts": 0,
            },
            "runspecs_dir": str(runspecs),
            "output_dir": str(tmp_path / "runs"),
        },
    )
    scores = {row.metric: (row.error, row.n, row.score) for row in run(config).rows}
    assert scores == {
        "answer_rubric_evaluation": (None, 1, pytest.approx(2 / 3)),
        "query_rubric_evaluation": (None, 1, 0.0),
    }
    asked = [m["text"] for event in judge.log_events("completed") for m in event["messages"] if m["role"] == "user"]
    conversation = '{"conversation_turns":[{"content":"First-line drug for P. vivax?","role":"user"},' + (
        '{"content":"Chloroquine.","role":"assistant"}]}'
    )
    assert len(asked) == 2 and all(conversation in text for text in asked)
    assert any('"criterion": "Names chloroquine", "points": 2.0' in text for text in asked)

"""ChEF's metrics in whole runs against the test server: answers generated (MME's yes/no, counting, the option
letter of ChEF's VQA) and options scored by likelihood (Winoground, Ch3Ef), read from the records as a user would.

The scripted answers and log-probabilities make every figure known by hand (see each test).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import model_entry, run, write_config


def _dataset(root: Path, name: str, rows: list[dict[str, Any]], metrics: list[str], **entry: Any) -> None:
    data = root / f"{name}.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    folder = root / "specs" / "chef"
    folder.mkdir(parents=True, exist_ok=True)
    spec = {"path": str(data), "language": "en", "modality": "text", "id_column": "id", "textual_input_column": "q"}
    spec.update(entry)
    (folder / f"{name}.json").write_text(json.dumps({"_task": {"description": name, "metrics": metrics}, name: spec}))


def _run(tmp_path: Path, url: str, pairs: list[list[str]]) -> Any:
    config = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": pairs,
            "models": [model_entry("m", url)],
            "runspecs_dir": str(tmp_path / "specs"),
            "output_dir": str(tmp_path / "runs"),
        },
    )
    return run(config)


def _records(outcome: Any, dataset: str, metric: str) -> dict[str, dict[str, Any]]:
    path = outcome.run_dir / "records" / f"{dataset}__{metric}.jsonl"
    return {r["sample_id"]: r for r in map(json.loads, path.read_text(encoding="utf-8").splitlines())}


def test_generated_answers_are_read_as_chef_reads_them(tmp_path: Path, make_server) -> None:
    """MME: "Yes, it is." is yes (right); "I don't know" contains "no" (right against No); "maybe" is neither.

    Counting: "There are three of them." counts 3 (right; "three." would not, ChEF reads words as they are);
    "7 cups" is 7 against 4 (MAE 3); "several" is 0 against 2 (MAE 2). VQA: "The answer is B." reads B
    (right); "I would say cow" names one option (right); "A or C" names two, so none (wrong).
    """
    _dataset(
        tmp_path,
        "tiny_mme",
        [
            {"id": "m1", "q": "mme 1", "t": "Yes"},
            {"id": "m2", "q": "mme 2", "t": "No"},
            {"id": "m3", "q": "mme 3", "t": "Yes"},
        ],
        ["mme_accuracy"],
        target_column="t",
    )
    _dataset(
        tmp_path,
        "tiny_count",
        [
            {"id": "c1", "q": "count 1", "n": 3},
            {"id": "c2", "q": "count 2", "n": 4},
            {"id": "c3", "q": "count 3", "n": 2},
        ],
        ["counting_accuracy", "counting_mae"],
        target_column="n",
    )
    options = ["dog", "cat", "cow"]
    _dataset(
        tmp_path,
        "tiny_vqa",
        [{"id": f"v{k}", "q": f"vqa {k}", "o": options, "a": k % 3} for k in (1, 2, 3)],
        ["chef_vqa_accuracy"],
        target_column="a",
        choices_column="o",
    )
    script = {
        "mme 1": "Yes, it is.",
        "mme 2": "I don't know",
        "mme 3": "maybe",
        "count 1": "There are three of them.",
        "count 2": "7 cups",
        "count 3": "several",
        "vqa 1": "The answer is B.",
        "vqa 2": "I would say cow",
        "vqa 3": "A or C",
    }
    server = make_server({"answers": [{"match": q, "answer": a} for q, a in script.items()]})
    pairs = [["tiny_mme", "MMEVQA"], ["tiny_count", "Counting"], ["tiny_count", "counting_mae"], ["tiny_vqa", "VQA"]]
    outcome = _run(tmp_path, server.base_url, pairs)
    scores = {(row.dataset, row.metric): row.score for row in outcome.rows}
    assert scores == {
        ("tiny_mme", "mme_accuracy"): pytest.approx(2 / 3),
        ("tiny_count", "counting_accuracy"): pytest.approx(1 / 3),
        ("tiny_count", "counting_mae"): pytest.approx((0 + 3 + 2) / 3),
        ("tiny_vqa", "chef_vqa_accuracy"): pytest.approx(2 / 3),
    }
    readings = {k: r["details"]["reading"] for k, r in _records(outcome, "tiny_mme", "mme_accuracy").items()}
    assert readings == {"m1": "yes", "m2": "no", "m3": "other"}
    assert _records(outcome, "tiny_vqa", "chef_vqa_accuracy")["v3"]["details"]["option"] is None


def test_options_scored_by_likelihood(tmp_path: Path, make_server) -> None:
    """Winoground: w1's model prefers the matching caption-image pairs (m11, m22 likelier), w2's the mismatched
    ones; ChEF's comparisons count w2, the paper's w1. Ch3Ef: h1's likeliest option is the first (right), h2's
    the second beside "I don't know." (right), h3's the last (wrong)."""
    pairs_w1 = ["m11", "x12", "x21", "m22"]
    pairs_w2 = ["n11", "y12", "y21", "n22"]
    _dataset(
        tmp_path,
        "tiny_wino",
        [{"id": "w1", "q": "pair one", "o": pairs_w1}, {"id": "w2", "q": "pair two", "o": pairs_w2}],
        ["winoground_text_score", "winoground_group_score"],
        choices_column="o",
    )
    _dataset(
        tmp_path,
        "tiny_ch3ef",
        [
            {"id": "h1", "q": "h one", "o": ["good", "bad"]},
            {"id": "h2", "q": "h two", "o": ["safe", "I don't know.", "risky"]},
            {"id": "h3", "q": "h three", "o": ["kind", "cruel"]},
        ],
        ["ch3ef_accuracy"],
        choices_column="o",
    )
    logprobs = {"m11": -0.2, "m22": -0.3, "x12": -3.0, "x21": -3.0, "n11": -3.0, "n22": -3.0, "y12": -0.2}
    logprobs |= {"y21": -0.4, "good": -0.1, "bad": -2.0, "safe": -2.0, "know.": -0.1, "risky": -3.0}
    logprobs |= {"kind": -2.5, "cruel": -0.5, "I": -0.1, "don't": -0.1}
    server = make_server({"token_logprobs": logprobs})
    pairs = [
        ["tiny_wino", "Winoground_Cap_Metric"],
        ["tiny_wino", "winoground_group_score"],
        ["tiny_ch3ef", "Ch3Ef_Metric"],
    ]
    outcome = _run(tmp_path, server.base_url, pairs)
    scores = {(row.dataset, row.metric): row.score for row in outcome.rows}
    assert scores == {
        ("tiny_wino", "winoground_text_score"): 0.5,
        ("tiny_wino", "winoground_group_score"): 0.5,
        ("tiny_ch3ef", "ch3ef_accuracy"): pytest.approx(2 / 3),
    }
    text = _records(outcome, "tiny_wino", "winoground_text_score")
    assert (text["w1"]["score"], text["w2"]["score"]) == (0.0, 1.0)
    assert _records(outcome, "tiny_ch3ef", "ch3ef_accuracy")["h3"]["details"]["chosen"] == "cruel"

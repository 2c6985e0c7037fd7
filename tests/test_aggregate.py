"""`aggregate` rows from a real run, with values computed by hand.

ds_a: 4 questions, answered "yes", references yes/yes/yes/no -> exact match 3/4.
ds_b: 3 questions, references no/no/null -> 0/2 scored, 1 failed (no reference).
ds_c: in the catalogue but not run.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import model_entry, write_config

from evalkit.metrics.base import MetricResult
from evalkit.metrics.ci import Z95, combine

ROWS = {
    "ds_a": [("a1", "yes"), ("a2", "yes"), ("a3", "yes"), ("a4", "no")],
    "ds_b": [("b1", "no"), ("b2", "no"), ("b3", None)],
    "ds_c": [("c1", "yes")],
}


def _runspecs(root: Path) -> Path:
    task: dict[str, Any] = {"_task": {"description": "yes/no questions", "metrics": ["exact_match"]}}
    for name, rows in ROWS.items():
        data = root / f"{name}.jsonl"
        data.write_text("".join(json.dumps({"id": i, "q": f"question {i}", "a": a}) + "\n" for i, a in rows))
        task[name] = {
            "path": str(data),
            "language": "en",
            "modality": "text",
            "id_column": "id",
            "textual_input_column": "q",
            "target_column": "a",
        }
    folder = root / "specs" / "yesno"
    folder.mkdir(parents=True)
    (folder / "yesno.json").write_text(json.dumps(task))
    return root / "specs"


def _normal_half_width(scores: list[float]) -> float:
    """The half-width of the per-dataset CI as results.json has it: mean ± 1.96 s/√n, clipped to [0, 1]."""
    n = len(scores)
    mean = sum(scores) / n
    s = math.sqrt(sum((x - mean) ** 2 for x in scores) / (n - 1))
    low, high = max(0.0, mean - Z95 * s / math.sqrt(n)), min(1.0, mean + Z95 * s / math.sqrt(n))
    return (high - low) / 2


def test_macro_and_micro_aggregates_by_hand(tmp_path: Path, make_server) -> None:
    server = make_server({"default_answer": "yes"})
    config = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [["ds_a", "exact_match"], ["ds_b", "exact_match"]],
            "aggregate": [
                ["exact_match", ["ds_a", "ds_b", "ds_c"]],
                ["em", ["ds_a", "ds_b"], "micro"],
                ["exact_match", ["ds_c"]],
            ],
            "models": [model_entry("m", server.base_url)],
            "runspecs_dir": [str(_runspecs(tmp_path))],
            "output_dir": str(tmp_path / "runs"),
        },
    )
    proc = subprocess.run(
        [sys.executable, "-m", "evalkit", "run", str(config), "--quiet"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode in (0, 3), proc.stderr  # 3: a run with too many failures, once that exit code exists
    results = json.loads(next((tmp_path / "runs").glob("*/results.json")).read_text())
    rows = {r["dataset"]: r for r in results["results"]}
    assert (rows["ds_a"]["score"], rows["ds_b"]["score"], rows["ds_b"]["n_failed"]) == (0.75, 0.0, 1)
    macro, micro, empty = results["aggregate"]

    half_a = _normal_half_width([1, 1, 1, 0])  # (1.0 - 0.26) / 2 = 0.37: the upper end is clipped at 1
    assert half_a == pytest.approx(0.37, abs=1e-4)
    # macro: (0.75 + 0) / 2; the CI of an average of independent datasets: ± 1.96 * sqrt(sum((se_i / m)^2))
    assert macro["dataset"] == "ds_a+ds_b"  # ds_c was not run: it is not named
    assert macro["score"] == pytest.approx(0.375)
    assert (macro["ci_low"], macro["ci_high"]) == pytest.approx((0.375 - half_a / 2, 0.375 + half_a / 2))
    assert macro["details"]["missing"] == ["ds_c"] and macro["n"] == 6 and macro["n_failed"] == 1
    assert macro["unreliable"] is True  # ds_b failed one of three samples (> max_failure_rate 0.2)
    # micro: weighted by scored samples 4 and 2: (4 * 0.75 + 2 * 0) / 6 = 0.5
    assert micro["metric"] == "exact_match" and micro["score"] == pytest.approx(0.5)
    assert (micro["ci_low"], micro["ci_high"]) == pytest.approx((0.5 - 4 / 6 * half_a, 0.5 + 4 / 6 * half_a))
    assert micro["details"]["weights"] == {"ds_a": 4, "ds_b": 2}
    # nothing to combine: still a row, with its reason
    assert empty["score"] is None and empty["unreliable"] is True and "nothing to combine" in empty["error"]
    assert "ds_c not run, left out" in proc.stderr


def test_an_aggregate_ci_never_leaves_the_metric_range() -> None:
    """Seen before the fix: an accuracy CI of [-0.02, 0.42]."""
    results = [MetricResult(0.05, 0.0, 0.3, 10, "normal"), MetricResult(0.1, 0.0, 0.5, 10, "normal")]
    assert combine(results).ci_low < 0
    clipped = combine(results, bounds=(0.0, 1.0))
    assert clipped.ci_low == 0.0 and clipped.ci_high == pytest.approx(combine(results).ci_high)


def test_micro_weights_by_size_and_rejects_unknown_methods() -> None:
    a, b = MetricResult(0.1, 0.05, 0.15, 100, "bootstrap"), MetricResult(0.3, 0.2, 0.4, 300, "bootstrap")
    micro = combine([a, b], method="micro", weights=[1000, 3000])  # e.g. reference words of two WER sets
    assert micro.score == pytest.approx((1000 * 0.1 + 3000 * 0.3) / 4000)
    se = math.sqrt((0.25 * 0.05 / Z95) ** 2 + (0.75 * 0.1 / Z95) ** 2)
    assert (micro.ci_low, micro.ci_high) == pytest.approx((micro.score - Z95 * se, micro.score + Z95 * se))
    with pytest.raises(ValueError, match="expected macro or micro"):
        combine([a], method="median")

"""bfcl_match_score against the Berkeley Function Calling Leaderboard's own AST checker.

tests/fixtures/references/bfcl_match_score.json: 49 model outputs (simple, multiple, parallel, parallel_multiple)
with the verdict bfcl-eval's ast_checker gave each; the "reference" block names the package version, the shim and
the command. Each output is handed to evalkit as the JSON answer AU-Harness's prompt asks for.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evalkit.data.sample import Sample
from evalkit.metrics import METRICS
from evalkit.metrics.accumulator import ScoreAccumulator

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "references" / "bfcl_match_score.json").read_text("utf-8"))
CASES: list[dict[str, Any]] = FIXTURE["cases"]


def _score(case: dict[str, Any]) -> Any:
    metric = METRICS.get("bfcl_match_score")(language="en", underscore_to_dot=case["model"] == "fc_model")
    sample = Sample(
        id="x", reference=case["answer_key"], meta={"functions": case["functions"], "category": case["category"]}
    )
    return metric.score(json.dumps(case["calls"]), sample)


def test_the_fixture_says_where_it_came_from_and_covers_the_categories() -> None:
    ref = FIXTURE["reference"]
    assert ref["package"].startswith("bfcl-eval ") and ref["command"] and ref["shim"]
    assert {c["category"] for c in CASES} == {"simple", "multiple", "parallel", "parallel_multiple"}
    assert {c["valid"] for c in CASES} == {True, False}
    assert len({c["error_type"] for c in CASES}) >= 12  # most of the checker's ways to fail


@pytest.mark.parametrize("i", range(len(CASES)))
def test_each_verdict_equals_bfcl(i: int) -> None:
    case = CASES[i]
    scored = _score(case)
    assert scored.failure is None and scored.details["calls"] == case["calls"]
    assert scored.score == float(case["valid"]), (case["error_type"], scored.details.get("reason"))


def test_the_corpus_is_the_share_bfcl_accepts() -> None:
    metric = METRICS.get("bfcl_match_score")(language="en")
    acc = ScoreAccumulator(metric)
    for case in CASES:
        acc.add(_score(case))
    assert acc.result().score == pytest.approx(sum(c["valid"] for c in CASES) / len(CASES))

"""gsm8k_exact_match against AU-Harness's own Gsm8kExactMatch, run on a table of cases.

tests/fixtures/references/gsm8k_exact_match.json: metrics/gsm8k_metrics.py of ServiceNow/AU-Harness imported from
a checkout of the commit its "reference" block names and called as AU-Harness calls it; each case keeps the answer
and reference strings it compared and its 0/1, and the table keeps the corpus figure it printed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evalkit.data.sample import Sample
from evalkit.errors import ConfigError
from evalkit.failures import FailureReason
from evalkit.metrics import METRICS
from evalkit.metrics.accumulator import ScoreAccumulator

FIXTURE = json.loads(
    (Path(__file__).parent / "fixtures" / "references" / "gsm8k_exact_match.json").read_text(encoding="utf-8")
)
CASES: list[dict[str, Any]] = FIXTURE["cases"]


def test_the_fixture_says_where_it_came_from_and_is_not_one_sided() -> None:
    ref = FIXTURE["reference"]
    assert ref["repository"] == "ServiceNow/AU-Harness" and len(ref["commit"]) == 40 and ref["command"]
    assert {case["score"] for case in CASES} == {0, 1}


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c['response'][:20]!r}~{c['reference'][-12:]!r}")
def test_each_case_reads_and_scores_as_au_harness(case: dict[str, Any]) -> None:
    metric = METRICS.get("gsm8k_exact_match")(language="en")
    scored = metric.score(case["response"], Sample(id="x", reference=case["reference"]))
    assert scored.details == {"answer": case["answer"], "reference_answer": case["reference_answer"]}
    assert scored.score == case["score"]


def test_the_corpus_is_the_accuracy_au_harness_prints_over_100() -> None:
    metric = METRICS.get("gsm8k_exact_match")(language="en")
    acc = ScoreAccumulator(metric)
    for i, case in enumerate(CASES):
        acc.add(metric.score(case["response"], Sample(id=str(i), reference=case["reference"])))
    assert acc.result().score * 100 == pytest.approx(FIXTURE["corpus"]["gsm8k_exact_match"])


def test_no_reference_fails_and_options_are_refused() -> None:
    metric = METRICS.get("gsm8k_exact_match")(language="en")
    assert metric.score("\\boxed{1}", Sample(id="n", reference=None)).failure == FailureReason.NO_REFERENCE
    # a list of references: the first is the one compared
    assert metric.score("\\boxed{1}", Sample(id="l", reference=["#### 1", "#### 2"])).score == 1.0
    assert metric.score("\\boxed{2}", Sample(id="l", reference=["#### 1", "#### 2"])).score == 0.0
    with pytest.raises(ConfigError, match="unknown option"):
        METRICS.get("gsm8k_exact_match")(language="en", normalize=False)

"""joint_goal_accuracy, slot_accuracy and slot_f1 against AU-Harness's own dialogue metrics, run on agent turns.

tests/fixtures/references/dialogue_state.json: metrics/dialogue_metrics.py of ServiceNow/AU-Harness imported from a
checkout of the commit its "reference" block names and called as its engine calls it (ground_truth_slots beside
the answers); each turn keeps the state AU-Harness read from the answer and its three scores, and the table keeps
the three corpus figures it printed.
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
from evalkit.metrics.auharness.dialogue_state import read_state

FIXTURE = json.loads(
    (Path(__file__).parent / "fixtures" / "references" / "dialogue_state.json").read_text(encoding="utf-8")
)
CASES: list[dict[str, Any]] = FIXTURE["cases"]
NAMES = ("joint_goal_accuracy", "slot_accuracy", "slot_f1")


def _sample(i: int, case: dict[str, Any]) -> Sample:
    meta = {} if case["slots"] is None else {"slots": case["slots"]}
    return Sample(id=str(i), reference="the agent's reference reply", meta=meta)


def test_the_fixture_says_where_it_came_from_and_is_not_one_sided() -> None:
    ref = FIXTURE["reference"]
    assert ref["repository"] == "ServiceNow/AU-Harness" and len(ref["commit"]) == 40 and ref["command"]
    for name in NAMES:
        assert {0.0, 1.0} <= {case[name] for case in CASES}, name
    assert any(0 < case["slot_f1"] < 1 for case in CASES)


@pytest.mark.parametrize("i", range(len(CASES)))
def test_each_turn_reads_and_scores_as_au_harness(i: int) -> None:
    case = CASES[i]
    assert read_state(case["response"]) == case["read_state"]
    for name in NAMES:
        scored = METRICS.get(name)(language="en").score(case["response"], _sample(i, case))
        assert scored.score == pytest.approx(case[name], abs=1e-12), name
        assert scored.details == {"read_state": case["read_state"]}


@pytest.mark.parametrize("name", NAMES)
def test_the_corpus_is_au_harness_figure_over_100(name: str) -> None:
    metric = METRICS.get(name)(language="en")
    acc = ScoreAccumulator(metric)
    for i, case in enumerate(CASES):
        acc.add(metric.score(case["response"], _sample(i, case)))
    # AU-Harness rounds to 2 places after x 100
    assert acc.result().score * 100 == pytest.approx(FIXTURE["corpus"][name], abs=0.005)


def test_a_state_that_is_not_domains_of_slots_fails_and_options_are_refused() -> None:
    metric = METRICS.get("joint_goal_accuracy")(language="en")
    scored = metric.score("in the north area", Sample(id="s", reference="x", meta={"slots": "[1, 2]"}))
    assert (
        scored.failure == FailureReason.UNRESOLVABLE_REFERENCE and "{domain: {slot: value}}" in scored.details["error"]
    )
    assert METRICS.canonical("jga") == "joint_goal_accuracy"
    with pytest.raises(ConfigError, match="unknown option"):
        METRICS.get("slot_f1")(language="en", average="macro")

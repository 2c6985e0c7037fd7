"""medcasereasoning_diagnostic_accuracy and medcasereasoning_reasoning_recall against KARMA's own classes.

tests/fixtures/references/karma_medcasereasoning.json (made by tests/fixtures/references/make_karma_fixtures.py):
KARMA's two classes run with a scripted judge in place of get_model(judge_model); for each answer the system
prompt and input they sent, the judge's replies, and the score they gave. evalkit's metric, given the same
sample and the same replies, must send the same system and user messages and give the same score.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from evalkit.data.sample import Sample
from evalkit.errors import ConfigError
from evalkit.failures import FailureReason
from evalkit.metrics import METRICS
from evalkit.metrics.accumulator import ScoreAccumulator

FIXTURE = json.loads(
    (Path(__file__).parent / "fixtures" / "references" / "karma_medcasereasoning.json").read_text("utf-8")
)
DIAGNOSES: list[dict[str, Any]] = FIXTURE["diagnostic_accuracy"]
RECALLS: list[dict[str, Any]] = FIXTURE["reasoning_recall"]


class ScriptedJudge:
    """A judge that replies from a list, in turn, and keeps what it was sent; ``fail`` answers every call failed."""

    model = "judge-m"
    prompt_model = "judge-m"

    def __init__(self, replies: list[str], fail: bool = False) -> None:
        self.replies = list(replies)
        self.fail = fail
        self.sent: list[list[dict[str, Any]]] = []

    async def ask(self, messages: list[dict[str, Any]], **params: Any) -> Any:
        self.sent.append(messages)
        if self.fail:
            return SimpleNamespace(ok=False, text=None, failure="timeout", error="judge timed out")
        return SimpleNamespace(ok=True, text=self.replies.pop(0), failure=None, error=None)


def _as_karma_sent(messages: list[dict[str, Any]]) -> dict[str, str]:
    (system,), (user,) = ([m["content"] for m in messages if m["role"] == r] for r in ("system", "user"))
    return {"system": system, "user": user}


def test_the_fixture_says_where_it_came_from_and_is_not_one_sided() -> None:
    ref = FIXTURE["reference"]
    assert ref["repository"] == "eka-care/KARMA-OpenMedEvalKit" and len(ref["commit"]) == 40 and ref["command"]
    assert {c["score"] for c in DIAGNOSES} == {0.0, 1.0}
    assert len({c["result"]["overall_score"] for c in RECALLS}) > 2


@pytest.mark.parametrize("case", DIAGNOSES, ids=lambda c: c["reference"])
def test_diagnostic_accuracy_sends_and_scores_as_karma(case: dict[str, Any]) -> None:
    judge = ScriptedJudge([case["judge_reply"]])
    metric = METRICS.get("medcasereasoning_diagnostic_accuracy")(language="en", judge=judge)
    scored = asyncio.run(metric.ascore(case["prediction"], Sample(id="d", reference=case["reference"])))
    assert [_as_karma_sent(m) for m in judge.sent] == case["asked"]
    assert scored.score == case["score"]


def test_diagnostic_accuracy_corpus_is_karmas_accuracy() -> None:
    metric = METRICS.get("medcasereasoning_diagnostic_accuracy")(
        language="en", judge=ScriptedJudge([c["judge_reply"] for c in DIAGNOSES])
    )
    acc = ScoreAccumulator(metric)
    for i, case in enumerate(DIAGNOSES):
        acc.add(asyncio.run(metric.ascore(case["prediction"], Sample(id=str(i), reference=case["reference"]))))
    assert acc.result().score == pytest.approx(sum(c["score"] for c in DIAGNOSES) / len(DIAGNOSES))


def _recall_sample(i: int, case: dict[str, Any]) -> Sample:
    return Sample(id=str(i), reference="dx", meta={"reasoning_steps": json.dumps(case["reasoning_steps"])})


@pytest.mark.parametrize("i", range(len(RECALLS)))
def test_reasoning_recall_sends_and_scores_as_karma(i: int) -> None:
    case = RECALLS[i]
    judge = ScriptedJudge(case["judge_replies"])
    metric = METRICS.get("medcasereasoning_reasoning_recall")(language="en", judge=judge)
    scored = asyncio.run(metric.ascore(case["prediction"], _recall_sample(i, case)))
    assert [_as_karma_sent(m) for m in judge.sent] == case["asked"]
    karma = case["details"][0]
    if karma["recall"] is None:
        assert scored.failure == FailureReason.NO_REFERENCE  # KARMA leaves the sample out of its mean
    else:
        assert scored.score == pytest.approx(karma["recall"])
        assert scored.details["step_results"] == karma["step_results"]


def test_reasoning_recall_corpus_is_karmas_mean_over_samples_with_statements() -> None:
    replies = [r for case in RECALLS for r in case["judge_replies"]]
    metric = METRICS.get("medcasereasoning_reasoning_recall")(language="en", judge=ScriptedJudge(replies))
    acc = ScoreAccumulator(metric)
    for i, case in enumerate(RECALLS):
        acc.add(asyncio.run(metric.ascore(case["prediction"], _recall_sample(i, case))))
    valid = [c["details"][0]["recall"] for c in RECALLS if c["details"][0]["recall"] is not None]
    result = acc.result()
    assert result.score == pytest.approx(sum(valid) / len(valid))
    assert result.n == len(valid) and result.details["n_failed"] == len(RECALLS) - len(valid)


def test_a_failed_judge_call_fails_the_sample_instead_of_scoring_zero() -> None:
    metric = METRICS.get("medcasereasoning_diagnostic_accuracy")(language="en", judge=ScriptedJudge([], fail=True))
    scored = asyncio.run(metric.ascore("<answer>x</answer>", Sample(id="f", reference="x")))
    assert scored.score is None and scored.failure == "judge_timeout"
    recall = METRICS.get("medcasereasoning_reasoning_recall")(language="en", judge=ScriptedJudge([], fail=True))
    scored = asyncio.run(recall.ascore("r", Sample(id="f", meta={"reasoning_steps": ["a"]})))
    assert scored.failure == "judge_timeout"


def test_options_are_refused() -> None:
    with pytest.raises(ConfigError, match="judge_model.*judge_properties"):
        METRICS.get("medcasereasoning_diagnostic_accuracy")(language="en", judge_model="gpt-4o-mini")
    with pytest.raises(ConfigError, match="unknown option"):
        METRICS.get("medcasereasoning_reasoning_recall")(language="en", judge_temperature=0)

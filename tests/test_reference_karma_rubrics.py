"""answer_rubric_evaluation and query_rubric_evaluation against KARMA's own AnswerRubricMetric and QueryRubricMetric.

tests/fixtures/references/karma_rubrics.json (made by tests/fixtures/references/make_karma_fixtures.py): KARMA's
classes run with a scripted judge on samples shaped as its Indian clinical protocols Q&A dataset builds them; per
case the (system prompt, input) of every judge call, the replies, and the per-item verdicts and score. Batches,
single items, KARMA's fallback after an unreadable or short batch reply, negative points, non-ASCII text, batch_size
and the multi-turn prompts are covered.
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

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "references" / "karma_rubrics.json").read_text("utf-8"))
CASES: list[dict[str, Any]] = FIXTURE["cases"]


class ScriptedJudge:
    """A judge that replies from a list, in turn, and keeps what it was sent."""

    model = "judge-m"
    prompt_model = "judge-m"

    def __init__(self, replies: list[str], fail: bool = False) -> None:
        self.replies = list(replies)
        self.fail = fail
        self.sent: list[list[dict[str, Any]]] = []

    async def ask(self, messages: list[dict[str, Any]], **params: Any) -> Any:
        self.sent.append(messages)
        if self.fail:
            return SimpleNamespace(ok=False, text=None, failure="http_500", error="server error")
        return SimpleNamespace(ok=True, text=self.replies.pop(0), failure=None, error=None)


def _sample(case: dict[str, Any]) -> Sample:
    # as a dataset entry maps KARMA's columns: the doctor's query is the text, the rubrics the answer_rubrics column
    return Sample(id=case["name"], text=case["query"], meta={"answer_rubrics": json.dumps(case["rubrics"])})


def _run(case: dict[str, Any], judge: ScriptedJudge) -> Any:
    metric = METRICS.get(case["metric"])(language="en", judge=judge, **case["options"])
    return asyncio.run(metric.ascore(case["answer"], _sample(case)))


def test_the_fixture_says_where_it_came_from_and_is_not_one_sided() -> None:
    ref = FIXTURE["reference"]
    assert ref["repository"] == "eka-care/KARMA-OpenMedEvalKit" and len(ref["commit"]) == 40 and ref["command"]
    scores = {c["question_score"] for c in CASES}
    assert None in scores and len(scores) > 4
    assert {c["metric"] for c in CASES} == {"answer_rubric_evaluation", "query_rubric_evaluation"}
    assert any(len(c["asked"]) > 2 for c in CASES)  # a fallback to single items is among them


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c['metric'][:5]}:{c['name'][:40]}")
def test_the_same_messages_and_the_same_score_as_karma(case: dict[str, Any]) -> None:
    judge = ScriptedJudge(case["replies"])
    scored = _run(case, judge)
    if case["question_score"] is None:
        # KARMA asks the judge, then leaves the sample out; evalkit fails it without asking
        assert scored.failure == FailureReason.RUBRIC_INVALID and judge.sent == []
        return
    sent = [{"system": m[0]["content"], "user": m[1]["content"]} for m in judge.sent]
    assert [m[0]["role"] for m in judge.sent] == ["system"] * len(sent)
    assert sent == case["asked"]
    assert scored.score == pytest.approx(case["question_score"], abs=1e-12)
    assert scored.details["criteria_met"] == [bool(v) for v in case["criteria_met"]]


def test_the_corpus_is_karmas_unclipped_mean_over_scored_samples() -> None:
    answer = [c for c in CASES if c["metric"] == "answer_rubric_evaluation" and not c["options"]]
    metric = METRICS.get("answer_rubric_evaluation")(
        language="en", judge=ScriptedJudge([r for c in answer for r in c["replies"]])
    )
    acc = ScoreAccumulator(metric)
    for case in answer:
        scored = asyncio.run(metric.ascore(case["answer"], _sample(case)))
        if case["question_score"] is None:  # evalkit asks nothing here: drop the reply KARMA used
            metric.judge.replies.pop(0)  # type: ignore[union-attr]
        acc.add(scored)
    valid = [c["question_score"] for c in answer if c["question_score"] is not None]
    result = acc.result()
    assert min(valid) < 0  # unclipped, as KARMA's overall_score
    assert result.score == pytest.approx(sum(valid) / len(valid))
    assert result.n == len(valid) and result.details["n_failed"] == len(answer) - len(valid)


def test_evalkit_rubric_keys_are_read_too_and_a_failed_judge_fails_the_sample() -> None:
    case = CASES[0]
    sample = Sample(id="r", text=case["query"], meta={"rubrics": case["rubrics"]})
    metric = METRICS.get("answer_rubric_evaluation")(language="en", judge=ScriptedJudge(case["replies"]))
    assert asyncio.run(metric.ascore(case["answer"], sample)).score == case["question_score"]
    failing = METRICS.get("answer_rubric_evaluation")(language="en", judge=ScriptedJudge([], fail=True))
    assert asyncio.run(failing.ascore(case["answer"], sample)).failure == "judge_http_500"
    no_rubric = asyncio.run(failing.ascore("a", Sample(id="n", text="q")))
    assert no_rubric.failure == FailureReason.RUBRIC_INVALID


def test_karmas_own_options_are_refused_with_where_to_set_them() -> None:
    with pytest.raises(ConfigError, match="max_workers.*judge_concurrency"):
        METRICS.get("query_rubric_evaluation")(language="en", max_workers=4)
    with pytest.raises(ConfigError, match="use_serialized_conversations"):
        METRICS.get("answer_rubric_evaluation")(language="en", use_serialized_conversations=True)
    with pytest.raises(ConfigError, match="batch_size"):
        METRICS.get("answer_rubric_evaluation")(language="en", batch_size=0)

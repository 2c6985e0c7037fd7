"""bfcl_match_score as a user meets it: the answer formats it reads, where functions and the category come from,
and what a sample it cannot check says."""

from __future__ import annotations

import json
from typing import Any

import pytest

from evalkit.data.sample import Sample
from evalkit.errors import ConfigError
from evalkit.failures import FailureReason
from evalkit.metrics import METRICS
from evalkit.metrics.structured.function_calls import read_calls

AREA = {
    "name": "geometry.area",
    "parameters": {
        "type": "dict",
        "properties": {"base": {"type": "integer"}, "height": {"type": "integer"}},
        "required": ["base", "height"],
    },
}
KEY = [{"geometry.area": {"base": [10], "height": [5]}}]


def _metric(**options: Any) -> Any:
    return METRICS.get("bfcl_match_score")(language="en", **options)


@pytest.mark.parametrize(
    "answer",
    [
        '[{"geometry.area": {"base": 10, "height": 5}}]',
        'Sure:\n```json\n[{"geometry.area": {"base": 10, "height": 5}}]\n```',
        '{"geometry.area": {"base": 10, "height": 5}}',
        '[{"name": "geometry.area", "arguments": "{\\"base\\": 10, \\"height\\": 5}"}]',
        "[geometry.area(base=10, height=5)]",
        "```python\ngeometry.area(base=10, height=5)\n```",
        "[{'geometry.area': {'base': 10, 'height': 5}}]",
    ],
)
def test_the_formats_it_reads(answer: str) -> None:
    assert read_calls(answer) == [{"geometry.area": {"base": 10, "height": 5}}]
    scored = _metric().score(answer, Sample(id="a", reference=KEY, meta={"functions": [AREA]}))
    assert scored.score == 1.0


def test_unreadable_answers_have_no_calls_and_meet_only_an_empty_answer_key() -> None:
    for answer in ("I cannot help with that.", "", "```json\n[]\n```", "[1, 2]"):
        assert read_calls(answer) == []
    metric = _metric()
    refusal = metric.score("None of the functions fit.", Sample(id="i", reference=[], meta={"functions": [AREA]}))
    assert refusal.score == 1.0
    wrong = metric.score("None of the functions fit.", Sample(id="w", reference=KEY, meta={"functions": [AREA]}))
    assert wrong.score == 0.0 and wrong.details["reason"] == "0 call(s) where 1 are expected"
    called = metric.score(json.dumps(KEY[0] | {}), Sample(id="c", reference=[], meta={"functions": [AREA]}))
    assert called.score == 0.0


def test_functions_and_answer_key_may_be_json_and_openai_tools_are_unwrapped() -> None:
    tools = json.dumps([{"type": "function", "function": AREA}])
    sample = Sample(id="t", reference=json.dumps(KEY), meta={"tools": tools})
    assert _metric().score('[{"geometry.area": {"base": 10, "height": 5}}]', sample).score == 1.0


def test_names_with_dots_follow_the_underscore_to_dot_option() -> None:
    sample = Sample(id="d", reference=KEY, meta={"functions": [AREA]})
    underscored = '[{"geometry_area": {"base": 10, "height": 5}}]'
    assert _metric().score(underscored, sample).score == 0.0
    assert _metric(underscore_to_dot=True).score(underscored, sample).score == 1.0


def test_the_category_decides_order_and_is_inferred_when_not_given() -> None:
    two = {**AREA, "name": "area"}
    key = [{"area": {"base": [1], "height": [2]}}, {"area": {"base": [3], "height": [4]}}]
    swapped = '[{"area": {"base": 3, "height": 4}}, {"area": {"base": 1, "height": 2}}]'
    sample = Sample(id="p", reference=key, meta={"functions": [two]})
    assert _metric().score(swapped, sample).score == 1.0  # several expected calls: parallel, any order
    with pytest.raises(ConfigError, match="'category': 'serial' is not one of"):
        _metric(category="serial")


@pytest.mark.parametrize(
    ("meta", "reference", "message"),
    [
        ({}, KEY, "no function descriptions"),
        ({"functions": "[not json"}, KEY, "the functions is text but not JSON"),
        ({"functions": [AREA]}, [{"geometry.area": [10, 5]}], "BFCL's possible answer"),
        ({"functions": [AREA]}, [{"other": {"x": [1]}}], "which the sample's functions do not describe"),
    ],
)
def test_a_sample_it_cannot_check_fails_with_the_reason(meta: dict[str, Any], reference: Any, message: str) -> None:
    scored = _metric(category="multiple").score('[{"other": {"x": 1}}]', Sample(id="f", reference=reference, meta=meta))
    assert scored.failure == FailureReason.UNRESOLVABLE_REFERENCE and message in scored.details["error"]

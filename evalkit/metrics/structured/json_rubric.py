"""Structured-output scoring (evalkit's own definition): a JSON answer compared field by field with a JSON reference.

The reference is a JSON object (a dict, or a string holding one). Each of its
fields is a rubric item worth 1 point, or the weight given in the sample's
``meta["field_weights"]`` ({field: points}); nested objects are compared field
by field with dotted names ("vitals.bp"). A field matches when the answer's
value equals the reference's after light normalisation: strings case- and
whitespace-folded, numbers compared as numbers (``"5"`` == ``5``), lists as
multisets of normalised items. The sample's score is matched points over all
points.

An answer that is not JSON (after dropping a Markdown code fence and text
around the outermost object) is a scored 0, with ``details["reason"]`` saying
why: a model that cannot produce the structure has failed the task, so it
must count, not be excluded as a failure of the harness would be.

This is not KARMA's ``json_rubric_evaluation``, which asks an LLM judge with
the dataset's rubric as its prompt; evalkit/metrics/references/ says so.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from evalkit.data.sample import Sample
from evalkit.failures import FailureReason
from evalkit.metrics.base import Metric, SampleScore, check_options

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)


def parse_json_answer(text: str) -> tuple[Any, str | None]:
    """The JSON object in an answer, or (None, why not)."""
    fenced = _FENCE.search(text)
    body = fenced.group(1) if fenced else text
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end <= start:
        return None, "no JSON object in the answer"
    try:
        value = json.loads(body[start : end + 1])
    except json.JSONDecodeError as error:
        return None, f"malformed JSON: {error.msg} at character {error.pos}"
    if not isinstance(value, dict):
        return None, "the JSON is not an object"
    return value, None


def _flatten(value: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, item in value.items():
        name = f"{prefix}{key}"
        if isinstance(item, dict) and item:
            out.update(_flatten(item, name + "."))
        else:
            out[name] = item
    return out


def _normal(value: Any) -> Any:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        text = " ".join(value.casefold().split())
        try:
            return float(text)
        except ValueError:
            return text
    if isinstance(value, list):
        return Counter(json.dumps(_normal(v), sort_keys=True, default=str) for v in value)
    if isinstance(value, dict):
        return {k: _normal(v) for k, v in value.items()}
    return value


class JsonRubricEvaluation(Metric):
    """JSON answer scored field by field against a JSON reference; malformed JSON scores 0 with its reason."""

    name = "json_rubric_evaluation"
    bounds = (0.0, 1.0)

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ())
        super().__init__(language, **options)

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        reference = sample.reference
        if isinstance(reference, str):
            reference, _ = parse_json_answer(reference)
        if not isinstance(reference, dict) or not reference:
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        fields = _flatten(reference)
        weights = sample.meta.get("field_weights") or {}
        if isinstance(weights, str):
            weights = json.loads(weights)
        points = {name: float(weights.get(name, 1.0)) for name in fields}
        possible = sum(points.values())
        answer, why = parse_json_answer(prediction or "")
        if answer is None:
            return SampleScore(0.0, (0.0, 1.0), details={"reason": why, "fields": len(fields)})
        got = _flatten(answer)
        matched = [name for name in fields if name in got and _normal(got[name]) == _normal(fields[name])]
        value = sum(points[name] for name in matched) / possible if possible > 0 else 0.0
        missing = [name for name in fields if name not in got]
        wrong = [name for name in fields if name in got and name not in matched]
        return SampleScore(value, (value, 1.0), details={"matched": matched, "missing": missing, "wrong": wrong})

"""Rubric grading in the style of HealthBench: points per criterion, one judge call per criterion.

Each sample carries its own rubric in ``sample.meta`` (a runspec maps the
column with ``extra_columns``, e.g. ``{"rubrics": "rubrics"}``; the keys
``rubrics``, ``rubric``, ``rubric_items`` and ``criteria`` are read, in that
order). A rubric is a list (or a JSON string of a list) of criteria::

    {"criterion": "Advises seeing a doctor within 24 hours", "points": 5, "tags": ["axis:completeness"]}

Points may be negative (behaviour a response should not show); tags are
optional. A plain string item is a criterion worth 1 point, and "[-3] text"
gives it -3. Without a rubric in ``meta``, a reference that is a list of
instruction ids (IFEval: "punctuation:no_comma", with their arguments in
``meta["kwargs"]``) becomes one 1-point criterion per instruction, tagged
``instruction:<group>``.

The judge decides, criterion by criterion and concurrently, whether the
response meets it. The sample's score is

    achieved / possible

where ``achieved`` sums the points of the met criteria (negative ones
included) and ``possible`` sums the positive points, so a response that
meets only negative criteria scores below 0. The corpus value is the mean of
the sample scores clipped to [0, 1]: HealthBench's definition (openai/
simple-evals, healthbench_eval.py: ``calculate_score`` per example, unclipped,
and ``_compute_clipped_stats``: ``np.clip(np.mean(values), 0, 1)``).
Clipping each sample instead would raise the mean of a model whose bad
answers meet negative criteria. The normal CI of the mean is clipped the same
way, which is the CI of the clipped mean (clipping is monotone). The same
formula over the criteria carrying a tag gives that tag's score (none when
the tag has no positive points), averaged and clipped the same way; tags in
``meta["example_tags"]`` (HealthBench's themes) score the whole sample.
Per-tag scores are in each record's details, and the corpus-level per-tag means with their CIs are in the result's
``details["subscores"]`` (the accumulator collects them through
:meth:`RubricEvaluation.subscores`).

One criterion the judge could not answer fails the whole sample (its reason,
e.g. ``judge_parse``): scoring the rest would change the denominator and bias
the score.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from evalkit.data.sample import Sample
from evalkit.failures import FailureReason
from evalkit.metrics.base import SampleScore
from evalkit.metrics.judges.judge import JudgeMetric, candidate_text, clipped, question_text
from evalkit.metrics.judges.verdict import VerdictError, parse_met

RUBRIC_KEYS = ("rubrics", "rubric", "rubric_items", "criteria")
_TEXT_KEYS = ("criterion", "text", "description", "rubric", "requirement")
_POINT_KEYS = ("points", "point", "weight", "score")
_POINTS_PREFIX = re.compile(r"^\s*\[\s*([+-]?\d+(?:\.\d+)?)\s*\]\s*(.+)$", re.DOTALL)
_CRITERION_RESPONSE_LIMIT = 1000


class RubricError(ValueError):
    """A sample's rubric is missing or malformed (the sample fails as ``rubric_invalid``)."""


@dataclass(frozen=True, slots=True)
class Criterion:
    text: str
    points: float
    tags: tuple[str, ...] = ()


def _tags(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,) if value.strip() else ()
    if isinstance(value, (list, tuple)):
        return tuple(str(t) for t in value if t is not None and str(t).strip())
    raise RubricError(f"tags must be a list of strings, got {type(value).__name__}")


def _points(value: Any, where: str) -> float:
    if isinstance(value, bool):
        raise RubricError(f"{where}: points must be a number, got {value!r}")
    try:
        points = float(value)
    except (TypeError, ValueError):
        raise RubricError(f"{where}: points must be a number, got {value!r}") from None
    if not math.isfinite(points):
        raise RubricError(f"{where}: points must be finite, got {value!r}")
    return points


def parse_criterion(item: Any, index: int) -> Criterion:
    """One rubric item: a mapping with criterion/points/tags, or a string ("[5] text" or text worth 1)."""
    where = f"criterion {index + 1}"
    if isinstance(item, str):
        match = _POINTS_PREFIX.match(item)
        if match:
            return Criterion(match.group(2).strip(), _points(match.group(1), where))
        if not item.strip():
            raise RubricError(f"{where}: empty text")
        return Criterion(item.strip(), 1.0)
    if not isinstance(item, dict):
        raise RubricError(f"{where}: expected a mapping with criterion and points, got {type(item).__name__}")
    lowered = {str(k).lower(): v for k, v in item.items()}
    text = next((lowered[k] for k in _TEXT_KEYS if isinstance(lowered.get(k), str) and lowered[k].strip()), None)
    if text is None:
        raise RubricError(f"{where}: no criterion text (one of {', '.join(_TEXT_KEYS)})")
    point_key = next((k for k in _POINT_KEYS if k in lowered and lowered[k] is not None), None)
    if point_key is None:
        raise RubricError(f"{where}: no points (one of {', '.join(_POINT_KEYS)})")
    return Criterion(text.strip(), _points(lowered[point_key], where), _tags(lowered.get("tags", lowered.get("tag"))))


def _instruction_criteria(ids: list[Any], kwargs: Any) -> list[Criterion]:
    """IFEval-style instruction ids (with aligned argument dicts) as 1-point criteria."""
    if isinstance(kwargs, str):
        try:
            kwargs = json.loads(kwargs)
        except ValueError:
            kwargs = None
    args = kwargs if isinstance(kwargs, (list, tuple)) and len(kwargs) == len(ids) else [None] * len(ids)
    out = []
    for instruction, arg in zip(ids, args):
        text = f"The response follows the instruction `{instruction}`"
        if isinstance(arg, dict):
            given = {k: v for k, v in arg.items() if v is not None}
            if given:
                text += f" with the arguments {json.dumps(given, ensure_ascii=False, sort_keys=True)}"
        group = str(instruction).split(":", 1)[0]
        out.append(Criterion(text + ".", 1.0, (f"instruction:{group}",)))
    return out


def criteria_of(sample: Sample) -> list[Criterion]:
    """The sample's rubric (rules in the module docstring); raises RubricError."""
    value = next((sample.meta[k] for k in RUBRIC_KEYS if sample.meta.get(k) is not None), None)
    if value is None:
        reference = sample.reference
        if isinstance(reference, (list, tuple)) and reference and all(isinstance(r, str) for r in reference):
            return _instruction_criteria(list(reference), sample.meta.get("kwargs"))
        if isinstance(reference, (list, tuple)) and reference and all(isinstance(r, dict) for r in reference):
            value = reference
        else:
            raise RubricError(
                f"no rubric: expected criteria in meta[{RUBRIC_KEYS[0]!r}] (map the column with extra_columns)"
            )
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as error:
            raise RubricError(f"rubric is a string but not JSON: {error}") from None
    if isinstance(value, dict):
        value = value.get("criteria", value.get("rubrics", [value]))
    if not isinstance(value, (list, tuple)) or not value:
        raise RubricError("rubric must be a non-empty list of criteria")
    return [parse_criterion(item, i) for i, item in enumerate(value)]


def _ratio(achieved: float, possible: float) -> float | None:
    """HealthBench's per-example score: not clipped (only the mean over examples is)."""
    if possible <= 0:
        return None
    return achieved / possible


def rubric_score(
    criteria: list[Criterion], met: list[bool], example_tags: tuple[str, ...] = ()
) -> tuple[float | None, dict[str, Any]]:
    """(sample score or None when no criterion has positive points, per-tag breakdown)."""
    achieved = sum(c.points for c, m in zip(criteria, met) if m)
    possible = sum(c.points for c in criteria if c.points > 0)
    score = _ratio(achieved, possible)
    sums: dict[str, list[float]] = {}
    for criterion, hit in zip(criteria, met):
        for tag in criterion.tags:
            entry = sums.setdefault(tag, [0.0, 0.0])
            if hit:
                entry[0] += criterion.points
            if criterion.points > 0:
                entry[1] += criterion.points
    tags: dict[str, dict[str, float | None]] = {
        tag: {"achieved": a, "possible": p, "score": _ratio(a, p)} for tag, (a, p) in sorted(sums.items())
    }
    for tag in example_tags:
        tags[tag] = {"achieved": achieved, "possible": possible, "score": score}
    return score, {"achieved": achieved, "possible": possible, "tags": tags}


class RubricEvaluation(JudgeMetric):
    """Points of the met criteria over the positive points; the corpus mean clipped to [0, 1]."""

    name = "rubric_evaluation"
    prompt_name = "rubric_evaluation"
    prompt_fields = ("question", "candidate", "criterion", "points")
    prompt_required = ("candidate", "criterion")
    #: the corpus mean and its CI are clipped to this range (HealthBench's clipped mean); per-sample and
    #: per-tag scores are not, and the accumulator clips the per-tag means the same way
    bounds = (0.0, 1.0)
    #: the corpus is the clipped mean of the scores: the normal CI clipped to ``bounds`` is its interval
    corpus_is_mean = True

    def corpus(self, totals: np.ndarray) -> np.ndarray:
        """HealthBench's overall score: the mean of per-example scores, clipped to [0, 1]."""
        totals = np.asarray(totals, dtype=float)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.clip(totals[..., 0] / totals[..., 1], 0.0, 1.0)

    async def _judge(
        self, criterion: Criterion, question: str, candidate: str
    ) -> tuple[dict[str, Any], SampleScore | None]:
        fields = {
            "question": question,
            "candidate": candidate,
            "criterion": criterion.text,
            "points": f"{criterion.points:+g}",
        }
        text, failed = await self.ask_judge(self.prompt.messages(fields))
        row: dict[str, Any] = {"criterion": criterion.text, "points": criterion.points, "tags": list(criterion.tags)}
        if failed is not None:
            return row, failed
        assert text is not None
        try:
            verdict = parse_met(text)
        except VerdictError as error:
            return row, self.parse_failure(error, text)
        row.update(
            met=verdict.value == 1.0,
            explanation=verdict.explanation,
            judge_response=clipped(text, _CRITERION_RESPONSE_LIMIT),
        )
        return row, None

    async def ascore(self, prediction: str, sample: Sample) -> SampleScore:
        try:
            criteria = criteria_of(sample)
        except RubricError as error:
            return SampleScore(None, failure=FailureReason.RUBRIC_INVALID, details={"error": str(error)})
        if not any(c.points > 0 for c in criteria):
            return SampleScore(
                None, failure=FailureReason.RUBRIC_INVALID, details={"error": "no criterion has positive points"}
            )
        question, candidate = question_text(sample), candidate_text(prediction)
        judged = await asyncio.gather(*(self._judge(c, question, candidate) for c in criteria))
        failures = [failed for _, failed in judged if failed is not None]
        if failures:
            first = failures[0]
            first_error = (first.details or {}).get("error")
            details = {
                **(first.details or {}),
                "error": f"{len(failures)} of {len(criteria)} criteria not judged; first: {first_error}",
            }
            return SampleScore(None, failure=first.failure, details=details)
        rows = [row for row, _ in judged]
        example_tags = tuple(str(t) for t in (sample.meta.get("example_tags") or ()) if t is not None)
        score, breakdown = rubric_score(criteria, [row["met"] for row in rows], example_tags)
        assert score is not None
        details = {**breakdown, "judge_model": self.judge_model, "criteria": rows}
        return SampleScore(score, (score, 1.0), details=details)

    def subscores(self, score: SampleScore) -> dict[str, float]:
        """Per-tag scores of one sample, averaged over samples by the accumulator."""
        tags = (score.details or {}).get("tags") or {}
        return {tag: entry["score"] for tag, entry in tags.items() if entry.get("score") is not None}

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "scale": "achieved / positive points per sample; the mean clipped to [0, 1] (HealthBench)",
            "per_tag": "details.subscores",
        }

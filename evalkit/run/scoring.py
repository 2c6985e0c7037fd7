"""One path from an answer to a scored record, shared by the engine and `evalkit rescore`.

A failed request, a metric that raises and a metric that declines to score
(``SampleScore.failure``, e.g. an unparseable judge verdict) all end as a
counted failure with its reason in the record, never as a score of 0; so a
rescored run and a fresh run count and record the same things.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from typing import Any

from evalkit.data.sample import Sample
from evalkit.failures import FailureReason
from evalkit.metrics.accumulator import ScoreAccumulator, sample_groups
from evalkit.metrics.base import Metric, SampleScore
from evalkit.processing.processors import ProcessorChain

log = logging.getLogger("evalkit")


def new_record(sample: Sample, model: str, dataset: str, metric: str) -> dict[str, Any]:
    """The fields every record starts with, in the order records are written."""
    return {"sample_id": sample.id, "model": model, "dataset": dataset, "metric": metric, "reference": sample.reference}


def process_pair(chain: ProcessorChain, prediction: str, sample: Sample) -> tuple[str, Sample]:
    """Prediction and sample with the processors applied to the prediction and to every reference string.

    The sample is a shallow copy (the caller's is shared by every model); a reference that is not
    text (a number, a structured reference) is left as it is.
    """
    if not chain:
        return prediction, sample

    def process(value: Any) -> Any:
        if isinstance(value, str):
            return chain(value)
        if isinstance(value, list):
            return [process(v) for v in value]
        return value

    return chain(prediction), dataclasses.replace(sample, reference=process(sample.reference))


async def score_sample(
    metric: Metric, prediction: str, sample: Sample, processors: ProcessorChain | None = None
) -> tuple[SampleScore | None, str | None]:
    """The metric's verdict on one prediction, or (None, "Type: message") when the metric or a processor raised.

    ``processors`` (the dataset's) run first, then the metric's own (its ``processors`` option).
    """
    try:
        own = getattr(metric, "processors", None)
        chain = processors + own if processors and own else processors or own
        if chain:  # most pairs have no processors: no chain is built or applied per sample
            prediction, sample = process_pair(chain, prediction, sample)
        return await metric.ascore(prediction, sample), None
    except Exception as error:
        log.exception("metric %s failed on %s", metric.name or type(metric).__name__, sample.id)
        return None, f"{type(error).__name__}: {error}"


async def score_into_record(
    record: dict[str, Any],
    accumulator: ScoreAccumulator,
    metric: Metric,
    sample: Sample,
    *,
    response: str | None,
    prediction: str | None,
    failure: str | None = None,
    error: str | None = None,
    processors: ProcessorChain | None = None,
) -> bool:
    """Score ``prediction`` (None: the request failed with ``failure``/``error``), count it, and complete ``record``.

    Returns True when the sample was scored, False when it counts as failed.
    """
    record.update(response=response, prediction=prediction)
    if prediction is None:
        reason = failure or FailureReason.ERROR
        accumulator.add_failure(reason, error)
        record.update(score=None, failure=reason, error=error)
        return False
    score, crash = await score_sample(metric, prediction, sample, processors)
    if score is not None and score.failure is None:
        bad = _not_finite(score)
        if bad is None:
            accumulator.add(score, sample_groups(sample), order=sample.meta.get("index"))
            record.update(score=score.score, details=score.details)
            return True
        # NaN or inf would poison the mean and its CI: the sample is counted as unscored instead
        name = record.get("metric") or metric.name or type(metric).__name__
        score = SampleScore(
            None,
            failure=FailureReason.NO_SCORE,
            details={"error": f"{where(record, sample)}: metric {name} returned {bad}, not a finite number"},
        )
    reason = (score.failure if score is not None else None) or FailureReason.METRIC_ERROR
    message = crash if score is None else (score.details or {}).get("error")
    if not message and reason == FailureReason.NO_REFERENCE:
        message = f"{where(record, sample)}: the reference is empty"
    accumulator.add_failure(reason, message if isinstance(message, str) else None)
    record.update(score=None, failure=reason, error=message)
    return False


def where(record: dict[str, Any], sample: Sample) -> str:
    """``dataset NAME, row N (id 'x')``: the row counted from 1 in file order, as a user finds it."""
    index = sample.meta.get("index")
    row = f", row {index + 1}" if isinstance(index, int) else ""
    return f"dataset {record.get('dataset')}{row} (id {sample.id!r})"


def _not_finite(score: SampleScore) -> str | None:
    """The first of the score and its statistics that is NaN or infinite (as text), or None when all are finite."""
    for value in (score.score, *score.stats):
        if value is not None:
            try:
                number = float(value)
            except (TypeError, ValueError):
                return repr(value)
            if not math.isfinite(number):
                return repr(number)
    return None

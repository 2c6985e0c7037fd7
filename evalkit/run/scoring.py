"""One path from an answer to a scored record, shared by the engine and `evalkit rescore`.

A failed request, a metric that raises and a metric that declines to score
(``SampleScore.failure``, e.g. an unparseable judge verdict) all end as a
counted failure with its reason in the record, never as a score of 0; so a
rescored run and a fresh run count and record the same things.

A metric that *raises* (in ``score``, ``ascore``, ``corpus``, ``corpus_details``
or ``describe``) has a bug, which is not the model's doing: besides the
sample's failure, the pair fails with one line naming the method and the
exception (:func:`summarize`, :func:`metric_settings`), and the run goes on
with every other pair. The traceback goes to the debug log only.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
from typing import Any

from evalkit.data.sample import Sample
from evalkit.failures import FailureReason
from evalkit.metrics.accumulator import GroupMember, MetricCrashed, ScoreAccumulator, crash_message, sample_groups
from evalkit.metrics.base import SCORING, TURN_ANSWERS, Metric, MetricResult, SampleScore, Scoring
from evalkit.processing.processors import ProcessorChain

log = logging.getLogger("evalkit")
#: a judge request the run's budget kept from being sent (the judge metrics' ``judge_<reason>``)
JUDGE_BUDGET = f"judge_{FailureReason.BUDGET}"


def new_record(sample: Sample, model: str, dataset: str, metric: str) -> dict[str, Any]:
    """The fields every record starts with, in the order records are written.

    ``row`` (file order) and ``groups`` make the records self-sufficient: a merge, a paired test or a
    viewer rebuilds the corpus in row order and slices it by group without reading the dataset again.
    """
    row = sample.meta.get("index")
    return {
        "sample_id": sample.id,
        "model": model,
        "dataset": dataset,
        "metric": metric,
        "row": row if isinstance(row, int) else None,
        "groups": record_groups(sample),
        "reference": sample.reference,
    }


def record_groups(sample: Sample) -> dict[str, str]:
    """The groups a record is sliced by: the report's (:func:`sample_groups`) and the sample's language."""
    groups = sample_groups(sample)
    language = sample.meta.get("language")
    if language:
        groups["language"] = str(language)
    return groups


def corpus_stats(score: SampleScore) -> list[float] | None:
    """The row the accumulator adds for ``score``: its stats, or (score, 1) for a metric whose corpus is a mean.

    None when it adds no row (no stats and no score: counted as ``no_score``).
    """
    if score.stats:
        return [float(x) for x in score.stats]
    return None if score.score is None else [float(score.score), 1.0]


def group_member(metric: Metric, sample: Sample) -> GroupMember | None:
    """The sample's (group key, size) for a metric scored over groups (``group_of``), else None.

    A ``group_of`` that raises is the metric's bug: the sample is then a group of its own, and the bug shows
    when the same method is called by the accumulator's result, never as a silently merged group.
    """
    hook = getattr(metric, "group_of", None)
    if not callable(hook):
        return None
    try:
        found = hook(sample)
    except Exception:
        log.debug("metric %s: group_of failed on %s", metric.name, sample.id, exc_info=True)
        return None
    if found is None:
        return None
    key, size = found
    return str(key), int(size) if size else None


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
    """The metric's verdict on one prediction, or (None, message) when the metric or a processor raised.

    ``processors`` (the dataset's) run first, then the metric's own (its ``processors`` option). The
    message is :func:`crash_message`'s one line (``metric 'x': score() raised Type: text (file:line)``).
    """
    method = "processors"
    try:
        own = getattr(metric, "processors", None)
        chain = processors + own if processors and own else processors or own
        if chain:  # most pairs have no processors: no chain is built or applied per sample
            prediction, sample = process_pair(chain, prediction, sample)
        method = "ascore" if type(metric).ascore is not Metric.ascore else "score"
        return await metric.ascore(prediction, sample), None
    except Exception as error:
        log.debug("metric %s failed on %s", metric.name or type(metric).__name__, sample.id, exc_info=True)
        return None, crash_message(metric, method, error)


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
    answers: list[str] | None = None,
) -> bool:
    """Score ``prediction`` (None: the request failed with ``failure``/``error``), count it, and complete ``record``.

    ``answers`` are a conversation's answers, one per turn answered: the record keeps them (a reader sees every
    turn's answer, a re-score rates them again) and the metric finds them in ``sample.meta[TURN_ANSWERS]``.
    Returns True when the sample was scored, False when it counts as failed.
    """
    record.update(response=response, prediction=prediction)
    if answers is not None:
        record["answers"] = list(answers)
        sample = dataclasses.replace(sample, meta={**sample.meta, TURN_ANSWERS: list(answers)})
    member = group_member(metric, sample)
    if member is not None:
        # the group travels with the record: a merge rebuilds groups split across shards from it
        record["group"] = member[0]
        if member[1]:
            record["group_size"] = member[1]
    if prediction is None:
        reason = failure or FailureReason.ERROR
        accumulator.add_failure(reason, error, group=member)
        record.update(score=None, failure=reason, error=error)
        return False
    token = None
    if metric.needs_judge:  # a judge may name its request after the answer it judges (AU-Harness's judges)
        token = SCORING.set(
            Scoring(str(record.get("dataset")), str(record.get("model")), str(sample.id), str(record.get("metric")))
        )
    try:
        score, crash = await score_sample(metric, prediction, sample, processors)
    finally:
        if token is not None:
            SCORING.reset(token)
    if crash is not None:
        accumulator.note_crash(f"{crash}, on {where(record, sample)}")
    if score is not None and score.failure is None:
        bad = _not_finite(score)
        if bad is None:
            try:
                accumulator.add(score, sample_groups(sample), order=sample.meta.get("index"), group=member)
            except (TypeError, ValueError) as error:  # stats of another length than before, or not numbers
                name = record.get("metric") or metric.name or type(metric).__name__
                crash = f"metric {name!r}: score() returned an unusable SampleScore: {' '.join(str(error).split())}"
                accumulator.note_crash(f"{crash}, on {where(record, sample)}")
                accumulator.add_failure(FailureReason.METRIC_ERROR, crash, group=member)
                record.update(score=None, failure=FailureReason.METRIC_ERROR, error=crash)
                return False
            record.update(score=score.score, details=score.details)
            stats = corpus_stats(score)
            if stats is not None:
                record["stats"] = stats
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
    if reason == JUDGE_BUDGET:  # not judged: the sample did not run to its end, it did not fail (not counted)
        record.update(score=None, failure=reason, error=message)
        return False
    if not message and reason == FailureReason.NO_REFERENCE:
        message = f"{where(record, sample)}: the reference is empty"
    accumulator.add_failure(reason, message if isinstance(message, str) else None, group=member)
    record.update(score=None, failure=reason, error=message)
    if score is not None and score.details and set(score.details) != {"error"}:
        record["details"] = score.details  # why the metric declined: e.g. the judge's prompt and unreadable answer
    return False


def metric_settings(metric: Metric) -> tuple[dict[str, Any], str | None]:
    """``metric.describe()`` for results.json, and the pair's error when it raised (then no settings)."""
    try:
        return dict(metric.describe()), None
    except Exception as error:
        log.debug("metric %s: describe() failed", metric.name or type(metric).__name__, exc_info=True)
        return {}, crash_message(metric, "describe", error)


async def summarize(accumulator: ScoreAccumulator, seed: int) -> tuple[MetricResult | None, str | None]:
    """The pair's result for one model (None when nothing was scored) and its error, if the metric raised.

    The error is the first exception of the metric's own code: on a sample (``score``/``ascore``, kept
    by the accumulator, with the count of samples it cost) or while the result was computed
    (``corpus``, ``corpus_details``, ``describe``: then there is no result). The bootstrap is CPU work,
    so it runs in a thread, off the loop.
    """
    error = accumulator.crash
    if error is not None:
        lost = accumulator.crashes
        error += f" ({lost} sample{'s' * (lost != 1)} not scored)"
    if not accumulator.n:
        return None, error
    try:
        return await asyncio.to_thread(accumulator.result, seed=seed), error
    except MetricCrashed as crashed:
        log.debug("%s", crashed, exc_info=True)
        return None, error or str(crashed)
    except Exception as failed:  # evalkit's own bug: still only this pair fails
        log.debug("computing the result failed", exc_info=True)
        return None, error or f"computing the result failed: {type(failed).__name__}: {' '.join(str(failed).split())}"


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

"""``stop_at_ci``: a pair asks its samples in a seeded random order and stops once its CI is narrow enough.

The order. Each sample gets a key, the first 8 bytes of SHA-256 of (the run's seed, the dataset's name, the
sample id), and the pair asks in (key, position) order: a uniformly random permutation that depends on nothing
else, so every prefix is a simple random sample of the pair's samples. It is the same for every metric of one
dataset (two pairs on one dataset draw the same samples, and share their answers) and the same in a resumed run.
A metric scored over groups of samples (``group_of``: MMBench's circular copies) is keyed by the group, so a
group's members are drawn together. The order is made without holding the dataset: each *block* of up to
``block`` samples is one pass over the pair's samples keeping the next ``block`` keys in a heap (a pass per
block; a pair that stops early reads few blocks).

The check points. The pair asks in *rounds*: the first round is ``stop_min_samples`` samples, each next one an
eighth of what was drawn so far (so at most about 1/8 more samples are asked than the rule needed). A round's
samples are all asked at once (up to the engine's window); when every one of them has its answer (or its
failure), each model's score and 95% CI are computed by the function results.json's come from
(:meth:`ScoreAccumulator.headline`: the normal interval of a mean, or the bootstrap of a corpus statistic,
so a bootstrap is re-estimated once per round, never per sample). A model whose CI half-width is at most
``stop_at_ci``, with at least ``stop_min_samples`` samples (groups, for a grouped metric) scored, is asked
nothing more; the pair ends when no model is left to ask, or when its samples run out. Because a check
happens only once its round is complete, nothing is in flight when a model stops: every sample asked is
answered and counted, and where the rule stops depends only on the answers, never on timing. A resumed run
draws the same order, finds the answers in the response store, and stops at the same sample.

The decision. The reported half-width at most ``stop_at_ci`` is necessary, never enough: for right/wrong
scores the reported width shrinks with an unusually extreme score, and a rule that trusted it stopped exactly the
runs whose interval misses (rate 0.9 at ±0.05: 75% coverage). :func:`decision_half_width` is the width the rule
trusts: for right/wrong scores the largest variance over the 99.9% Wilson interval of the mean, after at least
``MIN_EACH`` right and wrong answers; for other scores Chow and Robbins' ``half² + (z·range/n)²``.
docs/stopping.md has the simulation that chose it. A check never stops on a zero-width interval (every score so
far equal: 30 right answers in a row): such an interval says nothing about the precision, only that the
variance has not shown yet.

Shards. A shard sees only its share of the samples, so it cannot know the merged interval. With N shards each
shard stops at ``stop_at_ci * sqrt(N)``: the shards are random halves (thirds, ...) of the data of about equal
size, so the merged mean's standard error is about the shards' divided by sqrt(N), and the merged interval
(computed by ``evalkit merge`` over every shard's answers) comes out at about ``stop_at_ci``.
"""

from __future__ import annotations

import asyncio
import hashlib
import heapq
import logging
import math
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from evalkit.config.stopping import StopRule
from evalkit.data.sample import Sample
from evalkit.errors import UserError
from evalkit.metrics.accumulator import ScoreAccumulator
from evalkit.metrics.base import Metric, MetricResult
from evalkit.metrics.ci import Z95
from evalkit.report.results import ResultRow
from evalkit.run.merge_checks import SampleKey
from evalkit.run.scoring import group_member
from evalkit.run.shard import Shard

log = logging.getLogger("evalkit")

#: the reason a result row's and run.json's ``partial`` gives for a pair that stopped at its CI
STOPPED_AT_CI = "stopped_at_ci"
#: each round after the first draws this share of what was drawn before it
ROUND_GROWTH = 1 / 8
#: the confidence of the Wilson interval of rates whose largest variance a right/wrong score decides on (99.9%,
#: chosen by docs/stopping.md's simulation: at 95% and 99% stopping still cost coverage at 0.9 and 0.95)
VARIANCE_Z = 3.2905267314918945
#: a right/wrong score stops only once it has this many right and this many wrong answers (the usual condition
#: for the normal interval of a proportion; at 5, runs of a rate of 0.99 stopped on a lucky few errors)
MIN_EACH = 10
#: the most samples one pass over the data keeps for the rounds ahead
BLOCK = 1024

T = TypeVar("T")


def order_key(seed: int, dataset: str, key: str) -> int:
    """A sample's place in the pair's seeded order: 8 bytes of SHA-256 of (seed, dataset, id or group key)."""
    text = f"{seed}\x1f{dataset}\x1f{key}".encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:8], "big")


def round_size(drawn: int, rule: StopRule) -> int:
    """How many samples the next round draws: ``min_samples`` first, then an eighth of those drawn so far."""
    return rule.min_samples if drawn == 0 else max(1, math.ceil(drawn * ROUND_GROWTH))


def reached(accumulator: ScoreAccumulator, rule: StopRule, seed: int) -> tuple[int, float] | None:
    """(n, half-width) when the pair may stop, else None: the rule's one check.

    Two conditions: the reported interval (:meth:`ScoreAccumulator.headline`'s, the one results.json shows) is at
    most ``rule.half_width`` wide each side, and so is :func:`decision_half_width`, the width the rule trusts
    (see the module docstring). n is what the interval is over (samples, or whole groups). Too few scored, a
    zero-width interval (every score equal) or one that cannot be computed never stops.
    """
    if accumulator.n < rule.min_samples or accumulator.crash is not None:
        return None
    try:
        _, low, high, n = accumulator.headline(seed)
        half = (high - low) / 2.0
        if not (n >= rule.min_samples and math.isfinite(half) and 0.0 < half <= rule.half_width):
            return None
        trusted = decision_half_width(accumulator, n, half)
    except Exception:  # the metric's own bug: the pair's result reports it; the rule just goes on
        log.debug("stop_at_ci: the interval could not be computed", exc_info=True)
        return None
    return (n, half) if trusted <= rule.half_width else None


def wilson_variance(mean: float, n: int, z: float = Z95) -> float:
    """The largest p(1 - p) over the 95% Wilson score interval of a proportion ``mean`` of ``n``.

    The variance of right/wrong scores that the data cannot rule out, nearest 0.25: an unusually extreme mean
    (which has a narrow Wald interval) still gets the variance of the rates its interval holds.
    """
    z2 = z * z
    centre = (mean + z2 / (2 * n)) / (1 + z2 / n)
    spread = z / (1 + z2 / n) * math.sqrt(max(mean * (1 - mean), 0.0) / n + z2 / (4 * n * n))
    low, high = centre - spread, centre + spread
    if low <= 0.5 <= high:
        return 0.25
    return max(low * (1 - low), high * (1 - high))


def decision_half_width(accumulator: ScoreAccumulator, n: int, half: float) -> float:
    """The half-width the rule stops on, which does not shrink with an unusually extreme score.

    Scores that are all at the metric's two bounds (right or wrong, on any scale) decide on
    ``z · range · sqrt(v*/n)``, v* the largest variance over the mean's Wilson interval
    (:func:`wilson_variance`). Other scores (a mean of graded scores, a corpus statistic's bootstrap) decide on
    the Chow-Robbins form ``sqrt(half² + (z · range / n)²)`` (range: the bounds' span, else 1), which keeps a
    lucky run of near-equal scores from stopping on a variance that has not shown yet.
    """
    import numpy as np

    floor, ceiling = accumulator.metric.bounds
    bounded = floor is not None and ceiling is not None and ceiling > floor
    span = float(ceiling - floor) if bounded else 1.0  # type: ignore[operator]
    scores = accumulator.interval_scores() if bounded else None
    if scores is not None and scores.size > 0:
        unit = (scores - floor) / span
        if bool(np.all((unit == 0.0) | (unit == 1.0))):
            m, right = int(unit.size), int(unit.sum())
            if min(right, m - right) < MIN_EACH:
                return math.inf
            return span * Z95 * math.sqrt(wilson_variance(float(unit.mean()), m, VARIANCE_Z) / m)
    return math.hypot(half, Z95 * span / n)


def next_block(
    items: Iterator[T], key_of: Callable[[T], int], after: tuple[int, int] | None, size: int
) -> tuple[list[tuple[int, int, T]], bool]:
    """The next ``size`` items after ``after`` in (key, position) order, and whether more follow.

    One pass over ``items`` keeps ``size + 1`` of them in a heap (never the whole data). A block never ends
    inside a run of equal keys (one sample id's rows, one group's members) while more follow: the run is left
    whole for the next block, unless it is the whole block.
    """
    heap: list[tuple[int, int, T]] = []  # (-key, -position): the top is the largest kept; positions never tie
    for position, item in enumerate(items):
        key = key_of(item)
        if after is not None and (key, position) <= after:
            continue
        entry = (-key, -position, item)
        if len(heap) <= size:
            heapq.heappush(heap, entry)
        elif (key, position) < (-heap[0][0], -heap[0][1]):
            heapq.heapreplace(heap, entry)
    found = sorted(((-k, -p, item) for k, p, item in heap), key=lambda entry: (entry[0], entry[1]))
    more = len(found) > size
    if not more:
        return found, False
    block, following = found[:size], found[size][0]
    whole = [entry for entry in block if entry[0] != following]
    return (whole or block), True


@dataclass
class Reached:
    """Where a model stopped: the check's n (samples, or groups), its half-width, and the samples drawn then."""

    n: int
    half_width: float
    drawn: int


@dataclass
class EarlyStop:
    """One pair's stop rule at run time: the order, the rounds, and which models are still asked."""

    rule: StopRule
    seed: int
    dataset: str
    metric: Metric
    models: list[str]
    #: the rule as the whole plan asked it (a shard's ``rule`` is scaled by sqrt(N))
    asked: StopRule | None = None
    shards: int = 1
    block: int = BLOCK
    #: models not stopped yet
    asking: set[str] = field(default_factory=set)
    reached: dict[str, Reached] = field(default_factory=dict)
    #: samples drawn so far, and the pair's samples (known once a pass has read them all)
    drawn: int = 0
    planned: int | None = None

    @classmethod
    def of(
        cls, rule: StopRule | None, seed: int, dataset: str, metric: Metric, models: list[str], shard: Shard | None
    ) -> EarlyStop | None:
        if rule is None:
            return None
        shards = shard.count if shard is not None else 1
        return cls(
            rule=rule.scaled(math.sqrt(shards)),
            seed=seed,
            dataset=dataset,
            metric=metric,
            models=list(models),
            asked=rule,
            shards=shards,
            asking=set(models),
        )

    def asked_of(self, models: Sequence[T], name: Callable[[T], str]) -> list[T]:
        """The models a sample of this round is asked of: those not stopped yet."""
        return [model for model in models if name(model) in self.asking]

    def _key(self, sample: Sample) -> int:
        member = group_member(self.metric, sample)
        return order_key(self.seed, self.dataset, member[0] if member is not None else str(sample.id))

    async def rounds(
        self, samples: Callable[[], Iterator[Sample]], accumulators: dict[str, ScoreAccumulator]
    ) -> AsyncIterator[list[Sample]]:
        """The pair's rounds, in the seeded order; after each round is answered, each model's CI is checked.

        The caller asks every sample of a round and waits for all of them before it asks for the next round.
        """
        ahead: list[tuple[int, int, Sample]] = []
        after: tuple[int, int] | None = None
        more = True
        while self.asking:
            want = round_size(self.drawn, self.rule)
            if len(ahead) < want + 1 and more:
                found, more = await asyncio.to_thread(self._pass, samples, after)
                if found:
                    after = (found[-1][0], found[-1][1])
                ahead.extend(found)
            if not ahead:
                break
            cut = min(want, len(ahead))
            while cut < len(ahead) and ahead[cut][0] == ahead[cut - 1][0]:
                cut += 1  # one sample id's rows and one group's members stay in one round
            batch, ahead = ahead[:cut], ahead[cut:]
            yield [sample for _, _, sample in batch]
            self.drawn += len(batch)
            await self._check(accumulators)

    def _pass(
        self, samples: Callable[[], Iterator[Sample]], after: tuple[int, int] | None
    ) -> tuple[list[tuple[int, int, Sample]], bool]:
        """One pass over the pair's samples for the next block; it counts them too (``planned``)."""
        counted = 0

        def counting() -> Iterator[Sample]:
            nonlocal counted
            for sample in samples():
                counted += 1
                yield sample

        found, more = next_block(counting(), self._key, after, self.block)
        self.planned = counted
        return found, more

    async def _check(self, accumulators: dict[str, ScoreAccumulator]) -> None:
        for name in sorted(self.asking):
            accumulator = accumulators[name]
            if accumulator.n < self.rule.min_samples:
                continue
            found = await asyncio.to_thread(reached, accumulator, self.rule, self.seed)  # a bootstrap: off the loop
            if found is not None:
                n, half = found
                self.asking.discard(name)
                self.reached[name] = Reached(n=n, half_width=half, drawn=self.drawn)
                log.info(
                    "%s x %s: %s stopped at the CI asked (±%.4g after %d samples)",
                    self.dataset,
                    self.metric.name,
                    name,
                    half,
                    self.drawn,
                )

    def progress_of(self, model: str) -> tuple[int, int | None, bool]:
        """(samples drawn for ``model``, the pair's samples when known, whether it stopped): its progress line."""
        stopped = self.reached.get(model)
        return (stopped.drawn if stopped is not None else self.drawn), self.planned, stopped is not None

    def partial(self, model: str) -> dict[str, Any] | None:
        """What results.json's row says of a model that stopped at its CI (None: it was asked every sample)."""
        reached = self.reached.get(model)
        if reached is None or (self.planned is not None and reached.drawn >= self.planned):
            return None
        found: dict[str, Any] = {
            "reason": STOPPED_AT_CI,
            "stop_at_ci": self.rule.half_width,
            "stop_min_samples": self.rule.min_samples,
            "half_width": reached.half_width,
            "drawn": reached.drawn,
            "planned": self.planned,
        }
        if self.shards > 1 and self.asked is not None:
            found["stop_at_ci_asked"] = self.asked.half_width
            found["shards"] = self.shards
        return found


def partial_summary(rows: Sequence[ResultRow]) -> dict[str, Any] | None:
    """run.json's and results.json's ``partial``: the reason(s) and the result rows that stopped early, or None."""
    stopped = [r for r in rows if r.kind == "dataset" and r.partial]
    if not stopped:
        return None
    reasons = sorted({str((r.partial or {}).get("reason")) for r in stopped})
    return {
        "reason": reasons[0] if len(reasons) == 1 else "+".join(reasons),
        "results": [f"{r.dataset} / {r.metric} / {r.model}" for r in stopped],
    }


def seeded_prefix(planned: Iterable[SampleKey], seed: int, dataset: str) -> list[SampleKey]:
    """A shard's planned (sample id, row) keys in the order a pair without groups draws them."""
    return sorted(planned, key=lambda key: (order_key(seed, dataset, key[0]), -1 if key[1] is None else key[1]))


def check_drawn(
    source: Path, model: str, held: set[SampleKey], partial: dict[str, Any], order: list[SampleKey] | None
) -> None:
    """A stopped shard's records of ``model`` are the first ``drawn`` samples of its seeded order.

    ``order`` is :func:`seeded_prefix` of the shard's planned samples, or None where it is not known (the data
    is not readable here, or the metric draws whole groups, whose keys the records do not hold): then only the
    count is checked.
    """
    drawn = partial.get("drawn")
    if not isinstance(drawn, int) or isinstance(drawn, bool) or drawn != len(held):
        raise UserError(
            f"merge: {source}: {len(held)} records of model {model!r}, but the shard's results.json says it stopped "
            f"at its CI after drawing {drawn!r} samples; the shard's records are damaged: run the shard again"
        )
    if order is None:
        return
    foreign = sorted(held - set(order[:drawn]), key=str)
    if foreign:
        raise UserError(
            f"merge: {source}: model {model!r} has a record of sample {foreign[0][0]!r} (row {foreign[0][1]}), which "
            f"is not among the first {drawn} samples of the shard's seeded order (from the plan's filters.seed); the "
            "shard was run with another seed or data, or its records are damaged: run the shard again"
        )


def rescored_partial(source: dict[str, Any], records_of: str, result: MetricResult | None) -> dict[str, Any]:
    """The ``partial`` of a re-scored row whose records came from a pair that stopped at its CI.

    The records cover the stopped pair's draw only, so the new score is over that draw too: the row says so,
    with the new interval's half-width (``stop_at_ci`` was the other metric's, on its scale).
    """
    found = {k: v for k, v in source.items() if k not in ("half_width", "stop_at_ci_asked", "shards")}
    found["half_width"] = math.nan if result is None else (result.ci_high - result.ci_low) / 2.0
    found["records_of"] = records_of
    return found


def merged_partial(
    shards: Sequence[tuple[int, dict[str, Any] | None]], result: MetricResult | None, rule: StopRule | None
) -> dict[str, Any] | None:
    """The merged row's ``partial`` from each shard's (records, partial): None when no shard stopped early.

    The half-width is the merged interval's, computed over every shard's answers, not any shard's.
    """
    stopped = [found for _, found in shards if found]
    if not stopped:
        return None
    planned = 0
    for held, found in shards:
        count = (found or {}).get("planned", held) if found else held
        planned += int(count) if isinstance(count, int) and not isinstance(count, bool) else held
    half = math.nan if result is None else (result.ci_high - result.ci_low) / 2.0
    merged: dict[str, Any] = {
        "reason": STOPPED_AT_CI,
        "half_width": half,
        "drawn": sum(held for held, _ in shards),
        "planned": planned,
        "shards": len(shards),
        "shards_stopped": len(stopped),
    }
    if rule is not None:
        merged.update(stop_at_ci=rule.half_width, stop_min_samples=rule.min_samples)
        merged["stop_at_ci_shard"] = rule.half_width * math.sqrt(len(shards))
    return merged

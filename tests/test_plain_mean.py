"""The numpy-free mean (evalkit/metrics/plain_mean.py) gives numpy's numbers to the last bit.

results.json must not depend on which path computed a row, so every comparison here is of exact floats
(``float.hex``), on data chosen to make summation order show: long vectors, mixed magnitudes, signs, -0.0.
"""

from __future__ import annotations

import json
import math
import random
from typing import Any

import numpy as np
import pytest

from evalkit.data.sample import Sample
from evalkit.metrics import plain_mean
from evalkit.metrics.accumulator import ScoreAccumulator
from evalkit.metrics.base import Metric, MetricResult, SampleScore
from evalkit.metrics.ci import normal_ci
from evalkit.metrics.table import METRICS

# up to plain_mean.MAX_ROWS: beyond it numpy 2.2 and 2.3 themselves sum in different orders (see MAX_ROWS)
SIZES = [*range(0, 40), 63, 64, 65, 127, 128, 129, 130, 255, 256, 257, 1000, 4999, 8191, 8192]


def test_the_plain_path_stops_where_numpy_versions_agree() -> None:
    assert max(SIZES) == plain_mean.MAX_ROWS == 8_192


def _values(rng: random.Random, n: int) -> list[float]:
    kind = rng.randrange(5)
    if kind == 0:
        return [float(rng.random() < 0.6) for _ in range(n)]  # a proportion
    if kind == 1:
        return [rng.random() for _ in range(n)]
    if kind == 2:
        return [rng.uniform(-1, 1) * 10 ** rng.randint(-12, 12) for _ in range(n)]
    if kind == 3:
        return [rng.choice([0.1, 0.2, 0.3, 1 / 3, -0.0, 0.0]) for _ in range(n)]
    return [rng.gauss(0.5, 0.3) for _ in range(n)]


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a.hex() == b.hex()


@pytest.mark.parametrize("n", SIZES)
def test_pairwise_sum_is_numpys_sum(n: int) -> None:
    rng = random.Random(n)
    for _ in range(3):
        values = _values(rng, n)
        assert _same(plain_mean.pairwise_sum(values), float(np.add.reduce(np.array(values, dtype=np.float64))))
        assert _same(plain_mean.mean(values), float(np.mean(values)) if n else math.nan)


@pytest.mark.parametrize("n", SIZES)
def test_normal_ci_is_the_numpy_one(n: int) -> None:
    rng = random.Random(1000 + n)
    for _ in range(3):
        values = _values(rng, n)
        low, high = plain_mean.normal_ci(values)
        want_low, want_high = normal_ci(np.array(values))
        assert _same(low, want_low) and _same(high, want_high)


@pytest.mark.parametrize(
    "values",
    [
        [],
        [0.7],
        [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0],  # all equal: a zero-width interval
        [0.1] * 1000,
        [math.nan, 0.5, math.inf, 0.25, -math.inf, 1.0],  # what is not finite is left out
        [math.nan, 0.5],  # one finite value: no interval
        [-0.0, -0.0, 0.0],
        [1e308, 1e308, -1e308],
    ],
)
def test_normal_ci_on_awkward_data(values: list[float]) -> None:
    low, high = plain_mean.normal_ci(values)
    with np.errstate(over="ignore"):
        want_low, want_high = normal_ci(np.array(values, dtype=np.float64))
    assert _same(low, want_low) and _same(high, want_high)


@pytest.mark.parametrize(
    ("numerator", "denominator"),
    [(1.0, 3.0), (0.0, 0.0), (-0.0, 0.0), (2.0, 0.0), (-2.0, 0.0), (2.0, -0.0), (math.nan, 0.0), (math.inf, math.inf)],
)
def test_divide_is_numpys(numerator: float, denominator: float) -> None:
    with np.errstate(invalid="ignore", divide="ignore"):
        want = float(np.float64(numerator) / np.float64(denominator))
    assert _same(plain_mean.divide(numerator, denominator), want)


@pytest.mark.parametrize("n", [1, 2, 9, 130, 5000])
def test_column_sums_are_numpys(n: int) -> None:
    rng = random.Random(n)
    k = 3
    stats = [x for _ in range(n) for x in (rng.gauss(0, 1e6), rng.random(), 1.0)]
    order = list(range(n))
    rng.shuffle(order)
    matrix = np.array(stats, dtype=np.float64).reshape(n, k)
    want = matrix[order].sum(axis=0)
    assert all(_same(a, float(b)) for a, b in zip(plain_mean.column_sums(stats, k, order), want, strict=True))


def _as_text(result: MetricResult) -> str:
    """Every field of a result as results.json writes it (floats by repr: exact), NaN included."""
    return json.dumps(
        [result.score, result.ci_low, result.ci_high, result.n, result.ci_method, result.details], sort_keys=False
    )


def _fill(acc: ScoreAccumulator, metric: Metric, rng: random.Random, n: int) -> None:
    for i in range(n):
        order = float(rng.randrange(n)) if rng.random() < 0.9 else None  # repeats and gaps: ties and NaN orders
        groups = {"accent": rng.choice(["a", "b", "c10", "c2"])} if i % 3 else {"gender": "f"}
        answer = rng.choice(["yes", "no", "yes no", "yes, yes maybe", "Yes."])
        acc.add(metric.score(answer, Sample(id=str(i), reference="yes")), groups, order=order)
        if i % 17 == 0:
            acc.add_failure("timeout", "slow")


@pytest.mark.parametrize("name", ["exact_match", "accuracy", "f1", "squad_f1", "karma:exact_match"])
@pytest.mark.parametrize("n", [1, 2, 3, 40, 700])
def test_a_mean_metric_gets_the_numpy_result(name: str, n: int) -> None:
    metric = METRICS.get(name)()
    acc = ScoreAccumulator(metric)
    _fill(acc, metric, random.Random(n), n)
    assert acc.plain_result() is not None  # the numpy-free path is the one taken
    assert _as_text(acc.plain_result()) == _as_text(acc.numpy_result())


class _Scores(Metric):
    """A mean of given per-sample scores with subscores, stats of three columns, and a score missing now and then."""

    name = "plain_mean_probe"
    bounds = (0.0, 1.0)

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        value = float(prediction)
        return SampleScore(None if value > 0.95 else value, (value, 1.0, 2.0))

    def subscores(self, score: SampleScore) -> dict[str, float]:
        value = score.stats[0]
        return {"low": value / 3} if value < 0.5 else {"high": value, "nan": math.nan}


def test_scores_subscores_missing_scores_and_clipping() -> None:
    rng = random.Random(7)
    metric = _Scores()
    acc = ScoreAccumulator(metric)
    for i in range(300):
        value = rng.choice([0.0, 0.01, 0.99, 1.0, rng.random()])
        acc.add(metric.score(repr(value), Sample(id=str(i), reference=None)), order=float(300 - i))
    got = acc.plain_result()
    assert got is not None and _as_text(got) == _as_text(acc.numpy_result())
    assert set(got.details["subscores"]) == {"low", "high", "nan"}


class _Ratio(_Scores):
    def corpus(self, totals: Any) -> Any:
        return totals[..., 0] / totals[..., 2]


def test_what_is_not_a_plain_mean_takes_the_numpy_path(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(3)
    wer = METRICS.get("wer")()  # a bootstrap interval
    ratio = _Ratio()  # its own corpus
    for metric in (wer, ratio):
        acc = ScoreAccumulator(metric)
        for i in range(20):
            acc.add(metric.score(repr(rng.random()) if metric is ratio else "a b", Sample(id=str(i), reference="a c")))
        assert acc.plain_result() is None
    metric = METRICS.get("exact_match")()
    acc = ScoreAccumulator(metric)
    for i in range(30):
        acc.add(metric.score("yes", Sample(id=str(i), reference="yes")))
    monkeypatch.setattr(plain_mean, "MAX_ROWS", 29)  # beyond it: the numpy path
    assert acc.plain_result() is None

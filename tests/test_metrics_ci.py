"""Confidence intervals: coverage in seeded simulations, determinism, the aggregate rule."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evalkit.metrics.base import MetricResult
from evalkit.metrics.ci import Z95, bootstrap_ci, combine, corpus_batch, corpus_value, normal_ci
from evalkit.metrics.table import METRICS


def test_normal_ci_values() -> None:
    scores = np.array([0.0, 1.0, 1.0, 0.0, 1.0])
    low, high = normal_ci(scores)
    half = Z95 * np.std(scores, ddof=1) / math.sqrt(5)
    assert (low, high) == pytest.approx((0.6 - half, 0.6 + half))
    assert all(math.isnan(v) for v in normal_ci(np.array([1.0])))
    assert all(math.isnan(v) for v in normal_ci(np.array([])))
    assert normal_ci(np.array([1.0, np.nan, 3.0])) == pytest.approx(normal_ci(np.array([1.0, 3.0])))


def test_normal_ci_coverage_for_a_mean() -> None:
    rng = np.random.default_rng(123)
    p, n, trials = 0.3, 200, 300
    covered = 0
    for _ in range(trials):
        low, high = normal_ci(rng.binomial(1, p, n).astype(float))
        covered += low <= p <= high
    assert 0.90 <= covered / trials <= 0.99


def _wer_population(rng: np.random.Generator, n: int, rate: float) -> np.ndarray:
    """Utterances of 1-40 words, each word wrong with probability ``rate`` (true corpus WER = rate)."""
    words = rng.integers(1, 41, n).astype(float)
    edits = rng.binomial(words.astype(int), rate).astype(float)
    return np.stack([edits, words, edits / words, np.ones(n)], axis=1)


def test_bootstrap_ci_coverage_for_corpus_wer() -> None:
    metric = METRICS.get("wer")(language="en")
    rng = np.random.default_rng(7)
    rate, trials = 0.15, 200
    covered = 0
    for trial in range(trials):
        stats = _wer_population(rng, 150, rate)
        low, high = bootstrap_ci(metric, stats, n_resamples=400, seed=trial)
        assert low <= float(metric.corpus(stats.sum(axis=0))) <= high
        covered += low <= rate <= high
    assert 0.90 <= covered / trials <= 0.99


def test_bootstrap_is_deterministic_and_chunking_is_safe() -> None:
    metric = METRICS.get("wer")(language="en")
    stats = _wer_population(np.random.default_rng(0), 1000, 0.2)
    first = bootstrap_ci(metric, stats, n_resamples=300, seed=5)
    assert bootstrap_ci(metric, stats, n_resamples=300, seed=5) == first
    assert bootstrap_ci(metric, stats, n_resamples=300, seed=6) != first
    small_chunks = bootstrap_ci(metric, stats, n_resamples=300, seed=5, chunk_elements=1)  # one resample a chunk
    assert small_chunks == pytest.approx(first, abs=0.01)
    assert first[0] < 0.2 < first[1] and first[1] - first[0] < 0.05


def test_bootstrap_degenerate_inputs() -> None:
    metric = METRICS.get("wer")(language="en")
    assert all(math.isnan(v) for v in bootstrap_ci(metric, np.zeros((1, 4))))
    assert all(math.isnan(v) for v in bootstrap_ci(metric, np.zeros((0, 4))))
    with pytest.raises(ValueError):
        bootstrap_ci(metric, np.zeros(4))


def test_bootstrap_matches_a_naive_resampling_distribution() -> None:
    """Same interval (within Monte-Carlo error) as resampling rows one by one."""
    metric = METRICS.get("bleu")(language="en")
    rng = np.random.default_rng(1)
    n = 300
    lens = rng.integers(5, 30, (n, 2)).astype(float)
    totals = np.maximum(lens[:, :1] - np.arange(4), 1)
    correct = np.floor(totals * rng.uniform(0.2, 0.8, (n, 4)))
    stats = np.concatenate([lens, correct, totals], axis=1)
    naive = [float(metric.corpus(stats[rng.integers(0, n, n)].sum(axis=0))) for _ in range(2000)]
    low, high = bootstrap_ci(metric, stats, n_resamples=2000, seed=3)
    assert low == pytest.approx(np.percentile(naive, 2.5), abs=0.6)
    assert high == pytest.approx(np.percentile(naive, 97.5), abs=0.6)


def test_combine_macro_average() -> None:
    a = MetricResult(0.2, 0.1, 0.3, 100, "bootstrap")
    b = MetricResult(0.4, 0.38, 0.42, 1000, "bootstrap")
    out = combine([a, b])
    se = math.sqrt((0.1 / Z95) ** 2 + (0.02 / Z95) ** 2) / 2
    assert out.score == pytest.approx(0.3)
    assert (out.ci_low, out.ci_high) == pytest.approx((0.3 - Z95 * se, 0.3 + Z95 * se))
    assert out.n == 1100
    assert out.ci_method == "macro"
    assert out.details["datasets"] == 2


def test_combine_edge_cases() -> None:
    good = MetricResult(0.5, 0.4, 0.6, 10, "normal")
    empty = MetricResult(math.nan, math.nan, math.nan, 0, "normal")
    out = combine([good, empty])
    assert out.score == 0.5 and out.details["excluded"] == 1
    assert (out.ci_low, out.ci_high) == pytest.approx((0.4, 0.6))
    assert math.isnan(combine([]).score)
    no_ci = combine([good, MetricResult(0.7, math.nan, math.nan, 1, "normal")])
    assert no_ci.score == pytest.approx(0.6) and math.isnan(no_ci.ci_low)


class _VectorRatio:
    def corpus(self, totals: np.ndarray) -> np.ndarray:
        totals = np.asarray(totals, dtype=float)
        return totals[..., 0] / totals[..., 1]


class _ScalarRatio:
    """A corpus written for one (k,) vector only, as a plugin author might."""

    def corpus(self, totals: np.ndarray) -> float:
        found, words = totals
        return float(found) / float(words)


def test_a_corpus_for_one_vector_gives_the_same_interval_row_by_row() -> None:
    rng = np.random.default_rng(5)
    stats = np.column_stack([rng.integers(0, 4, 300), rng.integers(1, 5, 300)]).astype(float)
    # 300 rows: chunks of 873, then 127; with 2 resamples a batch of 2 rows of k=2 unpacks rows, not columns
    for n_resamples in (1000, 2, 3):
        assert bootstrap_ci(_ScalarRatio(), stats, n_resamples, seed=3) == pytest.approx(
            bootstrap_ci(_VectorRatio(), stats, n_resamples, seed=3)
        )


def test_corpus_batch_goes_row_by_row_only_when_the_batch_is_wrong() -> None:
    batch = np.array([[1.0, 2.0], [3.0, 4.0]])
    values, slow = corpus_batch(_VectorRatio(), batch)
    assert values.tolist() == [0.5, 0.75] and not slow
    values, slow = corpus_batch(_ScalarRatio(), batch)  # p, r = rows: right shape, wrong values, caught
    assert values.tolist() == [0.5, 0.75] and slow
    values, slow = corpus_batch(_ScalarRatio(), np.array([[1.0, 2.0], [3.0, 4.0], [1.0, 1.0]]))  # raises on batch
    assert values.tolist() == [0.5, 0.75, 1.0] and slow
    assert corpus_value(_ScalarRatio(), np.array([3.0, 4.0])) == 0.75


def test_a_corpus_that_raises_on_one_vector_too_propagates() -> None:
    class Broken:
        def corpus(self, totals: np.ndarray) -> np.ndarray:
            raise KeyError("weights")

    class TwoNumbers:
        def corpus(self, totals: np.ndarray) -> np.ndarray:
            return np.array([1.0, 2.0])

    stats = np.ones((10, 2))
    with pytest.raises(KeyError, match="weights"):
        bootstrap_ci(Broken(), stats)
    with pytest.raises(ValueError, match=r"returned shape \(2,\), expected one number"):
        corpus_value(TwoNumbers(), stats.sum(axis=0))


def test_the_ci_method_used_is_the_one_for_the_corpus_statistic() -> None:
    from evalkit.metrics.base import Metric, ci_method_used

    assert ci_method_used(METRICS.get("exact_match")) == "normal"  # a mean: the normal interval of the scores
    assert ci_method_used(METRICS.get("word_error_rate")) == "bootstrap"
    assert ci_method_used(METRICS.get("rubric_evaluation")) == "normal"  # a clipped mean, says corpus_is_mean

    class Ratio(Metric):
        def score(self, prediction: str, sample: object) -> object:  # type: ignore[override]
            raise NotImplementedError

        def corpus(self, totals: np.ndarray) -> np.ndarray:
            return _VectorRatio().corpus(totals)

    assert Ratio.ci_method == "normal" and ci_method_used(Ratio) == "bootstrap"
    assert ci_method_used(Ratio()) == "bootstrap"

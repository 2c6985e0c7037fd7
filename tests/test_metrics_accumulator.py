"""ScoreAccumulator: corpus results, failures, growth and per-group results."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from evalkit.data.sample import Sample
from evalkit.metrics.accumulator import MetricCrashed, ScoreAccumulator, audio_length_bucket
from evalkit.metrics.base import Metric, SampleScore
from evalkit.metrics.ci import bootstrap_ci, normal_ci
from evalkit.metrics.table import METRICS


@pytest.mark.parametrize(
    ("seconds", "bucket"),
    [
        (0.0, "0-5s"),
        (4.99, "0-5s"),
        (5.0, "5-10s"),
        (12, "10-20s"),
        (20.0, "20-30s"),
        (30.0, "30s+"),
        (600, "30s+"),
        (None, "unknown"),
        (float("nan"), "unknown"),
        (-1, "unknown"),
        ("x", "unknown"),
    ],
)
def test_audio_length_bucket(seconds: object, bucket: str) -> None:
    assert audio_length_bucket(seconds) == bucket  # type: ignore[arg-type]


def _wer_samples(seed: int, count: int) -> list[tuple[str, str, dict[str, str]]]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        ref = [rng.choice(["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]) for _ in range(rng.randint(1, 15))]
        hyp = [w for w in ref if rng.random() > 0.15]
        groups = {"accent": rng.choice(["us", "uk", "in"]), "length": audio_length_bucket(rng.uniform(0, 40))}
        out.append((" ".join(ref), " ".join(hyp), groups))
    return out


def test_wer_result_with_groups_and_failures() -> None:
    metric = METRICS.get("wer")(language="en")
    acc = ScoreAccumulator(metric, initial_capacity=2)  # forces several doublings
    samples = _wer_samples(0, 150)
    for i, (ref, hyp, groups) in enumerate(samples):
        acc.add(metric.score(hyp, Sample(id=str(i), reference=ref)), groups)
    acc.add_failure("timeout")
    acc.add_failure("timeout")
    acc.add(SampleScore(None, failure="http 500"))
    acc.add(metric.score("x", Sample(id="none", reference=None)))
    result = acc.result(seed=0)

    rows = np.array([metric.score(h, Sample(id="r", reference=r)).stats for r, h, _ in samples])
    assert result.n == 150 == acc.n
    assert result.score == pytest.approx(rows[:, 0].sum() / rows[:, 1].sum())
    assert result.ci_method == "bootstrap"
    assert (result.ci_low, result.ci_high) == bootstrap_ci(metric, rows, seed=0)
    details = result.details
    assert details["normalizer"] == "whisper-english" and details["level"] == "word"
    assert details["mean_sample_rate"] == pytest.approx(rows[:, 2].mean())
    assert details["n_failed"] == 4
    assert details["failure_reasons"] == {"http 500": 1, "no reference": 1, "timeout": 2}

    for name in ("accent", "length"):
        per_value = details["groups"][name]
        assert sum(v["n"] for v in per_value.values()) == 150
        for value, got in per_value.items():
            mask = np.array([g[name] == value for _, _, g in samples])
            sub = rows[mask]
            assert got["n"] == int(mask.sum())
            assert got["score"] == pytest.approx(sub[:, 0].sum() / sub[:, 1].sum())
            if got["n"] >= 2:
                assert got["ci_low"] <= got["score"] <= got["ci_high"]
    assert list(details["groups"]["length"]) == [
        b for b in ["0-5s", "5-10s", "10-20s", "20-30s", "30s+"] if b in details["groups"]["length"]
    ]


def test_mean_metric_uses_normal_ci() -> None:
    metric = METRICS.get("exact_match")()
    acc = ScoreAccumulator(metric)
    rng = random.Random(1)
    values = []
    for i in range(80):
        ok = rng.random() < 0.6
        values.append(1.0 if ok else 0.0)
        acc.add(metric.score("yes" if ok else "no", Sample(id=str(i), reference="yes")), {"half": str(i % 2)})
    result = acc.result()
    assert result.score == pytest.approx(np.mean(values))
    assert (result.ci_low, result.ci_high) == pytest.approx(normal_ci(np.array(values)))
    assert result.ci_method == "normal"
    assert result.details["groups"]["half"]["0"]["score"] == pytest.approx(np.mean(values[0::2]))


def test_partial_groups_and_score_only_samples() -> None:
    metric = METRICS.get("exact_match")()
    acc = ScoreAccumulator(metric)
    acc.add(SampleScore(1.0), {"speaker": "a"})  # no stats: treated as (score, 1)
    acc.add(SampleScore(0.0))
    acc.add(SampleScore(1.0), {"speaker": "b"})
    acc.add(SampleScore(None))  # neither score nor stats
    result = acc.result()
    assert result.n == 3 and result.score == pytest.approx(2 / 3)
    assert result.details["failure_reasons"] == {"no score": 1}
    speakers = result.details["groups"]["speaker"]
    assert speakers["a"]["n"] == 1 and speakers["b"]["n"] == 1
    assert math.isnan(speakers["a"]["ci_low"])


def test_empty_and_inconsistent() -> None:
    metric = METRICS.get("wer")(language="en")
    acc = ScoreAccumulator(metric)
    acc.add_failure("timeout")
    result = acc.result()
    assert result.n == 0 and math.isnan(result.score) and result.details["n_failed"] == 1
    acc.add(SampleScore(0.5, (1.0, 2.0, 0.5, 1.0)))
    with pytest.raises(ValueError):
        acc.add(SampleScore(0.5, (1.0, 2.0)))


def test_bootstrap_ci_does_not_depend_on_completion_order() -> None:
    """Concurrent samples finish in any order; with `order` the CI is the same for every arrival order."""
    import random

    from evalkit.data.sample import Sample
    from evalkit.metrics.speech.wer import WordErrorRate

    metric = WordErrorRate(language="en")
    pairs = [
        (f"the cat sat on mat {i}", f"the cat sat on the mat {i}") if i % 3 else (f"a b c {i}", f"a b c {i}")
        for i in range(40)
    ]
    scored = [(i, metric.score(hyp, Sample(id=str(i), reference=ref))) for i, (hyp, ref) in enumerate(pairs)]
    results = []
    for seed in range(3):
        shuffled = scored[:]
        random.Random(seed).shuffle(shuffled)
        acc = ScoreAccumulator(metric)
        for index, score in shuffled:
            acc.add(score, {"speaker": str(index % 2)}, order=index)
        res = acc.result(seed=0)
        results.append((res.score, res.ci_low, res.ci_high, res.details["groups"]["speaker"]["0"]["ci_low"]))
    assert results[0] == results[1] == results[2]


class _Ratio(Metric):
    """Σ first / Σ second: a corpus ratio that keeps the default ci_method ("normal")."""

    name = "test_ratio"

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        found, words = (float(x) for x in prediction.split())
        return SampleScore(found / words, (found, words))

    def corpus(self, totals: np.ndarray) -> np.ndarray:
        totals = np.asarray(totals, dtype=float)
        return totals[..., 0] / totals[..., 1]


def test_an_overridden_corpus_gets_the_interval_of_its_own_statistic() -> None:
    """The issue's case: a ratio's headline with a normal CI of per-sample ratios centred elsewhere."""
    metric = _Ratio()
    acc = ScoreAccumulator(metric)
    rows = [(1, 1), (0, 9), (2, 2), (1, 1), (3, 10), (1, 1), (0, 4), (2, 2)]
    for i, (found, words) in enumerate(rows):
        acc.add(metric.score(f"{found} {words}", Sample(id=str(i), reference="")), order=i)
    result = acc.result(seed=4)
    stats = np.array(rows, dtype=float)
    assert result.score == pytest.approx(stats[:, 0].sum() / stats[:, 1].sum())
    assert result.ci_method == result.details["ci_method"] == "bootstrap"
    assert (result.ci_low, result.ci_high) == pytest.approx(bootstrap_ci(metric, stats, seed=4))
    assert result.ci_low <= result.score <= result.ci_high
    assert (
        METRICS.get("exact_match")().corpus_is_mean is None
        and ScoreAccumulator(METRICS.get("exact_match")()).ci_method == "normal"
    )


@pytest.mark.parametrize("method", ["corpus", "corpus_details", "describe"])
def test_a_metric_method_that_raises_is_one_line_naming_it(method: str) -> None:
    class Broken(_Ratio):
        pass

    def boom(self: object, *args: object) -> None:
        raise ValueError("too many values to unpack\n(expected 2)")

    setattr(Broken, method, boom)
    acc = ScoreAccumulator(Broken())
    for i in range(3):
        acc.add(SampleScore(0.5, (1.0, 2.0)), order=i)
    with pytest.raises(MetricCrashed) as caught:
        acc.result()
    assert str(caught.value).startswith(
        f"metric 'test_ratio': {method}() raised ValueError: too many values to unpack (expected 2) ("
    )
    assert caught.value.method == method and "\n" not in str(caught.value)

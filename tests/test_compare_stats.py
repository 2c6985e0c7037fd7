"""The paired comparison's statistics against references: scipy's binomial test, a slow paired bootstrap."""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np
import pytest
from scipy.stats import binomtest

from evalkit.metrics import METRICS
from evalkit.report.compare import summary_cells
from evalkit.report.paired import bootstrap_summary, mcnemar_exact, paired_bootstrap, paired_comparison


def _record(sid: str, row: int | None, score: float | None, stats: list[float] | None = None, **extra: Any) -> dict:
    record: dict[str, Any] = {"sample_id": sid, "model": "m", "dataset": "d", "metric": "x", "row": row}
    record["score"] = score
    if stats is not None:
        record["stats"] = stats
    record.update(extra)
    return record


# ---------------------------------------------------------------- McNemar


@pytest.mark.parametrize(
    "a_only, b_only",
    [(0, 0), (1, 0), (0, 5), (5, 0), (3, 1), (10, 3), (7, 7), (20, 25), (100, 60), (1000, 1100),
     (2500, 2400), (30000, 29500), (40000, 38800), (3000, 10), (6, 6000)],
)  # fmt: skip
def test_mcnemar_exact_equals_scipy_binomtest(a_only: int, b_only: int) -> None:
    expected = binomtest(min(a_only, b_only), a_only + b_only, 0.5).pvalue if a_only + b_only else 1.0
    assert mcnemar_exact(a_only, b_only) == pytest.approx(expected, rel=1e-11, abs=1e-300)


def test_mcnemar_exact_is_exact_for_small_counts() -> None:
    # 2 * P(X <= 1) for X ~ Bin(6, 1/2) = 2 * 7/64
    assert mcnemar_exact(1, 5) == 14 / 64
    assert mcnemar_exact(0, 5) == mcnemar_exact(5, 0) == 2 / 32
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 2)


# ---------------------------------------------------------------- the paired bootstrap


def _slow_paired_bootstrap(metric: Any, stats_a: np.ndarray, stats_b: np.ndarray, n_resamples: int, seed: int) -> list:
    """One resample at a time, rows gathered by index and summed: the definition, without the count matrix."""
    rng = np.random.default_rng(seed)
    n = stats_a.shape[0]
    diffs = []
    for _ in range(n_resamples):
        index = rng.integers(0, n, size=n)
        a = float(np.asarray(metric.corpus(stats_a[index].sum(axis=0))))
        b = float(np.asarray(metric.corpus(stats_b[index].sum(axis=0))))
        if math.isfinite(b - a):
            diffs.append(b - a)
    return diffs


def _slow_summary(diffs: list[float]) -> tuple[float, float, float]:
    ordered = sorted(diffs)
    m = len(ordered)

    def percentile(q: float) -> float:  # numpy's default (linear) percentile
        pos = (m - 1) * q
        lo, hi = math.floor(pos), math.ceil(pos)
        return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)

    below = sum(1 for d in diffs if d <= 0)
    above = sum(1 for d in diffs if d >= 0)
    return percentile(0.025), percentile(0.975), min(1.0, 2 * (1 + min(below, above)) / (1 + m))


@pytest.mark.parametrize("name", ["word_error_rate", "bleu", "exact_match"])
def test_paired_bootstrap_equals_a_slow_reimplementation(name: str) -> None:
    metric = METRICS.get(name)()
    rng = np.random.default_rng(7)
    n = 150
    if name == "word_error_rate":  # (edits, reference words)
        words = rng.integers(1, 30, size=n)
        stats_a = np.column_stack([rng.integers(0, 6, size=n), words]).astype(float)
        stats_b = np.column_stack([np.maximum(0, stats_a[:, 0] + rng.integers(-2, 2, size=n)), words]).astype(float)
    elif name == "bleu":  # sys_len, ref_len, 4 matches, 4 totals
        length = rng.integers(4, 20, size=n).astype(float)

        def side() -> np.ndarray:
            totals = np.column_stack([np.maximum(length - k, 0) for k in range(4)])
            matches = np.floor(totals * rng.uniform(0.2, 1.0, size=(n, 1)))
            return np.column_stack([length, length + rng.integers(-2, 3, size=n), matches, totals])

        stats_a, stats_b = side(), side()
    else:
        a = (rng.random(n) < 0.6).astype(float)
        b = (rng.random(n) < 0.7).astype(float)
        stats_a, stats_b = np.column_stack([a, np.ones(n)]), np.column_stack([b, np.ones(n)])
    # a chunk of a few resamples at a time, so several chunks are joined
    fast = paired_bootstrap(metric, stats_a, stats_b, n_resamples=300, seed=11, chunk_elements=7 * n)
    slow = _slow_paired_bootstrap(metric, stats_a, stats_b, 300, 11)
    assert fast.shape == (len(slow),) and np.allclose(fast, slow, rtol=1e-12, atol=1e-12)
    assert bootstrap_summary(fast) == pytest.approx(_slow_summary(slow), rel=1e-12, abs=1e-12)


# ---------------------------------------------------------------- paired_comparison on records


def _wer_records(seed: int, n: int = 80) -> tuple[list[dict], list[dict]]:
    rng = random.Random(seed)
    side_a, side_b = [], []
    for i in range(n):
        words = rng.randint(2, 15)
        edits_a = rng.randint(0, words // 2)
        edits_b = max(0, edits_a - rng.randint(0, 2))  # B makes fewer errors: a real improvement
        side_a.append(_record(f"u{i}", i, edits_a / words, [edits_a, words], prediction=f"a{i}"))
        side_b.append(_record(f"u{i}", i, edits_b / words, [edits_b, words], prediction=f"b{i}"))
    return side_a, side_b


def test_wer_is_compared_by_its_corpus_statistic_on_paired_samples_only() -> None:
    side_a, side_b = _wer_records(3)
    # B failed on two samples and A on one: those are listed, not scored 0; one sample is only in A
    side_b[5] = _record("u5", 5, None, failure="http_500", error="HTTP 500: upstream <b>down</b>")
    side_b[9] = _record("u9", 9, None, failure="timeout", error="no answer in 10 s")
    side_a[12] = _record("u12", 12, None, failure="connection", error="Connection refused")
    side_a.append(_record("extra", 999, 0.5, [1, 2]))
    shuffled = list(reversed(side_b))  # records come in completion order, not file order
    result = paired_comparison(side_a, shuffled, "word_error_rate", seed=4)
    kept = [i for i in range(80) if i not in (5, 9, 12)]
    edits_a = sum(side_a[i]["stats"][0] for i in kept)
    edits_b = sum(side_b[i]["stats"][0] for i in kept)
    words = sum(side_a[i]["stats"][1] for i in kept)
    assert result.statistic == "corpus" and result.n_paired == len(kept)
    assert result.score_a == pytest.approx(edits_a / words) and result.score_b == pytest.approx(edits_b / words)
    assert result.diff == pytest.approx((edits_b - edits_a) / words)
    assert [f.sample_id for f in result.failed_only_b] == ["u5", "u9"]
    assert [f.reason for f in result.failed_only_b] == ["http_500", "timeout"]
    assert result.failed_only_b[0].error == "HTTP 500: upstream <b>down</b>"
    assert [(f.sample_id, f.reason) for f in result.failed_only_a] == [("u12", "connection")]
    assert result.only_in_a == 1 and result.only_in_b == 0 and result.mcnemar is None
    # the interval is the paired bootstrap's over the kept rows in file order, whatever order the records came in
    stats_a = np.array([side_a[i]["stats"] for i in kept], dtype=float)
    stats_b = np.array([side_b[i]["stats"] for i in kept], dtype=float)
    metric = METRICS.get("word_error_rate")()
    low, high, p = _slow_summary(_slow_paired_bootstrap(metric, stats_a, stats_b, 1000, 4))
    assert (result.ci_low, result.ci_high, result.p_bootstrap) == pytest.approx((low, high, p), rel=1e-12)
    # WER is lower-is-better: B's fewer edits are an improvement, and significant
    assert result.higher_is_better is False and result.ci_high < 0 and result.p_value < 0.05
    assert result.verdict == "better"
    assert summary_cells(result)[8] == "≤0.002 (bootstrap)"  # at the floor 2/(1000 + 1): "at most", not equal
    assert result.worsened == 0 and result.improved == len(result.changed) > 0
    biggest = max(abs(side_b[i]["score"] - side_a[i]["score"]) for i in kept)
    assert abs(result.changed[0].score_b - result.changed[0].score_a) == pytest.approx(biggest)
    assert {c.sample_id for c in result.changed} == {f"u{i}" for i in kept if side_a[i]["score"] != side_b[i]["score"]}


def test_the_same_records_give_the_same_result_and_the_seed_matters() -> None:
    side_a, side_b = _wer_records(5)
    first = paired_comparison(side_a, side_b, "word_error_rate", seed=1).as_dict()
    again = paired_comparison(side_a, side_b, "word_error_rate", seed=1).as_dict()
    other = paired_comparison(side_a, side_b, "word_error_rate", seed=2).as_dict()
    assert first == again
    assert first["diff"] == other["diff"] and first["diff_ci"] != other["diff_ci"]


def test_binary_scores_get_mcnemar_and_name_every_flip() -> None:
    truth_a = [1, 1, 1, 0, 0, 1, 0, 1, 1, 0, 1, 1]
    truth_b = [1, 0, 0, 1, 0, 1, 0, 0, 1, 0, 1, 0]
    side_a = [_record(f"q{i}", i, float(v), [float(v), 1.0]) for i, v in enumerate(truth_a)]
    side_b = [_record(f"q{i}", i, float(v), [float(v), 1.0]) for i, v in enumerate(truth_b)]
    result = paired_comparison(side_a, side_b, "exact_match")
    assert result.mcnemar is not None and (result.mcnemar.a_only, result.mcnemar.b_only) == (4, 1)
    assert result.p_value == pytest.approx(binomtest(1, 5, 0.5).pvalue) and result.test == "McNemar exact"
    assert result.verdict == "not significant"  # 4 against 1 is not evidence at 5%
    assert [(c.sample_id, c.change) for c in result.changed] == [
        ("q1", "worsened"),
        ("q2", "worsened"),
        ("q3", "improved"),
        ("q7", "worsened"),
        ("q11", "worsened"),
    ]
    many_a = [_record(f"q{i}", i, 1.0, [1.0, 1.0]) for i in range(40)]
    many_b = [_record(f"q{i}", i, 0.0 if i < 12 else 1.0, [0.0 if i < 12 else 1.0, 1.0]) for i in range(40)]
    worse = paired_comparison(many_a, many_b, "exact_match")
    assert worse.p_value == pytest.approx(2 / 2**12) and worse.verdict == "worse"
    assert summary_cells(worse)[8] == "0.00049 (McNemar)"


def test_records_without_stats_fall_back_to_the_mean_and_say_so() -> None:
    side_a, side_b = _wer_records(8)
    for record in side_a + side_b:
        del record["stats"]
    result = paired_comparison(side_a, side_b, "word_error_rate")
    assert result.statistic == "mean"
    assert any("without per-sample stats" in n and "not by the metric's corpus statistic" in n for n in result.notes)
    assert result.score_a == pytest.approx(sum(r["score"] for r in side_a) / len(side_a))


def test_models_are_picked_from_mixed_records_and_unknown_metrics_fall_back() -> None:
    records = [_record("s1", 0, 1.0, [1.0, 1.0], model="x"), _record("s1", 0, 0.0, [0.0, 1.0], model="y")]
    records += [_record("s2", 1, 1.0, [1.0, 1.0], model="x"), _record("s2", 1, 1.0, [1.0, 1.0], model="y")]
    records.append(_record("s1", 0, 1.0, [1.0, 1.0], model="y"))  # a repeated id: the first record wins
    result = paired_comparison(records, records, "exact_match", model_a="x", model_b="y")
    assert (result.model_a, result.model_b, result.n_paired) == ("x", "y", 2)
    assert [c.sample_id for c in result.changed] == ["s1"] and any("repeated" in n for n in result.notes)
    with pytest.raises(ValueError, match="several models"):
        paired_comparison(records, records, "exact_match")
    plugin = paired_comparison(records, records, "no_such_metric_here", model_a="x", model_b="y")
    assert plugin.statistic == "mean" and plugin.higher_is_better is None and plugin.verdict in ("-", "not significant")
    assert any("not known here" in n for n in plugin.notes)


def test_nothing_scored_in_both_is_said_not_computed() -> None:
    side_a = [_record("s1", 0, None, failure="timeout", error="slow")]
    side_b = [_record("s1", 0, 1.0, [1.0, 1.0])]
    result = paired_comparison(side_a, side_b, "exact_match")
    assert result.n_paired == 0 and result.verdict == "-" and math.isnan(result.diff)
    assert [f.sample_id for f in result.failed_only_a] == ["s1"] and result.as_dict()["diff"] is None


def test_the_runs_metric_options_build_the_metric_whose_corpus_is_compared() -> None:
    from evalkit.report.compare import metric_options
    from evalkit.report.paired import build_metric

    meta = {
        "config": {
            "dataset_metric": [
                ["asr", "wer"],  # an alias of word_error_rate, for a task
                ["qa_a", "bleu", {"max_ngram_order": 2}],
                ["text_qa", "bleu", {"max_ngram_order": 3}],
            ]
        }
    }
    assert metric_options(meta, "qa_a", "bleu") == {"max_ngram_order": 2}  # the dataset's own entry wins
    assert metric_options(meta, "qa_b", "bleu") is None  # two entries that disagree: no single answer
    assert metric_options(meta, "librispeech", "word_error_rate") == {}
    metric, notes = build_metric("bleu", {"max_ngram_order": 2})
    assert metric is not None and metric.max_ngram_order == 2 and notes == []  # type: ignore[attr-defined]
    metric, notes = build_metric("bleu", {"max_ngram_order": "many"})
    assert metric is not None and metric.max_ngram_order == 4 and "its defaults are used" in notes[0]  # type: ignore[attr-defined]


def test_one_paired_sample_gives_no_interval_and_no_verdict() -> None:
    result = paired_comparison([_record("s1", 0, 0.2, [1, 5])], [_record("s1", 0, 0.6, [3, 5])], "word_error_rate")
    assert result.n_paired == 1 and result.diff == pytest.approx(0.4)
    assert math.isnan(result.ci_low) and math.isnan(result.p_value) and result.verdict == "-"
    flip = paired_comparison([_record("s1", 0, 1.0, [1, 1])], [_record("s1", 0, 0.0, [0, 1])], "exact_match")
    assert flip.p_value == 1.0 and flip.verdict == "not significant"


def test_zero_one_scores_of_a_metric_whose_corpus_is_no_mean_get_the_bootstrap_verdict() -> None:
    from evalkit.metrics.base import Metric, SampleScore

    class Recall(Metric):
        """Recall over the positive samples: per-sample 0/1 scores, corpus = hits / positives (not their mean)."""

        name = "recall_for_test"

        def score(self, prediction: str, sample: Any) -> SampleScore:
            raise NotImplementedError

        def corpus(self, totals: np.ndarray) -> np.ndarray:
            totals = np.asarray(totals, dtype=float)
            return totals[..., 0] / totals[..., 1]

    # positives count in the denominator, negatives do not: recall differs from the mean score
    rows_a = [(1.0, [1.0, 1.0]), (1.0, [0.0, 0.0]), (0.0, [0.0, 1.0]), (1.0, [1.0, 1.0])] * 10
    rows_b = [(0.0, [0.0, 1.0]), (1.0, [0.0, 0.0]), (0.0, [0.0, 1.0]), (1.0, [1.0, 1.0])] * 10
    side_a = [_record(f"r{i}", i, s, st) for i, (s, st) in enumerate(rows_a)]
    side_b = [_record(f"r{i}", i, s, st) for i, (s, st) in enumerate(rows_b)]
    result = paired_comparison(side_a, side_b, Recall())
    assert result.mcnemar is not None and result.mcnemar.a_only == 10 and not result.binary
    assert result.test == "paired bootstrap" and result.p_value == result.p_bootstrap
    assert result.score_a == pytest.approx(20 / 30) and result.score_b == pytest.approx(10 / 30)
    assert any("not their mean" in note for note in result.notes)

"""Paired tests of two sets of records on the same samples: did B change the score, and on which samples?

Two runs (or two models) scored on the same samples are paired data: a sample
that is hard for A is usually hard for B, so the difference of the two corpus
values varies far less than either value does. Comparing the two runs' own
confidence intervals throws that away and misses real differences; testing the
difference sample by sample keeps it.

- The *paired bootstrap* resamples sample indices once per resample and uses
  the same indices for A and B; the difference of the metric's own corpus
  statistic (``metric.corpus`` of the summed per-sample ``stats`` rows, as the
  accumulator computes the headline) is taken per resample. Its percentile
  interval is the CI of the difference; the two-sided p-value is twice the
  smaller share of resampled differences on either side of zero (with the usual
  +1 so it is never 0), which makes "p < 0.05" agree with "the 95% CI excludes 0".
- *McNemar's exact test* is used when every paired score is 0 or 1: only the
  discordant samples (right in one, wrong in the other) carry information, and
  under "no difference" each is equally likely to go either way, so their split
  is Binomial(n, 1/2). It is exact at any size, where the bootstrap is not
  reliable with few samples, so it gives the verdict of a 0/1 metric.

Only samples scored in both are paired. A sample that failed in one run and
was scored in the other is listed on its own, never scored as 0: a failure is
the endpoint's doing, not the model's answer. Records without ``stats`` (made
before records carried them) fall back to the mean of ``score``, and say so.
Everything is seeded: the same records give the same interval and p-value.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from evalkit.metrics.base import Metric, ci_method_used
from evalkit.metrics.ci import corpus_batch, corpus_value

if TYPE_CHECKING:
    import numpy as np

#: a difference whose p-value is below this is called a difference
ALPHA = 0.05
#: answers kept per sample for the lists of changed samples (the records keep the whole text)
ANSWER_CHARS = 500
#: up to this many discordant pairs McNemar's sum is done in exact rational arithmetic
_EXACT_UP_TO = 2000


@dataclass(frozen=True, slots=True)
class SideSample:
    """What one side says about one sample: enough to pair, score and list it, nothing more."""

    row: int | None
    score: float | None
    stats: tuple[float, ...] | None
    failure: str | None
    error: str | None
    answer: str | None

    @property
    def scored(self) -> bool:
        return self.failure is None


@dataclass(frozen=True, slots=True)
class ChangedSample:
    """A sample scored in both whose score differs; ``change`` is "improved", "worsened" or "changed"."""

    sample_id: str
    row: int | None
    score_a: float
    score_b: float
    change: str
    answer_a: str | None
    answer_b: str | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "sample_id": self.sample_id,
            "row": self.row,
            "score_a": self.score_a,
            "score_b": self.score_b,
            "change": self.change,
            "answer_a": self.answer_a,
            "answer_b": self.answer_b,
        }


@dataclass(frozen=True, slots=True)
class FailedSample:
    """A sample that failed on one side and was scored on the other (``score`` is the other side's)."""

    sample_id: str
    row: int | None
    reason: str
    error: str | None
    score: float | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "sample_id": self.sample_id,
            "row": self.row,
            "reason": self.reason,
            "error": self.error,
            "other_score": self.score,
        }


@dataclass(frozen=True, slots=True)
class McNemar:
    """McNemar's exact test: ``a_only`` samples right only in A (1 -> 0), ``b_only`` right only in B (0 -> 1)."""

    a_only: int
    b_only: int
    p_value: float


@dataclass
class PairedComparison:
    """The paired test of one dataset-metric pair between side A and side B; differences are B − A."""

    dataset: str
    metric: str
    model_a: str
    model_b: str
    #: "corpus" (the metric's own statistic over per-sample stats) or "mean" (of per-sample scores)
    statistic: str
    n_paired: int
    score_a: float
    score_b: float
    diff: float
    ci_low: float
    ci_high: float
    #: the paired bootstrap's two-sided p-value
    p_bootstrap: float
    n_resamples: int
    seed: int
    higher_is_better: bool | None
    mcnemar: McNemar | None = None
    #: scored in both, different scores: biggest change first (for 0/1 metrics: every flip)
    changed: list[ChangedSample] = field(default_factory=list)
    failed_only_a: list[FailedSample] = field(default_factory=list)
    failed_only_b: list[FailedSample] = field(default_factory=list)
    failed_both: int = 0
    #: samples with a record on one side only (a run cut short, a filter that differs)
    only_in_a: int = 0
    only_in_b: int = 0
    notes: list[str] = field(default_factory=list)
    #: the compared statistic is the mean of the per-sample scores (so McNemar's test is a test of it)
    corpus_is_mean: bool = True
    #: how a peer tool reports the pair ({tool, dataset, metric, scale}) where both runs' results do (an AU-Harness
    #: config): the views show its names and every score, difference and CI on its scale, as the runs' tables do
    reported_as: dict[str, Any] | None = None

    @property
    def scale(self) -> float:
        """What scores and differences are multiplied by where a peer's scale is shown; 1 else."""
        value = (self.reported_as or {}).get("scale", 1)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 1.0

    @property
    def shown_dataset(self) -> str:
        return str((self.reported_as or {}).get("dataset") or self.dataset)

    @property
    def shown_metric(self) -> str:
        return str((self.reported_as or {}).get("metric") or self.metric)

    @property
    def binary(self) -> bool:
        """McNemar's test gives the verdict: 0/1 scores whose mean is the compared statistic."""
        return self.mcnemar is not None and self.corpus_is_mean

    @property
    def p_value(self) -> float:
        """The p-value the verdict follows: McNemar's exact one for 0/1 scores, else the paired bootstrap's."""
        return self.mcnemar.p_value if self.mcnemar is not None and self.binary else self.p_bootstrap

    @property
    def test(self) -> str:
        return "McNemar exact" if self.binary else "paired bootstrap"

    @property
    def improved(self) -> int:
        return sum(1 for c in self.changed if c.change == "improved")

    @property
    def worsened(self) -> int:
        return sum(1 for c in self.changed if c.change == "worsened")

    @property
    def verdict(self) -> str:
        """B against A: "better"/"worse" if p < ALPHA ("differs": direction unknown), else "not significant"."""
        if self.n_paired == 0 or not math.isfinite(self.p_value) or not math.isfinite(self.diff):
            return "-"
        if self.p_value >= ALPHA or self.diff == 0:
            return "not significant"
        if self.higher_is_better is None:
            return "differs"
        return "better" if (self.diff > 0) == self.higher_is_better else "worse"

    def as_dict(self) -> dict[str, Any]:
        def clean(value: float) -> float | None:
            return value if math.isfinite(value) else None

        return {
            "dataset": self.dataset,
            "metric": self.metric,
            "model_a": self.model_a,
            "model_b": self.model_b,
            "statistic": self.statistic,
            "n_paired": self.n_paired,
            "score_a": clean(self.score_a),
            "score_b": clean(self.score_b),
            "diff": clean(self.diff),
            "diff_ci": [clean(self.ci_low), clean(self.ci_high)],
            "p_value": clean(self.p_value),
            "test": self.test,
            "p_bootstrap": clean(self.p_bootstrap),
            "mcnemar": None
            if self.mcnemar is None
            else {"a_only": self.mcnemar.a_only, "b_only": self.mcnemar.b_only, "p_value": self.mcnemar.p_value},
            "n_resamples": self.n_resamples,
            "seed": self.seed,
            "higher_is_better": self.higher_is_better,
            "verdict": self.verdict,
            "improved": self.improved,
            "worsened": self.worsened,
            "changed": [c.as_dict() for c in self.changed],
            "failed_only_a": [f.as_dict() for f in self.failed_only_a],
            "failed_only_b": [f.as_dict() for f in self.failed_only_b],
            "failed_both": self.failed_both,
            "only_in_a": self.only_in_a,
            "only_in_b": self.only_in_b,
            "notes": list(self.notes),
            **({} if self.reported_as is None else {"reported_as": self._reported(clean)}),
        }

    def _reported(self, clean: Any) -> dict[str, Any]:
        """The peer's names with the scores, difference and its CI on the peer's scale (evalkit's stay beside)."""
        factor = self.scale
        return {
            **(self.reported_as or {}),
            "score_a": clean(self.score_a * factor),
            "score_b": clean(self.score_b * factor),
            "diff": clean(self.diff * factor),
            "diff_ci": [clean(self.ci_low * factor), clean(self.ci_high * factor)],
        }


# ---------------------------------------------------------------- the two tests


def mcnemar_exact(a_only: int, b_only: int) -> float:
    """Two-sided exact McNemar p-value: ``2·P(X <= min)`` for X ~ Binomial(a_only + b_only, 1/2), at most 1.

    Exact rational arithmetic up to a few thousand discordant pairs; beyond, the same sum in log space
    (relative error ~1e-12), since the exact integers grow to thousands of digits.
    """
    if a_only < 0 or b_only < 0:
        raise ValueError(f"discordant counts must be >= 0, got {a_only}, {b_only}")
    n, k = a_only + b_only, min(a_only, b_only)
    if n == 0 or 2 * k >= n:
        return 1.0
    if n <= _EXACT_UP_TO:
        tail = sum(math.comb(n, i) for i in range(k + 1))
        return float(min(Fraction(1), Fraction(2 * tail, 2**n)))
    import numpy as np

    # log P(X = j) for j = k, k-1, ..., 0: the largest term by Loader's saddle-point form (accurate to ~1e-15
    # where lgamma differences of numbers near n lose digits), the rest by ratios of successive terms
    j = np.arange(k, 0, -1, dtype=np.float64)
    steps = np.log(j) - np.log(n - j + 1.0)  # log P(X = j-1) - log P(X = j)
    logs = np.concatenate(([0.0], np.cumsum(steps))) + _log_binom_half(n, k)
    top = float(logs.max())
    return min(1.0, 2.0 * math.exp(top + math.log(float(np.exp(logs - top).sum()))))


def _log_binom_half(n: int, x: int) -> float:
    """log P(X = x) for X ~ Binomial(n, 1/2), without the cancellation of lgamma(n + 1) - lgamma(x + 1) - ..."""
    if x == 0 or x == n:
        return -n * math.log(2.0)
    half = n / 2.0
    return (
        _stirling_error(n)
        - _stirling_error(x)
        - _stirling_error(n - x)
        - _deviance(x, half)
        - _deviance(n - x, half)
        + 0.5 * math.log(n / (2.0 * math.pi * x * (n - x)))
    )


def _stirling_error(n: int) -> float:
    """log(n!) minus Stirling's approximation of it: a small number, by its series where n is large."""
    if n <= 15:
        return math.lgamma(n + 1.0) - (n + 0.5) * math.log(n) + n - 0.5 * math.log(2.0 * math.pi)
    nn = float(n) * n
    s0, s1, s2, s3, s4 = 1 / 12, 1 / 360, 1 / 1260, 1 / 1680, 1 / 1188
    if n > 500:
        return (s0 - s1 / nn) / n
    if n > 80:
        return (s0 - (s1 - s2 / nn) / nn) / n
    if n > 35:
        return (s0 - (s1 - (s2 - s3 / nn) / nn) / nn) / n
    return (s0 - (s1 - (s2 - (s3 - s4 / nn) / nn) / nn) / nn) / n


def _deviance(x: float, mean: float) -> float:
    """``x·log(x/mean) + mean − x``, by its series when x is near the mean (where the direct form cancels)."""
    if abs(x - mean) < 0.1 * (x + mean):
        v = (x - mean) / (x + mean)
        total = (x - mean) * v
        term = 2.0 * x * v
        v *= v
        for j in range(1, 1000):
            term *= v
            following = total + term / (2 * j + 1)
            if following == total:
                return following
            total = following
        return total
    return x * math.log(x / mean) + mean - x


def paired_bootstrap(
    metric: Any,
    stats_a: np.ndarray,
    stats_b: np.ndarray,
    n_resamples: int = 1000,
    seed: int = 0,
    *,
    chunk_elements: int = 262_144,
) -> np.ndarray:
    """``corpus(B) − corpus(A)`` for each of ``n_resamples`` joint resamples of the paired rows (non-finite dropped).

    Resample ``r`` draws ``rng.integers(0, n, size=n)`` from ``numpy.random.default_rng(seed)``, in order,
    and sums the drawn rows of both matrices; as in :func:`evalkit.metrics.ci.bootstrap_ci`, a chunk of
    resamples is a matrix of draw counts, so no resampled data is built and memory stays bounded.
    """
    import numpy as np

    stats_a = np.asarray(stats_a, dtype=np.float64)
    stats_b = np.asarray(stats_b, dtype=np.float64)
    if stats_a.ndim != 2 or stats_a.shape[0] != stats_b.shape[0]:
        raise ValueError(
            f"paired stats must be two (n, k) matrices with the same n, got {stats_a.shape}, {stats_b.shape}"
        )
    n = stats_a.shape[0]
    if n == 0 or n_resamples < 1:
        return np.empty(0, dtype=np.float64)
    rng = np.random.default_rng(seed)
    chunk = max(1, min(n_resamples, chunk_elements // n))
    diffs = np.empty(n_resamples, dtype=np.float64)
    by_row_a = by_row_b = False
    for start in range(0, n_resamples, chunk):
        size = min(chunk, n_resamples - start)
        draws = rng.integers(0, n, size=(size, n), dtype=np.int64 if size * n >= 2**31 else np.int32)
        draws += (np.arange(size, dtype=draws.dtype) * n)[:, None]
        counts = np.bincount(draws.ravel(), minlength=size * n).reshape(size, n).astype(np.float64)
        del draws
        values_a, by_row_a = corpus_batch(metric, counts @ stats_a, row_by_row=by_row_a)
        values_b, by_row_b = corpus_batch(metric, counts @ stats_b, row_by_row=by_row_b)
        diffs[start : start + size] = values_b - values_a
    return diffs[np.isfinite(diffs)]


def bootstrap_summary(diffs: np.ndarray, confidence: float = 0.95) -> tuple[float, float, float]:
    """(low, high, two-sided p) from resampled differences; NaN for all three when there are none."""
    import numpy as np

    m = int(diffs.size)
    if m == 0:
        return math.nan, math.nan, math.nan
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(diffs, [tail, 100.0 - tail])
    below = int(np.count_nonzero(diffs <= 0))
    above = int(np.count_nonzero(diffs >= 0))
    p = min(1.0, 2.0 * (1 + min(below, above)) / (1 + m))
    return float(low), float(high), p


# ---------------------------------------------------------------- records -> sides


@dataclass
class Side:
    """One side's samples by id, read once from its records."""

    samples: dict[str, SideSample] = field(default_factory=dict)
    #: records of an id already seen (the first wins)
    repeats: int = 0
    dataset: str = ""
    model: str = ""


def side_samples(records: Iterable[Mapping[str, Any]], model: str | None = None) -> Side:
    """What ``model``'s records say per sample id (the first record of an id wins).

    ``model`` None takes every record, which must then be of one model (ValueError names them otherwise).
    A record with a ``failure``, or without a finite score, is a failed sample with its reason.
    """
    side = Side(model=model or "")
    seen_models: set[str] = set()
    for record in records:
        record_model = str(record.get("model", ""))
        if model is not None and record_model != model:
            continue
        seen_models.add(record_model)
        if not side.dataset:
            side.dataset = str(record.get("dataset") or "")
        sample_id = str(record.get("sample_id", ""))
        if sample_id in side.samples:
            side.repeats += 1
            continue
        side.samples[sample_id] = _side_sample(record)
    if model is None:
        if len(seen_models) > 1:
            raise ValueError(f"records of several models ({', '.join(sorted(seen_models))}): name the model to compare")
        side.model = next(iter(seen_models), "")
    return side


def split_by_model(
    records: Iterable[Mapping[str, Any]], models: set[str] | None = None, seen: set[str] | None = None
) -> dict[str, Side]:
    """Model -> its side, from one pass over a pair's records (only ``models`` if given; ``seen`` gets every model)."""
    sides: dict[str, Side] = {}
    for record in records:
        model = str(record.get("model", ""))
        if seen is not None:
            seen.add(model)
        if models is not None and model not in models:
            continue
        side = sides.get(model)
        if side is None:
            side = sides[model] = Side(dataset=str(record.get("dataset") or ""), model=model)
        sample_id = str(record.get("sample_id", ""))
        if sample_id in side.samples:
            side.repeats += 1
        else:
            side.samples[sample_id] = _side_sample(record)
    return sides


def _side_sample(record: Mapping[str, Any]) -> SideSample:
    row = record.get("row")
    row = row if isinstance(row, int) and not isinstance(row, bool) else None
    score = record.get("score")
    number = float(score) if isinstance(score, (int, float)) and not isinstance(score, bool) else None
    failure = record.get("failure")
    answer = record.get("prediction")
    if answer is None:
        answer = record.get("response")
    text = None if answer is None else str(answer)[:ANSWER_CHARS]
    error = record.get("error")
    if failure is None and (number is None or not math.isfinite(number)):
        failure = "no_score"
    if failure is not None:
        return SideSample(row, None, None, str(failure), None if error is None else str(error), text)
    raw = record.get("stats")
    stats: tuple[float, ...] | None = None
    if isinstance(raw, (list, tuple)) and raw and all(isinstance(v, (int, float)) for v in raw):
        stats = tuple(float(v) for v in raw)
    return SideSample(row, number, stats, None, None, text)


def _order_key(item: tuple[str, SideSample, SideSample]) -> tuple[Any, ...]:
    """File order of the sample (A's row, else B's), then its id: the corpus is rebuilt in the run's own order."""
    sample_id, a, b = item
    row = a.row if a.row is not None else b.row
    return (row is None, row if row is not None else 0, sample_id)


# ---------------------------------------------------------------- the comparison


def build_metric(name: str, options: Mapping[str, Any] | None = None) -> tuple[Metric | None, list[str]]:
    """The metric whose ``corpus`` the comparison recomputes, built with the run's options; and notes.

    None (with a note) when the metric is unknown here (a plugin that is not installed): the
    comparison then falls back to the mean of the per-sample scores.
    """
    from evalkit.metrics import METRICS

    notes: list[str] = []
    try:
        cls = METRICS.get(name)
    except Exception:
        return None, [f"metric {name!r} is not known here (a plugin not installed?): compared by its mean score"]
    if options:
        try:
            return cls(**dict(options)), notes
        except Exception as error:
            notes.append(f"metric {name!r} could not be built with the run's options ({error}); its defaults are used")
    try:
        return cls(), notes
    except Exception as error:
        return None, [*notes, f"metric {name!r} could not be built ({error}): compared by its mean score"]


class _Mean:
    """The default corpus, a mean over ``(score, 1)`` rows: what records without stats are compared by."""

    def corpus(self, totals: np.ndarray) -> np.ndarray:
        return Metric.corpus(self, totals)  # type: ignore[arg-type]


def paired_comparison(
    records_a: Iterable[Mapping[str, Any]],
    records_b: Iterable[Mapping[str, Any]],
    metric: str | Metric,
    *,
    model_a: str | None = None,
    model_b: str | None = None,
    options: Mapping[str, Any] | None = None,
    seed: int = 0,
    n_resamples: int = 1000,
) -> PairedComparison:
    """The paired test of one dataset-metric pair: A's records (of ``model_a``) against B's (of ``model_b``).

    ``metric`` is the pair's metric, by name (built with ``options``, the run's metric options) or
    as an instance; its ``corpus`` is the statistic compared. Records are read once, in any order.
    """
    return compare_sides(
        side_samples(records_a, model_a),
        side_samples(records_b, model_b),
        metric,
        options=options,
        seed=seed,
        n_resamples=n_resamples,
    )


def new_comparison(
    metric: str | Metric,
    *,
    options: Mapping[str, Any] | None,
    dataset: str,
    models: tuple[str, str],
    repeats: tuple[int, int],
    seed: int,
    n_resamples: int,
) -> tuple[PairedComparison, Any]:
    """The comparison before any sample is paired (every figure NaN), and the metric whose ``corpus`` it tests.

    One start for the comparison of records held as objects (:func:`compare_sides`) and of the viewer's,
    read from the pair's index into arrays: the same notes in the same order.
    """
    notes: list[str] = []
    if isinstance(metric, Metric):
        built: Any = metric
        name = metric.name or type(metric).__name__
    else:
        name = metric
        built, notes = build_metric(name, options)
    for label, count in zip("AB", repeats):
        if count:
            notes.append(f"{count} repeated sample id(s) in {label}: the first record of each is used")
    higher_is_better = None if built is None else bool(getattr(built, "higher_is_better", True))
    result = PairedComparison(
        dataset=dataset,
        metric=name,
        model_a=models[0],
        model_b=models[1],
        statistic="corpus",
        n_paired=0,
        score_a=math.nan,
        score_b=math.nan,
        diff=math.nan,
        ci_low=math.nan,
        ci_high=math.nan,
        p_bootstrap=math.nan,
        n_resamples=n_resamples,
        seed=seed,
        higher_is_better=higher_is_better,
        notes=notes,
    )
    return result, built


def compare_sides(
    a_side: Side,
    b_side: Side,
    metric: str | Metric,
    *,
    options: Mapping[str, Any] | None = None,
    seed: int = 0,
    n_resamples: int = 1000,
) -> PairedComparison:
    """:func:`paired_comparison` of two sides already read (``split_by_model`` reads a file's models at once)."""
    side_a, side_b = a_side.samples, b_side.samples
    result, built = new_comparison(
        metric,
        options=options,
        dataset=a_side.dataset or b_side.dataset,
        models=(a_side.model, b_side.model),
        repeats=(a_side.repeats, b_side.repeats),
        seed=seed,
        n_resamples=n_resamples,
    )
    both = sorted(
        ((sid, a, side_b[sid]) for sid, a in side_a.items() if sid in side_b),
        key=_order_key,
    )
    paired = [(sid, a, b) for sid, a, b in both if a.scored and b.scored]
    result.n_paired = len(paired)
    result.only_in_a = sum(1 for sid in side_a if sid not in side_b)
    result.only_in_b = sum(1 for sid in side_b if sid not in side_a)
    for sid, a, b in both:
        if a.scored and not b.scored:
            result.failed_only_b.append(
                FailedSample(sid, b.row if b.row is not None else a.row, b.failure or "", b.error, a.score)
            )
        elif b.scored and not a.scored:
            result.failed_only_a.append(
                FailedSample(sid, a.row if a.row is not None else b.row, a.failure or "", a.error, b.score)
            )
        elif not a.scored and not b.scored:
            result.failed_both += 1
    if not paired:
        result.notes.append("no sample was scored in both: nothing to compare")
        return result
    _test(result, built, paired)
    return result


def fill_test(
    result: PairedComparison,
    metric: Any,
    scores_a: np.ndarray,
    scores_b: np.ndarray,
    stats: tuple[np.ndarray, np.ndarray] | str,
) -> bool:
    """Fill in the statistics and the McNemar test of ``result`` from its paired samples' scores, in pairing order.

    ``stats`` is the two sides' per-sample stats rows (one width), or why they cannot be used: "missing" (a
    record without them) or "widths" (rows of different lengths). False when the metric's corpus raised (said
    in the notes): the changed samples are then not listed either. Records held as objects
    (:func:`compare_sides`) and the viewer's arrays read from a pair's index come here alike, so both give the
    same figures for the same samples.
    """
    import numpy as np

    if metric is not None and not isinstance(stats, str):
        stats_a, stats_b = stats
    else:
        if metric is not None and stats == "missing":
            result.notes.append(
                "records without per-sample stats (made before records carried them): compared by the mean "
                "of the per-sample scores"
                + ("" if ci_method_used(metric) == "normal" else ", not by the metric's corpus statistic")
            )
        elif metric is not None:
            result.notes.append(
                "the two sides' stats rows differ in length: compared by the mean of the per-sample scores"
            )
        result.statistic = "mean"
        metric = _Mean()
        stats_a = np.column_stack([scores_a, np.ones_like(scores_a)])
        stats_b = np.column_stack([scores_b, np.ones_like(scores_b)])
    paired = len(scores_a)
    try:
        result.score_a = corpus_value(metric, stats_a.sum(axis=0))
        result.score_b = corpus_value(metric, stats_b.sum(axis=0))
        # one pair resamples to itself every time: a zero-width interval that would read as certainty
        diffs = paired_bootstrap(metric, stats_a, stats_b, result.n_resamples, result.seed) if paired > 1 else None
    except Exception as error:
        result.notes.append(f"the metric's corpus() raised {type(error).__name__}: {error}")
        return False
    result.diff = result.score_b - result.score_a
    if diffs is None:
        result.notes.append("one sample scored in both: no interval or bootstrap p-value")
    else:
        result.ci_low, result.ci_high, result.p_bootstrap = bootstrap_summary(diffs)
    if bool(np.isin(scores_a, (0.0, 1.0)).all() and np.isin(scores_b, (0.0, 1.0)).all()):
        a_only = int(np.count_nonzero((scores_a == 1.0) & (scores_b == 0.0)))
        b_only = int(np.count_nonzero((scores_a == 0.0) & (scores_b == 1.0)))
        result.mcnemar = McNemar(a_only, b_only, mcnemar_exact(a_only, b_only))
        result.corpus_is_mean = result.statistic == "mean" or ci_method_used(metric) == "normal"
        if not result.corpus_is_mean:
            result.notes.append(
                f"scores are 0/1 but {result.metric}'s corpus statistic is not their mean: the paired bootstrap "
                f"gives the verdict (McNemar's p on the per-sample scores: {result.mcnemar.p_value:.3g})"
            )
    return True


def change_counts(scores_a: np.ndarray, scores_b: np.ndarray, higher_is_better: bool | None) -> tuple[int, int, int]:
    """(changed, improved, worsened) among paired scores: what the list of changed samples counts."""
    import numpy as np

    differ = scores_a != scores_b
    changed = int(np.count_nonzero(differ))
    if higher_is_better is None:
        return changed, 0, 0
    up = scores_b > scores_a
    improved = int(np.count_nonzero(differ & (up == higher_is_better)))
    return changed, improved, changed - improved


def _test(result: PairedComparison, metric: Any, paired: list[tuple[str, SideSample, SideSample]]) -> None:
    """Fill in the statistics, the McNemar test and the changed samples of ``result`` from its paired samples."""
    import numpy as np

    scores_a = np.array([a.score for _, a, _ in paired], dtype=np.float64)
    scores_b = np.array([b.score for _, _, b in paired], dtype=np.float64)
    with_stats = all(a.stats is not None and b.stats is not None for _, a, b in paired)
    widths = {len(s.stats) for _, a, b in paired for s in (a, b) if s.stats is not None}
    stats: tuple[np.ndarray, np.ndarray] | str
    if metric is not None and with_stats and len(widths) == 1:
        stats = (
            np.array([a.stats for _, a, _ in paired], dtype=np.float64),
            np.array([b.stats for _, _, b in paired], dtype=np.float64),
        )
    else:
        stats = "widths" if with_stats else "missing"
    if not fill_test(result, metric, scores_a, scores_b, stats):
        return
    changed = []
    for sid, a, b in paired:
        if a.score == b.score:
            continue
        assert a.score is not None and b.score is not None
        up = b.score > a.score
        change = (
            "changed"
            if result.higher_is_better is None
            else ("improved" if up == result.higher_is_better else "worsened")
        )
        changed.append(
            ChangedSample(sid, a.row if a.row is not None else b.row, a.score, b.score, change, a.answer, b.answer)
        )
    # biggest change first; ties (every flip of a 0/1 metric) in the run's file order, as ``paired`` is
    changed.sort(key=lambda c: -abs(c.score_b - c.score_a))
    result.changed = changed

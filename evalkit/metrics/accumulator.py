"""Collect per-sample scores of one (dataset, metric) pair and turn them into a MetricResult.

An engine streams samples and must not keep predictions; what it keeps per
scored sample is one row of sufficient statistics and the per-sample score,
in growable C arrays of float64 (the standard library's :mod:`array`: appends
are amortized O(1), a million samples cost a few tens of MB, no Python object
per sample). numpy comes in only when the result is computed, so a run's
start-up and its per-sample path never import it. Group labels (accent,
gender, length bucket, ...) are stored as small integer codes per group name,
so per-group results are computed from the same rows at the end.

A metric may also report named *subscores* per sample (a rubric's per-tag
scores): when it defines ``subscores(score) -> {name: value}``, those values
are kept per name in compact float arrays and summarized as means with a
normal CI in ``details["subscores"]``; a name counts only the samples that
report it.

Not thread-safe: one accumulator belongs to one engine, fed from its loop.
"""

from __future__ import annotations

import math
import re
from array import array
from collections import Counter
from typing import TYPE_CHECKING, Any

from evalkit.failures import FailureReason
from evalkit.metrics.base import Metric, MetricResult, SampleScore, ci_method_used

if TYPE_CHECKING:
    import numpy as np

#: upper edges (seconds, exclusive) and labels of the audio-length buckets used for WER-by-length
LENGTH_BUCKETS: tuple[tuple[float, str], ...] = (
    (5.0, "0-5s"),
    (10.0, "5-10s"),
    (20.0, "10-20s"),
    (30.0, "20-30s"),
    (math.inf, "30s+"),
)


class MetricCrashed(Exception):
    """A metric's own method raised while the result was computed: the pair fails with this one line.

    The message names the metric, the method and the exception (type, text, and the file and line it
    came from), so a plugin author finds the line without a traceback on the console.
    """

    def __init__(self, metric: Metric, method: str, error: BaseException) -> None:
        self.method = method
        super().__init__(crash_message(metric, method, error))


def crash_message(metric: Metric, method: str, error: BaseException) -> str:
    """``metric 'x': corpus() raised ValueError: text (my_metrics.py:22)``: one line, whatever the text."""
    import traceback

    name = metric.name or type(metric).__name__
    frames = traceback.extract_tb(error.__traceback__)
    place = f" ({frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno})" if frames else ""
    text = " ".join(str(error).split())
    return f"metric {name!r}: {method}() raised {type(error).__name__}" + (f": {text}" if text else "") + place


def audio_length_bucket(seconds: float | None) -> str:
    """The length bucket of an utterance: "0-5s", "5-10s", "10-20s", "20-30s", "30s+" ("unknown" if missing)."""
    if seconds is None:
        return "unknown"
    try:
        value = float(seconds)
    except (TypeError, ValueError):
        return "unknown"
    if not math.isfinite(value) or value < 0:
        return "unknown"
    for edge, label in LENGTH_BUCKETS:
        if value < edge:
            return label
    return LENGTH_BUCKETS[-1][1]


def _natural_key(label: str) -> list[tuple[int, float | str]]:
    """Sort "5-10s" before "10-20s": numbers compare as numbers."""
    return [(0, float(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", label) if part]


def sample_groups(sample: Any) -> dict[str, str]:
    """The result groups of a sample: audio-length bucket, and speaker/accent/gender when known."""
    groups: dict[str, str] = {}
    duration = sample.meta.get("duration")
    if duration is not None:
        groups["audio_length"] = audio_length_bucket(float(duration))
    for key in ("speaker", "accent", "gender"):
        value = sample.meta.get(key)
        if value is not None:
            groups[key] = str(value)
    return groups


class ScoreAccumulator:
    """Rows of sufficient statistics, per-sample scores, group codes and failure counts."""

    def __init__(self, metric: Metric, initial_capacity: int = 256) -> None:
        self.metric = metric
        #: kept for callers that size it; C arrays grow by themselves
        self._capacity = max(1, int(initial_capacity))
        self._n = 0
        self._k: int | None = None
        #: row-major (n, k) statistics, the per-sample score (NaN: none) and order (NaN: none)
        self._stats: array[float] = array("d")
        self._scores: array[float] = array("d")
        self._order: array[float] = array("d")
        #: group name -> one code per row (-1: the row has no value for it); rows added before
        #: a name first showed are filled in when it shows, later rows without it get -1
        self._group_codes: dict[str, array[int]] = {}
        self._group_values: dict[str, dict[str, int]] = {}
        self._subscores: dict[str, array[float]] = {}
        self._subscore_hook = getattr(metric, "subscores", None)
        #: the CI method that is an interval of what ``metric.corpus`` returns (see ``ci_method_used``)
        self.ci_method = ci_method_used(metric)
        #: the first exception the metric's own code raised on a sample (``crash_message``): the pair fails with it
        self.crash: str | None = None
        #: how many samples the metric raised on
        self.crashes = 0
        self.failures: Counter[str] = Counter()
        #: one message per failure reason (the first seen), for the console and results.json
        self.failure_examples: dict[str, str] = {}

    @property
    def n(self) -> int:
        """Number of scored samples."""
        return self._n

    @property
    def n_failed(self) -> int:
        return sum(self.failures.values())

    def add_failure(self, reason: str, message: str | None = None) -> None:
        """Count a sample that could not be scored (request failed, unparseable verdict, ...).

        ``message`` (the error's text) is kept as the reason's example when it is the first one.
        """
        self.failures[str(reason)] += 1
        if message and str(reason) not in self.failure_examples:
            self.failure_examples[str(reason)] = message

    def note_crash(self, message: str) -> None:
        """Keep the first exception the metric raised on a sample; the sample itself is counted by ``add_failure``."""
        self.crashes += 1
        if self.crash is None:
            self.crash = message

    def add(self, score: SampleScore, groups: dict[str, str] | None = None, order: float | None = None) -> None:
        """Add one sample's score; a score carrying ``failure`` is counted as a failure instead.

        ``order`` (e.g. the sample's index in the dataset) makes bootstrap CIs
        independent of the order in which concurrent samples finished: rows are
        sorted by it before resampling.
        """
        if score.failure is not None:
            self.add_failure(score.failure)
            return
        stats = score.stats
        if not stats:
            if score.score is None:
                self.add_failure(FailureReason.NO_SCORE)
                return
            stats = (float(score.score), 1.0)  # the default corpus(): a mean
        if self._k is None:
            self._k = len(stats)
        elif len(stats) != self._k:
            raise ValueError(
                f"{self.metric.name}: sample stats have {len(stats)} values, earlier samples had {self._k}"
            )
        row = self._n
        self._stats.extend([float(x) for x in stats])  # floats first: a bad value leaves no half row behind
        self._order.append(math.nan if order is None else float(order))
        self._scores.append(math.nan if score.score is None else float(score.score))
        if groups:
            for name, value in groups.items():
                codes = self._group_codes.get(name)
                if codes is None:
                    codes = self._group_codes[name] = array("i")
                    self._group_values[name] = {}
                values = self._group_values[name]
                label = str(value)
                code = values.get(label)
                if code is None:
                    code = values[label] = len(values)
                if len(codes) < row:
                    codes.extend([-1] * (row - len(codes)))
                codes.append(code)
        if callable(self._subscore_hook):
            for name, value in (self._subscore_hook(score) or {}).items():
                self._subscores.setdefault(str(name), array("d")).append(float(value))
        self._n += 1

    def _codes(self, name: str) -> np.ndarray:
        """One group's codes for every row (-1 where a row has no value for it), as a numpy array."""
        import numpy as np

        codes = np.full(self._n, -1, dtype=np.int32)
        stored = self._group_codes[name]
        codes[: len(stored)] = stored
        return codes

    @property
    def stats(self) -> np.ndarray:
        """The (n, k) matrix of scored samples' statistics (a copy)."""
        import numpy as np

        return np.array(self._stats, dtype=np.float64).reshape(self._n, self._k or 0)

    @property
    def scores(self) -> np.ndarray:
        """Per-sample scores of the scored samples (NaN where a metric gave none)."""
        import numpy as np

        return np.array(self._scores, dtype=np.float64)

    def subscore_values(self, name: str) -> np.ndarray:
        """The per-sample values of one subscore (only the samples that reported it)."""
        import numpy as np

        return np.array(self._subscores.get(name, array("d")), dtype=np.float64)  # a copy: a view would pin the array

    def _subscore_results(self) -> dict[str, dict[str, float | int]]:
        import numpy as np

        from evalkit.metrics.ci import clip_to, normal_ci

        bounds = getattr(self.metric, "subscore_bounds", self.metric.bounds)
        out: dict[str, dict[str, float | int]] = {}
        for name in sorted(self._subscores, key=_natural_key):
            values = self.subscore_values(name)
            finite = values[np.isfinite(values)]
            mean = float(finite.mean()) if finite.size else math.nan
            # the mean is clipped as the CI is: a subscore's bounds are those of its mean (HealthBench clips the
            # mean of per-example tag scores, which may fall below 0); for scores within bounds this changes nothing
            low, high = normal_ci(finite)
            out[name] = {
                "score": clip_to(mean, bounds),
                "ci_low": clip_to(low, bounds),
                "ci_high": clip_to(high, bounds),
                "n": int(finite.size),
            }
        return out

    def _summarize(
        self, rows: np.ndarray, scores: np.ndarray, seed: int, n_resamples: int
    ) -> tuple[float, float, float]:
        from evalkit.metrics.ci import bootstrap_ci, clip_to, corpus_value, normal_ci

        if rows.shape[0] == 0:
            return math.nan, math.nan, math.nan
        try:
            value = corpus_value(self.metric, rows.sum(axis=0))
        except Exception as error:
            raise MetricCrashed(self.metric, "corpus", error) from error
        if self.ci_method == "bootstrap":
            try:
                low, high = bootstrap_ci(self.metric, rows, n_resamples=n_resamples, seed=seed)
            except Exception as error:
                raise MetricCrashed(self.metric, "corpus", error) from error
        else:
            low, high = normal_ci(scores)
            low, high = clip_to(low, self.metric.bounds), clip_to(high, self.metric.bounds)
        return value, low, high

    def result(self, seed: int = 0, n_resamples: int = 1000) -> MetricResult:
        """Corpus score, CI (``self.ci_method``), counts, settings and per-group results.

        The metric's own code (``corpus``, ``corpus_details``, ``describe``) raising is one
        :class:`MetricCrashed` naming the method, for the pair's error.
        """
        import numpy as np

        rows, scores = self.stats, self.scores
        order = np.array(self._order, dtype=np.float64)
        perm = np.argsort(order, kind="stable") if self._n and not np.isnan(order).all() else None
        if perm is not None:
            rows, scores = rows[perm], scores[perm]
        value, low, high = self._summarize(rows, scores, seed, n_resamples)
        details: dict[str, Any] = dict(self._call("describe"))
        details["ci_method"] = self.ci_method
        processors = getattr(self.metric, "processors", None)
        if processors:
            details["processors"] = processors.describe()  # the pair's own (metric option), as given
        if self._n:
            details.update(self._call("corpus_details", rows.sum(axis=0)))
        details["n_failed"] = self.n_failed
        details["failure_reasons"] = dict(sorted(self.failures.items()))
        groups: dict[str, dict[str, dict[str, float | int]]] = {}
        for name in self._group_codes:
            codes = self._codes(name) if perm is None else self._codes(name)[perm]
            per_value: dict[str, dict[str, float | int]] = {}
            for label, code in sorted(self._group_values[name].items(), key=lambda kv: _natural_key(kv[0])):
                mask = codes == code
                g_value, g_low, g_high = self._summarize(rows[mask], scores[mask], seed, n_resamples)
                per_value[label] = {"score": g_value, "ci_low": g_low, "ci_high": g_high, "n": int(mask.sum())}
            groups[name] = per_value
        details["groups"] = groups
        if self._subscores:
            details["subscores"] = self._subscore_results()
        return MetricResult(value, low, high, self._n, self.ci_method, details)

    def _call(self, method: str, *args: Any) -> Any:
        """``metric.<method>(*args)``; an exception becomes :class:`MetricCrashed` naming the method."""
        try:
            return getattr(self.metric, method)(*args)
        except Exception as error:
            raise MetricCrashed(self.metric, method, error) from error

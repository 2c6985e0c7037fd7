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

A metric may score *groups* of samples rather than samples (MMBench's circular evaluation: a question counts
right only when every rotated copy is; MME's acc+: an image counts when both its questions are right). Such a
metric defines ``group_of(sample) -> (key, size) | None`` (which group a sample belongs to, and how many members
make it whole when that is known) and ``group_rows(rows, codes, count) -> (count, k)`` (one stats row per group
from its members' rows, in row order). The accumulator keeps one group code per row, and per group its expected
size and whether a member failed; the result is the corpus statistic over *complete* groups (every member scored,
as many as the size says) and its interval resamples groups, not rows. An incomplete group is counted in
``details["groups_incomplete"]`` (a failed member: the group is failed, never wrong; a member missing: a shard's
share of a group split across shards), never scored. A ``duplicate_id`` row fails nothing of its group: the
member itself was scored at its first row.

Not thread-safe: one accumulator belongs to one engine, fed from its loop.
"""

from __future__ import annotations

import math
import re
import sys
from array import array
from collections import Counter
from typing import TYPE_CHECKING, Any

from evalkit.failures import FailureReason
from evalkit.metrics.base import Metric, MetricResult, SampleScore, ci_method_used

if TYPE_CHECKING:
    import numpy as np

#: a grouped metric's member: (group key, members that make the group whole, 0 or None when not known)
GroupMember = tuple[str, int | None]

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
        #: grouped metrics (see the module docstring): per row its group's code, per group key its code,
        #: expected size (0: not known) and whether a member failed
        self.grouped = callable(getattr(metric, "group_rows", None))
        self._member_group: array[int] = array("i")
        self._group_keys: dict[str, int] = {}
        self._group_sizes: array[int] = array("i")
        self._group_failed: array[int] = array("b")

    @property
    def n(self) -> int:
        """Number of scored samples."""
        return self._n

    @property
    def n_failed(self) -> int:
        return sum(self.failures.values())

    def add_failure(self, reason: str, message: str | None = None, group: GroupMember | None = None) -> None:
        """Count a sample that could not be scored (request failed, unparseable verdict, ...).

        ``message`` (the error's text) is kept as the reason's example when it is the first one. ``group``
        (a grouped metric's member): its group is failed as a whole, unless the row is a duplicate id.
        """
        self.failures[str(reason)] += 1
        if message and str(reason) not in self.failure_examples:
            self.failure_examples[str(reason)] = message
        if group is not None and self.grouped and str(reason) != FailureReason.DUPLICATE_ID:
            self._group_failed[self._group_code(group)] = 1

    def _group_code(self, group: GroupMember) -> int:
        """The code of a group key, made on first sight; the largest size any member states is kept."""
        key, size = group
        code = self._group_keys.get(key)
        if code is None:
            code = self._group_keys[key] = len(self._group_keys)
            self._group_sizes.append(0)
            self._group_failed.append(0)
        if size:
            self._group_sizes[code] = max(self._group_sizes[code], int(size))
        return code

    def note_crash(self, message: str) -> None:
        """Keep the first exception the metric raised on a sample; the sample itself is counted by ``add_failure``."""
        self.crashes += 1
        if self.crash is None:
            self.crash = message

    def add(
        self,
        score: SampleScore,
        groups: dict[str, str] | None = None,
        order: float | None = None,
        group: GroupMember | None = None,
    ) -> None:
        """Add one sample's score; a score carrying ``failure`` is counted as a failure instead.

        ``order`` (e.g. the sample's index in the dataset) makes bootstrap CIs
        independent of the order in which concurrent samples finished: rows are
        sorted by it before resampling. ``group``: the sample's (group key, size) for a grouped metric;
        a row of a grouped metric without one is a group of its own.
        """
        if score.failure is not None:
            self.add_failure(score.failure, group=group)
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
        if self.grouped:
            self._member_group.append(self._group_code(group if group is not None else (f"\x00row{row}", 1)))
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

    def _subscore_results(self, plain: bool = False) -> dict[str, dict[str, float | int]]:
        """Each subscore's mean and normal CI; ``plain``: in Python (:mod:`evalkit.metrics.plain_mean`), same bits."""
        from evalkit.metrics.ci import clip_to

        bounds = getattr(self.metric, "subscore_bounds", self.metric.bounds)
        out: dict[str, dict[str, float | int]] = {}
        for name in sorted(self._subscores, key=_natural_key):
            if plain:
                from evalkit.metrics import plain_mean

                finite_list = [x for x in self._subscores[name] if math.isfinite(x)]
                mean, size = plain_mean.mean(finite_list), len(finite_list)
                low, high = plain_mean.normal_ci(finite_list)
            else:
                import numpy as np

                from evalkit.metrics.ci import normal_ci

                values = self.subscore_values(name)
                finite = values[np.isfinite(values)]
                mean, size = (float(finite.mean()) if finite.size else math.nan), int(finite.size)
                low, high = normal_ci(finite)
            # the mean is clipped as the CI is: a subscore's bounds are those of its mean (HealthBench clips the
            # mean of per-example tag scores, which may fall below 0); for scores within bounds this changes nothing
            out[name] = {
                "score": clip_to(mean, bounds),
                "ci_low": clip_to(low, bounds),
                "ci_high": clip_to(high, bounds),
                "n": size,
            }
        return out

    def _settings_details(self) -> dict[str, Any]:
        """What a result's details open with: the metric's description, the CI method and the pair's processors."""
        details: dict[str, Any] = dict(self._call("describe"))
        details["ci_method"] = self.ci_method
        processors = getattr(self.metric, "processors", None)
        if processors:
            details["processors"] = processors.describe()  # the pair's own (metric option), as given
        return details

    def _summarize(
        self, rows: np.ndarray, scores: np.ndarray, seed: int, n_resamples: int
    ) -> tuple[float, float, float]:
        from evalkit.metrics.ci import bootstrap_ci, bootstrap_rows_ci, clip_to, corpus_value, normal_ci

        if rows.shape[0] == 0:
            return math.nan, math.nan, math.nan
        from_rows = getattr(self.metric, "corpus_rows", None)
        if from_rows is not None:
            # a statistic of the rows themselves, in row order (ChEF's ECE bins sorted samples): never of sums
            try:
                value = float(from_rows(rows))
                low, high = bootstrap_rows_ci(from_rows, rows, n_resamples=n_resamples, seed=seed)
            except Exception as error:
                raise MetricCrashed(self.metric, "corpus_rows", error) from error
            return value, low, high
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

    def _grouped(self, rows: np.ndarray, members: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One stats row and score per complete group among ``rows`` (with their group codes), in first-row order."""
        import numpy as np

        if rows.shape[0] == 0:
            return rows, np.zeros(0)
        codes, first, inverse, counts = np.unique(members, return_index=True, return_inverse=True, return_counts=True)
        sizes = np.array(self._group_sizes, dtype=np.int64)[codes]
        failed = np.array(self._group_failed, dtype=bool)[codes]
        complete = ~failed & ((sizes == 0) | (counts >= sizes))
        inverse = inverse.reshape(-1)
        keep = complete[inverse]
        # the complete groups numbered 0.. in the order of their first rows (rows are in file order here)
        order = np.argsort(first, kind="stable")
        kept_order = order[complete[order]]
        number = np.full(codes.size, -1, dtype=np.int64)
        number[kept_order] = np.arange(kept_order.size)
        count = int(kept_order.size)
        if count == 0:
            return np.zeros((0, 0)), np.zeros(0)
        try:
            group_rows = np.asarray(
                self.metric.group_rows(rows[keep], number[inverse][keep], count),  # type: ignore[attr-defined]
                dtype=np.float64,
            )
            with np.errstate(invalid="ignore", divide="ignore"):
                scores = np.asarray(self.metric.corpus(group_rows), dtype=np.float64).reshape(count)
        except Exception as error:
            raise MetricCrashed(self.metric, "group_rows", error) from error
        return group_rows, scores

    def _group_counts(self) -> dict[str, int]:
        """Groups seen, scored whole, failed (a member failed) and partial (a member not among the rows)."""
        import numpy as np

        members = np.array(self._member_group, dtype=np.int64)
        counts = np.bincount(members, minlength=len(self._group_keys))
        sizes = np.array(self._group_sizes, dtype=np.int64)
        failed = np.array(self._group_failed, dtype=bool)
        partial = ~failed & (sizes > 0) & (counts < sizes)
        return {
            "groups": len(self._group_keys),
            "complete": int((~failed & ~partial & (counts > 0)).sum()),
            "failed_member": int(failed.sum()),
            "missing_member": int(partial.sum()),
        }

    def _in_order(self) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
        """Rows, scores and group codes sorted by ``order`` (when given), and the permutation that sorted them."""
        import numpy as np

        rows, scores = self.stats, self.scores
        order = np.array(self._order, dtype=np.float64)
        perm = np.argsort(order, kind="stable") if self._n and not np.isnan(order).all() else None
        members = np.array(self._member_group, dtype=np.int64) if self.grouped else None
        if perm is not None:
            rows, scores = rows[perm], scores[perm]
            members = None if members is None else members[perm]
        return rows, scores, members, perm

    def headline(self, seed: int = 0, n_resamples: int = 1000) -> tuple[float, float, float, int]:
        """The corpus score, its CI and n, exactly as :meth:`result` computes them, without the details and groups.

        ``stop_at_ci`` (evalkit/run/stopping/at_ci.py) checks the interval with this as samples come in: the interval
        that decides to stop is the one results.json reports.
        """
        rows, scores, members, _ = self._in_order()
        if members is not None:
            group_rows, group_scores = self._grouped(rows, members)
            value, low, high = self._summarize(group_rows, group_scores, seed, n_resamples)
            return value, low, high, int(group_rows.shape[0])
        value, low, high = self._summarize(rows, scores, seed, n_resamples)
        return value, low, high, self._n

    def interval_scores(self) -> np.ndarray | None:
        """The finite scores whose normal interval :meth:`headline` reports (one per whole group for a grouped
        metric), or None when the interval is a bootstrap.

        ``stop_at_ci`` decides on a variance it takes from these (a proportion's is bounded by its mean's
        interval), not on the reported interval's width alone.
        """
        import numpy as np

        if getattr(self.metric, "corpus_rows", None) is not None or self.ci_method == "bootstrap":
            return None
        rows, scores, members, _ = self._in_order()
        if members is not None:
            _, scores = self._grouped(rows, members)
        return scores[np.isfinite(scores)]

    def result(self, seed: int = 0, n_resamples: int = 1000) -> MetricResult:
        """Corpus score, CI (``self.ci_method``), counts, settings and per-group results.

        The metric's own code (``corpus``, ``corpus_details``, ``describe``) raising is one
        :class:`MetricCrashed` naming the method, for the pair's error.
        """
        # numpy's import costs more than this run's sums in Python; once loaded (by another pair) it is the cheaper path
        plain = self.plain_result() if "numpy" not in sys.modules else None
        return plain if plain is not None else self.numpy_result(seed, n_resamples)

    def numpy_result(self, seed: int = 0, n_resamples: int = 1000) -> MetricResult:
        """:meth:`result` computed with numpy whatever the metric and the number of samples."""
        rows, scores, members, perm = self._in_order()
        n = self._n
        if members is not None:
            group_rows, group_scores = self._grouped(rows, members)
            value, low, high = self._summarize(group_rows, group_scores, seed, n_resamples)
            n = int(group_rows.shape[0])
        else:
            value, low, high = self._summarize(rows, scores, seed, n_resamples)
        details = self._settings_details()
        if self._n and members is None:  # a grouped metric's figures are over groups: its rows' sums mean nothing
            details.update(self._call("corpus_details", rows.sum(axis=0)))
            if hasattr(self.metric, "corpus_rows_details"):
                details.update(self._call("corpus_rows_details", rows))
        if members is not None and n and hasattr(self.metric, "group_corpus_details"):
            # a grouped metric's further figures, from the sums of its complete groups' rows
            details.update(self._call("group_corpus_details", group_rows.sum(axis=0)))
        if members is not None:
            counts = self._group_counts()
            details["n_samples"] = self._n
            details["n_groups"] = counts["complete"]
            details["groups_incomplete"] = {
                "failed_member": counts["failed_member"],
                "missing_member": counts["missing_member"],
            }
        details["n_failed"] = self.n_failed
        details["failure_reasons"] = dict(sorted(self.failures.items()))
        groups: dict[str, dict[str, dict[str, float | int]]] = {}
        for name in self._group_codes:
            codes = self._codes(name) if perm is None else self._codes(name)[perm]
            per_value: dict[str, dict[str, float | int]] = {}
            for label, code in sorted(self._group_values[name].items(), key=lambda kv: _natural_key(kv[0])):
                mask = codes == code
                if members is not None:
                    g_rows, g_scores = self._grouped(rows[mask], members[mask])
                    g_value, g_low, g_high = self._summarize(g_rows, g_scores, seed, n_resamples)
                    size = int(g_rows.shape[0])
                else:
                    g_value, g_low, g_high = self._summarize(rows[mask], scores[mask], seed, n_resamples)
                    size = int(mask.sum())
                per_value[label] = {"score": g_value, "ci_low": g_low, "ci_high": g_high, "n": size}
            groups[name] = per_value
        details["groups"] = groups
        if self._subscores:
            details["subscores"] = self._subscore_results()
        return MetricResult(value, low, high, n, self.ci_method, details)

    def plain_result(self) -> MetricResult | None:
        """:meth:`result` without numpy for a mean with the normal interval (see evalkit/metrics/plain_mean.py).

        None when the metric computes anything of its own from the rows (``corpus``, ``corpus_details``, groups of
        samples, rows' statistics) or the run is large: :meth:`result` then takes the numpy path, which gives the
        same numbers.
        """
        from evalkit.metrics import plain_mean
        from evalkit.metrics.ci import clip_to

        metric = type(self.metric)
        k = self._k or 0
        if (
            not 0 < self._n <= plain_mean.MAX_ROWS
            or k < 2
            or self.ci_method != "normal"
            or self.grouped
            or metric.corpus is not Metric.corpus
            or metric.corpus_details is not Metric.corpus_details
            or getattr(self.metric, "corpus_rows", None) is not None
            or hasattr(self.metric, "corpus_rows_details")
        ):
            return None
        # numpy's stable argsort: by order, NaN last, ties in arrival order
        order = self._order
        if any(map(math.isnan, order)):
            perm = sorted(range(self._n), key=lambda i: (math.isnan(order[i]), order[i]))
        else:
            perm = sorted(range(self._n), key=order.__getitem__)
        stats, scores = self._stats, self._scores
        bounds = self.metric.bounds

        def summary(rows: list[int]) -> tuple[float, float, float]:
            if not rows:
                return math.nan, math.nan, math.nan
            totals = plain_mean.column_sums(stats, k, rows)
            low, high = plain_mean.normal_ci([scores[i] for i in rows])
            return plain_mean.divide(totals[0], totals[1]), clip_to(low, bounds), clip_to(high, bounds)

        value, low, high = summary(perm)
        details = self._settings_details()
        details["n_failed"] = self.n_failed
        details["failure_reasons"] = dict(sorted(self.failures.items()))
        groups: dict[str, dict[str, dict[str, float | int]]] = {}
        for name, stored in self._group_codes.items():
            by_code: dict[int, list[int]] = {}  # each value's rows in sorted order, from one pass
            for i in perm:
                by_code.setdefault(stored[i] if i < len(stored) else -1, []).append(i)
            per_value: dict[str, dict[str, float | int]] = {}
            for label, code in sorted(self._group_values[name].items(), key=lambda kv: _natural_key(kv[0])):
                rows = by_code.get(code, [])
                g_value, g_low, g_high = summary(rows)
                per_value[label] = {"score": g_value, "ci_low": g_low, "ci_high": g_high, "n": len(rows)}
            groups[name] = per_value
        details["groups"] = groups
        if self._subscores:
            details["subscores"] = self._subscore_results(plain=True)
        return MetricResult(value, low, high, self._n, self.ci_method, details)

    def _call(self, method: str, *args: Any) -> Any:
        """``metric.<method>(*args)``; an exception becomes :class:`MetricCrashed` naming the method."""
        try:
            return getattr(self.metric, method)(*args)
        except Exception as error:
            raise MetricCrashed(self.metric, method, error) from error

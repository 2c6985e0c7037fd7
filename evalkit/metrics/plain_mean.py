"""A mean metric's result without numpy, to the last bit what the numpy path gives, for runs of modest size.

Importing numpy costs ~80 ms of CPU, at the end of every run: for a text run of
exact match over a few thousand samples that is more than all its scoring. A metric
whose corpus value is the default mean (``Metric.corpus``: Σscore / Σweight) with
the normal interval needs only sums, and sums are reproduced here in numpy's own
order, so results.json holds the same bits whichever path computed them:

- a column of an (n, k) matrix summed over its rows (``rows.sum(axis=0)``) is added
  row after row, from 0.0;
- a 1-D sum (``mean``, ``std``) is numpy's pairwise summation: fewer than 8 values
  in a row, up to 128 in 8 interleaved partial sums, beyond that the halves (split
  at a multiple of 8) summed separately and added;
- ``std(ddof=1)`` is the square root of the pairwise sum of squared deviations from
  that mean, over n - 1.

tests/test_plain_mean.py holds these equal to numpy's on awkward data. Beyond
:data:`MAX_ROWS` samples (where numpy's own versions part ways), or once numpy is
loaded anyway, the numpy path is taken (~0.7 µs a sample here against ~75 ms for
the import).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from evalkit.metrics.ci import Z95

#: the most scored samples summed here. numpy before 2.3 reduces a vector in chunks of its 8,192-element ufunc
#: buffer (each chunk summed pairwise, the chunks added in turn), 2.3 in one pairwise pass: up to 8,192 values
#: both associate their additions alike, beyond it they differ in the last bit, so larger runs take numpy's path
#: (and there its ~80 ms import is under 10 µs a sample)
MAX_ROWS = 8_192
#: numpy's pairwise summation block: up to this many values are summed in 8 interleaved partial sums
_BLOCK = 128


def pairwise_sum(values: Sequence[float], start: int = 0, count: int | None = None) -> float:
    """``numpy.add.reduce`` of a contiguous float64 vector: the same association of additions, so the same bits."""
    n = len(values) - start if count is None else count
    if n < 8:
        total = 0.0
        for i in range(start, start + n):
            total += values[i]
        return total
    if n <= _BLOCK:
        r0, r1, r2, r3, r4, r5, r6, r7 = values[start : start + 8]
        i = 8
        whole = n - n % 8
        while i < whole:
            at = start + i
            r0 += values[at]
            r1 += values[at + 1]
            r2 += values[at + 2]
            r3 += values[at + 3]
            r4 += values[at + 4]
            r5 += values[at + 5]
            r6 += values[at + 6]
            r7 += values[at + 7]
            i += 8
        total = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
        for at in range(start + i, start + n):
            total += values[at]
        return total
    half = n // 2
    half -= half % 8
    return pairwise_sum(values, start, half) + pairwise_sum(values, start + half, n - half)


def mean(values: Sequence[float]) -> float:
    """``numpy.mean`` of a float64 vector (NaN for none, as numpy's, without its warning)."""
    return pairwise_sum(values) / len(values) if values else math.nan


def normal_ci(scores: Sequence[float]) -> tuple[float, float]:
    """:func:`evalkit.metrics.ci.normal_ci` in Python: ``mean ± 1.96·s/√n`` over the finite scores."""
    values = [x for x in scores if math.isfinite(x)]
    n = len(values)
    if n < 2:
        return math.nan, math.nan
    centre = pairwise_sum(values) / n
    squares = [(x - centre) * (x - centre) for x in values]
    half = Z95 * math.sqrt(pairwise_sum(squares) / (n - 1)) / math.sqrt(n)
    return centre - half, centre + half


def divide(numerator: float, denominator: float) -> float:
    """float64 division as numpy does it with errors ignored: x/0 is ±inf, 0/0 and NaN/0 are NaN."""
    if denominator == 0.0:
        if numerator == 0.0 or math.isnan(numerator):
            return math.nan
        return math.copysign(math.inf, numerator) * math.copysign(1.0, denominator)
    return numerator / denominator


def column_sums(stats: Sequence[float], k: int, rows: Sequence[int]) -> list[float]:
    """``matrix[rows].sum(axis=0)`` of the row-major (n, k) ``stats``: each column added row after row from 0.0."""
    totals = [0.0] * k
    for row in rows:
        base = row * k
        for j in range(k):
            totals[j] += stats[base + j]
    return totals

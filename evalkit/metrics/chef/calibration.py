"""Expected calibration error from option likelihoods (ChEF's calibration desideratum).

Written from OpenGVLab/LAMM ``src/ChEF/metric/desiderata.py`` (``compute_ECE``, used by
``ScienceQA_Calibration`` and ``MMBench_Calibration``) and ``src/ChEF/inferencer/Singleturn.py``
(``PPL_Inferencer``) at commit ea571363883ceba58a0f724ef197ed7205e07465, checked against a table from
running ``compute_ECE`` itself (tests/fixtures/references/chef_calibration.json).

A sample's confidence is ChEF's ``prob``: the largest softmax probability over the options' scores, each
option scored by its mean log-probability per token (ChEF's ppl score; see metrics/chef/likelihood.py).
It is right when that most likely option is a correct one. ChEF's binning is *equal-count*, not
equal-width: the samples, sorted by confidence (ties in row order), are cut into ``bins`` (10) bins whose
sizes differ by at most one, the larger ones first; ECE is the size-weighted mean of each bin's
``|mean confidence - accuracy|``. Sorting makes ECE a statistic of the rows, not of their sums, so the
metric gives ``corpus_rows`` (the accumulator's hook for such statistics) and its CI resamples whole rows.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from evalkit.data.sample import Sample
from evalkit.metrics.base import Metric, SampleScore, check_options
from evalkit.metrics.chef.likelihood import chef_option_scores
from evalkit.metrics.choice.choice import LETTERS
from evalkit.metrics.choice.likelihood import read_options

#: ChEF's compute_ECE default
DEFAULT_BINS = 10


def equal_count_bins(n: int, bins: int) -> list[int]:
    """The sizes ChEF gives ``bins`` bins over ``n`` sorted samples: the first ``n % bins`` hold one more."""
    least, extra = divmod(n, bins)
    return [s for s in [least + 1] * extra + [least] * (bins - extra) if s > 0]


def expected_calibration_error(
    confidence: np.ndarray, correct: np.ndarray, bins: int = DEFAULT_BINS
) -> tuple[float, list[float], list[float]]:
    """(ECE, accuracy per bin, mean confidence per bin) with ChEF's equal-count bins; NaN ECE when empty."""
    confidence = np.asarray(confidence, dtype=np.float64)
    correct = np.asarray(correct, dtype=np.float64)
    n = confidence.shape[0]
    if n == 0:
        return math.nan, [], []
    order = np.argsort(confidence, kind="stable")  # Python's sorted() is stable too: ties stay in row order
    confidence, correct = confidence[order], correct[order]
    total, start = 0.0, 0
    accs: list[float] = []
    probs: list[float] = []
    for size in equal_count_bins(n, bins):
        p = float(confidence[start : start + size].mean())
        a = float(correct[start : start + size].mean())
        probs.append(p)
        accs.append(a)
        total += size * abs(p - a)
        start += size
    return total / n, accs, probs


def softmax(scores: list[float]) -> list[float]:
    """Probabilities of the options from their scores (shifted by the largest, so no score overflows)."""
    top = max(scores)
    weights = [math.exp(s - top) for s in scores]
    total = sum(weights)
    return [w / total for w in weights]


class ExpectedCalibrationError(Metric):
    """ChEF calibration ECE: equal-count bins (10) of the likeliest option's softmax probability against its accuracy.

    The per-sample score is the sample's own gap ``|confidence - correct|``; the corpus value is the binned ECE.
    """

    name = "ece"
    higher_is_better = False
    bounds = (0.0, 1.0)
    scoring: ClassVar[str] = "loglikelihood"
    ci_method = "bootstrap"
    corpus_is_mean = False
    tasks: ClassVar[tuple[str, ...]] = ("*",)

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ("bins", "index_base"))
        super().__init__(language, **options)
        bins = options.get("bins", DEFAULT_BINS)
        if not isinstance(bins, int) or isinstance(bins, bool) or bins < 1:
            raise ValueError(f"ece: option 'bins' must be a whole number of at least 1, got {bins!r}")
        self.bins = bins
        self.index_base = int(options.get("index_base", 0))

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        read = read_options(prediction, sample, self.index_base, chef_option_scores)
        if isinstance(read, SampleScore):
            return read
        correct, scores = read
        probs = softmax(scores)
        best = max(range(len(probs)), key=lambda i: (probs[i], -i))  # numpy's argmax: the first of equals
        right = 1.0 if best in correct else 0.0
        # the per-sample score is the sample's own calibration gap; the corpus value is the binned ECE
        return SampleScore(
            abs(probs[best] - right),
            (probs[best], right),
            details={
                "chosen": LETTERS[best] if best < len(LETTERS) else best,
                "confidence": round(probs[best], 6),
                "correct": bool(right),
                "probs": [round(p, 6) for p in probs],
            },
        )

    def corpus(self, totals: np.ndarray) -> np.ndarray:
        """Not defined on summed rows: ECE sorts the samples (see :meth:`corpus_rows`); NaN here."""
        totals = np.asarray(totals, dtype=np.float64)
        return np.full(totals.shape[:-1], np.nan)

    def corpus_rows(self, rows: np.ndarray) -> float:
        """ECE of the rows (confidence, correct), in row order, with ChEF's equal-count bins."""
        rows = np.asarray(rows, dtype=np.float64)
        return expected_calibration_error(rows[:, 0], rows[:, 1], self.bins)[0]

    def corpus_rows_details(self, rows: np.ndarray) -> dict[str, Any]:
        """ChEF's printed companions of the ECE: each bin's accuracy and mean confidence, and the accuracy."""
        rows = np.asarray(rows, dtype=np.float64)
        _, accs, probs = expected_calibration_error(rows[:, 0], rows[:, 1], self.bins)
        return {"accuracy": float(rows[:, 1].mean()), "acc_bins": accs, "prob_bins": probs}

    def describe(self) -> dict[str, Any]:
        return {
            "bins": self.bins,
            "binning": "equal-count (ChEF compute_ECE)",
            "confidence": "max softmax over options' mean log-probability per token",
        }

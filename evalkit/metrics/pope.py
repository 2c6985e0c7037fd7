"""POPE's yes/no object-hallucination probe (``pope_*``): per-sample (tp, fp, tn, fn), and accuracy,
precision, recall, F1 and yes-ratio as functions of their sums, with a bootstrap CI."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from evalkit.data.sample import Sample
from evalkit.failures import FailureReason
from evalkit.metrics.base import Metric, SampleScore, check_options, reference_strings


def pope_says_yes(text: str) -> bool:
    """POPE's reading of an answer: yes when its first word (punctuation dropped) is "yes"."""
    words = re.sub(r"[^\w\s]", " ", text.lower()).split()
    return bool(words) and words[0] == "yes"


class _Pope(Metric):
    """POPE base: per-sample (tp, fp, tn, fn); subclasses pick the corpus function."""

    ci_method = "bootstrap"
    bounds = (0.0, 1.0)

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ())
        super().__init__(language, **options)

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        references = reference_strings(sample.reference)
        if not references:
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        truth = pope_says_yes(references[0])
        said = pope_says_yes(prediction or "")
        stats = (
            float(said and truth),
            float(said and not truth),
            float(not said and not truth),
            float(not said and truth),
        )
        single = self.corpus(np.asarray(stats))
        return SampleScore(
            None if np.isnan(single) else float(single), stats, details={"answer": "yes" if said else "no"}
        )

    @staticmethod
    def _parts(totals: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        t = np.asarray(totals, dtype=float)
        return t[..., 0], t[..., 1], t[..., 2], t[..., 3]

    def corpus_details(self, totals: np.ndarray) -> dict[str, Any]:
        tp, fp, tn, fn = (float(x) for x in self._parts(totals))
        n = tp + fp + tn + fn
        precision = tp / (tp + fp) if tp + fp else 0.0
        recall = tp / (tp + fn) if tp + fn else 0.0
        return {
            "accuracy": (tp + tn) / n if n else 0.0,
            "precision": precision,
            "recall": recall,
            "f1": 2 * precision * recall / (precision + recall) if precision + recall else 0.0,
            "yes_ratio": (tp + fp) / n if n else 0.0,
            "tp": tp,
            "fp": fp,
            "tn": tn,
            "fn": fn,
        }


def _ratio(top: np.ndarray, bottom: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(bottom > 0, top / np.where(bottom > 0, bottom, 1.0), 0.0)


class PopeAccuracy(_Pope):
    """POPE accuracy: share of yes/no answers equal to the truth about the object's presence."""

    name = "pope_accuracy"

    def corpus(self, totals: np.ndarray) -> np.ndarray:
        tp, fp, tn, fn = self._parts(totals)
        return _ratio(tp + tn, tp + fp + tn + fn)


class PopePrecision(_Pope):
    """POPE precision: of the "yes" answers, the share where the object is there."""

    name = "pope_precision"

    def corpus(self, totals: np.ndarray) -> np.ndarray:
        tp, fp, _, _ = self._parts(totals)
        return _ratio(tp, tp + fp)


class PopeRecall(_Pope):
    """POPE recall: of the objects that are there, the share answered "yes"."""

    name = "pope_recall"

    def corpus(self, totals: np.ndarray) -> np.ndarray:
        tp, _, _, fn = self._parts(totals)
        return _ratio(tp, tp + fn)


class PopeF1(_Pope):
    """POPE F1: harmonic mean of precision and recall of "yes" (POPE's headline figure)."""

    name = "pope_f1"

    def corpus(self, totals: np.ndarray) -> np.ndarray:
        tp, fp, _, fn = self._parts(totals)
        return _ratio(2 * tp, 2 * tp + fp + fn)


class PopeYesRatio(_Pope):
    """POPE yes-ratio: share of answers that are "yes" (0.5 on POPE's balanced sets means no yes-bias)."""

    name = "pope_yes_ratio"
    bounds = (0.0, 1.0)

    def corpus(self, totals: np.ndarray) -> np.ndarray:
        tp, fp, tn, fn = self._parts(totals)
        return _ratio(tp + fp, tp + fp + tn + fn)

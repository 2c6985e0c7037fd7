"""POPE's yes/no object-hallucination probe (``pope_*``), equal to POPE's evaluation script.

Reference: RUCAIBox/POPE, ``evaluate.py`` (a module-level script), checked at commit
3df3ba1b110ecce25696989577fad583b67d4239 by running it (tests/fixtures/references/pope.json).

How POPE reads an answer, and why evalkit copies it to the letter: the published POPE numbers were made this
way, so any other reading gives a different figure under the same name. Only the text before the first "."
counts ("3.5 no" is read at "3"); commas are deleted; the rest is split at single ASCII spaces (not at tabs,
newlines or other whitespace); the answer is "no" when one of those pieces is exactly "No", "no" or "not",
and "yes" otherwise: "NO", "No!", "nope", "" and "I cannot tell." are yes, "Yes there is no doubt" is no.
The label is negative only when it is exactly "no"; any other label ("yes", "No", "no ", "") is positive.

Each sample gives (tp, fp, tn, fn); the five figures are POPE's functions of the pooled counts, computed in
POPE's order (F1 as 2PR/(P+R), which can differ from 2tp/(2tp+fp+fn) in the last bit). Where POPE's script
divides by zero (precision with no "yes" answer, recall with no positive label, F1 with no true positive, any
figure on no samples) it raises ZeroDivisionError and prints nothing further; evalkit gives NaN for that figure
(no score), which a bootstrap resample then skips. Known differences: none in the values POPE prints.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from evalkit.data.sample import Sample
from evalkit.failures import FailureReason
from evalkit.metrics.base import Metric, SampleScore, check_options, reference_strings

#: the words that make an answer "no", compared case-sensitively
_NO_WORDS = frozenset({"No", "no", "not"})


def pope_says_yes(text: str) -> bool:
    """POPE's reading of a model's answer: no when a word of its first sentence is No, no or not; else yes."""
    first = text.split(".", 1)[0]
    words = first.replace(",", "").split(" ")
    return _NO_WORDS.isdisjoint(words)


def pope_label_is_yes(label: str) -> bool:
    """POPE's reading of a ground-truth label: negative only when it is exactly "no"."""
    return label != "no"


def _divide(top: np.ndarray, bottom: np.ndarray) -> np.ndarray:
    """top / bottom, NaN where bottom is 0 (where POPE's script raises ZeroDivisionError)."""
    top, bottom = np.broadcast_arrays(np.asarray(top, dtype=float), np.asarray(bottom, dtype=float))
    out = np.full(top.shape, np.nan)
    np.divide(top, bottom, out=out, where=bottom != 0)
    return out


def _figures(totals: np.ndarray) -> dict[str, np.ndarray]:
    """POPE's five figures from pooled (tp, fp, tn, fn), in its formulas."""
    t = np.asarray(totals, dtype=float)
    tp, fp, tn, fn = t[..., 0], t[..., 1], t[..., 2], t[..., 3]
    n = tp + fp + tn + fn
    precision = _divide(tp, tp + fp)
    recall = _divide(tp, tp + fn)
    return {
        "accuracy": _divide(tp + tn, n),
        "precision": precision,
        "recall": recall,
        "f1": _divide(2 * precision * recall, precision + recall),
        "yes_ratio": _divide(tp + fp, n),
    }


class _Pope(Metric):
    """POPE base: per-sample (tp, fp, tn, fn); subclasses pick the figure."""

    ci_method = "bootstrap"
    bounds = (0.0, 1.0)
    #: which of POPE's five figures the metric reports
    figure: str = ""

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ())
        super().__init__(language, **options)

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        references = reference_strings(sample.reference)
        if not references:
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        truth = pope_label_is_yes(references[0])
        said = pope_says_yes(prediction or "")
        stats = (
            float(said and truth),
            float(said and not truth),
            float(not said and not truth),
            float(not said and truth),
        )
        single = float(self.corpus(np.asarray(stats)))
        return SampleScore(
            None if np.isnan(single) else single,
            stats,
            details={"answer": "yes" if said else "no", "label": "yes" if truth else "no"},
        )

    def corpus(self, totals: np.ndarray) -> np.ndarray:
        return _figures(totals)[self.figure]

    def corpus_details(self, totals: np.ndarray) -> dict[str, Any]:
        t = np.asarray(totals, dtype=float)
        out: dict[str, Any] = {k: float(v) for k, v in _figures(t).items()}
        out.update(tp=float(t[0]), fp=float(t[1]), tn=float(t[2]), fn=float(t[3]))
        return out

    def describe(self) -> dict[str, Any]:
        return {"reference": "RUCAIBox/POPE evaluate.py", "answer_reading": "first sentence; no if No/no/not"}


class PopeAccuracy(_Pope):
    """POPE accuracy (POPE evaluate.py): share of yes/no answers equal to the label, from pooled counts."""

    name = "pope_accuracy"
    figure = "accuracy"


class PopePrecision(_Pope):
    """POPE precision (POPE evaluate.py): of the "yes" answers, the share whose label is yes."""

    name = "pope_precision"
    figure = "precision"


class PopeRecall(_Pope):
    """POPE recall (POPE evaluate.py): of the yes labels, the share answered "yes"."""

    name = "pope_recall"
    figure = "recall"


class PopeF1(_Pope):
    """POPE F1 (POPE evaluate.py): 2PR/(P+R) of "yes" from pooled counts (POPE's headline figure)."""

    name = "pope_f1"
    figure = "f1"


class PopeYesRatio(_Pope):
    """POPE yes-ratio (POPE evaluate.py): share of answers read as "yes" (0.5 on balanced sets: no bias)."""

    name = "pope_yes_ratio"
    figure = "yes_ratio"

"""ChartQA relaxed accuracy (``relaxed_accuracy``): numbers within 5% relative error, other answers exact.

Reference: ``relaxed_correctness`` of pix2struct (google-research/pix2struct
945f27e, ``pix2struct/metrics.py``, with ``aggregate_metrics``: the maximum over
the targets, the mean over questions) and of lmms-eval's ChartQA task
(EvolvingLMMs-Lab/lmms-eval 75571cf, ``lmms_eval/tasks/chartqa/utils.py``,
taken from Qwen-VL's ``evaluate_vqa.py``). The two functions are the same
definition, so there is nothing to choose between them. Checked against both,
run on the cases of ``tests/fixtures/references/relaxed_accuracy.json``.

The definition, kept to the detail because published ChartQA numbers depend on it:

- an answer is a number when Python's ``float`` reads it (surrounding
  whitespace, exponents, ``inf``, non-ASCII digits included; ``1,000`` is not a
  number); an answer ending in ``%`` is read without all its trailing ``%``
  and divided by 100 (``"45%"`` is 0.45, ``"45%%"`` too, ``"45 %"`` too, but
  ``"45% "`` is not a number);
- when both are numbers and the target is not 0 (nor a string that reads as
  0), the prediction is right when ``|p - t| / |t| <= 0.05``; a NaN is never
  right;
- otherwise (a target of 0 included: no relative error exists) the two strings
  must be equal after ``str.lower``, with nothing stripped: ``"0"`` is not
  ``"0.0"`` and ``" Yes"`` is not ``"yes"``;
- several targets: right when right for one of them; the corpus value is the
  mean (pix2struct prints it times 100; evalkit keeps 0-1).

Option ``tolerance`` (default 0.05, the reference's) changes the relative error allowed.
"""

from __future__ import annotations

from typing import Any

from evalkit.data.sample import Sample
from evalkit.failures import FailureReason
from evalkit.metrics.base import Metric, SampleScore, check_options, reference_strings


def _chart_number(text: str) -> float | None:
    try:
        return float(text.rstrip("%")) / 100.0 if text.endswith("%") else float(text)
    except ValueError:
        return None


def relaxed_match(prediction: str, reference: str, tolerance: float = 0.05) -> bool:
    """ChartQA's relaxed correctness of one prediction against one target."""
    got, want = _chart_number(prediction), _chart_number(reference)
    if got is not None and want is not None and want != 0:
        return abs(got - want) / abs(want) <= tolerance
    return prediction.lower() == reference.lower()


class RelaxedAccuracy(Metric):
    """ChartQA relaxed accuracy (pix2struct, lmms-eval): within 5% of a non-zero number, else the same text."""

    name = "relaxed_accuracy"
    bounds = (0.0, 1.0)

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ("tolerance",))
        super().__init__(language, **options)
        self.tolerance = float(options.get("tolerance", 0.05))

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        references = reference_strings(sample.reference)
        if not references:
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        hit = any(relaxed_match(prediction or "", ref, self.tolerance) for ref in references)
        value = 1.0 if hit else 0.0
        return SampleScore(value, (value, 1.0))

    def describe(self) -> dict[str, Any]:
        return {"tolerance": self.tolerance}

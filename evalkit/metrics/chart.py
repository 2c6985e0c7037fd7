"""ChartQA relaxed accuracy (``relaxed_accuracy``): numbers within 5% relative error, other answers exact."""

from __future__ import annotations

from typing import Any

from evalkit.data.sample import Sample
from evalkit.failures import FailureReason
from evalkit.metrics.base import Metric, SampleScore, check_options, reference_strings


def _chart_number(text: str) -> float | None:
    text = text.strip()
    try:
        if text.endswith("%"):
            return float(text[:-1].strip()) / 100.0
        return float(text)
    except ValueError:
        return None


def relaxed_match(prediction: str, reference: str, tolerance: float = 0.05) -> bool:
    """ChartQA: numbers within ``tolerance`` relative error of the reference; other answers exact, lower-cased."""
    got, want = _chart_number(prediction), _chart_number(reference)
    if got is not None and want is not None:
        if want == 0:
            return got == 0
        return abs(got - want) / abs(want) <= tolerance
    return prediction.strip().lower() == reference.strip().lower()


class RelaxedAccuracy(Metric):
    """ChartQA relaxed accuracy: 1 when a number is within 5% of the reference (text: exact match), else 0."""

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

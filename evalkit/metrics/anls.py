"""ANLS (``anls``): average normalised Levenshtein similarity, the DocVQA / ST-VQA text-answer score."""

from __future__ import annotations

from typing import Any

from rapidfuzz.distance import Levenshtein

from evalkit.data.sample import Sample
from evalkit.failures import FailureReason
from evalkit.metrics.base import Metric, SampleScore, check_options, reference_strings


def _anls_form(text: str) -> str:
    return " ".join(text.lower().split())


def anls_score(prediction: str, references: list[str], threshold: float = 0.5) -> float:
    """Best 1 - normalised Levenshtein distance over the references, 0 at or beyond ``threshold``."""
    got = _anls_form(prediction)
    best = 0.0
    for reference in references:
        ref = _anls_form(reference)
        longest = max(len(got), len(ref))
        distance = Levenshtein.distance(got, ref) / longest if longest else 0.0
        best = max(best, 0.0 if distance >= threshold else 1.0 - distance)
    return best


class Anls(Metric):
    """Average Normalised Levenshtein Similarity (DocVQA): 1 - edit distance / length, 0 from 0.5 on."""

    name = "anls"
    bounds = (0.0, 1.0)

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ("threshold",))
        super().__init__(language, **options)
        self.threshold = float(options.get("threshold", 0.5))

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        references = reference_strings(sample.reference)
        if not references:
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        value = anls_score(prediction or "", references, self.threshold)
        return SampleScore(value, (value, 1.0))

    def describe(self) -> dict[str, Any]:
        return {"threshold": self.threshold, "normalization": "lowercase+collapse_whitespace"}

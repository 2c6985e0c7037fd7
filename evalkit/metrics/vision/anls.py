"""ANLS (``anls``): average normalised Levenshtein similarity, the DocVQA / InfographicVQA text-answer score.

Reference: lmms-eval's ``anls`` (EvolvingLMMs-Lab/lmms-eval 75571cf,
``lmms_eval/api/metrics.py``), which is the per-question rule of the RRC
DocVQA / InfographicVQA evaluation script (docvqa.org, rrc.cvc.uab.es; the copy
checked is QwenLM/Qwen-VL e6bbb9d, ``eval_mm/infographicsvqa_eval.py``,
``evaluate_method``): the script behind the DocVQA leaderboard and the number
lmms-eval users quote. pix2struct's ``anls_metric`` is a different reading
(lower case only, no whitespace folding, a distance of exactly 0.5 scores 0)
and is not followed. Checked against lmms-eval's function run on the cases of
``tests/fixtures/references/anls.json``, per sample and for the corpus.

The definition, kept to the detail because leaderboard numbers depend on it:

- both answers are stripped, lower-cased and their whitespace runs folded to
  one space before the Levenshtein distance (unit costs, code points);
- the distance is divided by the longer of the two *raw* answers' lengths after
  ``str.upper`` (not the folded ones: padding a prediction with spaces lowers
  its normalised distance), and a pair whose raw lengths are both 0 has
  distance 0;
- the question's value is 1 minus the smallest normalised distance over the
  references, and it becomes 0 when *below* the threshold (0.5): a similarity
  of exactly 0.5 keeps 0.5;
- the corpus value is the mean over questions.

A sample without references is a failure (the script's minimum over no
references fails), never a 0. Option ``threshold`` (default 0.5, the
reference's) moves the cut-off.
"""

from __future__ import annotations

from typing import Any

from rapidfuzz.distance import Levenshtein

from evalkit.data.sample import Sample
from evalkit.failures import FailureReason
from evalkit.metrics.base import Metric, SampleScore, check_options, reference_strings


def _folded(text: str) -> str:
    return " ".join(text.strip().lower().split())


def _normalised_distance(prediction: str, reference: str) -> float:
    length = max(len(reference.upper()), len(prediction.upper()))
    if length == 0:
        return 0.0
    return Levenshtein.distance(_folded(reference), _folded(prediction)) / length


def anls_score(prediction: str, references: list[str], threshold: float = 0.5) -> float:
    """One question's ANLS: 1 - the smallest normalised distance over ``references``, 0 below ``threshold``."""
    similarity = 1 - min(_normalised_distance(prediction, reference) for reference in references)
    return 0.0 if similarity < threshold else similarity


class Anls(Metric):
    """Average Normalised Levenshtein Similarity as DocVQA's script and lmms-eval compute it (0 below 0.5)."""

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
        return {
            "threshold": self.threshold,
            "normalization": "strip+lowercase+fold_whitespace; length of the raw upper-cased answers",
        }

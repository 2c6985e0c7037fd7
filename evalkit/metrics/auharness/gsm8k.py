"""GSM8K's final-number exact match, read the way AU-Harness reads it (``gsm8k_exact_match``).

AU-Harness asks the model to put its final answer in ``\\boxed{}`` and
compares one number string with the dataset's answer:

* the answer: the last ``\\boxed{...}``'s content, with ``,``, ``$`` and
  backslashes removed and a final period dropped, then its first run of
  digits and dots (with a leading minus); without a box the whole response
  is the answer, unchanged, so a response that is only the number still
  matches and anything else does not;
* the reference: the same cleaning, then the number after its last
  ``#### `` (GSM8K's own answer format), or the cleaned text when there is
  no marker (a dataset that stores the bare number).

The comparison is of strings: ``18.0`` is not ``18``, as in AU-Harness.
Per sample 1 or 0; the corpus value is the accuracy (AU-Harness prints it
x 100).
"""

from __future__ import annotations

import re
from typing import Any

from evalkit.data.sample import Sample
from evalkit.failures import FailureReason
from evalkit.metrics.base import Metric, SampleScore, check_options, reference_strings

_BOXED = re.compile(r"\\boxed\{([^}]+)\}")
_NOISE = re.compile(r"[,$\\]")
_FINAL_PERIOD = re.compile(r"\.$")  # "$": the very end, or before a final newline, as AU-Harness's pattern
_NUMBER = re.compile(r"(-?[0-9.]+)")
_MARKED = re.compile(r"#### (-?[0-9.]+)")
_MARKER = "#### "


def _cleaned(text: str) -> str:
    return _FINAL_PERIOD.sub("", _NOISE.sub("", text))


def answer_number(response: str) -> str:
    """The string the response's answer is compared as (rules in the module docstring)."""
    boxes = _BOXED.findall(response)
    if not boxes:
        return response
    content = _cleaned(boxes[-1])
    found = _NUMBER.search(content)
    return found.group(1) if found else content.strip()


def reference_number(reference: str) -> str:
    """The string the dataset's answer is compared as: the number after its last ``#### ``."""
    text = _cleaned(reference)
    last = text.rfind(_MARKER)
    if last != -1:
        text = text[last:]
    found = _MARKED.search(text)
    return found.group(1) if found else text.strip()


class Gsm8kExactMatch(Metric):
    """1 when the last \\boxed{} number equals the number after the reference's ####, as AU-Harness compares them."""

    name = "gsm8k_exact_match"
    bounds = (0.0, 1.0)
    tasks = ("gsm8k", "math")

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ())
        super().__init__(language, **options)

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        references = reference_strings(sample.reference)
        if not references:
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        got = answer_number(prediction or "")
        wanted = reference_number(references[0])
        value = float(got == wanted)
        return SampleScore(value, (value, 1.0), details={"answer": got, "reference_answer": wanted})

    def describe(self) -> dict[str, Any]:
        return {"reading": "AU-Harness gsm8k_metrics: last \\boxed{} number vs the number after ####"}

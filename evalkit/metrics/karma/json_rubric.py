"""KARMA-OpenMedEvalKit's ``json_rubric_evaluation`` for the Eka Care structured-output sets, as asked and read.

For ``ekacare/clinical_note_generation_dataset`` and
``ekacare/medical_records_parsing_validation_set`` the ``rubrics`` column is
not a list of criteria: it is the whole judge prompt (what to check and how to
answer). KARMA sends it with the model's answer appended after
``GENERATED OUTPUT:`` and a fixed system prompt (evalkit/prompts/judges/karma/
json_rubric_evaluation.yaml), and reads the reply as KARMA does:

* Markdown fences at the ends dropped, the rest read with ``json.loads``;
* the object's ``rubric_scores`` mapping (rubric id -> score) gives one item
  per id, passed when its score equals 1 (Python equality: ``true`` and
  ``1.0`` pass, ``"1"`` does not);
* the corpus value is the passed items over all items of all samples (KARMA's
  ``overall_score`` of its single ``rubric_evaluation`` pass), not a mean of
  per-sample shares; the record's score is the sample's share.

A reply that is not JSON, or has no ``rubric_scores`` object, gives KARMA no
items for the sample (it adds nothing to the corpus value); evalkit fails the
sample with the judge's reply (``judge_parse``), which leaves the corpus value
the same and shows why.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from evalkit.data.sample import Sample
from evalkit.failures import FailureReason
from evalkit.metrics.base import SampleScore
from evalkit.metrics.judges.judge import JudgeMetric, clipped

#: the meta key holding the sample's judge prompt (runspec extra_columns)
RUBRIC_KEY = "rubrics"


def read_rubric_scores(reply: str) -> dict[str, Any] | None:
    """The judge's ``rubric_scores`` mapping as KARMA reads it, or None when KARMA would find no items."""
    text = (reply or "").strip()
    if text.startswith("```json"):
        text = text[7:]
    elif text.startswith("```"):
        text = text[3:]
    if text.endswith("```"):
        text = text[:-3]
    try:
        parsed = json.loads(text.strip())
    except ValueError:
        return None
    scores = parsed.get("rubric_scores") if isinstance(parsed, dict) else None
    return scores if isinstance(scores, dict) and scores else None


class KarmaJsonRubricEvaluation(JudgeMetric):
    """KARMA's json_rubric_evaluation: the sample's rubric is the judge prompt; passed items over all items."""

    name = "karma_json_rubric_evaluation"
    prompt_name = "karma/json_rubric_evaluation"
    prompt_fields: ClassVar[tuple[str, ...]] = ("rubric", "candidate")
    prompt_required: ClassVar[tuple[str, ...]] = ("rubric", "candidate")
    bounds = (0.0, 1.0)
    ci_method = "bootstrap"
    tasks = ("medical_structured_output",)

    async def ascore(self, prediction: str, sample: Sample) -> SampleScore:
        rubric = sample.meta.get(RUBRIC_KEY)
        if not isinstance(rubric, str) or not rubric.strip():
            # KARMA builds no judge call for a sample without a rubric: it adds no items
            return SampleScore(None, failure=FailureReason.NO_REFERENCE, details={"error": "no rubric in the sample"})
        messages = self.prompt.messages(
            {"rubric": rubric, "candidate": (prediction or "").strip()}
        )  # KARMA: the stripped answer
        text, failed = await self.ask_judge(messages)
        if failed is not None:
            return failed
        assert text is not None
        scores = read_rubric_scores(text)
        if scores is None:
            return SampleScore(
                None,
                failure=FailureReason.JUDGE_PARSE,
                details={
                    "error": "the judge's reply has no rubric_scores object",
                    "judge": self.judged(messages, text),
                },
            )
        passed = [key for key, value in scores.items() if value == 1]
        value = len(passed) / len(scores)
        details = {
            "passed": passed,
            "failed": [key for key in scores if key not in passed],
            "judge": {"model": self.judge_model, "prompt": messages, "response": clipped(text)},
        }
        return SampleScore(value, (float(len(passed)), float(len(scores))), details=details)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "scale": "passed rubric items / all items, pooled over samples (KARMA)"}

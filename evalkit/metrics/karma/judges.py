"""MedCaseReasoning's judged metrics as KARMA-OpenMedEvalKit asks and reads them:
``medcasereasoning_diagnostic_accuracy`` and ``medcasereasoning_reasoning_recall``.

What the judge is sent: KARMA's prompts (evalkit/prompts/judges/karma/, copied
as data) with its system prompts, one call per sample for the diagnosis and
one per ground-truth reasoning statement for the recall. What is read: the
reply stripped and lower-cased starts with ``y`` -> 1, anything else -> 0, so
no reply is unreadable.

* diagnostic accuracy: the diagnosis is the answer's first
  ``<answer>...</answer>`` (any case), else its last non-empty line; 1/0 per
  sample, the corpus value the accuracy.
* reasoning recall: the reasoning is the answer's first ``<think>...</think>``,
  else the whole answer; the statements are the sample's meta
  ``reasoning_steps`` (a JSON list, as KARMA's dataset stores it, or a list);
  a sample's value is the share covered, the corpus value their mean over the
  samples with statements (a sample without any fails, KARMA leaves it out).

KARMA scores a judge call that errors as 0; evalkit fails the sample with the
judge's reason, so an outage does not read as a wrong diagnosis.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any, ClassVar

from evalkit.data.sample import Sample
from evalkit.errors import ConfigError
from evalkit.failures import FailureReason
from evalkit.metrics.base import SampleScore, check_options, reference_strings
from evalkit.metrics.judges.judge import PROMPTS_DIR, JudgeLike, JudgeMetric

KARMA_PROMPTS = PROMPTS_DIR / "karma"
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_THINK = re.compile(r"<think>(.*?)</think>", re.DOTALL | re.IGNORECASE)


def diagnosis_of(response: str) -> str:
    """KARMA's reading of the diagnosis: the ``<answer>`` content, else the last non-empty line."""
    found = _ANSWER.search(response)
    if found:
        return found.group(1).strip()
    lines = [line.strip() for line in response.strip().split("\n") if line.strip()]
    return lines[-1] if lines else response.strip()


def reasoning_of(response: str) -> str:
    """KARMA's reading of the reasoning: the ``<think>`` content, else the whole answer."""
    found = _THINK.search(response)
    return found.group(1).strip() if found else response.strip()


def says_yes(reply: str) -> bool:
    """KARMA's verdict: the stripped reply starts with y or Y."""
    return reply.strip().lower().startswith("y")


def refuse_judge_options(metric: str, options: dict[str, Any], keys: tuple[str, ...]) -> None:
    """KARMA's per-metric judge arguments are an error: evalkit's judge and its concurrency are set once a run."""
    for key in keys:
        if key in options:
            raise ConfigError(
                f"metric {metric!r}: option {key!r} is KARMA's; in evalkit the judge model and its "
                "concurrency are set once for the run: judge_properties.judge_model and judge_concurrency"
            )


class _KarmaJudge(JudgeMetric):
    """KARMA's judge prompt from evalkit/prompts/judges/karma unless the run gives its own."""

    bounds = (0.0, 1.0)
    tasks = ("*",)

    def __init__(
        self,
        language: str | None = None,
        judge: JudgeLike | None = None,
        judge_prompt: Any = None,
        **options: Any,
    ) -> None:
        refuse_judge_options(self.name, options, ("judge_model", "max_workers"))
        check_options(self.name, options, ())
        prompt = judge_prompt if judge_prompt is not None else KARMA_PROMPTS / f"{self.name}.yaml"
        super().__init__(language, judge, prompt, **options)


class MedCaseDiagnosticAccuracy(_KarmaJudge):
    """1 when KARMA's judge says the answer's diagnosis is the true one (y/n), else 0; the accuracy."""

    name = "medcasereasoning_diagnostic_accuracy"
    prompt_fields: ClassVar[tuple[str, ...]] = ("predicted_diagnosis", "actual_diagnosis")
    prompt_required: ClassVar[tuple[str, ...]] = ("predicted_diagnosis", "actual_diagnosis")

    async def ascore(self, prediction: str, sample: Sample) -> SampleScore:
        references = reference_strings(sample.reference)
        diagnosis = diagnosis_of(prediction or "")
        messages = self.prompt.messages(
            {"predicted_diagnosis": diagnosis, "actual_diagnosis": references[0] if references else ""}
        )
        reply, failed = await self.ask_judge(messages)
        if failed is not None:
            return failed
        value = float(says_yes(reply or ""))
        judge = self.judged(messages, reply)
        judge["verdict"] = value
        return SampleScore(value, (value, 1.0), details={"diagnosis": diagnosis, "judge": judge})


class MedCaseReasoningRecall(_KarmaJudge):
    """Share of the ground-truth reasoning statements KARMA's judge finds covered by the answer's reasoning."""

    name = "medcasereasoning_reasoning_recall"
    prompt_fields: ClassVar[tuple[str, ...]] = ("statement", "model_reasoning")
    prompt_required: ClassVar[tuple[str, ...]] = ("statement", "model_reasoning")

    async def ascore(self, prediction: str, sample: Sample) -> SampleScore:
        steps = reasoning_steps(sample.meta.get("reasoning_steps"))
        if not steps:
            return SampleScore(
                None, failure=FailureReason.NO_REFERENCE, details={"error": "no reasoning_steps in the sample's meta"}
            )
        reasoning = reasoning_of(prediction or "")
        asked = [self.prompt.messages({"statement": step, "model_reasoning": reasoning}) for step in steps]
        answers = await asyncio.gather(*(self.ask_judge(messages) for messages in asked))
        covered: list[bool] = []
        judges: list[dict[str, Any]] = []
        for messages, (reply, failed) in zip(asked, answers):
            if failed is not None:
                return failed
            covered.append(says_yes(reply or ""))
            judges.append(self.judged(messages, reply))
        value = sum(covered) / len(covered)
        return SampleScore(
            value, (value, 1.0), details={"step_results": covered, "num_steps": len(steps), "judges": judges}
        )


def reasoning_steps(value: Any) -> list[str]:
    """The statements from meta: a list, or a JSON text of one (KARMA's dataset keeps it as JSON)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return []
    if not isinstance(value, list):
        return []
    return [str(step) for step in value]

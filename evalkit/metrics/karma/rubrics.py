"""KARMA-OpenMedEvalKit's staged rubric metrics: ``answer_rubric_evaluation`` and ``query_rubric_evaluation``.

KARMA's RubricMetric, filtered to the rubric items tagged ``stage:final_answer``
(answer) or ``stage:retrieval_query`` (query), asked and read as KARMA does:

* the judge sees the conversation as KARMA serialises it, the sample's turns
  then the answer as the assistant's, ``{"conversation_turns":[{"content":
  ...,"role":...}]}`` (compact JSON, non-ASCII as written);
* items go in batches of ``batch_size`` (default 100): a batch of one with
  KARMA's single-item prompt and the item as compact JSON, a larger batch with
  its batch prompt and the items as ``json.dumps`` writes them (ASCII-escaped);
  ``use_multi_turn_prompts`` picks KARMA's multi-turn wording;
* a batch reply is read with ``json.loads`` as it comes: an array of one
  object per item, each with ``criteria_met`` and ``explanation``. Any other
  reply makes KARMA ask again item by item with the single-item prompt; a
  single-item reply that is not such an object counts the item as not met;
* the sample's score is the points of the met items over the positive points
  (no positive points: the sample fails, KARMA leaves it out); the corpus
  value is the mean, unclipped (KARMA's overall_score), with a normal CI.

The prompts are KARMA's, copied as data into evalkit/prompts/judges/karma/.
The sample's rubric comes from its meta as evalkit's rubric_evaluation reads
it (``rubrics``, ...), or from KARMA's dataset columns ``query_rubrics`` and
``answer_rubrics`` (in that order, as KARMA joins them).
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from evalkit.data.sample import Sample
from evalkit.errors import ConfigError
from evalkit.failures import FailureReason
from evalkit.metrics.base import SampleScore, check_options
from evalkit.metrics.judges.judge import PROMPTS_DIR, JudgeLike, JudgeMetric, load_judge_prompt
from evalkit.metrics.judges.rubric import RUBRIC_KEYS, Criterion, RubricError, criteria_of
from evalkit.metrics.karma.judges import refuse_judge_options

KARMA_PROMPTS = PROMPTS_DIR / "karma"
_FIELDS = ("conversation", "rubric", "rubrics")


def karma_criteria(sample: Sample) -> list[Criterion]:
    """The sample's rubric items: evalkit's rubric keys, else KARMA's query_rubrics then answer_rubrics."""
    if any(key in sample.meta for key in RUBRIC_KEYS):
        return criteria_of(sample)
    items: list[Criterion] = []
    for key in ("query_rubrics", "answer_rubrics"):
        value = sample.meta.get(key)
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                raise RubricError(f"meta {key!r} is not JSON") from None
        if value is None:
            continue
        if not isinstance(value, list):
            raise RubricError(f"meta {key!r} is not a list of rubric items")
        items.extend(_karma_item(item, key) for item in value)
    if not items and not any(key in sample.meta for key in ("query_rubrics", "answer_rubrics")):
        raise RubricError("the sample has no rubric (meta rubrics, or query_rubrics / answer_rubrics)")
    return items


def _karma_item(item: Any, key: str) -> Criterion:
    """One item of KARMA's rubric columns, read as its dataset reads it: criterion "", points 1, tags [] by default."""
    if not isinstance(item, dict):
        raise RubricError(f"meta {key!r}: an item is not an object")
    points = item.get("points", 1)
    if isinstance(points, bool) or not isinstance(points, (int, float)):
        raise RubricError(f"meta {key!r}: points must be a number, got {points!r}")
    tags = item.get("tags", [])
    if not isinstance(tags, list):
        raise RubricError(f"meta {key!r}: tags must be a list")
    return Criterion(str(item.get("criterion", "")), float(points), tuple(str(t) for t in tags))


def conversation_json(sample: Sample, answer: str) -> str:
    """KARMA's Conversation.model_dump_json(): the sample's turns (system turns aside) and the answer."""
    if sample.messages:
        turns = [{"content": m["content"], "role": m["role"]} for m in sample.messages if m.get("role") != "system"]
    else:
        turns = [{"content": sample.text or "", "role": "user"}]
    turns.append({"content": answer, "role": "assistant"})
    return json.dumps({"conversation_turns": turns}, ensure_ascii=False, separators=(",", ":"))


def _item(criterion: Criterion) -> dict[str, Any]:
    """RubricCriteria.model_dump(): points as a float, tags as a list."""
    return {"criterion": criterion.text, "points": float(criterion.points), "tags": list(criterion.tags)}


def _verdict(value: Any) -> bool | None:
    """``criteria_met`` of one reply object, or None when the object lacks KARMA's two fields."""
    if not isinstance(value, dict) or "criteria_met" not in value or "explanation" not in value:
        return None
    return bool(value["criteria_met"])


def read_batch(reply: str, size: int) -> list[bool] | None:
    """KARMA's reading of a batch reply; None means KARMA falls back to one call per item."""
    try:
        value = json.loads(reply)
    except ValueError:
        return None
    if not isinstance(value, list) or len(value) != size:
        return None
    verdicts = [_verdict(v) for v in value]
    return None if any(v is None for v in verdicts) else [bool(v) for v in verdicts]


def read_single(reply: str) -> bool:
    """KARMA's reading of a single-item reply: anything but an object with both fields is not met."""
    try:
        value = json.loads(reply)
    except ValueError:
        return False
    return bool(_verdict(value))


class _KarmaRubric(JudgeMetric):
    """KARMA's RubricMetric restricted to the items carrying ``stage``."""

    stage: ClassVar[str] = ""
    tasks = ("*",)
    prompt_fields: ClassVar[tuple[str, ...]] = _FIELDS
    prompt_required: ClassVar[tuple[str, ...]] = ("conversation", "rubrics")

    def __init__(
        self,
        language: str | None = None,
        judge: JudgeLike | None = None,
        judge_prompt: Any = None,
        **options: Any,
    ) -> None:
        refuse_judge_options(self.name, options, ("max_workers", "provider_to_use", "model_id"))
        if options.get("use_serialized_conversations"):
            raise ConfigError(
                f"metric {self.name!r}: option 'use_serialized_conversations' (answers that are whole conversations "
                "from KARMA's pass-through models) is not supported"
            )
        options.pop("use_serialized_conversations", None)
        check_options(self.name, options, ("batch_size", "use_multi_turn_prompts"))
        batch_size = options.pop("batch_size", 100)
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ConfigError(f"metric {self.name!r}: option 'batch_size' must be a positive integer")
        multi_turn = options.pop("use_multi_turn_prompts", False)
        if not isinstance(multi_turn, bool):
            raise ConfigError(f"metric {self.name!r}: option 'use_multi_turn_prompts' must be true or false")
        suffix = "_multi_turn" if multi_turn else ""
        batch = judge_prompt if judge_prompt is not None else KARMA_PROMPTS / f"rubric_batch{suffix}.yaml"
        super().__init__(language, judge, batch, **options)
        self.single = load_judge_prompt(
            f"rubric_single{suffix}",
            getattr(judge, "prompt_model", None),
            fields=_FIELDS,
            required=("conversation", "rubric"),
            path=KARMA_PROMPTS / f"rubric_single{suffix}.yaml",
        )
        self.batch_size = batch_size
        self.multi_turn = multi_turn

    async def _ask(self, messages: list[dict[str, Any]], asked: list[dict[str, Any]]) -> str | SampleScore:
        reply, failed = await self.ask_judge(messages)
        if failed is not None:
            return failed
        asked.append(self.judged(messages, reply))
        return reply or ""

    async def _single(self, conversation: str, item: Criterion, asked: list[dict[str, Any]]) -> bool | SampleScore:
        rubric = json.dumps(_item(item), ensure_ascii=False, separators=(",", ":"))
        reply = await self._ask(self.single.messages({"conversation": conversation, "rubric": rubric}), asked)
        return reply if isinstance(reply, SampleScore) else read_single(reply)

    async def ascore(self, prediction: str, sample: Sample) -> SampleScore:
        try:
            items = [c for c in karma_criteria(sample) if self.stage in c.tags]
        except RubricError as error:
            return SampleScore(None, failure=FailureReason.RUBRIC_INVALID, details={"error": str(error)})
        possible = sum(c.points for c in items if c.points > 0)
        if possible <= 0:
            return SampleScore(
                None,
                failure=FailureReason.RUBRIC_INVALID,
                details={"error": f"no rubric item tagged {self.stage} with positive points (KARMA leaves it out)"},
            )
        conversation = conversation_json(sample, prediction or "")
        asked: list[dict[str, Any]] = []
        met: list[bool] = []
        for start in range(0, len(items), self.batch_size):
            batch = items[start : start + self.batch_size]
            if len(batch) == 1:
                verdict = await self._single(conversation, batch[0], asked)
                if isinstance(verdict, SampleScore):
                    return verdict
                met.append(verdict)
                continue
            rubrics = json.dumps([_item(c) for c in batch])
            reply = await self._ask(self.prompt.messages({"conversation": conversation, "rubrics": rubrics}), asked)
            if isinstance(reply, SampleScore):
                return reply
            verdicts = read_batch(reply, len(batch))
            if verdicts is None:  # KARMA's fallback: the items one by one
                verdicts = []
                for item in batch:
                    single = await self._single(conversation, item, asked)
                    if isinstance(single, SampleScore):
                        return single
                    verdicts.append(single)
            met.extend(verdicts)
        achieved = sum(c.points for c, ok in zip(items, met) if ok)
        value = achieved / possible
        return SampleScore(
            value,
            (value, 1.0),
            details={"criteria_met": met, "achieved": achieved, "possible": possible, "judge": asked},
        )

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "stage": self.stage,
            "batch_size": self.batch_size,
            "use_multi_turn_prompts": self.multi_turn,
        }


class AnswerRubricEvaluation(_KarmaRubric):
    """KARMA's answer_rubric_evaluation: points of the met stage:final_answer items over their positive points."""

    name = "answer_rubric_evaluation"
    stage = "stage:final_answer"


class QueryRubricEvaluation(_KarmaRubric):
    """KARMA's query_rubric_evaluation: points of the met stage:retrieval_query items over their positive points."""

    name = "query_rubric_evaluation"
    stage = "stage:retrieval_query"

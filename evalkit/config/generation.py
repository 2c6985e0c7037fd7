"""``temperature_overrides`` and ``generation_overrides``: generation settings by model, task or both."""

from __future__ import annotations

from pydantic import Field, model_validator

from evalkit.config.base import Strict
from evalkit.config.limits import MAX_TEMPERATURE, MAX_TOKENS, SEED_MAX, SEED_MIN


class _RuleTarget(Strict):
    """What an override rule applies to: a model, a task, or a model on a task."""

    model: str | None = Field(
        None,
        description="The model this rule applies to, by its name or its `model` id; absent: every model (needs "
        "`task`).",
    )
    task: str | None = Field(
        None,
        description="The task, dataset or category this rule applies to; absent: every dataset (needs `model`).",
    )

    @model_validator(mode="after")
    def _has_target(self) -> _RuleTarget:
        if self.model is None and self.task is None:
            raise ValueError("needs `model`, `task` or both")
        return self


class TemperatureOverride(_RuleTarget):
    """A temperature for a model, a task, or a model on a task (LALMEval's key; generation_overrides covers more)."""

    temperature: float = Field(
        ge=0,
        le=MAX_TEMPERATURE,
        description="Mandatory: the temperature sent when this rule is the most specific that matches (0 to 100).",
    )


class GenerationOverride(_RuleTarget):
    """max_tokens / top_p / seed / temperature for a model, a task, or a model on a task."""

    temperature: float | None = Field(
        None,
        ge=0,
        le=MAX_TEMPERATURE,
        description="Sampling temperature set by this rule (0 to 100); absent: this rule leaves temperature to the "
        "next one.",
    )
    max_tokens: int | None = Field(
        None,
        ge=1,
        le=MAX_TOKENS,
        description="Most tokens generated per answer set by this rule (1 to 10000000); absent: left to the next rule.",
    )
    top_p: float | None = Field(
        None,
        gt=0,
        le=1,
        description="Nucleus-sampling probability mass set by this rule (0 < top_p <= 1); absent: left to the next "
        "rule.",
    )
    seed: int | None = Field(
        None,
        ge=SEED_MIN,
        le=SEED_MAX,
        description="Sampling seed set by this rule (a 64-bit integer); absent: left to the next rule.",
    )

"""``filters:``: which samples of each dataset run, and the add-ons and system prompts they are asked with."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from evalkit.config.base import Strict
from evalkit.config.limits import DAY_S, MAX_SAMPLES, SEED_MAX


class Filters(Strict):
    """Which samples run and how they are prompted."""

    num_samples: int | None = Field(
        None,
        ge=0,
        le=MAX_SAMPLES,
        description="Samples per dataset, counted among those the other filters keep (0 to 1000000000); absent: "
        "every sample.",
    )
    sampling: Literal["first", "random"] = Field(
        "first",
        description="How num_samples picks: first (default) takes the first N kept rows; random a seeded uniform "
        "sample of N, "
        "the same for every engine of a dataset.",
    )
    seed: int = Field(
        0,
        ge=0,
        le=SEED_MAX,
        description="Seed of the run's random choices: random sampling, random prompt templates, in-context "
        "examples and the bootstrap CIs "
        "(default 0; 0 to 9223372036854775807); the same seed asks the same questions again.",
    )
    length_filter: tuple[float, float] | None = Field(
        None,
        description="[min, max] seconds of audio a sample must have to be kept (0 <= min <= max <= 86400: a day); "
        "samples without audio or a known length are "
        "kept. Absent: no length filter.",
    )
    accented: bool | None = Field(
        None,
        description="true keeps only accented speech, false only non-accented (standard US/UK), judged from the "
        "dataset's "
        "accented or accent column; samples without either are kept. Absent: no accent filter.",
    )
    language: str | None = Field(
        None,
        description="Keep only datasets and samples in this language, a code or a name (en == english); a "
        "translation pair "
        "matches on its source or target. Absent: every language.",
    )
    user_prompt_add_ons: list[str] = Field(
        default_factory=list,
        description="Names of prompt add-ons (evalkit/prompts/add_ons.yaml) whose texts are appended to every "
        "instruction "
        "(default none).",
    )

    @field_validator("length_filter")
    @classmethod
    def _ordered_lengths(cls, value: tuple[float, float] | None) -> tuple[float, float] | None:
        if value is not None and not (0 <= value[0] <= value[1] <= DAY_S):
            raise ValueError(f"expects [min, max] seconds with 0 <= min <= max <= {DAY_S}")
        return value

    system_prompts: list[str] = Field(
        default_factory=list,
        description="Names of system prompts (evalkit/prompts/system_prompts.yaml) joined into the system message of "
        "every "
        "request (default none: no system message).",
    )

"""``judge_properties:``: the LLM judge that judge and rubric metrics ask."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from evalkit.config.base import Strict
from evalkit.config.limits import MAX_IN_FLIGHT, MAX_RETRIES, MAX_TEMPERATURE, WEEK_S
from evalkit.config.price import Price, named_price


class JudgeProperties(Strict):
    """The LLM judge of llm_judge_* and rubric metrics.

    An endpoint asked like any model: retries, circuit breaker, response store.
    """

    judge_concurrency: int = Field(
        1, ge=1, le=MAX_IN_FLIGHT, description="Judge requests in flight at once (default 1; 1 to 65536)."
    )
    judge_model: str = Field(
        description="Mandatory: the judge's model id sent in requests (for Azure, the deployment name)."
    )
    judge_type: Literal["openai", "vllm"] = Field(
        "openai",
        description="openai (default: OpenAI, or Azure when judge_api_version is set) or vllm (any OpenAI-compatible "
        "server; "
        "judge_api_version is then ignored).",
    )
    judge_api_version: str | None = Field(
        None, description="Azure OpenAI api-version for an openai judge; absent: plain OpenAI-style URLs."
    )
    judge_api_endpoint: str = Field(description="Mandatory: base URL of the judge's endpoint, e.g. https://host/v1.")
    judge_api_key: str | None = Field(
        None,
        description="The judge's API key (Bearer token, api-key header for Azure); absent: none sent. Never logged "
        "or stored.",
    )
    judge_temperature: float = Field(
        0.0,
        ge=0,
        le=MAX_TEMPERATURE,
        description="Temperature of every judge request (default 0: repeatable verdicts; 0 to 100).",
    )
    judge_prompt_model_override: str | None = Field(
        None,
        description="Use the judge-prompt variant written for this model name instead of judge_model's (prompts may "
        "be tuned "
        "per judge model); absent: judge_model picks it.",
    )
    judge_timeout: float = Field(
        120.0,
        gt=0,
        le=WEEK_S,
        description="Seconds one judge attempt may take before it is retried (default 120; more than 0, at most "
        "604800: a week).",
    )
    judge_retry_attempts: int = Field(
        3,
        ge=0,
        le=MAX_RETRIES,
        description="Retries of a judge request after its first attempt (default 3; 0 to 100); a judge that still "
        "fails fails the sample.",
    )
    judge_price: Price | None = Field(
        None,
        description="The judge's USD per million tokens, as a model's `price` (numbers or a table entry's name); "
        "absent: the judge's tokens are shown without a cost.",
    )

    @field_validator("judge_price", mode="before")
    @classmethod
    def _price_by_name(cls, value: Any) -> Any:
        return named_price(value)

"""``prompts:``: prompts written inline in the config, above ``prompts_dir`` and the package's own."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from evalkit.config.base import Strict


class PromptOverrides(Strict):
    """Prompts written in the config, above prompts_dir and the package's; each entry replaces or adds one name."""

    add_ons: dict[str, Any] | None = Field(
        None,
        description="Add-ons by name, each {text, by_dataset, by_task, by_category} as in "
        "evalkit/prompts/add_ons.yaml; absent: none added.",
    )
    system_prompts: dict[str, Any] | None = Field(
        None,
        description="System prompts by name, each {text, by_model, by_dataset, by_task, by_category} as in "
        "evalkit/prompts/system_prompts.yaml; absent: none added.",
    )
    pools: dict[str, list[str]] | None = Field(
        None, description="Instruction pools by name, each a list of templates (as pools.yaml); absent: none added."
    )
    instructions: dict[str, str] | None = Field(
        None,
        description="An instruction per dataset name, replacing its runspec's `instruction` for every model (what "
        "AU-Harness's prompt_overrides.user_prompt does); a per-sample instruction column still comes first; absent: "
        "the runspecs' own.",
    )
    judges: dict[str, dict[str, Any]] | None = Field(
        None,
        description="Judge prompts by metric name (llm_judge_binary, ...), each {system, user, user_no_reference, "
        "models} as in evalkit/prompts/judges/*.yaml; absent: the package's.",
    )

"""Resolve an engine's prompt settings (system prompts, add-ons, examples) from the config."""

from __future__ import annotations

from evalkit.catalog import DatasetSpec
from evalkit.config import Config
from evalkit.prompts.preprocessors import PromptContext


def prompt_context_for(config: Config, spec: DatasetSpec, model_names: list[str]) -> PromptContext:
    """The PromptContext of one engine; named prompts are looked up in evalkit's prompt YAML files."""
    return PromptContext()

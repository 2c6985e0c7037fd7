"""What to run: config.yaml's schema, reading it, other tools' formats and every override, in one place.

A config goes in once and a validated :class:`Config` comes out (:func:`resolve`):

    source (path, dict or Config)
      -> load      YAML, ``${VAR}`` expanded (envvars), an AU-Harness config translated (foreign/auharness)
      -> schema    validated by the pydantic models (models, launch, filters, generation, judge, store, prompts),
                   every problem listed at once with its key (messages)
      -> overrides flags and keywords in one pass (overrides): --dataset/--metric/--model, --num-samples,
                   KARMA's --*-args (parsed from KARMA's strings by foreign/karma_args), top-level keys

Layers: this package sits above :mod:`evalkit.catalog` and below everything else. Reading foreign names needs
the catalogue (an AU-Harness or KARMA dataset name resolves through it), and the catalogue needs nothing of the
config, so the catalogue comes first and the translation imports it directly. The metric and processor
registries are the other way round: ``evalkit.metrics`` and ``evalkit.processing`` read data that reads the
config, so the overrides that check metric and processor names take those registries as an argument
(:class:`Registries`), handed in by :mod:`evalkit.api`.

LALMEval's format is evalkit's own (the ``info:`` wrapper of model entries, quoted ``"[name, metric]"``
pairs), so it needs no translation.
"""

from __future__ import annotations

from evalkit.config.filters import Filters
from evalkit.config.generation import GenerationOverride, TemperatureOverride
from evalkit.config.judge import JudgeProperties
from evalkit.config.launch import (
    SERVE_DEFAULT_MAX_BATCH,
    SERVE_DEFAULT_MAX_BATCH_CUDA,
    LaunchSpec,
    RayLaunch,
    serve_default_max_batch,
)
from evalkit.config.limits import MAX_IN_FLIGHT, MAX_SAMPLES
from evalkit.config.load import load_config, parse_config
from evalkit.config.messages import documented_range, format_validation_error
from evalkit.config.models import GEMINI_OPENAI_URL, InferenceType, ModelEntry, ModelInfo, RequestKind
from evalkit.config.overrides import Overrides, Registries, apply_overrides
from evalkit.config.prompt_overrides import PromptOverrides
from evalkit.config.resolve import resolve
from evalkit.config.schema import Config, aggregate_entry
from evalkit.config.store import CacheSettings

__all__ = [
    "GEMINI_OPENAI_URL",
    "MAX_IN_FLIGHT",
    "MAX_SAMPLES",
    "SERVE_DEFAULT_MAX_BATCH",
    "SERVE_DEFAULT_MAX_BATCH_CUDA",
    "CacheSettings",
    "Config",
    "Filters",
    "GenerationOverride",
    "InferenceType",
    "JudgeProperties",
    "LaunchSpec",
    "ModelEntry",
    "ModelInfo",
    "Overrides",
    "PromptOverrides",
    "RayLaunch",
    "Registries",
    "RequestKind",
    "TemperatureOverride",
    "aggregate_entry",
    "apply_overrides",
    "documented_range",
    "format_validation_error",
    "load_config",
    "parse_config",
    "resolve",
    "serve_default_max_batch",
]

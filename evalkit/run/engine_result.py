"""What an engine hands back for its (dataset, metric) pair: each model's score, failures and where its records are.

A pair that is merged from shards (:mod:`evalkit.run.merge`) or scored again from its records
(:mod:`evalkit.run.rescore`) is handed back in the same form, so every path ends in the same result rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.metrics import MetricResult
from evalkit.plan import EngineSpec


@dataclass
class ModelResult:
    model: str
    result: MetricResult | None
    n_failed: int = 0
    failure_reasons: dict[str, int] = field(default_factory=dict)
    #: reason -> the first failure message seen with it
    failure_examples: dict[str, str] = field(default_factory=dict)
    #: the model was not asked every sample: why and how far it went (``stop_at_ci``: evalkit/run/stopping/at_ci.py)
    partial: dict[str, Any] | None = None
    #: what the model's answers on this pair took (evalkit/run/cost/usage.py's usage_dict); None: not known (rescored)
    usage: dict[str, Any] | None = None
    #: the same of the judge's answers that scored them (judge metrics)
    judge_usage: dict[str, Any] | None = None


@dataclass
class EngineResult:
    spec: EngineSpec
    models: dict[str, ModelResult] = field(default_factory=dict)
    n_samples: int = 0
    seconds: float = 0.0
    error: str | None = None
    metric_info: dict[str, Any] = field(default_factory=dict)
    #: where the engine wrote its records (a robustness variant is compared with its clean pair's, sample by sample)
    records_path: Path | None = None
    #: why the pair ended before its last sample ("budget": the run's budget was spent); None: it ran them all
    partial: str | None = None

"""Result rows: one score per (dataset, metric, model) with n, the 95% CI and the failure counts; and aggregates.

Every score row carries its uncertainty, so a number never travels without it.
Writing rows to files is :mod:`evalkit.report.files`; their text views are
:mod:`evalkit.report.tables`.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import platform
import sys
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

log = logging.getLogger("evalkit")

_PACKAGES = ("evalkit", "aiohttp", "datasets", "jiwer", "sacrebleu", "whisper-normalizer", "numpy", "pydantic")


@dataclass
class ResultRow:
    dataset: str
    task: str
    category: str
    metric: str
    model: str
    score: float | None
    ci_low: float | None
    ci_high: float | None
    n: int
    n_failed: int
    failure_rate: float
    unreliable: bool
    seconds: float
    failure_reasons: dict[str, int] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    kind: str = "dataset"  # or "aggregate"
    #: failure reason -> one message it came with (the first seen)
    failure_examples: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {k: _clean(v) for k, v in self.__dict__.items()}


def _clean(value: Any) -> Any:
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "item"):
        return _clean(value.item())
    return value


def aggregate_rows(rows: list[ResultRow], aggregate: list[tuple[str, list[str]]], resolve: Any) -> list[ResultRow]:
    """One row per (aggregate entry, model): the datasets' scores combined with their CIs."""
    from evalkit.metrics import METRICS, MetricResult
    from evalkit.metrics.ci import combine

    out = []
    for metric, names in aggregate:
        metric = METRICS.canonical(metric)
        datasets = {spec.name for name in names for spec in resolve(name)}
        models = sorted({r.model for r in rows if r.metric == metric and r.dataset in datasets})
        for model in models:
            chosen = [
                r
                for r in rows
                if r.metric == metric and r.model == model and r.dataset in datasets and r.score is not None
            ]
            if not chosen:
                continue
            combined = combine([MetricResult(r.score, r.ci_low, r.ci_high, r.n, "", {}) for r in chosen])  # type: ignore[arg-type]
            label = "+".join(names)
            out.append(
                ResultRow(
                    dataset=label,
                    task="",
                    category="",
                    metric=metric,
                    model=model,
                    score=combined.score,
                    ci_low=combined.ci_low,
                    ci_high=combined.ci_high,
                    n=combined.n,
                    n_failed=sum(r.n_failed for r in chosen),
                    failure_rate=0.0,
                    unreliable=any(r.unreliable for r in chosen),
                    seconds=0.0,
                    details={"datasets": sorted(r.dataset for r in chosen), "method": combined.ci_method},
                    kind="aggregate",
                )
            )
    return out


def over_failure_limit(rows: list[ResultRow], max_failure_rate: float) -> list[ResultRow]:
    """The model x dataset-metric results whose share of failed samples exceeds ``max_failure_rate``."""
    return [r for r in rows if r.kind == "dataset" and r.failure_rate > max_failure_rate]


def failures_by_model(rows: list[ResultRow]) -> dict[str, list[tuple[str, int, str]]]:
    """model -> [(reason, failed samples, one example message)], most frequent reason first.

    Metrics on one dataset share their requests, so a failed request shows up
    in every metric's row: each dataset counts once per model and reason (its
    largest count among the metrics).
    """
    per_dataset: dict[tuple[str, str, str], int] = {}
    examples: dict[tuple[str, str], str] = {}
    for r in rows:
        if r.kind != "dataset":
            continue
        for reason, count in (r.failure_reasons or {}).items():
            key = (r.model, reason, r.dataset)
            per_dataset[key] = max(per_dataset.get(key, 0), int(count))
            example = (r.failure_examples or {}).get(reason)
            if example and (r.model, reason) not in examples:
                examples[(r.model, reason)] = example
    counts: dict[tuple[str, str], int] = {}
    for (model, reason, _), count in per_dataset.items():
        counts[(model, reason)] = counts.get((model, reason), 0) + count
    order = {model: i for i, model in enumerate(dict.fromkeys(r.model for r in rows))}
    out: dict[str, list[tuple[str, int, str]]] = {}
    for (model, reason), count in sorted(counts.items(), key=lambda kv: (order[kv[0][0]], -kv[1], kv[0][1])):
        out.setdefault(model, []).append((reason, count, examples.get((model, reason), "")))
    return out


def package_versions() -> dict[str, str]:
    versions = {"python": sys.version.split()[0], "platform": platform.platform()}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


_ROW_FIELDS = {f.name for f in dataclasses.fields(ResultRow)}


def row_from_dict(data: dict[str, Any]) -> ResultRow:
    """A ResultRow from its results.json form (unknown keys from newer versions are ignored)."""
    values = {k: v for k, v in data.items() if k in _ROW_FIELDS}
    values.setdefault("failure_reasons", {})
    values.setdefault("details", {})
    return ResultRow(**values)

"""Metrics: per-sample sufficient statistics, corpus aggregation and confidence intervals.

``METRICS``, ``Metric``, ``MetricResult`` and ``SampleScore`` are imported on
first use: the metric modules need numpy, and `evalkit list` or a report
re-render read only :mod:`evalkit.metrics.table`, which must stay fast.
``METRICS`` comes from that table module, so resolving a metric name never
imports numpy; the rest come from :mod:`evalkit.metrics.base`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evalkit.metrics.base import Metric, MetricResult, SampleScore
    from evalkit.metrics.table import METRICS

__all__ = ["METRICS", "Metric", "MetricResult", "SampleScore"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'evalkit.metrics' has no attribute {name!r}")
    module = importlib.import_module("evalkit.metrics.table" if name == "METRICS" else "evalkit.metrics.base")
    value = getattr(module, name)
    globals()[name] = value
    return value

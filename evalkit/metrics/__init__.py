"""Metrics: per-sample sufficient statistics, corpus aggregation and confidence intervals.

``METRICS``, ``Metric``, ``MetricResult`` and ``SampleScore`` are imported on
first use: the metric modules need numpy, and `evalkit list` or a report
re-render read only :mod:`evalkit.metrics.table`, which must stay fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evalkit.metrics.base import METRICS, Metric, MetricResult, SampleScore

__all__ = ["METRICS", "Metric", "MetricResult", "SampleScore"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'evalkit.metrics' has no attribute {name!r}")
    from evalkit.metrics import base

    value = getattr(base, name)
    globals()[name] = value
    return value

"""Metrics: per-sample sufficient statistics, corpus aggregation and confidence intervals."""

from evalkit.metrics.base import METRICS, Metric, MetricResult, SampleScore

__all__ = ["METRICS", "Metric", "MetricResult", "SampleScore"]

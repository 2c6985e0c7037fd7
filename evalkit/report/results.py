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
from collections.abc import Callable
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
    #: how a peer tool reports this pair ({tool, dataset, metric, scale}; :mod:`evalkit.config.foreign.reporting`), when
    #: the run's config is in its format: the tables show its names and its scale beside evalkit's n and CI
    reported_as: dict[str, Any] | None = None
    #: the row's model was not asked every sample: {"reason": ..., ...}. "stopped_at_ci"
    #: (evalkit/run/stopping/at_ci.py): a complete answer to the precision asked, over ``n`` samples;
    #: "budget" (evalkit/run/cost/usage.py): the run's budget was spent before the pair's last sample.
    #: Never the whole dataset's score.
    partial: dict[str, Any] | None = None
    #: what the model's answers took on this pair: tokens, requests, answers from the store, cost (None: unknown)
    usage: dict[str, Any] | None = None
    #: the same of the judge's answers that scored them (judge metrics)
    judge_usage: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        data = {k: _clean(v) for k, v in self.__dict__.items()}
        for key in ("partial", "usage", "judge_usage"):
            if data[key] is None:
                del data[key]  # a complete row without known usage reads as it always did
        if self.reported_as is None:
            del data["reported_as"]  # evalkit's own configs' results are as they always were
        else:
            data["reported_as"] = _clean(
                {**self.reported_as, **dict(zip(("score", "ci_low", "ci_high"), self.scaled()))}
            )
        return data

    @property
    def shown_dataset(self) -> str:
        """The dataset's name as the table shows it: the peer's name where the row is reported as the peer does."""
        return str(self.reported_as.get("dataset") or self.dataset) if self.reported_as else self.dataset

    @property
    def shown_metric(self) -> str:
        return str(self.reported_as.get("metric") or self.metric) if self.reported_as else self.metric

    @property
    def scale(self) -> float:
        """What the score and its CI are multiplied by on the peer's scale (100: it prints percentages); 1 else."""
        value = (self.reported_as or {}).get("scale", 1)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 1.0

    def scaled(self) -> tuple[float | None, float | None, float | None]:
        """Score and CI on the shown scale (the same quantity, the peer's unit)."""
        factor = self.scale
        return tuple(  # type: ignore[return-value]
            None if v is None or not isinstance(v, (int, float)) else v * factor
            for v in (self.score, self.ci_low, self.ci_high)
        )


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


#: details keys of a dataset row that hold its corpus denominator: a micro average weighted by them is the pooled value
_SIZE_KEYS = ("reference_words", "reference_characters", "ref_length")


def _member_label(name: str, members: list[str], ran: set[str]) -> str | None:
    """How one name of an aggregate entry reads in its row: dropped when none of its datasets ran."""
    done = [d for d in members if d in ran]
    if not done:
        return None
    return name if len(done) == len(members) else f"{name} ({len(done)} of {len(members)})"


def aggregate_rows(
    rows: list[ResultRow], aggregate: list[tuple[Any, ...]], resolve: Callable[[str], list[Any]]
) -> list[ResultRow]:
    """One row per (aggregate entry, model of the run): the datasets' scores combined with their CIs.

    The label names only what was combined (a member dataset that was not run
    is left out of it and listed in ``details["missing"]``); a member that
    failed, had an engine error or no score marks the row unreliable; an entry
    with nothing to combine still gets a row, with its reason in ``error``.
    """
    from evalkit.config import aggregate_entry
    from evalkit.config.foreign.reporting import auharness_metric
    from evalkit.metrics import METRICS, MetricResult
    from evalkit.metrics.ci import combine

    models = list(dict.fromkeys(r.model for r in rows if r.kind == "dataset"))
    out = []
    for entry in aggregate:
        metric, names, method = aggregate_entry(entry)
        metric = METRICS.canonical(auharness_metric(metric, METRICS.__contains__))
        bounds = METRICS.get(metric).bounds
        resolved = {name: list(dict.fromkeys(spec.name for spec in resolve(name))) for name in names}
        members = list(dict.fromkeys(d for found in resolved.values() for d in found))
        for model in models:
            ran = {
                r.dataset: r
                for r in rows
                if r.kind == "dataset" and r.metric == metric and r.model == model and r.dataset in members
            }
            scored = [ran[d] for d in members if d in ran and ran[d].score is not None]
            missing = [d for d in members if d not in ran]
            parts = [_member_label(name, resolved[name], set(ran)) for name in names]
            label = "+".join(p for p in parts if p) or "+".join(names)
            weights = [
                float(next((r.details[k] for k in _SIZE_KEYS if isinstance(r.details.get(k), (int, float))), r.n))
                for r in scored
            ]
            combined = combine(
                [MetricResult(r.score, r.ci_low, r.ci_high, r.n, "", {}) for r in scored],  # type: ignore[arg-type]
                method=method,
                weights=weights,
                bounds=bounds,
            )
            n_failed = sum(r.n_failed for r in ran.values())
            total = combined.n + n_failed
            error = None
            if not scored:
                what = ", ".join(members) or "(no dataset)"
                error = f"nothing to combine: no dataset of {'+'.join(names)} was scored with {metric} ({what})"
                log.warning("aggregate %s / %s / %s: %s", "+".join(names), metric, model, error)
            elif missing:
                log.warning(
                    "aggregate %s / %s / %s: %s not run, left out", "+".join(names), metric, model, ", ".join(missing)
                )
            out.append(
                ResultRow(
                    dataset=label,
                    task="",
                    category="",
                    metric=metric,
                    model=model,
                    score=combined.score if scored else None,
                    ci_low=combined.ci_low if scored else None,
                    ci_high=combined.ci_high if scored else None,
                    n=combined.n,
                    n_failed=n_failed,
                    failure_rate=n_failed / total if total else 0.0,
                    unreliable=not scored or any(r.unreliable or r.error or r.score is None for r in ran.values()),
                    seconds=0.0,
                    details={
                        "datasets": [r.dataset for r in scored],
                        "missing": missing,
                        "method": combined.ci_method,
                        "weights": dict(zip([r.dataset for r in scored], weights)) if method == "micro" else None,
                    },
                    error=error,
                    kind="aggregate",
                    reported_as=_reported_aggregate(list(ran.values()), names, metric),
                    partial=_partial_aggregate(scored),
                )
            )
    return out


def _partial_aggregate(members: list[ResultRow]) -> dict[str, Any] | None:
    """An aggregate of rows some of which stopped early says so, naming them and their reasons."""
    stopped = {r.dataset: r.partial for r in members if r.partial}
    if not stopped:
        return None
    reasons = sorted({str(p.get("reason")) for p in stopped.values()})
    return {"reason": reasons[0] if len(reasons) == 1 else "+".join(reasons), "datasets": sorted(stopped)}


def _reported_aggregate(members: list[ResultRow], names: list[str], metric: str) -> dict[str, Any] | None:
    """An aggregate of rows a peer reports is reported the same way: its names, the members' common scale."""
    reported = [r.reported_as for r in members]
    if not reported or any(r is None for r in reported):
        return None
    scales = {r.get("scale") for r in reported if r is not None}
    first = reported[0] or {}
    if len(scales) != 1:
        return None
    from evalkit.config.foreign.reporting import AUHARNESS

    shown = "+".join(name.removeprefix(f"{AUHARNESS}:") for name in names)
    return {"tool": first.get("tool"), "dataset": shown, "metric": first.get("metric", metric), "scale": scales.pop()}


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
            versions[name] = _version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def _version(name: str) -> str:
    """``metadata.version(name)`` from the metadata's header lines alone.

    ``metadata.version`` parses the whole file as an e-mail message, long description included (numpy's is
    long): ~12 ms for these packages, at the end of every run, against ~2 ms for reading up to the header's end.
    """
    dist = metadata.distribution(name)
    text = dist.read_text("METADATA") or dist.read_text("PKG-INFO") or ""
    for line in text.splitlines():
        if not line:
            break  # the header ends at the first blank line
        if line[:8].lower() == "version:":
            return line[8:].strip()
    return dist.version


_ROW_FIELDS = {f.name for f in dataclasses.fields(ResultRow)}


def row_from_dict(data: dict[str, Any]) -> ResultRow:
    """A ResultRow from its results.json form (unknown keys from newer versions are ignored)."""
    values = {k: v for k, v in data.items() if k in _ROW_FIELDS}
    reported = values.get("reported_as")
    if isinstance(reported, dict):  # the scaled numbers are derived again from the row's own
        values["reported_as"] = {k: reported[k] for k in ("tool", "dataset", "metric", "scale") if k in reported}
    elif reported is not None:
        values["reported_as"] = None
    if isinstance(values.get("partial"), str):  # a reason alone: the form before partial rows said how far they went
        values["partial"] = {"reason": values["partial"]}
    if not isinstance(values.get("partial"), dict):
        values["partial"] = None
    values.setdefault("failure_reasons", {})
    values.setdefault("details", {})
    for key in ("usage", "judge_usage"):  # read from a file: a mapping or nothing (its numbers are checked as shown)
        if not isinstance(values.get(key), dict):
            values[key] = None
    return ResultRow(**values)

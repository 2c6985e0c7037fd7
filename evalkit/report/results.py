"""results.json / results.csv / results.md / report.html and the console table, from engine results.

Every score row carries n, the 95% CI and the failure counts, so a number
never travels without its uncertainty. ``load_results`` reads a run directory
back, so ``evalkit report`` and the Python API re-render without re-running.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import logging
import math
import platform
import sys
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from evalkit.errors import UserError

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
            chosen = [r for r in rows if r.metric == metric and r.model == model and r.dataset in datasets and r.score is not None]
            if not chosen:
                continue
            combined = combine([MetricResult(r.score, r.ci_low, r.ci_high, r.n, "", {}) for r in chosen])  # type: ignore[arg-type]
            label = "+".join(names)
            out.append(
                ResultRow(
                    dataset=label, task="", category="", metric=metric, model=model,
                    score=combined.score, ci_low=combined.ci_low, ci_high=combined.ci_high, n=combined.n,
                    n_failed=sum(r.n_failed for r in chosen), failure_rate=0.0, unreliable=any(r.unreliable for r in chosen),
                    seconds=0.0, details={"datasets": sorted(r.dataset for r in chosen), "method": combined.ci_method}, kind="aggregate",
                )
            )
    return out


def package_versions() -> dict[str, str]:
    versions = {"python": sys.version.split()[0], "platform": platform.platform()}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def fmt(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.2f}" if abs(value) >= 100 else f"{value:.4f}"


def table_rows(rows: list[ResultRow]) -> list[list[str]]:
    out = []
    for r in rows:
        known = all(v is not None and not (isinstance(v, float) and math.isnan(v)) for v in (r.ci_low, r.ci_high))
        ci = f"[{fmt(r.ci_low)}, {fmt(r.ci_high)}]" if known else "-"
        flag = " !" if r.unreliable else ""
        out.append([r.dataset, r.metric, r.model, fmt(r.score) + flag, ci, str(r.n), str(r.n_failed)])
    return out


HEADERS = ["dataset", "metric", "model", "score", "95% CI", "n", "failed"]


def markdown_table(rows: list[ResultRow]) -> str:
    lines = ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    for cells in table_rows(rows):
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def write_results(run_dir: Path, rows: list[ResultRow], meta: dict[str, Any]) -> None:
    """Everything a finished run leaves behind: results.json first (the source of truth), then the views."""
    run_dir = Path(run_dir)
    payload = {**meta, "results": [r.as_dict() for r in rows if r.kind == "dataset"], "aggregate": [r.as_dict() for r in rows if r.kind == "aggregate"]}
    # temp file + rename: a kill during the write never leaves a half-written results.json
    partial = run_dir / "results.json.partial"
    partial.write_text(json.dumps(payload, indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
    partial.replace(run_dir / "results.json")
    write_views(run_dir, rows, meta)


def write_views(run_dir: Path, rows: list[ResultRow], meta: dict[str, Any]) -> None:
    """results.csv, results.md and report.html, all derived from rows + meta (re-rendered by `evalkit report`)."""
    run_dir = Path(run_dir)
    (run_dir / "results.csv").write_text(results_csv(rows), encoding="utf-8")
    (run_dir / "results.md").write_text(results_markdown(rows, meta), encoding="utf-8")
    try:
        from evalkit.report.html import write_html

        write_html(run_dir, rows, meta)
    except Exception:  # noqa: BLE001 - a chart bug must never cost the user the results already written
        log.exception("could not write %s", run_dir / "report.html")


def results_csv(rows: list[ResultRow]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["kind", "dataset", "task", "category", "metric", "model", "score", "ci_low", "ci_high", "n", "n_failed", "failure_rate", "unreliable", "seconds"])
    for r in rows:
        d = r.as_dict()
        writer.writerow([r.kind, r.dataset, r.task, r.category, r.metric, r.model, d["score"], d["ci_low"], d["ci_high"], r.n, r.n_failed, round(r.failure_rate, 4), r.unreliable, r.seconds])
    return buffer.getvalue()


def results_markdown(rows: list[ResultRow], meta: dict[str, Any]) -> str:
    md = f"# evalkit results\n\nRun `{meta.get('run_id', '')}`, {meta.get('finished', '')}. Scores with 95% confidence intervals; `!` marks a result whose failure rate exceeds `max_failure_rate` or whose engine failed.\n\n"
    md += markdown_table([r for r in rows if r.kind == "dataset"])
    aggregates = [r for r in rows if r.kind == "aggregate"]
    if aggregates:
        md += "\n## Aggregates\n\n" + markdown_table(aggregates)
    failures = [r for r in rows if r.failure_reasons or r.error]
    if failures:
        md += "\n## Failures\n\n"
        for r in failures:
            reasons = ", ".join(f"{k}: {v}" for k, v in sorted(r.failure_reasons.items()))
            md += f"- {r.dataset} / {r.metric} / {r.model}: {reasons or ''}{' engine error: ' + r.error if r.error else ''}\n"
    return md


_ROW_FIELDS = {f.name for f in dataclasses.fields(ResultRow)}


def row_from_dict(data: dict[str, Any]) -> ResultRow:
    """A ResultRow from its results.json form (unknown keys from newer versions are ignored)."""
    values = {k: v for k, v in data.items() if k in _ROW_FIELDS}
    values.setdefault("failure_reasons", {})
    values.setdefault("details", {})
    return ResultRow(**values)


def load_results(run_dir: str | Path) -> tuple[list[ResultRow], dict[str, Any]]:
    """Rows (dataset rows, then aggregates) and run metadata from ``run_dir/results.json``."""
    path = Path(run_dir)
    if path.is_dir():
        path = path / "results.json"
    if not path.is_file():
        raise UserError(f"{path}: no results.json here (is {run_dir} a run directory that finished?)")
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise UserError(f"{path}: line {error.lineno}: not valid JSON: {error.msg}") from None
    if not isinstance(payload, dict) or "results" not in payload:
        raise UserError(f"{path}: not an evalkit results file (no `results` list)")
    rows = [row_from_dict({**r, "kind": "dataset"}) for r in payload.get("results") or []]
    rows += [row_from_dict({**r, "kind": "aggregate"}) for r in payload.get("aggregate") or []]
    meta = {k: v for k, v in payload.items() if k not in ("results", "aggregate")}
    return rows, meta

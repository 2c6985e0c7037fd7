"""report.html: one self-contained page per run (inline CSS and SVG, no scripts, nothing loaded from elsewhere).

Sections: the results table, a bar chart per metric with CI whiskers, scores
by audio length (and accent/gender when the data has them), the latency
distribution per model (from the records), failures by reason, the failed
samples with their messages and the worst-scoring samples (linking into
`evalkit view`), run details. The records are read once, streamed.
The page is built from results.json rows plus the records, so
``evalkit report RUN_DIR`` can rebuild it at any time.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Iterator
from html import escape
from pathlib import Path
from typing import Any

from evalkit.report.records import RecordReader
from evalkit.report.results import ResultRow
from evalkit.report.samples import SampleLists, failed_samples_section, viewer_note, worst_samples_section
from evalkit.report.svg import Point, bar_chart, histograms
from evalkit.report.tables import EVALKIT_COLUMN, cut_short, evalkit_name, fmt_shown, n_cell, partial_note, reported
from evalkit.report.usage import usage_html
from evalkit.util.atomic import write_text_atomic
from evalkit.util.redact import redact

#: group charts drawn when present in a row's details.groups, with their section titles
GROUP_TITLES = {"audio_length": "by audio length", "accent": "by accent", "gender": "by gender"}
_MAX_GROUP_VALUES = 24

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px auto; max-width: 1000px;
       color: #1d1d1f; padding: 0 16px; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 18px; margin-top: 32px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
h3 { font-size: 15px; margin: 18px 0 6px; }
.meta { color: #555; font-size: 13px; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0 12px; }
th, td { border-bottom: 1px solid #e6e6e6; padding: 4px 10px; text-align: left; }
th { background: #f5f5f7; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.unreliable td { background: #fff4e5; } .flag { color: #b45309; font-weight: 600; }
.note { color: #666; font-size: 12px; } pre { background: #f5f5f7; padding: 10px; overflow-x: auto; font-size: 12px; }
svg.chart { display: block; margin: 6px 0 18px; }
pre.error { background: none; padding: 0; margin: 0; white-space: pre-wrap; word-break: break-word; max-width: 560px; }
"""


def _table(
    headers: list[str],
    rows: Iterable[list[str]],
    numeric: frozenset[int] | set[int] = frozenset(),
    row_classes: list[str] | None = None,
) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = []
    for r, cells in enumerate(rows):
        cls = f' class="{row_classes[r]}"' if row_classes and row_classes[r] else ""
        tds = "".join(f'<td class="num">{c}</td>' if i in numeric else f"<td>{c}</td>" for i, c in enumerate(cells))
        body.append(f"<tr{cls}>{tds}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _direction(metric: str) -> bool | None:
    """True when higher is better, False when lower is, None when the metric is unknown here."""
    try:
        from evalkit.metrics.table import builtin_info, metric_infos

        # a built-in's row first: looking for installed plugins costs every report ~10 ms
        info = builtin_info(metric) or metric_infos().get(metric)
        return None if info is None else info.higher_is_better
    except Exception:
        return None


def results_section(rows: list[ResultRow]) -> str:
    dataset_rows = [r for r in rows if r.kind == "dataset"]
    aggregates = [r for r in rows if r.kind == "aggregate"]
    headers = ["dataset", "task", "metric", "model", "score", "95% CI", "n", "failed", "failure rate"]
    peer = reported(rows)
    if peer:
        headers.append(EVALKIT_COLUMN)

    def cells(r: ResultRow) -> list[str]:
        score, low, high = r.scaled()
        known = all(isinstance(v, (int, float)) and math.isfinite(v) for v in (low, high))
        ci = f"[{fmt_shown(low, r)}, {fmt_shown(high, r)}]" if known else "-"
        flag = (
            ' <span class="flag" title="failure rate above max_failure_rate, or the engine failed">!</span>'
            if r.unreliable
            else ""
        )
        if cut_short(r):  # never shown as complete: the pair stopped before its last sample
            reason = str((r.partial or {}).get("reason"))
            flag += f' <span class="flag" title="the pair stopped early: {escape(reason)}">(partial)</span>'
        shown = [
            escape(r.shown_dataset),
            escape(r.task),
            escape(r.shown_metric),
            escape(r.model),
            fmt_shown(score, r) + flag,
            ci,
            escape(n_cell(r)),
            str(r.n_failed),
            f"{r.failure_rate:.1%}",
        ]
        return [*shown, escape(evalkit_name(r))] if peer else shown

    html = "<h2>Results</h2>"
    html += (
        '<p class="note">Scores with 95% confidence intervals. <span class="flag">!</span> marks a result whose '
        "failure rate exceeds <code>max_failure_rate</code> or whose engine failed.</p>"
    )
    tools = sorted({str(r.reported_as.get("tool")) for r in rows if r.reported_as is not None})
    if tools:
        html += (
            f'<p class="note">Rows named in {escape(", ".join(tools))}\'s terms show its dataset and metric names and '
            "its scale (score and CI multiplied as it prints them); the last column names evalkit's entry and metric "
            "where they differ, and the factor.</p>"
        )
    note = partial_note(rows)
    if note:
        html += f'<p class="note">{escape(note)}</p>'
    html += _table(
        headers,
        [cells(r) for r in dataset_rows],
        {4, 5, 6, 7, 8},
        ["unreliable" if r.unreliable else "" for r in dataset_rows],
    )
    if aggregates:
        html += "<h3>Aggregates</h3>" + _table(
            headers,
            [cells(r) for r in aggregates],
            {4, 5, 6, 7, 8},
            ["unreliable" if r.unreliable else "" for r in aggregates],
        )
    return html


def _point(
    score: float | None, low: float | None, high: float | None, note: str = "", row: ResultRow | None = None
) -> Point | None:
    """A bar; with ``row`` (already on its scale), labelled as that row's table cells print it."""
    if score is None or not isinstance(score, (int, float)) or not math.isfinite(score):
        return None

    def finite(value: Any) -> float | None:
        return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None

    low, high = finite(low), finite(high)
    if low is None or high is None:
        low = high = None
    if row is None or row.reported_as is None:
        return Point(float(score), low, high, note)
    ci = "" if low is None or high is None else f"[{fmt_shown(low, row)}, {fmt_shown(high, row)}]"
    return Point(float(score), low, high, note, text=fmt_shown(score, row), ci_text=ci)


def scale_note(row: ResultRow) -> str:
    """How a chart of ``row`` says whose scale it is drawn on: the table's, so a bar reads as its row's number."""
    if row.reported_as is None:
        return ""
    tool = str(row.reported_as.get("tool") or "the peer")
    return f", ×{row.scale:g} as {tool} prints it" if row.scale != 1 else f", as {tool} prints it"


def metric_charts(rows: list[ResultRow]) -> str:
    """One chart per metric, on the scale its table rows show: datasets (and aggregates) down the side, a bar per model.

    Rows a peer's config reports on its scale (an AU-Harness config's ×100) get a chart of their own, under the
    peer's names: bars on one axis must share one scale, and each bar must read as its row in the table.
    """
    by_metric: dict[tuple[str, str, float], list[ResultRow]] = defaultdict(list)
    for r in rows:
        by_metric[(r.metric, r.shown_metric, r.scale)].append(r)
    parts = ["<h2>Scores by metric</h2>"]
    for (metric, shown, _), metric_rows in by_metric.items():
        note = scale_note(metric_rows[0])
        models = list(dict.fromkeys(r.model for r in metric_rows))
        labels = _group_labels(metric_rows)
        groups = list(dict.fromkeys(labels[r.dataset] for r in metric_rows))
        points = {}
        for r in metric_rows:
            score, low, high = r.scaled()
            point = _point(score, low, high, f"n={r.n}", r)
            if point is not None:
                points[(labels[r.dataset], r.model)] = point
        if not points:
            parts.append(f"<h3>{escape(shown + note)}</h3><p class='note'>No scored samples.</p>")
            continue
        direction = _direction(metric)
        caption = {True: " (higher is better)", False: " (lower is better)", None: ""}[direction]
        parts.append(
            bar_chart(
                groups,
                models,
                points,
                title=f"{shown}{note}{caption}",
                axis_label=f"{shown}{note}, 95% CI whiskers",
            )
        )
    return "".join(parts)


def _group_labels(rows: list[ResultRow]) -> dict[str, str]:
    """Each row's dataset as the table names it; evalkit's name where two datasets would read the same."""
    shown: dict[str, set[str]] = defaultdict(set)
    for r in rows:
        shown[r.shown_dataset].add(r.dataset)
    return {r.dataset: r.shown_dataset if len(shown[r.shown_dataset]) == 1 else r.dataset for r in rows}


def group_charts(rows: list[ResultRow]) -> str:
    """Per (dataset, metric): the score per value of a group (audio length buckets, accents, genders)."""
    parts: list[str] = []
    for group, title in GROUP_TITLES.items():
        per_engine: dict[tuple[str, str], list[ResultRow]] = defaultdict(list)
        for r in rows:
            if r.kind == "dataset" and ((r.details or {}).get("groups") or {}).get(group):
                per_engine[(r.dataset, r.metric)].append(r)
        for engine_rows in per_engine.values():
            first = engine_rows[0]
            note = scale_note(first)
            models = [r.model for r in engine_rows]
            labels: list[str] = []
            points = {}
            for r in engine_rows:
                for label, stats in r.details["groups"][group].items():
                    if label not in labels:
                        labels.append(label)
                    score, low, high = (_times(stats.get(k), r.scale) for k in ("score", "ci_low", "ci_high"))
                    point = _point(score, low, high, f"n={stats.get('n')}", r)
                    if point is not None:
                        points[(label, r.model)] = point
            if not points or len(labels) > _MAX_GROUP_VALUES:
                continue
            parts.append(
                bar_chart(
                    labels,
                    models,
                    points,
                    title=f"{first.shown_dataset} · {first.shown_metric} {title}{note}",
                    axis_label=f"{first.shown_metric}{note}",
                    label_width=180,
                    css_class=f"chart group-{group}",
                )
            )
    if not parts:
        return (
            "<h2>Scores by audio length</h2><p class='note'>No per-group results: no dataset here has audio with "
            "known durations or speaker groups (text and image sets have none).</p>"
        )
    return "<h2>Scores by audio length and speaker groups</h2>" + "".join(parts)


def _times(value: Any, factor: float) -> Any:
    """A group's figure on its row's shown scale (what is not a number stays as it is, for :func:`_point`)."""
    return value * factor if isinstance(value, (int, float)) and not isinstance(value, bool) else value


def iter_records(records_dir: Path) -> Iterator[dict[str, Any]]:
    """Every record line of a run, streamed (a record file can be large); lines that do not decode are skipped."""
    yield from RecordReader(records_dir)


def quantile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return math.nan
    pos = (len(sorted_values) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


#: the latency kept for a sample the response store answered (no request was sent)
_FROM_STORE = -1.0


class LatencyCollector:
    """Latency per (model, dataset, sample), fed one record at a time (the report reads the records once).

    Metrics on one dataset share their requests, so each (dataset, sample) counts
    once per model however many metric records it has. Samples are keyed by the
    hash of their id within a (model, dataset) (a collision among a million ids
    is about 1 in 30 million), so a run of millions of records costs tens of MB,
    not a tuple of three strings per record.
    """

    def __init__(self) -> None:
        # (model, dataset) -> hash(sample id) -> its latency when an endpoint answered it in any metric's record,
        # _FROM_STORE when the store answered it, NaN when it failed before a request
        self._per_sample: dict[tuple[str, str], dict[int, float]] = {}

    def add(self, record: dict[str, Any]) -> None:
        group = (str(record.get("model", "?")), str(record.get("dataset", "")))
        per_sample = self._per_sample.get(group)
        if per_sample is None:
            per_sample = self._per_sample[group] = {}
        key = hash(str(record.get("sample_id", "")))
        latency = record.get("latency")
        answered = (
            not record.get("cached") and isinstance(latency, (int, float)) and latency > 0 and math.isfinite(latency)
        )
        known = per_sample.get(key)
        if answered and (known is None or known == _FROM_STORE):
            per_sample[key] = float(latency)  # type: ignore[arg-type]
        elif known is None:
            # from the store, or no latency at all (failed before a request): neither answered nor stored
            per_sample[key] = _FROM_STORE if record.get("cached") else math.nan

    def result(self) -> tuple[dict[str, list[float]], dict[str, int]]:
        latencies: dict[str, list[float]] = defaultdict(list)
        cached: dict[str, int] = defaultdict(int)
        for (model, _), per_sample in self._per_sample.items():
            for value in per_sample.values():
                if value == _FROM_STORE:
                    cached[model] += 1
                elif not math.isnan(value):
                    latencies[model].append(value)
        return dict(latencies), dict(cached)


def latencies_by_model(records_dir: Path) -> tuple[dict[str, list[float]], dict[str, int]]:
    """Latency (s) per sample answered by an endpoint, per model; and how many samples the store answered."""
    collector = LatencyCollector()
    for record in iter_records(records_dir):
        collector.add(record)
    return collector.result()


def latency_section(
    records_dir: Path, meta: dict[str, Any] | None = None, collected: LatencyCollector | None = None
) -> str:
    latencies, cached = collected.result() if collected is not None else latencies_by_model(records_dir)
    requests = (meta or {}).get("requests") or {}
    html = "<h2>Latency per model</h2>"
    if not latencies:
        note = " All answers came from the response store." if cached else ""
        return html + f"<p class='note'>No request latencies recorded.{note}</p>"
    rows = []
    for model, values in latencies.items():
        values.sort()
        sent = requests.get(model, {}).get("sent")
        rows.append(
            [
                escape(model),
                str(len(values)),
                "" if sent is None else str(sent),
                *(f"{quantile(values, q):.3f}" for q in (0.5, 0.9, 0.99)),
                f"{sum(values) / len(values):.3f}",
                f"{values[-1]:.3f}",
                str(cached.get(model, 0)),
            ]
        )
    html += _table(
        [
            "model",
            "samples answered",
            "requests sent",
            "p50 (s)",
            "p90 (s)",
            "p99 (s)",
            "mean (s)",
            "max (s)",
            "samples from store",
        ],
        rows,
        {1, 2, 3, 4, 5, 6, 7, 8},
    )
    html += (
        '<p class="note">Latency of a sample\'s answer as the engine saw it (all attempts and chunks), one per '
        "dataset sample and model however many metrics score it; answers from the response store excluded. "
        "Requests sent count HTTP requests, retries and the chunks of long audio included.</p>"
    )
    html += histograms(latencies, title="Latency distribution", unit="s")
    return html


def failure_counts(rows: list[ResultRow]) -> dict[tuple[str, str], int]:
    """(reason, model) -> failed samples, each dataset counted once per model.

    Metrics on one dataset share their requests, so a failed request shows up
    in every metric's row; the largest count among a dataset's metrics is kept.
    """
    per_dataset: dict[tuple[str, str, str], int] = defaultdict(int)
    for r in rows:
        if r.kind != "dataset":
            continue
        for reason, count in (r.failure_reasons or {}).items():
            key = (reason, r.model, r.dataset)
            per_dataset[key] = max(per_dataset[key], int(count))
    counts: dict[tuple[str, str], int] = defaultdict(int)
    for (reason, model, _), count in per_dataset.items():
        counts[(reason, model)] += count
    return dict(counts)


def failure_section(rows: list[ResultRow]) -> str:
    counts = failure_counts(rows)
    errors = [r for r in rows if r.error]
    html = "<h2>Failures by reason</h2>"
    if not counts and not errors:
        return html + "<p class='note'>No failures: every sample got an answer and a score.</p>"
    if counts:
        reasons = sorted({k[0] for k in counts}, key=lambda x: -sum(v for (r, _), v in counts.items() if r == x))
        models = list(dict.fromkeys(m for _, m in counts))
        points = {key: Point(float(v)) for key, v in counts.items()}
        html += bar_chart(
            reasons,
            models,
            points,
            title="Failed samples by reason",
            axis_label="samples (a dataset counted once per model)",
            label_width=180,
            css_class="chart failures",
        )
        detail = [
            [
                escape(r.shown_dataset),
                escape(r.shown_metric),
                escape(r.model),
                escape(", ".join(f"{k}: {v}" for k, v in sorted(r.failure_reasons.items()))),
            ]
            for r in rows
            if r.kind == "dataset" and r.failure_reasons
        ]
        html += _table(["dataset", "metric", "model", "reasons"], detail)
    if errors:
        html += "<h3>Engine errors</h3>" + _table(
            ["dataset", "metric", "model", "error"],
            [[escape(r.dataset), escape(r.metric), escape(r.model), escape(r.error or "")] for r in errors],
        )
    return html


def details_section(meta: dict[str, Any]) -> str:
    html = "<h2>Run details</h2>"
    requests = meta.get("requests") or {}
    if requests:
        rows = [
            [
                escape(name),
                *(str(info.get(k, "")) for k in ("sent", "store_hits", "deduplicated", "retried", "rate_limited")),
                escape(json.dumps(info.get("replicas", {}))),
            ]
            for name, info in requests.items()
        ]
        html += _table(
            ["model", "sent", "store hits", "de-duplicated", "retried", "rate limited", "answers per replica"],
            rows,
            {1, 2, 3, 4, 5},
        )
    versions = meta.get("versions") or {}
    if versions:
        html += '<p class="meta">' + escape(", ".join(f"{k} {v}" for k, v in versions.items())) + "</p>"
    config = meta.get("config")
    if config:
        html += (
            "<details><summary>Configuration (secrets masked)</summary><pre>"
            + escape(json.dumps(redact(config), indent=2))
            + "</pre></details>"
        )
    return html


def render_html(rows: list[ResultRow], meta: dict[str, Any], records_dir: Path | None = None) -> str:
    run_id = str(meta.get("run_id", ""))
    header = f"<h1>evalkit report</h1><p class='meta'>Run <code>{escape(run_id)}</code>"
    if meta.get("finished"):
        header += f", finished {escape(str(meta['finished']))}"
    if meta.get("seconds") is not None:
        header += f", {escape(str(meta['seconds']))} s"
    if meta.get("config_file"):
        header += f", config <code>{escape(str(meta['config_file']))}</code>"
    header += "</p>"
    body = header + results_section(rows) + usage_html(rows, meta) + metric_charts(rows) + group_charts(rows)
    swept = [row.as_dict() for row in rows if row.kind == "dataset" and "robustness" in (row.details or {})]
    if swept:  # a run with corruption variants: the drawing code loads only then
        from evalkit.report.robustness import robustness_section

        body += robustness_section(swept)
    if records_dir is not None and not records_dir.is_dir():
        body += latency_section(records_dir, meta) + failure_section(rows)
        body += f"<h2>Samples</h2><p class='note'>No records folder at <code>{escape(str(records_dir))}</code>.</p>"
    elif records_dir is not None:
        latencies, lists, reader = _scan_records(records_dir, rows)
        run_folder = records_dir.parent
        body += latency_section(records_dir, meta, latencies)
        body += failure_section(rows)
        body += failed_samples_section(lists, run_folder.name, viewer_note(str(run_folder)))
        body += worst_samples_section(lists, run_folder.name)
        body += "".join(f"<p class='note'>{escape(note)}</p>" for note in reader.notes())
    else:
        body += failure_section(rows)
    body += details_section(meta)
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>evalkit report {escape(run_id)}</title><style>{_CSS}</style></head><body>{body}</body></html>\n"
    )


def _scan_records(records_dir: Path, rows: list[ResultRow]) -> tuple[LatencyCollector, SampleLists, RecordReader]:
    """One streamed pass over the records for every section that reads them (latencies, failed and worst samples)."""
    metrics = dict.fromkeys(r.metric for r in rows)
    lists = SampleLists(directions={metric: _direction(metric) for metric in metrics})
    latencies = LatencyCollector()
    reader = RecordReader(records_dir)
    for record in reader:
        latencies.add(record)
        metric = record.get("metric")
        if isinstance(metric, str) and metric not in lists.directions:
            lists.directions[metric] = _direction(metric)
        lists.add(record)
    return latencies, lists, reader


def write_html(run_dir: Path, rows: list[ResultRow], meta: dict[str, Any]) -> Path:
    run_dir = Path(run_dir)
    path = run_dir / "report.html"
    # atomically, like results.json: a symlink planted at report.html is replaced, never followed out of the run folder
    write_text_atomic(path, render_html(rows, meta, run_dir / "records"))
    return path

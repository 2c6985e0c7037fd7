"""Text views of result rows: the score cells, the console/Markdown table, results.csv and results.md."""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Iterable
from typing import Any

from evalkit.report.results import ResultRow
from evalkit.report.usage import usage_lines

#: what makes a spreadsheet read a cell as a formula (OWASP "CSV Injection"): = + - @, tab, carriage return
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def spreadsheet_safe(value: Any) -> Any:
    """A CSV cell a spreadsheet shows as text, never runs: a string that starts like a formula gets a leading ``'``.

    Only strings are changed, and a string that is a plain number (``-0.5``) or evalkit's "none" mark ``-``
    stays as it is: evalkit's numbers must stay numbers, and neither is a formula. A NUL in a string (a hostile
    dataset name) is written as the four characters ``\\x00``: Python 3.10's csv module cannot write the byte at
    all, and no spreadsheet shows it.
    """
    if not isinstance(value, str):
        return value
    value = value.replace("\x00", "\\x00")
    if value.startswith(_FORMULA_START) and value not in ("-", "+") and not _NUMBER.fullmatch(value):
        return "'" + value
    return value


def safe_csv_row(cells: Iterable[Any]) -> list[Any]:
    """:func:`spreadsheet_safe` applied to every cell of a row: how every CSV evalkit writes gets its cells."""
    return [spreadsheet_safe(cell) for cell in cells]


def fmt(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.2f}" if abs(value) >= 100 else f"{value:.4f}"


def fmt_shown(value: float | None, row: ResultRow) -> str:
    """A score or CI bound as the row is shown: on a peer's scale with its two decimals, else :func:`fmt`."""
    if row.reported_as is None or value is None or (isinstance(value, float) and math.isnan(value)):
        return fmt(value)
    return f"{value:.2f}"


def reported(rows: Iterable[ResultRow]) -> bool:
    """Whether any row is shown as a peer reports it (then the tables name evalkit's entry in a column too)."""
    return any(r.reported_as is not None for r in rows)


#: after an aggregate's name in a table: an aggregate of one dataset would otherwise read as its pair's row again
AGGREGATE_MARK = " (aggregate)"


def n_cell(row: ResultRow) -> str:
    """The ``n`` cell: the count, and for a row that stopped early why, with the half-width it reached."""
    partial = row.partial
    if not partial:
        return str(row.n)
    reason = str(partial.get("reason") or "partial")
    half = partial.get("half_width")
    if reason == "stopped_at_ci" and isinstance(half, (int, float)):
        return f"{row.n} (stopped at ±{fmt_shown(half * row.scale, row)})"
    return f"{row.n} (partial: {reason})"


def cut_short(row: ResultRow) -> bool:
    """Whether the row's score is over fewer samples than asked for, not to the precision asked (the budget)."""
    return bool(row.partial) and (row.partial or {}).get("reason") != "stopped_at_ci"


def partial_note(rows: Iterable[ResultRow]) -> str | None:
    """One sentence under a table with rows that stopped early (None when every row was asked in full)."""
    stopped = [r for r in rows if r.partial]
    if not stopped:
        return None
    return (
        f"{len(stopped)} result{'s' * (len(stopped) != 1)} stopped early: the score is over the n samples asked "
        "(a seeded random draw, stop_at_ci) or answered before the run stopped, not the whole dataset; "
        "results.json's `partial` says why and how far each went."
    )


def table_rows(rows: list[ResultRow]) -> list[list[str]]:
    """The table's cells: a row a peer reports shows the peer's names and scale, its CI on the same scale."""
    out = []
    peer = reported(rows)
    for r in rows:
        score, low, high = r.scaled()
        known = all(v is not None and not (isinstance(v, float) and math.isnan(v)) for v in (low, high))
        ci = f"[{fmt_shown(low, r)}, {fmt_shown(high, r)}]" if known else "-"
        flag = (" !" if r.unreliable else "") + (" (partial)" if cut_short(r) else "")
        dataset = r.shown_dataset + AGGREGATE_MARK if r.kind == "aggregate" else r.shown_dataset
        shown = "error" if r.error and score is None else fmt_shown(score, r)  # the reason is printed below
        cells = [dataset, r.shown_metric, r.model, shown + flag, ci, n_cell(r), str(r.n_failed)]
        if peer:
            cells.append(evalkit_name(r))
        out.append(cells)
    return out


def evalkit_name(row: ResultRow) -> str:
    """evalkit's entry and metric behind a peer's names (and the factor), blank where they are the same."""
    if row.reported_as is None:
        return ""
    same = row.shown_dataset == row.dataset and row.shown_metric == row.metric
    factor = f" x{row.scale:g}" if row.scale != 1 else ""
    return ("" if same else f"{row.dataset} / {row.metric}") + factor


HEADERS = ["dataset", "metric", "model", "score", "95% CI", "n", "failed"]
#: the last column of a table whose rows a peer reports: evalkit's entry and metric, and the scale factor
EVALKIT_COLUMN = "evalkit entry / metric, scale"


def headers(rows: Iterable[ResultRow]) -> list[str]:
    """The table's columns: evalkit's, plus evalkit's names when a peer's names are shown."""
    return [*HEADERS, EVALKIT_COLUMN] if reported(rows) else list(HEADERS)


def markdown_table(rows: list[ResultRow]) -> str:
    columns = headers(rows)
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for cells in table_rows(rows):
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def results_csv(rows: list[ResultRow]) -> str:
    peer = reported(rows)
    stopped = any(r.partial for r in rows)
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(
        [
            "kind",
            "dataset",
            "task",
            "category",
            "metric",
            "model",
            "score",
            "ci_low",
            "ci_high",
            "n",
            "n_failed",
            "failure_rate",
            "unreliable",
            "seconds",
            *(_REPORTED_COLUMNS if peer else ()),
            *(_PARTIAL_COLUMNS if stopped else ()),
        ]
    )
    for r in rows:
        d = r.as_dict()
        extra = _reported_cells(r) if peer else []
        if stopped:
            extra += [(r.partial or {}).get("reason", ""), (r.partial or {}).get("half_width", "")]
        writer.writerow(
            safe_csv_row(
                [
                    r.kind,
                    r.dataset,
                    r.task,
                    r.category,
                    r.metric,
                    r.model,
                    d["score"],
                    d["ci_low"],
                    d["ci_high"],
                    r.n,
                    r.n_failed,
                    round(r.failure_rate, 4),
                    r.unreliable,
                    r.seconds,
                    *extra,
                ]
            )
        )
    return buffer.getvalue()


#: results.csv's columns for a row that stopped early (present only when some row did)
_PARTIAL_COLUMNS = ("partial", "partial_half_width")
#: results.csv's columns for a peer's view of each row (present only when some row has one)
_REPORTED_COLUMNS = ("reported_as", "reported_dataset", "reported_metric", "reported_score", "reported_ci_low",
                     "reported_ci_high", "reported_scale")  # fmt: skip


def _reported_cells(row: ResultRow) -> list[Any]:
    if row.reported_as is None:
        return [""] * len(_REPORTED_COLUMNS)
    reported = row.as_dict()["reported_as"]
    return [reported.get("tool"), row.shown_dataset, row.shown_metric, reported.get("score"),
            reported.get("ci_low"), reported.get("ci_high"), row.scale]  # fmt: skip


def results_markdown(rows: list[ResultRow], meta: dict[str, Any]) -> str:
    md = (
        f"# evalkit results\n\nRun `{meta.get('run_id', '')}`, {meta.get('finished', '')}. Scores with 95% "
        "confidence intervals; `!` marks a result whose failure rate exceeds `max_failure_rate` or whose engine "
        "failed.\n\n"
    )
    tools = sorted({str(r.reported_as.get("tool")) for r in rows if r.reported_as is not None})
    if tools:
        md += (
            f"Rows of {', '.join(tools)}'s names show its dataset and metric names and its scale (scores and CIs "
            "multiplied as it prints them, e.g. x100); the last column names evalkit's entry and metric where they "
            "differ, and the factor.\n\n"
        )
    md += markdown_table([r for r in rows if r.kind == "dataset"])
    note = partial_note(rows)
    if note:
        md += f"\n{note}\n"
    aggregates = [r for r in rows if r.kind == "aggregate"]
    if aggregates:
        md += "\n## Aggregates\n\n" + markdown_table(aggregates)
    usage = usage_lines(meta)
    if usage:
        md += "\n## Usage\n\n" + "".join(f"- {_md_text(line)}\n" for line in usage)
    failures = [r for r in rows if r.failure_reasons or r.error]
    if failures:
        md += "\n## Failures\n\n"
        for r in failures:
            reasons = ", ".join(f"{k}: {v}" for k, v in sorted(r.failure_reasons.items()))
            md += (
                f"- {r.dataset} / {r.metric} / {r.model}: "
                f"{reasons or ''}{' engine error: ' + r.error if r.error else ''}\n"
            )
    return md


def _md_text(text: str) -> str:
    """A line of text as Markdown shows it literally (a model name from a config is not markup)."""
    return re.sub(r"([\\`*_\[\]<>|#])", r"\\\1", text)

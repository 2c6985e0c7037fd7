"""Text views of result rows: the score cells, the console/Markdown table, results.csv and results.md."""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Iterable
from typing import Any

from evalkit.report.results import ResultRow

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


def results_csv(rows: list[ResultRow]) -> str:
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
        ]
    )
    for r in rows:
        d = r.as_dict()
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
                ]
            )
        )
    return buffer.getvalue()


def results_markdown(rows: list[ResultRow], meta: dict[str, Any]) -> str:
    md = (
        f"# evalkit results\n\nRun `{meta.get('run_id', '')}`, {meta.get('finished', '')}. Scores with 95% "
        "confidence intervals; `!` marks a result whose failure rate exceeds `max_failure_rate` or whose engine "
        "failed.\n\n"
    )
    md += markdown_table([r for r in rows if r.kind == "dataset"])
    aggregates = [r for r in rows if r.kind == "aggregate"]
    if aggregates:
        md += "\n## Aggregates\n\n" + markdown_table(aggregates)
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

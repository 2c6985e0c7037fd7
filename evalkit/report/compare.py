"""`evalkit report RUN_A RUN_B`: two runs side by side, per dataset x metric x model.

A difference is shown with whether the two 95% CIs overlap. Overlapping
intervals do not prove that two scores are equal, but non-overlapping ones
are a conservative sign of a real difference, which is what a reader
scanning a regression table needs first.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass
from typing import Any

from evalkit.report.results import ResultRow
from evalkit.report.tables import fmt, safe_csv_row


@dataclass
class Comparison:
    dataset: str
    metric: str
    model: str
    a: ResultRow | None
    b: ResultRow | None

    @property
    def diff(self) -> float | None:
        if self.a is None or self.b is None or self.a.score is None or self.b.score is None:
            return None
        return self.b.score - self.a.score

    @property
    def overlap(self) -> bool | None:
        """True when the CIs overlap, False when they are disjoint, None when either is missing."""
        if self.a is None or self.b is None:
            return None
        a_low, a_high, b_low, b_high = self.a.ci_low, self.a.ci_high, self.b.ci_low, self.b.ci_high
        if a_low is None or a_high is None or b_low is None or b_high is None:
            return None
        if not all(math.isfinite(v) for v in (a_low, a_high, b_low, b_high)):
            return None
        return not (a_high < b_low or b_high < a_low)

    def verdict(self, higher_is_better: bool | None) -> str:
        """'better' / 'worse' (B against A) when the CIs are disjoint, 'same' when they overlap."""
        if self.a is None:
            return "only in B"
        if self.b is None:
            return "only in A"
        diff, overlap = self.diff, self.overlap
        if diff is None or overlap is None:
            return "-"
        if overlap:
            return "within CI"
        if higher_is_better is None:
            return "differs"
        return "better" if (diff > 0) == higher_is_better else "worse"

    def as_dict(self, higher_is_better: bool | None) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "metric": self.metric,
            "model": self.model,
            "score_a": None if self.a is None else self.a.score,
            "ci_a": None if self.a is None else [self.a.ci_low, self.a.ci_high],
            "n_a": None if self.a is None else self.a.n,
            "score_b": None if self.b is None else self.b.score,
            "ci_b": None if self.b is None else [self.b.ci_low, self.b.ci_high],
            "n_b": None if self.b is None else self.b.n,
            "diff": self.diff,
            "ci_overlap": self.overlap,
            "verdict": self.verdict(higher_is_better),
        }


def compare_rows(rows_a: list[ResultRow], rows_b: list[ResultRow]) -> list[Comparison]:
    """Rows matched on (dataset, metric, model); rows present in one run only are kept, marked as such."""
    index_a = {(r.dataset, r.metric, r.model): r for r in rows_a}
    index_b = {(r.dataset, r.metric, r.model): r for r in rows_b}
    keys = list(dict.fromkeys([*index_a, *index_b]))
    return [Comparison(d, m, model, index_a.get((d, m, model)), index_b.get((d, m, model))) for d, m, model in keys]


def _directions(comparisons: list[Comparison]) -> dict[str, bool | None]:
    try:
        from evalkit.metrics.table import metric_infos

        infos = metric_infos()
    except Exception:
        infos = {}
    return {c.metric: (infos[c.metric].higher_is_better if c.metric in infos else None) for c in comparisons}


HEADERS = ["dataset", "metric", "model", "A", "A 95% CI", "B", "B 95% CI", "B − A", "CIs overlap", "verdict"]


def _cells(c: Comparison, direction: bool | None) -> list[str]:
    def ci(r: ResultRow | None) -> str:
        return "-" if r is None or r.ci_low is None else f"[{fmt(r.ci_low)}, {fmt(r.ci_high)}]"

    diff = c.diff
    overlap = {True: "yes", False: "no", None: "-"}[c.overlap]
    return [
        c.dataset,
        c.metric,
        c.model,
        fmt(c.a.score) if c.a else "-",
        ci(c.a),
        fmt(c.b.score) if c.b else "-",
        ci(c.b),
        "-" if diff is None else f"{diff:+.4f}",
        overlap,
        c.verdict(direction),
    ]


def render_comparison(comparisons: list[Comparison], fmt_name: str, label_a: str, label_b: str) -> str:
    directions = _directions(comparisons)
    if fmt_name == "json":
        return (
            json.dumps(
                {"a": label_a, "b": label_b, "rows": [c.as_dict(directions[c.metric]) for c in comparisons]}, indent=2
            )
            + "\n"
        )
    rows = [_cells(c, directions[c.metric]) for c in comparisons]
    if fmt_name == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(HEADERS)
        writer.writerows(safe_csv_row(r) for r in rows)  # a name like "=cmd" shows as text in a spreadsheet
        return buffer.getvalue()
    if fmt_name == "md":
        lines = [f"A = `{label_a}`, B = `{label_b}`\n", "| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
        lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in r) + " |" for r in rows]
        return "\n".join(lines) + "\n"
    raise ValueError(fmt_name)


def print_comparison(comparisons: list[Comparison], label_a: str, label_b: str, console: Any = None) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = console or Console(width=max(140, Console().width), highlight=False)
    directions = _directions(comparisons)
    table = Table(title=f"A = {label_a}\nB = {label_b}", title_justify="left")
    for header in HEADERS:
        table.add_column(header, justify="right" if header in ("A", "B", "B − A") else "left")
    styles = {"better": "green", "worse": "red"}
    for c in comparisons:
        cells = _cells(c, directions[c.metric])
        table.add_row(*(Text(cell) for cell in cells[:-1]), Text(cells[-1], style=styles.get(cells[-1], "")))
    console.print(table)
    disjoint = sum(1 for c in comparisons if c.overlap is False)
    console.print(f"{len(comparisons)} rows compared; {disjoint} with non-overlapping 95% CIs.")

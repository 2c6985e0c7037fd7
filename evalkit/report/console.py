"""The results table printed at the end of a run and by `evalkit report`."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from evalkit.report.results import ResultRow
from evalkit.report.tables import HEADERS, table_rows


def _console() -> Console:
    return Console(width=max(120, Console().width), highlight=False)


def print_table(rows: list[ResultRow], title: str, console: Console | None = None) -> None:
    console = console or _console()
    table = Table(title=title)
    for header in HEADERS:
        table.add_column(header, justify="right" if header in ("score", "n", "failed") else "left")
    for cells in table_rows(rows):
        table.add_row(*(Text(c) for c in cells))
    console.print(table)


def print_results(outcome: Any, console: Console | None = None) -> None:
    """The table of a finished run (a RunOutcome), engine errors, and where everything was written."""
    console = console or _console()
    print_table(outcome.rows, f"evalkit results — {outcome.run_dir}", console)
    for engine in outcome.engines:
        if engine.error:
            console.print(Text.assemble((f"engine {engine.spec.id} failed:", "red"), f" {engine.error}"))
    console.print(
        f"{outcome.requests_sent} requests sent, {outcome.store_hits} answered by the response store, "
        f"{outcome.seconds:.1f} s. "
        f"Records: {outcome.run_dir / 'records'}  Report: {outcome.run_dir / 'report.html'}"
    )

"""The table printed at the end of a run."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from evalkit.report.results import HEADERS, table_rows


def print_results(outcome) -> None:  # type: ignore[no-untyped-def]
    console = Console(width=max(120, Console().width))
    table = Table(title=f"evalkit results — {outcome.run_dir}")
    for header in HEADERS:
        table.add_column(header, justify="right" if header in ("score", "n", "failed") else "left")
    for cells in table_rows(outcome.rows):
        table.add_row(*cells)
    console.print(table)
    for engine in outcome.engines:
        if engine.error:
            console.print(f"[red]engine {engine.spec.id} failed:[/red] {engine.error}")
    console.print(f"{outcome.requests_sent} requests sent, {outcome.store_hits} answered by the response store, {outcome.seconds:.1f} s. Records: {outcome.run_dir / 'records'}")

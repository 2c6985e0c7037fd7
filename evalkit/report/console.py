"""The results table printed at the end of a run and by `evalkit report`, with the failures behind it.

rich draws it; written where rich adds no colour (a file, a pipe), the same text is drawn without importing
rich when :mod:`evalkit.report.plain_console` can draw all of it exactly.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from evalkit.report import plain_console
from evalkit.report.results import ResultRow, failures_by_model
from evalkit.report.tables import headers, partial_note, table_rows
from evalkit.report.usage import usage_lines

if TYPE_CHECKING:
    from rich.console import Console

#: the columns whose cells are right-justified
_RIGHT = ("score", "n", "failed")

#: longest example message shown per failure reason (the records hold the whole text)
_EXAMPLE_CHARS = 240
_FAILURES_TITLE = "Failed samples by model and reason (one example each; every message is in the records):"
_USAGE_TITLE = "Usage (tokens as the servers reported them; cost from each model's price):"


def _console() -> Console:
    from rich.console import Console

    return Console(width=max(plain_console.MIN_WIDTH, Console().width), highlight=False)


def print_table(rows: list[ResultRow], title: str, console: Console | None = None) -> None:
    if console is None and plain_console.plain_stdout():
        text = _plain_table(rows, title)
        if text is not None:
            sys.stdout.write(text)
            return
    from rich.table import Table
    from rich.text import Text

    console = console or _console()
    table = Table(title=title)
    for header in headers(rows):
        table.add_column(header, justify="right" if header in _RIGHT else "left")
    for cells in table_rows(rows):
        table.add_row(*(Text(c) for c in cells))
    console.print(table)
    note = partial_note(rows)
    if note:
        console.print(Text(note), soft_wrap=True)


def _plain_table(rows: list[ResultRow], title: str) -> str | None:
    """:func:`print_table`'s output without rich, or None when rich must draw it."""
    text = plain_console.table_text(title, headers(rows), table_rows(rows), _RIGHT)
    note = partial_note(rows)
    under = plain_console.soft_line(note) if note else ""
    return None if text is None or under is None else text + under


def _plain_block(title: str, lines: list[str]) -> str | None:
    """:func:`_print_block`'s output without rich, or None when rich must print it."""
    if not lines:
        return ""
    parts = [plain_console.block_title(title), *(plain_console.soft_line("  " + line) for line in lines)]
    return None if None in parts else "".join(parts)  # type: ignore[arg-type]


def _plain_results(outcome: Any) -> str | None:
    """:func:`print_results`'s output without rich, or None when any part of it must be rich's."""
    if any(engine.error for engine in outcome.engines):
        return None  # printed wrapped at the console's width, which only rich knows
    parts = [
        _plain_table(outcome.rows, f"evalkit results — {outcome.run_dir}"),
        _plain_block(_FAILURES_TITLE, failure_lines(outcome.rows)),
        plain_console.soft_line(summary_line(outcome)),
        _plain_block(_USAGE_TITLE, usage_lines(getattr(outcome, "meta", None) or {})),
        plain_console.soft_line(f"Records: {outcome.run_dir / 'records'}  Report: {outcome.run_dir / 'report.html'}"),
    ]
    return None if any(part is None for part in parts) else "".join(parts)  # type: ignore[arg-type]


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _EXAMPLE_CHARS else text[: _EXAMPLE_CHARS - 1] + "…"


def failure_lines(rows: list[ResultRow]) -> list[str]:
    """``model: N x reason: example`` per model and reason, most frequent first (a dataset counted once)."""
    lines = []
    for model, reasons in failures_by_model(rows).items():
        for reason, count, example in reasons:
            lines.append(f"{model}: {count} x {reason}" + (f": {_one_line(example)}" if example else ""))
    return lines


def print_failures(rows: list[ResultRow], console: Console | None = None) -> None:
    """The failure reasons behind the table's `failed` column, with one example message each."""
    _print_block(_FAILURES_TITLE, failure_lines(rows), console)


def print_usage(meta: dict[str, Any], console: Console | None = None) -> None:
    """The table's footer: tokens and cost per model, judge and run, the budget, and whether the results are partial."""
    _print_block(_USAGE_TITLE, usage_lines(meta), console)


def _print_block(title: str, lines: list[str], console: Console | None) -> None:
    """A footer under the table: its title, then its lines indented and wrapped as the terminal allows."""
    if not lines:
        return
    if console is None and plain_console.plain_stdout():
        text = _plain_block(title, lines)
        if text is not None:
            sys.stdout.write(text)
            return
    from rich.text import Text

    console = console or _console()
    console.print(title)
    for line in lines:
        console.print(Text("  " + line), soft_wrap=True)


def summary_line(outcome: Any) -> str:
    """What the run did, each number with its unit: requests, stored answers, samples scored."""
    dataset_rows = [r for r in outcome.rows if r.kind == "dataset"]
    scored = sum(r.n for r in dataset_rows)
    failed = sum(r.n_failed for r in dataset_rows)
    pairs = len({(r.dataset, r.metric) for r in dataset_rows})
    models = len({r.model for r in dataset_rows})
    reused = getattr(outcome, "reused", 0)
    text = f"{outcome.requests_sent} requests sent, {outcome.store_hits} answers from the response store"
    if reused:
        text += f", {reused} requests shared by two pairs of this run (asked once)"
    changed = getattr(outcome, "changed", 0)
    if changed:
        # a stored answer whose bytes no longer match its checksum is never scored: it was asked again
        text += f", {changed} changed answer{'s' * (changed != 1)} in the response store re-asked"
    damaged = getattr(outcome, "damaged_store", None)
    if damaged:
        text += f", damaged response store {damaged[0]} left untouched (answers kept in {damaged[1]})"
    text += (
        f"; {scored} samples scored and {failed} failed over {pairs} dataset-metric pair{'s' * (pairs != 1)} x "
        f"{models} model{'s' * (models != 1)}; {outcome.seconds:.1f} s."
    )
    return text


def print_results(outcome: Any, console: Console | None = None) -> None:
    """The table of a finished run (a RunOutcome), its failures, engine errors, and where everything was written."""
    if console is None and plain_console.plain_stdout():
        text = _plain_results(outcome)
        if text is not None:
            sys.stdout.write(text)
            return
    from rich.text import Text

    console = console or _console()
    print_table(outcome.rows, f"evalkit results — {outcome.run_dir}", console)
    print_failures(outcome.rows, console)
    for engine in outcome.engines:
        if engine.error:
            console.print(Text.assemble((f"engine {engine.spec.id} failed:", "red"), f" {engine.error}"))
    console.print(Text(summary_line(outcome)), soft_wrap=True)
    print_usage(getattr(outcome, "meta", None) or {}, console)
    console.print(
        Text(f"Records: {outcome.run_dir / 'records'}  Report: {outcome.run_dir / 'report.html'}"), soft_wrap=True
    )

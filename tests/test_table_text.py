"""`evalkit list` tables: drawn without rich's layout engine, looking as rich drew them, within the screen's width."""

from __future__ import annotations

import io
from typing import Any

import pytest

from evalkit.cli import listing
from evalkit.cli.table_text import render_table, text_width

EVERYTHING = listing.Filters(category=None, task=None, metric=None, language=None, modality=None)


def _rich(kind: str, rows: list[dict[str, Any]], width: int) -> str:
    """The table as `evalkit list` drew it with rich before (kept here as the reference for its look)."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(title=f"{len(rows)} {kind}", title_justify="left", show_lines=False)
    for column in listing.TABLE_COLUMNS[kind]:
        table.add_column(column, overflow="fold", no_wrap=column in listing._NO_WRAP)
    for row in rows:
        table.add_row(*(Text(listing._cell(row.get(c))) for c in listing.TABLE_COLUMNS[kind]))
    console = Console(width=width, record=True, color_system=None, highlight=False, file=io.StringIO())
    console.print(table)
    return "\n".join(line.rstrip() for line in console.export_text().splitlines()) + "\n"


@pytest.mark.parametrize("kind", ["datasets", "metrics", "tasks"])
def test_the_catalogue_listings_are_drawn_as_rich_drew_them(kind: str) -> None:
    rows = listing.ROW_FUNCTIONS[kind](EVERYTHING)
    assert listing.render(kind, rows, "table", width=160) == _rich(kind, rows, 160)


@pytest.mark.parametrize("width", [80, 100, 120])
def test_a_narrow_screen_gets_wrapped_cells_and_loses_no_text(width: int) -> None:
    rows = listing.task_rows(EVERYTHING)
    out = listing.render("tasks", rows, "table", width=width)
    lines = out.splitlines()
    assert lines[0] == f"{len(rows)} tasks"
    assert max(text_width(line) for line in lines) <= width
    # each description comes back word for word when its column's pieces are read in order
    column = listing.TABLE_COLUMNS["tasks"].index("description")
    pieces = "".join(line.split("│")[column + 1].strip() + " " for line in lines if line.startswith("│"))
    for row in rows:
        assert "".join(row["description"].split()) in "".join(pieces.split())


def test_wide_characters_take_two_cells_and_a_long_word_is_folded() -> None:
    assert text_width("日本語") == 6
    assert text_width("é") == 1
    out = render_table("t", ["a", "b"], [["日本語", "x" * 30]], [False, True], 24)
    lines = out.splitlines()
    assert max(text_width(line) for line in lines) <= 24
    assert all(text_width(line) == text_width(lines[1]) for line in lines[1:])  # every line as wide as the box
    assert "".join(line.split("│")[2].strip() for line in lines if line.startswith("│")) == "x" * 30

"""A boxed text table for `evalkit list`, drawn in rich's default style without rich's layout engine.

rich measures every cell several times (minimum and maximum widths, then the
wrap), which took 85% of `evalkit list datasets` for the catalogue's six
hundred rows. Listing cells are plain text on one line, so a column's width is
its widest cell; when the table is wider than the screen, the widest columns
that may wrap give up width first, and their cells wrap at spaces (folding a
longer word), as rich's ``overflow="fold"`` does. The box characters are
rich's ``HEAVY_HEAD``: the output looks as it did.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

from evalkit.report.plain_console import rule

#: the narrowest a wrapping column is made before the table is left wider than the screen
_MIN_WIDTH = 6


def text_width(text: str) -> int:
    """Terminal cells ``text`` takes: two for wide East Asian characters, none for combining marks."""
    if text.isascii():
        return len(text)
    width = 0
    for char in text:
        if unicodedata.combining(char):
            continue
        width += 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
    return width


def _fold(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` cells: broken at spaces, a longer word cut."""
    if text_width(text) <= width:
        return [text]
    lines: list[str] = []
    line = ""
    for word in text.split(" "):
        candidate = f"{line} {word}" if line else word
        if text_width(candidate) <= width:
            line = candidate
            continue
        if line:
            lines.append(line)
        line = ""
        while text_width(word) > width:
            cut = _cut(word, width)
            lines.append(word[:cut])
            word = word[cut:]
        line = word
    if line or not lines:
        lines.append(line)
    return lines


def _cut(word: str, width: int) -> int:
    """How many characters of ``word`` fit in ``width`` cells (at least one)."""
    used = 0
    for index, char in enumerate(word):
        used += text_width(char)
        if used > width:
            return max(index, 1)
    return len(word)


def _widths(headers: Sequence[str], rows: Sequence[Sequence[str]], wrap: Sequence[bool], limit: int) -> list[int]:
    widths = [max([text_width(h), *(text_width(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    # each column takes its text plus a space either side and one border; one more border closes the row
    excess = sum(widths) + 3 * len(widths) + 1 - limit
    while excess > 0:
        candidates = [i for i, w in enumerate(widths) if wrap[i] and w > _MIN_WIDTH]
        if not candidates:
            break
        widest = max(candidates, key=lambda i: widths[i])
        others = [widths[i] for i in candidates if i != widest]
        floor = max(_MIN_WIDTH, max(others, default=0))
        give = min(excess, widths[widest] - floor) or 1
        widths[widest] -= give
        excess -= give
    return widths


def _cells(edge: str, cells: Sequence[str], widths: Sequence[int]) -> str:
    return edge + edge.join(f" {c}{' ' * (w - text_width(c))} " for c, w in zip(cells, widths)) + edge


def _row(edge: str, row: Sequence[str], widths: Sequence[int], wrap: Sequence[bool]) -> list[str]:
    folded = [_fold(cell, w) if fold else [cell] for cell, w, fold in zip(row, widths, wrap)]
    depth = max(len(lines) for lines in folded)
    return [_cells(edge, [lines[d] if d < len(lines) else "" for lines in folded], widths) for d in range(depth)]


def render_table(
    title: str, headers: Sequence[str], rows: Sequence[Sequence[str]], wrap: Sequence[bool], width: int
) -> str:
    """The table as lines of text (each ending in a newline), no wider than ``width`` where wrapping allows."""
    widths = _widths(headers, rows, wrap, width)
    out = [title, rule("┏", "━", "┳", "┓", widths)]
    out += _row("┃", headers, widths, wrap)
    out.append(rule("┡", "━", "╇", "┩", widths))
    for row in rows:
        out += _row("│", row, widths, wrap)
    out.append(rule("└", "─", "┴", "┘", widths))
    return "".join(line.rstrip() + "\n" for line in out)

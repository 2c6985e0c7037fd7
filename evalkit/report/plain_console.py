"""The end-of-run console output as rich writes it when stdout is not a terminal, without importing rich.

rich's import is ~25 ms of CPU at the end of every run. Written to a file, a
pipe or a batch job's log (where most long runs print), rich adds no colour:
its table is box characters and spaces, which this module draws the same,
character for character (tests/test_plain_console.py holds it to rich's own
output). It takes only what it can draw exactly: a table no wider than the 120
columns rich is given at least, cells of plain text (ASCII and a few one-cell
signs), a title (rich wraps it to the table's width, at spaces, a longer word
cut, and centres each line), no markup-like title. Anything else, and every terminal, is
rich's (:func:`plain_stdout` says which).
"""

from __future__ import annotations

import builtins
import os
import re
import sys
from collections.abc import Sequence

#: the narrowest console rich is given (evalkit/report/console.py): a table within it is never squeezed
MIN_WIDTH = 120
#: non-ASCII characters rich counts as one cell that evalkit's own cells and titles use
_ONE_CELL = frozenset("—±…")
#: what rich's Text leaves out of printed text (rich.control.strip_control_codes)
_STRIPPED = {7: None, 8: None, 11: None, 12: None, 13: None}
#: rich's words when it wraps text: leading space, the word, trailing space
_WORD = re.compile(r"\s*\S+\s*")


def plain_stdout() -> bool:
    """Whether rich would write sys.stdout as plain text: not a terminal, nothing forcing one, UTF-8, no notebook."""
    stream = sys.stdout
    if stream is None or sys.platform == "win32" or hasattr(builtins, "get_ipython"):
        return False
    if os.environ.get("FORCE_COLOR") is not None or os.environ.get("TTY_COMPATIBLE", "") not in ("", "0"):
        return False
    if not (getattr(stream, "encoding", None) or "utf-8").lower().startswith("utf"):
        return False  # rich draws ASCII boxes then
    isatty = getattr(stream, "isatty", None)
    try:
        return isatty is not None and not isatty()
    except ValueError:  # a closed stream: rich counts it as no terminal, and writing fails either way
        return False


def _drawable(text: str) -> bool:
    """One line whose width is its length in rich's measure."""
    return text.isprintable() and (text.isascii() or all(c.isascii() or c in _ONE_CELL for c in text))


def soft_line(text: str) -> str | None:
    """A ``console.print(Text(text), soft_wrap=True)`` line: as is, without the control codes rich leaves out.

    None for text with a tab, which rich expands to its tab stops.
    """
    return None if "\t" in text else text.translate(_STRIPPED) + "\n"


def _title_lines(title: str, width: int) -> list[str]:
    """rich's title over a table ``width`` wide: wrapped at spaces (a longer word cut), each line centred."""
    breaks: list[int] = []
    offset = 0
    for match in _WORD.finditer(title):
        start, word = match.start(), match.group()
        length = len(word.rstrip())
        if width - offset >= length:
            offset += len(word)
        elif length > width:  # a word no line holds: cut into lines of ``width``, from a line of its own
            chunks = [word[at : at + width] for at in range(0, len(word), width)]
            for chunk in chunks:
                if start:
                    breaks.append(start)
                start += len(chunk)
            offset = len(chunks[-1])
        elif offset and start:
            breaks.append(start)
            offset = len(word)
    out = []
    for begin, end in zip([0, *breaks], [*breaks, len(title)]):
        line = title[begin:end].rstrip()[:width]
        left = (width - len(line)) // 2
        out.append(" " * left + line + " " * (width - len(line) - left))
    return out


def table_text(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[str]) -> str | None:
    """rich's ``Table(title=title)`` of these cells (columns named in ``right`` right-justified), or None.

    None: something rich would draw differently from the plain case (a cell it measures otherwise, a table
    wider than :data:`MIN_WIDTH`, a title rich would parse as markup).
    """
    cells = [*headers, *(c for row in rows for c in row)]
    if not all(_drawable(c) for c in cells) or not _drawable(title) or "[" in title or ":" in title:
        return None
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(headers)]
    width = sum(widths) + 3 * len(widths) + 1
    if width > MIN_WIDTH:
        return None
    titled = _title_lines(title, width) if title else []

    def line(cells: Sequence[str], edge: str) -> str:
        padded = (c.rjust(w) if h in right else c.ljust(w) for c, w, h in zip(cells, widths, headers))
        return edge + edge.join(f" {c} " for c in padded) + edge

    out = [*titled, rule("┏", "━", "┳", "┓", widths), line(headers, "┃"), rule("┡", "━", "╇", "┩", widths)]
    out += [line(row, "│") for row in rows]
    out.append(rule("└", "─", "┴", "┘", widths))
    return "".join(f"{text}\n" for text in out)


def rule(left: str, fill: str, middle: str, right: str, widths: Sequence[int]) -> str:
    """A horizontal line of rich's ``HEAVY_HEAD`` box over columns of ``widths`` (a space each side of a cell)."""
    return left + middle.join(fill * (w + 2) for w in widths) + right


def block_title(text: str) -> str | None:
    """A footer's title as is, or None where rich would change it (a ``console.print(str)``: markup, wrapped)."""
    return (
        text + "\n" if _drawable(text) and len(text) <= MIN_WIDTH and "[" not in text and ":" not in text[:-1] else None
    )

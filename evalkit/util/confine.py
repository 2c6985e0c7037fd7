"""Reading what a run folder names: only files inside the folders a reader was given, a bounded line at a time.

A run folder is input someone else may have made (copied, downloaded,
tampered with). Its files can name any path (a sent entry's image
``/home/me/.ssh/id_rsa``), be symlinks out of it (``records/x.jsonl ->
/etc/shadow``), or hold one line of 300 MB. So whatever reads a run for a
person (the viewer, its export, ``evalkit report``) opens a path only after
:meth:`Roots.find` resolved it (symlinks followed) inside one of the folders
it was given, and reads lines through :func:`capped_lines`, which never holds
more than :data:`MAX_LINE_BYTES` of one line.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

#: the longest line read from a records or sent file (an evalkit record is a few KB; 16 MiB leaves room for
#: long prompts and judge transcripts, and bounds what one line costs to parse)
MAX_LINE_BYTES = 16 << 20
#: the largest run.json or results.json read
MAX_JSON_BYTES = 64 << 20
#: bytes read at a time while skipping the rest of a line that is too long
_SKIP = 1 << 20


def _real(path: str | Path) -> str:
    return os.path.realpath(os.fspath(path))


def is_within(path: str | Path, folder: str | Path) -> bool:
    """True when ``path``, symlinks followed, is ``folder`` or below it (``folder`` resolved too)."""
    real, root = _real(path), _real(folder)
    try:
        return os.path.commonpath([real, root]) == root
    except ValueError:  # different drives, or one relative and one absolute
        return False


class Roots:
    """The folders a reader may open files in; a path named by a run is found here or not at all."""

    __slots__ = ("folders",)

    def __init__(self, folders: Iterable[str | Path]) -> None:
        self.folders: tuple[str, ...] = tuple(dict.fromkeys(_real(f) for f in folders))

    def __add__(self, other: Roots) -> Roots:
        return Roots([*self.folders, *other.folders])

    def find(self, path: str | Path) -> str | None:
        """The resolved path when it is inside one of the folders (it may not exist), else None.

        A relative path is taken from nowhere in particular (the process's folder means nothing to a run),
        so it is refused.
        """
        text = os.fspath(path)
        if not text or "\0" in text or not os.path.isabs(text):
            return None
        real = _real(text)
        for root in self.folders:
            try:
                if os.path.commonpath([real, root]) == root:
                    return real
            except ValueError:
                continue
        return None

    def file(self, path: str | Path) -> str | None:
        """:meth:`find`, for a regular file that exists (None otherwise)."""
        found = self.find(path)
        try:
            return found if found is not None and os.path.isfile(found) else None
        except (OSError, ValueError):
            return None


def read_capped(path: str | Path, limit: int) -> bytes:
    """The whole file, or ValueError naming its size when it is larger than ``limit`` (only limit+1 bytes read)."""
    with open(path, "rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"larger than {limit >> 20} MiB; not read")
    return data


def capped_lines(handle: BinaryIO, limit: int = MAX_LINE_BYTES) -> Iterator[tuple[int, int, bytes | None]]:
    """(offset, size in bytes, line) from where ``handle`` stands, each line with its newline.

    A line longer than ``limit`` gives None and is skipped in pieces, never held;
    a last line without its newline (cut, or being written) gives its bytes as
    they are, or ``b""`` when it is too long as well, so a caller tells it by the
    missing newline.
    """
    off = handle.tell()
    readline = handle.readline
    while True:
        line = readline(limit + 1)
        if not line:
            return
        if len(line) <= limit or line.endswith(b"\n"):
            yield off, len(line), line
            off += len(line)
            continue
        size = len(line)
        del line
        while True:
            piece = readline(_SKIP)
            size += len(piece)
            if not piece:
                yield off, size, b""
                return
            if piece.endswith(b"\n"):
                break
        yield off, size, None
        off += size


def too_long(limit: int = MAX_LINE_BYTES) -> str:
    """How a skipped line is named on a page or in a report."""
    return f"longer than {limit >> 20} MiB"

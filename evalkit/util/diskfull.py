"""Recognise a full disk (OS error or SQLite's) and turn it into one :class:`~evalkit.errors.DiskFullError`.

A run writes its records, results, run.json and the response store; any of
them may meet ``ENOSPC`` (or ``EDQUOT``). Instead of an ``OSError`` traceback
the user gets one message naming the path, the size of the write that failed
and what the filesystem has left (exit code 4).
"""

from __future__ import annotations

import errno
import os
import shutil
import sys
from pathlib import Path

from evalkit.errors import DiskFullError

#: errno values that mean "no room": a full filesystem, or a quota reached
DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
#: SQLite's result code for a full disk (``sqlite3.SQLITE_FULL`` from Python 3.11 on; the number is SQLite's own)
_SQLITE_FULL = 13


def is_disk_full(error: BaseException) -> bool:
    """True for ``ENOSPC``/``EDQUOT`` and for SQLite's "database or disk is full" (``SQLITE_FULL``)."""
    if isinstance(error, DiskFullError):
        return True
    if isinstance(error, OSError):
        return error.errno in DISK_FULL_ERRNOS
    # an SQLite error exists only once sqlite3 is loaded: a run with the store off never loads it for this
    sqlite3 = sys.modules.get("sqlite3")
    if sqlite3 is not None and isinstance(error, sqlite3.Error):
        code = getattr(error, "sqlite_errorcode", None)
        return code == _SQLITE_FULL or "database or disk is full" in str(error)
    return False


def free_bytes(path: str | os.PathLike[str]) -> int | None:
    """Free space on the filesystem of ``path`` (or of its nearest existing parent); None when unknown."""
    current = Path(path).absolute()
    for candidate in (current, *current.parents):
        try:
            return shutil.disk_usage(candidate).free
        except OSError:
            continue
    return None


def disk_full(path: str | os.PathLike[str], needed: int | None = None) -> DiskFullError:
    """The error to raise when writing ``needed`` bytes to ``path`` met a full disk."""
    return DiskFullError(str(path), needed=needed, free=free_bytes(path))

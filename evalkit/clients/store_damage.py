"""How the response store recognises a damaged file of its own, and where it keeps answers instead.

A store is a cache: a page damaged by a disk, a crash of the machine or a
hand must not stop a run, nor may evalkit repair or delete the file (it is
the user's, and may hold answers they paid for). So a damaged store is set
aside, untouched: evalkit opens it read-only to take the answers it can still
read and verify (each row's checksum), keeps new answers in a fresh file
beside it (:func:`replacement_path`), and says so in one warning. Only a file
that is evalkit's (its SQLite header carries evalkit's ``application_id``, or
it holds evalkit's one table) counts as damaged: anyone else's file is still
refused by the store, untouched.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: the first 16 bytes of every SQLite database file
SQLITE_MAGIC = b"SQLite format 3\x00"
#: SQLite's result codes for a damaged file (SQLITE_CORRUPT) and for a file that is no database (SQLITE_NOTADB)
_DAMAGE_CODES = frozenset({11, 26})
#: the messages of those codes, for Python 3.10's sqlite3 (no ``sqlite_errorcode``)
_DAMAGE_MESSAGES = ("malformed", "file is not a database")
#: problems quick_check reports at most: the first one names the damage, the rest add nothing a user can act on
_PROBLEMS_SHOWN = 3


def is_damage(error: BaseException) -> bool:
    """Whether ``error`` is SQLite saying the file is damaged (rather than locked, full or unreadable)."""
    if not isinstance(error, sqlite3.DatabaseError):
        return False
    code = getattr(error, "sqlite_errorcode", None)
    if code is not None:
        return (code & 0xFF) in _DAMAGE_CODES
    return any(text in str(error) for text in _DAMAGE_MESSAGES)


def replacement_path(path: Path) -> Path:
    """Where new answers go while the store at ``path`` is damaged: beside it, the same name every run.

    The same name, so the next run (or ``--resume``) finds the answers this run kept; the user who moves the
    damaged file away may rename this one to take its place.
    """
    suffix = path.suffix or ""
    stem = path.name[: len(path.name) - len(suffix)] if suffix else path.name
    return path.with_name(f"{stem}.replacement{suffix}")


def read_only_uri(path: Path) -> str:
    """The SQLite URI that opens ``path`` read-only: a damaged store is read, never written.

    Without a write-ahead log beside it the file is opened ``immutable``, so SQLite makes no ``-shm`` or ``-wal``
    file next to it either; with one, the log's committed answers are read too.
    """
    wal = path.with_name(path.name + "-wal")
    mode = "mode=ro" if wal.is_file() and wal.stat().st_size > 0 else "immutable=1"
    return f"{path.resolve().as_uri()}?{mode}"


def diagnose(path: Path, application_id: int) -> str | None:
    """What is damaged in the evalkit store at ``path`` (SQLite's words), or None.

    None also for a file that is not recognisably evalkit's: the store's own checks refuse it (exit 2) and leave
    it as it is. Runs SQLite's ``quick_check`` on a read-only connection: it reads every page once (well under a
    second for a store of a few hundred MB) and writes nothing.
    """
    try:
        with path.open("rb") as handle:
            header = handle.read(100)
    except OSError:
        return None  # the store's open says what is wrong with a file it cannot read
    if len(header) < 100 or not header.startswith(SQLITE_MAGIC):
        return None
    ours = int.from_bytes(header[68:72], "big") == application_id
    problems: list[str] = []
    try:
        with contextlib.closing(sqlite3.connect(read_only_uri(path), uri=True)) as db:
            if not ours:
                tables = {str(name) for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
                ours = tables == {"responses"}  # a store from before the application_id
            problems = [str(row[0]) for row in db.execute(f"PRAGMA quick_check({_PROBLEMS_SHOWN})")]
    except sqlite3.Error as error:
        if not is_damage(error):
            return None
        problems = [str(error)]
    if not ours or problems == ["ok"]:
        return None
    # quick_check's report starts with a "*** in database main ***" line and may span lines: one line for a warning
    lines = (line.strip() for problem in problems for line in problem.splitlines())
    return "; ".join(line for line in lines if line and not line.startswith("***"))


#: how many times the salvage skips past a damaged page before it gives up on the rest of the table
_SKIPS = 64
#: rows the salvage copies per transaction
_BATCH = 500


def salvage(damaged: Path, into: Path, verify: Callable[[str, bytes, str], bool], busy_timeout_ms: int) -> int:
    """Copy every answer of the damaged store that still reads and verifies into the store at ``into``.

    The damaged file is only read. Its table is walked in rowid order without its index (an index page may be
    the damaged one); a damaged page ends the walk there, and the walk goes on past it with a growing jump, so
    the answers of every page still readable are kept. Rows without a checksum (written before checksums) are
    not copied: read from a damaged file, nothing vouches for them. Answers already in ``into`` stay.
    """
    copied = 0
    last, step, skips = 0, 1, 0
    with (
        contextlib.closing(sqlite3.connect(read_only_uri(damaged), uri=True)) as source,
        contextlib.closing(sqlite3.connect(into)) as target,
    ):
        target.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        batch: list[tuple[str, str, bytes, float, str]] = []

        def flush() -> None:
            nonlocal copied
            if batch:
                with target:
                    before = target.total_changes
                    target.executemany(
                        "INSERT OR IGNORE INTO responses (key, model, response, created, checksum) "
                        "VALUES (?, ?, ?, ?, ?)",
                        batch,
                    )
                    copied += target.total_changes - before
                batch.clear()

        while True:
            try:
                rows = source.execute(
                    "SELECT rowid, key, model, response, created, checksum FROM responses NOT INDEXED "
                    "WHERE rowid > ? ORDER BY rowid",
                    (last,),
                )
                for rowid, key, model, blob, created, stored_sum in rows:
                    last, step = int(rowid), 1
                    kept = _kept(key, model, blob, created, stored_sum, verify)
                    if kept is not None:
                        batch.append(kept)
                    if len(batch) >= _BATCH:
                        flush()
                break  # the end of the table
            except sqlite3.DatabaseError as error:
                if not is_damage(error):
                    raise
                skips += 1
                if skips > _SKIPS:
                    break
                last, step = last + step, min(step * 2, 2**40)
        flush()
    return copied


def _kept(
    key: Any, model: Any, blob: Any, created: Any, stored_sum: Any, verify: Callable[[str, bytes, str], bool]
) -> tuple[str, str, bytes, float, str] | None:
    """The row to copy, or None: a value of the wrong type or a checksum that fails is what damage looks like."""
    if not (isinstance(key, str) and isinstance(blob, bytes) and isinstance(stored_sum, str)):
        return None
    if not isinstance(created, (int, float)) or not verify(key, blob, stored_sum):
        return None
    return key, str(model), blob, float(created), stored_sum

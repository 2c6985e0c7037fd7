"""An index found in a run folder (``index/``, written when the run or merge ended), checked before any use.

A run folder is untrusted input (copied, another user's, damaged, edited), and
so is an SQLite file in it. Before the viewer reads one:

* its header must say a plain SQLite file with a rollback journal (a WAL file
  would make SQLite write ``-wal``/``-shm`` files into the run folder), and it
  must resolve inside the run folder;
* it is opened read-only, with ``trusted_schema`` off (and SQLite's defensive
  mode where Python offers it), and its schema must be exactly the one evalkit
  writes (no view, trigger or table of anyone else's);
* its ``meta`` must name this file's kind, name and size, and the SHA-256 of the
  bytes it indexed must be the file's: when the file's modification time is
  still the one the index recorded this is taken as read (the same file), else
  (a copied folder, an edited file) the file is hashed once;
* a few of its rows (the first, the last, and some between) are read back from
  the file by their offsets and must equal what the index says of them.

An index that fails any of these is left alone (never changed: the run folder
is not the viewer's) and the viewer builds its own in the cache folder. A check
is remembered for as long as neither file changes. A query that later finds
the file damaged says so (:func:`reject`), and the index is not used again.
Reads by offset are capped (:data:`~evalkit.util.confine.MAX_LINE_BYTES`), so
even an index that passed can only point at lines of the file.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evalkit.util import jsonutil
from evalkit.util.confine import MAX_LINE_BYTES, is_within
from evalkit.view.indexrows import prompt_text, record_row, record_text, sent_row

#: the run folder's folder of indexes (beside records/, outside what the run's checksums cover)
FOLDER = "index"
#: rows of an index read back from the file to check it
SPOT_ROWS = 8
_CHUNK = 1 << 20
_HEADER = b"SQLite format 3\x00"

_verdicts: dict[tuple[Any, ...], dict[str, Any] | None] = {}
_rejected: set[str] = set()
_lock = threading.Lock()


def folder_index(source: Path, kind: str) -> tuple[Path, Path] | None:
    """(where the run wrote ``source``'s index, the run folder); None for a file not under a run's records/."""
    records = source.parent if kind == "records" else source.parent.parent
    if records.name != "records" or (kind == "sent" and source.parent.name != "sent"):
        return None
    run = records.parent
    return run / FOLDER / (source.relative_to(records).as_posix() + ".sqlite"), run


def harden(conn: sqlite3.Connection) -> sqlite3.Connection:
    """What SQLite advises for a database file of unknown origin: no functions from its schema, no writes."""
    conn.execute("PRAGMA trusted_schema = OFF")
    conn.execute("PRAGMA cell_size_check = ON")
    conn.execute("PRAGMA query_only = ON")
    setconfig = getattr(conn, "setconfig", None)  # Python 3.12+
    defensive = getattr(sqlite3, "SQLITE_DBCONFIG_DEFENSIVE", None)
    if setconfig is not None and defensive is not None:
        setconfig(defensive, True)
    return conn


def uri(db: Path) -> str:
    """The read-only URI of an index file (for ``connect`` and ``ATTACH``)."""
    return "file:" + urllib.parse.quote(os.path.abspath(db)) + "?mode=ro"


def connect_readonly(db: Path) -> sqlite3.Connection:
    return harden(sqlite3.connect(uri(db), uri=True, timeout=30, check_same_thread=False))


def header_ok(db: Path) -> bool:
    """A whole SQLite header of a rollback-journal database (file format versions 1 and 1)."""
    try:
        with db.open("rb") as handle:
            head = handle.read(100)
    except OSError:
        return False
    return len(head) == 100 and head.startswith(_HEADER) and head[18] == 1 and head[19] == 1


def schema(db: sqlite3.Connection) -> list[tuple[Any, ...]]:
    return db.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name").fetchall()


def digest(source: Path, upto: int) -> str:
    """SHA-256 of the first ``upto`` bytes of ``source`` (the part an index read), a megabyte at a time."""
    sha = hashlib.sha256()
    left = upto
    with source.open("rb") as handle:
        while left > 0:
            chunk = handle.read(min(_CHUNK, left))
            if not chunk:
                break
            sha.update(chunk)
            left -= len(chunk)
    return sha.hexdigest()


def reject(db: Path) -> None:
    """A query found ``db`` damaged: it is not used again by this viewer (its own index is built instead)."""
    with _lock:
        _rejected.add(os.path.abspath(db))


def checked(
    source: Path, kind: str, version: int, expected: list[tuple[Any, ...]]
) -> tuple[Path, dict[str, Any]] | None:
    """(the run folder's index of ``source``, its meta) when it passed every check above; else None."""
    found = folder_index(source, kind)
    if found is None:
        return None
    db_path, run = found
    try:
        st_db, st_src = os.stat(db_path), os.stat(source)
    except OSError:
        return None
    key = (
        os.path.abspath(db_path),
        st_db.st_size,
        st_db.st_mtime_ns,
        st_db.st_ino,
        st_src.st_size,
        st_src.st_mtime_ns,
        st_src.st_ino,
    )
    with _lock:
        if key[0] in _rejected:
            return None
        if key in _verdicts:
            meta = _verdicts[key]
            return (db_path, meta) if meta is not None else None
    meta = _check(db_path, run, source, kind, version, expected, st_src)
    with _lock:
        if len(_verdicts) > 256:
            _verdicts.clear()
        _verdicts[key] = meta
    return (db_path, meta) if meta is not None else None


def _check(
    db_path: Path,
    run: Path,
    source: Path,
    kind: str,
    version: int,
    expected: list[tuple[Any, ...]],
    st: os.stat_result,
) -> dict[str, Any] | None:
    if not db_path.is_file() or not is_within(db_path, run) or not header_ok(db_path):
        return None
    try:
        db = connect_readonly(db_path)
        try:
            if schema(db) != expected:
                return None
            meta = {k: v for k, v in db.execute("SELECT k, v FROM meta WHERE k != 'facets'")}
            if not _meta_matches(meta, source, kind, version, st):
                return None
            if not _rows_match(db, source, kind, st.st_size):
                return None
        finally:
            db.close()
    except (sqlite3.Error, OSError, ValueError, TypeError):
        return None
    return meta


def _meta_matches(meta: dict[str, Any], source: Path, kind: str, version: int, st: os.stat_result) -> bool:
    if meta.get("version") != version or meta.get("kind") != kind or meta.get("name") != source.name:
        return False
    if (
        meta.get("size") != st.st_size
        or not isinstance(meta.get("offset"), int)
        or not 0 <= meta["offset"] <= st.st_size
    ):
        return False
    for name in ("lines", "bad", "long", "next"):
        if not isinstance(meta.get(name), int) or meta[name] < 0:
            return False
    sha = meta.get("sha256")
    if not isinstance(sha, str):
        return False
    if meta.get("mtime") == st.st_mtime_ns:
        return True  # the very file the index was made from (a copy or an edit changes the time)
    return digest(source, meta["offset"]) == sha


def _read(handle: Any, off: int, length: int, size: int) -> bytes | None:
    """The line at (off, length) when it is a whole line of the file (newline before and after it)."""
    if off < 0 or length < 0 or length > MAX_LINE_BYTES or off + length >= size:
        return None
    handle.seek(max(0, off - 1))
    data = handle.read(length + (2 if off else 1))
    before, line, after = (data[:1], data[1:-1], data[-1:]) if off else (b"\n", data[:-1], data[-1:])
    return line if before == b"\n" and after == b"\n" and len(line) == length else None


def _rows_match(db: sqlite3.Connection, source: Path, kind: str, size: int) -> bool:
    if kind == "records":
        # apart, each is one step down the table's b-tree (together they read the whole table)
        low, high = (db.execute(f"SELECT {end}(id) FROM rec").fetchone()[0] for end in ("min", "max"))
        query = (
            "SELECT off, len, sample_id, model, row, score, failure, sent, coalesce(txt.text, '') "
            "FROM rec LEFT JOIN txt USING (id) WHERE id >= ? ORDER BY id LIMIT 1"
        )

        def same(rec: dict[str, Any], found: tuple[Any, ...]) -> bool:
            return record_row(rec) == tuple(found[2:8]) and record_text(rec) == found[8]

    else:
        low, high = (db.execute(f"SELECT {end}(rowid) FROM sent").fetchone()[0] for end in ("min", "max"))
        query = "SELECT off, len, key, sample_id, text FROM sent WHERE rowid >= ? ORDER BY rowid LIMIT 1"

        def same(rec: dict[str, Any], found: tuple[Any, ...]) -> bool:
            return sent_row(rec) == tuple(found[2:4]) and prompt_text(rec) == found[4]

    if low is None:
        return size == 0 or _empty_ok(db)
    return _spots(db, source, size, query, int(low), int(high), same)


def _empty_ok(db: sqlite3.Connection) -> bool:
    """An index of no rows matches a file of no records (blank or unreadable lines only)."""
    return bool(db.execute("SELECT count(*) FROM meta WHERE k = 'lines' AND v = 0").fetchone()[0])


def _spots(
    db: sqlite3.Connection,
    source: Path,
    size: int,
    query: str,
    low: int,
    high: int,
    same: Callable[[dict[str, Any], tuple[Any, ...]], bool],
) -> bool:
    step = max(1, (high - low) // (SPOT_ROWS - 1))
    wanted = sorted({*range(low, high, step), high})[: SPOT_ROWS + 1]
    with source.open("rb") as handle:
        for at in wanted:
            found = db.execute(query, (at,)).fetchone()
            if found is None:
                return False
            line = _read(handle, found[0], found[1], size)
            if line is None:
                return False
            try:
                value = jsonutil.loads(line)
            except ValueError:
                return False
            if not isinstance(value, dict) or not same(value, found):
                return False
    return True

"""SQLite indexes of records files and sent files, so a page never reads a whole file into memory.

Each JSONL file gets one index database. A run and a merge write it into
the run folder when they end (``index/``, :mod:`evalkit.view.runindex`), and
the viewer uses that one once :mod:`evalkit.view.indexcheck` has checked it;
otherwise the viewer builds its own in evalkit's cache folder
(``$EVALKIT_CACHE_DIR/view``, default ``~/.cache/evalkit/view``), named by a
hash of the file's absolute path, and never writes into the run folder, which
may be read-only or another user's. The index keeps, per line, its byte offset
and length and the columns pages filter and sort on, and the searched text
with an FTS5 trigram index over it (a search of three characters or more is a
phrase of trigrams: a substring, found without reading every text); the record
itself is read back from the file by offset when a page shows it.

An index remembers how far into the file it read (the end of the last whole
line) and a hash of the bytes before that. A file that grew (a run still in
progress) is read on from there; one that changed otherwise (a rescore wrote
it again) is indexed again from the start. A line that is not JSON is counted
and skipped, and a last line without its newline (cut mid-write) is left for
the next refresh: both are said on the page, neither stops the viewer. A line
longer than :data:`~evalkit.util.confine.MAX_LINE_BYTES` is skipped without
being held whole, and said too.

The index holds text of the records (what search reads), so it is kept as
private as it can be: the folder is the user's alone (0700) and every index
0600, never wider than the run it copies from. A build writes a temporary file
named after its process; one left by a build that was killed is removed by the
next build (its process is gone). Per record it keeps numbers where it can (the
model as a small integer, a group value once in ``gv``) and each distinct
searched text once, so it stays well below the records' size.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.util import jsonutil
from evalkit.util.confine import MAX_LINE_BYTES, capped_lines
from evalkit.view import indexcheck
from evalkit.view.indexrows import prompt_text, record_row, record_text, sent_row, text

#: bumped whenever the tables change, so an old index is built again
VERSION = 5
_BATCH = 5000
#: SQLite's page cache while building (KiB): the index sorts run in it; the viewer's memory target is 300 MB
_BUILD_CACHE_KIB = 16 * 1024
#: bytes of the indexed part whose hash tells a file that grew from one written again
_HEAD = 1 << 16

_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def cache_dir() -> Path:
    """``$EVALKIT_CACHE_DIR/view``, default ``~/.cache/evalkit/view`` (the folder the hub cache sits beside)."""
    base = os.environ.get("EVALKIT_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "evalkit")
    return Path(base) / "view"


#: an index and its folder: the user's alone (the records' text is in it)
FILE_MODE = 0o600
DIR_MODE = 0o700
#: a temporary build file older than this is stale whoever made it (no build takes hours)
_STALE_S = 6 * 3600


def ensure_cache_dir() -> Path:
    """The cache folder, made (or narrowed) to the user's alone: 0700."""
    folder = cache_dir()
    folder.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    if folder.stat().st_mode & 0o777 != DIR_MODE:
        with contextlib.suppress(OSError):  # a folder of another owner: its files are still 0600
            folder.chmod(DIR_MODE)
    return folder


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError, OverflowError):
        return True
    return True


def remove_stale(pattern: str = "*.tmp", folder: Path | None = None) -> int:
    """Remove temporary build files (in ``folder``, default the cache folder) whose process is gone (a killed
    build) or that are hours old; how many."""
    removed = 0
    try:
        found = list((folder or cache_dir()).glob(pattern))
    except OSError:
        return 0
    now = time.time()
    for path in found:
        parts = path.name.split(".")
        pid = int(parts[-3]) if len(parts) >= 4 and parts[-3].isdigit() else None
        try:
            old = now - path.stat().st_mtime > _STALE_S
        except OSError:
            continue
        if old or pid is None or (pid != os.getpid() and not _alive(pid)):
            with contextlib.suppress(OSError):
                path.unlink()
                removed += 1
    return removed


def _private_file(path: Path, mode: int = FILE_MODE) -> None:
    """Create ``path`` empty with mode 0600 (SQLite then keeps that mode, and gives it to its journals)."""
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, mode)
    os.close(fd)


def index_path(source: Path, kind: str) -> Path:
    key = hashlib.sha256(f"{kind}\0{os.path.abspath(source)}".encode()).hexdigest()[:24]
    return cache_dir() / f"{kind}-{key}.sqlite"


@dataclass(frozen=True)
class IndexState:
    """How much of a file its index holds, for the page to say so."""

    db: Path
    source: Path
    lines: int
    bad_lines: int
    first_bad: int | None
    #: bytes after the last whole line (a line cut mid-write, or being written now)
    tail_bytes: int
    size: int
    #: lines longer than the limit, skipped unread (and the first's number)
    long_lines: int = 0
    first_long: int | None = None
    #: the index the run wrote into its folder (checked, read-only), not one of the cache folder
    in_run_folder: bool = False

    @property
    def complete(self) -> bool:
        return self.tail_bytes == 0


# -- what each kind of file keeps -------------------------------------------------------------------------------

#: the text search's index: every three characters of a text (a search is a phrase of them, i.e. a substring);
#: case-sensitive because the texts and the searched words are case-folded before (as :func:`str.casefold` does)
_FTS = "USING fts5(text, tokenize='trigram case_sensitive 1', detail=full, columnsize=0, content={content})"

_RECORDS_SCHEMA = f"""
CREATE TABLE rec(id INTEGER PRIMARY KEY, off INTEGER NOT NULL, len INTEGER NOT NULL, sample_id TEXT, model TEXT,
                 row INTEGER, score REAL, failure TEXT, sent TEXT);
CREATE TABLE txt(id INTEGER PRIMARY KEY, text TEXT);
CREATE VIRTUAL TABLE fts {_FTS.format(content="'txt', content_rowid='id'")};
CREATE TABLE gv(gv INTEGER PRIMARY KEY, name TEXT NOT NULL, value TEXT NOT NULL, UNIQUE(name, value));
CREATE TABLE grp(gv INTEGER NOT NULL, id INTEGER NOT NULL, PRIMARY KEY (gv, id)) WITHOUT ROWID;
"""
#: made once the first build has loaded its rows (an index kept up row by row makes the load several times slower)
_RECORDS_INDEXES = """
CREATE INDEX rec_model_row ON rec(model, row);
CREATE INDEX rec_row ON rec(row);
CREATE INDEX rec_model_score ON rec(model, score);
CREATE INDEX rec_score ON rec(score);
CREATE INDEX rec_failure ON rec(failure);
CREATE INDEX rec_sample ON rec(sample_id);
CREATE INDEX rec_sent ON rec(sent);
"""

_SENT_SCHEMA = f"""
CREATE TABLE sent(key TEXT PRIMARY KEY, off INTEGER NOT NULL, len INTEGER NOT NULL, sample_id TEXT, text TEXT);
CREATE VIRTUAL TABLE sfts {_FTS.format(content="'sent'")};
"""


Batch = list[tuple[int, int, int, dict[str, Any]]]


def _group_ids(db: sqlite3.Connection, cache: dict[tuple[str, str], int], name: str, value: str) -> int:
    """The number standing for one group value (a short integer in the big table, the text once in ``gv``)."""
    found = cache.get((name, value))
    if found is None:
        row = db.execute("SELECT gv FROM gv WHERE name = ? AND value = ?", (name, value)).fetchone()
        if row is None:
            row = db.execute("INSERT INTO gv(name, value) VALUES (?, ?) RETURNING gv", (name, value)).fetchone()
        found = cache[(name, value)] = int(row[0])
    return found


def _insert_records(db: sqlite3.Connection, batch: Batch, cache: dict[tuple[str, str], int]) -> None:
    rows = []
    texts = []
    groups = []
    for line_id, off, length, rec in batch:
        rows.append((line_id, off, length, *record_row(rec)))
        texts.append((line_id, record_text(rec)))
        found = rec.get("groups")
        if isinstance(found, dict):
            for k, v in found.items():
                if v is not None:
                    key = (str(k), text(v))
                    number = cache.get(key)
                    groups.append((_group_ids(db, cache, *key) if number is None else number, line_id))
    db.executemany("INSERT INTO rec VALUES (?,?,?,?,?,?,?,?,?)", rows)
    db.executemany("INSERT INTO txt VALUES (?,?)", texts)
    if groups:
        db.executemany("INSERT INTO grp VALUES (?,?)", groups)


def _insert_sent(db: sqlite3.Connection, batch: Batch, cache: dict[tuple[str, str], int]) -> None:
    rows = []
    for _, off, length, entry in batch:
        found = sent_row(entry)
        if found is not None:
            rows.append((found[0], off, length, found[1], prompt_text(entry)))
    db.executemany("INSERT OR IGNORE INTO sent VALUES (?,?,?,?,?)", rows)


@dataclass(frozen=True)
class _Kind:
    schema: str
    indexes: str
    insert: Callable[[sqlite3.Connection, Batch, dict[tuple[str, str], int]], None]
    #: the last row already in the text search's index (rows after it are added to it after a read)
    mark: str
    #: adds the rows after the mark to the text search's index (texts that are empty are left out)
    fill: str


KINDS = {
    "records": _Kind(
        _RECORDS_SCHEMA,
        _RECORDS_INDEXES,
        _insert_records,
        "SELECT coalesce(max(id), 0) FROM txt",
        "INSERT INTO fts(rowid, text) SELECT id, text FROM txt WHERE id > ? AND text != ''",
    ),
    "sent": _Kind(
        _SENT_SCHEMA,
        "",
        _insert_sent,
        "SELECT coalesce(max(rowid), 0) FROM sent",
        "INSERT INTO sfts(rowid, text) SELECT rowid, text FROM sent WHERE rowid > ? AND text != ''",
    ),
}

_expected: dict[str, list[tuple[Any, ...]]] = {}


def expected_schema(kind: str) -> list[tuple[Any, ...]]:
    """The tables and indexes an index of ``kind`` has (made in memory by the same statements as a build)."""
    if kind not in _expected:
        db = sqlite3.connect(":memory:")
        try:
            _create(db, kind)
            db.executescript(KINDS[kind].indexes)
            _expected[kind] = indexcheck.schema(db)
        finally:
            db.close()
    return _expected[kind]


def _create(db: sqlite3.Connection, kind: str) -> None:
    db.execute("CREATE TABLE meta(k TEXT PRIMARY KEY, v)")
    db.executescript(KINDS[kind].schema)


# -- the filter's choices ---------------------------------------------------------------------------------------

#: values of one group offered in the filter (a speaker column may have thousands)
MAX_GROUP_VALUES = 300


def count_facets(db: sqlite3.Connection) -> dict[str, Any]:
    """The filter's choices of a records index: models, failure reasons and group values with their counts, the
    score range. Counted by the build (in its child process) and kept in ``meta``, so the first page that uses
    the index does not pay for counting 300,000 rows."""
    models = [m for (m,) in db.execute("SELECT model FROM rec GROUP BY model ORDER BY min(id)")]
    failures = dict(
        db.execute("SELECT failure, count(*) FROM rec WHERE failure IS NOT NULL GROUP BY failure ORDER BY 2 DESC")
    )
    low, high, scored = db.execute("SELECT min(score), max(score), count(score) FROM rec").fetchone()
    groups: dict[str, dict[str, int]] = {}
    found = db.execute(
        "SELECT name, value, n FROM (SELECT gv, count(*) AS n FROM grp GROUP BY gv) JOIN gv USING (gv) "
        "ORDER BY name, value"
    )
    for name, value, n in found:
        values = groups.setdefault(name, {})
        if len(values) < MAX_GROUP_VALUES:
            values[value] = n
    return {
        "models": models,
        "failures": failures,
        "groups": groups,
        "score_min": low,
        "score_max": high,
        "scored": scored,
    }


def stored_facets(db: sqlite3.Connection) -> dict[str, Any] | None:
    """The choices the build counted, when they are of the index as it is now (a file read on since: None) and
    of the shape the build writes (an index from a run folder may say anything: otherwise they are counted)."""
    row = db.execute("SELECT v FROM meta WHERE k = 'facets' AND length(v) <= ?", (_FACETS_LIMIT,)).fetchone()
    if row is None:
        return None
    try:
        data = jsonutil.loads(row[0])
    except (ValueError, TypeError):
        return None
    offset = db.execute("SELECT v FROM meta WHERE k = 'offset'").fetchone()
    if not isinstance(data, dict) or offset is None or data.get("offset") != offset[0]:
        return None
    found = data.get("facets")
    return found if _facets_shape(found) else None


#: the longest facets text taken from an index (the build writes a few KiB: 300 values a group at most)
_FACETS_LIMIT = 4 << 20


def _facets_shape(found: Any) -> bool:
    def counts(value: Any) -> bool:
        return isinstance(value, dict) and all(isinstance(k, str) and isinstance(n, int) for k, n in value.items())

    if not isinstance(found, dict):
        return False
    models, groups = found.get("models"), found.get("groups")
    numbers = [found.get("score_min"), found.get("score_max")]
    return (
        isinstance(models, list)
        and all(isinstance(m, str) for m in models)
        and counts(found.get("failures"))
        and isinstance(groups, dict)
        and all(isinstance(k, str) and counts(v) for k, v in groups.items())
        and all(n is None or (isinstance(n, (int, float)) and not isinstance(n, bool)) for n in numbers)
        and isinstance(found.get("scored"), int)
    )


def _store_facets(db: sqlite3.Connection, kind: str, meta: dict[str, Any]) -> None:
    if kind == "records":
        data = {"offset": meta.get("offset"), "facets": count_facets(db)}
        db.execute("INSERT OR REPLACE INTO meta VALUES ('facets', ?)", (jsonutil.dumps(data),))


# -- building and refreshing ------------------------------------------------------------------------------------


def _lock(db: Path) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(str(db), threading.Lock())


def _meta(db: sqlite3.Connection) -> dict[str, Any]:
    return {k: v for k, v in db.execute("SELECT k, v FROM meta")}


def _head_hash(source: Path, upto: int) -> str:
    digest = hashlib.sha256()
    with source.open("rb") as handle:
        digest.update(handle.read(min(upto, _HEAD)))
    return digest.hexdigest()


def status(source: Path, kind: str) -> str:
    """ "ready" (the index matches the file), "extend" (the file grew: cheap to read on) or "build" (none yet)."""
    if indexcheck.checked(source, kind, VERSION, expected_schema(kind)) is not None:
        return "ready"
    db_path = index_path(source, kind)
    if not db_path.exists():
        return "build"
    try:
        st = os.stat(source)
        with opened(db_path) as db:
            meta = _meta(db)
    except (OSError, sqlite3.DatabaseError):
        return "build"
    if meta.get("version") != VERSION or meta.get("source") != os.path.abspath(source):
        return "build"
    if meta.get("size") == st.st_size and meta.get("mtime") == st.st_mtime_ns:
        return "ready"
    offset = int(meta.get("offset", 0))
    # a rescore that wrote the file again is found by refresh() (head hash); growth is what a live run does
    return "extend" if st.st_size >= offset and st.st_size - offset < _EXTEND_LIMIT else "build"


#: bytes a file may have grown by and still be read on in the request (more: built in the background)
_EXTEND_LIMIT = 32 << 20

_builders: dict[str, subprocess.Popen[bytes]] = {}


def start_build(source: Path, kind: str) -> None:
    """Build (or bring up to date) the index of ``source`` in a child process, unless one is at it already.

    A child process, not a thread: the build is Python work that would hold the
    GIL and slow down every page served meanwhile, on a machine with 2 cores.
    """
    key = str(index_path(source, kind))
    with _locks_guard:
        for done in [k for k, child in _builders.items() if k != key and child.poll() is not None]:
            del _builders[done]  # reaped by poll(): no finished child lingers as a zombie
        running = _builders.get(key)
        if running is not None and running.poll() is None:
            return
        _builders[key] = subprocess.Popen(
            [sys.executable, "-c", _CHILD, kind, os.path.abspath(source)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )


#: the build's niceness: the lowest priority, so on a busy machine the page being answered gets the CPU first
#: (an idle machine still gives the build all it has)
NICE = 19
#: what a build child runs: its priority lowered before it imports evalkit, so even its start yields to the viewer
_CHILD = (
    "import os, sys\n"
    "if hasattr(os, 'nice'):\n"
    f"    os.nice({NICE})\n"
    "from evalkit.view.index import main\n"
    "raise SystemExit(main(sys.argv[1:]))\n"
)


def wait_build(source: Path, kind: str, timeout: float | None = None) -> bool:
    """Wait for the child building ``source``'s index, if there is one; False when it is still at work."""
    running = _builders.get(str(index_path(source, kind)))
    if running is not None:
        try:
            running.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
    return True


def stop_builds() -> None:
    """End the build processes this viewer started (when it stops); a half-built index is never used."""
    with _locks_guard:
        for running in _builders.values():
            if running.poll() is None:
                running.terminate()
        for running in _builders.values():
            try:
                running.wait(10)
            except subprocess.TimeoutExpired:
                running.kill()
        _builders.clear()


def connect(db: Path) -> sqlite3.Connection:
    """A read-only connection (a run folder's index is never written by the viewer; the cache's only by builds)."""
    return indexcheck.connect_readonly(db)


def attach(db: sqlite3.Connection, path: Path, name: str) -> None:
    """``path`` read-only in ``db`` as ``name`` (the sent file's index beside the records')."""
    db.execute(f"ATTACH DATABASE ? AS {name}", (indexcheck.uri(path),))


def connect_pair(a: Path, b: Path) -> tuple[sqlite3.Connection, str]:
    """A connection to ``a`` with ``b`` read-only beside it, and the schema name ``b``'s tables go by there
    (``main`` when both sides are one index: two models of one run); the caller closes it."""
    db = connect(a)
    if a == b:
        return db, "main"
    try:
        attach(db, b, "b")
    except BaseException:
        db.close()
        raise
    return db, "b"


@contextlib.contextmanager
def opened(db: Path) -> Iterator[sqlite3.Connection]:
    """A connection closed on leaving (sqlite3's own context manager only commits)."""
    conn = connect(db)
    try:
        yield conn
    finally:
        conn.close()


def refresh(source: Path, kind: str, progress: Callable[[int], None] | None = None) -> IndexState:
    """The index of ``source`` brought up to date with the file (built, read on, or built again); its state.

    OSError when the file cannot be read. Safe to call from several threads at
    once: one builds, the others wait for it.
    """
    found = indexcheck.checked(source, kind, VERSION, expected_schema(kind))
    if found is not None:
        return _state(found[0], source, found[1], in_run_folder=True)
    db_path = index_path(source, kind)
    with _lock(db_path):
        st = os.stat(source)
        ensure_cache_dir()
        if db_path.exists():
            try:
                with opened(db_path) as db:
                    meta = _meta(db)
            except sqlite3.DatabaseError:
                meta = {}
            if meta.get("version") == VERSION and meta.get("source") == os.path.abspath(source):
                if meta.get("size") == st.st_size and meta.get("mtime") == st.st_mtime_ns:
                    return _state(db_path, source, meta)
                offset = int(meta.get("offset", 0))
                if st.st_size >= offset and _head_hash(source, offset) == meta.get("head"):
                    return _extend(db_path, source, kind, meta, st, progress)
            db_path.unlink(missing_ok=True)
        return _build(db_path, source, kind, st, progress)


def discard(state: IndexState) -> None:
    """An index a query found damaged: never used again (a run folder's is only set aside, the cache's removed)."""
    if state.in_run_folder:
        indexcheck.reject(state.db)
    else:
        with _lock(state.db), contextlib.suppress(OSError):
            state.db.unlink()


def build_into(source: Path, kind: str, db_path: Path, progress: Callable[[int], None] | None = None) -> IndexState:
    """The index of ``source`` written at ``db_path`` (a run folder's ``index/``, when the run or merge ends).

    Its meta adds what :mod:`evalkit.view.indexcheck` checks before a viewer
    trusts it: the file's name, modification time and the SHA-256 of the bytes
    indexed. Its mode is the records file's (never wider).
    """
    st = os.stat(source)
    db_path.parent.mkdir(parents=True, exist_ok=True)
    return _build(db_path, source, kind, st, progress, mode=st.st_mode & 0o666, digest=True)


def _build(
    db_path: Path,
    source: Path,
    kind: str,
    st: os.stat_result,
    progress: Callable[[int], None] | None,
    mode: int = FILE_MODE,
    digest: bool = False,
) -> IndexState:
    """A new index, written beside its final name and moved there whole, so no reader sees half of one."""
    remove_stale(f"{db_path.name}.*.tmp", db_path.parent)  # what a killed build of this index left
    tmp = db_path.with_name(f"{db_path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.unlink(missing_ok=True)
    _private_file(tmp, mode)
    db = sqlite3.connect(str(tmp))
    try:
        db.execute("PRAGMA journal_mode = OFF")
        db.execute("PRAGMA synchronous = OFF")
        db.execute(f"PRAGMA cache_size = -{_BUILD_CACHE_KIB}")  # sorting for the indexes in memory, within bounds
        _create(db, kind)
        meta: dict[str, Any] = {
            "version": VERSION,
            "kind": kind,
            "name": source.name,
            "source": os.path.abspath(source),
            "lines": 0,
            "bad": 0,
            "first_bad": None,
            "long": 0,
            "first_long": None,
        }
        meta = _read_into(db, source, kind, meta, 0, st, progress)
        db.executescript(KINDS[kind].indexes)
        _store_facets(db, kind, meta)
        if digest:
            meta["sha256"] = indexcheck.digest(source, int(meta["offset"]))
            db.execute("INSERT OR REPLACE INTO meta VALUES ('sha256', ?)", (meta["sha256"],))
        db.commit()
    except BaseException:
        db.close()
        tmp.unlink(missing_ok=True)
        raise
    db.close()
    os.replace(tmp, db_path)
    return _state(db_path, source, meta)


def _extend(
    db_path: Path,
    source: Path,
    kind: str,
    meta: dict[str, Any],
    st: os.stat_result,
    progress: Callable[[int], None] | None,
) -> IndexState:
    db = sqlite3.connect(str(db_path), timeout=30)
    try:
        meta = _read_into(db, source, kind, meta, int(meta.get("offset", 0)), st, progress)
        db.commit()
    finally:
        db.close()
    return _state(db_path, source, meta)


def _read_into(
    db: sqlite3.Connection,
    source: Path,
    kind: str,
    meta: dict[str, Any],
    start: int,
    st: os.stat_result,
    progress: Callable[[int], None] | None,
) -> dict[str, Any]:
    insert = KINDS[kind].insert
    mark = db.execute(KINDS[kind].mark).fetchone()[0]
    cache: dict[tuple[str, str], int] = {}
    lines, bad, first_bad = int(meta["lines"]), int(meta["bad"]), meta.get("first_bad")
    long, first_long = int(meta.get("long") or 0), meta.get("first_long")
    offset = start
    next_id = int(meta.get("next", 1))
    batch: list[tuple[int, int, int, dict[str, Any]]] = []
    loads = jsonutil.loads
    with source.open("rb") as handle:
        handle.seek(start)
        line_id = next_id
        # one loop, no generator between: a records file may have millions of lines
        for off, size, line in capped_lines(handle):
            if line is None:
                long += 1
                first_long = first_long or line_id
            elif line[-1:] != b"\n":
                break  # a last piece with no newline: left for the next refresh
            else:
                try:
                    value = loads(line)  # the newline (and any other white space around the JSON) is allowed
                except ValueError:
                    value = None
                if type(value) is dict:
                    lines += 1
                    batch.append((line_id, off, size - 1, value))
                    if len(batch) >= _BATCH:
                        insert(db, batch, cache)
                        batch = []
                        if progress is not None:
                            progress(off + size)
                elif line.strip():
                    bad += 1
                    first_bad = first_bad or line_id
            offset = off + size
            line_id += 1
            next_id = line_id
    if batch:
        insert(db, batch, cache)
    db.execute(KINDS[kind].fill, (mark,))
    meta = {
        **meta,
        "lines": lines,
        "bad": bad,
        "first_bad": first_bad,
        "long": long,
        "first_long": first_long,
        "next": next_id,
        "offset": offset,
        "size": st.st_size,
        "mtime": st.st_mtime_ns,
        "head": _head_hash(source, offset),
    }
    db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", list(meta.items()))
    return meta


def _state(db_path: Path, source: Path, meta: dict[str, Any], in_run_folder: bool = False) -> IndexState:
    size = int(meta.get("size", 0))
    return IndexState(
        db=db_path,
        source=source,
        lines=int(meta.get("lines", 0)),
        bad_lines=int(meta.get("bad", 0)),
        first_bad=meta.get("first_bad"),
        tail_bytes=max(0, size - int(meta.get("offset", 0))),
        size=size,
        long_lines=int(meta.get("long") or 0),
        first_long=meta.get("first_long"),
        in_run_folder=in_run_folder,
    )


def read_lines(source: Path, spans: Iterable[tuple[int, int]]) -> list[dict[str, Any] | None]:
    """The JSON objects at (offset, length) in ``source``; None for one that no longer parses there."""
    out: list[dict[str, Any] | None] = []
    with source.open("rb") as handle:
        for off, length in spans:
            handle.seek(max(0, off))
            try:
                value = jsonutil.loads(handle.read(max(0, min(length, MAX_LINE_BYTES))))
            except ValueError:
                value = None
            out.append(value if isinstance(value, dict) else None)
    return out


def main(argv: list[str]) -> int:
    """``python -m evalkit.view.index KIND PATH``: what :func:`start_build` runs (at the lowest priority)."""
    if len(argv) != 2 or argv[0] not in KINDS:
        print("usage: python -m evalkit.view.index records|sent PATH", file=sys.stderr)
        return 2
    refresh(Path(argv[1]), argv[0])
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""The response store: raw successful responses keyed by what determines them.

SQLite in WAL mode through aiosqlite. Writes are group-committed by one
writer task: while one transaction commits, new answers gather for the next,
so the batch grows with the load and an idle store commits at once (no timer).
``put`` returns a future that resolves when the answer's transaction has
committed; the model client hands an answer to the engine only then, so any
sample the engine has recorded is already in the store. A committed
transaction is in the WAL file, which survives a killed process
(``synchronous=NORMAL`` gives up durability only on power loss / OS crash).
What a killed run loses is the answers it received but had not committed:
those few are asked again on resume.

Every ``put`` future resolves, whatever happens, so no request waits forever:

- an answer the store cannot keep (larger than SQLite's largest value, about
  1 GB, or any error SQLite raises for that row alone) fails with
  :class:`StoreRefused`, for that answer only: its sample fails as
  ``unstorable``, the rest of the batch commits;
- a full disk fails the pending answers with one
  :class:`~evalkit.errors.DiskFullError` (and every later ``put`` at once);
- any other error of the store (locked for longer than ``BUSY_TIMEOUT_MS``,
  an I/O error, a crashed writer task) fails them with one
  :class:`~evalkit.errors.WriteFailed` naming the file: the run stops there
  (exit 1), and what had committed stays for the resume.

Each row carries a checksum (BLAKE2b of its key and stored bytes), checked on
every read: an answer whose bytes changed since it was stored is not used but
asked again (and the new answer replaces it), and :attr:`ResponseStore.changed`
counts them for the run's summary. Rows of stores written before checksums
existed (schema 1, no ``application_id``) have none: the store is migrated in
place (a nullable column added, O(1)) and their rows are used unverified, counted
in :attr:`ResponseStore.unverified`; every answer stored since has a checksum.

A damaged store of evalkit's own (SQLite finds a page malformed, when the
store is opened or later in the run) never stops a run: it is set aside
untouched, its answers that still read and verify are used, new answers go
to a fresh file beside it, and one warning names both
(:mod:`evalkit.clients.store_damage`). :attr:`ResponseStore.damaged` is the
file set aside, :attr:`ResponseStore.path` the one written.

A file at the store's path that evalkit did not make (another SQLite database,
or not SQLite at all) is never modified: :class:`StoreError` (exit 2) names it
and what was expected. evalkit's stores carry ``PRAGMA application_id``
:data:`APPLICATION_ID`; a new store gets it, with its table, in one transaction.

Errors are never stored, so a retry after a failure always reaches the
endpoint. ``refresh_since`` (a unix time) ignores answers stored before it:
``--refresh-cache`` asks everything again once, and a resumed refresh run
still uses what it refreshed before it was killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import logging
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalkit.clients.store_damage import diagnose, is_damage, replacement_path, salvage
from evalkit.clients.store_key import StoreRefused as StoreRefused  # re-exported: tests name it here
from evalkit.clients.store_key import response_key as response_key
from evalkit.errors import DiskFullError, UserError, WriteFailed, human_bytes
from evalkit.util import jsonutil
from evalkit.util.diskfull import disk_full, is_disk_full

if TYPE_CHECKING:
    import aiosqlite

log = logging.getLogger("evalkit.store")

#: ``PRAGMA application_id`` of an evalkit response store ("EVKS"): how evalkit knows a file is its own
APPLICATION_ID = 0x45564B53
#: ``PRAGMA user_version``: 2 = rows carry a checksum (1, never written: the stores before the marker)
SCHEMA_VERSION = 2
#: how long a write waits for another connection's lock before the store counts as failed
BUSY_TIMEOUT_MS = 10_000
#: bytes a row needs besides its answer (key, model name, time, checksum, record header), kept free under the limit
ROW_OVERHEAD = 4096

_CREATE = """
CREATE TABLE responses (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    response BLOB NOT NULL,
    created REAL NOT NULL,
    checksum TEXT
)
"""
#: the columns of the table as evalkit has always written it (before checksums)
_LEGACY_COLUMNS = frozenset({"key", "model", "response", "created"})
#: errors SQLite (or the sqlite3 module) raises for one row's values, not for the store: that row alone is refused
_ROW_ERRORS = (sqlite3.DataError, sqlite3.IntegrityError, OverflowError, ValueError, TypeError, MemoryError)


def checksum(key: str, blob: bytes) -> str:
    """The checksum a row carries: BLAKE2b-128 of its key and its stored bytes (a moved or edited row fails it)."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(key.encode())
    digest.update(b"\x00")
    digest.update(blob)
    return digest.hexdigest()


class StoreError(UserError):
    """The store file cannot be opened (a folder, no permission, not SQLite, not evalkit's)."""


def _verifies(key: str, blob: bytes, stored_sum: str) -> bool:
    return checksum(key, blob) == stored_sum


class _Damaged(Exception):
    """The file is evalkit's store, but SQLite finds it damaged (the message says where)."""


@dataclass(slots=True)
class _Row:
    model: str
    blob: bytes
    created: float
    checksum: str
    #: the futures of every put of this row, resolved once it has committed (or failed)
    waiting: list[asyncio.Future[None]] = field(default_factory=list)
    #: taken by a commit in progress: a later put of the key makes a new row instead of joining this one
    flushing: bool = False


#: SQLITE_MAX_LENGTH as SQLite ships it
_SQLITE_DEFAULT_MAX_LENGTH = 1_000_000_000


@functools.cache
def _sqlite_length_limit() -> int:
    """SQLite's largest string or blob in this build (1,000,000,000 bytes unless compiled otherwise).

    Python 3.10's sqlite3 cannot ask (``getlimit`` came in 3.11): SQLite's compiled-in default stands.
    """
    with contextlib.closing(sqlite3.connect(":memory:")) as probe:
        if not hasattr(probe, "getlimit"):
            return _SQLITE_DEFAULT_MAX_LENGTH
        return int(probe.getlimit(sqlite3.SQLITE_LIMIT_LENGTH))


def _limited_connection(limit: int | None) -> type[sqlite3.Connection]:
    """A connection class that lowers SQLite's length limit to ``limit`` (None: SQLite's own), in its own thread."""

    class Connection(sqlite3.Connection):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            if limit is not None and hasattr(self, "setlimit"):  # 3.11+; the store checks sizes itself anyway
                self.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, limit)

    return Connection


class ResponseStore:
    """Async key -> response map backed by one SQLite file."""

    def __init__(
        self,
        path: str | Path,
        *,
        refresh: bool = False,
        refresh_since: float | None = None,
        flush_interval: float = 0.0,
        max_value_bytes: int | None = None,
    ) -> None:
        self.path = Path(path)
        self.refresh_since = refresh_since if refresh_since is not None else (time.time() if refresh else None)
        self.flush_interval = flush_interval
        #: SQLite's largest string or blob (its length limit), lowered to this when given
        self.max_value_bytes = max_value_bytes or _sqlite_length_limit()
        self._db: aiosqlite.Connection | None = None
        self._pending: dict[str, _Row] = {}
        self._writer: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._closing = False
        #: set once a commit met a full disk: later puts fail at once with it
        self.full: DiskFullError | None = None
        #: set once the store failed otherwise (locked, I/O error, the writer crashed): later puts fail at once
        self.broken: WriteFailed | None = None
        #: stored answers whose bytes no longer match their checksum (not used: asked again)
        self.changed = 0
        #: stored answers read without a checksum to check (written before checksums existed)
        self.unverified = 0
        self._changed_warned = False
        #: the damaged store set aside (read-only, never written) while :attr:`path` is the fresh one beside it
        self.damaged: Path | None = None
        #: what SQLite found damaged in it
        self.damage: str | None = None
        #: answers copied from the damaged store into the fresh one (those that still read and verify)
        self.salvaged = 0
        self._damage_read_warned = False

    @property
    def refresh(self) -> bool:
        return self.refresh_since is not None

    @property
    def stopped(self) -> DiskFullError | WriteFailed | None:
        """Why the store takes no more answers (a full disk, a failure), or None while it works."""
        return self.full or self.broken

    async def open(self) -> ResponseStore:
        try:
            await self._open_file()
        except _Damaged as damaged:
            await self._close_db()
            await self._set_aside(str(damaged))
        self._writer = asyncio.create_task(self._write_loop())
        return self

    async def _open_file(self) -> None:
        """Open (or create) the file at :attr:`path` as evalkit's store (:class:`_Damaged`: ours, but damaged)."""
        try:
            if self.path.exists() and not self.path.is_file():
                raise StoreError(f"response store {self.path}: not a file; set cache.path to a file or use --no-cache")
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fresh = not self.path.exists() or self.path.stat().st_size == 0
            if not fresh:
                damage = await asyncio.to_thread(diagnose, self.path, APPLICATION_ID)
                if damage is not None:
                    raise _Damaged(damage)
            import aiosqlite  # a run without a store (--no-cache) never loads it

            self._db = await aiosqlite.connect(self.path, factory=_limited_connection(self.max_value_bytes))
            await self._db.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_MS)}")
            await self._adopt(fresh)
            await self._db.execute("PRAGMA journal_mode=WAL")
            await self._db.execute("PRAGMA synchronous=NORMAL")
        except (StoreError, _Damaged):
            await self._close_db()
            raise
        except (sqlite3.Error, OSError) as error:
            await self._close_db()
            if is_disk_full(error):
                raise disk_full(self.path) from None
            if is_damage(error):
                raise StoreError(
                    f"response store {self.path}: cannot be read ({error}) and is not recognisably evalkit's; "
                    "evalkit leaves it untouched. Move it away, point cache.path elsewhere, or use --no-cache"
                ) from None
            raise StoreError(
                f"response store {self.path}: cannot open it ({error}); set cache.path or use --no-cache"
            ) from None

    async def _set_aside(self, why: str) -> None:
        """Leave the damaged store at :attr:`path` as it is, read what it still holds, and write beside it."""
        if self.damaged is not None:  # the replacement is damaged too: nothing left to fall back on
            raise StoreError(
                f"response store {self.path}: damaged ({why}), as is {self.damaged}, the store it replaces; evalkit "
                "leaves both untouched. Move them away, point cache.path elsewhere, or use --no-cache"
            )
        self.damaged, self.damage = self.path, why
        self.path = replacement_path(self.damaged)
        log.warning(
            "response store %s is damaged (SQLite: %s); evalkit leaves it untouched, copies the answers it can still "
            "read and verify into %s, and keeps new answers there. To start clean, move %s away (the answers in %s can "
            "take its name)",
            self.damaged,
            why,
            self.path,
            self.damaged,
            self.path,
        )
        replacement_is_new = not self.path.exists() or self.path.stat().st_size == 0
        try:
            await self._open_file()
        except _Damaged as damaged:
            await self._close_db()
            await self._set_aside(str(damaged))
            return
        if not replacement_is_new:
            return  # an earlier run's replacement already holds what could be saved
        try:
            self.salvaged = await asyncio.to_thread(salvage, self.damaged, self.path, _verifies, BUSY_TIMEOUT_MS)
        except (sqlite3.Error, OSError) as error:  # saving is a courtesy: without it every answer is asked again
            log.warning("response store %s: could not copy answers from %s (%s)", self.path, self.damaged, error)
        else:
            log.info("response store %s: %d answers saved from %s", self.path, self.salvaged, self.damaged)

    async def _inspect(self) -> tuple[int, set[str], set[str]]:
        """(application_id, table names, columns of ``responses``) of the open file."""
        assert self._db is not None
        async with self._db.execute("PRAGMA application_id") as cursor:
            row = await cursor.fetchone()
        app_id = int(row[0]) if row else 0
        async with self._db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        ) as cursor:
            tables = {str(name) for (name,) in await cursor.fetchall()}
        columns: set[str] = set()
        if "responses" in tables:
            async with self._db.execute("PRAGMA table_info(responses)") as cursor:
                columns = {str(info[1]) for info in await cursor.fetchall()}
        return app_id, tables, columns

    async def _adopt(self, fresh: bool) -> None:
        """Make sure the file is evalkit's store: create it when new, migrate an older one, refuse anyone else's."""
        assert self._db is not None
        app_id, tables, columns = await self._inspect()
        if app_id == APPLICATION_ID and "checksum" in columns:
            return
        legacy = app_id == 0 and tables == {"responses"} and columns >= _LEGACY_COLUMNS
        new = app_id == 0 and not tables and fresh
        ours = app_id == APPLICATION_ID and "responses" in tables
        if not (legacy or new or ours):
            found = f"application_id {app_id:#x}" if app_id else "no application_id"
            found += f" and tables {', '.join(sorted(tables))}" if tables else " and no table"
            raise StoreError(
                f"response store {self.path}: not an evalkit response store (expected SQLite application_id "
                f"{APPLICATION_ID:#x} or one table `responses`; found {found}); evalkit leaves it untouched. "
                "Point cache.path (or output_dir) elsewhere, or move the file away"
            )
        # one transaction, re-checked under the write lock: a second evalkit opening the same new file waits here
        await self._db.execute("BEGIN IMMEDIATE")
        try:
            app_id, tables, columns = await self._inspect()
            if not tables:
                await self._db.execute(_CREATE)
            elif "checksum" not in columns:
                await self._db.execute("ALTER TABLE responses ADD COLUMN checksum TEXT")
            await self._db.execute(f"PRAGMA application_id={APPLICATION_ID}")
            await self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            await self._db.commit()
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                await self._db.rollback()
            raise

    async def get(self, key: str) -> dict[str, Any] | None:
        """A stored response, or None (also for one stored before ``refresh_since``, or one that changed)."""
        found = await self.get_with_time(key)
        return found[0] if found is not None else None

    async def get_with_time(self, key: str) -> tuple[dict[str, Any], float] | None:
        """A stored response and when it was stored (unix time), or None as :meth:`get` (also for a damaged page)."""
        if self._db is None:
            return None
        pending = self._pending.get(key)
        if pending is not None:
            return jsonutil.loads(pending.blob), float(pending.created)
        return await self._read(self._db, key)

    async def _read(self, db: aiosqlite.Connection, key: str) -> tuple[dict[str, Any], float] | None:
        args: tuple[str] | tuple[str, float]
        if self.refresh_since is None:
            sql, args = "SELECT response, created, checksum FROM responses WHERE key = ?", (key,)
        else:
            sql, args = (
                "SELECT response, created, checksum FROM responses WHERE key = ? AND created >= ?",
                (key, self.refresh_since),
            )
        try:
            async with db.execute(sql, args) as cursor:
                row = await cursor.fetchone()
        except (sqlite3.Error, ValueError) as error:
            if isinstance(error, ValueError):  # a connection closed meanwhile: a damaged file is being replaced
                return None
            if not is_damage(error):
                raise
            self._damaged_read(error)
            return None
        if not row:
            return None
        blob, created, stored_sum = row
        if not isinstance(blob, bytes):  # a value edited into TEXT (or a number) by hand: its bytes as SQLite has them
            blob = blob.encode("utf-8", "surrogateescape") if isinstance(blob, str) else str(blob).encode()
        if stored_sum is None:
            self.unverified += 1
        elif stored_sum != checksum(key, blob):
            self._changed(key, "its bytes do not match the checksum stored with them")
            return None
        try:
            return jsonutil.loads(blob), float(created)
        except ValueError as error:  # only an unverified row can get here
            self._changed(key, f"it is not valid JSON ({error})")
            return None

    def _damaged_read(self, error: BaseException) -> None:
        """A read met a damaged page (after the store was opened): that answer is asked again; said once."""
        if not self._damage_read_warned:
            self._damage_read_warned = True
            log.warning(
                "response store %s: reading an answer met a damaged page (SQLite: %s); asking again (a write that "
                "meets it sets the file aside, untouched, and goes on in %s)",
                self.path,
                error,
                replacement_path(self.path),
            )

    def _changed(self, key: str, why: str) -> None:
        """Count an answer that changed since it was stored; the caller asks again (its new answer replaces it)."""
        self.changed += 1
        if not self._changed_warned:
            self._changed_warned = True
            log.warning(
                "response store %s: the answer stored under key %s changed since it was stored (%s); asking again "
                "(the run's summary counts every such answer)",
                self.path,
                key[:16],
                why,
            )

    def put(self, key: str, model: str, response: dict[str, Any]) -> asyncio.Future[None]:
        """Queue a response for the next commit; the returned future resolves once it is committed.

        It fails with :class:`StoreRefused` when this answer cannot be kept, with the store's error when the store
        takes nothing more (:attr:`stopped`, or closed).
        """
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        # not ``self._db``: it is None for a moment while a damaged file is replaced, and the writer waits that out
        if self.stopped is not None or self._writer is None or self._writer.done():
            return _failed(done, self.stopped or WriteFailed(str(self.path), "the response store is closed"))
        try:
            blob = jsonutil.dumps_bytes(response)
        except (TypeError, ValueError, OverflowError, MemoryError) as error:
            return _failed(done, StoreRefused(f"the answer cannot be written as JSON to the response store: {error}"))
        largest = self.max_value_bytes - ROW_OVERHEAD
        if len(blob) > largest:
            return _failed(
                done,
                StoreRefused(
                    f"the answer ({human_bytes(len(blob))}) is larger than the response store {self.path} can keep "
                    f"({human_bytes(largest)}, SQLite's largest value); not scored, not asked again"
                ),
            )
        earlier = self._pending.get(key)
        row = _Row(model, blob, time.time(), checksum(key, blob))
        if earlier is not None and not earlier.flushing:
            row.waiting = earlier.waiting  # the earlier put was never sent to SQLite: it resolves with this one
        row.waiting.append(done)
        self._pending[key] = row
        self._wake.set()
        return done

    async def _write_loop(self) -> None:
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                if self.flush_interval:
                    await asyncio.sleep(self.flush_interval)
                await self._flush()
                if self.stopped is not None or (self._closing and not self._pending):
                    return
        except asyncio.CancelledError:
            self._fail_pending(WriteFailed(str(self.path), "the response store was closed before it committed"))
            raise
        except BaseException as error:  # a bug or a crash in the writer: nothing may wait forever on it
            self._break(error)

    async def _commit(self, rows: list[tuple[str, _Row]]) -> None:
        assert self._db is not None
        await self._db.executemany(
            "INSERT OR REPLACE INTO responses (key, model, response, created, checksum) VALUES (?, ?, ?, ?, ?)",
            [(key, row.model, row.blob, row.created, row.checksum) for key, row in rows],
        )
        await self._db.commit()

    async def _rollback(self) -> None:
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error, ValueError):
                await self._db.rollback()

    async def _flush(self) -> None:
        if not self._pending or self._db is None or self.stopped is not None:
            return
        batch = [(key, row) for key, row in self._pending.items() if not row.flushing]
        for _, row in batch:
            row.flushing = True
        try:
            await self._commit(batch)
        except Exception as error:
            await self._rollback()
            if is_disk_full(error):
                needed = sum(len(key) + len(row.blob) + len(row.model) for key, row in batch)
                self.full = disk_full(self.path, needed)
                self._fail_pending(self.full)
            elif is_damage(error):
                for _, row in batch:
                    row.flushing = False
                if await self._replace(error):
                    await self._flush()  # the same answers, into the fresh store
            elif not isinstance(error, _ROW_ERRORS):
                self._break(error)
            elif len(batch) == 1:
                self._refuse(*batch[0], error)
            else:
                await self._one_by_one(batch)  # find the rows SQLite refuses; the others commit
            return
        self._settle(batch)

    async def _one_by_one(self, batch: list[tuple[str, _Row]]) -> None:
        """Commit a batch that failed for one row's sake row by row: refuse the bad rows, keep the rest."""
        for key, row in batch:
            try:
                await self._commit([(key, row)])
            except _ROW_ERRORS as error:
                await self._rollback()
                self._refuse(key, row, error)
                continue
            except Exception as error:
                await self._rollback()
                if is_disk_full(error):
                    self.full = disk_full(self.path, len(key) + len(row.blob))
                    self._fail_pending(self.full)
                else:
                    self._break(error)
                return
            self._settle([(key, row)])

    async def _replace(self, error: BaseException) -> bool:
        """A commit met a damaged page: set the file aside and go on in a fresh one (False: the store broke)."""
        await self._close_db()
        try:
            await self._set_aside(str(error))
        except (StoreError, sqlite3.Error, OSError) as failure:
            self._break(failure)
            return False
        return True

    def _settle(self, rows: list[tuple[str, _Row]]) -> None:
        """Committed: drop the rows from the pending map (unless put again meanwhile) and resolve their futures."""
        for key, row in rows:
            if self._pending.get(key) is row:
                del self._pending[key]
            for future in row.waiting:
                if not future.done():
                    future.set_result(None)

    def _refuse(self, key: str, row: _Row, error: BaseException) -> None:
        if self._pending.get(key) is row:
            del self._pending[key]
        refused = StoreRefused(
            f"the response store {self.path} refused the answer ({human_bytes(len(row.blob))}): "
            f"{type(error).__name__}: {error}; not scored, not asked again"
        )
        for future in row.waiting:
            _failed(future, refused)

    def _break(self, error: BaseException) -> None:
        """The store failed as a whole: every waiting answer and every later put fail with one error naming it."""
        if self.broken is None:
            self.broken = WriteFailed(str(self.path), error)
            log.debug("response store %s failed", self.path, exc_info=error)
        self._fail_pending(self.broken)

    def _fail_pending(self, error: BaseException) -> None:
        pending, self._pending = self._pending, {}
        for row in pending.values():
            for future in row.waiting:
                _failed(future, error)

    async def close(self) -> None:
        """Commit what is pending and close the file; never raises, and always closes (its thread is not a daemon)."""
        self._closing = True
        self._wake.set()
        try:
            if self._writer is not None:
                await asyncio.gather(self._writer, return_exceptions=True)
            await self._flush()
        finally:
            self._fail_pending(self.stopped or WriteFailed(str(self.path), "the response store was closed"))
            await self._close_db()

    async def _close_db(self) -> None:
        db, self._db = self._db, None
        if db is not None:
            with contextlib.suppress(sqlite3.Error, ValueError, OSError):
                await db.close()


def _failed(future: asyncio.Future[None], error: BaseException) -> asyncio.Future[None]:
    """Fail ``future`` (once), its exception marked retrieved: an abandoned future leaves no stray log."""
    if not future.done():
        future.set_exception(error)
        future.exception()
    return future

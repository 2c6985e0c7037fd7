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

A full disk fails the pending answers' futures with one
:class:`~evalkit.errors.DiskFullError` (and every later ``put`` at once): the
run stops there, and what had committed stays for the resume.

Errors are never stored, so a retry after a failure always reaches the
endpoint. ``refresh_since`` (a unix time) ignores answers stored before it:
``--refresh-cache`` asks everything again once, and a resumed refresh run
still uses what it refreshed before it was killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import sqlite3
import time
from pathlib import Path
from typing import Any

import aiosqlite

from evalkit.clients.request import ModelRequest
from evalkit.errors import DiskFullError, UserError
from evalkit.util import jsonutil
from evalkit.util.diskfull import disk_full, is_disk_full

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    response BLOB NOT NULL,
    created REAL NOT NULL
)
"""


def response_key(model_name: str, request: ModelRequest) -> str:
    """The store key of a request to the model configured as ``model_name``.

    ``request.key`` covers the model id, messages, audio hashes, generation
    parameters and repeat index; the configured name is added because two
    servers may serve different models under one id (``default``, a local
    path), and the store outlives a run. URL, batch size, timeouts and retry
    settings never enter it.
    """
    return hashlib.sha256(f"{model_name}\x00{request.key}".encode()).hexdigest()


class StoreError(UserError):
    """The store file cannot be opened (a folder, no permission, not SQLite)."""


class ResponseStore:
    """Async key -> response map backed by one SQLite file."""

    def __init__(
        self,
        path: str | Path,
        *,
        refresh: bool = False,
        refresh_since: float | None = None,
        flush_interval: float = 0.0,
    ) -> None:
        self.path = Path(path)
        self.refresh_since = refresh_since if refresh_since is not None else (time.time() if refresh else None)
        self.flush_interval = flush_interval
        self._db: aiosqlite.Connection | None = None
        self._pending: dict[str, tuple[str, bytes, float]] = {}
        self._waiting: list[asyncio.Future[None]] = []
        self._writer: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._closing = False
        #: set once a commit met a full disk: later puts fail at once with it
        self.full: DiskFullError | None = None

    @property
    def refresh(self) -> bool:
        return self.refresh_since is not None

    async def open(self) -> ResponseStore:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = await aiosqlite.connect(self.path)
            await self._db.execute("PRAGMA journal_mode=WAL")
            await self._db.execute("PRAGMA synchronous=NORMAL")
            await self._db.execute("PRAGMA busy_timeout=10000")
            await self._db.execute(_SCHEMA)
            await self._db.commit()
        except (sqlite3.Error, OSError) as error:
            if self._db is not None:
                await self._db.close()
                self._db = None
            if is_disk_full(error):
                raise disk_full(self.path) from None
            raise StoreError(
                f"response store {self.path}: cannot open it ({error}); set cache.path or use --no-cache"
            ) from None
        self._writer = asyncio.create_task(self._write_loop())
        return self

    async def get(self, key: str) -> dict[str, Any] | None:
        """A stored response, or None (also for one stored before ``refresh_since``)."""
        found = await self.get_with_time(key)
        return found[0] if found is not None else None

    async def get_with_time(self, key: str) -> tuple[dict[str, Any], float] | None:
        """A stored response and when it was stored (unix time), or None as :meth:`get`."""
        if self._db is None:
            return None
        pending = self._pending.get(key)
        if pending is not None:
            return jsonutil.loads(pending[1]), float(pending[2])
        args: tuple[str] | tuple[str, float]
        if self.refresh_since is None:
            sql, args = "SELECT response, created FROM responses WHERE key = ?", (key,)
        else:
            sql, args = (
                "SELECT response, created FROM responses WHERE key = ? AND created >= ?",
                (key, self.refresh_since),
            )
        async with self._db.execute(sql, args) as cursor:
            row = await cursor.fetchone()
        return (jsonutil.loads(row[0]), float(row[1])) if row else None

    def put(self, key: str, model: str, response: dict[str, Any]) -> asyncio.Future[None]:
        """Queue a response for the next commit; the returned future resolves once it is committed."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self.full is not None or self._db is None or self._writer is None or self._writer.done():
            done.set_exception(self.full or RuntimeError(f"response store {self.path} is closed"))
            done.exception()  # retrieved: nobody need care
            return done
        self._pending[key] = (model, jsonutil.dumps_bytes(response), time.time())
        self._waiting.append(done)
        self._wake.set()
        return done

    async def _write_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if self.flush_interval:
                await asyncio.sleep(self.flush_interval)
            await self._flush()
            if self._closing and not self._pending:
                return

    async def _flush(self) -> None:
        if not self._pending or self._db is None:
            return
        batch = list(self._pending.items())
        waiting, self._waiting = self._waiting, []
        try:
            await self._db.executemany(
                "INSERT OR REPLACE INTO responses (key, model, response, created) VALUES (?, ?, ?, ?)",
                [(key, model, blob, created) for key, (model, blob, created) in batch],
            )
            await self._db.commit()
        except (sqlite3.Error, OSError) as error:
            failure: Exception = error
            if is_disk_full(error):
                needed = sum(len(key) + len(blob) + len(model) for key, (model, blob, _) in batch)
                self.full = disk_full(self.path, needed)
                failure = self.full
                with contextlib.suppress(sqlite3.Error):
                    await self._db.rollback()
            for key, value in batch:
                if self._pending.get(key) is value:
                    del self._pending[key]
            for future in waiting:
                if not future.done():
                    future.set_exception(failure)
                    future.exception()  # retrieved: a writer cancelled meanwhile leaves no stray log
            return
        for key, value in batch:
            if self._pending.get(key) is value:
                del self._pending[key]
        for future in waiting:
            if not future.done():
                future.set_result(None)

    async def close(self) -> None:
        self._closing = True
        self._wake.set()
        if self._writer is not None:
            await asyncio.gather(self._writer, return_exceptions=True)
        await self._flush()
        if self._db is not None:
            await self._db.close()
            self._db = None

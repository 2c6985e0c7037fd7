"""The response store: raw successful responses keyed by what determines them.

SQLite in WAL mode through aiosqlite. Writes are group-committed by one
writer task (a commit per response would cost a thread hop and an fsync
each), at most ``flush_interval`` seconds behind; a killed run loses at most
that window of answers, which are simply asked again on resume. Errors are
never stored, so a retry after a failure always reaches the endpoint.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiosqlite

from evalkit import jsonutil

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    response BLOB NOT NULL,
    created REAL NOT NULL DEFAULT (julianday('now'))
)
"""


class ResponseStore:
    """Async key -> response map backed by one SQLite file."""

    def __init__(self, path: str | Path, *, refresh: bool = False, flush_interval: float = 0.05) -> None:
        self.path = Path(path)
        self.refresh = refresh
        self.flush_interval = flush_interval
        self._db: aiosqlite.Connection | None = None
        self._pending: dict[str, tuple[str, bytes]] = {}
        self._writer: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._closing = False

    async def open(self) -> ResponseStore:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = await aiosqlite.connect(self.path)
        await self._db.execute("PRAGMA journal_mode=WAL")
        await self._db.execute("PRAGMA synchronous=NORMAL")
        await self._db.execute(_SCHEMA)
        await self._db.commit()
        self._writer = asyncio.create_task(self._write_loop())
        return self

    async def get(self, key: str) -> dict[str, Any] | None:
        """A stored response, or None (always None with ``refresh``: the answer is asked again)."""
        if self.refresh or self._db is None:
            return None
        pending = self._pending.get(key)
        if pending is not None:
            return jsonutil.loads(pending[1])
        async with self._db.execute("SELECT response FROM responses WHERE key = ?", (key,)) as cursor:
            row = await cursor.fetchone()
        return jsonutil.loads(row[0]) if row else None

    async def contains_many(self, keys: list[str]) -> int:
        """How many of ``keys`` are stored (for dry runs and progress)."""
        if self._db is None or not keys:
            return 0
        found = 0
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            marks = ",".join("?" * len(chunk))
            async with self._db.execute(f"SELECT COUNT(*) FROM responses WHERE key IN ({marks})", chunk) as cursor:
                row = await cursor.fetchone()
                found += int(row[0]) if row else 0
        return found

    async def put(self, key: str, model: str, response: dict[str, Any]) -> None:
        self._pending[key] = (model, jsonutil.dumps_bytes(response))
        self._wake.set()

    async def _write_loop(self) -> None:
        while not self._closing:
            await self._wake.wait()
            self._wake.clear()
            await asyncio.sleep(self.flush_interval)
            await self._flush()

    async def _flush(self) -> None:
        if not self._pending or self._db is None:
            return
        batch = list(self._pending.items())
        await self._db.executemany(
            "INSERT OR REPLACE INTO responses (key, model, response) VALUES (?, ?, ?)",
            [(key, model, blob) for key, (model, blob) in batch],
        )
        await self._db.commit()
        for key, value in batch:
            if self._pending.get(key) is value:
                del self._pending[key]

    async def close(self) -> None:
        self._closing = True
        self._wake.set()
        if self._writer is not None:
            await asyncio.gather(self._writer, return_exceptions=True)
        await self._flush()
        if self._db is not None:
            await self._db.close()
            self._db = None

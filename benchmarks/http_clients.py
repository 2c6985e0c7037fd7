"""Why the hot path uses aiohttp: requests/s of aiohttp and of httpx's default pool, same load, same server.

768 chat requests, 128 in flight, against evalkit's test server answering after 100 ms
(ideal: 1,280 requests/s), each client on a fresh event loop in this process::

    python -m benchmarks.http_clients          # needs httpx (the test extra)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any

import aiohttp
import httpx

from evalkit.testing import start_test_server

REQUESTS, IN_FLIGHT, LATENCY_MS = 768, 128, 100


def _body(i: int) -> dict[str, object]:
    return {"model": "m", "messages": [{"role": "user", "content": f"question {i}"}]}


async def _aiohttp(url: str) -> float:
    sem = asyncio.Semaphore(IN_FLIGHT)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=IN_FLIGHT)) as session:

        async def one(i: int) -> None:
            async with sem, session.post(url + "/chat/completions", json=_body(i)) as response:
                await response.json()

        started = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(REQUESTS)))
        return REQUESTS / (time.perf_counter() - started)


async def _httpx(url: str) -> float:
    sem = asyncio.Semaphore(IN_FLIGHT)
    async with httpx.AsyncClient(timeout=60) as client:

        async def one(i: int) -> None:
            async with sem:
                (await client.post(url + "/chat/completions", json=_body(i))).json()

        started = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(REQUESTS)))
        return REQUESTS / (time.perf_counter() - started)


def main() -> None:
    clients: dict[str, Callable[[str], Coroutine[Any, Any, float]]] = {
        "aiohttp": _aiohttp,
        "httpx (default pool)": _httpx,
    }
    server = start_test_server({"latency_ms": LATENCY_MS, "default_answer": "ok"})
    try:
        ideal = IN_FLIGHT * 1000 / LATENCY_MS
        for name, drive in clients.items():
            rate = asyncio.run(drive(server.base_url))
            print(f"{name}: {rate:,.0f} requests/s ({rate / ideal:.0%} of the ideal {ideal:,.0f})")
    finally:
        server.stop()


if __name__ == "__main__":
    main()

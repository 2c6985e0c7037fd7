"""One endpoint replica: a persistent keep-alive aiohttp session and one attempt at a time.

httpx's default pool is CPU-bound at high concurrency (measured here: 59
req/s at 128 in flight and 100 ms latency, where raw aiohttp managed 1,124),
so the hot path speaks aiohttp directly. The session belongs to the
endpoint, shared by every engine; its connection limit equals the number of
workers the model client runs against it.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import aiohttp

from evalkit import jsonutil
from evalkit.clients.protocol import (
    EndpointProtocol,
    ParseError,
    chat_body,
    error_message,
    extract_chat_answer,
    extract_transcription,
    transcription_form,
)
from evalkit.clients.request import ModelRequest

#: statuses that will fail the same way again: not retried
NON_RETRYABLE = frozenset({400, 401, 403, 404, 405, 413, 415, 422})


@dataclass(slots=True)
class Attempt:
    """The result of one HTTP attempt, classified for the retry policy."""

    text: str | None = None
    raw: dict | None = None
    usage: dict | None = None
    failure: str | None = None
    error: str | None = None
    status: int | None = None
    retry_after: float | None = None
    latency: float = 0.0

    @property
    def retryable(self) -> bool:
        return self.failure is not None and self.status not in NON_RETRYABLE


class EndpointPool:
    """HTTP access to one replica; concurrency is bounded by the caller's workers."""

    def __init__(self, protocol: EndpointProtocol, connections: int, timeout: float) -> None:
        self.protocol = protocol
        self.url = protocol.url
        self.name = protocol.base_url
        self.timeout = timeout
        self._connections = connections
        self._session: aiohttp.ClientSession | None = None
        self._headers = {**protocol.headers}

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self._connections, limit_per_host=self._connections, ttl_dns_cache=300, keepalive_timeout=60)
            self._session = aiohttp.ClientSession(
                connector=connector,
                headers=self._headers,
                json_serialize=jsonutil.dumps,
                timeout=aiohttp.ClientTimeout(total=None),
            )
        return self._session

    async def attempt(self, request: ModelRequest) -> Attempt:
        session = self._get_session()
        started = time.perf_counter()
        timeout = aiohttp.ClientTimeout(total=self.timeout)
        try:
            if request.kind == "chat":
                data = jsonutil.dumps_bytes(chat_body(request))
                ctx = session.post(self.url, data=data, headers={"Content-Type": "application/json"}, timeout=timeout)
            else:
                ctx = session.post(self.url, data=transcription_form(request), timeout=timeout)
            async with ctx as response:
                body = await response.read()
                status = response.status
                retry_after = _retry_after(response.headers.get("Retry-After"))
        except asyncio.TimeoutError:
            return Attempt(failure="timeout", error=f"no answer within {self.timeout:g} s", latency=time.perf_counter() - started)
        except aiohttp.ClientConnectorError as error:
            return Attempt(failure="connection", error=f"cannot connect to {self.name}: {error.os_error or error}", latency=time.perf_counter() - started)
        except (aiohttp.ClientError, ConnectionError, OSError) as error:
            return Attempt(failure="connection", error=f"{type(error).__name__}: {error}", latency=time.perf_counter() - started)
        latency = time.perf_counter() - started
        payload = _decode(body)
        if status >= 400:
            text = body[:300].decode("utf-8", "replace")
            return Attempt(failure=f"http_{status}", status=status, error=error_message(payload, text), retry_after=retry_after, latency=latency)
        try:
            if payload is _UNDECODABLE:
                raise ParseError(f"response is not JSON: {body[:120]!r}")
            if request.kind == "chat":
                text, usage = extract_chat_answer(payload)
            else:
                text, usage = extract_transcription(payload)
        except ParseError as error:
            return Attempt(failure="parse", status=status, error=str(error), latency=latency)
        return Attempt(text=text, raw=payload, usage=usage, status=status, latency=latency)

    async def close(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()


_UNDECODABLE = object()


def _decode(body: bytes) -> object:
    try:
        return jsonutil.loads(body)
    except ValueError:
        text = body.decode("utf-8", "replace")
        return text if text and not text.lstrip().startswith(("{", "[")) else _UNDECODABLE


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None

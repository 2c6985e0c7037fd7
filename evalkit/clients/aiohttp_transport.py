"""The general HTTP transport: one persistent keep-alive aiohttp session per endpoint.

It carries what the lean keep-alive client does not: https, multipart forms
(transcriptions), URLs with credentials, and every request when
``EVALKIT_LEAN_HTTP=0``. httpx's default pool is CPU-bound at high
concurrency (measured here: 59 req/s at 128 in flight and 100 ms latency,
where raw aiohttp managed 1,124), so this speaks aiohttp directly. The
session's connection limit equals the number of workers the model client
runs against the endpoint.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

from evalkit.clients.transport import (
    Reply,
    TransportFailure,
    cannot_connect,
    closed_mid_body,
    connection_error,
    timed_out,
    too_large,
    unexpected_stream,
)
from evalkit.util import jsonutil

#: bytes read at a time from a body whose size is unknown or over the cap
_READ_CHUNK = 64 * 1024


class AiohttpTransport:
    """POSTs through one lazily made ``aiohttp.ClientSession``; answers as :class:`Reply` or TransportFailure."""

    def __init__(self, headers: dict[str, str], connections: int, timeout: float, max_body: int, name: str) -> None:
        self._headers = headers
        self._connections = connections
        self._max_body = max_body
        self._name = name
        self._session: aiohttp.ClientSession | None = None
        self._timeout = timeout
        #: the usual attempt's timeout, made once: a frozen ClientTimeout per request is measurable at 10k req/s
        self._default_timeout = aiohttp.ClientTimeout(total=timeout)

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(
                limit=self._connections, limit_per_host=self._connections, ttl_dns_cache=300, keepalive_timeout=60
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                headers=self._headers,
                json_serialize=jsonutil.dumps,
                timeout=aiohttp.ClientTimeout(total=None),
            )
        return self._session

    async def post(self, url: str, arguments: dict[str, Any], limit: float) -> Reply:
        """One POST within ``limit`` seconds; ``arguments`` are ``ClientSession.post``'s (data, headers)."""
        session = self._get_session()
        timeout = self._default_timeout if limit == self._timeout else aiohttp.ClientTimeout(total=limit)
        received: int | None = None  # body bytes read so far; None until the headers came
        try:
            async with session.post(url, timeout=timeout, **arguments) as response:
                status = response.status
                content_type = response.content_type
                received = 0
                if status < 400 and content_type == "text/event-stream":
                    response.close()
                    raise unexpected_stream(status)
                length = response.content_length
                if length is not None and length <= self._max_body:
                    body = await response.read()  # the common case: a known, acceptable size
                else:
                    chunks = []
                    async for chunk in response.content.iter_chunked(_READ_CHUNK):
                        received += len(chunk)
                        if received > self._max_body:
                            break
                        chunks.append(chunk)
                    if received > self._max_body:
                        response.close()  # the rest is never read: memory stays bounded by the cap
                        raise too_large(status, length, received, self._max_body)
                    body = b"".join(chunks)
                # only an error answer may say when to come back
                return Reply(status, content_type, body, response.headers if status >= 400 else None)
        except asyncio.TimeoutError:
            raise timed_out(limit, received) from None
        except aiohttp.ClientConnectorError as error:
            reason = (
                error.os_error.strerror
                if error.os_error is not None and error.os_error.strerror
                else type(error.os_error or error).__name__
            )
            raise cannot_connect(self._name, reason) from None
        except aiohttp.ClientPayloadError as error:
            raise closed_mid_body(f"{type(error).__name__}: {error}") from None
        except TransportFailure:
            raise
        except (aiohttp.ClientError, ConnectionError, OSError) as error:
            raise connection_error(error) from None

    async def close(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()

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
from collections.abc import Callable, Mapping
from typing import Any

import aiohttp
import yarl

from evalkit.clients.decoding import ACCEPT_ENCODING, CappedBody, is_identity
from evalkit.clients.redirects import is_redirect, redirect_target
from evalkit.clients.transport import (
    Reply,
    TransportFailure,
    cannot_connect,
    closed_mid_body,
    connection_error,
    switching_protocols,
    timed_out,
    too_large,
    unexpected_stream,
)
from evalkit.util import jsonutil

#: bytes read at a time from the socket (compressed bytes, for a compressed body)
_READ_CHUNK = 64 * 1024

#: ``ClientSession.post``'s keyword arguments for one request (data, headers), or a function that makes them
#: afresh: a multipart form can be sent once only, so following a redirect needs a new one
Arguments = Mapping[str, Any] | Callable[[], Mapping[str, Any]]


class AiohttpTransport:
    """POSTs through one lazily made ``aiohttp.ClientSession``; answers as :class:`Reply` or TransportFailure.

    aiohttp neither follows redirects nor decompresses here: it would re-send
    a payload to any origin a server names, and the body cap must count
    decoded bytes (:mod:`evalkit.clients.redirects`, :mod:`evalkit.clients.decoding`).
    """

    def __init__(
        self,
        headers: dict[str, str],
        connections: int,
        timeout: float,
        max_body: int,
        name: str,
        follow_redirects: bool = False,
    ) -> None:
        # only encodings the body reader inflates with a bound (aiohttp would add br/zstd when installed)
        self._headers = {"Accept-Encoding": ACCEPT_ENCODING, **headers}
        self._connections = connections
        self._max_body = max_body
        self._name = name
        self._follow_redirects = follow_redirects
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
                auto_decompress=False,
            )
        return self._session

    async def post(self, url: str, arguments: Arguments, limit: float) -> Reply:
        """One POST within ``limit`` seconds, redirects followed included (see :mod:`evalkit.clients.redirects`)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit
        target = yarl.URL(url)
        hops = 0
        while True:
            left = limit if hops == 0 else deadline - loop.time()
            if left <= 0:
                raise timed_out(limit, None)
            timeout = self._default_timeout if left == self._timeout else aiohttp.ClientTimeout(total=left)
            reply = await self._exchange(target, arguments() if callable(arguments) else arguments, timeout, limit)
            if not is_redirect(reply.status):
                return reply
            target = redirect_target(reply.status, reply.location, target, self._follow_redirects, hops)
            hops += 1

    async def _exchange(
        self, url: yarl.URL, arguments: Mapping[str, Any], timeout: aiohttp.ClientTimeout, limit: float
    ) -> Reply:
        """One request and its answer; a 3xx comes back without its body (the caller decides where it leads)."""
        session = self._get_session()
        received: int | None = None  # body bytes read so far; None until the headers came
        try:
            async with session.post(url, timeout=timeout, allow_redirects=False, **arguments) as response:
                status = response.status
                content_type = response.content_type
                received = 0
                if status == 101:
                    response.close()
                    raise switching_protocols()
                if status < 400 and content_type == "text/event-stream":
                    response.close()
                    raise unexpected_stream(status)
                if is_redirect(status):
                    response.close()  # its body is never needed: the connection is not kept for it
                    return Reply(status, content_type, b"", None, response.headers.get("Location"))
                length = response.content_length
                if length is not None and length > self._max_body:
                    response.close()
                    raise too_large(status, length, 0, self._max_body)
                encoding = response.headers.get("Content-Encoding")
                if length is not None and is_identity(encoding):
                    data = await response.read()  # the common case: a known, acceptable size, sent as it is
                else:
                    try:
                        body = CappedBody(encoding, status, length, self._max_body)
                        async for chunk in response.content.iter_chunked(_READ_CHUNK):
                            received += len(chunk)
                            body.feed(chunk)  # TransportFailure as soon as the cap is passed, decoded
                        data = body.finish()
                    except TransportFailure:
                        response.close()  # the rest is never read: memory stays bounded by the cap
                        raise
                # only an error answer may say when to come back
                return Reply(status, content_type, data, response.headers if status >= 400 else None)
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

"""One endpoint replica: a persistent keep-alive aiohttp session and one attempt at a time.

httpx's default pool is CPU-bound at high concurrency (measured here: 59
req/s at 128 in flight and 100 ms latency, where raw aiohttp managed 1,124),
so the hot path speaks aiohttp directly. The session belongs to the
endpoint, shared by every engine; its connection limit equals the number of
workers the model client runs against it.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import email.utils
import time
from collections.abc import Mapping
from dataclasses import dataclass

import aiohttp

from evalkit.clients.protocol import (
    WIRE_FORMATS,
    EndpointProtocol,
    ParseError,
    error_message,
)
from evalkit.clients.request import ModelRequest
from evalkit.failures import FailureReason, http_reason
from evalkit.util import jsonutil
from evalkit.util.redact import redact_url, scrub, url_secrets

#: 4xx statuses that may pass on a retry (timeout, conflict, too early, rate limit); every other 4xx
#: (400, 401, 403, 404, 422, ...) fails the same way again and is not retried
RETRYABLE_4XX = frozenset({408, 409, 425, 429})


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
        if self.failure is None or self.failure in (FailureReason.CLIENT_ERROR, FailureReason.TOO_LARGE):
            return False
        status = self.status
        return status is None or status < 400 or status >= 500 or status in RETRYABLE_4XX

    @property
    def rate_limited(self) -> bool:
        """ "Busy, come back later": a 429, or a 503 that says when (a full server queue).

        Neither is a failure of the request: it waits as told, slows the
        endpoint down, and does not use up ``retry_attempts``.
        """
        return self.status == 429 or (self.status == 503 and self.retry_after is not None)

    @property
    def endpoint_fault(self) -> bool:
        """The endpoint is unreachable or broken (what a circuit breaker counts); any other answer shows it alive."""
        if self.rate_limited:
            return False
        return self.failure in ("connection", "timeout") or (self.status or 0) >= 500


class EndpointPool:
    """HTTP access to one replica; concurrency is bounded by the caller's workers.

    Error texts are built here from what we know (status, the server's own
    message, the exception class and its text) and then scrubbed of the
    endpoint's credentials, so no token reaches a record even when a library
    puts a URL or header value into an exception.
    """

    def __init__(
        self, protocol: EndpointProtocol, connections: int, timeout: float, max_body: int = 10 * 1024 * 1024
    ) -> None:
        self.protocol = protocol
        self.url = protocol.url
        self._urls = {kind: protocol.url_for(kind) for kind in WIRE_FORMATS}
        self.name = redact_url(protocol.base_url)
        self.timeout = timeout
        #: the largest body read (``max_response_bytes``); a bigger one fails as too_large, unread
        self.max_body = max_body
        self._connections = connections
        self._session: aiohttp.ClientSession | None = None
        self._headers = {**protocol.headers}
        self._secrets = [s for s in (protocol.auth_token, *url_secrets(protocol.base_url)) if s]
        #: the usual attempt's timeout, made once: a frozen ClientTimeout per request is measurable at 10k req/s
        self._default_timeout = aiohttp.ClientTimeout(total=timeout)

    def __repr__(self) -> str:
        return f"EndpointPool({self.name!r})"

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

    async def attempt(self, request: ModelRequest, timeout: float | None = None) -> Attempt:
        """One attempt within ``timeout`` seconds (default: the endpoint's per-attempt timeout)."""
        try:
            attempt = await self._attempt(
                request, self.timeout if timeout is None else max(0.001, min(timeout, self.timeout))
            )
        except asyncio.CancelledError:
            raise
        except Exception as error:
            attempt = Attempt(failure=FailureReason.CLIENT_ERROR, error=f"{type(error).__name__}: {error}")
        if attempt.error and self._secrets:
            attempt.error = scrub(attempt.error, self._secrets)
        return attempt

    async def _attempt(self, request: ModelRequest, limit: float) -> Attempt:
        session = self._get_session()
        wire = WIRE_FORMATS[request.kind]
        started = time.perf_counter()
        timeout = self._default_timeout if limit == self.timeout else aiohttp.ClientTimeout(total=limit)
        received: int | None = None  # body bytes read so far; None until the headers came
        try:
            ctx = session.post(self._urls[request.kind], timeout=timeout, **wire.post_arguments(request))
            async with ctx as response:
                status = response.status
                # only an error answer may say when to come back: a 200 skips two header lookups
                retry_after = retry_after_seconds(response.headers) if status >= 400 else None
                content_type = response.content_type
                received = 0
                if status < 400 and content_type == "text/event-stream":
                    response.close()
                    return Attempt(
                        failure=FailureReason.UNEXPECTED_STREAM,
                        status=status,
                        error="a 200 with an event stream (text/event-stream) although none was asked for",
                        latency=time.perf_counter() - started,
                    )
                length = response.content_length
                if length is not None and length <= self.max_body:
                    body = await response.read()  # the common case: a known, acceptable size
                else:
                    chunks = []
                    async for chunk in response.content.iter_chunked(_READ_CHUNK):
                        received += len(chunk)
                        if received > self.max_body:
                            break
                        chunks.append(chunk)
                    if received > self.max_body:
                        response.close()  # the rest is never read: memory stays bounded by the cap
                        size = f"{length} bytes" if length is not None else f"over {received} bytes so far"
                        return Attempt(
                            failure=FailureReason.TOO_LARGE,
                            status=status,
                            error=f"answer body of {size} is over max_response_bytes ({self.max_body}); cut off unread",
                            latency=time.perf_counter() - started,
                        )
                    body = b"".join(chunks)
        except asyncio.TimeoutError:
            if received is None:
                error = f"no answer within {limit:g} s"
            else:
                error = (
                    f"the answer's body did not finish within {limit:g} s ({received} bytes after the headers: "
                    "a stalled or trickling body)"
                )
            return Attempt(failure=FailureReason.TIMEOUT, error=error, latency=time.perf_counter() - started)
        except aiohttp.ClientConnectorError as error:
            reason = (
                error.os_error.strerror
                if error.os_error is not None and error.os_error.strerror
                else type(error.os_error or error).__name__
            )
            return Attempt(
                failure=FailureReason.CONNECTION,
                error=f"cannot connect to {self.name}: {reason}",
                latency=time.perf_counter() - started,
            )
        except aiohttp.ClientPayloadError as error:
            return Attempt(
                failure=FailureReason.CONNECTION,
                error=f"the connection closed mid-body ({type(error).__name__}: {error})",
                latency=time.perf_counter() - started,
            )
        except (aiohttp.ClientError, ConnectionError, OSError) as error:
            return Attempt(
                failure=FailureReason.CONNECTION,
                error=f"{type(error).__name__}: {error}",
                latency=time.perf_counter() - started,
            )
        latency = time.perf_counter() - started
        payload = _decode(body)
        if status >= 400:
            text = body[:300].decode("utf-8", "replace")
            return Attempt(
                failure=http_reason(status),
                status=status,
                error=f"HTTP {status}: {error_message(payload, text)}",
                retry_after=retry_after,
                latency=latency,
            )
        unusable = _unusable(body, payload, content_type, wire.plain_text)
        if unusable is not None:
            reason, message = unusable
            return Attempt(failure=reason, status=status, error=message, latency=latency)
        try:
            text, usage = wire.parse(payload)
        except ParseError as error:
            return Attempt(failure=error.reason, status=status, error=str(error), latency=latency)
        return Attempt(
            text=text,
            raw=payload if isinstance(payload, dict) else {"text": payload},
            usage=usage,
            status=status,
            latency=latency,
        )

    async def close(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()


_UNDECODABLE = object()
#: bytes read at a time from a body whose size is unknown or over the cap
_READ_CHUNK = 64 * 1024


def _unusable(body: bytes, payload: object, content_type: str, plain_text: bool) -> tuple[str, str] | None:
    """Why a 200 body cannot hold an answer before its fields are even read (reason, error), or None."""
    if isinstance(payload, (dict, list)):
        return None  # JSON, whatever its Content-Type says
    if isinstance(payload, str) and plain_text and content_type not in ("text/html", "application/xhtml+xml"):
        return None  # a transcription in the ``text`` format
    if body.lstrip().startswith((b"data:", b"event:")):
        return FailureReason.UNEXPECTED_STREAM, f"a 200 with an event stream although none was asked for: {body[:80]!r}"
    if content_type == "application/json" or content_type.endswith("+json"):
        return FailureReason.PARSE, f"response is not JSON: {body[:120]!r}"
    return (
        FailureReason.CONTENT_TYPE,
        f"a 200 with Content-Type {content_type or 'none'}, not an answer: {body[:120]!r}",
    )


def _decode(body: bytes) -> object:
    try:
        return jsonutil.loads(body)
    except ValueError:
        text = body.decode("utf-8", "replace")
        return text if text and not text.lstrip().startswith(("{", "[")) else _UNDECODABLE


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from ``retry-after-ms`` (OpenAI, Azure) or ``Retry-After`` (seconds or an HTTP date)."""
    value = headers.get("retry-after-ms")
    if value:
        try:
            return max(0.0, float(value) / 1000.0)
        except ValueError:
            pass
    value = headers.get("Retry-After")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return max(0.0, (when - dt.datetime.now(dt.timezone.utc)).total_seconds())

"""One endpoint replica: one attempt at a time through its transport, and the answer classified.

A plain-HTTP JSON post (chat, completions) goes through the lean keep-alive
client (:mod:`evalkit.clients.keepalive`), everything else (https, multipart
transcriptions, URLs with credentials, and every request when
``EVALKIT_LEAN_HTTP=0``) through aiohttp (:mod:`evalkit.clients.aiohttp_transport`).
Both hand back a :class:`Reply` or a :class:`TransportFailure`; what the answer
means (an answer, an HTTP error, a body that holds none) is decided here, once.
The transports belong to the endpoint, shared by every engine.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import email.utils
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import yarl

from evalkit.clients.hints import missing_v1_hint
from evalkit.clients.keepalive import KeepAlivePool, request_head
from evalkit.clients.protocol import (
    WIRE_FORMATS,
    EndpointProtocol,
    ParseError,
    WireFormat,
    error_message,
)
from evalkit.clients.request import ModelRequest
from evalkit.clients.transport import Reply, TransportFailure
from evalkit.config import RequestKind
from evalkit.failures import FailureReason, http_reason
from evalkit.util import jsonutil
from evalkit.util.redact import redact_url, scrub, url_secrets

if TYPE_CHECKING:
    from evalkit.clients.aiohttp_transport import AiohttpTransport

#: ``EVALKIT_LEAN_HTTP=0`` sends every request through aiohttp (to compare, or should a server mind the lean client)
LEAN_HTTP_SWITCH = "EVALKIT_LEAN_HTTP"


def lean_http_enabled() -> bool:
    """Whether plain-HTTP JSON posts take the lean keep-alive client (``EVALKIT_LEAN_HTTP``, on unless ``0``)."""
    return os.environ.get(LEAN_HTTP_SWITCH, "1").strip() != "0"


#: 4xx statuses that may pass on a retry (timeout, conflict, too early, rate limit); every other 4xx
#: (400, 401, 403, 404, 422, ...) fails the same way again and is not retried
RETRYABLE_4XX = frozenset({408, 409, 425, 429})
#: failures that would come back the same on another attempt
_NOT_RETRIED = frozenset(
    {
        FailureReason.CLIENT_ERROR,
        FailureReason.TOO_LARGE,
        FailureReason.REDIRECT,
        FailureReason.REDIRECT_CROSS_ORIGIN,
        FailureReason.SWITCHING_PROTOCOLS,
    }
)


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
        if self.failure is None or self.failure in _NOT_RETRIED:
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

    Error texts are built from what we know (status, the server's own
    message, the exception class and its text) and then scrubbed of the
    endpoint's credentials, so no token reaches a record even when a library
    puts a URL or header value into an exception.
    """

    def __init__(
        self,
        protocol: EndpointProtocol,
        connections: int,
        timeout: float,
        max_body: int = 10 * 1024 * 1024,
        follow_redirects: bool = False,
        hidden: Iterable[str] = (),
    ) -> None:
        self.protocol = protocol
        self.url = protocol.url
        self._urls = {kind: protocol.url_for(kind) for kind in WIRE_FORMATS}
        #: the run's other secrets, masked here too (a key of the config that also shows in this URL's path)
        self.hidden = tuple(hidden)
        self._secrets = [s for s in (protocol.auth_token, *url_secrets(protocol.base_url), *self.hidden) if s]
        # the replica's name goes into every record and page: its URL without credentials, wherever they sit
        self.name = scrub(redact_url(protocol.base_url), self._secrets)
        self.timeout = timeout
        #: the largest body read (``max_response_bytes``); a bigger one fails as too_large, unread
        self.max_body = max_body
        #: the model's follow_redirects (same-origin 307/308 only; see evalkit.clients.redirects)
        self.follow_redirects = follow_redirects
        self._connections = connections
        #: aiohttp, made (and imported: ~90 ms of start-up) on the first request the lean client does not carry
        self._aiohttp: AiohttpTransport | None = None
        #: the lean client and, per request kind it carries, the cached header block of its POST
        self._lean: KeepAlivePool | None = None
        self._heads: dict[RequestKind, bytes] = {}
        if lean_http_enabled():
            self._lean, self._heads = _lean_route(
                self._urls, protocol.headers, connections, max_body, self.name, follow_redirects
            )

    def __repr__(self) -> str:
        return f"EndpointPool({self.name!r})"

    @property
    def lean(self) -> bool:
        """Whether requests of this endpoint's own kind take the lean keep-alive client."""
        return self.protocol.kind in self._heads

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
        if attempt.status == 404 and attempt.error:
            attempt.error += missing_v1_hint(self.protocol, self.name)
        if attempt.error and self._secrets:
            attempt.error = scrub(attempt.error, self._secrets)
        return attempt

    async def _attempt(self, request: ModelRequest, limit: float) -> Attempt:
        wire = WIRE_FORMATS[request.kind]
        started = time.perf_counter()
        try:
            head = self._heads.get(request.kind)
            if head is not None and self._lean is not None:
                reply = await self._lean.post(head, wire.json_pieces(request), limit)
            else:
                # a function, not the arguments: a redirect followed needs a fresh multipart form
                reply = await self._general().post(
                    self._urls[request.kind], partial(wire.post_arguments, request), limit
                )
        except TransportFailure as failure:
            return Attempt(
                failure=failure.reason, status=failure.status, error=str(failure), latency=time.perf_counter() - started
            )
        return classify(reply, wire, time.perf_counter() - started)

    def _general(self) -> AiohttpTransport:
        if self._aiohttp is None:
            from evalkit.clients.aiohttp_transport import AiohttpTransport

            self._aiohttp = AiohttpTransport(
                {**self.protocol.headers},
                self._connections,
                self.timeout,
                self.max_body,
                self.name,
                self.follow_redirects,
            )
        return self._aiohttp

    def shut(self) -> None:
        """Cut every exchange in flight now (a launcher took the replica out); :meth:`close` still follows."""
        if self._lean is not None:
            self._lean.shut()

    async def close(self) -> None:
        if self._lean is not None:
            await self._lean.close()
        if self._aiohttp is not None:
            await self._aiohttp.close()


def _lean_route(
    urls: Mapping[RequestKind, str],
    headers: Mapping[str, str],
    connections: int,
    max_body: int,
    name: str,
    follow_redirects: bool = False,
) -> tuple[KeepAlivePool | None, dict[RequestKind, bytes]]:
    """The lean client for a plain-HTTP endpoint and the header block of each JSON kind, or (None, {}).

    https, a URL with credentials in it (aiohttp turns them into basic auth)
    and a header that cannot be sent as it is stay with aiohttp.
    """
    heads: dict[RequestKind, bytes] = {}
    host: tuple[str, int] | None = None
    for kind, url in urls.items():
        wire = WIRE_FORMATS[kind]
        parsed = yarl.URL(url)
        if not wire.json or parsed.scheme != "http" or parsed.user is not None or parsed.raw_host is None:
            continue
        where = (parsed.raw_host, parsed.port or 80)
        if host is not None and where != host:
            continue  # every kind of one endpoint has one host:port; a pool speaks to one
        try:
            head = request_head(
                parsed.host_port_subcomponent or parsed.raw_host,
                parsed.raw_path_qs,
                {"Content-Type": "application/json", **headers},
            )
        except ValueError:
            continue
        host = where
        heads[kind] = head
    if host is None:
        return None, {}
    return KeepAlivePool(host[0], host[1], connections, max_body, name, follow_redirects=follow_redirects), heads


def classify(reply: Reply, wire: WireFormat, latency: float) -> Attempt:
    """What an HTTP answer means: an answer with its text and usage, an HTTP error, or a 200 that holds none."""
    status = reply.status
    body = reply.body
    payload = _decode(body)
    if status >= 400:
        text = body[:300].decode("utf-8", "replace")
        return Attempt(
            failure=http_reason(status),
            status=status,
            error=f"HTTP {status}: {error_message(payload, text)}",
            retry_after=retry_after_seconds(reply.retry_headers) if reply.retry_headers is not None else None,
            latency=latency,
        )
    unusable = _unusable(body, payload, reply.content_type, wire.plain_text)
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


_UNDECODABLE = object()


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

"""What makes ``evalkit serve`` safe to leave running: who may ask, how much body it holds, how long a body may take.

Before a handler reads a byte of a request's body, one middleware checks, in order:

- the API key (``--api-key`` or ``EVALKIT_SERVE_API_KEY``): when one is set, every request except
  ``GET /health`` must send ``Authorization: Bearer KEY`` (compared in constant time), or gets 401.
  ``/health`` stays open so a supervisor, a load balancer or evalkit's own launcher can tell
  "loading" from "dead" without the key; it says only ok, loading or failed.
- the request's ``Content-Length`` against the per-request limit: 413 at once, the body unread.
- the total in-flight body budget: a request reserves its ``Content-Length`` (a chunked body
  reserves as its chunks arrive) until its answer is sent, since its bytes, and what is decoded
  from them, live that long; a request that does not fit gets 503 with ``Retry-After``, the body
  unread, so a burst of large uploads cannot take the machine's memory.
- a deadline for the whole body (``--body-timeout``): a sender slower than that gets 408, so slow
  connections cannot hold their reservations (or sockets) for ever.

A response sent before its body was read to the end closes the connection: aiohttp would
otherwise keep reading (and discarding) what the client still sends. A client that goes away
mid-request is one INFO line in the log, not a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import BodyPartReader, HttpVersion11, hdrs, web
from aiohttp.typedefs import Middleware

from evalkit.serve.errors import RequestError, error_response

if sys.version_info >= (3, 11):
    from asyncio import timeout_at
else:  # aiohttp depends on async-timeout below 3.11: the same context manager
    from async_timeout import timeout_at

log = logging.getLogger("evalkit.serve")

#: the environment variable that sets the API key when ``--api-key`` is not given (keeps it out of ``ps``)
API_KEY_ENV = "EVALKIT_SERVE_API_KEY"
#: paths that answer without the API key (liveness/readiness probes)
OPEN_PATHS = frozenset({"/health"})
#: the largest request body by default: ~25 min of 16 kHz 16-bit audio as base64, with room to spare
DEFAULT_MAX_BODY_BYTES = 256 * 1024 * 1024
#: seconds a whole request body may take to arrive
DEFAULT_BODY_TIMEOUT_S = 60.0
#: the default budget is this fraction of the machine's memory: what a body holds is decoded
#: (audio to float32 samples, images to pixels), a few times its size, so the bound stays well inside RAM
BUDGET_FRACTION_OF_RAM = 1 / 8
#: the budget when the machine's memory cannot be read
FALLBACK_BUDGET_BYTES = 2 * 1024**3
#: what a request refused for want of budget is told to wait
BUDGET_RETRY_AFTER_S = 1

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def physical_memory_bytes() -> int | None:
    """The machine's RAM, from sysconf (no psutil at run time); None where the platform does not say."""
    try:
        pages, page_size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None
    return pages * page_size if pages > 0 and page_size > 0 else None


def default_body_budget(max_body_bytes: int) -> int:
    """An eighth of the machine's memory, and never less than one request of the largest size."""
    memory = physical_memory_bytes()
    budget = int(memory * BUDGET_FRACTION_OF_RAM) if memory else FALLBACK_BUDGET_BYTES
    return max(budget, max_body_bytes)


@dataclass(frozen=True)
class Limits:
    """The server's limits; ``api_key`` None means every request is let in (``repr`` never shows the key)."""

    max_body_bytes: int
    body_budget_bytes: int
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S
    api_key: str | None = field(default=None, repr=False)


class BodyBudget:
    """Bytes of request bodies held at once, across all requests (the event loop's only: no lock)."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.held = 0

    def take(self, size: int) -> bool:
        if self.held + size > self.total:
            return False
        self.held += size
        return True

    def give(self, size: int) -> None:
        self.held -= size


class Reservation:
    """One request's share of the budget: its Content-Length up front, more as a chunked body arrives."""

    def __init__(self, budget: BodyBudget, limits: Limits) -> None:
        self.budget = budget
        self.limits = limits
        self.held = 0
        self.read = 0

    def take(self, size: int) -> None:
        """Hold ``size`` more bytes, or raise the 503 that tells the client to come back."""
        if not self.budget.take(size):
            raise RequestError(
                503,
                f"the server holds {self.budget.held} bytes of request bodies and its budget is "
                f"{self.budget.total} bytes (--body-budget-mb): no room for {size} more now; retry later",
                code="server_busy",
                headers={"Retry-After": str(BUDGET_RETRY_AFTER_S)},
            )
        self.held += size

    def count(self, size: int) -> None:
        """``size`` more body bytes have arrived: within the per-request limit, and reserved."""
        self.read += size
        if self.read > self.limits.max_body_bytes:
            raise _too_large(self.read, self.limits, "at least ")
        if self.read > self.held:
            self.take(self.read - self.held)

    def release(self) -> None:
        self.budget.give(self.held)
        self.held = 0


def _too_large(size: int, limits: Limits, qualifier: str = "") -> RequestError:
    return RequestError(
        413,
        f"request body of {qualifier}{size} bytes is larger than this server's limit of {limits.max_body_bytes} "
        "bytes (--max-body-mb)",
        code="request_too_large",
    )


class Guard:
    """The checks above for one application: its middleware, its ``Expect: 100-continue`` handler, its body readers."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.budget = BodyBudget(limits.body_budget_bytes)
        self._key = limits.api_key.encode("utf-8") if limits.api_key else None

    # ------------------------------------------------------------------ checks before the body

    def _check_key(self, request: web.Request) -> None:
        if self._key is None or request.path in OPEN_PATHS:
            return
        header = request.headers.get(hdrs.AUTHORIZATION)
        if not header:
            raise _unauthorized("no API key: this server wants the header 'Authorization: Bearer KEY'")
        scheme, _, token = header.strip().partition(" ")
        given = token.strip().encode("utf-8", "surrogateescape") if scheme.lower() == "bearer" else b""
        # compare_digest takes as long whatever the key's first differing byte (its length may show)
        if not hmac.compare_digest(given, self._key):
            raise _unauthorized("incorrect API key (the header 'Authorization: Bearer KEY' must carry this server's)")

    def _check_length(self, request: web.Request) -> int | None:
        length = request.content_length
        if length is not None and length > self.limits.max_body_bytes:
            raise _too_large(length, self.limits)
        return length

    async def expect(self, request: web.Request) -> web.StreamResponse | None:
        """``Expect:`` on a POST route: the middleware answers it once the request is let in.

        aiohttp's own handler sends ``100 Continue`` before any middleware runs; deferring it lets a
        client that asks first (curl does for bodies over 1 MB) get its 401, 413 or 503 without sending
        the body, and lets the budget be taken in the same step as the check (no await between them).
        """
        if request.headers.get(hdrs.EXPECT, "").lower() == "100-continue":
            return None
        response = error_response(RequestError(417, f"unknown Expect: {request.headers.get(hdrs.EXPECT)}"))
        response.force_close()
        return response

    # ------------------------------------------------------------------ the middleware

    def middleware(self) -> Middleware:
        """The outermost middleware: refusals before the body, the reservation's lifetime, closing, disconnects."""

        @web.middleware
        async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
            reservation = Reservation(self.budget, self.limits)
            try:
                response = await self._guarded(request, handler, reservation)
            except ConnectionError:
                _log_gone(request, reservation, "while its request was being read or answered")
                response = web.Response(status=400)  # never delivered; aiohttp drops it quietly
            finally:
                reservation.release()
            if not request.content.is_eof():  # answered before the body ended: do not read the rest
                response.force_close()
            elif request.transport is None or request.transport.is_closing():
                _log_gone(request, reservation, "before its answer was sent")
            return response

        return guard

    async def _guarded(self, request: web.Request, handler: Handler, reservation: Reservation) -> web.StreamResponse:
        try:
            self._check_key(request)
            length = self._check_length(request)
            if length:
                reservation.take(length)
        except RequestError as error:
            return error_response(error)
        request[_RESERVATION] = reservation
        request[_DEADLINE] = asyncio.get_running_loop().time() + self.limits.body_timeout_s
        if request.version == HttpVersion11 and request.headers.get(hdrs.EXPECT, "").lower() == "100-continue":
            await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            request.writer.output_size = 0  # as aiohttp's own handler: the answer itself has not started
        return await handler(request)

    # ------------------------------------------------------------------ reading bodies within the limits

    @contextlib.asynccontextmanager
    async def deadline(self, request: web.Request) -> AsyncIterator[None]:
        """Body reads inside this block end with 408 at the request's body deadline."""
        deadline = request.get(_DEADLINE)
        if deadline is None:  # not through the middleware (a test's bare handler): from now
            deadline = asyncio.get_running_loop().time() + self.limits.body_timeout_s
        try:
            async with timeout_at(deadline):
                yield
        except asyncio.TimeoutError:  # async_timeout's (Python 3.10) is not the builtin TimeoutError
            raise RequestError(
                408,
                f"the request body did not arrive within {self.limits.body_timeout_s:g} s (--body-timeout)",
                code="request_timeout",
            ) from None

    def _reservation(self, request: web.Request) -> Reservation:
        reservation = request.get(_RESERVATION)
        return reservation if isinstance(reservation, Reservation) else Reservation(self.budget, self.limits)

    async def read_body(self, request: web.Request) -> bytearray:
        """The whole body, counted against the limits as it arrives (one buffer, sized up front from the length)."""
        reservation = self._reservation(request)
        length = request.content_length
        async with self.deadline(request):
            if length:
                body = bytearray(length)
                view = memoryview(body)
                while chunk := await request.content.readany():
                    reservation.count(len(chunk))
                    view[reservation.read - len(chunk) : reservation.read] = chunk
                view.release()
                return body
            body = bytearray()
            while chunk := await request.content.readany():
                reservation.count(len(chunk))
                body += chunk
            return body

    async def read_part(self, request: web.Request, part: BodyPartReader) -> bytearray:
        """One multipart part's bytes, counted like :meth:`read_body` (call inside :meth:`deadline`)."""
        reservation = self._reservation(request)
        data = bytearray()
        while chunk := await part.read_chunk(1 << 16):
            reservation.count(len(chunk))
            data += chunk
        return data


# typed request keys where aiohttp has them (3.13+: a str key warns there), plain names before
_RequestKey = getattr(web, "RequestKey", None)
_RESERVATION: Any = _RequestKey("evalkit_serve_body_reservation", Reservation) if _RequestKey else "evalkit_body"
_DEADLINE: Any = _RequestKey("evalkit_serve_body_deadline", float) if _RequestKey else "evalkit_body_deadline"


def _unauthorized(message: str) -> RequestError:
    return RequestError(401, message, code="invalid_api_key", headers={"WWW-Authenticate": "Bearer"})


def _log_gone(request: web.Request, reservation: Reservation, when: str) -> None:
    length = request.content_length
    arrived = getattr(request.content, "total_bytes", reservation.read)  # read or still buffered
    received = f"{arrived} of {length}" if length is not None else str(arrived)
    log.info(
        "client %s closed the connection %s (%s %s, %s body bytes received)",
        request.remote,
        when,
        request.method,
        request.path,
        received,
    )

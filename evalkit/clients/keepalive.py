"""A lean HTTP/1.1 keep-alive client for JSON POSTs to one plain-HTTP host:port.

On 2 cores the request phase is set by the client's CPU per request, and
``aiohttp.ClientSession.post`` spends most of it on what this path never
needs (URL objects, header multidicts, cookie jars, tracing hooks, a stream
reader per answer). Here a request is bytes made beforehand (one cached header
block per target and headers, then Content-Length and the body) written to a
pooled connection, and the answer is parsed by ``httptools`` (llhttp, the same
parser family aiohttp and uvicorn use) into a :class:`Reply` in the protocol's
callbacks. It runs on any asyncio loop (uvloop or the standard one).

The pool keeps up to ``limit`` connections, one request on each at a time;
idle ones are reused last-in first-out (the warmest socket) and closed after
``idle_timeout`` seconds. A reused connection that the server had closed
while it sat idle (the keep-alive race) is retried once on a fresh one, but
only when not one byte of the answer came. Everything else a real server or
a broken one can do ends as a :class:`TransportFailure` with the same texts
the aiohttp transport gives (see :mod:`evalkit.clients.transport`): a
compressed body is inflated as it arrives and cut off once its decoded size
passes the cap (:mod:`evalkit.clients.decoding`), a 3xx is followed or failed
as :mod:`evalkit.clients.redirects` says, a 101 fails as switching_protocols.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections import deque
from collections.abc import Mapping
from typing import cast

import yarl
from httptools import HttpParserError, HttpParserUpgrade, HttpResponseParser

from evalkit.clients.decoding import ACCEPT_ENCODING, CappedBody, is_identity
from evalkit.clients.redirects import is_redirect, redirect_target
from evalkit.clients.transport import (
    Reply,
    TransportFailure,
    cannot_connect,
    closed_mid_body,
    switching_protocols,
    timed_out,
    too_large,
    unexpected_stream,
)
from evalkit.failures import FailureReason

#: seconds an idle connection is kept (the aiohttp transport's keepalive_timeout)
IDLE_TIMEOUT = 60.0
#: a request body: bytes, or pieces written one after the other (a chat body with each clip's base64 apart)
Body = bytes | tuple[bytes, ...]
#: seconds close() waits for the sockets to be closed by the loop
_CLOSE_WAIT = 2.0
_NO_HEADERS: dict[str, str] = {}
#: media types by raw Content-Type value: a server sends one or two, parsing each answer's is waste
_MEDIA_TYPES: dict[bytes, str] = {}


def request_head(host: str, target: str, headers: Mapping[str, str]) -> bytes:
    """The header block of a POST to ``target``, up to and including ``Content-Length: `` (the body's size follows).

    Headers are checked here, once: a name or value with CR or LF would let a
    value write headers of its own, so it is refused (ValueError).
    """
    lines = [
        f"POST {target} HTTP/1.1",
        f"Host: {host}",
        "Accept: */*",
        f"Accept-Encoding: {ACCEPT_ENCODING}",
        "User-Agent: evalkit",
    ]
    for name, value in headers.items():
        if any(c in name or c in value for c in "\r\n") or not name or ":" in name:
            raise ValueError(f"header {name!r} cannot be sent (empty name, colon or line break)")
        lines.append(f"{name}: {value}")
    return ("\r\n".join(lines) + "\r\nContent-Length: ").encode("utf-8")


class _Unanswered(TransportFailure):
    """The connection closed before one byte of the answer: on a reused connection, the keep-alive race."""

    def __init__(self) -> None:
        super().__init__(FailureReason.CONNECTION, "the server closed the connection without answering")


class KeepAlivePool:
    """Up to ``limit`` keep-alive connections to ``host:port``; :meth:`post` sends one request on one of them."""

    def __init__(
        self,
        host: str,
        port: int,
        limit: int,
        max_body: int,
        name: str,
        idle_timeout: float = IDLE_TIMEOUT,
        follow_redirects: bool = False,
    ) -> None:
        self.host = host
        self.port = port
        self.limit = max(1, limit)
        self.max_body = max_body
        #: how errors name the endpoint (a redacted URL)
        self.name = name
        self.idle_timeout = idle_timeout
        #: the model's follow_redirects: a same-origin 307/308 is sent again to its Location
        self.follow_redirects = follow_redirects
        #: idle connections, the most recently used last
        self._idle: list[_Connection] = []
        #: every connection open or being opened, counted against ``limit``
        self._open = 0
        self._all: set[_Connection] = set()
        self._waiters: deque[asyncio.Future[None]] = deque()

    def __repr__(self) -> str:
        return f"KeepAlivePool({self.name!r}, open={self._open}, idle={len(self._idle)})"

    @property
    def open_connections(self) -> int:
        return self._open

    @property
    def idle_connections(self) -> int:
        return len(self._idle)

    async def post(self, head: bytes, body: Body, limit: float) -> Reply:
        """Send ``head`` (:func:`request_head`) and ``body``; the answer within ``limit`` s, or TransportFailure.

        A 3xx is never handed back: it is followed (a same-origin 307/308 when
        the model allows it, within the same ``limit``) or fails the attempt.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit
        hops = 0
        while True:
            reply = await self._exchange(loop, head, body, deadline, limit)
            if not is_redirect(reply.status):
                return reply
            url = self._url(head)
            target = redirect_target(reply.status, reply.location, url, self.follow_redirects, hops)
            head = _retarget(head, target.raw_path_qs)
            hops += 1

    def _url(self, head: bytes) -> yarl.URL:
        """The URL a header block is sent to (to resolve a Location against)."""
        target = head[5 : head.index(b" HTTP/1.1\r\n")].decode("ascii")
        return yarl.URL.build(scheme="http", host=self.host, port=self.port).join(yarl.URL(target))

    async def _exchange(
        self, loop: asyncio.AbstractEventLoop, head: bytes, body: Body, deadline: float, limit: float
    ) -> Reply:
        """One request and its answer on one connection (twice if a reused one was found closed)."""
        retried = False
        while True:
            conn = self._take_idle(loop) or await self._connect(loop, deadline, limit)
            try:
                waiter = conn.send(head, body)
                timer = loop.call_at(deadline, conn.time_out, limit)
                try:
                    reply = await waiter
                finally:
                    timer.cancel()
            except _Unanswered:
                self._release(conn)
                if conn.reused and not retried:
                    retried = True  # the server closed it while idle: once more, on a fresh connection
                    continue
                raise
            except BaseException:  # failures, and a cancelled attempt: the connection's state is unknown
                self._release(conn)
                raise
            self._release(conn)
            return reply

    def _take_idle(self, loop: asyncio.AbstractEventLoop) -> _Connection | None:
        idle = self._idle
        if not idle:
            return None
        stale = loop.time() - self.idle_timeout
        while idle:
            conn = idle.pop()
            if conn.idle_since >= stale and not conn.closed:
                return conn
            conn.abort()
            self._forget(conn)
        return None

    async def _connect(self, loop: asyncio.AbstractEventLoop, deadline: float, limit: float) -> _Connection:
        """A connection: an idle one freed while waiting for a slot, or a new one."""
        while self._open >= self.limit:
            await self._wait_for_slot(loop, deadline, limit)
            conn = self._take_idle(loop)
            if conn is not None:
                return conn
        self._open += 1
        try:
            fresh = await self._open_connection(loop, deadline, limit)
        except BaseException:
            self._slot_freed()
            raise
        self._all.add(fresh)
        return fresh

    async def _open_connection(self, loop: asyncio.AbstractEventLoop, deadline: float, limit: float) -> _Connection:
        """A new connection by ``deadline``.

        Not ``asyncio.wait_for``: before Python 3.12 it returns the result and
        drops the cancellation when both come in one loop step, and a worker
        cancelled at shutdown would then go on working (seen: a run that never
        ended after Ctrl-C). Here a cancellation always propagates, and a
        connection that completes after it is closed.
        """
        connecting = asyncio.ensure_future(
            loop.create_connection(lambda: _Connection(self, loop), self.host, self.port)
        )
        ready: asyncio.Future[None] = loop.create_future()
        connecting.add_done_callback(lambda _: _settle(ready))
        timer = loop.call_at(deadline, _settle, ready)
        try:
            await ready
        except BaseException:
            _abandon(connecting)
            raise
        finally:
            timer.cancel()
        if not connecting.done():
            _abandon(connecting)
            raise timed_out(limit, None)
        try:
            _, conn = connecting.result()
        except OSError as error:
            raise cannot_connect(self.name, _os_reason(error)) from None
        return conn

    async def _wait_for_slot(self, loop: asyncio.AbstractEventLoop, deadline: float, limit: float) -> None:
        """Until a connection is released or closed (woken in turn), or TransportFailure at ``deadline``."""
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiters.append(waiter)
        timer = loop.call_at(deadline, _settle, waiter, timed_out(limit, None))
        try:
            await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self._wake()  # woken, then cancelled: the slot goes to the next in line
            raise
        finally:
            timer.cancel()
            with contextlib.suppress(ValueError):
                self._waiters.remove(waiter)

    def _release(self, conn: _Connection) -> None:
        """Back to the idle stack if it can carry another request, else closed."""
        if conn.reusable:
            conn.reused = True
            conn.idle_since = conn.loop.time()
            self._idle.append(conn)
            self._wake()
        else:
            conn.abort()
            self._forget(conn)

    def _forget(self, conn: _Connection) -> None:
        """A connection that is closed no longer counts against the limit (once, however it closed)."""
        if conn.counted:
            conn.counted = False
            self._all.discard(conn)
            self._slot_freed()

    def _slot_freed(self) -> None:
        self._open -= 1
        self._wake()

    def _wake(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _lost(self, conn: _Connection) -> None:
        """The loop says a connection closed: an idle one leaves the stack at once."""
        if conn in self._idle:
            self._idle.remove(conn)
        self._forget(conn)

    def shut(self) -> None:
        """Close every connection, idle or busy, now: exchanges in flight fail as unanswered, nothing more is read."""
        self._idle.clear()
        for conn in list(self._all):
            conn.close()

    async def close(self) -> None:
        """Close every connection, idle or busy, and wait (briefly) until the loop has closed their sockets."""
        conns = list(self._all)
        self.shut()
        pending = [conn.lost for conn in conns if not conn.lost.done()]
        if pending:
            await asyncio.wait(pending, timeout=_CLOSE_WAIT)


class _Connection(asyncio.Protocol):
    """One socket and its answer parser; at most one exchange at a time.

    The parser's callbacks fill the answer; the answer (a :class:`Reply`) is
    made in ``on_message_complete``, so nothing the server sends after it can
    change it, and anything it does send after it marks the connection
    unusable.
    """

    def __init__(self, pool: KeepAlivePool, loop: asyncio.AbstractEventLoop) -> None:
        self.pool = pool
        self.loop = loop
        self.max_body = pool.max_body
        self.transport: asyncio.Transport | None = None
        self.parser = HttpResponseParser(self)
        #: resolved when the loop reports the socket closed
        self.lost: asyncio.Future[None] = loop.create_future()
        self.closed = False
        #: counted in the pool's open connections
        self.counted = True
        #: has carried an answer before (so a close without answer may be the keep-alive race)
        self.reused = False
        self.idle_since = 0.0
        self.waiter: asyncio.Future[Reply] | None = None
        self._answer: Reply | None = None
        self._failure: TransportFailure | None = None
        self._got_bytes = False
        self._head_done = False
        self._keep_alive = False
        self._clear_answer()

    def _clear_answer(self) -> None:
        """Forget the answer's headers and body (a new exchange, or after a 1xx interim answer)."""
        self._status = 0
        self._content_type: bytes | None = None
        self._length: int | None = None
        self._encoding: bytes | None = None
        self._framed = False  # a Content-Length or Transfer-Encoding: else the body runs to the close
        self._retry: dict[str, str] | None = None
        self._location: bytes | None = None
        self._chunks: list[bytes] = []
        #: the decoder of a compressed body (None: the body is kept as it comes, in ``_chunks``)
        self._decoder: CappedBody | None = None
        self._received = 0

    # -- the exchange, driven by KeepAlivePool.post ------------------------------------------------

    def send(self, head: bytes, body: Body) -> asyncio.Future[Reply]:
        """Write the request; the future is the answer (or a TransportFailure)."""
        if self._answer is not None:  # a reused connection: a fresh exchange
            self._answer = None
            self._got_bytes = False
            self._head_done = False
            self._keep_alive = False
            self._clear_answer()
        waiter: asyncio.Future[Reply] = self.loop.create_future()
        self.waiter = waiter
        transport = self.transport
        if transport is None or self.closed or transport.is_closing():
            self._fail(_Unanswered())
        else:
            # one buffer list: uvloop sends it with one writev and no copy of the body (asyncio joins it)
            if isinstance(body, bytes):
                transport.writelines((head, b"%d\r\n\r\n" % len(body), body))
            else:
                transport.writelines((head, b"%d\r\n\r\n" % sum(map(len, body)), *body))
        return waiter

    @property
    def reusable(self) -> bool:
        return self._answer is not None and self._keep_alive and self._failure is None and not self.closed

    def time_out(self, limit: float) -> None:
        if self._answer is None and self._failure is None:
            self._fail(timed_out(limit, self._received if self._head_done else None))
            self.abort()

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    def close(self) -> None:
        self.closed = True
        self.reused = False  # closed by us, not by the server's idle timeout: nothing to retry
        if self.transport is not None:
            self.transport.close()

    def _fail(self, failure: TransportFailure) -> None:
        if self._failure is None:
            self._failure = failure
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(failure)

    # -- asyncio.Protocol --------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass asyncio's
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError, AttributeError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        if self.waiter is None or self._answer is not None or self._failure is not None:
            self.abort()  # bytes nobody asked for: the connection's framing can no longer be trusted
            return
        self._got_bytes = True
        try:
            self.parser.feed_data(data)
        except HttpParserUpgrade:  # the bytes after a 101 are another protocol's
            self._fail(switching_protocols())
        except HttpParserError as error:
            self._fail(TransportFailure(FailureReason.CONNECTION, f"a malformed HTTP answer ({error})", self._status))
        if self._failure is not None:  # too large, an event stream, malformed: the rest is never read
            self.abort()

    def eof_received(self) -> bool | None:
        return None  # the transport closes itself; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.pool._lost(self)
        if not self.lost.done():
            self.lost.set_result(None)
        if self.waiter is None or self._answer is not None or self._failure is not None:
            return
        if not self._got_bytes:
            self._fail(_Unanswered())
        elif self._head_done and not self._framed:
            self._finish()  # a body delimited by the close itself
        elif self._head_done:
            expected = f"of {self._length} " if self._length is not None else "of a chunked body "
            self._fail(closed_mid_body(f"{self._received} bytes {expected}received"))
        else:
            self._fail(TransportFailure(FailureReason.CONNECTION, "the connection closed in the answer's headers"))

    # -- httptools callbacks -----------------------------------------------------------------------

    def on_message_begin(self) -> None:
        if self._answer is not None:
            self._keep_alive = False  # a second answer to one request: never reuse this connection

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name == b"content-type":
            self._content_type = value
        elif name == b"content-length":
            self._length = int(value)  # llhttp has checked it is a number
            self._framed = True
        elif name == b"transfer-encoding":
            self._framed = True
        elif name == b"content-encoding":
            self._encoding = value.strip().lower()
        elif name == b"location":
            self._location = value
        elif name == b"retry-after" or name == b"retry-after-ms":
            if self._retry is None:
                self._retry = {}
            self._retry["Retry-After" if name == b"retry-after" else "retry-after-ms"] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        self._status = status
        if status == 101:
            self._fail(switching_protocols())
            return
        if status < 200:
            return  # an interim answer (100, 103): the real one follows
        self._head_done = True
        if status < 400 and self._content_type is not None and _media_type(self._content_type) == "text/event-stream":
            self._fail(unexpected_stream(status))
        elif self._length is not None and self._length > self.max_body:
            self._fail(too_large(status, self._length, 0, self.max_body))
        elif self._encoding is not None and not is_identity(self._encoding.decode("latin-1")):
            try:
                self._decoder = CappedBody(self._encoding.decode("latin-1"), status, self._length, self.max_body)
            except TransportFailure as failure:  # an encoding not asked for: its body is never read
                self._fail(failure)

    def on_body(self, body: bytes) -> None:
        if self._failure is not None:
            return  # failed at its headers or mid-body: the rest of this packet is not looked at
        received = self._received + len(body)
        self._received = received
        decoder = self._decoder
        if decoder is not None:  # a compressed body: the cap counts its bytes after decompression too
            try:
                decoder.feed(body)
            except TransportFailure as failure:
                self._fail(failure)
        elif received > self.max_body:
            self._fail(too_large(self._status, self._length, received, self.max_body))
        else:
            self._chunks.append(body)

    def on_message_complete(self) -> None:
        if self._status < 200:
            self._clear_answer()
            return
        if self._answer is not None or self._failure is not None:
            return
        self._keep_alive = self.parser.should_keep_alive()
        self._finish()

    def _finish(self) -> None:
        """The whole answer came: made into a Reply (its body decompressed already) and handed to the waiter."""
        status = self._status
        if self._decoder is not None:
            try:
                body = self._decoder.finish()
            except TransportFailure as failure:
                self._fail(failure)
                return
        else:
            chunks = self._chunks
            body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        content_type = _media_type(self._content_type) if self._content_type is not None else _OCTETS
        retry = (self._retry or _NO_HEADERS) if status >= 400 else None
        location = self._location.decode("latin-1") if self._location is not None and 300 <= status < 400 else None
        answer = Reply(status, content_type, body, retry, location)
        self._answer = answer
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(answer)


def _retarget(head: bytes, target: str) -> bytes:
    """``head`` with another request target (a same-origin redirect's path and query, percent-encoded by yarl)."""
    if not target.startswith("/") or any(c in target for c in " \r\n"):
        raise TransportFailure(FailureReason.REDIRECT, f"a redirect to a target that cannot be sent: {target[:200]!r}")
    return b"POST " + target.encode("ascii") + head[head.index(b" HTTP/1.1\r\n") :]


def _settle(future: asyncio.Future[None], failure: BaseException | None = None) -> None:
    if not future.done():
        if failure is None:
            future.set_result(None)
        else:
            future.set_exception(failure)


def _abandon(connecting: asyncio.Task[tuple[asyncio.Transport, _Connection]]) -> None:
    """Stop a connection attempt no one waits for; one that completes anyway is closed at once."""

    def close(done: asyncio.Task[tuple[asyncio.Transport, _Connection]]) -> None:
        if not done.cancelled() and done.exception() is None:
            conn = done.result()[1]
            conn.counted = False  # its slot was given back when it was abandoned
            conn.abort()

    connecting.cancel()
    connecting.add_done_callback(close)


def _os_reason(error: OSError) -> str:
    """ "Connection refused" (not asyncio's "Connect call failed (...)"), "Name or service not known", ..."""
    if isinstance(error, socket.gaierror) or not error.errno or error.errno < 0:
        return error.strerror or str(error) or type(error).__name__
    return os.strerror(error.errno)


#: the media type of an answer without Content-Type (what aiohttp reports too)
_OCTETS = "application/octet-stream"


def _media_type(raw: bytes) -> str:
    """``application/json`` from ``Application/JSON; charset=utf-8``."""
    known = _MEDIA_TYPES.get(raw)
    if known is not None:
        return known
    media = raw.split(b";", 1)[0].strip().lower().decode("latin-1") or _OCTETS
    if len(_MEDIA_TYPES) < 64:
        _MEDIA_TYPES[raw] = media
    return media

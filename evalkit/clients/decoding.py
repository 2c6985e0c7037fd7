"""An answer's body read within the cap, decoded as it arrives, for both HTTP transports.

``max_response_bytes`` bounds what a body costs in memory, so it must count
the bytes *after* decompression: a 1 MiB gzip body can inflate to 1 GiB. A
:class:`CappedBody` is fed the body's bytes as they come off the socket and
inflates them with ``zlib``'s ``max_length``, so no single step makes more
than the room left under the cap; the first byte past the cap fails the
answer as ``too_large`` and the caller stops reading. Only the encodings
both transports advertise (:data:`ACCEPT_ENCODING`) are decoded; any other
fails as ``parse`` before a byte of its body is read.
"""

from __future__ import annotations

import zlib

from evalkit.clients.transport import TransportFailure, too_large
from evalkit.failures import FailureReason

#: the Accept-Encoding both transports send: the encodings :class:`CappedBody` inflates with a bound
#: (brotli and zstd are left out: no bounded streaming decoder for them is a dependency)
ACCEPT_ENCODING = "gzip, deflate"
_GZIP = ("gzip", "x-gzip")
_IDENTITY = ("", "identity")


def is_identity(encoding: str | None) -> bool:
    """Whether a Content-Encoding value means the body is sent as it is."""
    return encoding is None or encoding.strip().lower() in _IDENTITY


class CappedBody:
    """Collects a body, decoding ``gzip``/``deflate`` on the fly; at most ``max_body`` decoded bytes are kept.

    :meth:`feed` and :meth:`finish` raise :class:`TransportFailure`:
    ``too_large`` once the raw or the decoded size passes the cap, ``parse``
    for a body that cannot be decompressed or is cut short.
    """

    __slots__ = (
        "_chunks",
        "_decoded",
        "_encoding",
        "_inflater",
        "_length",
        "_max_body",
        "_pending",
        "_raw",
        "_status",
    )

    def __init__(self, encoding: str | None, status: int, length: int | None, max_body: int) -> None:
        name = (encoding or "").strip().lower()
        if name not in _IDENTITY and name not in _GZIP and name != "deflate":
            raise TransportFailure(
                FailureReason.PARSE,
                f"the answer's Content-Encoding {name[:40]!r} is not supported (evalkit asks for {ACCEPT_ENCODING})",
                status,
            )
        self._encoding = name
        self._status = status
        self._length = length
        self._max_body = max_body
        self._chunks: list[bytes] = []
        self._raw = 0
        self._decoded = 0
        self._pending = b""
        # deflate's wrapper (zlib or raw, as some servers send it) is known from its first bytes
        self._inflater: zlib._Decompress | None = zlib.decompressobj(16 + zlib.MAX_WBITS) if name in _GZIP else None

    @property
    def size(self) -> int:
        """Decoded bytes kept so far."""
        return self._decoded

    def feed(self, data: bytes) -> None:
        """The body's next bytes as they came; TransportFailure as soon as the cap is passed."""
        if not data:
            return
        self._raw += len(data)
        if self._raw > self._max_body:  # a compressed body over the cap would be more than that decoded
            raise too_large(self._status, self._length, self._raw, self._max_body)
        if self._encoding in _IDENTITY:
            self._decoded += len(data)
            self._chunks.append(data)
            return
        inflater = self._inflater
        if inflater is None:
            data = self._pending + data
            if len(data) < 2:  # deflate's first two bytes say whether it is zlib-wrapped
                self._pending = data
                return
            inflater = self._inflater = zlib.decompressobj(_deflate_wbits(data))
        while data and not inflater.eof:
            room = self._max_body - self._decoded
            try:
                out = inflater.decompress(data, room + 1)  # never more than one byte past the cap
            except zlib.error as error:
                raise self._undecodable(f"cannot be decompressed ({error})") from None
            self._decoded += len(out)
            if self._decoded > self._max_body:
                raise too_large(self._status, None, self._decoded, self._max_body, decoded=True)
            if out:
                self._chunks.append(out)
            data = inflater.unconsumed_tail
        # bytes after the end of the compressed stream are ignored, as aiohttp and browsers do

    def finish(self) -> bytes:
        """The whole decoded body, once the last byte came."""
        inflater = self._inflater
        if self._encoding not in _IDENTITY:
            if inflater is None:  # an empty body
                raise self._undecodable("is empty")
            if not inflater.eof:
                raise self._undecodable("is truncated")
        chunks = self._chunks
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def _undecodable(self, what: str) -> TransportFailure:
        return TransportFailure(FailureReason.PARSE, f"the answer's {self._encoding} body {what}", self._status)


def _deflate_wbits(first: bytes) -> int:
    """``deflate`` is meant to be zlib-wrapped (RFC 9110); some servers send the raw stream."""
    if first[0] & 0x0F == 8 and (first[0] << 8 | first[1]) % 31 == 0:
        return zlib.MAX_WBITS
    return -zlib.MAX_WBITS

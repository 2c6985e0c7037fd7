"""Hostile and broken 200 answers, for testing that a client counts each as a failure and stays bounded.

Each kind is a fault the script can draw (``faults.rates``) or pin to a rule
(``answers: [{match: ..., fault: huge}]``). They are what a broken proxy, an
overloaded server or a misconfigured gateway sends back:

- ``empty_choices``: a ``chat.completion`` whose ``choices`` list is empty;
- ``null_content``: one choice whose ``message.content`` is ``null``;
- ``wrong_content_type``: a 200 HTML page (``text/html``), as from a gateway;
- ``huge``: a valid completion of 20 MB, sent chunked (no Content-Length), so
  only a reader that caps what it reads stays bounded;
- ``trickle``: the real answer at one byte per second (Content-Length set), so
  only a per-attempt timeout that covers the body ends it;
- ``cut``: the real answer's first half, then the connection is aborted;
- ``sse``: the answer as a ``text/event-stream`` although no stream was asked for;
- ``gzip_bomb`` / ``deflate_bomb``: a valid completion whose content is 1000 MiB
  of ``x``, sent as under 1 MiB of gzip (or zlib-wrapped deflate), so only a
  reader that caps the *decoded* size stays bounded;
- ``br_unasked``: a body in ``Content-Encoding: br``, which no client asked for;
- ``redirect_307``: a 307 to the same URL whose body is a valid completion
  (the Location adds ``?redirected=1``, where the real answer is given, so a
  client that follows same-origin redirects gets it);
- ``redirect_307_empty``: the same 307 with an empty body;
- ``redirect_away``: a 307 to another origin, the script's ``redirect_to``
  (a client that followed it would re-send the request, payload and
  credentials, there);
- ``switching_protocols``: ``101 Switching Protocols`` to WebSocket, then bytes
  of another protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import struct
import zlib
from collections.abc import Callable

from aiohttp import web

from evalkit.testing.wire import JSON, dumps

HOSTILE_KINDS = (
    "empty_choices",
    "null_content",
    "wrong_content_type",
    "huge",
    "trickle",
    "cut",
    "sse",
    "gzip_bomb",
    "deflate_bomb",
    "br_unasked",
    "redirect_307",
    "redirect_307_empty",
    "redirect_away",
    "switching_protocols",
)
#: the size of a ``huge`` answer
HUGE_BYTES = 20 * 1024 * 1024
#: seconds between two bytes of a ``trickle`` answer
TRICKLE_SECONDS = 1.0
_CHUNK = b"x" * (64 * 1024)
#: the decoded size of a ``gzip_bomb`` / ``deflate_bomb`` answer's content: 1000 MiB, so that compressed (about
#: 1,037,000 bytes) it stays under a 1 MiB max_response_bytes and only a cap on the decoded size stops it
BOMB_BYTES = 1000 * 1024 * 1024
_BOMB_BLOCK = 1024 * 1024
#: where ``redirect_away`` points when the script names no ``redirect_to`` (the discard port: nothing answers)
DEFAULT_REDIRECT_TO = "http://127.0.0.1:9/v1/chat/completions"
_BOMB_HEAD = (
    b'{"id": "chatcmpl-bomb", "object": "chat.completion", "choices": [{"index": 0, '
    b'"message": {"role": "assistant", "content": "'
)
_BOMB_TAIL = b'"}, "finish_reason": "length"}], "usage": null}'
_UPGRADE = (
    b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n\x81\x05hello"
)
_HTML = (
    b"<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center>"
    b"<hr><center>nginx</center></body></html>\n"
)


def _completion(chat_id: str, message: dict[str, object] | None) -> bytes:
    choices = [] if message is None else [{"index": 0, "message": message, "finish_reason": "stop"}]
    return dumps({"id": chat_id, "object": "chat.completion", "choices": choices, "usage": None})


@functools.lru_cache(maxsize=2)
def bomb(encoding: str) -> bytes:
    """A completion of :data:`BOMB_BYTES` of ``x``, compressed (``gzip`` or ``deflate``): under 1 MiB, built once.

    Compressing 1000 MiB takes seconds; here one 1 MiB block is compressed
    after a full flush (which empties the compressor's window), so its bytes
    repeat exactly, and the stream is that block 1000 times between a head and
    a tail. The checksum is the one of the whole content (combined from the
    block's, as zlib's ``crc32_combine``/``adler32_combine`` do), so a client
    without a cap inflates it to a valid answer of 1000 MiB.
    """
    packer = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    head = packer.compress(_BOMB_HEAD) + packer.flush(zlib.Z_FULL_FLUSH)
    block = b"x" * _BOMB_BLOCK
    middle = packer.compress(block) + packer.flush(zlib.Z_FULL_FLUSH)
    tail = packer.compress(_BOMB_TAIL) + packer.flush(zlib.Z_FINISH)
    count = BOMB_BYTES // _BOMB_BLOCK
    raw = head + middle * count + tail
    size = len(_BOMB_HEAD) + BOMB_BYTES + len(_BOMB_TAIL)
    if encoding == "gzip":
        crc = _repeated(zlib.crc32(block), count, _crc32_combine)
        crc = _crc32_combine(
            _crc32_combine(zlib.crc32(_BOMB_HEAD), crc, BOMB_BYTES), zlib.crc32(_BOMB_TAIL), len(_BOMB_TAIL)
        )
        return b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff" + raw + struct.pack("<II", crc, size & 0xFFFFFFFF)
    adler = _repeated(zlib.adler32(block), count, _adler32_combine, empty=1)
    adler = _adler32_combine(
        _adler32_combine(zlib.adler32(_BOMB_HEAD), adler, BOMB_BYTES), zlib.adler32(_BOMB_TAIL), len(_BOMB_TAIL)
    )
    return b"\x78\xda" + raw + struct.pack(">I", adler)


def _repeated(check: int, count: int, combine: Callable[[int, int, int], int], empty: int = 0) -> int:
    """The checksum of a :data:`_BOMB_BLOCK` block repeated ``count`` times, by doubling."""
    total, part, length = empty, check, _BOMB_BLOCK
    while count:
        if count & 1:
            total = combine(total, part, length)
        part = combine(part, part, length)
        length *= 2
        count >>= 1
    return total


def _gf2_times(matrix: list[int], vector: int) -> int:
    out, row = 0, 0
    while vector:
        if vector & 1:
            out ^= matrix[row]
        vector >>= 1
        row += 1
    return out


def _crc32_combine(crc1: int, crc2: int, len2: int) -> int:
    """The CRC-32 of A+B from CRC(A), CRC(B) and len(B) (zlib's crc32_combine, in GF(2))."""
    odd = [0xEDB88320] + [1 << n for n in range(31)]  # the operator for one zero bit
    even = [_gf2_times(odd, odd[n]) for n in range(32)]  # two zero bits
    odd = [_gf2_times(even, even[n]) for n in range(32)]  # four zero bits
    while len2:
        even = [_gf2_times(odd, odd[n]) for n in range(32)]
        if len2 & 1:
            crc1 = _gf2_times(even, crc1)
        len2 >>= 1
        if not len2:
            break
        odd = [_gf2_times(even, even[n]) for n in range(32)]
        if len2 & 1:
            crc1 = _gf2_times(odd, crc1)
        len2 >>= 1
    return crc1 ^ crc2


def _adler32_combine(adler1: int, adler2: int, len2: int) -> int:
    """The Adler-32 of A+B from Adler(A), Adler(B) and len(B) (zlib's adler32_combine)."""
    base = 65521
    rem = len2 % base
    sum1 = adler1 & 0xFFFF
    sum2 = (rem * sum1) % base
    sum1 = (sum1 + (adler2 & 0xFFFF) + base - 1) % base
    sum2 = (sum2 + ((adler1 >> 16) & 0xFFFF) + ((adler2 >> 16) & 0xFFFF) + base - rem) % base
    return sum1 | (sum2 << 16)


async def hostile_response(
    request: web.Request, kind: str, chat_id: str, ok_body: bytes, redirect_to: str | None = None
) -> web.StreamResponse:
    """The response of fault ``kind``; ``ok_body`` is what a healthy server would have sent."""
    if kind in ("gzip_bomb", "deflate_bomb"):
        encoding = "gzip" if kind == "gzip_bomb" else "deflate"
        body = await asyncio.to_thread(bomb, encoding)  # built the first time (a tenth of a second): off the loop
        return web.Response(body=body, content_type=JSON, headers={"Content-Encoding": encoding})
    if kind == "br_unasked":
        return web.Response(body=b"\x1b\x00\x00" + ok_body[:32], content_type=JSON, headers={"Content-Encoding": "br"})
    if kind in ("redirect_307", "redirect_307_empty"):
        if request.query.get("redirected"):
            return web.Response(body=ok_body, content_type=JSON)  # the redirect's target: the real answer
        location = str(request.rel_url.update_query(redirected="1"))
        if kind == "redirect_307":
            return web.Response(status=307, body=ok_body, content_type=JSON, headers={"Location": location})
        return web.Response(status=307, headers={"Location": location})  # Content-Length: 0
    if kind == "redirect_away":
        target = redirect_to or DEFAULT_REDIRECT_TO
        return web.Response(status=307, body=ok_body, content_type=JSON, headers={"Location": target})
    if kind == "switching_protocols":
        if request.transport is not None:
            request.transport.write(_UPGRADE)
            await asyncio.sleep(0.2)
            request.transport.abort()
        return web.Response(status=500)  # never reaches the client: the connection is gone
    if kind == "empty_choices":
        return web.Response(body=_completion(chat_id, None), content_type=JSON)
    if kind == "null_content":
        return web.Response(body=_completion(chat_id, {"role": "assistant", "content": None}), content_type=JSON)
    if kind == "wrong_content_type":
        return web.Response(body=_HTML, content_type="text/html")
    if kind == "sse":
        body = b"data: " + ok_body + b"\n\ndata: [DONE]\n\n"
        return web.Response(body=body, content_type="text/event-stream", headers={"Cache-Control": "no-cache"})
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    if kind in ("trickle", "cut"):
        response.content_length = len(ok_body)
    else:
        response.enable_chunked_encoding()
    await response.prepare(request)
    with contextlib.suppress(ConnectionError, RuntimeError, asyncio.CancelledError):
        if kind == "huge":
            head = b'{"id": "' + chat_id.encode() + b'", "object": "chat.completion", "choices": [{"index": 0, '
            head += b'"message": {"role": "assistant", "content": "'
            await response.write(head)
            for _ in range(HUGE_BYTES // len(_CHUNK)):
                await response.write(_CHUNK)
            await response.write(b'"}, "finish_reason": "length"}]}')
            await response.write_eof()
        elif kind == "trickle":
            for index in range(len(ok_body)):
                await response.write(ok_body[index : index + 1])
                await asyncio.sleep(TRICKLE_SECONDS)
            await response.write_eof()
        elif kind == "cut":
            await response.write(ok_body[: len(ok_body) // 2])
            await asyncio.sleep(0.05)
            if request.transport is not None:
                request.transport.abort()
    return response

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
- ``sse``: the answer as a ``text/event-stream`` although no stream was asked for.
"""

from __future__ import annotations

import asyncio
import contextlib

from aiohttp import web

from evalkit.testing.wire import JSON, dumps

HOSTILE_KINDS = ("empty_choices", "null_content", "wrong_content_type", "huge", "trickle", "cut", "sse")
#: the size of a ``huge`` answer
HUGE_BYTES = 20 * 1024 * 1024
#: seconds between two bytes of a ``trickle`` answer
TRICKLE_SECONDS = 1.0
_CHUNK = b"x" * (64 * 1024)
_HTML = (
    b"<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center>"
    b"<hr><center>nginx</center></body></html>\n"
)


def _completion(chat_id: str, message: dict[str, object] | None) -> bytes:
    choices = [] if message is None else [{"index": 0, "message": message, "finish_reason": "stop"}]
    return dumps({"id": chat_id, "object": "chat.completion", "choices": choices, "usage": None})


async def hostile_response(request: web.Request, kind: str, chat_id: str, ok_body: bytes) -> web.StreamResponse:
    """The response of fault ``kind``; ``ok_body`` is what a healthy server would have sent."""
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

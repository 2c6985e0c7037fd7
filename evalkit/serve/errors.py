"""OpenAI-shaped error answers of ``evalkit serve``, shared by the handlers and the request guard.

Every refusal leaves as ``{"error": {"message", "type", "param", "code"}}`` so
evalkit's own clients (and the openai SDK) report the server's message.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from evalkit.util.jsonutil import dumps_bytes


class RequestError(Exception):
    """A request the server refuses; becomes OpenAI error JSON with ``status``."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        type_: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.type = type_ or ("invalid_request_error" if status < 500 else "server_error")
        self.headers = headers or {}


def json_response(body: Any, *, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    """``body`` as a JSON response, serialized once to bytes (orjson when installed).

    aiohttp's ``web.json_response`` runs ``json.dumps`` to a str that the response
    then encodes again; on a busy server that is event-loop time taken from the
    model (every thread shares the GIL). The headers are the same:
    ``application/json; charset=utf-8``. What orjson cannot write (a str with a
    lone surrogate) goes through ``json.dumps``, as before.
    """
    try:
        data = dumps_bytes(body)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        data = json.dumps(body).encode()
    return web.Response(body=data, status=status, headers=headers, content_type="application/json", charset="utf-8")


def error_response(error: RequestError) -> web.Response:
    body = {"error": {"message": error.message, "type": error.type, "param": error.param, "code": error.code}}
    return json_response(body, status=error.status, headers=error.headers)

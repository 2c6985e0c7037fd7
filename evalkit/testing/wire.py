"""What goes over the wire: fast JSON, OpenAI-style error bodies, the 400 exception.

orjson is used when importable (it is several times faster than ``json`` on the
hot path of a server answering thousands of requests per second).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

try:
    import orjson

    dumps: Callable[[Any], bytes] = orjson.dumps
    loads: Callable[[bytes | str], Any] = orjson.loads
except ImportError:  # pragma: no cover - orjson is an optional speed-up

    def dumps(obj: Any) -> bytes:
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()

    loads = json.loads

JSON = "application/json"

_ERRORS: dict[int, tuple[str, str | None, str]] = {
    # status: (type, code, message) as the OpenAI API words them
    400: ("invalid_request_error", None, "Bad request."),
    401: ("invalid_request_error", "invalid_api_key", "Incorrect API key provided."),
    403: ("invalid_request_error", None, "Forbidden."),
    404: ("invalid_request_error", "model_not_found", "The model does not exist or you do not have access to it."),
    408: ("timeout", None, "Request timed out."),
    429: ("requests", "rate_limit_exceeded", "Rate limit reached for requests. Please try again later."),
    500: ("server_error", None, "The server had an error while processing your request. Sorry about that!"),
    502: ("server_error", None, "Bad gateway."),
    503: ("server_error", None, "The engine is currently overloaded, please try again later."),
    504: ("server_error", None, "Gateway timeout."),
}


class BadRequest(Exception):
    """A request the real API would reject with 400; carries the offending param."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


def error_body(status: int, message: str | None = None, param: str | None = None, code: str | None = None) -> bytes:
    """An OpenAI-style error JSON body: {"error": {message, type, param, code}}."""
    err_type, default_code, default = _ERRORS.get(
        status, ("server_error" if status >= 500 else "invalid_request_error", None, "Error.")
    )
    body = {"message": message or default, "type": err_type, "param": param, "code": code or default_code}
    return dumps({"error": body})

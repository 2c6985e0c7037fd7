"""What an HTTP transport hands back: a raw answer, or a transport failure with its reason and text.

Two transports carry requests (aiohttp for everything, the lean keep-alive
client for plain-HTTP JSON posts); both end in the same :class:`Reply` or
:class:`TransportFailure`, and the endpoint classifies a reply the same way
whichever brought it. The failure texts are built here, once, so a record
reads the same whichever transport was used.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from evalkit.failures import FailureReason


@dataclass(slots=True)
class Reply:
    """A complete HTTP answer, body read (and decompressed) within the body cap."""

    status: int
    #: the media type, lower case, without parameters ("application/json")
    content_type: str
    body: bytes
    #: the answer's headers when it may say when to come back (status >= 400), else None
    retry_headers: Mapping[str, str] | None = None
    #: the Location header of a 3xx answer (where a redirect points), else None
    location: str | None = None


class TransportFailure(Exception):
    """No usable HTTP answer: ``reason`` is a FailureReason, ``status`` the HTTP status when headers came."""

    def __init__(self, reason: str, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.status = status


def timed_out(limit: float, received: int | None) -> TransportFailure:
    """The attempt's total timeout passed; ``received`` is None until the answer's headers came."""
    if received is None:
        return TransportFailure(FailureReason.TIMEOUT, f"no answer within {limit:g} s")
    return TransportFailure(
        FailureReason.TIMEOUT,
        f"the answer's body did not finish within {limit:g} s ({received} bytes after the headers: "
        "a stalled or trickling body)",
    )


def too_large(
    status: int, length: int | None, received: int, max_body: int, *, decoded: bool = False
) -> TransportFailure:
    """A body over ``max_response_bytes``: by its Content-Length (unread) or by what came so far (cut off).

    ``decoded``: ``received`` counts bytes after decompression (a small compressed body that inflates past the cap).
    """
    if length is not None:
        size = f"{length} bytes"
    elif decoded:
        size = f"over {received} bytes after decompression so far"
    else:
        size = f"over {received} bytes so far"
    return TransportFailure(
        FailureReason.TOO_LARGE,
        f"answer body of {size} is over max_response_bytes ({max_body}); cut off unread",
        status,
    )


def unexpected_stream(status: int) -> TransportFailure:
    """A 2xx/3xx event stream although none was asked for: closed at its headers, never read."""
    return TransportFailure(
        FailureReason.UNEXPECTED_STREAM,
        "a 200 with an event stream (text/event-stream) although none was asked for",
        status,
    )


def switching_protocols() -> TransportFailure:
    """A 101: the server switched the connection to another protocol (a WebSocket, h2c), so no HTTP answer comes."""
    return TransportFailure(
        FailureReason.SWITCHING_PROTOCOLS,
        "a 101 Switching Protocols answer although no protocol switch was asked for; the connection was closed",
        101,
    )


def cannot_connect(name: str, reason: str) -> TransportFailure:
    return TransportFailure(FailureReason.CONNECTION, f"cannot connect to {name}: {reason}")


def closed_mid_body(detail: str) -> TransportFailure:
    return TransportFailure(FailureReason.CONNECTION, f"the connection closed mid-body ({detail})")


def connection_error(error: BaseException) -> TransportFailure:
    """Any other connection-level error, named by its class and text."""
    return TransportFailure(FailureReason.CONNECTION, f"{type(error).__name__}: {error}")

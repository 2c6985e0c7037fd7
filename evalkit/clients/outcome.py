"""What a request ends as: a response or a failure with a reason, never an exception."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple


class Usage(NamedTuple):
    """One answer's token counts; None where the server reported none (or nothing usable)."""

    prompt: int | None = None
    completion: int | None = None
    reasoning: int | None = None
    cached: int | None = None

    @property
    def reported(self) -> bool:
        return self.prompt is not None or self.completion is not None

    @property
    def total(self) -> int:
        return (self.prompt or 0) + (self.completion or 0)


@dataclass(slots=True)
class Outcome:
    """The end of one logical request (after retries, or from the store).

    ``text`` is the model's answer when ``failure`` is None. ``failure`` is a
    short reason class and ``error`` the detail, scrubbed of the endpoint's
    credentials (never request headers):

    - ``http_<status>``: the last answer was that status; ``error`` is
      ``"HTTP <status>: <the server's own message>"``. 4xx other than 408/409/425/429
      are not retried; 408/409/425/429 and 5xx are, until the retries or the deadline run out.
    - ``timeout``: no answer within the attempt's timeout (the last attempt's).
    - ``connection``: refused, reset or dropped before an answer.
    - ``parse``: a 200 whose body is not a usable answer.
    - ``endpoint_unavailable``: every replica of the model is dead (circuit
      breaker); ``error`` names the last endpoint error.
    - ``client_error``: the request could not be built or sent (not retried).
    - ``deadline``: the request's deadline passed before any attempt answered.
    """

    text: str | None = None
    raw: dict[str, Any] | None = None
    failure: str | None = None
    error: str | None = None
    status: int | None = None
    latency: float = 0.0
    attempts: int = 0
    replica: str | None = None
    cached: bool = False
    usage: dict[str, Any] = field(default_factory=dict)
    #: the answer of an identical request of this run (in flight or just answered): paid for where that one was sent
    shared: bool = False
    #: ``usage`` as read once by the client that received it (evalkit/clients/usage.py), or None: not read yet
    tokens: Usage | None = None

    @property
    def ok(self) -> bool:
        return self.failure is None


def failed(
    reason: str,
    error: str,
    *,
    status: int | None = None,
    attempts: int = 0,
    latency: float = 0.0,
    replica: str | None = None,
) -> Outcome:
    return Outcome(failure=reason, error=error, status=status, attempts=attempts, latency=latency, replica=replica)

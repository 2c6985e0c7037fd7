"""Why a sample was not scored: the one list of failure reasons a record, a result row or a report can carry.

A failed request and a metric that declines to score both end as a counted
failure, never as a score (see :mod:`evalkit.run.scoring`). The reasons live
at the bottom of the package, not with the HTTP client, because metrics and
the engine name reasons too. ``http_<status>`` is the one family: its status
is part of the reason, made by :func:`http_reason`.

The values are what records and results.json have always carried, so older
run folders read the same; README's list of reasons is tested against this one.
"""

from __future__ import annotations

from evalkit.util.enums import StrEnum


class FailureReason(StrEnum):
    """A reason class; ``str(reason)`` and JSON give the plain value."""

    #: no answer within the attempt's timeout (the last attempt's)
    TIMEOUT = "timeout"
    #: refused, reset or dropped before an answer
    CONNECTION = "connection"
    #: a 200 whose body is not a usable answer
    PARSE = "parse"
    #: a 200 whose ``choices`` list is empty or missing
    NO_CHOICES = "no_choices"
    #: a 200 whose message content is null (a refusal or a tool call, no text)
    NULL_CONTENT = "null_content"
    #: a 200 with neither JSON nor the plain text a transcription may be (e.g. an HTML page from a proxy)
    CONTENT_TYPE = "content_type"
    #: an answer body larger than the model's ``max_response_bytes`` (cut off unread, not retried)
    TOO_LARGE = "too_large"
    #: an answer the response store cannot keep (over SQLite's largest value, or refused by it); not scored, not
    #: retried: an answer a resume could not find again would make the run's results unrepeatable
    UNSTORABLE = "unstorable"
    #: an event stream (SSE) although none was asked for
    UNEXPECTED_STREAM = "unexpected_stream"
    #: a 3xx answer not followed (``follow_redirects`` off, not a 307/308, or too many); not retried
    REDIRECT = "redirect"
    #: a redirect to another origin (scheme, host, port): never followed, the request is never sent there
    REDIRECT_CROSS_ORIGIN = "redirect_cross_origin"
    #: a 101 Switching Protocols answer to a plain request: the connection stops speaking HTTP; not retried
    SWITCHING_PROTOCOLS = "switching_protocols"
    #: every replica of the model is dead (circuit breaker); the error names the last endpoint error
    ENDPOINT_UNAVAILABLE = "endpoint_unavailable"
    #: the request could not be built or sent (not retried)
    CLIENT_ERROR = "client_error"
    #: the request's deadline passed before any attempt answered
    DEADLINE = "deadline"
    #: the sample's audio (or an in-context example's) is missing, unreadable or not decodable
    AUDIO = "audio"
    #: the sample's image (or an in-context example's) is missing, truncated or not a decodable image
    IMAGE = "image"
    #: the sample's dataset-given conversation (messages_column) is not a list of messages ending with the user's
    CONVERSATION = "conversation"
    #: the model cannot answer this kind of turn (a transcription model and a turn without audio)
    UNSUPPORTED = "unsupported"
    #: the metric raised on this sample (the error names the exception)
    METRIC_ERROR = "metric_error"
    #: the sample has no reference to score against
    NO_REFERENCE = "no reference"
    #: a multiple-choice reference that names none of the choices
    UNRESOLVABLE_REFERENCE = "unresolvable reference"
    #: the sample's rubric is malformed or has no criterion with positive points
    RUBRIC_INVALID = "rubric_invalid"
    #: a judge metric without a usable judge (no judge_properties, or the judge failed)
    JUDGE_UNAVAILABLE = "judge_unavailable"
    #: the judge answered, but not with a verdict the metric can read
    JUDGE_PARSE = "judge_parse"
    #: a dataset row whose sample id an earlier row already has (not sent, not scored)
    DUPLICATE_ID = "duplicate_id"
    #: a per-sample score that is not a finite number
    NO_SCORE = "no score"
    #: not sent: the run's budget was spent (``budget:``); the sample gets no record, a resume with a larger
    #: budget asks it (a judge's refusal is ``judge_budget``)
    BUDGET = "budget"
    #: a failure whose reason was not recorded (records written by older versions)
    ERROR = "error"


#: the prefix of the HTTP family: ``http_404``, ``http_503``, ...
HTTP_PREFIX = "http_"


def http_reason(status: int) -> str:
    """The reason for a final HTTP error answer: ``http_<status>``."""
    return f"{HTTP_PREFIX}{status}"

"""What a 3xx answer to a POST leads to: the same-origin URL to send it to again, or the failure that ends it.

A redirect is never an answer. By default it fails the attempt as
``redirect`` (a gateway's login page or a moved API is a configuration to
fix, not a score). With ``follow_redirects: true`` a 307 or 308 to the same
origin (scheme, host and port) is followed, the same POST sent again, up to
:data:`MAX_REDIRECTS` in a row; 301/302/303 are not, because they turn a POST
into a GET that no inference API answers. A redirect to another origin is
always ``redirect_cross_origin``: the request, its payload and its
credentials are never sent there. Both transports ask this module, so they
decide alike.
"""

from __future__ import annotations

import yarl

from evalkit.clients.transport import TransportFailure
from evalkit.failures import FailureReason
from evalkit.util.redact import redact_url

#: redirects followed in a row before the attempt fails as ``redirect``
MAX_REDIRECTS = 5
#: the redirects that keep the method and the body (RFC 9110 15.4.8, 15.4.9)
FOLLOWED = frozenset({307, 308})
#: characters of a Location shown in a failure (a hostile server may send a long one)
_SHOWN = 200


def is_redirect(status: int) -> bool:
    return 300 <= status < 400


def redirect_target(status: int, location: str | None, url: yarl.URL, follow: bool, hops: int) -> yarl.URL:
    """The absolute URL to POST to again after a ``status`` answer to ``url``, or TransportFailure.

    ``hops`` counts the redirects already followed for this attempt.
    """
    if not location:
        raise TransportFailure(
            FailureReason.REDIRECT,
            f"HTTP {status} (a redirect-class answer without a Location) is not an answer",
            status,
        )
    try:
        target = url.join(yarl.URL(location.strip()))
    except (ValueError, TypeError):
        raise TransportFailure(
            FailureReason.REDIRECT, f"HTTP {status} redirect to an invalid Location {location[:_SHOWN]!r}", status
        ) from None
    shown = _shown(target)
    if not target.is_absolute() or _origin(target) != _origin(url):
        raise TransportFailure(
            FailureReason.REDIRECT_CROSS_ORIGIN,
            f"HTTP {status} redirect to another origin ({shown}): not followed, the request was not sent there",
            status,
        )
    if not follow:
        raise TransportFailure(
            FailureReason.REDIRECT,
            f"HTTP {status} redirect to {shown}: not followed (the model's follow_redirects is off)",
            status,
        )
    if status not in FOLLOWED:
        raise TransportFailure(
            FailureReason.REDIRECT,
            f"HTTP {status} redirect to {shown}: it would turn the POST into a GET; only 307 and 308 are followed",
            status,
        )
    if hops >= MAX_REDIRECTS:
        raise TransportFailure(
            FailureReason.REDIRECT, f"more than {MAX_REDIRECTS} redirects in a row (the last to {shown})", status
        )
    return target


def _origin(url: yarl.URL) -> tuple[str, str | None, int | None]:
    return url.scheme.lower(), (url.host or "").lower() or None, url.port


def _shown(url: yarl.URL) -> str:
    """The URL as a failure may show it: credentials masked, cut to a readable length."""
    text = redact_url(str(url))
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "..."

"""Hints added to a failure's message where a common setup mistake is the likely cause and the answer names none.

A server answers 404 to a URL it has no route for; when the model's ``url`` lacks the ``/v1`` that every
OpenAI-compatible server (vLLM, SGLang, evalkit serve, OpenAI's API) puts its routes under, the plain
"HTTP 404" says nothing of it, so the message names the URL and the one it probably meant.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

from evalkit.clients.protocol import WIRE_FORMATS, EndpointProtocol

#: a path segment naming an API version (v1, v2beta): a URL holding one is not missing its /v1
_VERSION = re.compile(r"^v\d+", re.IGNORECASE)


def missing_v1_hint(protocol: EndpointProtocol, shown_url: str) -> str:
    """For a 404: the URL (``shown_url``: the model's, credentials removed) and that URL with ``/v1``, when its
    path has no version segment and it is not an Azure deployment; else ''."""
    if protocol.api_version is not None:
        return ""
    parts = urlsplit(shown_url)
    segments = [s for s in parts.path.split("/") if s]
    if any(_VERSION.match(s) for s in segments) or "deployments" in segments:
        return ""
    path = parts.path.rstrip("/")
    own = "/" + WIRE_FORMATS[protocol.kind].path
    if path.endswith(own):  # a URL naming its route: /v1 goes before it
        path = path[: -len(own)]
    suggested = urlunsplit((parts.scheme, parts.netloc, f"{path}/v1", parts.query, ""))
    return (
        f" (the model's url {shown_url} has no /v1: OpenAI-compatible servers answer under it, "
        f"so the url is probably {suggested})"
    )

"""Who may ask the viewer: a request names this machine as its host, comes from the viewer's own pages, and carries
the key when one is set.

The viewer is a local tool, but any web page the user has open can make the
browser send requests to ``127.0.0.1``. Two checks keep such a page out:

- **Host**: DNS rebinding points a name the attacker owns (``evil.example.com``)
  at 127.0.0.1, so the page becomes "same origin" with the viewer and may read its
  answers, but the browser still sends ``Host: evil.example.com``. Only an IP
  address, ``localhost`` or this machine's own name is answered (a rebinding
  attack needs a name of its own; an address cannot be rebound).
- **Origin**: a request a page of another origin makes (``fetch``, a form) says
  so in ``Origin``; one that is not the viewer's own origin is refused.

Bound beyond loopback (``--host 0.0.0.0``), anyone on the network can ask, so a
key can be set (``--api-key``, better ``EVALKIT_VIEW_API_KEY``), as `evalkit serve`
has: every request must then carry it, as ``Authorization: Bearer KEY`` (curl,
scripts) or as the password of HTTP Basic authentication (a browser asks for it
once; any user name). It is compared in constant time and never logged.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import ipaddress
import re
import socket
import sys
from collections.abc import Awaitable, Callable

from aiohttp import hdrs, web
from aiohttp.typedefs import Middleware

from evalkit.util.listening import reach_beyond_loopback

#: the environment variable that sets the key when ``--api-key`` is not given (keeps it out of ``ps``)
API_KEY_ENV = "EVALKIT_VIEW_API_KEY"
#: what a key may hold: it travels in an HTTP header (visible ASCII, no spaces)
KEY_PATTERN = re.compile(r"[\x21-\x7e]+")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _machine_names() -> set[str]:
    names = {"localhost", "localhost.localdomain"}
    for name in (socket.gethostname(), socket.getfqdn()):
        if name:
            names.add(name.lower().rstrip("."))
    return names


def host_name(header: str) -> str:
    """The name in a Host header, without its port (``[::1]:8765`` -> ``::1``), lower case."""
    text = header.strip().lower()
    if text.startswith("["):
        return text[1 : text.find("]")] if "]" in text else text
    return text.rsplit(":", 1)[0] if text.count(":") == 1 else text


def allowed_host(header: str, names: set[str]) -> bool:
    """An IP address (it cannot be rebound to another machine), ``localhost``, or this machine's own name."""
    name = host_name(header).rstrip(".")
    if not name:
        return False
    try:
        ipaddress.ip_address(name.split("%", 1)[0])
        return True
    except ValueError:
        return name in names


def _given_key(header: str) -> bytes:
    """The key a request carries: a Bearer token, or the password of Basic authentication."""
    scheme, _, value = header.strip().partition(" ")
    value = value.strip()
    if scheme.lower() == "bearer":
        return value.encode("utf-8", "surrogateescape")
    if scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            return b""
        return decoded.partition(b":")[2]
    return b""


class Access:
    """The Host, Origin and key checks of one viewer (``key`` None: no key is asked)."""

    def __init__(self, key: str | None = None) -> None:
        self._key = key.encode("utf-8") if key else None
        self._names = _machine_names()

    def refusal(self, request: web.Request) -> web.Response | None:
        """None when the request may be answered; else the answer that refuses it (it names the header, not why
        a page might have sent it)."""
        host = request.headers.get(hdrs.HOST, "")
        if not allowed_host(host, self._names):
            return web.Response(
                status=403,
                text="evalkit view answers only requests addressed to this machine (Host: an IP address, "
                "localhost or its own name); this one names another host\n",
            )
        origin = request.headers.get(hdrs.ORIGIN)
        if origin is not None and origin.lower().rstrip("/") != f"{request.scheme}://{host.strip().lower()}":
            return web.Response(status=403, text="evalkit view answers only its own pages (Origin)\n")
        if self._key is not None:
            given = _given_key(request.headers.get(hdrs.AUTHORIZATION, ""))
            # compare_digest takes as long whatever the first differing byte (the key's length may show)
            if not hmac.compare_digest(given, self._key):
                return web.Response(
                    status=401,
                    text="this viewer wants its key: 'Authorization: Bearer KEY', or the password a browser asks for\n",
                    headers={hdrs.WWW_AUTHENTICATE: 'Basic realm="evalkit view", charset="UTF-8"'},
                )
        return None

    def middleware(self) -> Middleware:
        @web.middleware
        async def access(request: web.Request, handler: Handler) -> web.StreamResponse:
            refused = self.refusal(request)
            if refused is not None:
                refused.headers["Cache-Control"] = "no-store"
                return refused
            return await handler(request)

        return access


def check_key(key: str | None, where: str) -> str | None:
    """The key, checked; an empty one is no key. ValueError with the message (never the key itself)."""
    if not key:
        return None
    if not KEY_PATTERN.fullmatch(key):
        raise ValueError(
            f"{where}: the key must be printable ASCII without spaces (it travels in an HTTP header); "
            f"got one of {len(key)} characters"
        )
    return key


def warn_if_open(sock: socket.socket, url: str, key: str | None) -> None:
    """Listening beyond loopback without a key lets anyone who reaches the port read every run: say so once."""
    reach = None if key else reach_beyond_loopback(sock)
    if reach is None:
        return
    print(
        f"evalkit view: warning: listening on {reach} ({url}) without an API key: anyone who can reach this port "
        f"can read every run it shows. Set {API_KEY_ENV} (or --api-key), or listen on --host 127.0.0.1",
        file=sys.stderr,
        flush=True,
    )

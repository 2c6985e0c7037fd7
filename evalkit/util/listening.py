"""Where a local server listens: beyond loopback, anyone who reaches the port reaches what it serves."""

from __future__ import annotations

import ipaddress
import socket


def reach_beyond_loopback(sock: socket.socket) -> str | None:
    """How far a listening socket reaches past this machine, in words for a warning; None on loopback.

    A host name (not an address) is left to the caller's own check and reads as None here.
    """
    host = str(sock.getsockname()[0]).split("%", 1)[0]
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    if address.is_loopback:
        return None
    return "every network interface" if address.is_unspecified else f"the non-loopback address {host}"

"""What a model client needs of the response store without the store: a request's key, and the one-row refusal.

Apart from :mod:`evalkit.clients.store` so that a run with the store off (``--no-cache``) never loads sqlite3 and
the store's code before its first request.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from evalkit.clients.request import ModelRequest


def response_key(model_name: str, request: ModelRequest) -> str:
    """The store key of a request to the model configured as ``model_name``.

    ``request.key`` covers the model id, messages, audio hashes, generation
    parameters and repeat index; the configured name is added because two
    servers may serve different models under one id (``default``, a local
    path), and the store outlives a run. URL, batch size, timeouts and retry
    settings never enter it.
    """
    return hashlib.sha256(f"{model_name}\x00{request.key}".encode()).hexdigest()


class StoreRefused(Exception):
    """The store cannot keep this one answer (too large for SQLite, or refused by it); the others are unaffected."""

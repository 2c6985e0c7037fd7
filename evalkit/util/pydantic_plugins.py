"""pydantic's plugin scan, skipped while evalkit builds its own models.

pydantic looks for plugins (the ``pydantic`` entry-point group) when it builds
the first model of a process, reading the entry points of every installed
distribution: some 10 ms, and ``importlib.metadata`` imported for it, before a
run's first request, for plugins evalkit's models have no use for. Its documented
switch, ``PYDANTIC_DISABLE_PLUGINS``, turns the scan off; evalkit sets it only
while it builds a plan or a listing, and only when the user has not set it
(any value of the user's, even an empty one, is left as it is), and takes it away
again, so servers, token commands and other processes started later never
inherit it. A model built afterwards scans as pydantic always does.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

#: pydantic's own switch (pydantic/plugin/_loader.py): "__all__", "1" or "true" disable every plugin
VARIABLE = "PYDANTIC_DISABLE_PLUGINS"


@contextmanager
def pydantic_plugins_skipped() -> Iterator[None]:
    """pydantic builds models without scanning for plugins inside the block, unless the user set the switch."""
    if VARIABLE in os.environ:
        yield
        return
    os.environ[VARIABLE] = "__all__"
    try:
        yield
    finally:
        os.environ.pop(VARIABLE, None)

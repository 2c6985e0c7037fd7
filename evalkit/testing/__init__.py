"""A scriptable OpenAI-compatible test server, and helpers to run it from tests.

``start_test_server`` runs it in a subprocess; ``build_app`` gives the aiohttp
application for in-process use; ``audio_fingerprint`` computes the key that
audio answer rules match on. Attributes are imported lazily so that
``python -m evalkit.testing.server`` does not import its own module twice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evalkit.testing.app import TEST_SERVER_KEY, build_app
    from evalkit.testing.audio import audio_fingerprint
    from evalkit.testing.process import TestServer, start_test_server
    from evalkit.testing.requestlog import read_events
    from evalkit.testing.script import Script, load_script

__all__ = [
    "TEST_SERVER_KEY",
    "Script",
    "TestServer",
    "audio_fingerprint",
    "build_app",
    "load_script",
    "read_events",
    "start_test_server",
]

_WHERE = {
    "audio_fingerprint": "evalkit.testing.audio",
    "TestServer": "evalkit.testing.process",
    "start_test_server": "evalkit.testing.process",
    "Script": "evalkit.testing.script",
    "load_script": "evalkit.testing.script",
    "build_app": "evalkit.testing.app",
    "TEST_SERVER_KEY": "evalkit.testing.app",
    "read_events": "evalkit.testing.requestlog",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'evalkit.testing' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value

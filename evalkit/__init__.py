"""evalkit: evaluate audio and text language models on many datasets at once.

``evalkit.evaluate(config, **overrides)`` runs an evaluation from Python and
returns :class:`evalkit.Results`; ``await evalkit.evaluate_async(...)`` does
the same on a running event loop. They are imported on first use, so
``import evalkit`` (and every ``evalkit`` command) stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from evalkit.api import Results, evaluate, evaluate_async

__all__ = ["Results", "__version__", "evaluate", "evaluate_async"]

_LAZY = {"evaluate": "evalkit.api", "evaluate_async": "evalkit.api", "Results": "evalkit.api"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'evalkit' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value

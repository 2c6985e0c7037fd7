"""evalkit: evaluate audio and text language models on many datasets at once."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]

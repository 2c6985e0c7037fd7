"""The ``evalkit`` command line: the argument parser and commands (main), listings, and ``evalkit info``.

``evalkit.cli:main`` is the console script's entry point.
"""

from evalkit.cli.main import main

__all__ = ["main"]

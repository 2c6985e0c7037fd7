"""The ``evalkit`` command line: the argument parser and commands (main), listings, and ``evalkit info``.

``evalkit.cli:main`` is the console script's entry point (:func:`evalkit.cli.entry.console`: a finished run ends
the process at once); in-process callers use :func:`evalkit.cli.main.main`.
"""

from evalkit.cli.entry import console as main

__all__ = ["main"]

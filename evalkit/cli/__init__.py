"""The ``evalkit`` command line: the argument parser and commands (main), listings, and ``evalkit info``.

``evalkit.cli.main`` runs a command in-process and returns its exit code, whoever calls it (tests, the API,
scripts). The console script and ``python -m evalkit`` go through :func:`evalkit.cli.entry.console`, which
ends the process at once after a finished run.
"""

from evalkit.cli.main import main

__all__ = ["main"]

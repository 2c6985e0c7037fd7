"""Errors a user can cause and fix; the CLI prints them without a traceback and exits 2."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class UserError(Exception):
    """A mistake in the user's input (config, runspec, command line): exit code 2, no traceback."""

    exit_code = 2


class ConfigError(UserError):
    """A problem in config.yaml or the command-line overrides."""


class RunspecError(UserError):
    """A problem in a runspec JSON file."""


class RunInterrupted(KeyboardInterrupt):
    """A run stopped by a signal (Ctrl-C, SIGTERM, SIGHUP) after an orderly shutdown.

    A KeyboardInterrupt, so code that stops on Ctrl-C keeps doing so; it adds
    the run folder (None when the signal came before it existed) and the signal,
    for the resume command and the exit code (128 + signal).
    """

    def __init__(self, run_dir: object, signum: int) -> None:
        super().__init__(f"run interrupted by signal {signum}")
        self.run_dir = run_dir
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def did_you_mean(word: str, choices: Iterable[str], n: int = 3) -> str:
    """Return ' (did you mean "x"?)' when a close match exists, else ''."""
    matches = difflib.get_close_matches(str(word), list(choices), n=n, cutoff=0.6)
    if not matches:
        return ""
    quoted = ", ".join(f'"{m}"' for m in matches)
    return f" (did you mean {quoted}?)"

"""Errors a user can cause and fix; the CLI prints them without a traceback and exits 2 (4 for a full disk)."""

from __future__ import annotations

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


class DiskFullError(UserError):
    """The disk (or quota) holding ``path`` is full: exit code 4, one message, no traceback.

    ``needed`` is the size of the write that failed (None when unknown) and
    ``free`` what the filesystem had left. The runner adds ``run_dir`` and
    ``store`` so the message says where the answers are kept and how to
    finish the run once space is freed.
    """

    exit_code = 4

    def __init__(self, path: str, needed: int | None = None, free: int | None = None) -> None:
        super().__init__(path)
        self.path = path
        self.needed = needed
        self.free = free
        self.run_dir: str | None = None
        self.store: str | None = None

    def __str__(self) -> str:
        need = f"at least {human_bytes(self.needed)} more" if self.needed else "more space"
        free = f", {human_bytes(self.free)} free" if self.free is not None else ""
        message = f"no space left on the device of {self.path}: writing it needs {need}{free}"
        if self.store:
            message += f". Every answer received so far is kept in the response store {self.store}"
        if self.run_dir:
            message += (
                f". Free some space (or move output_dir / cache.path) and finish with: "
                f"evalkit run --resume {self.run_dir}"
            )
        return message


class WriteFailed(UserError):
    """A file the run keeps writing (the response store, a records file, results) failed for a reason other than
    a full disk: the run stops at once with exit code 1 and one message naming the file and the error.

    Not the user's mistake, but told the same way (no traceback): going on would score answers that are not kept,
    or leave a records file with holes. The runner adds ``run_dir`` so the message says how to finish the run.
    """

    exit_code = 1

    def __init__(self, path: str, error: BaseException | str) -> None:
        detail = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        super().__init__(f"{path}: {detail}")
        self.path = path
        self.detail = detail
        self.run_dir: str | None = None

    def __str__(self) -> str:
        message = f"cannot write {self.path} ({self.detail}); the run stopped"
        if self.run_dir:
            message += (
                f". What was recorded and stored so far is kept: once the cause is fixed, finish with: "
                f"evalkit run --resume {self.run_dir}"
            )
        return message


def human_bytes(n: int) -> str:
    """``1536`` -> ``"1.5 KB"`` (powers of 1024, one decimal above bytes)."""
    value = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if abs(value) < 1024 or unit == "GB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TB"  # pragma: no cover


def did_you_mean(word: str, choices: Iterable[str], n: int = 3) -> str:
    """Return ' (did you mean "x"?)' when a close match exists, else ''."""
    import difflib  # only a mistyped name gets here: a run that names nothing wrong never loads it

    # a name may be offered twice (a dataset that is also another tool's name): each is suggested once
    matches = difflib.get_close_matches(str(word), list(dict.fromkeys(choices)), n=n, cutoff=0.6)
    if not matches:
        return ""
    quoted = ", ".join(f'"{m}"' for m in matches)
    return f" (did you mean {quoted}?)"

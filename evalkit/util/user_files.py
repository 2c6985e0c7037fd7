"""Reading a file the user gave: one message for a missing, unreadable or non-UTF-8 file, whatever its format."""

from __future__ import annotations

from pathlib import Path

from evalkit.errors import ConfigError, UserError


def read_user_text(path: str | Path, error: type[UserError] = ConfigError) -> str:
    """``path`` as UTF-8 text; any failure is ``error`` naming the file (exit 2), never a traceback."""
    path = Path(path)
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as problem:
        raise error(f"{path}: not UTF-8 text (byte {problem.start}); save the file as UTF-8") from None
    except OSError as problem:
        raise error(f"{path}: cannot read: {problem.strerror or problem}") from None

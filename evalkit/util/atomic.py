"""Crash-safe file writes: a kill at any moment leaves the old file or the new one, never half of one.

The text goes to a hidden temporary file beside the target (same filesystem,
so the rename is atomic), then ``os.replace`` puts it in place. The process id
in the temporary name keeps two writers from sharing one. A full disk
raises :class:`~evalkit.errors.DiskFullError` naming the target and its size,
and leaves the old file in place.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from evalkit.util.diskfull import disk_full, is_disk_full


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` so readers never see a partial file."""
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    data = text.encode("utf-8")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, target)
    except BaseException as error:
        tmp.unlink(missing_ok=True)
        if is_disk_full(error):
            raise disk_full(target, len(data)) from None
        raise


def write_json_atomic(path: str | os.PathLike[str], data: Any, *, indent: int | None = 2) -> None:
    """``data`` as JSON (UTF-8, non-ASCII kept, unknown types as ``str``), written atomically."""
    write_text_atomic(path, json.dumps(data, indent=indent, ensure_ascii=False, default=str) + "\n")

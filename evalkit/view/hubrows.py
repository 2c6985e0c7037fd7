"""The hub rows a run's media came from, read from evalkit's local copy of hub datasets, never from the network.

A run that read a hub dataset records its audio and images as ``{"hub": {repo,
config, split, revision, row, column}}``: the viewer has no file to open. But
the run read those rows through evalkit's hub store (:mod:`evalkit.data.hubcache`,
filled as a run streams and by `evalkit fetch`), where row N is line N of
``rows.jsonl``. So the cell is read from there; when the store does not hold the
row, the page says which command stores it. The line offsets of a stored file
are found once (one pass over it) and kept while its size and time stay the same.
"""

from __future__ import annotations

import json
import threading
from array import array
from pathlib import Path
from typing import Any

from evalkit.data.hubcache import cache_root, decode_row, stored_folder

_READ = 1 << 22
#: stored files whose line offsets are kept (8 bytes a row)
_KEPT = 8

_offsets: dict[tuple[str, int, int], array[int]] = {}
_lock = threading.Lock()


class NotStored(LookupError):
    """The row is not in the local hub store; the message says what would store it."""


def _meta(folder: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _folder(hub: dict[str, Any]) -> tuple[Path, dict[str, Any]] | None:
    """The store's folder of the hub split a reference names, and its meta; None when nothing of it is stored.

    The folder's name holds a digest of the dataset's ``data_files`` too, which a
    reference does not carry: the folder without data_files is tried first, then
    the one folder whose meta names the same repo, subset, split and revision.
    """
    repo, subset, revision = hub.get("repo"), hub.get("config"), hub.get("revision")
    split = str(hub.get("split") or "test")
    folder = stored_folder(repo, subset, split, revision)
    meta = _meta(folder)
    if meta is not None:
        return folder, meta
    try:
        children = [p for p in cache_root().iterdir() if p.is_dir()]
    except OSError:
        return None
    found = []
    for child in children:
        meta = _meta(child)
        if meta is not None and (meta.get("repo"), meta.get("subset"), meta.get("split"), meta.get("revision")) == (
            repo,
            subset,
            split,
            revision,
        ):
            found.append((child, meta))
    return found[0] if len(found) == 1 else None


def unavailable(hub: dict[str, Any], dataset: str) -> str | None:
    """None when the store holds the row; else the page's reason, naming the command that stores it."""
    row = hub.get("row")
    found = _folder(hub)
    if isinstance(row, int) and found is not None and 0 <= row < int(found[1].get("rows") or 0):
        return None
    fetch = f"evalkit fetch {dataset}" if dataset else "evalkit fetch <dataset>"
    return f"not available offline: {hub.get('repo')} row {row} ({fetch} stores it)"


def stored_cell(hub: dict[str, Any], dataset: str) -> Any:
    """The cell a reference names (its ``column``, e.g. ``audio`` or ``turns[1].audio``), as the hub gave it.

    NotStored when the store does not hold the row.
    """
    reason = unavailable(hub, dataset)
    found = _folder(hub)
    if reason or found is None:
        raise NotStored(reason)
    folder, meta = found
    rows = folder / "rows.jsonl"
    row = int(hub["row"])
    try:
        offsets = _line_offsets(rows, int(meta.get("rows") or 0))
        if row + 1 >= len(offsets):
            raise NotStored(f"not available offline: {hub.get('repo')} row {row} (the stored copy is shorter)")
        with rows.open("rb") as handle:
            handle.seek(offsets[row])
            value = decode_row(handle.read(offsets[row + 1] - offsets[row]))
    except (OSError, ValueError) as error:
        raise NotStored(f"unreadable: the stored copy of {hub.get('repo')} ({rows}): {error}") from None
    column = str(hub.get("column") or "")
    name = column.split(".", 1)[0].split("[", 1)[0]
    if not isinstance(value, dict) or name not in value:
        raise NotStored(f"stored row {row} of {hub.get('repo')} has no column {name!r}")
    return nested(value[name], column[len(name) :])


def nested(value: Any, rest: str) -> Any:
    """``[2].audio`` of a cell: list items and dict keys."""
    for step in rest.replace("]", "").replace("[", ".").split("."):
        if step:
            value = value[int(step)] if isinstance(value, list) else value[step]
    return value


def _line_offsets(path: Path, rows: int) -> array[int]:
    """The offset of each of the first ``rows`` lines, and the end of the last (one pass, then kept)."""
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    with _lock:
        kept = _offsets.get(key)
    if kept is not None:
        return kept
    offsets = array("q", [0])
    with path.open("rb") as handle:
        base = 0
        while len(offsets) <= rows:
            block = handle.read(_READ)
            if not block:
                break
            at = block.find(b"\n")
            while at != -1 and len(offsets) <= rows:
                offsets.append(base + at + 1)
                at = block.find(b"\n", at + 1)
            base += len(block)
    with _lock:
        if len(_offsets) >= _KEPT:
            _offsets.pop(next(iter(_offsets)))
        _offsets[key] = offsets
    return offsets

"""A dataset's fingerprint: what a resumed run checks to know it reads the rows the run started with.

For a dataset read from local files it is a SHA-256 over every row (the
row's columns, canonically encoded, audio bytes hashed) plus a 4-byte digest
per row, so a changed file is found and the first row that differs is named.
Rows are compared, not file bytes: rewriting a file with other whitespace or
key order is no change. Hub datasets are pinned by their revision and get no
fingerprint (None). The per-row digests cost 4 bytes a row in run.json; a
dataset of more than ``MAX_ROW_DIGESTS`` rows keeps only its hash.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evalkit.catalog import DatasetSpec
from evalkit.data.files import local_files
from evalkit.data.loading import iter_rows

#: rows beyond this keep no per-row digest (run.json stays small); a change is still found, its row not
MAX_ROW_DIGESTS = 250_000
_DIGEST = 4


def _local(spec: DatasetSpec) -> list[Path]:
    if spec.path is None:
        return []
    source = Path(spec.source)
    return local_files(source, spec.data_files) if source.exists() else []


def _encode(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "sha256:" + hashlib.sha256(bytes(value)).hexdigest()
    return str(value)


def _row_bytes(row: dict[str, Any]) -> bytes:
    return json.dumps(row, sort_keys=True, ensure_ascii=False, default=_encode).encode()


def dataset_fingerprint(spec: DatasetSpec) -> dict[str, Any] | None:
    """``{"files", "rows", "sha256", "row_digests"}`` of a local dataset; None when it is not local files."""
    files = _local(spec)
    if not files:
        return None
    whole = hashlib.sha256()
    digests = bytearray()
    rows = 0
    for row in iter_rows(spec):
        data = _row_bytes(row)
        whole.update(len(data).to_bytes(8, "big"))
        whole.update(data)
        if rows < MAX_ROW_DIGESTS:
            digests += hashlib.blake2b(data, digest_size=_DIGEST).digest()
        rows += 1
    return {
        "files": [str(f.resolve()) for f in files],
        "rows": rows,
        "sha256": whole.hexdigest(),
        "row_digests": base64.b64encode(bytes(digests)).decode() if rows <= MAX_ROW_DIGESTS else None,
    }


def _row_id(spec: DatasetSpec, index: int) -> str | None:
    """The sample id of row ``index`` (0-based) as the data holds it now."""
    rows: Iterator[dict[str, Any]] = iter_rows(spec)
    for number, row in enumerate(rows):
        if number == index:
            value = row.get(spec.id_column) if spec.id_column else None
            return str(value) if value is not None else f"{spec.name}-{index}"
    return None


def fingerprint_change(spec: DatasetSpec, saved: dict[str, Any], now: dict[str, Any] | None) -> str | None:
    """What changed between the fingerprint a run saved and the dataset now, naming the first row; None if nothing."""
    if now is None or (saved.get("sha256") == now["sha256"] and saved.get("rows") == now["rows"]):
        return None
    files = ", ".join(now["files"])
    old_rows, new_rows = int(saved.get("rows") or 0), now["rows"]
    counts = f"{old_rows} rows then, {new_rows} now" if old_rows != new_rows else f"{new_rows} rows"
    old, new = saved.get("row_digests"), now.get("row_digests")
    if not old or not new:
        return f"dataset {spec.name} ({files}) changed since the run started ({counts}; the row is not known)"
    a, b = base64.b64decode(old), base64.b64decode(new)
    first = next(
        (i // _DIGEST for i in range(0, min(len(a), len(b)), _DIGEST) if a[i : i + _DIGEST] != b[i : i + _DIGEST]),
        min(old_rows, new_rows),
    )
    if first >= new_rows:
        what = f"row {first + 1} and after are gone"
    elif first >= old_rows:
        what = f"row {first + 1} and after are new"
    else:
        what = f"row {first + 1} (id {_row_id(spec, first)!r}) differs"
    return f"dataset {spec.name} ({files}) changed since the run started: {what} ({counts})"

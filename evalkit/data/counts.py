"""How many rows and samples a dataset has, when that is cheap to know (file metadata, line counts).

Used by the dry run, `evalkit info` and the live progress totals, so this
module stays light: no numpy, no datasets; pyarrow only for parquet metadata.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from evalkit.data.files import delimited_rows, document_rows, first_line_is_json, local_files
from evalkit.errors import RunspecError

if TYPE_CHECKING:
    from evalkit.catalog import DatasetSpec
    from evalkit.config import Filters

_MAX_JSON_ARRAY_BYTES = 64 << 20


def _file_rows(path: Path) -> int | None:
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return int(pq.ParquetFile(path).metadata.num_rows)
    if path.suffix == ".arrow":
        return _arrow_rows(path)
    if path.suffix in (".jsonl", ".json"):
        with path.open("rb") as handle:
            first = handle.read(1)
            handle.seek(0)
            whole = path.suffix == ".json" and (first == b"[" or (first == b"{" and not first_line_is_json(handle)))
            if whole:  # one JSON document (a list of rows, or an object holding one): counted as the loader reads it
                if path.stat().st_size > _MAX_JSON_ARRAY_BYTES:
                    return None
                handle.seek(0)
                try:
                    return len(document_rows(json.load(handle), path))
                except RunspecError:
                    return None  # not rows evalkit can read: the loader says why when the run reads it
            handle.seek(0)
            return sum(1 for line in handle if line.strip())
    with path.open(encoding="utf-8", newline="") as handle:
        return sum(1 for _ in delimited_rows(handle, path.suffix))


def _arrow_rows(path: Path) -> int:
    """Rows of an arrow file (stream or file format), counted from its batches without copying them (memory-mapped)."""
    import pyarrow as pa

    with pa.memory_map(str(path)) as source:
        try:
            return sum(batch.num_rows for batch in pa.ipc.open_stream(source))
        except pa.ArrowInvalid:
            source.seek(0)
            reader = pa.ipc.open_file(source)
            return sum(reader.get_batch(i).num_rows for i in range(reader.num_record_batches))


def local_row_count(spec: DatasetSpec) -> int | None:
    """Rows of a local dataset from file metadata or a line count.

    None when unknown: hub datasets, and folders read by `datasets`.
    """
    if spec.path is None:
        return None
    files = local_files(Path(spec.source), spec.data_files)
    if not files:
        return None
    total = 0
    for path in files:
        try:
            rows = _file_rows(path)
        except (OSError, ValueError):
            return None
        if rows is None:
            return None
        total += rows
    return total


def known_sample_count(spec: DatasetSpec, filters: Filters) -> int | None:
    """Samples an engine will see when that is cheap to know (row counts, num_samples); None otherwise.

    Length and accent filters depend on each sample, so they make the count
    unknown; a hub dataset with ``num_samples`` counts as ``num_samples``.
    """
    if filters.length_filter is not None or filters.accented is not None:
        return None
    rows = local_row_count(spec) if spec.path is not None else None
    limit = filters.num_samples
    if rows is None:
        return limit
    return rows if limit is None else min(rows, limit)

"""A shard's share of a local dataset, read without turning the other shards' rows into samples.

A sample belongs to a shard by its id (evalkit.run.shard), so a shard of N
used to read every row, build every sample and keep one in N. Where the
format allows, this reads less and yields exactly the same samples, in the
same order, with the same positions (``meta["index"]``):

- parquet: with an id column, that column alone is read first (per row group);
  a row group with none of the shard's rows is skipped, and only the shard's
  rows of the others become Python objects. Without one, the ids come from
  the positions, which the file's metadata gives without reading a row.
- JSON lines without an id column: other shards' lines are counted, never
  parsed. With one, each line is parsed for its id (there is no other way to
  learn it), but only the shard's rows become samples.

Anything else (hub datasets, csv, arrow, a JSON document, an id in a nested
column of a parquet file) answers None, and the caller reads everything.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

from evalkit.catalog import DatasetSpec
from evalkit.data.files import local_files, require_local_source, rows_folder
from evalkit.data.loading import id_or_position, row_id, row_to_sample
from evalkit.data.sample import Sample
from evalkit.errors import RunspecError

#: rows turned into Python objects at a time, as the full reader does
_BATCH = 16

Owns = Callable[[str], bool]


def share_samples(spec: DatasetSpec, owns: Owns) -> Iterator[Sample] | None:
    """The samples of ``spec`` whose id ``owns`` accepts, in file order; None where the format does not allow it."""
    if spec.path is None:
        return None
    files = local_files(require_local_source(spec), spec.data_files)
    if not files or not all(_readable(file, spec) for file in files):
        return None
    base_dir = rows_folder(Path(spec.source), spec.data_files)
    if spec.media_dir is not None:
        base_dir = base_dir / spec.media_dir
    return _samples(files, spec, owns, base_dir)


def _readable(path: Path, spec: DatasetSpec) -> bool:
    if path.suffix == ".jsonl":
        return True
    if path.suffix != ".parquet" or spec.id_column is None:
        return path.suffix == ".parquet"
    import pyarrow.parquet as pq

    # an id in a struct column ("data.id") is found by the full reader's path rules; only a plain column is read alone
    return spec.id_column in pq.read_schema(path).names


def _samples(files: list[Path], spec: DatasetSpec, owns: Owns, base_dir: Path) -> Iterator[Sample]:
    index = 0  # positions run on across the files, as in the full reader
    for file in files:
        reader = _parquet_share if file.suffix == ".parquet" else _jsonl_share
        index = yield from reader(file, spec, owns, base_dir, index)


def _jsonl_share(path: Path, spec: DatasetSpec, owns: Owns, base_dir: Path, index: int) -> Generator[Sample, None, int]:
    """The shard's samples of one JSON-lines file; returns the position after its last row."""
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            if spec.id_column is None and not owns(id_or_position(None, index, spec)):
                index += 1
                continue  # its id is its position: the line is not parsed
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                raise RunspecError(f"{path}: line {number}: not valid JSON: {error.msg}") from None
            if spec.id_column is None or owns(row_id(row, index, spec)):
                yield row_to_sample(row, index, spec, base_dir)
            index += 1
    return index


def _parquet_share(
    path: Path, spec: DatasetSpec, owns: Owns, base_dir: Path, index: int
) -> Generator[Sample, None, int]:
    """The shard's samples of one parquet file; returns the position after its last row."""
    import pyarrow.parquet as pq

    with pq.ParquetFile(path, memory_map=False, pre_buffer=False) as handle:
        meta = handle.metadata
        for group in range(meta.num_row_groups):
            size = meta.row_group(group).num_rows
            if spec.id_column is None:
                ids: list[Any] = [None] * size
            else:
                ids = handle.read_row_group(group, columns=[spec.id_column]).column(0).to_pylist()
            mine = [i for i, value in enumerate(ids) if owns(id_or_position(value, index + i, spec))]
            if mine:
                table = handle.read_row_group(group).take(mine)
                for at in range(0, len(mine), _BATCH):
                    rows = table.slice(at, _BATCH).to_pylist()
                    for offset, row in zip(mine[at : at + _BATCH], rows):
                        yield row_to_sample(row, index + offset, spec, base_dir)
            index += size
    return index

"""Which local files a dataset is read from: one answer for the loader and for the counts."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TextIO

from evalkit.errors import RunspecError

if TYPE_CHECKING:
    from evalkit.catalog import DatasetSpec

#: file types evalkit reads itself, without ``datasets``
LOCAL_SUFFIXES = frozenset({".parquet", ".arrow", ".jsonl", ".json", ".csv", ".tsv"})
#: a file ``datasets`` may load itself (a loading script, for datasets releases that still run them)
PASSED_TO_DATASETS = frozenset({".py"})
#: what a local folder is searched for when the runspec names no ``data_files``
DEFAULT_PATTERNS = ("*.parquet", "*.jsonl", "*.csv")


def delimited_rows(handle: TextIO, suffix: str) -> csv.DictReader[str]:
    """The rows of a csv file, or of a tsv file (``suffix`` ``.tsv``) read as tsv is written: without quoting.

    Tab-separated files have no quote convention, and real ones rely on it: a Common Voice sentence may begin
    with a quotation mark, which csv quoting would take as the start of a quoted field and run on into the next
    ones. The loader and the row counts both read through here, so they agree on what a row is.
    """
    if suffix == ".tsv":
        return csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
    return csv.DictReader(handle)


def local_files(path: Path, data_files: str | list[str] | None = None) -> list[Path]:
    """The data files at ``path`` in read order; [] when it is not plain local files (left to ``datasets``).

    A file counts when evalkit reads its type itself; a folder is searched
    with the runspec's ``data_files`` patterns, or the defaults.
    """
    if path.is_file():
        return [path] if path.suffix in LOCAL_SUFFIXES else []
    if not path.is_dir():
        return []
    patterns = [data_files] if isinstance(data_files, str) else list(data_files or DEFAULT_PATTERNS)
    return [p for pattern in patterns for p in sorted(path.glob(pattern)) if p.suffix in LOCAL_SUFFIXES]


def require_local_source(spec: DatasetSpec, source: str | None = None) -> Path:
    """The local path a dataset reads (``source`` overrides the runspec's).

    A missing path is a RunspecError naming the runspec file and entry.
    """
    path = Path(source or spec.source)
    if not path.exists():
        raise RunspecError(f"{spec.file}: {spec.name}.path: {path} does not exist")
    if path.is_file() and path.suffix not in LOCAL_SUFFIXES and path.suffix not in PASSED_TO_DATASETS:
        # said here, not as "cannot be found" by `datasets`, which takes a file path for a dataset name
        kind = f"a {path.suffix} file" if path.suffix else "a file without an extension"
        raise RunspecError(
            f"{spec.file}: {spec.name}.path: {path} is {kind}, a format evalkit does not read; supported: "
            f"{', '.join(sorted(LOCAL_SUFFIXES))} (lower case), or a folder of them"
        )
    return path


def rows_folder(path: Path, data_files: str | list[str] | None = None) -> Path:
    """The folder a local dataset's relative media paths start from: the folder given, or the data file's own.

    A benchmark laid out as LAMM's (``2D_Benchmark/meta_file/Counting_FSC147.json`` whose image paths start at
    ``2D_Benchmark``) is named by its folder and a ``data_files`` pattern; a user who names the data file itself
    means the same rows, so its paths keep starting at the folder that pattern starts from.
    """
    if not path.is_file():
        return path
    if isinstance(data_files, str):
        depth = len(Path(data_files).parts)
        if depth > 1 and path.match(data_files):
            return path.parents[depth - 1]
    return path.parent


def document_rows(document: Any, path: Path) -> list[Any]:
    """The rows of a whole-file JSON document: a list, or an object one of whose keys holds them.

    Benchmarks that ship one pretty-printed JSON object keep their rows under one key beside other metadata
    (ChEF's Ch3Ef ``{"items": [...]}``, SEED-Bench's ``{"questions": [...], "question_type": {...}}``): the rows
    are the one value that is a list of objects. Anything else is a RunspecError naming the file.
    """
    if isinstance(document, list):
        return document
    if isinstance(document, dict):
        held = [value for value in document.values() if _is_rows(value)]
        if len(held) == 1:
            return held[0]
        keys = ", ".join(map(str, document)) or "none"
        raise RunspecError(
            f"{path}: a JSON object is read as rows when exactly one of its keys holds a list of objects; "
            f"{len(held)} of its keys ({keys}) do"
        )
    raise RunspecError(f"{path}: expected a JSON list of rows, or an object holding one; got {type(document).__name__}")


def _is_rows(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(row, dict) for row in value)


def first_line_is_json(handle: IO[Any]) -> bool:
    """Whether a .json file's first line is a whole JSON value: JSON Lines, not one document over many lines."""
    line = handle.readline()
    try:
        json.loads(line)
    except ValueError:
        return False
    return True

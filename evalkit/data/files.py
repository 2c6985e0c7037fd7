"""Which local files a dataset is read from: one answer for the loader and for the counts."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from evalkit.errors import RunspecError

if TYPE_CHECKING:
    from evalkit.catalog import DatasetSpec

#: file types evalkit reads itself, without ``datasets``
LOCAL_SUFFIXES = frozenset({".parquet", ".jsonl", ".json", ".csv", ".tsv"})
#: a file ``datasets`` may load itself (a loading script, for datasets releases that still run them)
PASSED_TO_DATASETS = frozenset({".py"})
#: what a local folder is searched for when the runspec names no ``data_files``
DEFAULT_PATTERNS = ("*.parquet", "*.jsonl", "*.csv")


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

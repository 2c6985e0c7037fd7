"""A local copy of the hub rows a run reads, so reruns and ``--resume`` work offline (``HF_HUB_OFFLINE=1``).

``datasets`` streaming keeps nothing: every run would stream again, and a
cluster node without network could not even resume. So the rows a run
consumes from a hub dataset are appended, as they are read, to a JSON-lines
file keyed by what determines them (repo, subset, split, revision,
data_files); the next run reads that file first and streams from the hub only
for rows beyond it. ``evalkit fetch`` reads a whole split (or its first N
rows) ahead of time. Bytes (encoded audio) are stored as base64 objects, so
the file holds plain JSON and nothing is unpickled.

A copy is marked complete once a split was read to its end; a partial copy
offline serves the rows it has and then stops with a message saying how to
fetch the rest.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalkit.errors import RunspecError

if TYPE_CHECKING:
    from evalkit.catalog import DatasetSpec

_BYTES = "$bytes_b64"
#: rows between two updates of meta.json while streaming (a kill loses at most these; they are streamed again)
_META_EVERY = 32


def cache_root() -> Path:
    """``$EVALKIT_CACHE_DIR/hub``, default ``~/.cache/evalkit/hub``."""
    base = os.environ.get("EVALKIT_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "evalkit")
    return Path(base) / "hub"


def hub_offline() -> bool:
    """True when the hub may not be asked (the variables ``huggingface_hub`` and ``datasets`` read)."""
    return any(
        os.environ.get(v, "").strip().lower() in ("1", "true", "yes") for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
    )


def _encode(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {_BYTES: base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, dict):
        return {str(k): _encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return value.tolist()
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        if len(value) == 1 and _BYTES in value:
            return base64.b64decode(value[_BYTES])
        return {k: _decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


class HubRowCache:
    """The stored rows of one (repo, subset, split, revision, data_files)."""

    def __init__(self, spec: DatasetSpec, root: Path | None = None) -> None:
        self.spec = spec
        key = {
            "repo": spec.hf_repo,
            "subset": spec.subset,
            "split": spec.split,
            "revision": spec.revision,
            "data_files": spec.data_files,
        }
        digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
        name = f"{str(spec.hf_repo).replace('/', '__')}-{spec.subset or 'default'}-{spec.split}-{digest}"
        self.folder = (root or cache_root()) / name
        self.rows_path = self.folder / "rows.jsonl"
        self.meta_path = self.folder / "meta.json"

    def meta(self) -> dict[str, Any]:
        try:
            data = json.loads(self.meta_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {"rows": 0, "complete": False}
        return data if isinstance(data, dict) else {"rows": 0, "complete": False}

    def _write_meta(self, rows: int, complete: bool) -> None:
        from evalkit.util.atomic import write_json_atomic

        write_json_atomic(
            self.meta_path,
            {"repo": self.spec.hf_repo, "subset": self.spec.subset, "split": self.spec.split,
             "revision": self.spec.revision, "rows": rows, "complete": complete},
        )  # fmt: skip

    def stored_rows(self) -> Iterator[dict[str, Any]]:
        """The rows stored so far, in order; a torn last line (a killed writer) is ignored."""
        count = int(self.meta().get("rows", 0))
        if count == 0 or not self.rows_path.is_file():
            return
        with self.rows_path.open(encoding="utf-8") as handle:
            for _, line in zip(range(count), handle):
                yield _decode(json.loads(line))

    def rows(self, stream: Any) -> Iterator[dict[str, Any]]:
        """Stored rows first, then rows of ``stream()`` beyond them, each appended as it is read.

        ``stream`` is called only when the stored rows run out: offline, that is
        an error naming the dataset and what to run.
        """
        meta = self.meta()
        stored = 0
        for row in self.stored_rows():
            stored += 1
            yield row
        if meta.get("complete"):
            return
        if hub_offline():
            have = f"only {stored} rows of it are" if stored else "none of it is"
            raise RunspecError(
                f"{self.spec.file}: {self.spec.name}: the hub is offline (HF_HUB_OFFLINE) and {have} stored in "
                f"{self.folder}; run `evalkit fetch {self.spec.name}` where the network is reachable"
            )
        self.folder.mkdir(parents=True, exist_ok=True)
        with self.rows_path.open("r+" if self.rows_path.exists() else "w", encoding="utf-8") as handle:
            handle.seek(0)
            for _ in range(stored):  # keep exactly the rows the meta counts; drop a torn tail
                handle.readline()
            handle.truncate()
            count = stored
            source = iter(stream())
            for _ in range(stored):  # the stream restarts at row 0: skip what is stored
                if next(source, None) is None:
                    break
            complete = False
            try:
                for row in source:
                    handle.write(json.dumps(_encode(row), ensure_ascii=False) + "\n")
                    count += 1
                    if count % _META_EVERY == 0:
                        handle.flush()
                        self._write_meta(count, complete=False)
                    yield row
                complete = True
            finally:  # also when the reader stops early (num_samples): what it read stays stored
                handle.flush()
                self._write_meta(count, complete=complete)


def require_stored(spec: DatasetSpec) -> None:
    """Offline, a hub dataset needs stored rows; RunspecError naming it and ``evalkit fetch`` otherwise."""
    cache = HubRowCache(spec)
    if int(cache.meta().get("rows", 0)) == 0 and not cache.meta().get("complete"):
        raise RunspecError(
            f"{spec.file}: {spec.name}: the hub is offline (HF_HUB_OFFLINE) and no rows of {spec.hf_repo} are stored "
            f"locally; run `evalkit fetch {spec.name}` where the network is reachable"
        )

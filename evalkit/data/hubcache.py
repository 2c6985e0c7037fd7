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

Stored rows are read without asking the hub. Before a run (or a dry run)
starts an engine, :func:`require_hub_or_stored` checks every hub dataset of
the plan: when one has no stored rows, the hub is probed once
(:mod:`evalkit.data.hubprobe`), and a hub that does not answer stops the
run with one message listing every such dataset and both ways out.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Generator, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalkit.data.hubprobe import HubAnswer, probe_hub
from evalkit.errors import RunspecError, UserError
from evalkit.util.safe_names import safe_name

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


def stored_folder(
    repo: str | None,
    subset: str | None,
    split: str,
    revision: str | None,
    data_files: str | list[str] | None = None,
    root: Path | None = None,
) -> Path:
    """The folder holding the stored rows of one (repo, subset, split, revision, data_files).

    Also how `evalkit view` finds the row a run's sent log names (``{"hub": {repo, config, split, revision,
    row}}``) without a runspec.
    """
    key = {"repo": repo, "subset": subset, "split": split, "revision": revision, "data_files": data_files}
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    name = f"{str(repo).replace('/', '__')}-{subset or 'default'}-{split}-{digest}"
    # a repo, subset or split may hold "/" or ".." (a runspec is user input): one safe folder name (a user's
    # symlink to another disk is fine here, so no inside() check)
    return (root or cache_root()) / safe_name(name, unique_already=True)


def decode_row(line: bytes | str) -> Any:
    """One stored row (a line of rows.jsonl) as the hub gave it: bytes back from their base64 form."""
    return _decode(json.loads(line))


class HubRowCache:
    """The stored rows of one (repo, subset, split, revision, data_files)."""

    def __init__(self, spec: DatasetSpec, root: Path | None = None) -> None:
        self.spec = spec
        self.folder = stored_folder(spec.hf_repo, spec.subset, spec.split, spec.revision, spec.data_files, root)
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

        ``stream`` is called only when the stored rows run out, and only when
        the hub may be asked and answers (one probe per process): otherwise
        that is an error naming the dataset and what to run.
        """
        meta = self.meta()
        stored = 0
        for row in self.stored_rows():
            stored += 1
            yield row
        if meta.get("complete"):
            return
        have = f"only {stored} rows of it are" if stored else "none of it is"
        if hub_offline():
            raise RunspecError(
                f"{self.spec.file}: {self.spec.name}: the hub is offline (HF_HUB_OFFLINE) and {have} stored in "
                f"{self.folder}; run `evalkit fetch {self.spec.name}` where the network is reachable"
            )
        if reads_the_hub(self.spec):  # asked once per process: a hub that does not answer is said at once
            answer = probe_hub()
            if not answer.reachable:
                raise RunspecError(
                    f"{self.spec.file}: {self.spec.name}: {_unreachable(answer)} and {have} stored in {self.folder}; "
                    f"{_ways_out([self.spec])}"
                )
        yield from self.extend(stream, stored)

    def extend(self, stream: Any, stored: int = 0) -> Generator[dict[str, Any], None, None]:
        """Rows of ``stream()`` beyond the first ``stored`` (kept already), each appended as it is read.

        The stream restarts at row 0, so the stored rows are skipped; a torn
        tail of the file (a killed writer) is dropped first. Stopping early
        keeps what was read and marks the copy incomplete; reading to the end
        marks it complete.
        """
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


def reads_the_hub(spec: DatasetSpec) -> bool:
    """A hub id that is not a local folder (``datasets`` reads an existing folder of that name without the hub)."""
    return spec.hf_repo is not None and spec.path is None and not Path(spec.hf_repo).exists()


def hub_parts(spec: DatasetSpec) -> list[DatasetSpec]:
    """The hub splits a run of ``spec`` reads: its split, then its in-context examples' split (as `evalkit fetch`)."""
    if spec.hf_repo is None or spec.path is not None:
        return []
    parts = [spec]
    in_context = spec.in_context or {}
    if "split" in in_context and "path" not in in_context:
        parts.append(spec.model_copy(update={"split": in_context["split"], "in_context": None}))
    return parts


def not_stored(specs: Iterable[DatasetSpec]) -> list[DatasetSpec]:
    """The hub splits of ``specs`` of which no row is stored locally, each once, in plan order."""
    missing: dict[Path, DatasetSpec] = {}
    for spec in specs:
        for part in hub_parts(spec):
            cache = HubRowCache(part)
            meta = cache.meta()
            if int(meta.get("rows", 0)) == 0 and not meta.get("complete"):
                missing.setdefault(cache.folder, part)
    return list(missing.values())


def stored_whole(spec: DatasetSpec) -> bool:
    """Every hub split a run of ``spec`` reads is stored to its end: the run reads it without the hub."""
    parts = hub_parts(spec)
    return bool(parts) and all(HubRowCache(part).meta().get("complete") for part in parts)


def _described(parts: list[DatasetSpec]) -> str:
    """``hub dataset medqa (openlifescienceai/medqa, split test; runspecs/medical/medical_mcq.json)``."""
    shown = [
        f"{part.name} ({part.hf_repo}{f', subset {part.subset}' if part.subset else ''}, split {part.split}; "
        f"{part.file})"
        for part in parts
    ]
    return f"hub dataset{'s' if len(shown) > 1 else ''} {'; '.join(shown)}"


def _unreachable(answer: HubAnswer) -> str:
    """``the Hugging Face hub at URL is unreachable (connection refused)``; names HF_ENDPOINT when it chose the URL."""
    named = " (HF_ENDPOINT)" if os.environ.get("HF_ENDPOINT", "").strip() else ""
    return f"the Hugging Face hub at {answer.endpoint}{named} is unreachable ({answer.reason})"


def _fetch(parts: Iterable[DatasetSpec]) -> str:
    """The one `evalkit fetch` command that stores all of ``parts`` (a name fetches its in-context split too)."""
    return f"evalkit fetch {' '.join(dict.fromkeys(part.name for part in parts))}"


def _ways_out(parts: list[DatasetSpec]) -> str:
    return (
        f"either run `{_fetch(parts)}` where the network is reachable (it stores the rows in {cache_root()}: copy "
        "that folder here, or set EVALKIT_CACHE_DIR to a copy), or set HF_HUB_OFFLINE=1 to use rows stored here "
        "without asking the hub"
    )


class HubUnreachable(UserError):
    """Hub data with no stored rows and a hub that does not answer (or may not be asked): exit 2, one message."""


def require_stored(specs: Iterable[DatasetSpec]) -> None:
    """Offline (``HF_HUB_OFFLINE``), every hub dataset needs stored rows: one HubUnreachable naming all without."""
    missing = not_stored(specs)
    if missing:
        raise HubUnreachable(
            f"the hub is offline (HF_HUB_OFFLINE is set) and no rows of {_described(missing)} are stored locally in "
            f"{cache_root()}; run `{_fetch(missing)}` where the network is reachable and copy that folder here (or "
            "set EVALKIT_CACHE_DIR to a copy), or unset HF_HUB_OFFLINE to read them from the hub"
        )


def require_hub_or_stored(specs: Iterable[DatasetSpec]) -> None:
    """Before any engine starts: each hub dataset has stored rows or the hub answers; else one HubUnreachable.

    Rows already stored need no hub, so a plan whose hub data is all stored
    makes no network request at all; otherwise the hub is probed once (at
    most :data:`~evalkit.data.hubprobe.DEADLINE` seconds) and every hub
    dataset without stored rows is named in the one message. A partly stored
    copy passes: its rows are read, and the run says what is missing if it
    needs more (:meth:`HubRowCache.rows`).
    """
    specs = list(specs)
    if hub_offline():
        require_stored(specs)
        return
    missing = [part for part in not_stored(specs) if reads_the_hub(part)]
    if not missing:
        return
    answer = probe_hub()
    if not answer.reachable:
        raise HubUnreachable(
            f"{_unreachable(answer)}, and no rows of {_described(missing)} are stored locally; {_ways_out(missing)}"
        )


def require_hub_for_fetch(specs: Iterable[DatasetSpec]) -> None:
    """`evalkit fetch`: a split not yet stored whole needs the hub; one that does not answer is said at once."""
    wanted = [part for spec in specs for part in hub_parts(spec) if reads_the_hub(part)]
    wanted = [part for part in wanted if not HubRowCache(part).meta().get("complete")]
    if not wanted:
        return
    answer = probe_hub()
    if not answer.reachable:
        raise HubUnreachable(
            f"fetch: {_unreachable(answer)}, and fetching {_described(wanted)} needs it; run `{_fetch(wanted)}` "
            f"where the network is reachable and copy {cache_root()} here (or set EVALKIT_CACHE_DIR to a copy)"
        )

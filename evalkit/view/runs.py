"""Finding runs: the run folders under the folders a user names, and what each says about itself.

A run folder is recognised by what a run leaves in it (run.json, results.json
or records/), so a copied folder, a run still in progress and one that failed
before its first record are all listed; what cannot be read is named, never
raised. Everything here comes from run.json, results.json and the records
folder's file names: listing runs never reads a records file past its first line.

A run folder is untrusted input: a file of it is read only when it resolves
(symlinks followed) inside the run folder, so ``records/x.jsonl ->
~/.ssh/id_rsa`` or a ``records`` link to another folder is named, never
read; run.json and results.json are read up to 64 MiB.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.report.results import ResultRow, row_from_dict
from evalkit.util.confine import MAX_JSON_BYTES, is_within, read_capped
from evalkit.util.safe_names import safe_name

RECORDS = "records"
SENT = "sent"
#: the bytes read from a records file to learn its dataset and metric (one record is rarely longer)
_FIRST_LINE_LIMIT = 1 << 20


@dataclass(frozen=True)
class Pair:
    """One dataset-metric pair of a run and its records file (which may not exist yet)."""

    dataset: str
    metric: str
    records: Path
    #: the run folder: the files above are read only when they resolve inside it
    root: Path | None = None

    @property
    def sent(self) -> Path:
        """The file of what was sent for this pair's dataset (shared by its metrics)."""
        return self.records.parent / SENT / safe_name(self.dataset, suffix=".jsonl")

    @property
    def has_records(self) -> bool:
        """The records file is there and inside the run folder (a link out of it is never read)."""
        return readable(self.records, self.root)

    @property
    def has_sent(self) -> bool:
        return readable(self.sent, self.root)

    @property
    def outside(self) -> list[str]:
        """The pair's files that are links out of the run folder, named for the page (they are not read)."""
        return [
            f"{path.parent.name}/{path.name} is a link to a file outside the run folder; not read"
            for path in (self.records, self.sent)
            if self.root is not None and _is_file(path) and not is_within(path, self.root)
        ]


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:
        return False


def readable(path: Path, root: Path | None) -> bool:
    """A regular file that resolves inside ``root`` (the run folder)."""
    return _is_file(path) and (root is None or is_within(path, root))


@dataclass
class RunInfo:
    """What the runs list shows of a run, read once per change of its run.json and results.json."""

    run_id: str
    path: Path
    status: str
    started: str
    finished: str
    models: list[str]
    datasets: list[str]
    problems: list[str] = field(default_factory=list)
    stamp: tuple[float, ...] = ()
    #: ``K/N`` for a run of one shard (``evalkit run --shard K/N``), else empty
    shard: str = ""

    @property
    def in_progress(self) -> bool:
        return self.status == "running"


def is_run_dir(path: Path) -> bool:
    return (path / "run.json").is_file() or (path / "results.json").is_file() or (path / RECORDS).is_dir()


def read_json(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """(the object, None), (None, None) when absent, or (None, a message naming the file) when unreadable.

    The file is one of the run folder's own (``path.parent``): a link out of it is named, not read.
    """
    if _is_file(path) and not is_within(path, path.parent):
        return None, f"{path.name} is a link to a file outside the run folder; not read"
    try:
        data = json.loads(read_capped(path, MAX_JSON_BYTES))
    except FileNotFoundError:
        return None, None
    except OSError as error:
        return None, f"{path.name} is unreadable: {error.strerror or type(error).__name__}"
    except ValueError as error:
        return None, f"{path.name} is unreadable: {error}"
    if not isinstance(data, dict):
        return None, f"{path.name} is not a JSON object"
    return data, None


def _stamp(path: Path) -> tuple[float, ...]:
    out: list[float] = []
    for name in ("run.json", "results.json"):
        try:
            st = (path / name).stat()
            out += [st.st_mtime_ns, st.st_size]
        except OSError:
            out += [0, 0]
    return tuple(out)


def read_run(run_id: str, path: Path) -> RunInfo:
    """A run's summary from run.json (falling back on results.json); problems are listed, not raised."""
    manifest, problem_m = read_json(path / "run.json")
    results, problem_r = read_json(path / "results.json")
    problems = [p for p in (problem_m, problem_r) if p]
    m = manifest or {}
    r = results or {}
    status = str(m.get("status") or ("finished" if results else "unknown"))
    models = [str(x) for x in m.get("models") or []]
    datasets = [str(x) for x in (m.get("datasets") or {})]
    found = r.get("results")
    rows: list[Any] = found if isinstance(found, list) else []
    if not models:
        models = list(dict.fromkeys(str(x.get("model")) for x in rows if isinstance(x, dict)))
    if not datasets:
        datasets = list(dict.fromkeys(str(x.get("dataset")) for x in rows if isinstance(x, dict)))
    if not datasets:
        pairs = (m.get("config") or r.get("config") or {}).get("dataset_metric") or []
        datasets = list(dict.fromkeys(str(p[0]) for p in pairs if isinstance(p, list) and p))
    return RunInfo(
        run_id=run_id,
        path=path,
        status=status,
        started=str(m.get("started") or ""),
        finished=str(m.get("finished") or r.get("finished") or ""),
        models=models,
        datasets=datasets,
        problems=problems,
        stamp=_stamp(path),
        shard=_shard(m.get("shard")),
    )


def _shard(saved: Any) -> str:
    """A shard run's ``K/N`` from its run.json (an untrusted value: anything but two integers is no shard)."""
    if isinstance(saved, dict) and all(type(saved.get(k)) is int for k in ("index", "count")):
        return f"{saved['index']}/{saved['count']}"
    return ""


def _folders(folder: Path, root: Path) -> list[Path]:
    """The folders in ``folder``, by name; a link to a folder outside ``root`` is not a run of it (it could be any
    folder), and a folder that cannot be listed has none."""
    try:
        return sorted((p for p in folder.iterdir() if p.is_dir() and is_within(p, root)), key=lambda p: p.name)
    except OSError:
        return []


class RunCatalog:
    """The runs found under the folders given to `evalkit view`, looked for again on every listing.

    A folder may be a run folder, a folder of run folders (an output_dir) or a folder of those (the shards'
    ``--output-dir runs/shard-K`` under ``runs``); run ids are the folders' names, a name found twice gets
    ``-2``, ``-3``.
    """

    def __init__(self, roots: list[Path]) -> None:
        self.roots = [Path(r) for r in roots]
        self._runs: dict[str, RunInfo] = {}
        self._ids: dict[Path, str] = {}
        self._lock = threading.RLock()

    def _candidates(self) -> list[Path]:
        found: list[Path] = []
        for root in self.roots:
            if is_run_dir(root):
                found.append(root)
                continue
            for child in _folders(root, root):
                if is_run_dir(child):
                    found.append(child)
                else:  # an output_dir of its own inside the one given (one level, no deeper)
                    found += [p for p in _folders(child, root) if is_run_dir(p)]
        return found

    def refresh(self) -> list[RunInfo]:
        """Every run, newest first (by folder name, which starts with the start time)."""
        with self._lock:
            return self._refresh()

    def _refresh(self) -> list[RunInfo]:
        seen: dict[str, RunInfo] = {}
        for path in self._candidates():
            key = path.resolve()
            run_id = self._ids.get(key)
            if run_id is None:
                run_id = path.name
                n = 2
                taken = set(self._ids.values())
                while run_id in taken:
                    run_id = f"{path.name}-{n}"
                    n += 1
                self._ids[key] = run_id
            known = self._runs.get(run_id)
            seen[run_id] = known if known is not None and known.stamp == _stamp(path) else read_run(run_id, path)
        self._runs = seen
        return sorted(seen.values(), key=lambda r: (r.started or r.path.name, r.path.name), reverse=True)

    def get(self, run_id: str) -> RunInfo | None:
        with self._lock:
            if run_id not in self._runs:
                self._refresh()
            run = self._runs.get(run_id)
            if run is not None and run.stamp != _stamp(run.path):
                run = self._runs[run_id] = read_run(run_id, run.path)
            return run


def first_record(path: Path, root: Path | None = None) -> dict[str, Any] | None:
    """The first record of a records file (for its dataset and metric names); None when there is none."""
    if not readable(path, root):
        return None
    try:
        with path.open("rb") as handle:
            line = handle.readline(_FIRST_LINE_LIMIT)
    except OSError:
        return None
    try:
        data = json.loads(line)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def run_pairs(run: RunInfo) -> list[Pair]:
    """The run's pairs in the config's order, then any records file the config does not name."""
    records = run.path / RECORDS
    manifest, _ = read_json(run.path / "run.json")
    results, _ = read_json(run.path / "results.json")
    config = (manifest or {}).get("config") or (results or {}).get("config") or {}
    pairs: dict[Path, Pair] = {}
    for entry in config.get("dataset_metric") or []:
        if isinstance(entry, list) and len(entry) >= 2:
            dataset, metric = str(entry[0]), str(entry[1])
            path = records / safe_name(dataset, metric, suffix=".jsonl")
            pairs.setdefault(path, Pair(dataset, metric, path, run.path))
    for row in (results or {}).get("results") or []:
        if isinstance(row, dict) and row.get("dataset") and row.get("metric"):
            dataset, metric = str(row["dataset"]), str(row["metric"])
            path = records / safe_name(dataset, metric, suffix=".jsonl")
            pairs.setdefault(path, Pair(dataset, metric, path, run.path))
    try:
        files = sorted(records.glob("*.jsonl"))
    except OSError:
        files = []
    for path in files:
        if path in pairs:
            continue
        first = first_record(path, run.path)
        if first and first.get("dataset") is not None and first.get("metric") is not None:
            pairs[path] = Pair(str(first["dataset"]), str(first["metric"]), path, run.path)
        else:
            stem = path.stem
            dataset, _, metric = stem.partition("__")
            pairs[path] = Pair(dataset or stem, metric or "?", path, run.path)
    return list(pairs.values())


def find_pair(run: RunInfo, dataset: str, metric: str) -> Pair | None:
    return next((p for p in run_pairs(run) if p.dataset == dataset and p.metric == metric), None)


def result_rows(run: RunInfo) -> tuple[list[ResultRow], str | None]:
    """The results table's rows, or ([], why not) for a run that has no readable results.json yet."""
    results, problem = read_json(run.path / "results.json")
    if results is None:
        return [], problem or "no results.json yet" + (" (the run is in progress)" if run.in_progress else "")
    rows: list[ResultRow] = []
    try:
        rows = [row_from_dict({**r, "kind": "dataset"}) for r in results.get("results") or [] if isinstance(r, dict)]
        rows += [
            row_from_dict({**r, "kind": "aggregate"}) for r in results.get("aggregate") or [] if isinstance(r, dict)
        ]
    except TypeError as error:
        return rows, f"results.json has rows evalkit cannot read: {error}"
    return rows, None


def file_size(path: Path) -> int | None:
    try:
        return os.stat(path).st_size
    except OSError:
        return None

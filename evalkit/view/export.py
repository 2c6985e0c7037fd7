"""`evalkit view --export DIR`: the viewer's pages as a static site that opens from file:// with no server.

The run pages are the server's, rendered with relative links. A pair's
samples are data files, so a run of a million records makes a few hundred
files, not a million pages:

* ``index.html`` is the samples table; its rows come from ``rows/0001.js``, ...
  (10,000 records a file, listed in ``data.js``), loaded one after another by a
  ``<script>`` tag each (browsers refuse fetch() from file://) and filtered,
  sorted and paged in the browser (``view.js``);
* ``sample.html#<n>/<sample id>`` is every sample's page, drawn by ``sample.js``
  from ``samples/<n>.js``: the records and what was sent of the samples whose
  id hashes to ``n`` (about 1,000 samples a file), copied from the run's files
  line by line, never parsed and written again;
* the audio clips and images of the first ``media_samples`` samples of each pair
  (1,000 by default) are written beside the pages, cut as the server would
  serve them; a sample past that says its media are not in the export.

Each pair's model-vs-model comparisons (the ones the run's page links) are
written too; comparing two runs needs the server. Before anything is written
the export says how many records, files and bytes it is about to write
(estimated from the indexes); ``--samples N`` and ``--filter QUERY`` (the
samples page's own query, e.g. ``failure=any&model=x``) export a part of it.
"""

from __future__ import annotations

import contextlib
import logging
import math
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from evalkit.util import jsonutil
from evalkit.util.atomic import write_text_atomic
from evalkit.util.confine import MAX_LINE_BYTES, capped_lines
from evalkit.view import index, pages
from evalkit.view.indexcheck import harden, uri
from evalkit.view.indexrows import record_row, record_text, text
from evalkit.view.links import SAMPLE_PAGE, ExportLinks, compare_file, sample_chunk, segment
from evalkit.view.media import CLEAN, MediaMissing
from evalkit.view.queries import PairFilter, Sources, chosen_samples, sample_row
from evalkit.view.runs import Pair, RunInfo, run_pairs
from evalkit.view.static import CSS, JS, SAMPLE_JS
from evalkit.view.viewer import BadQuery, NotFound, Viewer

log = logging.getLogger("evalkit.view")

#: records in one row file of the samples table
ROWS_PER_FILE = 10_000
#: samples in one chunk file (about), and the most chunk files a pair gets
SAMPLES_PER_CHUNK = 1_000
MAX_CHUNKS = 500
#: samples of each pair whose audio and images are written (each is a file or more)
MEDIA_SAMPLES = 1_000
#: bytes of a table row beside its texts (its keys, numbers, excerpts and link), for the estimate
_ROW_BYTES = 420
_BUFFER = 1 << 16


@dataclass(frozen=True)
class Selection:
    """What of each pair an export takes: records matching ``query`` (the samples page's query string keys),
    the first ``samples`` samples of them; ``media_samples``: how many samples' media are written."""

    query: dict[str, str] | None = None
    samples: int | None = None
    media_samples: int = MEDIA_SAMPLES

    def filter(self) -> PairFilter | None:
        return PairFilter.parse(self.query) if self.query else None


@dataclass
class PairPlan:
    """One pair's share of the export, counted from its indexes before anything is written."""

    run: RunInfo
    pair: Pair
    sources: Sources
    records: int
    samples: int
    record_bytes: int
    text_bytes: int
    sent_bytes: int
    chunks: int

    @property
    def files(self) -> int:
        """index.html, data.js, sample.html, the row and chunk files and the comparisons (media are apart)."""
        return 3 + math.ceil(self.records / ROWS_PER_FILE) + self.chunks + max(0, len(self.run.models) - 1)

    @property
    def bytes(self) -> int:
        return self.record_bytes + self.sent_bytes + self.text_bytes + self.records * _ROW_BYTES


def export_site(
    roots: list[Path],
    out: Path,
    media_roots: list[Path] | None = None,
    selection: Selection | None = None,
    say: Callable[[str], None] | None = None,
) -> int:
    """Write every run under ``roots`` to ``out``; the number of files written (media included).

    Media are copied only from inside each run folder and ``media_roots`` (as the server serves them), so a
    run naming a file elsewhere cannot put it in the site a user shares. ``say`` gets the estimate first.
    """
    chosen = selection or Selection()
    speak = say or (lambda line: None)
    viewer = Viewer(roots, media_roots)
    runs = viewer.runs()
    plans: list[PairPlan] = []
    for summary in runs:
        run = viewer.catalog.get(summary["run_id"])
        if run is None:
            continue
        for pair in run_pairs(run):
            if pair.has_records:
                try:
                    plans.append(_plan(viewer, run, pair, chosen, speak))
                except NotFound as error:
                    log.warning("evalkit view --export: %s", error)
    speak(_estimate(plans, chosen, out))
    out.mkdir(parents=True, exist_ok=True)
    (out / "static").mkdir(exist_ok=True)
    write_text_atomic(out / "static" / "view.css", CSS)
    write_text_atomic(out / "static" / "view.js", JS)
    write_text_atomic(out / "static" / "sample.js", SAMPLE_JS)
    write_text_atomic(out / "index.html", pages.runs_page(runs, ExportLinks(0)))
    written = 4
    chunks = {(p.run.run_id, p.pair.dataset, p.pair.metric): p.chunks for p in plans}
    for summary in runs:
        run = viewer.catalog.get(summary["run_id"])
        if run is None:
            continue
        links = ExportLinks(2, chunks)
        folder = out / links.run_dir(run.run_id)
        folder.mkdir(parents=True, exist_ok=True)
        write_text_atomic(folder / "index.html", pages.run_page(viewer.run(run.run_id), links))
        written += 1
        for plan in (p for p in plans if p.run.run_id == run.run_id):
            written += PairWriter(viewer, plan, out, chosen, ExportLinks(3, chunks)).write()
    return written


def _plan(viewer: Viewer, run: RunInfo, pair: Pair, chosen: Selection, say: Callable[[str], None]) -> PairPlan:
    if index.status(pair.records, "records") != "ready":
        say(f"evalkit view --export: indexing {pair.records.name} (a run folder from before the run wrote its index)")
    sources = viewer.sources(run, pair)  # built here and now: the export waits for its indexes
    with _scratch(sources, chosen) as db:
        records, samples, record_bytes, text_bytes = db.execute(
            "SELECT count(*), count(DISTINCT sample_id), coalesce(sum(len), 0), coalesce(sum(length(txt.text)), 0) "
            "FROM rec LEFT JOIN txt USING (id) WHERE sample_id IN (SELECT sample_id FROM chosen)"
        ).fetchone()
        sent_bytes = 0
        if sources.sent is not None:
            sent_bytes = db.execute(
                "SELECT coalesce(sum(len), 0) + coalesce(sum(length(text)), 0) * ? FROM s.sent "
                "WHERE sample_id IN (SELECT sample_id FROM chosen)",
                (max(1, len(run.models)),),
            ).fetchone()[0]
    chunks = max(1, min(MAX_CHUNKS, math.ceil(samples / SAMPLES_PER_CHUNK)))
    return PairPlan(run, pair, sources, records, samples, record_bytes, text_bytes, sent_bytes, chunks)


@contextlib.contextmanager
def _scratch(sources: Sources, chosen: Selection) -> Iterator[sqlite3.Connection]:
    """A private scratch database holding the chosen sample ids, with the pair's indexes attached read-only."""
    db = harden_writable(sqlite3.connect("", uri=True))
    try:
        db.execute("ATTACH DATABASE ? AS r", (uri(sources.index.db),))
        if sources.sent is not None:
            db.execute("ATTACH DATABASE ? AS s", (uri(sources.sent.db),))
        sql, args = chosen_samples(chosen.filter(), chosen.samples, sources.sent is not None)
        db.execute("CREATE TABLE chosen(sample_id TEXT PRIMARY KEY)")
        db.execute(f"INSERT OR IGNORE INTO chosen {sql}", args)
        yield db
    finally:
        db.close()


def harden_writable(db: sqlite3.Connection) -> sqlite3.Connection:
    """:func:`~evalkit.view.indexcheck.harden` for a connection that writes its own scratch tables."""
    harden(db)
    db.execute("PRAGMA query_only = OFF")  # the scratch database only: the indexes are attached read-only
    return db


def _estimate(plans: list[PairPlan], chosen: Selection, out: Path) -> str:
    records = sum(p.records for p in plans)
    samples = sum(p.samples for p in plans)
    size = sum(p.bytes for p in plans)
    files = 4 + len({p.run.run_id for p in plans}) + sum(p.files for p in plans)
    media = sum(min(p.samples, chosen.media_samples) for p in plans)
    part = " (a part: --samples/--filter)" if chosen.query or chosen.samples is not None else ""
    return (
        f"evalkit view --export: {records:,} records of {samples:,} samples in {len(plans)} pair(s){part}: "
        f"about {size / 1e6:,.0f} MB in about {files:,} files, plus the audio and images of {media:,} samples; "
        f"writing {out}"
    )


class PairWriter:
    """One pair's folder: its table page and row files, its sample page and chunk files, media, comparisons."""

    def __init__(self, viewer: Viewer, plan: PairPlan, out: Path, chosen: Selection, links: ExportLinks) -> None:
        self.viewer, self.plan, self.out, self.chosen, self.links = viewer, plan, out, chosen, links
        run, pair = plan.run, plan.pair
        self.folder = out / links.pair_dir(run.run_id, pair.dataset, pair.metric)
        self.row_files: list[str] = []
        self.media: dict[str, int] = {}  # the samples whose media are written, with their chunk
        self.written = 0

    def write(self) -> int:
        run, pair, plan = self.plan.run, self.plan.pair, self.plan
        (self.folder / "rows").mkdir(parents=True, exist_ok=True)
        (self.folder / "samples").mkdir(exist_ok=True)
        chunks = [(self.folder / "samples" / f"{n}.js").open("wb", buffering=_BUFFER) for n in range(plan.chunks)]
        try:
            for handle in chunks:
                handle.write(b'window.EVALKIT_SAMPLES({"records":[')
            started = [False] * plan.chunks
            with _scratch(plan.sources, self.chosen) as db:
                self._records(db, chunks, started)
                every = self.chosen.query is None and self.chosen.samples is None
                ids = None if every else {sid for (sid,) in db.execute("SELECT sample_id FROM chosen")}
            started = [False] * plan.chunks
            for handle in chunks:
                handle.write(b'],"sent":[')
            self._sent(chunks, started, ids)
            media = self._media()
            for n, handle in enumerate(chunks):
                handle.write(b'],"media":' + jsonutil.dumps_bytes(media.get(n, {})) + b"});\n")
        finally:
            for handle in chunks:
                handle.close()
        self.written += plan.chunks
        data = {"files": self.row_files, "records": plan.records}
        write_text_atomic(self.folder / "data.js", "window.EVALKIT_PAIR = " + jsonutil.dumps(data) + ";\n")
        page = self.viewer.pair(run.run_id, pair.dataset, pair.metric, {})
        write_text_atomic(self.folder / "index.html", pages.export_pair_page(page, self.links))
        write_text_atomic(
            self.folder / SAMPLE_PAGE, pages.export_sample_page(run.run_id, pair.dataset, pair.metric, run.models)
        )
        self.written += 3
        return self.written + self._comparisons()

    def _records(self, db: sqlite3.Connection, chunks: list[BinaryIO], started: list[bool]) -> None:
        """The chosen records in file order: each line copied to its sample's chunk, its row to a row file."""
        plan = self.plan
        found = db.execute("SELECT id, off, len FROM rec WHERE sample_id IN (SELECT sample_id FROM chosen) ORDER BY id")
        block: list[dict[str, Any]] = []
        with plan.pair.records.open("rb", buffering=_BUFFER) as handle:
            while batch := found.fetchmany(2000):
                for line, off, length in batch:
                    handle.seek(off)
                    raw = handle.read(min(length, MAX_LINE_BYTES))
                    try:
                        rec = jsonutil.loads(raw)
                    except ValueError:
                        continue
                    if not isinstance(rec, dict):
                        continue
                    sample_id, model, row, score, failure, sent = record_row(rec)
                    n = sample_chunk(sample_id, plan.chunks)
                    chunks[n].write(b"," + raw if started[n] else raw)
                    started[n] = True
                    if len(self.media) < self.chosen.media_samples:
                        self.media.setdefault(sample_id, n)
                    groups = rec.get("groups")
                    block.append(
                        {
                            "line": line,
                            **sample_row((sample_id, model, row, score, failure), rec),
                            "groups": {str(k): text(v) for k, v in groups.items() if v is not None}
                            if isinstance(groups, dict)
                            else {},
                            "text": record_text(rec),
                            "sent": sent,
                            "href": f"{SAMPLE_PAGE}#{n}/{segment(sample_id)}",
                        }
                    )
                    if len(block) >= ROWS_PER_FILE:
                        self._rows(db, block)
                        block = []
        if block or not self.row_files:
            self._rows(db, block)

    def _rows(self, db: sqlite3.Connection, block: list[dict[str, Any]]) -> None:
        """One row file; each row's search text gets its prompt's (from the sent file's index)."""
        keys = list({r["sent"] for r in block if r["sent"]})
        prompts: dict[str, str] = {}
        if self.plan.sources.sent is not None:
            for start in range(0, len(keys), 500):
                part = keys[start : start + 500]
                marks = ",".join("?" * len(part))
                prompts.update(db.execute(f"SELECT key, text FROM s.sent WHERE key IN ({marks})", part))
        for r in block:
            prompt = prompts.get(r.pop("sent") or "")
            if prompt:
                r["text"] = f"{r['text']}\n{prompt}"
        name = f"rows/{len(self.row_files) + 1:04d}.js"
        (self.folder / name).write_bytes(b"window.EVALKIT_ROWS(" + jsonutil.dumps_bytes(block) + b");\n")
        self.row_files.append(name)
        self.written += 1

    def _sent(self, chunks: list[BinaryIO], started: list[bool], ids: set[str] | None) -> None:
        """What was sent for the chosen samples, each entry copied to its sample's chunk."""
        pair = self.plan.pair
        if self.plan.sources.sent is None:
            return
        with pair.sent.open("rb", buffering=_BUFFER) as handle:
            for _, _, line in capped_lines(handle):
                if line is None or not line.endswith(b"\n"):
                    continue
                try:
                    entry = jsonutil.loads(line)
                except ValueError:
                    continue
                if not isinstance(entry, dict) or not entry.get("key"):
                    continue
                sample_id = text(entry.get("sample_id"))
                if ids is not None and sample_id not in ids:
                    continue
                n = sample_chunk(sample_id, self.plan.chunks)
                raw = line.rstrip(b"\r\n")
                chunks[n].write(b"," + raw if started[n] else raw)
                started[n] = True

    def _media(self) -> dict[int, dict[str, list[dict[str, Any]]]]:
        """The conversations of the first samples, with their media written and linked; by chunk, then sample."""
        run, pair = self.plan.run, self.plan.pair
        found: dict[int, dict[str, list[dict[str, Any]]]] = {}
        for sample_id, n in self.media.items():
            try:
                sample = self.viewer.sample(run.run_id, pair.dataset, pair.metric, sample_id)
            except NotFound:
                continue
            self.written += _write_media(self.viewer, sample, self.out, self.links)
            found.setdefault(n, {})[sample_id] = [self._conversation(sample, c) for c in sample["conversations"]]
        return found

    def _conversation(self, sample: dict[str, Any], conv: dict[str, Any]) -> dict[str, Any]:
        parts = []
        for part in conv["media"]:
            ref = part["ref"]
            shown = {k: part[k] for k in ("index", "kind", "message", "where", "missing")}
            if part["kind"] == "image":
                ext = str(ref.get("format") or "img").lower()
                src = self.links.media(sample["run_id"], sample["dataset"], conv["key"], str(part["index"]), ext)
                size = f"{ref.get('width')}×{ref.get('height')} {ref.get('format')}" if ref.get("width") else ""
                shown.update(clips=[{"src": src, "label": ""}], caption=size)
            else:
                clips = [(str(part["index"]), ref.get("start"), ref.get("end"), "as sent")]
                if part["chunks"]:
                    count = len(part["chunks"])
                    clips = [
                        (f"{part['index']}-{i}", s, t, f"chunk {i + 1} of {count}")
                        for i, (s, t) in enumerate(part["chunks"])
                    ]
                shown["clips"] = [
                    {
                        "src": self.links.media(sample["run_id"], sample["dataset"], conv["key"], name, "wav"),
                        "label": f"{label}: {pages.seconds(start)}–{pages.seconds(end)} s",
                    }
                    for name, start, end, label in clips
                ]
            parts.append(shown)
        keep = ("key", "models", "missing", "kind", "requests", "messages", "tools", "params", "params_by_turn", "old")
        return {**{k: conv.get(k) for k in keep}, "media": parts}

    def _comparisons(self) -> int:
        """The pair's comparisons of one model with the next (what the run's page links), each a page beside it.

        A comparison that cannot be made (a model without records in this pair) is written as the page saying
        so, as the server shows it, so no link of the run's page leads nowhere.
        """
        run, pair = self.plan.run, self.plan.pair
        written = 0
        for model_a, model_b in zip(run.models, run.models[1:]):
            params = {
                "a": f"{run.run_id}:{model_a}",
                "b": f"{run.run_id}:{model_b}",
                "pair": f"{pair.dataset}/{pair.metric}",
            }
            try:
                found = self.viewer.compare(params["a"], params["b"], params["pair"])
                page = pages.compare_page(found, params, self.links)
            except (NotFound, BadQuery) as error:
                page = pages.compare_page(None, params, self.links, str(error))
            write_text_atomic(self.folder / compare_file(model_a, model_b), page)
            written += 1
        return written


def _write_media(viewer: Viewer, sample: dict[str, Any], out: Path, links: ExportLinks) -> int:
    """The clips and images a sample page shows, once each (pairs of one dataset share them); how many written."""
    written = 0
    for conv in sample["conversations"]:
        for part in conv["media"]:
            if part["missing"]:
                continue
            names = [str(part["index"])]
            if part["kind"] == "audio" and part["chunks"]:
                names = [f"{part['index']}-{i}" for i in range(len(part["chunks"]))]
            if part["kind"] == "audio" and isinstance(part["ref"].get("corruption"), dict):
                names.append(f"{part['index']}{CLEAN}")  # the clean source, played beside the corrupted clip
            ext = "wav" if part["kind"] == "audio" else str(part["ref"].get("format") or "img").lower()
            for name in names:
                target = out / links.media_file(sample["run_id"], sample["dataset"], conv["key"], name, ext)
                if target.exists():
                    continue
                try:
                    body, _ = viewer.media_part(sample["run_id"], sample["dataset"], conv["key"], name)
                except (MediaMissing, NotFound) as error:
                    log.warning("evalkit view --export: %s", error)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(body)
                written += 1
    return written

"""`evalkit view --export DIR`: the viewer's pages as a static site that opens from file:// with no server.

The pages are the server's, rendered with relative links. A samples page
gets its rows from a ``data.js`` beside it (loaded by a ``<script>`` tag:
browsers refuse fetch() from file://) and filters, sorts and pages them in
the browser; the audio clips and images are written beside the pages, cut as
the server would serve them. Each pair's model-vs-model comparisons (the
ones the run's page links) are written too; comparing two runs needs the
server.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evalkit.util.atomic import write_text_atomic
from evalkit.view import pages
from evalkit.view.index import opened, read_lines
from evalkit.view.links import ExportLinks, compare_file
from evalkit.view.media import CLEAN, MediaMissing
from evalkit.view.queries import Sources, sample_row
from evalkit.view.runs import Pair, RunInfo, run_pairs
from evalkit.view.static import CSS, JS
from evalkit.view.viewer import BadQuery, NotFound, Viewer

log = logging.getLogger("evalkit.view")
#: records read from the file at a time while writing a data.js
_CHUNK = 2000


def export_site(roots: list[Path], out: Path, media_roots: list[Path] | None = None) -> int:
    """Write every run under ``roots`` to ``out``; the number of pages written.

    Media are copied only from inside each run folder and ``media_roots`` (as the server serves them), so a
    run naming a file elsewhere cannot put it in the site a user shares.
    """
    viewer = Viewer(roots, media_roots)
    out.mkdir(parents=True, exist_ok=True)
    (out / "static").mkdir(exist_ok=True)
    write_text_atomic(out / "static" / "view.css", CSS)
    write_text_atomic(out / "static" / "view.js", JS)
    runs = viewer.runs()
    write_text_atomic(out / "index.html", pages.runs_page(runs, ExportLinks(0)))
    written = 1
    for summary in runs:
        run = viewer.catalog.get(summary["run_id"])
        if run is not None:
            written += _export_run(viewer, run, out)
    return written


def _export_run(viewer: Viewer, run: RunInfo, out: Path) -> int:
    links = ExportLinks(2)
    folder = out / links.run_dir(run.run_id)
    folder.mkdir(parents=True, exist_ok=True)
    write_text_atomic(folder / "index.html", pages.run_page(viewer.run(run.run_id), links))
    written = 1
    for pair in run_pairs(run):
        if not pair.has_records:
            continue
        try:
            written += _export_pair(viewer, run, pair, out)
        except NotFound as error:
            log.warning("evalkit view --export: %s", error)
    return written


def _export_pair(viewer: Viewer, run: RunInfo, pair: Pair, out: Path) -> int:
    links = ExportLinks(3)
    folder = out / links.pair_dir(run.run_id, pair.dataset, pair.metric)
    folder.mkdir(parents=True, exist_ok=True)
    sources = viewer.sources(run, pair)  # built here and now: the export waits for its indexes
    data = viewer.pair(run.run_id, pair.dataset, pair.metric, {})
    with (folder / "data.js").open("w", encoding="utf-8") as handle:
        handle.write('window.EVALKIT_PAIR = {"rows": [\n')
        first = True
        for row in _rows(sources, run, pair, links):
            handle.write(("" if first else ",\n") + json.dumps(row, ensure_ascii=True))
            first = False
        handle.write("\n]};\n")
    write_text_atomic(folder / "index.html", pages.export_pair_page(data, links))
    written = 1
    for sample_id in _sample_ids(sources):
        sample = viewer.sample(run.run_id, pair.dataset, pair.metric, sample_id)
        _write_media(viewer, sample, out, links)
        write_text_atomic(
            folder / links.sample(run.run_id, pair.dataset, pair.metric, sample_id).rsplit("/", 1)[1],
            pages.sample_page(sample, links),
        )
        written += 1
    return written + _export_comparisons(viewer, run, pair, folder, links)


def _export_comparisons(viewer: Viewer, run: RunInfo, pair: Pair, folder: Path, links: ExportLinks) -> int:
    """The pair's comparisons of one model with the next (what the run's page links), each a page beside it.

    A comparison that cannot be made (a model without records in this pair) is written as the page saying so,
    as the server shows it, so no link of the run's page leads nowhere.
    """
    written = 0
    for model_a, model_b in zip(run.models, run.models[1:]):
        params = {
            "a": f"{run.run_id}:{model_a}",
            "b": f"{run.run_id}:{model_b}",
            "pair": f"{pair.dataset}/{pair.metric}",
        }
        try:
            page = pages.compare_page(viewer.compare(params["a"], params["b"], params["pair"]), params, links)
        except (NotFound, BadQuery) as error:
            page = pages.compare_page(None, params, links, str(error))
        write_text_atomic(folder / compare_file(model_a, model_b), page)
        written += 1
    return written


def _sample_ids(sources: Sources) -> Iterator[str]:
    with opened(sources.index.db) as db:
        for (sample_id,) in db.execute("SELECT sample_id FROM rec GROUP BY sample_id ORDER BY min(id)"):
            yield sample_id


def _rows(sources: Sources, run: RunInfo, pair: Pair, links: ExportLinks) -> Iterator[dict[str, Any]]:
    """Every record's row for the page's filters: what the table shows and the text searched."""
    prompts: dict[str, str] = {}
    if sources.sent is not None:
        with opened(sources.sent.db) as db:
            prompts = dict(db.execute("SELECT key, text FROM sent"))
    with opened(sources.index.db) as db:
        found = db.execute(
            "SELECT id, off, len, sample_id, model, row, score, failure, sent, text FROM rec JOIN txt USING (id) "
            "ORDER BY id"
        )
        while True:
            chunk = found.fetchmany(_CHUNK)
            if not chunk:
                return
            records = read_lines(sources.index.source, [(r[1], r[2]) for r in chunk])
            for (line, _, _, sample_id, model, row, score, failure, sent, text), rec in zip(chunk, records):
                rec = rec or {}
                found_groups = rec.get("groups")
                groups: dict[str, Any] = found_groups if isinstance(found_groups, dict) else {}
                yield {
                    "line": line,
                    **sample_row((sample_id, model, row, score, failure), rec),
                    "groups": {str(k): str(v) for k, v in groups.items() if v is not None},
                    "text": (text or "") + "\n" + prompts.get(sent or "", ""),
                    "href": links.sample(run.run_id, pair.dataset, pair.metric, sample_id).rsplit("/", 1)[1],
                }


def _write_media(viewer: Viewer, sample: dict[str, Any], out: Path, links: ExportLinks) -> None:
    """The clips and images a sample page shows, once each (pairs of one dataset share them)."""
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

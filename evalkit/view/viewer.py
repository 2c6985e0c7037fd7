"""What each page shows, as plain data: the one place the server, the JSON API and the static export ask.

Every method is blocking (it may build an index) and is called from a worker
thread by the server. A problem with one run or one file is reported in the
answer (``problems``) for the page to show; :class:`NotFound` is for names
that do not exist (a 404), :class:`BadQuery` for query values that cannot be
used (a 400).
"""

from __future__ import annotations

import math
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import evalkit
from evalkit.report.tables import n_cell
from evalkit.report.usage import usage_line, usage_lines
from evalkit.util import jsonutil
from evalkit.util.confine import Roots, capped_lines, too_long
from evalkit.view import index, media, scan
from evalkit.view.index import IndexState
from evalkit.view.pairing import indexed_statistics
from evalkit.view.queries import (
    BadQuery,
    PairFilter,
    Sources,
    changed_samples,
    facets,
    record_at,
    sample_records,
    samples_page,
    sent_entries,
)
from evalkit.view.runs import Pair, RunCatalog, RunInfo, find_pair, read_json, result_rows, run_pairs

__all__ = ["BadQuery", "NotFound", "Viewer"]

#: the key of a media part named by a record itself (runs made before sent files): ``line-<n>``
LINE_KEY = "line-"


INDEXING = (
    "indexing this pair in the background: this page was read from the file; filters offer what results.json names"
)

#: seconds of reading a records file one request may spend before it answers with what it has read (the page
#: says how far it got and reloads itself to read on): a page comes back in well under a second at any size
SCAN_SECONDS = 0.3
SCAN_BUDGET = scan.Budget(seconds=SCAN_SECONDS)


class NotFound(LookupError):
    """A run, pair, sample or media part that is not there; the message names it."""


def _finite(value: Any) -> float | None:
    return value if isinstance(value, (int, float)) and math.isfinite(value) else None


class Viewer:
    """The runs under the folders `evalkit view` was given, and every question a page asks of them.

    A run's media are read only inside its own folder, the ``media_roots`` the user gave (``--media-root``,
    e.g. a local dataset's folder) and evalkit's package (its ``pkg://`` datasets); a path a run merely
    names is never trusted. ``show_paths`` puts the folders' absolute paths in the answers (off: the API
    of a page any site could try to read names no folder of this machine).
    """

    def __init__(
        self,
        roots: list[Path],
        media_roots: list[Path] | None = None,
        show_paths: bool = False,
        scan_budget: scan.Budget = SCAN_BUDGET,
    ) -> None:
        self.catalog = RunCatalog(roots)
        self.media_roots = Roots([*(media_roots or []), Path(evalkit.__file__).parent])
        self.show_paths = show_paths
        #: how much a samples page reads of a file without its index before it answers (see evalkit.view.scan)
        self.scan_budget = scan_budget

    def roots(self, run: RunInfo) -> Roots:
        """The folders a file this run names may be read from."""
        return Roots([run.path]) + self.media_roots

    def _path(self, run: RunInfo) -> str | None:
        return str(run.path) if self.show_paths else None

    # -- runs ------------------------------------------------------------------------------------------------

    def runs(self) -> list[dict[str, Any]]:
        return [
            {
                "run_id": r.run_id,
                "path": self._path(r),
                "status": r.status,
                "in_progress": r.in_progress,
                "shard": r.shard,
                "started": r.started,
                "finished": r.finished,
                "models": r.models,
                "datasets": r.datasets,
                "problems": r.problems,
            }
            for r in self.catalog.refresh()
        ]

    def compare_choices(self) -> list[dict[str, Any]]:
        """Each run's id, models and ``dataset/metric`` pairs: what the compare form offers to pick."""
        return [
            {"run_id": r.run_id, "models": r.models, "pairs": [f"{p.dataset}/{p.metric}" for p in run_pairs(r)]}
            for r in self.catalog.refresh()
        ]

    def _run(self, run_id: str) -> RunInfo:
        run = self.catalog.get(run_id)
        if run is None:
            raise NotFound(f"no run {run_id!r} here")
        return run

    def run(self, run_id: str) -> dict[str, Any]:
        """The results table (from results.json) and the run's pairs with their records files."""
        run = self._run(run_id)
        rows, problem = result_rows(run)
        pairs = run_pairs(run)
        problems = list(run.problems)
        if problem:
            problems.append(problem)
        problems += [note for p in pairs for note in p.outside if note not in problems]
        have = [p for p in pairs if p.has_records]
        if not have:
            problems.append("no records in this run folder (records/ is empty or missing)")
        results, _ = read_json(run.path / "results.json")
        return {
            "run_id": run.run_id,
            "path": self._path(run),
            "status": run.status,
            "in_progress": run.in_progress,
            "started": run.started,
            "finished": run.finished,
            "models": run.models,
            "results": [
                {
                    "dataset": r.dataset,
                    "metric": r.metric,
                    "model": r.model,
                    "kind": r.kind,
                    "score": _finite(r.score),
                    "ci_low": _finite(r.ci_low),
                    "ci_high": _finite(r.ci_high),
                    # a peer's names and scale (an AU-Harness config): what the table shows; links keep evalkit's
                    "shown": {
                        "dataset": r.shown_dataset,
                        "metric": r.shown_metric,
                        **dict(zip(("score", "ci_low", "ci_high"), map(_finite, r.scaled()))),
                        "tool": str(r.reported_as.get("tool") or ""),
                        "scale": r.scale,
                    }
                    if r.reported_as is not None
                    else None,
                    "n": r.n,
                    # a row that stopped early (stop_at_ci, a budget): why and how far, as results.json says
                    "partial": r.partial,
                    "n_text": n_cell(r),
                    "n_failed": r.n_failed,
                    "unreliable": r.unreliable,
                    "error": r.error,
                    "failure_reasons": r.failure_reasons,
                    "robustness": r.details.get("robustness"),  # a robustness variant: its level and paired test
                    "has_records": any(p.dataset == r.dataset and p.metric == r.metric for p in have),
                    "usage": usage_line(r.usage) if r.usage is not None else None,
                    "judge_usage": usage_line(r.judge_usage) if r.judge_usage is not None else None,
                }
                for r in rows
            ],
            # the run's tokens, cost, budget and whether it is partial, as the console and report.html say them
            "usage": usage_lines(results) if isinstance(results, dict) else [],
            "pairs": [{"dataset": p.dataset, "metric": p.metric, "has_records": p in have} for p in pairs],
            "problems": problems,
        }

    # -- a pair ----------------------------------------------------------------------------------------------

    def _pair(self, run_id: str, dataset: str, metric: str) -> tuple[RunInfo, Pair]:
        run = self._run(run_id)
        pair = find_pair(run, dataset, metric)
        if pair is None:
            raise NotFound(f"run {run_id!r} has no pair {dataset} × {metric}")
        return run, pair

    def sources(self, run: RunInfo, pair: Pair, wait: bool = True) -> Sources:
        """The pair's indexes, brought up to date; NotFound when it has no records file.

        With ``wait`` False, a pair whose index is not built yet gets its build
        started in the background and Sources without indexes (``indexed`` False):
        the caller answers from the file itself meanwhile (:mod:`evalkit.view.scan`).
        """
        if not pair.has_records:
            raise NotFound(f"no records for {pair.dataset} × {pair.metric} in this run (yet)")
        has_sent = pair.has_sent
        sent_path = pair.sent if has_sent else None
        if not wait:
            pending = [
                (path, kind)
                for path, kind in ((pair.records, "records"), (pair.sent, "sent"))
                if (kind == "records" or has_sent) and index.status(path, kind) == "build"
            ]
            if pending:
                for path, kind in pending:
                    index.start_build(path, kind)
                return Sources(None, None, [*self._notes(run, pair, None), INDEXING], pair.records, sent_path)
        try:
            index.wait_build(pair.records, "records")
            records = index.refresh(pair.records, "records")
        except FileNotFoundError:
            raise NotFound(f"no records for {pair.dataset} × {pair.metric} in this run (yet)") from None
        except OSError as error:
            if os.access(pair.records, os.R_OK):  # the file is fine: the cache folder is what failed
                where = index.cache_dir() if self.show_paths else "evalkit's cache folder"
                raise NotFound(
                    f"cannot keep the index of {pair.records.name} in {where}: {error.strerror or error} "
                    "(set EVALKIT_CACHE_DIR to a writable folder)"
                ) from None
            raise NotFound(f"{pair.records.name} is unreadable: {error.strerror or error}") from None
        sent: IndexState | None = None
        problems: list[str] = []
        try:
            if has_sent:
                index.wait_build(pair.sent, "sent")
                sent = index.refresh(pair.sent, "sent")
        except OSError as error:
            problems.append(f"{pair.sent.name} (what was sent) is unreadable: {error.strerror or error}")
        return Sources(records, sent, problems + self._notes(run, pair, records), pair.records, sent_path)

    @staticmethod
    def _notes(run: RunInfo, pair: Pair, records: IndexState | None) -> list[str]:
        problems = []
        if run.in_progress:
            written = f"the {records.lines} records" if records is not None else "the records"
            problems.append(f"the run is in progress: showing {written} written so far")
        if records is not None and records.tail_bytes:
            problems.append(
                f"{pair.records.name}: the last line ({records.tail_bytes} bytes) is cut mid-write"
                + (" (or being written now)" if run.in_progress else "")
                + "; skipped"
            )
        if records is not None and records.long_lines:
            problems.append(
                f"{pair.records.name}: {records.long_lines} line(s) are {too_long()} (the first is line "
                f"{records.first_long}); skipped, never read whole"
            )
        if records is not None and records.bad_lines:
            problems.append(
                f"{pair.records.name}: {records.bad_lines} line(s) are not JSON records "
                f"(the first is line {records.first_bad}); skipped"
            )
        return problems

    def _damaged(self, sources: Sources) -> None:
        """A query met a damaged index: it is set aside (a run folder's) or removed (the cache's) and built anew."""
        for state in (sources.records, sources.sent):
            if state is not None:
                index.discard(state)

    def pair(self, run_id: str, dataset: str, metric: str, query: dict[str, str]) -> dict[str, Any]:
        f = PairFilter.parse(query)
        run, pair = self._pair(run_id, dataset, metric)
        sources = self.sources(run, pair, wait=False)
        found: dict[str, Any] | None = None
        if sources.records is not None:
            try:
                found = samples_page(sources, f)
                choices = facets(sources)
            except sqlite3.DatabaseError:
                self._damaged(sources)
                sources = self.sources(run, pair, wait=False)
        if found is None or sources.records is None:
            found = scan.samples_page(pair.records, pair.sent if pair.has_sent else None, f, self.scan_budget)
            choices = _facets_from_results(run, pair)
        return {
            "run_id": run.run_id,
            "dataset": pair.dataset,
            "metric": pair.metric,
            "in_progress": run.in_progress,
            "indexed": sources.records is not None,
            "filter": f.params(),
            "facets": choices,
            "problems": sources.problems,
            # None: the answer is whole; else how far the file was read (total: the matches so far)
            "partial": None,
            **found,
        }

    def pair_filter(self, query: dict[str, str]) -> PairFilter:
        return PairFilter.parse(query)

    # -- a sample --------------------------------------------------------------------------------------------

    def sample(self, run_id: str, dataset: str, metric: str, sample_id: str) -> dict[str, Any]:
        """Every model's record of the sample, what was sent to each, and its media parts with their state."""
        run, pair = self._pair(run_id, dataset, metric)
        sources = self.sources(run, pair, wait=False)
        try:
            numbered = sample_records(sources, sample_id) if sources.records else None
        except sqlite3.DatabaseError:
            self._damaged(sources)
            sources, numbered = self.sources(run, pair, wait=False), None
        if numbered is None or sources.records is None:
            numbered = scan.sample_records(pair.records, sample_id, numbered=not pair.has_sent)
        records = [r for _, r in numbered]
        lines = {id(r): n for n, r in numbered}
        if not records:
            raise NotFound(f"no sample {sample_id!r} in {pair.dataset} × {pair.metric}")
        order = {model: i for i, model in enumerate(run.models)}  # the run's model order, not completion order
        records.sort(key=lambda r: order.get(str(r.get("model")), len(order)))
        keys = list(dict.fromkeys(str(r["sent"]) for r in records if isinstance(r.get("sent"), str)))
        entries = sent_entries(sources.sent, keys) if sources.records else scan.sent_entries(sources.sent_path, keys)
        conversations = []
        for key in keys:
            entry = entries.get(key)
            models = [str(r.get("model")) for r in records if r.get("sent") == key]
            if entry is None:
                conversations.append({"key": key, "models": models, "missing": True, "messages": [], "media": []})
                continue
            conversations.append(
                {
                    "key": key,
                    "models": models,
                    "missing": False,
                    "kind": entry.get("kind"),
                    "requests": entry.get("requests"),
                    "messages": entry.get("messages") or [],
                    "tools": entry.get("tools") or [],
                    # every other field the request sent (generation settings, extra_body): part of what was sent
                    "params": entry.get("params") if isinstance(entry.get("params"), dict) else {},
                    "params_by_turn": entry.get("params_by_turn")
                    if isinstance(entry.get("params_by_turn"), list)
                    else [],
                    "media": [_part_state(p) for p in media.sent_parts(entry, self.roots(run))],
                }
            )
        if not conversations:  # a run made before sent files: the images its records name
            roots = self.roots(run)
            with_images = next((r for r in records if media.record_parts(r, roots)), None)
            if with_images is not None:
                line = lines[id(with_images)]
                if not line and sources.records is None:  # read without its line numbers: they are wanted now
                    wanted = records.index(with_images)
                    again = scan.sample_records(pair.records, sample_id)
                    again.sort(key=lambda n_r: order.get(str(n_r[1].get("model")), len(order)))
                    line = again[wanted][0] if len(again) == len(records) else 0
                if line:
                    conversations.append(
                        {
                            "key": f"{LINE_KEY}{line}",
                            "models": [str(r.get("model")) for r in records],
                            "missing": False,
                            "old": True,
                            "messages": [],
                            "media": [_part_state(p) for p in media.record_parts(with_images, roots)],
                        }
                    )
        return {
            "run_id": run.run_id,
            "dataset": pair.dataset,
            "metric": pair.metric,
            "sample_id": sample_id,
            "records": records,
            "conversations": conversations,
            "problems": sources.problems,
        }

    # -- media -----------------------------------------------------------------------------------------------

    def media_part(self, run_id: str, dataset: str, key: str, part: str) -> tuple[bytes, str]:
        """(bytes, media type) of one part; NotFound for a name the run never sent, MediaMissing when not here."""
        run = self._run(run_id)
        clean = part.endswith(media.CLEAN)  # a corrupted clip's clean source, played beside it
        part = part.removesuffix(media.CLEAN)
        try:
            number, chunk = media.parse_part(part)
        except ValueError:
            raise NotFound(f"media part {part!r}: expected a number, or number-chunk") from None
        parts = self._parts(run, dataset, key)
        if number >= len(parts):
            raise NotFound(f"sent entry {key} has no media part {number}")
        found = parts[number]
        if found.kind == "audio":
            return media.audio_wav(found, chunk, clean), "audio/wav"
        if chunk is not None:
            raise NotFound(f"part {number} is an image; it has no chunks")
        return media.image_file(found)

    def _parts(self, run: RunInfo, dataset: str, key: str) -> list[media.MediaPart]:
        pairs = [p for p in run_pairs(run) if p.dataset == dataset and p.has_records]
        roots = self.roots(run)
        if not pairs:
            raise NotFound(f"run {run.run_id!r} has no records of dataset {dataset!r}")
        if key.startswith(LINE_KEY):
            line = key[len(LINE_KEY) :]
            if not line.isdigit():
                raise NotFound(f"no media {key!r}")
            for pair in pairs:
                sources = self.sources(run, pair, wait=False)
                record = (
                    record_at(sources.index, int(line))
                    if sources.records
                    else scan.record_on_line(pair.records, int(line))
                )
                if record is not None and media.record_parts(record, roots):
                    return media.record_parts(record, roots)
            raise NotFound(f"no record on line {line} names an image")
        sources = self.sources(run, pairs[0], wait=False)
        found = sent_entries(sources.sent, [key]) if sources.records else scan.sent_entries(sources.sent_path, [key])
        entry = found.get(key)
        if entry is None:
            raise NotFound(f"dataset {dataset!r} sent nothing with key {key!r}")
        return media.sent_parts(entry, roots)

    # -- comparisons -----------------------------------------------------------------------------------------

    def compare(self, a: str, b: str, pair_name: str, limit: int = 200, offset: int = 0) -> dict[str, Any]:
        """The samples of one pair whose score differs between two runs, or two models of one run.

        ``a`` and ``b`` are ``run_id`` or ``run_id:model`` (a side without a
        model uses the other side's model, or the run's only/first model).
        """
        dataset, sep, metric = pair_name.rpartition("/")
        if not sep or not dataset or not metric:
            raise BadQuery(f"pair={pair_name!r}: expected <dataset>/<metric>")
        sides = []
        for label in (a, b):
            run_id, _, model = label.partition(":")
            run, pair = self._pair(run_id, dataset, metric)
            sides.append((run, pair, model))
        (run_a, pair_a, model_a), (run_b, pair_b, model_b) = sides
        src_a, src_b = self.sources(run_a, pair_a), self.sources(run_b, pair_b)
        models_a, models_b = facets(src_a)["models"], facets(src_b)["models"]
        # a side without a model takes the other's; a run of one model takes that one when the other's
        # name is not in it (runs of small and of large are compared as small against large)
        if not model_a:
            model_a = model_b if model_b in models_a or len(models_a) != 1 else models_a[0]
            model_a = model_a or (models_a[0] if models_a else "")
        if not model_b:
            model_b = model_a if model_a in models_b or len(models_b) != 1 else models_b[0]
        for model, models, label in ((model_a, models_a, a), (model_b, models_b, b)):
            if model not in models:
                raise NotFound(f"{label}: no model {model!r} in this pair (it has {', '.join(models) or 'none'})")
        if (run_a.run_id, model_a) == (run_b.run_id, model_b):
            raise BadQuery("a and b are the same run and model; name two runs or two models")
        answer = changed_samples(src_a.index, model_a, src_b.index, model_b, limit, offset)
        return {
            "a": {"run_id": run_a.run_id, "model": model_a},
            "b": {"run_id": run_b.run_id, "model": model_b},
            "dataset": dataset,
            "metric": metric,
            "statistics": self._statistics((run_a, pair_a, src_a, model_a), (run_b, pair_b, src_b, model_b), metric),
            "problems": src_a.problems + [p for p in src_b.problems if p not in src_a.problems],
            **answer,
        }

    def _statistics(
        self, a: tuple[RunInfo, Pair, Sources, str], b: tuple[RunInfo, Pair, Sources, str], metric: str
    ) -> dict[str, Any] | None:
        """The paired test of evalkit.report.paired (bootstrap of the corpus statistic, McNemar for 0/1 scores).

        Paired through the pairs' indexes, held as arrays (:mod:`evalkit.view.pairing`); an index that does
        not describe its file is set aside and the test made from the files, as the report makes it. The
        per-sample lists are counted, not listed (the page lists a page of the changed samples itself); a test
        that cannot be computed here is said in ``error``, never raised.
        """
        from evalkit.report.compare import metric_options

        (run_a, pair_a, src_a, model_a), (_, pair_b, src_b, model_b) = a, b
        try:
            options = metric_options(_manifest(run_a), pair_a.dataset, metric)
            return indexed_statistics(src_a.index, model_a, src_b.index, model_b, metric, options)
        except sqlite3.DatabaseError:
            self._damaged(src_a)
            self._damaged(src_b)
        except Exception as error:
            return {"error": f"{type(error).__name__}: {error}"}
        return streamed_statistics((pair_a, model_a), (pair_b, model_b), metric, options)


def streamed_statistics(
    a: tuple[Pair, str], b: tuple[Pair, str], metric: str, options: dict[str, Any] | None
) -> dict[str, Any] | None:
    """The paired test made from the records files themselves, every record held as an object: for a pair whose
    index does not describe its file (the indexed test needs memory in proportion to the samples, this one
    several hundred bytes a record)."""
    from evalkit.report.paired import paired_comparison

    (pair_a, model_a), (pair_b, model_b) = a, b
    try:
        result = paired_comparison(
            _records(pair_a.records),
            _records(pair_b.records),
            metric,
            model_a=model_a,
            model_b=model_b,
            options=options,
        )
    except Exception as error:
        return {"error": f"{type(error).__name__}: {error}"}
    out = result.as_dict()
    for key in ("changed", "failed_only_a", "failed_only_b"):
        out[key] = len(out.get(key) or [])
    return out


def _manifest(run: RunInfo) -> dict[str, Any]:
    data, _ = read_json(run.path / "run.json")
    return data or {}


def _records(path: Path) -> Iterator[dict[str, Any]]:
    """A records file's records one at a time (lines that are not JSON, too long, or cut, are skipped)."""
    with path.open("rb") as handle:
        for _, _, line in capped_lines(handle):
            if line is None:
                continue
            if not line.endswith(b"\n"):
                return
            try:
                value = jsonutil.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                yield value


def _part_state(part: media.MediaPart) -> dict[str, Any]:
    return {
        "index": part.index,
        "kind": part.kind,
        "message": part.message,
        "where": media.where(part.ref),
        "missing": media.missing_reason(part.ref, part.dataset, part.roots),
        "ref": part.ref,
        "chunks": part.chunks,
    }


def _facets_from_results(run: RunInfo, pair: Pair) -> dict[str, Any]:
    """The filter's choices while the index is built: what results.json says of the pair (models, failures, groups)."""
    rows, _ = result_rows(run)
    mine = [r for r in rows if r.kind == "dataset" and r.dataset == pair.dataset and r.metric == pair.metric]
    failures: dict[str, int] = {}
    groups: dict[str, dict[str, int]] = {}
    for r in mine:
        for reason, n in (r.failure_reasons or {}).items():
            failures[reason] = failures.get(reason, 0) + int(n)
        found = (r.details or {}).get("groups")
        for name, values in found.items() if isinstance(found, dict) else []:
            for value, result in values.items() if isinstance(values, dict) else []:
                n = result.get("n", 0) if isinstance(result, dict) else 0
                counts = groups.setdefault(str(name), {})
                counts[str(value)] = counts.get(str(value), 0) + int(n)
    return {
        "models": list(dict.fromkeys([r.model for r in mine] or run.models)),
        "failures": failures,
        "groups": groups,
        "score_min": None,
        "score_max": None,
        "scored": sum(r.n for r in mine),
        "records": sum(r.n + r.n_failed for r in mine),
        # the counts above are what results.json says, not the file's (until the index has counted it)
        "from_results": True,
    }

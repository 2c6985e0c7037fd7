"""Questions the pages ask of an index: a filtered, sorted page of samples, the filter choices, one sample, changes.

Answers are plain dicts and lists (what the JSON API returns and the HTML
pages render), built from the index and from the few records of the page,
read back from the records file by offset.
"""

from __future__ import annotations

import contextlib
import math
import sqlite3
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.view.index import (
    IndexState,
    attach,
    connect_pair,
    count_facets,
    opened,
    read_lines,
    stored_facets,
)

SORTS = ("row", "score", "-score", "id")
#: the shortest text the text search's index finds (shorter ones are searched by reading every text)
TRIGRAM = 3
MAX_PER = 500
#: characters of an answer or reference shown in the samples table
EXCERPT = 160

_facets: dict[tuple[str, int], dict[str, Any]] = {}
_facets_lock = threading.Lock()


class BadQuery(ValueError):
    """A query parameter the viewer cannot use; the message names it and what was expected."""


def _number(query: Mapping[str, str], name: str) -> float | None:
    text = (query.get(name) or "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise BadQuery(f"{name}={text!r}: expected a number") from None
    if not math.isfinite(value):
        raise BadQuery(f"{name}={text!r}: expected a finite number")
    return value


def _count(query: Mapping[str, str], name: str, default: int, top: int) -> int:
    text = (query.get(name) or "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        raise BadQuery(f"{name}={text!r}: expected a whole number") from None
    if not 1 <= value <= top:
        raise BadQuery(f"{name}={value}: expected 1 to {top}")
    return value


@dataclass(frozen=True)
class PairFilter:
    """The samples page's query (see /tmp/view_urls.md): which records, in which order, which page."""

    model: str | None = None
    min: float | None = None
    max: float | None = None
    failure: str | None = None
    group: tuple[str, str] | None = None
    q: str | None = None
    sort: str = "row"
    page: int = 1
    per: int = 50

    @classmethod
    def parse(cls, query: Mapping[str, str]) -> PairFilter:
        group = None
        text = query.get("group") or ""
        if text:
            name, sep, value = text.partition(":")
            if not sep or not name:
                raise BadQuery(f"group={text!r}: expected <name>:<value>, e.g. gender:female")
            group = (name, value)
        sort = query.get("sort") or "row"
        if sort not in SORTS:
            raise BadQuery(f"sort={sort!r}: expected one of {', '.join(SORTS)}")
        return cls(
            model=query.get("model") or None,
            min=_number(query, "min"),
            max=_number(query, "max"),
            failure=query.get("failure") or None,
            group=group,
            q=(query.get("q") or "").strip() or None,
            sort=sort,
            page=_count(query, "page", 1, 10**9),
            per=_count(query, "per", 50, MAX_PER),
        )

    def params(self, **changes: Any) -> dict[str, str]:
        """The query string's parameters (defaults left out), with ``changes`` applied."""
        values: dict[str, Any] = {
            "model": self.model,
            "min": self.min,
            "max": self.max,
            "failure": self.failure,
            "group": f"{self.group[0]}:{self.group[1]}" if self.group else None,
            "q": self.q,
            "sort": None if self.sort == "row" else self.sort,
            "page": None if self.page == 1 else self.page,
            "per": None if self.per == 50 else self.per,
        }
        values.update(changes)
        return {k: f"{v:g}" if isinstance(v, float) else str(v) for k, v in values.items() if v is not None}


@dataclass
class Sources:
    """A pair's records index and, when the run recorded what it sent, the sent file's index.

    ``records`` is None while the index is being built (the pages then read the files themselves).
    """

    records: IndexState | None
    sent: IndexState | None = None
    problems: list[str] = field(default_factory=list)
    records_path: Path | None = None
    sent_path: Path | None = None

    @property
    def index(self) -> IndexState:
        if self.records is None:
            raise RuntimeError("the pair's index is not built yet")
        return self.records


@contextlib.contextmanager
def _open(sources: Sources) -> Iterator[sqlite3.Connection]:
    with opened(sources.index.db) as db:
        if sources.sent is not None:
            attach(db, sources.sent.db, "s")
        yield db


def _where(f: PairFilter, with_sent: bool) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    args: list[Any] = []
    if f.model:
        clauses.append("model = ?")
        args.append(f.model)
    if f.min is not None:
        clauses.append("score >= ?")
        args.append(f.min)
    if f.max is not None:
        clauses.append("score <= ?")
        args.append(f.max)
    if f.failure == "any":
        clauses.append("failure IS NOT NULL")
    elif f.failure == "none":
        clauses.append("failure IS NULL")
    elif f.failure:
        clauses.append("failure = ?")
        args.append(f.failure)
    if f.group:
        clauses.append("id IN (SELECT id FROM grp WHERE gv = (SELECT gv FROM gv WHERE name = ? AND value = ?))")
        args += list(f.group)
    if f.q:
        needle = f.q.casefold()
        if len(needle) >= TRIGRAM:  # the text search's index: a phrase of the needle's trigrams is a substring
            phrase = '"' + needle.replace('"', '""') + '"'
            answers, prompts = "SELECT rowid FROM fts WHERE fts MATCH ?", "SELECT rowid FROM s.sfts WHERE sfts MATCH ?"
            wanted = phrase
        else:  # one or two characters: too short for it, every text is read
            answers, prompts = (
                "SELECT id FROM txt WHERE instr(text, ?) > 0",
                "SELECT rowid FROM s.sent WHERE instr(text, ?) > 0",
            )
            wanted = needle
        if with_sent:
            clauses.append(f"(id IN ({answers}) OR sent IN (SELECT key FROM s.sent WHERE rowid IN ({prompts})))")
            args += [wanted, wanted]
        else:
            clauses.append(f"id IN ({answers})")
            args.append(wanted)
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", args


_ORDER = {
    "row": "ORDER BY row, id",
    "score": "ORDER BY score IS NULL, score, id",
    "-score": "ORDER BY score DESC, id",  # SQLite sorts NULL first, so DESC leaves the failed last
    "id": "ORDER BY sample_id, id",
}


def sample_row(indexed: Any, rec: dict[str, Any]) -> dict[str, Any]:
    """A samples table's row: the index's (sample_id, model, row, score, failure) and excerpts of the record.

    One shape for the live pages and the export's data, so both tables show the same columns.
    """
    sample_id, model, row, score, failure = indexed
    answer = rec.get("prediction") if rec.get("prediction") is not None else rec.get("response")
    return {
        "sample_id": sample_id,
        "model": model,
        "row": row,
        "score": score,
        "failure": failure,
        "error": excerpt(rec.get("error")),
        "answer": excerpt(answer),
        "reference": excerpt(rec.get("reference")),
    }


def excerpt(value: Any, limit: int = EXCERPT) -> str:
    if value is None:
        return ""
    text = value if isinstance(value, str) else " | ".join(map(str, value)) if isinstance(value, list) else str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def samples_page(sources: Sources, f: PairFilter) -> dict[str, Any]:
    """One page of the pair's records under ``f``: the rows shown and how many match in all."""
    where, args = _where(f, sources.sent is not None)
    with _open(sources) as db:
        total = db.execute(f"SELECT count(*) FROM rec{where}", args).fetchone()[0]
        # the page's ids first, from the indexes alone (a deep page steps over index entries, not table rows)
        found = db.execute(
            "SELECT id, off, len, sample_id, model, row, score, failure FROM rec WHERE id IN "
            f"(SELECT id FROM rec{where} {_ORDER[f.sort]} LIMIT ? OFFSET ?) {_ORDER[f.sort]}",
            [*args, f.per, (f.page - 1) * f.per],
        ).fetchall()
    records = read_lines(sources.index.source, [(r[1], r[2]) for r in found])
    rows = [
        {"line": line_id, **sample_row((sample_id, model, row, score, failure), rec or {})}
        for (line_id, _, _, sample_id, model, row, score, failure), rec in zip(found, records)
    ]
    pages = max(1, -(-total // f.per))
    return {"total": total, "page": f.page, "pages": pages, "per": f.per, "rows": rows}


def facets(sources: Sources) -> dict[str, Any]:
    """The filter's choices: models, failure reasons and group values with their counts, the score range.

    Counted by the index build when it made the index (:func:`evalkit.view.index.count_facets`), else here once
    per state of the index.
    """
    key = (str(sources.index.db), sources.index.lines + sources.index.size)
    with _facets_lock:
        if key in _facets:
            return _facets[key]
    with _open(sources) as db:
        counted = stored_facets(db) or count_facets(db)
    answer = {**counted, "records": sources.index.lines}
    with _facets_lock:
        if len(_facets) > 64:
            _facets.clear()
        _facets[key] = answer
    return answer


def sample_records(sources: Sources, sample_id: str) -> list[tuple[int, dict[str, Any]]]:
    """Every model's record of one sample with its line number (in the order the file has them)."""
    with opened(sources.index.db) as db:
        spans = db.execute("SELECT id, off, len FROM rec WHERE sample_id = ? ORDER BY id", (sample_id,)).fetchall()
    found = read_lines(sources.index.source, [(off, length) for _, off, length in spans])
    return [(line, r) for (line, _, _), r in zip(spans, found) if r is not None]


def sent_entries(sent: IndexState | None, keys: list[str]) -> dict[str, dict[str, Any]]:
    """What was sent, by key; keys the sent file does not have are left out."""
    if sent is None or not keys:
        return {}
    with opened(sent.db) as db:
        marks = ",".join("?" * len(keys))
        spans = db.execute(f"SELECT key, off, len FROM sent WHERE key IN ({marks})", keys).fetchall()
    entries = read_lines(sent.source, [(off, length) for _, off, length in spans])
    return {key: e for (key, _, _), e in zip(spans, entries) if e is not None}


def record_at(records: IndexState, line: int) -> dict[str, Any] | None:
    """The record on line ``line`` of the file (records made before the sent files are named this way)."""
    with opened(records.db) as db:
        found = db.execute("SELECT off, len FROM rec WHERE id = ?", (line,)).fetchone()
    return read_lines(records.source, [found])[0] if found else None


def neighbours(sources: Sources, sample_id: str) -> tuple[str | None, str | None]:
    """The sample ids before and after this one in file order (for stepping through samples)."""
    with opened(sources.index.db) as db:
        here = db.execute("SELECT min(id) FROM rec WHERE sample_id = ?", (sample_id,)).fetchone()[0]
        if here is None:
            return None, None
        before = db.execute(
            "SELECT sample_id FROM rec WHERE id < ? AND sample_id != ? ORDER BY id DESC LIMIT 1", (here, sample_id)
        ).fetchone()
        after = db.execute(
            "SELECT sample_id FROM rec WHERE id > ? AND sample_id != ? ORDER BY id LIMIT 1", (here, sample_id)
        ).fetchone()
    return (before[0] if before else None), (after[0] if after else None)


def changed_samples(
    a: IndexState, model_a: str, b: IndexState, model_b: str, limit: int = 200, offset: int = 0
) -> dict[str, Any]:
    """The samples both sides have whose score differs (a failure on one side counts), biggest change first."""
    db, other = connect_pair(a.db, b.db)
    try:
        join = f"FROM rec x JOIN {other}.rec y ON y.sample_id = x.sample_id AND y.model = ? WHERE x.model = ?"
        both, higher, lower, total = db.execute(
            f"SELECT count(*), sum(y.score > x.score), sum(y.score < x.score), sum(NOT (x.score IS y.score)) {join}",
            (model_b, model_a),
        ).fetchone()
        found = db.execute(
            f"SELECT x.sample_id, x.score, y.score, x.off, x.len, y.off, y.len {join} AND NOT (x.score IS y.score) "
            "ORDER BY (x.score IS NULL) + (y.score IS NULL) DESC, abs(y.score - x.score) DESC, x.id LIMIT ? OFFSET ?",
            (model_b, model_a, limit, offset),
        ).fetchall()
    finally:
        db.close()
    recs_a = read_lines(a.source, [(r[3], r[4]) for r in found])
    recs_b = read_lines(b.source, [(r[5], r[6]) for r in found])
    rows = []
    for (sample_id, score_a, score_b, *_), ra, rb in zip(found, recs_a, recs_b):
        rows.append(
            {
                "sample_id": sample_id,
                "score_a": score_a,
                "score_b": score_b,
                "answer_a": _answer(ra),
                "answer_b": _answer(rb),
                "failure_a": (ra or {}).get("failure"),
                "failure_b": (rb or {}).get("failure"),
                "reference": excerpt((ra or rb or {}).get("reference"), 400),
            }
        )
    return {
        "compared": both,
        "changed": total or 0,
        "higher_in_b": higher or 0,
        "lower_in_b": lower or 0,
        "rows": rows,
        "limit": limit,
        "offset": offset,
    }


def _answer(record: dict[str, Any] | None) -> str:
    if not record:
        return ""
    value = record.get("prediction") if record.get("prediction") is not None else record.get("response")
    return excerpt(value, 400)


def exists(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:
        return False


def chosen_samples(f: PairFilter | None, samples: int | None, with_sent: bool) -> tuple[str, list[Any]]:
    """SQL (and its arguments) of the sample ids an export takes: those with a record matching ``f``, the first
    ``samples`` of them in dataset order (by row, then by line); every sample when both are None."""
    where, args = _where(f, with_sent) if f is not None else ("", [])
    limit = -1 if samples is None else samples
    sql = f"SELECT sample_id FROM rec{where} GROUP BY sample_id ORDER BY min(row) IS NULL, min(row), min(id) LIMIT ?"
    return sql, [*args, limit]

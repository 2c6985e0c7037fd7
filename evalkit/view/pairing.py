"""The paired test of a comparison page, paired through the pair's index and held as arrays.

:func:`evalkit.report.paired.paired_comparison` reads every record of both
sides into an object per sample (its id, answer, score and stats): ~465 MiB
and ~22 s for 333,333 samples a side. A page needs none of those objects, only
the test's figures and how many samples changed or failed (the list of
changed samples is a page of the index: :func:`evalkit.view.queries.changed_samples`).
So the index pairs the two sides (the first record of each sample id and
model, in the order :func:`evalkit.report.paired.compare_sides` sorts them:
the row, then the id), and only the paired records are read back, by their
offsets in file order, into numeric arrays: their score, whether they were
scored, and their stats row. The test itself is
:func:`evalkit.report.paired.fill_test`, the one the report's comparison
runs, so the figures are the same for the same records and seed.

What a record says is read from the record, as the report reads it (a
``failure``, a score that is not a finite number, a stats row); the index
only says where the records are. A record that is not the one the index
names there (another sample or model: an index of another file, or edited)
raises :class:`Mismatch`, a :class:`sqlite3.DatabaseError`, as any damaged
index does; the caller then compares from the files themselves.
"""

from __future__ import annotations

import copy
import math
import sqlite3
import threading
from array import array
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evalkit.report.paired import change_counts, fill_test, new_comparison
from evalkit.util import jsonutil
from evalkit.util.confine import MAX_LINE_BYTES
from evalkit.view.index import IndexState, connect, connect_pair, read_lines
from evalkit.view.indexrows import text

if TYPE_CHECKING:
    import numpy as np

__all__ = ["Mismatch", "indexed_statistics"]

#: records read back per step (their offsets as Python numbers at most this many at once)
_STEP = 8_192
#: comparisons kept (a page of the changed samples, another page, a reload: the test is not made again)
_KEEP = 16
#: bytes read ahead from the records file (the records read back are in file order: most are in the buffer)
_BUFFER = 1 << 20


class Mismatch(sqlite3.DatabaseError):
    """A record is not the one the index names at its offset: the index does not describe this file."""


@dataclass
class _Pairs:
    """Where the paired records are (A's and B's offset and length), in pairing order, and the id each should have."""

    off_a: array[int]
    len_a: array[int]
    off_b: array[int]
    len_b: array[int]
    #: ``hash`` of each sample id (this process's): enough to tell a record the index did not name
    ids: array[int]
    records_a: int
    samples_a: int
    records_b: int
    samples_b: int


@dataclass
class _Read:
    """One side's paired records as arrays: scored or not, the score, the stats row's width (0: none) and row."""

    scored: np.ndarray
    score: np.ndarray
    width: np.ndarray
    #: rows of the first width met (``width`` says which rows have it); None when no record had stats
    stats: np.ndarray | None


def _pairs(a: IndexState, model_a: str, b: IndexState, model_b: str) -> _Pairs:
    """The samples both sides have, each side's first record of them, in the report's order (row, then id)."""
    db, other = connect_pair(a.db, b.db)
    try:
        sides = (("main", model_a), (other, model_b))
        records = [
            db.execute(f"SELECT count(*) FROM {name}.rec WHERE model = ?", (m,)).fetchone()[0] for name, m in sides
        ]
        # each side's sample count comes with every row (the grouped sides are made once for the whole statement)
        found = db.execute(
            f"""WITH x AS (SELECT sample_id, min(id) AS id FROM main.rec WHERE model = ? GROUP BY sample_id),
                     y AS (SELECT sample_id, min(id) AS id FROM {other}.rec WHERE model = ? GROUP BY sample_id)
                SELECT ra.off, ra.len, rb.off, rb.len, x.sample_id, (SELECT count(*) FROM x), (SELECT count(*) FROM y)
                FROM x JOIN y ON y.sample_id = x.sample_id
                       JOIN main.rec ra ON ra.id = x.id JOIN {other}.rec rb ON rb.id = y.id
                ORDER BY coalesce(ra.row, rb.row) IS NULL, coalesce(ra.row, rb.row), x.sample_id""",
            (model_a, model_b),
        )
        pairs = _Pairs(array("q"), array("q"), array("q"), array("q"), array("q"), records[0], 0, records[1], 0)
        columns = (pairs.off_a, pairs.len_a, pairs.off_b, pairs.len_b, pairs.ids)
        while rows := found.fetchmany(_STEP):
            pairs.samples_a, pairs.samples_b = rows[0][5], rows[0][6]
            for column, values in zip(columns, zip(*rows)):
                column.extend(values if column is not pairs.ids else map(hash, values))
        if not pairs.ids:  # no sample in both: counted apart
            pairs.samples_a, pairs.samples_b = (
                db.execute(f"SELECT count(DISTINCT sample_id) FROM {name}.rec WHERE model = ?", (m,)).fetchone()[0]
                for name, m in sides
            )
    finally:
        db.close()
    return pairs


def _read(state: IndexState, model: str, off: array[int], length: array[int], ids: array[int], width: int) -> _Read:
    """The paired records of one side, read back in file order; stats rows of ``width`` (0: the first met) kept."""
    import numpy as np

    n = len(off)
    filling = _Filling(n, width)
    offsets = np.frombuffer(off, dtype=np.int64)
    lengths = np.frombuffer(length, dtype=np.int64)
    expected = np.frombuffer(ids, dtype=np.int64)
    order = np.argsort(offsets, kind="stable")
    with state.source.open("rb", buffering=_BUFFER) as handle:
        for start in range(0, n, _STEP):
            step = order[start : start + _STEP]
            spans = zip(step.tolist(), offsets[step].tolist(), lengths[step].tolist(), expected[step].tolist())
            for pos, at, size, sample_hash in spans:
                handle.seek(max(0, at))
                try:
                    record = jsonutil.loads(handle.read(max(0, min(size, MAX_LINE_BYTES))))
                except ValueError:
                    record = None
                if (
                    not isinstance(record, dict)
                    or text(record.get("model")) != model
                    or hash(text(record.get("sample_id"))) != sample_hash
                ):
                    raise Mismatch(f"{state.source.name}: the record at byte {at} is not the one its index names")
                filling.put(pos, record)
    return filling.arrays()


class _Filling:
    """One side's arrays while its records are read (the array module's: a number set in place, no object each)."""

    def __init__(self, n: int, width: int) -> None:
        self.n = n
        self.scored = bytearray(n)
        self.score = array("d", bytes(8 * n))
        self.width = array("i", bytes(4 * n))
        #: the stats rows' width kept (the first met unless given) and the rows, flat; allocated at the first row
        self.kept = width
        self.stats: array[float] | None = None

    def put(self, pos: int, record: Mapping[str, Any]) -> None:
        """One record as :func:`evalkit.report.paired.side_samples` reads it: scored or not, score, stats row."""
        score = record.get("score")
        number = float(score) if isinstance(score, (int, float)) and not isinstance(score, bool) else None
        if record.get("failure") is not None or number is None or not math.isfinite(number):
            return
        self.scored[pos] = 1
        self.score[pos] = number
        raw = record.get("stats")
        if isinstance(raw, (list, tuple)) and raw and all(isinstance(v, (int, float)) for v in raw):
            size = self.width[pos] = len(raw)
            if not self.kept:
                self.kept = size
            if size == self.kept:
                if self.stats is None:
                    self.stats = array("d", bytes(8 * self.n * size))
                self.stats[pos * size : (pos + 1) * size] = array("d", [float(v) for v in raw])

    def arrays(self) -> _Read:
        import numpy as np

        stats = None if self.stats is None else np.frombuffer(self.stats, dtype=np.float64).reshape(self.n, self.kept)
        return _Read(
            np.frombuffer(self.scored, dtype=np.bool_),
            np.frombuffer(self.score, dtype=np.float64),
            np.frombuffer(self.width, dtype=np.int32),
            stats,
        )


def _first_dataset(state: IndexState, model: str) -> str:
    """The ``dataset`` the side's first record names (what the report's comparison says it compared)."""
    db = connect(state.db)
    try:
        found = db.execute("SELECT off, len FROM rec WHERE model = ? ORDER BY id LIMIT 1", (model,)).fetchone()
    finally:
        db.close()
    if found is None:
        return ""
    (record,) = read_lines(state.source, [found])
    return str((record or {}).get("dataset") or "")


def _compare(
    a: IndexState,
    model_a: str,
    b: IndexState,
    model_b: str,
    metric: str,
    options: Mapping[str, Any] | None,
    seed: int,
    n_resamples: int,
) -> dict[str, Any]:
    import numpy as np

    pairs = _pairs(a, model_a, b, model_b)
    result, built = new_comparison(
        metric,
        options=options,
        dataset=_first_dataset(a, model_a) or _first_dataset(b, model_b),
        models=(model_a, model_b),
        repeats=(pairs.records_a - pairs.samples_a, pairs.records_b - pairs.samples_b),
        seed=seed,
        n_resamples=n_resamples,
    )
    both = len(pairs.ids)
    result.only_in_a, result.only_in_b = pairs.samples_a - both, pairs.samples_b - both
    side_a = _read(a, model_a, pairs.off_a, pairs.len_a, pairs.ids, 0)
    side_b = _read(b, model_b, pairs.off_b, pairs.len_b, pairs.ids, 0)
    paired = side_a.scored & side_b.scored
    failed_only_a = int(np.count_nonzero(~side_a.scored & side_b.scored))
    failed_only_b = int(np.count_nonzero(side_a.scored & ~side_b.scored))
    result.failed_both = int(np.count_nonzero(~side_a.scored & ~side_b.scored))
    result.n_paired = int(np.count_nonzero(paired))
    counts = (0, 0, 0)
    if not result.n_paired:
        result.notes.append("no sample was scored in both: nothing to compare")
    else:
        scores_a, scores_b = side_a.score[paired], side_b.score[paired]
        widths_a, widths_b = side_a.width[paired], side_b.width[paired]
        with_stats = bool(widths_a.all() and widths_b.all())
        widths = set(np.unique(np.concatenate([widths_a[widths_a > 0], widths_b[widths_b > 0]])).tolist())
        stats: tuple[np.ndarray, np.ndarray] | str = "widths" if with_stats else "missing"
        if built is not None and with_stats and len(widths) == 1:
            (width,) = widths
            if side_a.stats is None or side_a.stats.shape[1] != width:  # rows of another width came first
                side_a = _read(a, model_a, pairs.off_a, pairs.len_a, pairs.ids, width)
            if side_b.stats is None or side_b.stats.shape[1] != width:
                side_b = _read(b, model_b, pairs.off_b, pairs.len_b, pairs.ids, width)
            assert side_a.stats is not None and side_b.stats is not None
            stats = (side_a.stats[paired], side_b.stats[paired])
        del side_a, side_b
        if fill_test(result, built, scores_a, scores_b, stats):
            counts = change_counts(scores_a, scores_b, result.higher_is_better)
    out = result.as_dict()
    out["changed"], out["improved"], out["worsened"] = counts
    out["failed_only_a"], out["failed_only_b"] = failed_only_a, failed_only_b
    return out


_kept: OrderedDict[tuple[Any, ...], dict[str, Any]] = OrderedDict()
_lock = threading.Lock()


def _key(state: IndexState) -> tuple[Any, ...]:
    """What changes when the file or its index does (a file rewritten to the same length has another mtime)."""
    stat = state.source.stat()
    return (str(state.db), str(state.source), state.lines, state.size, stat.st_mtime_ns, stat.st_ino)


def indexed_statistics(
    a: IndexState,
    model_a: str,
    b: IndexState,
    model_b: str,
    metric: str,
    options: Mapping[str, Any] | None = None,
    *,
    seed: int = 0,
    n_resamples: int = 1000,
) -> dict[str, Any]:
    """:meth:`PairedComparison.as_dict` of ``model_a``'s records in ``a`` against ``model_b``'s in ``b``, its
    lists of samples given as counts (``changed``, ``failed_only_a``, ``failed_only_b``).

    The last few comparisons are kept, keyed by the files and indexes as they are now, so paging through the
    changed samples or reloading the page does not make the test again.
    """
    key = (_key(a), model_a, _key(b), model_b, metric, repr(options), seed, n_resamples)
    with _lock:
        found = _kept.get(key)
        if found is not None:
            _kept.move_to_end(key)
            return copy.deepcopy(found)
    found = _compare(a, model_a, b, model_b, metric, options, seed, n_resamples)
    with _lock:
        _kept[key] = found
        while len(_kept) > _KEEP:
            _kept.popitem(last=False)
    return copy.deepcopy(found)

"""Answers read straight from a records file, for the seconds while its index is being built.

Building the index of 300,000 records takes seconds; a first filter must not
wait for it. So until the index is there, a page's question is answered by
one pass over the file: a line is parsed only when it holds the bytes every
matching record must hold (``"model":"x"``, ``"accent":"scottish"``, the
search text), and the records that pass are checked exactly, with the same
rules as the SQL of :mod:`evalkit.view.queries`. The bytes test never rejects
a matching record: it is used only for values whose JSON spelling is certain
(plain ASCII), and both spellings (with and without a space after the colon)
are accepted.

Two cheaper paths, because a user's first click is usually a model's samples
in file order (a cell of the results table): when the question is only
"which model" and the order is by row or id, a line that begins as the engine
writes records (``{"sample_id":..,"model":..,"dataset":..,"metric":..,"row":..,``
with no escapes in those values) and ends with ``}`` is placed by that head
alone, without parsing it; any other line is parsed. (The engine writes a
records file anew on each run, so a line cut mid-write is only ever the last
one, which has no newline and is left out; a cut line followed by another,
which the index would count as unreadable, could only be taken for a record
here if it happened to end with ``}``.) And an answer is kept
(keyed by the files' size and modification time), so the same question asked
again while the index is still being built is not read again.

A file of a million records still takes seconds to read, and a page must
come back in well under one. So the viewer reads with a :class:`Budget`: a
request reads for a fraction of a second, answers with the matches among the
records read so far and says how far it got (the answer's ``partial``), and
the next request for the same question (the page reloads itself) reads on
from where the last one stopped, until the answer is whole. A line longer
than :data:`~evalkit.util.confine.MAX_LINE_BYTES` is passed over in pieces,
never held or parsed (the index counts it, and the page says so).
"""

from __future__ import annotations

import bisect
import heapq
import mmap
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from evalkit.util import jsonutil
from evalkit.util.confine import MAX_LINE_BYTES, capped_lines
from evalkit.view.indexrows import record_row
from evalkit.view.indexrows import score as _score
from evalkit.view.indexrows import text as _text
from evalkit.view.queries import PairFilter, sample_row

_PLAIN = re.compile(r"[A-Za-z0-9 _.,:;!?+\-/@#%&*()=~\[\]{}|<>^']*")
_SENT_KEY = re.compile(rb'"sent": ?"([^"\\]*)"')
_READ = 1 << 20


def _plain(text: str) -> bool:
    return bool(_PLAIN.fullmatch(text))


def _ascii(line: bytes) -> bool:
    """True when the line spells every character in ASCII (no raw UTF-8, no ``\\u`` escape)."""
    return line.isascii() and (b"\\" not in line or b"\\u" not in line)  # one byte is found fastest


def _spellings(name: str, value: str) -> tuple[bytes, bytes] | None:
    """The two ways a JSON writer spells ``"name": "value"``; None when the value could be escaped."""
    if not (_plain(name) and _plain(value)):
        return None
    return f'"{name}":"{value}"'.encode(), f'"{name}": "{value}"'.encode()


def _must(name: str, value: str) -> tuple[bytes, bytes] | None:
    """:func:`_spellings` of a filter's ``name: value``, or None when a record may hold the value unquoted: a
    filter matches the index's text of a value, which for a JSON number, true, false or null is that JSON."""
    try:
        unquoted = not isinstance(jsonutil.loads(value), (str, list, dict))
    except ValueError:
        unquoted = False
    return None if unquoted else _spellings(name, value)


def _lines(path: Path) -> Iterator[tuple[int, int, bytes]]:
    """(line number from 1, offset, line without newline) of every whole line; a cut last line is left out, and
    a line too long to read (its number still counts)."""
    with path.open("rb") as handle:
        for number, (off, _, line) in enumerate(capped_lines(handle), start=1):
            if line is None:
                continue
            if not line.endswith(b"\n"):
                return
            yield number, off, line[:-1]


def _prompt_key(line: bytes, folded: str, keys: set[str]) -> None:
    """Add the key of the sent entry on ``line`` to ``keys`` when its text parts contain ``folded``."""
    try:
        entry = jsonutil.loads(line)
    except ValueError:
        return
    if not isinstance(entry, dict):
        return
    texts = []
    for message in entry.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        for part in content if isinstance(content, list) else []:
            if isinstance(part, dict) and part.get("type") == "text":
                texts.append(str(part.get("text")))
    if folded in "\n".join(texts).casefold():
        keys.add(str(entry.get("key")))


def _matcher(f: PairFilter, keys: set[str]) -> Callable[[dict[str, Any]], bool]:
    """The exact test of one record, as the SQL of queries._where reads ``f``."""
    needle = f.q.casefold() if f.q else None

    def keep(rec: dict[str, Any]) -> bool:
        score = _score(rec.get("score"))
        failure = _text(rec.get("failure")) or None
        if f.model and _text(rec.get("model")) != f.model:
            return False
        if f.min is not None and (score is None or score < f.min):
            return False
        if f.max is not None and (score is None or score > f.max):
            return False
        if f.failure == "any" and failure is None:
            return False
        if f.failure == "none" and failure is not None:
            return False
        if f.failure not in (None, "any", "none") and failure != f.failure:
            return False
        if f.group:
            groups = rec.get("groups")
            value = groups.get(f.group[0]) if isinstance(groups, dict) else None
            if value is None or _text(value) != f.group[1]:
                return False
        if needle is not None:
            text = "\n".join(_text(rec.get(k)) for k in ("reference", "response", "prediction")).casefold()
            if needle not in text and rec.get("sent") not in keys:
                return False
        return True

    return keep


def _sort_key(sort: str, line: int, rec: dict[str, Any]) -> tuple[Any, ...]:
    """The order of queries._ORDER, as a tuple (SQLite puts NULL first in ascending order)."""
    score = _score(rec.get("score"))
    if sort == "score":
        return (score is None, score or 0.0, line)
    if sort == "-score":
        return (score is None, -(score or 0.0), line)
    if sort == "id":
        return (_text(rec.get("sample_id")), line)
    row = rec.get("row")
    row = row if isinstance(row, int) and not isinstance(row, bool) else None
    return (row is not None, row or 0, line)


def _blocks(path: Path, start: int = 0) -> Iterator[tuple[int, bytes]]:
    """(offset, block) of large blocks of whole lines from ``start`` (where a line starts); a cut last line is
    left out, and so is a line longer than the limit: the block holding its end starts with a blank line in its
    place (line numbers still count it)."""
    with path.open("rb") as handle:
        handle.seek(start)
        base = start
        rest = b""
        skipping = False
        while True:
            data = handle.read(_READ)
            if skipping or rest:  # the line ``rest`` begins (or one being skipped) may end here
                at = data.find(b"\n")
                if at == -1 and data and (skipping or len(rest) + len(data) > MAX_LINE_BYTES):
                    base += len(rest) + len(data)  # too long and not ended yet: dropped as it comes
                    rest, skipping = b"", True
                    continue
                if at != -1 and (skipping or len(rest) + at > MAX_LINE_BYTES):
                    base += len(rest) + at  # too long: dropped, its newline kept (a blank line in its place)
                    rest, data = b"", data[at:]
                skipping = False
            block = rest + data if rest else data
            end = block.rfind(b"\n") + 1
            whole, rest = block[:end], block[end:]
            if whole:
                yield base, whole
                base += len(whole)
            if not data:
                return


def _starts(whole: bytes, needles: tuple[bytes, ...], lower: bool) -> list[int]:
    """Offsets in ``whole`` of the lines holding one of ``needles``, in order.

    ``bytes.find`` runs over the block, so lines without a needle cost no
    Python work; after a hit the search goes on from the end of its line.
    ``lower`` searches the block lowered (ASCII); a block with other than ASCII
    in it (raw, or a ``\\u`` escape) may spell a matching text otherwise ("ß"
    case-folds to "ss"), so all its lines are given.
    """
    if lower and not _ascii(whole):
        return _all_starts(whole)
    haystack = whole.lower() if lower else whole
    found: list[int] = []
    for needle in needles:
        pos = haystack.find(needle)
        while pos != -1:
            found.append(whole.rfind(b"\n", 0, pos) + 1)
            pos = haystack.find(needle, whole.index(b"\n", pos) + 1)
    return sorted(set(found)) if len(needles) > 1 and found else found


def _all_starts(whole: bytes) -> list[int]:
    starts = [0]
    at = whole.find(b"\n")
    while at != -1 and at + 1 < len(whole):
        starts.append(at + 1)
        at = whole.find(b"\n", at + 1)
    return starts


def _rarest(path: Path, musts: list[tuple[bytes, bytes]]) -> int:
    """Which needle to search the file for: the one seen least often in the file's first block."""
    with path.open("rb") as handle:
        head = handle.read(_READ)
    counts = [head.count(a) + head.count(b) for a, b in musts]
    return counts.index(min(counts))


#: how evalkit's engine begins every record (evalkit.run.scoring.new_record, written by orjson): the line's own
#: top-level sample_id, model and row, readable without parsing the line when no value holds a quote or backslash
_ENGINE_HEAD = re.compile(
    rb'\{"sample_id":"([^"\\]*)","model":"([^"\\]*)","dataset":"[^"\\]*","metric":"[^"\\]*","row":(-?[0-9]+|null),'
)


@dataclass(frozen=True)
class Budget:
    """How much one request may read before it answers with what it has read so far.

    A question about a file of a million records takes seconds to answer by
    reading it; a page must come back in well under one. So a request reads
    for ``seconds`` (or ``max_bytes``, whichever ends first; None: no limit),
    answers with the matches among the records read so far and says so
    (``partial``), and the next request for the same question reads on from
    there. Every request reads at least one line, so each one gets further.
    """

    seconds: float | None = None
    max_bytes: int | None = None


#: a scan without limits: the whole file in one request
WHOLE = Budget()


class _Clock:
    """One request's share of a :class:`Budget`: its time from now, its bytes from where the reading of a file
    starts (:meth:`at`)."""

    __slots__ = ("deadline", "limit", "max_bytes")

    def __init__(self, budget: Budget) -> None:
        self.deadline = None if budget.seconds is None else time.perf_counter() + budget.seconds
        self.max_bytes = budget.max_bytes
        self.limit: int | None = None

    def at(self, start: int) -> _Clock:
        """The clock for reading a file from ``start`` on."""
        self.limit = None if self.max_bytes is None else start + self.max_bytes
        return self

    def spent(self, pos: int) -> bool:
        """True once the reading has got to ``pos`` and may stop there."""
        if self.limit is not None and pos >= self.limit:
            return True
        return self.deadline is not None and time.perf_counter() >= self.deadline


def samples_page(records: Path, sent: Path | None, f: PairFilter, budget: Budget = WHOLE) -> dict[str, Any]:
    """:func:`evalkit.view.queries.samples_page` by reading the file (no index).

    With a ``budget``, a question that needs more reading than the budget
    allows is answered with the matches among the records read so far, the
    answer's ``partial`` saying how far the reading got (``total`` is then
    the matches so far, not the pair's); the same question asked again reads
    on from there, until the answer is whole. A whole answer is kept (keyed
    by the files' size and modification time), so a user paging back, or the
    page asked again, does not read the file again.
    """
    try:
        stamp = _stamp(records) + (_stamp(sent) if sent is not None else ())
    except OSError:
        stamp = None
    key = (str(records), str(sent), stamp, f)
    scan: _Scan | None = None
    if stamp is not None:
        with _scans_lock:
            scan = _scans.get(key)
            if scan is not None:
                _scans.move_to_end(key)
    if scan is None:
        scan = _Scan(records, sent, f)
    with scan.lock:
        if scan.answer is None:
            scan.read(budget)
        answer = scan.answer or scan.partial_answer()
    if stamp is not None:
        _keep(key, scan)
    return answer


def _keep(key: tuple[Any, ...], scan: _Scan) -> None:
    """Keep a scan for the next request (a whole answer, or how far it got): the older ones within
    :data:`_KEPT_ITEMS` in all, the latest whatever it holds (no more than its one request held anyway, so a far
    page or a search of a common word still gets further with each request)."""
    with _scans_lock:
        _scans[key] = scan
        _scans.move_to_end(key)
        while len(_scans) > _ANSWERS or (len(_scans) > 1 and sum(s.weight() for s in _scans.values()) > _KEPT_ITEMS):
            _scans.popitem(last=False)


def _stamp(path: Path) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_size, st.st_mtime_ns


#: questions kept by samples_page (a whole answer: a page's rows, a few KB; a scan under way: its page so far)
_ANSWERS = 32
#: records (a scan's page so far) and prompt keys that the kept scans may hold in all (a few hundred bytes each)
_KEPT_ITEMS = 200_000
_scans: OrderedDict[tuple[Any, ...], _Scan] = OrderedDict()
_scans_lock = threading.Lock()


class _Scan:
    """One question read from the file, as far as the requests so far have read it.

    First, for a text search, the sent file's prompts (which keys hold the
    text), then the records file from its start; ``pos`` is where the next
    unread line starts. The page holds the best ``page * per`` records met so
    far, so the answer at any point is exact for the records read.
    """

    def __init__(self, records: Path, sent: Path | None, f: PairFilter) -> None:
        self.records, self.f = records, f
        self.lock = threading.Lock()
        self.answer: dict[str, Any] | None = None
        musts: list[tuple[bytes, bytes]] = []
        for name, value in (("model", f.model), ("failure", f.failure if f.failure not in ("any", "none") else None)):
            if value:
                found = _must(name, value)
                if found:
                    musts.append(found)
        if f.failure == "any":  # a failed record names its reason (any JSON value but null; the matcher decides)
            musts.append((b'"failure":', b'"failure": '))
        if f.group:
            found = _must(*f.group)
            if found:
                musts.append(found)
        self.prompts = _Prompts(sent, f.q) if f.q and sent is not None and sent.is_file() else None
        folded = f.q.casefold() if f.q else None
        self.quick_text = folded.encode() if folded and folded.isascii() and _plain(folded) else None
        # a record whose line begins as the engine writes it is kept or dropped, and placed, without parsing it
        # when the question is only about its model and the order is by row or id
        self.lean = not (f.min is not None or f.max is not None or f.failure or f.group or f.q)
        self.lean = self.lean and f.sort in ("row", "id")
        self.model = f.model.encode() if f.model else None
        self.page = _Page(f.page * f.per)
        # the block search looks for the rarest needle (in the file's first block), else the search text
        self.needles: tuple[bytes, ...] = ()
        self.lower = False
        self.musts = musts
        self.pos = 0
        self.size = 0
        #: (offset, line number) of lines whose number is known: line numbers are counted on from the nearest
        self.anchors: list[tuple[int, int]] = [(0, 1)]
        self.keys: set[str] = set()
        self.keep: Callable[[dict[str, Any]], bool] | None = None

    def weight(self) -> int:
        return len(self.page.best) + (len(self.prompts.keys) if self.prompts is not None else 0)

    def read(self, budget: Budget) -> None:
        """Read on from where the last request stopped, within ``budget``; set ``answer`` once the file is read."""
        clock = _Clock(budget)  # one request's time for the prompts and the records alike
        if self.prompts is not None and not self.prompts.done:
            self.prompts.read(clock.at(self.prompts.pos))
            if not self.prompts.done:
                return
        if self.keep is None:  # the prompts that hold the search text are all known now
            self.keys = self.prompts.keys if self.prompts is not None else set()
            self.keep = _matcher(self.f, self.keys)
            self._choose_needles()
        self.size = os.path.getsize(self.records)
        clock.at(self.pos)
        if self.needles and not self.lower and not self.lean:
            done = self._read_mapped(clock)
        else:
            done = self._read_blocks(clock)
        if done:
            self.answer = self._answer(None)
            # the answer is all that is kept of a whole scan: its page so far and the prompts' keys are let go
            self.page.best, self.prompts, self.keys, self.keep = [], None, set(), None

    def _choose_needles(self) -> None:
        if self.quick_text is not None and not self.keys:
            self.needles, self.lower = (self.quick_text,), True
        elif self.musts:
            self.needles = self.musts.pop(_rarest(self.records, self.musts))

    def parse(self, line: bytes, off: int) -> None:
        """The exact test of one line: the byte checks that never drop a match, then the record itself."""
        if self.musts and any(a not in line and b not in line for a, b in self.musts):
            return
        quick_text = self.quick_text
        # (a line with other than ASCII, raw or \u-escaped, is parsed anyway: "ß" case-folds to "ss")
        if quick_text is not None and _ascii(line) and quick_text not in line.lower():
            found_key = _SENT_KEY.search(line)
            if not self.keys or found_key is None or found_key.group(1).decode() not in self.keys:
                return
        try:
            rec = jsonutil.loads(line)
        except ValueError:
            return
        if isinstance(rec, dict) and self.keep is not None and self.keep(rec):
            self.page.add(_sort_key(self.f.sort, off, rec), off, len(line))

    def _read_mapped(self, clock: _Clock) -> bool:
        """The needle searched in the file mapped into memory, a window at a time: no block is read or copied."""
        with self.records.open("rb") as handle:
            for mm, base, first, end in _windows(handle, self.pos):
                for checked, start in enumerate(_mapped_starts(mm, self.needles, first, end), start=1):
                    stop = mm.find(b"\n", start, end)
                    if stop - start <= MAX_LINE_BYTES:  # (a longer one the index leaves out, unread)
                        self.parse(mm[start:stop], base + start)
                    if checked % 64 == 0 and clock.spent(base + stop + 1):
                        self.pos = base + stop + 1
                        return False
                self.pos = base + end
                if clock.spent(self.pos):
                    return self.pos >= self.size
        return True

    def _read_blocks(self, clock: _Clock) -> bool:
        number = self.anchors[-1][1] if self.anchors[-1][0] == self.pos else None
        page, model, sort = self.page, self.model, self.f.sort
        for base, whole in _blocks(self.records, self.pos):
            if self.lean:
                # each line written as the engine writes records is placed by its head alone, unparsed
                pieces = whole.split(b"\n")
                pieces.pop()
                at = base
                for line in pieces:
                    off, at = at, at + len(line) + 1
                    head = _ENGINE_HEAD.match(line) if line.endswith(b"}") else None
                    if head is None:
                        self.parse(line, off)
                    elif model is None or head.group(2) == model:
                        key = _head_key(sort, head, off)
                        if key is None:
                            self.parse(line, off)
                        elif page.full and not key < page.best[0][0].key:
                            page.total += 1
                        else:
                            page.add(key, off, len(line))
                lines = len(pieces)
            elif self.needles:
                for start in _starts(whole, self.needles, self.lower):
                    self.parse(whole[start : whole.index(b"\n", start)], base + start)
                lines = -1
            else:
                start = 0
                while start < len(whole):
                    end = whole.index(b"\n", start)
                    self.parse(whole[start:end], base + start)
                    start = end + 1
                lines = -1
            self.pos = base + len(whole)
            if number is not None:  # the line numbers of every block: none to count again for the page's rows
                number += lines if lines >= 0 else whole.count(b"\n")
                self.anchors.append((self.pos, number))
            if clock.spent(self.pos):
                return self.pos >= self.size  # (the last block read: whole, but for a line cut at the end)
        return True

    def _lines_read(self) -> int:
        """The lines read so far (counted on from the last known line number: each byte counted once)."""
        return _line_numbers(self.records, self.anchors, [self.pos])[self.pos] - 1

    def partial_answer(self) -> dict[str, Any]:
        """The answer among the records read so far, and how far that is."""
        if self.prompts is not None and not self.prompts.done:
            size = self.prompts.size
            return self._answer(
                {"reading": "prompts", "records_read": 0, "bytes_read": 0, "bytes": self.size or _size(self.records),
                 "records_about": None, "sent_bytes_read": self.prompts.pos, "sent_bytes": size}
            )  # fmt: skip
        read = self._lines_read()
        about = _about(read * self.size / self.pos) if self.pos and read else None
        return self._answer(
            {"reading": "records", "records_read": read, "bytes_read": self.pos, "bytes": self.size,
             "records_about": about}
        )  # fmt: skip

    def _answer(self, partial: dict[str, Any] | None) -> dict[str, Any]:
        f = self.f
        chosen = sorted(self.page.best, key=lambda item: item[0].key)[(f.page - 1) * f.per :]
        from evalkit.view.index import read_lines

        spans_chosen = [(off, length) for _, off, length in chosen]
        recs = read_lines(self.records, spans_chosen)
        numbers = _line_numbers(self.records, self.anchors, [off for off, _ in spans_chosen])
        rows = []
        for (off, _), rec in zip(spans_chosen, recs):
            rec = rec or {}
            rows.append({"line": numbers[off], **sample_row(record_row(rec)[:5], rec)})
        total = self.page.total
        out = {"total": total, "page": f.page, "pages": max(1, -(-total // f.per)), "per": f.per, "rows": rows}
        if partial is not None:
            out["partial"] = partial
        return out


def _size(path: Path) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _about(n: float) -> int:
    """``n`` to two significant figures: an estimate is never shown as if it were a count."""
    if n < 100:
        return round(n)
    digits = len(str(int(n))) - 2
    return round(n / 10**digits) * 10**digits


class _Prompts:
    """Which sent entries' prompts hold a search text, read in budgeted steps like the records (see _Scan)."""

    def __init__(self, sent: Path, needle: str) -> None:
        self.sent = sent
        self.folded = needle.casefold()
        self.quick = self.folded.encode() if self.folded.isascii() and _plain(self.folded) else None
        self.keys: set[str] = set()
        self.pos = 0
        self.size = _size(sent)
        self.done = False

    def read(self, clock: _Clock) -> None:
        for base, whole in _blocks(self.sent, self.pos):
            starts = _all_starts(whole) if self.quick is None else _starts(whole, (self.quick,), lower=True)
            for start in starts:
                _prompt_key(whole[start : whole.index(b"\n", start)], self.folded, self.keys)
            self.pos = base + len(whole)
            if clock.spent(self.pos):
                self.done = self.pos >= self.size
                return
        self.done = True


def _head_key(sort: str, head: re.Match[bytes], off: int) -> tuple[Any, ...] | None:
    """The sort key of :func:`_sort_key` from the line's head; None when the line must be parsed after all."""
    if sort == "id":
        try:
            return (head.group(1).decode(), off)
        except UnicodeDecodeError:
            return None
    row = head.group(3)
    return (False, 0, off) if row == b"null" else (True, int(row), off)


def _line_numbers(path: Path, anchors: list[tuple[int, int]], offsets: list[int]) -> dict[int, int]:
    """The line number (from 1) of each line offset, counted from the nearest known (offset, line number) before it,
    reading on in pieces of bounded size. What it counts joins ``anchors`` (kept in order, one a piece), so a scan
    answered again by later requests never counts the same bytes twice."""
    out: dict[int, int] = {}
    bases = [base for base, _ in anchors]
    known = set(bases)
    pos, number = -1, 0
    with path.open("rb") as handle:
        for off in sorted(set(offsets)):
            base, first = anchors[bisect.bisect_right(bases, off) - 1]
            if not base <= pos <= off:  # start again from the anchor (nearer than where the last count stopped)
                pos, number = base, first
            handle.seek(pos)
            while pos < off:
                data = handle.read(min(_READ, off - pos))
                if not data:
                    break
                number += data.count(b"\n")
                pos += len(data)
                if pos not in known:
                    known.add(pos)
                    bisect.insort(anchors, (pos, number))
            out[off] = number
    return out


#: bytes of a file mapped at a time (the pages a search touched count in the viewer's RSS until unmapped)
_WINDOW = 16 << 20


def _windows(handle: BinaryIO, start: int = 0) -> Iterator[tuple[mmap.mmap, int, int, int]]:
    """(map, its offset in the file, first, end): windows of the file mapped read-only, one at a time, from
    ``start`` (where a line starts); each holds the whole lines from ``first`` to ``end`` in it (a line longer
    than a window gets a larger one). A last line without its newline (cut, or being written) is left out."""
    size = os.fstat(handle.fileno()).st_size
    pos = start  # where the next line starts
    while pos < size:
        base = pos - pos % mmap.ALLOCATIONGRANULARITY
        length = min(size - base, _WINDOW)
        while True:
            mm = mmap.mmap(handle.fileno(), length, access=mmap.ACCESS_READ, offset=base)
            end = mm.rfind(b"\n", pos - base) + 1
            if end or base + length >= size or length > MAX_LINE_BYTES + _WINDOW:
                break
            mm.close()
            length = min(size - base, 2 * length)
        if not end and base + length < size:  # a line too long to read: on past its newline, unread
            mm.close()
            handle.seek(base + length)
            pos = size
            for off, line_size, _ in capped_lines(handle, 0):
                pos = off + line_size
                break
            continue
        try:
            if not end:
                return
            yield mm, base, pos - base, end
        finally:
            mm.close()
        pos = base + end


def _mapped_starts(mm: mmap.mmap, needles: tuple[bytes, ...], first: int, end: int) -> Iterator[int]:
    """Offsets of the lines from ``first`` to ``end`` holding one of ``needles``, in order, each once."""

    def starts(needle: bytes) -> Iterator[int]:
        pos = mm.find(needle, first, end)
        while pos != -1:
            yield max(first, mm.rfind(b"\n", first, pos) + 1)
            pos = mm.find(needle, mm.find(b"\n", pos, end) + 1, end)

    last = -1
    for start in heapq.merge(*(starts(n) for n in needles)):
        if start != last:
            yield start
            last = start


class _Page:
    """The ``want`` first records in sort order seen so far (a heap whose top is the last of them), and the count."""

    __slots__ = ("best", "full", "total", "want")

    def __init__(self, want: int) -> None:
        self.want = want
        self.total = 0
        self.best: list[tuple[_Reversed, int, int]] = []
        #: the heap holds ``want`` records: a record sorting after its top is only counted
        self.full = want == 0

    def add(self, key: tuple[Any, ...], off: int, length: int) -> None:
        self.total += 1
        if not self.full:
            heapq.heappush(self.best, (_Reversed(key), off, length))
            self.full = len(self.best) >= self.want
        elif key < self.best[0][0].key:
            heapq.heapreplace(self.best, (_Reversed(key), off, length))


class _Reversed:
    """A sort key ordered backwards, so a min-heap keeps the ``want`` smallest keys at hand (its top: the largest)."""

    __slots__ = ("key",)

    def __init__(self, key: tuple[Any, ...]) -> None:
        self.key = key

    def __lt__(self, other: _Reversed) -> bool:
        return other.key < self.key


def _mapped_lines(path: Path, needles: tuple[bytes, ...]) -> Iterator[tuple[int, bytes]]:
    """(offset, line) of the whole lines holding one of ``needles``, found in the file mapped a window at a time
    (the lines between cost no Python work); a line longer than the limit is left out, as the index leaves it."""
    with path.open("rb") as handle:
        for mm, base, first, end in _windows(handle):
            for start in _mapped_starts(mm, needles, first, end):
                stop = mm.find(b"\n", start, end)
                if stop - start <= MAX_LINE_BYTES:
                    yield base + start, mm[start:stop]


def sample_records(records: Path, sample_id: str, numbered: bool = True) -> list[tuple[int, dict[str, Any]]]:
    """Every record of one sample with its line number, by one pass (lines without the id's bytes are skipped).

    ``numbered`` False leaves every number 0 and saves counting the lines before them (the sample's page needs
    them only for a run that kept no sent file).
    """
    quick = _spellings("sample_id", sample_id)
    found: list[tuple[int, dict[str, Any]]] = []
    lines: Iterator[tuple[int, int, bytes]]
    if quick is None:
        lines = _lines(records)
    else:  # the lines holding the quoted id, found without reading the others (one search for both spellings)
        quoted = (quick[0][quick[0].index(b":") + 1 :],)
        lines = (
            (off, off, line) for off, line in _mapped_lines(records, quoted) if quick[0] in line or quick[1] in line
        )
    for number, _, line in lines:
        try:
            rec = jsonutil.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and _text(rec.get("sample_id")) == sample_id:
            found.append((number, rec))
    if quick is not None:
        numbers = _line_numbers(records, [(0, 1)], [off for off, _ in found]) if numbered else {}
        found = [(numbers.get(off, 0), rec) for off, rec in found]
    return found


def record_on_line(records: Path, wanted: int) -> dict[str, Any] | None:
    """The record on line ``wanted`` (from 1), or None."""
    for number, _, line in _lines(records):
        if number == wanted:
            try:
                rec = jsonutil.loads(line)
            except ValueError:
                return None
            return rec if isinstance(rec, dict) else None
    return None


def sent_entries(sent: Path | None, keys: list[str]) -> dict[str, dict[str, Any]]:
    """The sent entries of ``keys`` by one pass over the sent file."""
    if sent is None or not sent.is_file() or not keys:
        return {}
    wanted = set(keys)
    quick = [s for key in keys for s in (_spellings("key", key) or (b"",))]
    found: dict[str, dict[str, Any]] = {}
    lines: Iterator[tuple[int, bytes]]
    if b"" in quick:  # a key whose bytes are not certain: every line is read
        lines = ((off, line) for _, off, line in _lines(sent))
    else:  # the lines holding a key's bytes, found without reading the others
        lines = _mapped_lines(sent, tuple(quick))
    for _, line in lines:
        if not any(q in line for q in quick):
            continue
        try:
            entry = jsonutil.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("key") in wanted and entry["key"] not in found:
            found[str(entry["key"])] = entry
            if len(found) == len(wanted):
                break
    return found

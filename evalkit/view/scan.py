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
again while the index is still being built is not read again. A line longer
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
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from evalkit.util import jsonutil
from evalkit.util.confine import MAX_LINE_BYTES, capped_lines
from evalkit.view.queries import PairFilter, excerpt

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


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(_text(v) for v in value)
    return str(value)


def prompt_keys(sent: Path | None, needle: str) -> set[str]:
    """The keys of the sent entries whose text parts contain ``needle`` (case-folded)."""
    if sent is None or not sent.is_file():
        return set()
    folded = needle.casefold()
    quick = folded.encode() if folded.isascii() and _plain(folded) else None
    keys: set[str] = set()
    found = ((off, line) for _, off, line in _lines(sent)) if quick is None else _candidates(sent, (quick,), lower=True)
    for _, line in found:
        try:
            entry = jsonutil.loads(line)
        except ValueError:
            continue
        if not isinstance(entry, dict):
            continue
        texts = []
        for message in entry.get("messages") or []:
            content = message.get("content") if isinstance(message, dict) else None
            for part in content if isinstance(content, list) else []:
                if isinstance(part, dict) and part.get("type") == "text":
                    texts.append(str(part.get("text")))
        if folded in "\n".join(texts).casefold():
            keys.add(str(entry.get("key")))
    return keys


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


def _score(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)) and value == value and abs(value) != float("inf"):
        return float(value)
    return None


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


def _blocks(path: Path) -> Iterator[tuple[int, bytes]]:
    """(offset, block) of large blocks of whole lines; a cut last line is left out, and so is a line longer than
    the limit: the block holding its end starts with a blank line in its place (line numbers still count it)."""
    with path.open("rb") as handle:
        base = 0
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


def _candidates(path: Path, needles: tuple[bytes, ...], lower: bool) -> Iterator[tuple[int, bytes]]:
    """(offset, line) of the whole lines holding one of ``needles`` (see :func:`_starts`)."""
    for base, whole in _blocks(path):
        for start in _starts(whole, needles, lower):
            yield base + start, whole[start : whole.index(b"\n", start)]


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


def samples_page(records: Path, sent: Path | None, f: PairFilter) -> dict[str, Any]:
    """:func:`evalkit.view.queries.samples_page` by one pass over the file (no index).

    The same question about the same bytes gets the answer it got before
    (a small cache keyed by the files' size and modification time), so a
    user paging back, or the page asked again, does not read the file twice.
    """
    try:
        stamp = _stamp(records) + (_stamp(sent) if sent is not None else ())
    except OSError:
        stamp = None
    cache_key = (str(records), str(sent), stamp, f)
    if stamp is not None:
        with _answers_lock:
            found = _answers.get(cache_key)
            if found is not None:
                _answers.move_to_end(cache_key)
                return found
    answer = _samples_page(records, sent, f)
    if stamp is not None:
        with _answers_lock:
            _answers[cache_key] = answer
            while len(_answers) > _ANSWERS:
                _answers.popitem(last=False)
    return answer


def _stamp(path: Path) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_size, st.st_mtime_ns


#: answers kept by samples_page (a page's rows: a few KB each)
_ANSWERS = 32
_answers: OrderedDict[tuple[Any, ...], dict[str, Any]] = OrderedDict()
_answers_lock = threading.Lock()


def _samples_page(records: Path, sent: Path | None, f: PairFilter) -> dict[str, Any]:
    musts: list[tuple[bytes, bytes]] = []
    for name, value in (("model", f.model), ("failure", f.failure if f.failure not in ("any", "none") else None)):
        if value:
            found = _spellings(name, value)
            if found:
                musts.append(found)
    if f.failure == "any":  # a failed record names its reason (the engine writes a string)
        musts.append((b'"failure":"', b'"failure": "'))
    if f.group:
        found = _spellings(*f.group)
        if found:
            musts.append(found)
    keys = prompt_keys(sent, f.q) if f.q else set()
    folded = f.q.casefold() if f.q else None
    quick_text = folded.encode() if folded and folded.isascii() and _plain(folded) else None
    keep = _matcher(f, keys)
    # a record whose line begins as the engine writes it is kept or dropped, and placed, without parsing it
    # when the question is only about its model and the order is by row or id
    lean = f.min is None and f.max is None and not f.failure and not f.group and not f.q and f.sort in ("row", "id")
    model = f.model.encode() if f.model else None
    page = _Page(f.page * f.per)
    # the block search looks for the rarest needle (in the file's first block), else the search text
    needles: tuple[bytes, ...] = ()
    lower = False
    if quick_text is not None and not keys:
        needles, lower = (quick_text,), True
    elif musts:
        needles = musts.pop(_rarest(records, musts))

    def parse(line: bytes, off: int) -> None:
        """The exact test of one line: the byte checks that never drop a match, then the record itself."""
        if musts and any(a not in line and b not in line for a, b in musts):
            return
        # (a line with other than ASCII, raw or \u-escaped, is parsed anyway: "ß" case-folds to "ss")
        if quick_text is not None and _ascii(line) and quick_text not in line.lower():
            found_key = _SENT_KEY.search(line)
            if not keys or found_key is None or found_key.group(1).decode() not in keys:
                return
        try:
            rec = jsonutil.loads(line)
        except ValueError:
            return
        if isinstance(rec, dict) and keep(rec):
            page.add(_sort_key(f.sort, off, rec), off, len(line))

    def parse_lines(whole: bytes, base: int, start: int, stop: int) -> None:
        while start < stop:
            end = whole.index(b"\n", start)
            parse(whole[start:end], base + start)
            start = end + 1

    starts_of: list[tuple[int, int]] = []  # (offset, line number) of each block: line numbers found at the end
    number = 1
    if needles and not lower and not lean:
        # the needle is searched in the file mapped into memory, a window at a time: no block is read or copied
        starts_of.append((0, 1))
        with records.open("rb") as handle:
            for mm, base, first, end in _windows(handle):
                for start in _mapped_starts(mm, needles, first, end):
                    parse(mm[start : mm.find(b"\n", start, end)], base + start)
    for base, whole in _blocks(records) if not starts_of else ():
        starts_of.append((base, number))
        if lean:
            # each line written as the engine writes records is placed by its head alone, unparsed
            pieces = whole.split(b"\n")
            pieces.pop()
            number += len(pieces)
            at = base
            for line in pieces:
                off, at = at, at + len(line) + 1
                head = _ENGINE_HEAD.match(line) if line.endswith(b"}") else None
                if head is None:
                    parse(line, off)
                elif model is None or head.group(2) == model:
                    key = _head_key(f.sort, head, off)
                    if key is None:
                        parse(line, off)
                    elif page.full and not key < page.best[0][0].key:
                        page.total += 1
                    else:
                        page.add(key, off, len(line))
            continue
        number += whole.count(b"\n")
        if needles:
            for start in _starts(whole, needles, lower):
                parse(whole[start : whole.index(b"\n", start)], base + start)
        else:
            parse_lines(whole, base, 0, len(whole))
    total, best = page.total, page.best
    chosen = sorted(best, key=lambda item: item[0].key)[(f.page - 1) * f.per :]
    from evalkit.view.index import read_lines

    spans_chosen = [(off, length) for _, off, length in chosen]
    recs = read_lines(records, spans_chosen)
    numbers = _line_numbers(records, starts_of, [off for off, _ in spans_chosen])
    rows = []
    for (off, _), rec in zip(spans_chosen, recs):
        rec = rec or {}
        answer = rec.get("prediction") if rec.get("prediction") is not None else rec.get("response")
        row = rec.get("row")
        rows.append(
            {
                "line": numbers[off],
                "sample_id": _text(rec.get("sample_id")),
                "model": _text(rec.get("model")),
                "row": row if isinstance(row, int) and not isinstance(row, bool) else None,
                "score": _score(rec.get("score")),
                "failure": _text(rec.get("failure")) or None,
                "error": excerpt(rec.get("error")),
                "answer": excerpt(answer),
                "reference": excerpt(rec.get("reference")),
            }
        )
    return {"total": total, "page": f.page, "pages": max(1, -(-total // f.per)), "per": f.per, "rows": rows}


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
    reading on in pieces of bounded size."""
    out: dict[int, int] = {}
    bases = [base for base, _ in anchors]
    pos, number = -1, 0
    with path.open("rb") as handle:
        for off in sorted(set(offsets)):
            base, first = anchors[bisect.bisect_right(bases, off) - 1]
            if not base <= pos <= off:  # start again from the anchor (nearer than where the last count stopped)
                pos, number = base, first
            handle.seek(pos)
            while pos < off:
                data = handle.read(min(4 * _READ, off - pos))
                if not data:
                    break
                number += data.count(b"\n")
                pos += len(data)
            out[off] = number
    return out


#: bytes of a file mapped at a time (the pages a search touched count in the viewer's RSS until unmapped)
_WINDOW = 16 << 20


def _windows(handle: BinaryIO) -> Iterator[tuple[mmap.mmap, int, int, int]]:
    """(map, its offset in the file, first, end): windows of the file mapped read-only, one at a time; each holds
    the whole lines from ``first`` to ``end`` in it (a line longer than a window gets a larger one). A last line
    without its newline (cut, or being written) is left out."""
    size = os.fstat(handle.fileno()).st_size
    pos = 0  # where the next line starts
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


def sample_records(records: Path, sample_id: str) -> list[tuple[int, dict[str, Any]]]:
    """Every record of one sample with its line number, by one pass (lines without the id's bytes are skipped)."""
    quick = _spellings("sample_id", sample_id)
    out = []
    for number, _, line in _lines(records):
        if quick is not None and quick[0] not in line and quick[1] not in line:
            continue
        try:
            rec = jsonutil.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and _text(rec.get("sample_id")) == sample_id:
            out.append((number, rec))
    return out


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
    for _, _, line in _lines(sent):
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

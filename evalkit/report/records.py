"""Reading a run's records back: streamed, one line at a time, tolerant of a line cut by a killed run.

The report, the sample lists and the paired comparisons all read records the
same way: a record file can hold millions of lines, so nothing here keeps more
than the line it is decoding; a line that does not decode (a run killed
mid-write, a disk that filled) is skipped and counted, so the caller can say so.
A run folder is untrusted input: a records file that is a link out of the run
folder is left out (and named), and a line longer than
:data:`~evalkit.util.confine.MAX_LINE_BYTES` is skipped without being held.
"""

from __future__ import annotations

import json
import re
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.util import jsonutil
from evalkit.util.confine import capped_lines, is_within


def decode_record(line: bytes) -> Any:
    """One record line decoded (orjson when installed), or None when it does not decode.

    A line orjson refuses (NaN or Infinity literals, which evalkit's own writer never emits) gets the
    standard library's more lenient parser before it is given up as a torn line of a killed run. That
    parser also takes a lone surrogate escape (``"\\ud800"``) into a string that cannot be written as
    UTF-8, and a run folder is untrusted input: such characters become U+FFFD, so the report is still written.
    """
    try:
        return jsonutil.loads(line)
    except ValueError:
        pass
    try:
        return _encodable(json.loads(line))
    except ValueError:
        return None


#: a surrogate code point left alone in a str (json.loads joins a valid escaped pair into one character)
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _encodable(value: Any) -> Any:
    """``value`` with every string's lone surrogates replaced by U+FFFD (the rare, lenient path only)."""
    if isinstance(value, str):
        return value if value.isascii() else _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_encodable(item) for item in value]
    if isinstance(value, dict):
        return {_encodable(key): _encodable(item) for key, item in value.items()}
    return value


@dataclass
class RecordReader:
    """Streams the records of one run folder and counts the lines it had to skip, per file."""

    records_dir: Path
    #: file name -> lines that did not decode (usually one: the last line of a killed run)
    skipped: dict[str, int] = field(default_factory=dict)

    #: file name -> why it was not read (a link out of the run folder)
    refused: dict[str, str] = field(default_factory=dict)

    def files(self) -> list[Path]:
        """The run's record files (one per dataset-metric pair), in name order; none that resolves outside the run
        folder (the records folder's parent)."""
        if not self.records_dir.is_dir():
            return []
        run = self.records_dir.parent
        found = []
        for path in sorted(p for p in self.records_dir.glob("*.jsonl") if p.is_file()):
            if is_within(path, run):
                found.append(path)
            else:
                self.refused[path.name] = "a link to a file outside the run folder; not read"
        return found

    def read(self, path: Path) -> Generator[dict[str, Any], None, None]:
        """The records of one file, in file order; a line that does not decode is counted, not raised."""
        with path.open("rb") as handle:  # bytes straight to the decoder: no str per line
            for _, _, line in capped_lines(handle):
                if line is None:  # too long to be a record: counted, never held whole
                    self.skipped[path.name] = self.skipped.get(path.name, 0) + 1
                    continue
                if not line.strip():
                    continue
                record = decode_record(line)
                if isinstance(record, dict):
                    yield record
                else:
                    self.skipped[path.name] = self.skipped.get(path.name, 0) + 1

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for path in self.files():
            yield from self.read(path)

    def notes(self) -> list[str]:
        """One sentence per file with skipped lines, for a report that must not hide them."""
        return [
            f"{name}: {count} line{'s' if count != 1 else ''} that did not decode (cut mid-write, or too long?) skipped"
            for name, count in sorted(self.skipped.items())
        ] + [f"{name}: {why}" for name, why in sorted(self.refused.items())]


def pair_files(records_dir: Path) -> dict[tuple[str, str], Path]:
    """(dataset, metric) -> its record file, named by the first record's own fields (file names are made safe).

    A file whose first line does not decode is named after its file name, split at ``__``.
    """
    found: dict[tuple[str, str], Path] = {}
    reader = RecordReader(records_dir)
    for path in reader.files():
        lines = reader.read(path)
        first = next(lines, None)
        lines.close()  # closes the file now, not when the generator is collected
        if first is not None and first.get("dataset") is not None and first.get("metric") is not None:
            key = (str(first["dataset"]), str(first["metric"]))
        else:
            dataset, _, metric = path.stem.rpartition("__")
            key = (dataset or path.stem, metric)
        found.setdefault(key, path)
    return found

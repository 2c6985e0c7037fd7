"""The viewer's indexes written into a run folder when the run or the merge ends, so no first view waits for them.

``evalkit run`` and ``evalkit merge`` call :func:`index_run` on the folder
they finished. A run whose records and sent files come to less than
:data:`EAGER_BYTES` is left to the viewer: it indexes such a folder on its
first view in well under a second, while writing the index here would cost
every run some 25-30 µs of CPU a record. A larger run's records and sent files
each get their index under
``index/`` (beside ``records/``, outside what the run's checksums cover), in
one pass over the file with a bounded SQLite page cache, so the memory used
does not grow with the run. A file whose index is already current is left as
it is (a resume or a rescore that changed nothing), and a failure here never
fails the run: the viewer then builds the index itself, in its cache folder,
as it does for a run folder from an older evalkit. What the viewer checks
before it uses an index from a run folder is in :mod:`evalkit.view.indexcheck`.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger("evalkit.view")

#: a records file at least this large is announced on stderr while it is indexed (small ones are done at once)
ANNOUNCE_BYTES = 64 << 20
#: the records and sent files a run must reach to be indexed as it ends (~23,000 short text records); the viewer
#: builds the index of a smaller run on first view in well under a second (16 MB: about 0.6 s on 2 cores)
EAGER_BYTES = 16 << 20
#: the environment variable that sets :data:`EAGER_BYTES` (bytes; 0 indexes every run as it ends)
EAGER_BYTES_ENV = "EVALKIT_VIEW_INDEX_MIN_BYTES"


def eager_bytes(env: dict[str, str] | None = None) -> int:
    """The threshold in force: ``$EVALKIT_VIEW_INDEX_MIN_BYTES`` when it is a whole number of bytes, else the default.

    Read when the run has ended, so a mistaken value is reported and the default used, never failing a finished run.
    """
    value = (os.environ if env is None else env).get(EAGER_BYTES_ENV)
    if value is None or value.strip() == "":
        return EAGER_BYTES
    try:
        found = int(value.strip())
    except ValueError:
        found = -1
    if found < 0:
        log.warning(
            "%s=%r: expected a whole number of bytes (0 or more); using %d", EAGER_BYTES_ENV, value, EAGER_BYTES
        )
        return EAGER_BYTES
    return found


def run_files(run_dir: Path) -> list[tuple[Path, str]]:
    """The records files and sent files of a run folder (regular files inside it only), with their kinds."""
    records = run_dir / "records"
    found: list[tuple[Path, str]] = []
    for kind, folder in (("records", records), ("sent", records / "sent")):
        try:
            files = sorted(folder.glob("*.jsonl"))
        except OSError:
            continue
        found += [(path, kind) for path in files if path.is_file() and not path.is_symlink()]
    return found


def index_run(run_dir: Path, say: Callable[[str], None] | None = None, min_bytes: int | None = None) -> int:
    """Write (or bring up to date) the index of every records and sent file of ``run_dir``; how many were written.

    Nothing is written for a run whose files come to less than ``min_bytes``
    (default: :func:`eager_bytes`). ``say`` gets a line for each large file
    (default: stderr). Never raises for one file's failure (a full disk, an
    unreadable file): that file is left to the viewer, and the reason is logged.
    """
    speak = say or (lambda line: print(line, file=sys.stderr, flush=True))
    files = run_files(run_dir)
    threshold = eager_bytes() if min_bytes is None else min_bytes
    if threshold > 0 and _total_bytes(files) < threshold:
        return 0  # small: the viewer indexes it on first view
    from evalkit.view import index, indexcheck  # here: a small run's end never loads the indexing code

    written = 0
    for source, kind in files:
        where = indexcheck.folder_index(source, kind)
        if where is None:
            continue
        if indexcheck.checked(source, kind, index.VERSION, index.expected_schema(kind)) is not None:
            continue
        try:
            size = source.stat().st_size
            started = time.perf_counter()
            if size >= ANNOUNCE_BYTES:
                speak(f"evalkit: indexing {source.parent.name}/{source.name} ({size / 1e6:,.0f} MB) for evalkit view")
            state = index.build_into(source, kind, where[0])
            if size >= ANNOUNCE_BYTES:
                speak(f"evalkit: indexed {state.lines:,} lines in {time.perf_counter() - started:.1f} s")
            written += 1
        except Exception as error:  # the viewer indexes the file itself later: never a reason to fail the run
            log.warning("could not index %s for evalkit view: %s", source, error)
    return written


def _total_bytes(files: list[tuple[Path, str]]) -> int:
    total = 0
    for source, _ in files:
        try:
            total += source.stat().st_size
        except OSError:
            continue
    return total

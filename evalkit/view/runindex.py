"""The viewer's indexes written into a run folder when the run or the merge ends, so no first view waits for them.

``evalkit run`` and ``evalkit merge`` call :func:`index_run` on the folder
they finished: each records file and each sent file gets its index under
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
import sys
import time
from collections.abc import Callable
from pathlib import Path

from evalkit.view import index, indexcheck

log = logging.getLogger("evalkit.view")

#: a records file at least this large is announced on stderr while it is indexed (small ones are done at once)
ANNOUNCE_BYTES = 64 << 20


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


def index_run(run_dir: Path, say: Callable[[str], None] | None = None) -> int:
    """Write (or bring up to date) the index of every records and sent file of ``run_dir``; how many were written.

    ``say`` gets a line for each large file (default: stderr). Never raises for
    one file's failure (a full disk, an unreadable file): that file is left to
    the viewer, and the reason is logged.
    """
    speak = say or (lambda line: print(line, file=sys.stderr, flush=True))
    written = 0
    for source, kind in run_files(run_dir):
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

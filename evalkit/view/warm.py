"""Indexing every pair of the viewer's runs in the background from the moment it starts.

A pair's first page is answered by reading its file (:mod:`evalkit.view.scan`)
until its index exists; with the index, filters answer in milliseconds. So the
viewer does not wait for a click: it builds the indexes of the newest runs'
pairs, largest file first (the slowest to read), one child process at a time
(at a lower priority than the viewer; see :func:`evalkit.view.index.start_build`),
and a run whose page is opened moves its pairs to the front of the queue. A
pair a page asks for is indexed at once anyway (``Viewer.sources``), beside
this queue. One child at a time keeps the memory in bounds (one SQLite page
cache) and leaves the second core to the requests.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from evalkit.view import index
from evalkit.view.runs import RunCatalog, RunInfo, file_size, run_pairs

log = logging.getLogger("evalkit.view")

#: the newest runs indexed in the background at start (older ones when their page is opened)
WARM_RUNS = 10


class Warmer:
    """A queue of files to index and the one thread that works through it."""

    def __init__(self, catalog: RunCatalog) -> None:
        self.catalog = catalog
        self._queue: list[tuple[Path, str]] = []
        self._done: set[tuple[Path, str]] = set()
        self._preferred: list[str] = []  # run ids whose page was opened, to be put first by the thread
        self._wake = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._work, name="evalkit-view-warm", daemon=True)

    def start(self) -> None:
        """Queue the newest runs' pairs and start working (listing runs reads no records file)."""
        self._thread.start()
        with self._wake:
            self._wake.notify()

    def prefer(self, run_id: str) -> None:
        """Move the pairs of one run to the front of the queue (its page was just opened).

        Called from the server's event loop: the run's files are looked up by the thread, not here.
        """
        with self._wake:
            self._preferred.append(run_id)
            self._wake.notify()

    def stop(self) -> None:
        """Stop taking files from the queue and wait (briefly) for the thread, so it starts no child after this."""
        with self._wake:
            self._stopped = True
            self._queue.clear()
            self._wake.notify()
        if self._thread.is_alive():
            self._thread.join(5)

    @staticmethod
    def _files(runs: list[RunInfo]) -> list[tuple[Path, str]]:
        """Each run's records files, largest first, each followed by its dataset's sent file."""
        out: list[tuple[Path, str]] = []
        for run in runs:
            pairs = [p for p in run_pairs(run) if p.has_records]
            pairs.sort(key=lambda p: file_size(p.records) or 0, reverse=True)
            for pair in pairs:
                out.append((pair.records, "records"))
                if pair.has_sent:
                    out.append((pair.sent, "sent"))
        return out

    def _put(self, files: list[tuple[Path, str]], front: bool) -> None:
        with self._wake:
            fresh = [f for f in dict.fromkeys(files) if f not in self._done]
            rest = [f for f in self._queue if f not in fresh]
            self._queue = fresh + rest if front else rest + fresh
            self._wake.notify()

    def _work(self) -> None:
        try:
            self._put(self._files(self.catalog.refresh()[:WARM_RUNS]), front=False)
        except Exception:  # the runs list says what is wrong with a run
            log.debug("listing runs to index failed", exc_info=True)
        while True:
            with self._wake:
                while not self._queue and not self._preferred and not self._stopped:
                    self._wake.wait()
                if self._stopped:
                    return
                preferred, self._preferred = self._preferred, []
            for run_id in preferred:  # each put in front of the one before: the last opened comes first
                try:
                    run = self.catalog.get(run_id)
                    if run is not None:
                        self._put(self._files([run]), front=True)
                except Exception:  # the run's page says what is wrong with it
                    log.debug("listing the pairs of %s failed", run_id, exc_info=True)
            with self._wake:
                if not self._queue or self._stopped:
                    continue
                path, kind = self._queue.pop(0)
                self._done.add((path, kind))
            try:
                if index.status(path, kind) != "ready":
                    index.start_build(path, kind)
                    while not index.wait_build(path, kind, timeout=1.0) and not self._stopped:
                        pass
            except Exception:  # the page that needs this file says what is wrong with it
                log.debug("background index of %s failed", path, exc_info=True)

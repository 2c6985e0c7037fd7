"""An engine's records file: one JSON line per (sample, model), buffered, and never ahead of the sent log.

The file is unbuffered with a buffer of its own (8 KiB), so a kill loses at most that much (a resume asks the
store for those answers again), and the sent entries a record names are flushed before the record is, so
no record on disk names a lost entry. A full disk or a failed write raises one error naming the file.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

from evalkit.errors import DiskFullError, WriteFailed
from evalkit.run.sent import SentLog, write_all
from evalkit.util import jsonutil
from evalkit.util.diskfull import disk_full, is_disk_full

#: records buffered before they are written (a kill loses at most these; a resume asks the store for them again)
RECORDS_BUFFER = 8192


class RecordsFile:
    """One pair's records file, open from :meth:`open` to :meth:`close` (or :meth:`abandon` when stopped)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        #: the sent log whose entries the records name: flushed before they are
        self.sent: SentLog | None = None
        self._file: io.FileIO | None = None
        #: records not yet written
        self._buffer = bytearray()

    def open(self) -> None:
        """Create the file (and its folder); a full disk raises one DiskFullError naming it."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # unbuffered file, own 8 KiB buffer (add): a kill loses little, and the sent log goes first
            self._file = open(self.path, "wb", buffering=0)  # noqa: SIM115 - closed by close() or abandon()
        except OSError as error:
            if is_disk_full(error):
                raise disk_full(self.path) from None
            raise WriteFailed(str(self.path), error) from None

    def add(self, record: dict[str, Any]) -> None:
        """Buffer one record, writing the buffer once it is full (a full disk raises DiskFullError naming the file)."""
        buffer = self._buffer
        buffer += jsonutil.dumps_bytes(record)  # UTF-8 JSON straight from the encoder: no str round trip
        buffer += b"\n"
        if len(buffer) >= RECORDS_BUFFER:
            self.flush()

    def flush(self) -> None:
        """Write the buffered records, after the sent entries they name (a full disk raises DiskFullError)."""
        if not self._buffer:
            return
        assert self._file is not None
        if self.sent is not None:
            self.sent.flush()
        try:
            write_all(self._file, self._buffer)
        except (OSError, ValueError) as error:  # ValueError: the file was closed under it
            if isinstance(error, OSError) and is_disk_full(error):
                raise disk_full(self.path, len(self._buffer)) from None
            raise WriteFailed(str(self.path), error) from None
        self._buffer.clear()

    def close(self) -> None:
        """Write what is buffered and close the file; a full disk raises one DiskFullError naming it."""
        assert self._file is not None
        self.flush()
        try:
            self._file.close()
        except OSError as error:
            if is_disk_full(error):
                raise disk_full(self.path) from None
            raise WriteFailed(str(self.path), error) from None

    def abandon(self) -> None:
        """Keep what was answered as far as it goes, and close the file without raising: the run is stopping.

        A signal, another engine's full disk or this file's own failed write stops the run; a second full-disk
        error here would say nothing new.
        """
        if self._file is None or self._file.closed:
            return
        with contextlib.suppress(OSError, DiskFullError, WriteFailed):
            self.flush()
        with contextlib.suppress(OSError):
            self._file.close()

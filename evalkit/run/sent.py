"""What was sent, stored once: ``RUN_DIR/records/sent/<dataset>.jsonl``.

Every metric of a dataset asks every model the same thing, so a record names
what was sent by a key (``record["sent"]``) instead of carrying it: the
messages are written once per key per dataset, however many metrics and
models sent them. A line is ``{"key", "dataset", "sample_id", "requests",
"kind", "messages"}``, ``"tools"`` when the request offered functions, and
``"params"``: every other field the request sent (generation settings, each
``extra_body`` key; a transcription form's fields), so nothing that shaped a
request is missing from what the records say was sent. A conversation whose
turns sent different fields (a chain of thought's longer reasoning turn) has
``"params_by_turn"`` too, one object per turn.

The key is :func:`sent_key` of the requests: the response store's own key of
the request (a sha256 over the model, the messages with every audio piece's
and image's hash, and the generation parameters; already made for every
request), cut to 16 hex digits, or of several requests (chunks, turns,
options) the sha256 of their keys. So a key costs no hashing of its own, and
the entry is built and encoded only when its key is new. Models that are sent
the same messages share the key of the first of them in the config's order
(the engine sees to that), so one entry serves them all.

Why the choices below:

- A record must never name a key that is not on disk. Lines wait in a
  buffer, like records, and the engine empties this buffer (:meth:`SentLog.flush`)
  each time before it hands its records buffer to the operating system
  (:func:`write_all`), so a killed run (``kill -9``) leaves at worst lines no
  record names, never the reverse, and a line costs no system call of its own.
- Memory does not grow with the dataset: the keys already written are
  remembered in two bounded generations (the newest :data:`GENERATION` and
  the ones before them). The engines of a dataset read it in the same order
  and a few windows apart, so they find each other's keys there; an engine
  that falls further behind writes a line again. A repeated line costs disk
  and nothing else: readers take the first line of a key.
- A resumed run appends. The keys of the lines already there are read back
  (in a thread, keeping only the bounded generations), so a resume rewrites
  few lines; a last line cut by a kill is ended with a newline first, so it
  stays one unreadable line and the next entry is whole.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evalkit.clients.protocol import WIRE_FORMATS
from evalkit.clients.request import ModelRequest
from evalkit.errors import DiskFullError, WriteFailed
from evalkit.util.diskfull import disk_full, is_disk_full
from evalkit.util.jsonutil import dumps_bytes
from evalkit.util.redact import redact
from evalkit.util.safe_names import safe_path

#: hex digits of a sent key (64 bits: no collision among the entries of any real dataset)
KEY_CHARS = 16
#: keys remembered per generation; two generations are kept (about 3 MB at most per dataset)
GENERATION = 16384
#: where a line's key sits: every line starts with ``{"key":"`` (written here, first)
_KEY_AT = len(b'{"key":"')
#: buffered lines written at once even before a records flush asks (writing a line early is always safe)
FLUSH_AT = 64 * 1024


def write_all(file: io.FileIO, data: bytes | bytearray) -> None:
    """Hand all of ``data`` to the operating system (an unbuffered file may take a write in parts)."""
    # every view is released, even when a write raises: a bytearray with a live view cannot be cleared later
    with memoryview(data) as whole:
        offset = 0
        while offset < len(whole):
            with whole[offset:] as rest:
                done = file.write(rest)
            if done is None:  # only a non-blocking file says "not now"; a regular file never does
                raise OSError("the file took no bytes")
            offset += done


class SentLog:
    """The sent entries of one dataset: a writer that writes each content key once (mostly; see the module)."""

    def __init__(self, path: Path, generation: int = GENERATION) -> None:
        self.path = path
        self.generation = max(1, generation)
        self._current: set[str] = set()
        self._previous: set[str] = set()
        self._file: io.FileIO | None = None
        self._pending = bytearray()
        self._opening: asyncio.Future[None] | None = None
        #: lines written by this log in this run (a test and the benchmark read it)
        self.written = 0
        self.users = 0

    async def open(self) -> None:
        """Open for appending (once, however many engines ask); a resumed run's keys are read back in a thread."""
        if self._opening is None:
            self._opening = asyncio.ensure_future(asyncio.to_thread(self._open))
        await asyncio.shield(self._opening)

    def _open(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if self.path.is_file() and self.path.stat().st_size:
                self._read_back()
            handle = open(self.path, "ab", buffering=0)  # noqa: SIM115 - closed by close()
        except OSError as error:
            raise self._failed(error, None) from None
        assert isinstance(handle, io.FileIO)
        self._file = handle
        if self.path.stat().st_size and not self._ends_with_newline():
            self._put(b"\n")  # a line cut by a kill stays one unreadable line; the next entry is whole

    def _read_back(self) -> None:
        with self.path.open("rb") as handle:
            for line in handle:
                if line.startswith(b'{"key":"') and len(line) > _KEY_AT + KEY_CHARS:
                    self._remember(line[_KEY_AT : _KEY_AT + KEY_CHARS].decode("ascii", "replace"))

    def _ends_with_newline(self) -> bool:
        with self.path.open("rb") as handle:
            handle.seek(-1, io.SEEK_END)
            return handle.read(1) == b"\n"

    def __contains__(self, key: object) -> bool:
        """True when this log wrote ``key`` recently (then its entry need not be built again)."""
        return key in self._current or key in self._previous

    def add(
        self,
        key: str,
        dataset: str,
        sample_id: str,
        kind: str,
        requests: int,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        params: Sequence[dict[str, Any]] = (),
    ) -> None:
        """Buffer the entry of ``key`` (the caller asked ``key in log`` first; a repeat only costs a line).

        ``tools`` are the functions the request offered (BFCL without its prompt): part of what was sent.
        ``params`` are the other fields each turn sent (:meth:`~evalkit.clients.protocol.WireFormat.settings`).
        """
        # one encoding of the whole line, "key" first (a resumed run reads the keys back from the lines' starts)
        entry: dict[str, Any] = {
            "key": key,
            "dataset": dataset,
            "sample_id": sample_id,
            "requests": requests,
            "kind": kind,
            "messages": messages,
        }
        if tools:
            entry["tools"] = tools
        if params:
            entry["params"] = params[0]
            if any(turn != params[0] for turn in params[1:]):
                entry["params_by_turn"] = list(params)
        pending = self._pending
        pending += dumps_bytes(entry)
        pending += b"\n"
        self._remember(key)
        self.written += 1
        if len(pending) >= FLUSH_AT:
            self.flush()

    def flush(self) -> None:
        """Write the buffered lines: the engine calls this before it writes records that may name them."""
        if self._pending:
            self._put(self._pending)
            self._pending.clear()

    def _remember(self, key: str) -> None:
        if len(self._current) >= self.generation:
            self._previous, self._current = self._current, set()
        self._current.add(key)

    def _put(self, data: bytes | bytearray) -> None:
        if self._file is None:
            raise WriteFailed(str(self.path), OSError("the sent log was used before it was opened"))
        try:
            write_all(self._file, data)
        except (OSError, ValueError) as error:  # ValueError: closed under it
            raise self._failed(error, len(data)) from None

    def _failed(self, error: OSError | ValueError, needed: int | None) -> Exception:
        if isinstance(error, OSError) and is_disk_full(error):
            return disk_full(self.path, needed)
        return WriteFailed(str(self.path), error)

    def close(self) -> None:
        """Write what is buffered and close; a failure here is the run's second, so it is not raised again.

        Every engine flushes the log before its own records, so a line still buffered now belongs to a
        record that never reached the disk: losing it loses nothing a record names.
        """
        if self._file is not None and not self._file.closed:
            try:
                self.flush()
            except (DiskFullError, WriteFailed, OSError):
                pass
            finally:
                self._pending.clear()
                self._file.close()


class SentLogs:
    """A run's sent logs, one per dataset, shared by every engine of that dataset; closed when the last lets go."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._logs: dict[str, SentLog] = {}

    def acquire(self, dataset: str) -> SentLog:
        log = self._logs.get(dataset)
        if log is None:
            log = self._logs[dataset] = SentLog(safe_path(self.folder, dataset, suffix=".jsonl"))
        log.users += 1
        return log

    def release(self, log: SentLog) -> None:
        log.users -= 1
        if log.users <= 0:
            log.close()
            log._opening = None  # a later engine of the dataset opens it again (appending)

    def close(self) -> None:
        for log in self._logs.values():
            log.close()


class SentParams:
    """A request's ``params`` for its sent entry (its wire format's settings, credentials masked), made once per set.

    A model's requests share one ``params`` object (its context's), so the masked settings are made once per
    object and kind instead of once per entry: at thousands of entries a second, the masking walk was a few
    per cent of the engine's CPU per request. The cache holds the object it was made from, so an id is never
    reused while its entry is here, and is emptied when full (a sample's own settings make a new object each).
    """

    LIMIT = 256

    def __init__(self) -> None:
        self._made: dict[tuple[Any, ...], tuple[object, dict[str, Any]]] = {}

    def of(self, request: ModelRequest) -> dict[str, Any]:
        # the form of a transcription depends on its language and bare_form too
        cache_key = (request.kind, id(request.params), request.language, request.bare_form)
        found = self._made.get(cache_key)
        if found is not None and found[0] is request.params:
            return found[1]
        made = redact(WIRE_FORMATS[request.kind].settings(request))
        if len(self._made) >= self.LIMIT:
            self._made.clear()
        self._made[cache_key] = (request.params, made)
        return made


def sent_key(requests: Sequence[ModelRequest]) -> str:
    """The key of what ``requests`` sent: the store key of a lone request, else the sha256 of all their keys."""
    if len(requests) == 1:
        return requests[0].key[:KEY_CHARS]
    return hashlib.sha256("".join(r.key for r in requests).encode()).hexdigest()[:KEY_CHARS]


def sent_folder(records_dir: Path) -> Path:
    """Where a run's sent entries live: beside the records, in ``sent/``."""
    return records_dir / "sent"

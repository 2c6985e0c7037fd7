"""PocketSphinx's decoder in a child process of its own.

Its Python binding holds the GIL for the whole of an utterance's decode (about
a second per clip, several on a crowded machine). Run in the server's own
process, every step of the event loop (accepting a connection, reading a
request, writing an answer) then waits for a whole decode: ``/health`` went
unanswered for more than ``launch.health_interval`` while a batch was being
decoded, and the launcher took a working server for a hung one. In a child
process the decode holds only the child's GIL, and the server answers at once.

The child runs this file as a script, not as a multiprocessing worker:
multiprocessing's ``spawn`` runs the parent's main script again in the child,
which breaks a script without a ``__main__`` guard or ``python -`` (and
``fork`` is unsafe beside the server's threads). The file imports nothing of
evalkit, so the child loads only pocketsphinx, wherever evalkit was imported
from. It ignores SIGINT (a Ctrl-C reaches the whole process group; the server
decides) and ends when the server closes the pipe, even if the server was
killed.

The pipe carries frames: a 4-byte big-endian length, then the bytes. The
parent sends the decoder's settings (JSON) first and gets ``ready``; then each
utterance (16 kHz mono 16-bit PCM) is answered with its transcript (UTF-8).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import struct
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import IO, Any

_LENGTH = struct.Struct(">I")


def _read_frame(stream: IO[bytes]) -> bytes | None:
    """One frame, or None at the end of the stream (the other side is gone)."""
    head = stream.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        return None
    (length,) = _LENGTH.unpack(head)
    body = stream.read(length)
    return body if len(body) == length else None


def _write_frame(stream: IO[bytes], body: bytes) -> None:
    stream.write(_LENGTH.pack(len(body)) + body)
    stream.flush()


class DecoderProcess:
    """One child process holding one decoder; utterances are decoded there, one at a time."""

    def __init__(self, config: dict[str, Any], jsgf: str | None) -> None:
        self._failure: str | None = None
        self._closing = False
        self._lock = threading.Lock()
        self._child = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        # settings now, and wait for the decoder: a child that cannot start fails the backend's start
        try:
            answer = self._exchange(json.dumps({"config": config, "jsgf": jsgf}).encode())
        except BaseException:
            self.close()
            raise
        if answer != "ready":
            self.close()
            raise RuntimeError(f"the pocketsphinx decoder process did not start ({answer!r})")

    @property
    def failure(self) -> str | None:
        """Why the child can decode nothing more (it ended, not closed by us), for GET /health; else None."""
        if self._failure is None and not self._closing and self._child.poll() is not None:
            self._ended()
        return self._failure

    def _ended(self) -> str:
        code = self._child.wait()
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        self._failure = f"the pocketsphinx decoder process {how}; restart evalkit serve"
        return self._failure

    def watch(self, on_exit: Callable[[str], None]) -> None:
        """Call ``on_exit(reason)`` from a daemon thread if the child ends before :meth:`close`."""

        def wait() -> None:
            self._child.wait()
            if not self._closing:
                on_exit(self.failure or "the pocketsphinx decoder process ended")

        threading.Thread(target=wait, name="evalkit-pocketsphinx-watch", daemon=True).start()

    def decode(self, pcm16: bytes) -> str:
        """The transcript of one utterance of 16 kHz mono 16-bit PCM."""
        return self._exchange(pcm16)

    def _exchange(self, body: bytes) -> str:
        with self._lock:
            if self._closing:
                raise RuntimeError("the pocketsphinx backend is closed")
            if self._failure is not None:
                raise RuntimeError(self._failure)
            stdin, stdout = self._child.stdin, self._child.stdout
            assert stdin is not None and stdout is not None
            try:
                _write_frame(stdin, body)
                answer = _read_frame(stdout)
            except (OSError, ValueError):  # a broken pipe: it has ended
                answer = None
            if answer is None:
                raise RuntimeError(self._ended())
            return answer.decode("utf-8")

    def close(self) -> None:
        """End the child: it sees the end of its input once its decode is done (killed after 10 s)."""
        self._closing = True
        with self._lock:
            if self._child.stdin is not None:
                with contextlib.suppress(OSError):
                    self._child.stdin.close()
            try:
                self._child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._child.kill()
                self._child.wait()
            if self._child.stdout is not None:
                self._child.stdout.close()


def _serve(requests: IO[bytes], answers: IO[bytes]) -> None:
    """In the child: settings, then one transcript per utterance, until the parent closes the pipe."""
    import pocketsphinx

    settings = _read_frame(requests)
    if settings is None:
        return
    options = json.loads(settings)
    decoder = pocketsphinx.Decoder(**options["config"])
    if options["jsgf"] is not None:
        decoder.add_jsgf_string("evalkit_grammar", options["jsgf"])
        decoder.activate_search("evalkit_grammar")
    _write_frame(answers, b"ready")
    while (pcm16 := _read_frame(requests)) is not None:
        # fresh feature state (noise estimate, CMN) per utterance: a transcript must not
        # depend on which clips the server happened to decode before it
        decoder.reinit_feat()
        decoder.start_utt()
        decoder.process_raw(pcm16, no_search=False, full_utt=True)
        decoder.end_utt()
        hyp = decoder.hyp()
        _write_frame(answers, (hyp.hypstr.strip() if hyp is not None else "").encode("utf-8"))


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # the pipe is the protocol's alone: anything the library prints goes to stderr instead
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    _serve(sys.stdin.buffer, answers)


if __name__ == "__main__":
    main()

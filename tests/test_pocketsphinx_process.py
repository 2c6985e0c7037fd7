"""The pocketsphinx backend decodes in a child process, so the server's own Python keeps running meanwhile.

pocketsphinx's binding holds the GIL for a whole utterance. Decoded in the
server's process, a batch kept its event loop from answering ``/health`` for
longer than ``launch.health_interval`` on a crowded machine, and the launcher
took a working server for a hung one (the default run then failed its clips).
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from helpers import ServeProcess

pocketsphinx = pytest.importorskip("pocketsphinx")
sf = pytest.importorskip("soundfile")
pq = pytest.importorskip("pyarrow.parquet")

from evalkit.serve.backends.pocketsphinx_backend import PocketsphinxBackend, _to_pcm16  # noqa: E402

SPEECH = Path(__file__).resolve().parent.parent / "evalkit" / "assets" / "speech" / "espeak_en" / "data.parquet"


def clips(n: int) -> list[np.ndarray]:
    table = pq.read_table(SPEECH, columns=["audio"]).slice(0, n)
    return [sf.read(io.BytesIO(row["bytes"]), dtype="float32")[0] for row in table.column("audio").to_pylist()]


def decoded_here(audio: np.ndarray) -> str:
    """The same steps as the backend's, in this process: what the child must give back."""
    decoder = pocketsphinx.Decoder(loglevel="FATAL")
    decoder.reinit_feat()
    decoder.start_utt()
    decoder.process_raw(_to_pcm16(audio), no_search=False, full_utt=True)
    decoder.end_utt()
    hyp = decoder.hyp()
    return hyp.hypstr.strip() if hyp is not None else ""


@pytest.fixture(scope="module")
def backend() -> Iterator[PocketsphinxBackend]:
    made = PocketsphinxBackend()
    yield made
    made.close()


def test_transcripts_equal_the_library_decoding_in_this_process(backend: PocketsphinxBackend) -> None:
    audios = clips(3)
    assert backend.transcribe_batch(audios) == [decoded_here(a) for a in audios]
    assert all(backend.transcribe_batch(audios))  # and they are not empty


def test_this_process_runs_python_while_a_long_utterance_is_decoded(backend: PocketsphinxBackend) -> None:
    long_clip = np.concatenate(clips(5))  # about 30 s of speech: seconds of decoding
    pcm = _to_pcm16(long_clip)
    assert backend._process is not None
    started, done = threading.Event(), threading.Event()

    def decode() -> None:
        started.set()
        backend._process.decode(pcm)  # the decode alone: the dither above ran in this thread already
        done.set()

    worker = threading.Thread(target=decode)
    worker.start()
    started.wait()
    ticks = 0
    while not done.is_set():
        ticks += 1  # Python bytecode of this thread, run while the decode is under way
        time.sleep(0.001)
    worker.join()
    # in-process, the decode held the GIL throughout and this loop ran a handful of times at most
    assert ticks >= 50


def test_a_decoder_process_that_dies_is_named_and_fails_what_follows() -> None:
    made = PocketsphinxBackend()
    try:
        assert made.failure() is None
        assert made._process is not None
        os.kill(made._process._child.pid, signal.SIGKILL)
        made._process._child.wait()
        reason = "the pocketsphinx decoder process was killed by signal 9; restart evalkit serve"
        assert made.failure() == reason  # GET /health says so before any request finds out
        with pytest.raises(RuntimeError, match="killed by signal 9"):
            made.transcribe_batch(clips(1))
    finally:
        made.close()


def test_a_killed_decoder_process_ends_the_server_with_code_1_naming_the_signal() -> None:
    server = ServeProcess("--backend", "pocketsphinx", "--port", "0", own_session=True)
    try:
        server.wait_listening()
        children = Path(f"/proc/{server.proc.pid}/task/{server.proc.pid}/children").read_text().split()
        assert len(children) == 1, children  # the decoder process
        os.kill(int(children[0]), signal.SIGKILL)
        code = server.wait(60)
        stderr = server.stderr()
        assert code == 1, stderr
        errors = [line for line in stderr.splitlines() if line.startswith("evalkit serve: error: ")]
        assert errors == [
            "evalkit serve: error: the pocketsphinx decoder process was killed by signal 9; restart evalkit serve"
        ], stderr
        assert "Traceback" not in stderr
    finally:
        if server.proc.poll() is None:
            server.terminate()


def test_a_script_without_a_main_guard_or_file_can_use_the_backend(tmp_path: Path) -> None:
    """The child is not a multiprocessing worker: nothing of the caller's main script runs again in it."""
    script = textwrap.dedent(
        f"""
        import io, soundfile, pyarrow.parquet as pq
        from evalkit.serve.backends.pocketsphinx_backend import PocketsphinxBackend
        print("main script ran", flush=True)
        row = pq.read_table({str(SPEECH)!r}, columns=["audio"]).slice(0, 1).column("audio").to_pylist()[0]
        audio = soundfile.read(io.BytesIO(row["bytes"]), dtype="float32")[0]
        backend = PocketsphinxBackend()
        print("transcript:", bool(backend.transcribe_batch([audio])[0]))
        backend.close()
        """
    )
    done = subprocess.run(
        [sys.executable, "-"], input=script, capture_output=True, text=True, timeout=120, cwd=tmp_path, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["main script ran", "transcript: True"]


def test_closing_ends_the_child() -> None:
    made = PocketsphinxBackend()
    assert made._process is not None
    child = made._process._child
    made.close()
    assert child.poll() == 0
    assert made.failure() is None  # closed on purpose: nothing to report
    with pytest.raises(RuntimeError, match="closed"):
        made.transcribe_batch(clips(1))

"""Shared fixtures: real test servers on loopback, small real datasets, configs on disk."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import tone_wav

from evalkit.testing import audio_fingerprint, start_test_server

# A suite started in the background by a non-interactive shell (`bash script.sh &`, nohup) inherits Ctrl-C
# ignored, and every evalkit it starts would ignore it too, as evalkit rightly does for nohup: the tests that
# interrupt a run would then see it finish. A Python handler here becomes the default again in each child.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

ASR_CLIPS = [
    ("clip1", "hello world", 220.0, 1.0),
    ("clip2", "the cat sat on the mat", 330.0, 2.5),
    ("clip3", "good morning everyone", 440.0, 4.0),
]


@pytest.fixture(scope="session")
def speech_runspecs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A runspec folder with a 3-clip ASR set (tones, so answers are keyed by audio fingerprint)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = tmp_path_factory.mktemp("speech")
    (root / "runspecs" / "speech").mkdir(parents=True)
    rows = []
    fingerprints = {}
    for clip_id, text, freq, seconds in ASR_CLIPS:
        wav = tone_wav(freq, seconds)
        fingerprints[clip_id] = audio_fingerprint(wav)
        rows.append(
            {"id": clip_id, "audio": {"bytes": wav, "path": f"{clip_id}.wav"}, "text": text, "duration": seconds}
        )
    pq.write_table(pa.Table.from_pylist(rows), root / "tiny_asr.parquet")
    spec = {
        "_task": {"description": "tones with transcripts", "metrics": ["word_error_rate", "cer"]},
        "tiny_asr": {
            "path": "../../tiny_asr.parquet",
            "language": "en",
            "modality": "audio",
            "id_column": "id",
            "audio_column": "audio",
            "target_column": "text",
            "duration_column": "duration",
            "instruction": "Transcribe the audio.",
        },
    }
    (root / "runspecs" / "speech" / "tiny_asr.json").write_text(json.dumps(spec))
    return {"dir": root / "runspecs", "fingerprints": fingerprints}


@pytest.fixture()
def make_server() -> Iterator[Any]:
    """Start test servers in subprocesses; all are stopped (by pid) after the test."""
    servers = []

    def start(script: dict[str, Any] | None = None, **overrides: Any):  # type: ignore[no-untyped-def]
        server = start_test_server(script, **overrides)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny random Llama (built once a session; needs torch and transformers: call it only from tests that do)."""
    from evalkit.testing.tiny_model import build_tiny_llama

    return build_tiny_llama(tmp_path_factory.getbasetemp() / "tiny-llama-seed0", seed=0)


@pytest.fixture(scope="session")
def tiny_audio(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny random Qwen2-Audio (built once a session; needs torch and transformers)."""
    from evalkit.testing.tiny_audio_llm import build_tiny_qwen2_audio

    return build_tiny_qwen2_audio(tmp_path_factory.getbasetemp() / "tiny-qwen2-audio-seed0", seed=0)


@pytest.fixture(scope="session")
def tiny_whisper(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny random Whisper (built once a session; needs torch and transformers)."""
    from evalkit.testing.tiny_model import build_tiny_whisper

    return build_tiny_whisper(tmp_path_factory.getbasetemp() / "tiny-whisper-seed0", seed=0)


@pytest.fixture(scope="session")
def nltk_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One NLTK data folder for the session: WordNet 3.0 from Debian's files and NLTK's English stop words."""
    from wordnet_data import MISSING, build_nltk_data, debian_wordnet_present

    pytest.importorskip("nltk")
    if not debian_wordnet_present():
        pytest.skip(MISSING)
    return build_nltk_data(tmp_path_factory.mktemp("nltk_data"))


@pytest.fixture
def with_nltk_data(nltk_data: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """NLTK reads only the session's folder while the test runs; evalkit's cached WordNet reader is dropped."""
    import nltk.data

    from evalkit.metrics.chef import reading as chef_reading

    monkeypatch.setattr(nltk.data, "path", [str(nltk_data)])
    chef_reading.wordnet.cache_clear()
    yield nltk_data
    chef_reading.wordnet.cache_clear()

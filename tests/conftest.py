"""Shared fixtures: real test servers on loopback, small real datasets, configs on disk."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf
import yaml

from evalkit.testing import audio_fingerprint, start_test_server

FIXTURES = Path(__file__).parent / "fixtures"
ROOT = Path(__file__).parent.parent

ASR_CLIPS = [
    ("clip1", "hello world", 220.0, 1.0),
    ("clip2", "the cat sat on the mat", 330.0, 2.5),
    ("clip3", "good morning everyone", 440.0, 4.0),
]


def tone_wav(freq: float, seconds: float, sr: int = 16000) -> bytes:
    t = np.arange(int(seconds * sr)) / sr
    buffer = io.BytesIO()
    sf.write(buffer, (0.3 * np.sin(2 * np.pi * freq * t)).astype(np.float32), sr, format="WAV", subtype="PCM_16")
    return buffer.getvalue()


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
        rows.append({"id": clip_id, "audio": {"bytes": wav, "path": f"{clip_id}.wav"}, "text": text, "duration": seconds})
    pq.write_table(pa.Table.from_pylist(rows), root / "tiny_asr.parquet")
    spec = {
        "_task": {"description": "tones with transcripts", "metrics": ["word_error_rate", "cer"]},
        "tiny_asr": {
            "path": "../../tiny_asr.parquet", "language": "en", "modality": "audio", "id_column": "id",
            "audio_column": "audio", "target_column": "text", "duration_column": "duration",
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


def write_config(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def model_entry(name: str, url: str, **extra: Any) -> dict[str, Any]:
    info = {"name": name, "inference_type": "vllm", "url": url, "model": name, "batch_size": 4, "timeout": 10, "retry_attempts": 1}
    info.update(extra)
    return {"info": info}


def live_group_members(pgid: int) -> list[int]:
    """Live processes of process group ``pgid``, read from /proc (zombies are dead already)."""
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rfind(")") + 2:].split()
            if fields[0] not in ("Z", "X") and int(fields[2]) == pgid:
                members.append(int(entry.name))
    return members


def processes_mentioning(text: str) -> list[int]:
    """Pids of live processes whose command line contains ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if text in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found

"""FLAC read by dr_flac (miniaudio) gives libsndfile's samples, bytes sent and store keys; damaged files go its way.

The pinned digests below were computed by the code before dr_flac was used
(libsndfile's int16 read, and the float decode in the worker processes): a
clip must keep its WAV, its request body and its store key, or existing
response stores would stop answering.
"""

from __future__ import annotations

import array
import hashlib
import io
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from helpers import ROOT, model_entry, write_config

import evalkit.data.audio.direct as direct
from evalkit.clients.protocol import ChatWire
from evalkit.clients.request import ModelRequest
from evalkit.config import RequestKind
from evalkit.data.audio import flac
from evalkit.data.audio.direct import direct_pcm16, prepare_turn_audio_direct
from evalkit.data.audio.pcm import WAV_HEADER_BYTES, pcm16_of, prepare_turn_audio, wav_from_pcm16
from evalkit.data.sample import Audio

needs_dr_flac = pytest.mark.skipif(not flac.available(), reason="miniaudio (the 'fast' extra) is not installed")

SHAPES = [(None, "chunk"), (1.0, "chunk")]
AUDIO_PART = {"type": "input_audio", "input_audio": {"audio_index": 0}}
MESSAGES = [{"role": "user", "content": [{"type": "text", "text": "Transcribe."}, AUDIO_PART]}]


def lcg_pcm(n: int, seed: int = 12345) -> np.ndarray:
    """Integer noise from a fixed generator, full scale at both ends: the same samples on every machine."""
    out, x = array.array("h"), seed
    for i in range(n):
        x = (1103515245 * x + 12345) % 2**31
        out.append(32767 if i == 0 else -32768 if i == n - 1 else ((x >> 8) % 4001) - 2000)
    return np.frombuffer(out.tobytes(), dtype="<i2")


def flac_of(pcm: np.ndarray, sr: int = 16000, subtype: str = "PCM_16", **options: float) -> bytes:
    out = io.BytesIO()
    sf.write(out, pcm, sr, format="FLAC", subtype=subtype, **options)
    return out.getvalue()


def sndfile_pcm16(data: bytes) -> bytes | None:
    with sf.SoundFile(io.BytesIO(data)) as handle:
        return handle.read(dtype="int16").astype("<i2").tobytes()


def clips() -> dict[str, bytes]:
    rng = np.random.default_rng(3)
    t = np.arange(16000 * 3) / 16000
    loud = (rng.standard_normal(50000) * 20000).clip(-32768, 32767).astype(np.int16)
    return {
        "fixed-noise": flac_of(lcg_pcm(24000)),
        "tone": flac_of((0.4 * np.sin(2 * np.pi * 330 * t)).astype(np.float32)),
        "loud-noise-fast": flac_of(loud, compression_level=0.0),
        "loud-noise-best": flac_of(loud, compression_level=1.0),
        "silence-then-tone": flac_of(np.concatenate([np.zeros(70000, np.int16), loud[:9000]])),
        "one-sample": flac_of(np.array([1234], dtype=np.int16)),
        "odd-length": flac_of(loud[:4097]),
    }


@needs_dr_flac
@pytest.mark.parametrize("name", sorted(clips()))
def test_dr_flac_gives_libsndfiles_samples(name: str) -> None:
    data = clips()[name]
    wav = flac.flac_wav16(data)
    assert wav is not None and wav == wav_from_pcm16(pcm16_of(Audio(data=data)))
    assert wav[WAV_HEADER_BYTES:] == sndfile_pcm16(data)


@needs_dr_flac
def test_a_flac_clip_is_read_by_dr_flac_not_libsndfile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = clips()["tone"]
    path = tmp_path / "clip.flac"
    path.write_bytes(data)

    def refused(source: object) -> bytes | None:
        raise AssertionError("libsndfile read a FLAC that dr_flac reads")

    monkeypatch.setattr(direct, "_sndfile_pcm16", refused)
    for audio in (Audio(data=data), Audio(path=str(path))):
        assert direct_pcm16(audio) == sndfile_pcm16(data)


def test_a_clip_keeps_its_wav_body_and_store_key() -> None:
    """Digests computed by the code before dr_flac: both ways, with or without miniaudio installed."""
    data = flac_of(lcg_pcm(24000))
    for prepared in (
        prepare_turn_audio_direct({0: Audio(data=data)}, SHAPES, frozenset({"wav", "b64"})),
        prepare_turn_audio({0: Audio(data=data)}, SHAPES, frozenset({"wav", "b64"})),
    ):
        assert prepared is not None
        (whole,) = prepared.parts(0, None, "chunk")
        assert whole.sha256 == "efb8a06b2d2df11502ce943022d9d15a129212bdce0a9fb3fbacd5222fde9602"
        assert [p.sha256 for p in prepared.parts(0, 1.0, "chunk")] == [
            "7e21a49df16e8c9d94d9a50e8a21bdfa1106650781ee5b37909d32de69dd4466",
            "68546295d9784084b22716dcc600a552ff6af44cb9aafe4597ae9965b7c18532",
        ]
        request = ModelRequest(kind=RequestKind.CHAT, model="m", messages=MESSAGES, audio=[whole])
        assert request.key == "d175a7b17941bb35ef60b70cffa52698c522196c73b55d8ad7c5412f44b97e9a"
        body = ChatWire().json_body(request)
        assert hashlib.sha256(body).hexdigest() == "1cd71188371bdfd810bee7a7e3fb084f66c99588bf82400e743ea6ff4d0fe038"


def damaged() -> dict[str, bytes]:
    data = clips()["loud-noise-best"]
    flipped = []
    for seed in range(4):
        copy = bytearray(data)
        copy[random.Random(seed).randrange(200, len(data))] ^= 0xFF
        flipped.append(bytes(copy))
    hole = data[:3000] + data[6000:]
    return {
        "cut-in-half": data[: len(data) // 2],
        "cut-in-the-header": data[:60],
        "hole": hole,
        **{f"flipped-{i}": d for i, d in enumerate(flipped)},
    }


@pytest.mark.parametrize("name", sorted(damaged()))
def test_a_damaged_flac_keeps_libsndfiles_verdict(name: str) -> None:
    """dr_flac skips a bad frame or stops at a cut where libsndfile refuses the file: the refusal stands."""
    data = damaged()[name]
    assert flac.flac_wav16(data) is None
    with pytest.raises(RuntimeError):
        sndfile_pcm16(data)
    assert direct_pcm16(Audio(data=data)) is None  # then the worker pool's decode words the error, as before


def _with_streaminfo_total(data: bytes, total: int) -> bytes:
    fields = int.from_bytes(data[18:26], "big")
    fields = (fields & ~((1 << 36) - 1)) | total
    return data[:18] + fields.to_bytes(8, "big") + data[26:]


@needs_dr_flac
def test_a_header_announcing_other_than_the_stream_holds_is_left_to_libsndfile() -> None:
    data = clips()["tone"]
    frames = len(sndfile_pcm16(data) or b"") // 2
    assert flac.flac_wav16(data) is not None
    for total in (frames - 1, frames + 1, 0, (1 << 36) - 1):  # the last is never allocated for
        assert flac.flac_wav16(_with_streaminfo_total(data, total)) is None


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(flac_of(lcg_pcm(8000), sr=48000), id="48kHz"),
        pytest.param(flac_of(np.stack([lcg_pcm(8000)] * 2, axis=1)), id="stereo"),
        pytest.param(flac_of(lcg_pcm(8000), subtype="PCM_24"), id="24bit"),
        pytest.param(b"fLaC" + bytes(100), id="no-streaminfo"),
        pytest.param(b"RIFF" + bytes(100), id="not-flac"),
    ],
)
def test_anything_but_16khz_mono_16bit_flac_is_not_read_by_dr_flac(data: bytes) -> None:
    assert flac.flac_wav16(data) is None


_MODULES_AFTER_RUN = r"""
import sys
from evalkit.cli.main import main
code = main(sys.argv[1:])
print("modules", code, "soundfile" in sys.modules, "soxr" in sys.modules, "_miniaudio" in sys.modules)
"""


@needs_dr_flac
def test_a_run_of_clips_that_dr_flac_reads_never_loads_soundfile_or_soxr(tmp_path: Path, make_server) -> None:  # type: ignore[no-untyped-def]
    server = make_server(default_answer="hello world")
    config = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [["espeak_en_asr", "word_error_rate"]],
            "models": [model_entry("m", server.base_url)],
            "filters": {"num_samples": 3},
            "output_dir": str(tmp_path / "runs"),
        },
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    argv = [sys.executable, "-c", _MODULES_AFTER_RUN, "run", str(config), "--no-cache", "--quiet"]
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.stdout.splitlines()[-1] == "modules 0 False False True", done.stderr[-2000:]

"""Media already in the form sent skips the decode: same bytes, same store keys, and the general path otherwise.

A 16 kHz mono 16-bit WAV is sent as its own bytes and a 16-bit FLAC of that
form is read straight to int16; each must give exactly what the general path
(float decode in the worker processes) gives, or existing response stores
would stop answering. Anything else (another rate, stereo, 24-bit) must still
be decoded and resampled. Images within every limit go as their bytes.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf
from helpers import ROOT, model_entry, write_config
from PIL import Image as PILImage

import evalkit.data.audio.direct as direct
import evalkit.data.audio.pcm as pcm_module
from evalkit.clients.request import ModelRequest
from evalkit.config import RequestKind, load_config
from evalkit.data.audio.direct import direct_pcm16, prepare_example_audio_direct, prepare_turn_audio_direct
from evalkit.data.audio.pcm import pcm16_of, prepare_example_audio, prepare_turn_audio
from evalkit.data.audio.workers import run_media_job
from evalkit.data.image.prepare import prepare_images, prepare_images_as_is
from evalkit.data.sample import Audio, Image
from evalkit.plan import build_plan
from evalkit.run.runner import RunOptions, execute

SHAPES = [(None, "chunk"), (2.0, "chunk"), (1.5, "truncate")]
ENCODINGS = frozenset({"wav", "b64"})


def tone(seconds: float, sr: int = 16000, channels: int = 1) -> np.ndarray:
    t = np.arange(int(seconds * sr)) / sr
    mono = 0.4 * np.sin(2 * np.pi * 330 * t) + 0.05 * np.sin(2 * np.pi * 2900 * t)
    return np.stack([mono] * channels, axis=1) if channels > 1 else mono


def encoded(array: np.ndarray, sr: int, fmt: str, subtype: str) -> bytes:
    out = io.BytesIO()
    sf.write(out, array, sr, format=fmt, subtype=subtype)
    return out.getvalue()


def with_list_chunk(wav: bytes) -> bytes:
    """The same WAV with a LIST chunk (odd length, so padded) between fmt and data, as editors write them."""
    info = b"INFOISFT\x05\x00\x00\x00evk!\x00\x00"
    chunk = b"LIST" + struct.pack("<I", len(info)) + info
    body = wav[12:36] + chunk + wav[36:]
    return b"RIFF" + struct.pack("<I", 4 + len(body)) + b"WAVE" + body


def request_keys(prepared: Any) -> list[str]:
    """Store keys of chat requests carrying each prepared piece, for every shape."""
    keys = []
    for chunk_size, mode in SHAPES:
        for part in prepared.parts(0, chunk_size, mode):
            request = ModelRequest(
                kind=RequestKind.CHAT,
                model="m",
                messages=[{"role": "user", "content": [{"type": "input_audio", "input_audio": {"audio_index": 0}}]}],
                audio=[part],
            )
            keys.append(request.key)
    return keys


@pytest.fixture()
def canonical_wav(tmp_path: Path) -> Path:
    path = tmp_path / "clip.wav"
    sf.write(path, tone(3.3), 16000, format="WAV", subtype="PCM_16")
    return path


def test_a_matching_wav_is_sent_as_its_own_bytes(canonical_wav: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    file_bytes = canonical_wav.read_bytes()

    def no_decode(audio: Audio) -> bytes:
        raise AssertionError("the general decode ran for a WAV already in the form sent")

    monkeypatch.setattr(pcm_module, "pcm16_of", no_decode)
    for audio in (Audio(path=str(canonical_wav)), Audio(data=file_bytes)):
        prepared = prepare_turn_audio_direct({0: audio}, SHAPES, ENCODINGS)
        assert prepared is not None
        (whole,) = prepared.parts(0, None, "chunk")
        assert whole.wav == file_bytes and base64.b64decode(whole.b64 or "") == file_bytes


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda: encoded(tone(3.3), 16000, "WAV", "PCM_16"), id="wav"),
        pytest.param(lambda: with_list_chunk(encoded(tone(3.3), 16000, "WAV", "PCM_16")), id="wav-with-list-chunk"),
        pytest.param(lambda: encoded(tone(3.3), 16000, "FLAC", "PCM_16"), id="flac-16bit"),
    ],
)
def test_direct_path_gives_the_general_paths_pieces_and_store_keys(make: Any, tmp_path: Path) -> None:
    data = make()
    path = tmp_path / "clip.bin"
    path.write_bytes(data)
    for audio in (Audio(data=data), Audio(path=str(path))):
        assert direct_pcm16(audio) == pcm16_of(audio)
        fast = prepare_turn_audio_direct({0: audio}, SHAPES, ENCODINGS)
        general = prepare_turn_audio(audio_by_turn={0: audio}, shapes=SHAPES, encodings=ENCODINGS)
        assert fast is not None
        assert request_keys(fast) == request_keys(general)
        for chunk_size, mode in SHAPES:
            got = [(p.wav, p.b64, p.sha256) for p in fast.parts(0, chunk_size, mode)]
            assert got == [(p.wav, p.b64, p.sha256) for p in general.parts(0, chunk_size, mode)]
        example = prepare_example_audio_direct(audio, SHAPES, ENCODINGS)
        assert example is not None
        assert example.parts(-1, 2.0, "truncate")[0].sha256 == (
            prepare_example_audio(audio, SHAPES, ENCODINGS).parts(-1, 2.0, "truncate")[0].sha256
        )


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(encoded(tone(1.0, 44100), 44100, "WAV", "PCM_16"), id="44.1kHz-wav"),
        pytest.param(encoded(tone(1.0, 16000, 2), 16000, "WAV", "PCM_16"), id="stereo-wav"),
        pytest.param(encoded(tone(1.0), 16000, "WAV", "PCM_24"), id="24bit-wav"),
        pytest.param(encoded(tone(1.0), 16000, "WAV", "FLOAT"), id="float-wav"),
        pytest.param(encoded(tone(1.0, 48000), 48000, "FLAC", "PCM_16"), id="48kHz-flac"),
        pytest.param(encoded(tone(1.0), 16000, "WAV", "PCM_16")[:1000], id="cut-short-wav"),
        pytest.param(encoded(tone(0.0), 16000, "WAV", "PCM_16"), id="empty-wav"),
        pytest.param(b"not audio at all", id="garbage"),
    ],
)
def test_anything_else_takes_the_general_path(data: bytes) -> None:
    audio = Audio(data=data)
    assert direct_pcm16(audio) is None
    assert prepare_turn_audio_direct({0: audio}, SHAPES, ENCODINGS) is None


def test_a_resampled_clip_is_decoded_in_the_workers_and_differs_from_its_file() -> None:
    data = encoded(tone(1.0, 44100), 44100, "WAV", "PCM_16")
    audio = {0: Audio(data=data)}
    prepared = asyncio.run(run_media_job(prepare_turn_audio_direct, prepare_turn_audio, audio, SHAPES, ENCODINGS))
    (whole,) = prepared.parts(0, None, "chunk")
    assert whole.wav is not None and whole.wav != data
    assert sf.info(io.BytesIO(whole.wav)).samplerate == 16000 and len(whole.wav) == 44 + 2 * 16000


def _config(tmp_path: Path, url: str) -> Path:
    return write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [["espeak_en_asr", "word_error_rate"]],
            "models": [model_entry("m", url), model_entry("chunked", url, chunk_size=2)],
            "filters": {"num_samples": 4},
            "output_dir": str(tmp_path / "runs"),
        },
    )


def _run(config: Path) -> Any:
    return asyncio.run(execute(build_plan(load_config(config), source=str(config)), RunOptions(quiet=True)))


def _records(outcome: Any) -> list[dict[str, Any]]:
    keep = ("sample_id", "model", "response", "prediction", "score", "details", "duration")
    rows = [
        json.loads(line) for f in (outcome.run_dir / "records").glob("*.jsonl") for line in f.read_text().splitlines()
    ]
    return sorted(({k: r.get(k) for k in keep} for r in rows), key=lambda r: (r["model"], r["sample_id"]))


def test_a_store_written_by_the_general_path_answers_the_direct_path(
    tmp_path: Path, make_server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Resume across the change: a store filled while every clip was decoded answers every request of the fast path."""
    assert sf.info(io.BytesIO(pq_first_clip())).subtype == "PCM_16"  # the shipped set takes the direct path
    server = make_server(request_log=True, default_answer="hello world")
    config = _config(tmp_path, server.base_url)
    import evalkit.run.media as media

    with monkeypatch.context() as patch:
        patch.setattr(media, "prepare_turn_audio_direct", lambda *args: None)  # today's path: decode everything
        before = _run(config)
    taken: list[int] = []
    original = direct.direct_wav16

    def counting(audio: Audio) -> bytes | None:
        found = original(audio)
        taken.append(found is not None)
        return found

    monkeypatch.setattr(direct, "direct_wav16", counting)
    after = _run(config)
    assert before.requests_sent > 0 and taken and all(taken)
    assert after.requests_sent == 0 and after.store_hits == before.requests_sent
    assert _records(after) == _records(before)


def pq_first_clip() -> bytes:
    import pyarrow.parquet as pq

    table = pq.read_table(ROOT / "evalkit" / "assets" / "speech" / "espeak_en" / "data.parquet", columns=["audio"])
    return bytes(table.column("audio")[0].as_py()["bytes"])


def picture(size: tuple[int, int], fmt: str) -> bytes:
    rng = np.random.default_rng(7)
    out = io.BytesIO()
    PILImage.fromarray(rng.integers(0, 255, (size[1], size[0], 3), dtype=np.uint8)).save(out, format=fmt)
    return out.getvalue()


@pytest.mark.parametrize("fmt", ["JPEG", "PNG"])
def test_an_image_within_every_limit_goes_as_its_bytes_in_a_thread(fmt: str) -> None:
    data = picture((120, 80), fmt)
    limits = [(None, None), (500, None), (None, 120 * 80)]
    fast = prepare_images_as_is({0: [Image(data=data)]}, limits)
    general = prepare_images({0: [Image(data=data)]}, limits)
    assert fast is not None
    for limit in limits:
        (part,) = fast.parts(0, limit)
        (same,) = general.parts(0, limit)
        assert (part.url, part.identity, part.ref) == (same.url, same.identity, same.ref)
        assert base64.b64decode(part.url.split(",", 1)[1]) == data


def test_an_image_that_needs_a_resize_or_a_new_format_is_left_to_the_workers() -> None:
    jpeg = picture((120, 80), "JPEG")
    assert prepare_images_as_is({0: [Image(data=jpeg)]}, [(None, None), (60, None)]) is None
    bmp = picture((10, 10), "BMP")
    assert prepare_images_as_is({0: [Image(data=bmp)]}, [(None, None)]) is None
    resized = asyncio.run(run_media_job(prepare_images_as_is, prepare_images, {0: [Image(data=jpeg)]}, [(60, None)]))
    assert resized.parts(0, (60, None))[0].ref["sent"]["width"] == 60


@pytest.mark.parametrize("size", [0, 1, 2, 3, 4, 57, 1000, 320_044])
def test_b64_text_equals_the_standard_library(size: int) -> None:
    from evalkit.util.b64 import _stdlib_encode, b64_text

    data = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8).tobytes()
    assert b64_text(data) == _stdlib_encode(data) == base64.b64encode(data).decode("ascii")


def test_jpeg_end_check_searches_from_the_end_with_the_same_verdict() -> None:
    """The EOI-after-last-SOS rule, checked against its plain statement on short strings of the marker bytes."""
    import random

    from evalkit.data.image.codec import _jpeg_complete

    rng = random.Random(5)
    for _ in range(20_000):
        data = bytes(rng.choice(b"\xff\xd9\xda\x00") for _ in range(rng.randint(0, 12)))
        assert _jpeg_complete(data) == (data.rfind(b"\xff\xd9") > data.rfind(b"\xff\xda") >= 0), data

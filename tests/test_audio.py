"""Audio decoding, resampling and slicing on real encoded bytes and files."""

from __future__ import annotations

import base64
import io
import threading
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from evalkit.data.audio.decode import (
    AudioDecodeError,
    audio_from_value,
    decode,
    duration_seconds,
    load_16k_mono,
    resample,
    to_mono,
    wav_base64,
    wav_bytes,
)
from evalkit.data.audio.pcm import piece_bounds
from evalkit.data.sample import Audio


def sine(freq: float, sr: int, seconds: float, amp: float = 0.5) -> np.ndarray:
    t = np.arange(int(sr * seconds)) / sr
    return (amp * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def encode(array: np.ndarray, sr: int, fmt: str, subtype: str | None = None) -> bytes:
    buf = io.BytesIO()
    sf.write(buf, array, sr, format=fmt, subtype=subtype)
    return buf.getvalue()


def dominant_freq(array: np.ndarray, sr: int) -> float:
    spectrum = np.abs(np.fft.rfft(array * np.hanning(len(array))))
    return float(np.fft.rfftfreq(len(array), 1 / sr)[int(np.argmax(spectrum))])


@pytest.mark.parametrize(
    ("fmt", "subtype", "tol"),
    [
        ("WAV", "PCM_16", 1e-4),
        ("FLAC", "PCM_16", 1e-4),
        ("OGG", "VORBIS", None),
        ("MP3", "MPEG_LAYER_III", None),
    ],
)
def test_encoded_bytes_round_trip(fmt: str, subtype: str, tol: float | None) -> None:
    if fmt not in sf.available_formats():
        pytest.skip(f"this libsndfile cannot write {fmt}")
    original = sine(440, 16000, 1.0)
    array, sr = decode(Audio(data=encode(original, 16000, fmt, subtype)))
    assert sr == 16000
    assert array.dtype == np.float32 and array.ndim == 1
    if tol is not None:  # lossless: sample for sample
        assert array.shape == original.shape
        np.testing.assert_allclose(array, original, atol=tol)
    else:  # lossy codecs may pad or shift, but keep the pitch
        assert abs(len(array) - len(original)) < 0.1 * 16000
        assert abs(dominant_freq(array, sr) - 440) < 5


def test_stereo_file_is_mixed_to_mono(tmp_path: Path) -> None:
    left, right = sine(300, 8000, 0.5), np.zeros(4000, dtype=np.float32)
    path = tmp_path / "stereo.wav"
    sf.write(path, np.stack([left, right], axis=1), 8000, subtype="FLOAT")
    array, sr = decode(Audio(path=str(path)))
    assert sr == 8000
    np.testing.assert_allclose(array, left / 2, atol=1e-6)


def test_to_mono_accepts_channels_first_and_integer_pcm() -> None:
    frames = sine(200, 8000, 0.25)
    channels_first = np.stack([frames, -frames])  # (2, N), as datasets returns it
    np.testing.assert_allclose(to_mono(channels_first), np.zeros_like(frames), atol=1e-7)
    np.testing.assert_allclose(to_mono(channels_first.T), np.zeros_like(frames), atol=1e-7)
    pcm = np.array([0, 16384, -32768], dtype=np.int16)
    np.testing.assert_allclose(to_mono(pcm), [0.0, 0.5, -1.0])


def test_array_audio_needs_a_rate() -> None:
    array, sr = decode(Audio(array=[0.0, 0.5, -0.5], sampling_rate=22050))
    assert sr == 22050 and array.dtype == np.float32 and array.tolist() == [0.0, 0.5, -0.5]
    with pytest.raises(AudioDecodeError, match="sampling_rate"):
        decode(Audio(array=[0.0, 0.1]))


def test_resample_length_and_frequency() -> None:
    original = sine(1000, 44100, 2.0)
    out = resample(original, 44100, 16000)
    assert out.dtype == np.float32
    assert abs(len(out) - 32000) <= 1
    assert abs(dominant_freq(out, 16000) - 1000) < 2
    up = resample(sine(440, 8000, 1.0), 8000, 16000)
    assert abs(len(up) - 16000) <= 1
    assert abs(dominant_freq(up, 16000) - 440) < 2
    same = sine(440, 16000, 0.1)
    np.testing.assert_array_equal(resample(same, 16000, 16000), same)
    assert resample(np.zeros(0, dtype=np.float32), 44100, 16000).size == 0


def test_load_16k_mono_from_48k_stereo_flac() -> None:
    stereo = np.stack([sine(500, 48000, 1.5), sine(500, 48000, 1.5)], axis=1)
    out = load_16k_mono(Audio(data=encode(stereo, 48000, "FLAC")))
    assert out.dtype == np.float32 and out.ndim == 1
    assert abs(len(out) - 24000) <= 1
    assert abs(dominant_freq(out, 16000) - 500) < 2


@pytest.mark.parametrize("length", [0, 1, 15999, 16000, 16001, 50000])
def test_chunks_cover_every_sample_once_in_order(length: int) -> None:
    pcm = np.arange(length, dtype="<i2").tobytes()
    pieces = [pcm[a:b] for a, b in piece_bounds(len(pcm), 1.0, "chunk")]
    assert all(len(p) == 32000 for p in pieces[:-1])
    assert all(pieces) or length == 0
    assert len(pieces) == max(1, -(-length // 16000))
    assert b"".join(pieces) == pcm


def test_chunk_length_is_rounded_not_cut() -> None:
    """1.001 s is 16015.999... samples in floating point; the chunk is 16016 samples, not 16015."""
    assert 1.001 * 16000 < 16016
    assert piece_bounds(40_000, 1.001, "chunk")[0] == (0, 2 * 16016)


def test_truncate_keeps_the_first_chunk_only() -> None:
    assert piece_bounds(96_000, 1.5, "truncate") == [(0, 48_000)]
    assert piece_bounds(96_000, 10, "truncate") == [(0, 96_000)]
    assert piece_bounds(96_000, None, "truncate") == [(0, 96_000)]


def test_duration_reads_the_header_only(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    data = encode(sine(440, 22050, 2.5), 22050, "FLAC")
    path = tmp_path / "a.flac"
    path.write_bytes(data)

    def no_full_decode(*args: object, **kwargs: object) -> None:
        raise AssertionError("duration_seconds decoded the whole file")

    monkeypatch.setattr(sf, "read", no_full_decode)
    assert duration_seconds(Audio(data=data)) == pytest.approx(2.5, abs=1e-3)
    assert duration_seconds(Audio(path=str(path))) == pytest.approx(2.5, abs=1e-3)
    assert duration_seconds(Audio(array=np.zeros(8000), sampling_rate=16000)) == 0.5


def test_wav_bytes_is_16bit_pcm_and_clips() -> None:
    loud = np.array([0.0, 0.5, 2.0, -3.0], dtype=np.float32)
    data = wav_bytes(loud, 16000)
    assert data[:4] == b"RIFF" and data[8:12] == b"WAVE"
    info = sf.info(io.BytesIO(data))
    assert (info.samplerate, info.channels, info.subtype) == (16000, 1, "PCM_16")
    back, _ = sf.read(io.BytesIO(data), dtype="float32")
    assert back[2] > 0.99 and back[3] <= -0.99  # clipped, not wrapped around
    assert base64.b64decode(wav_base64(loud, 16000)) == data


def test_bad_bytes_raise_audio_decode_error() -> None:
    with pytest.raises(AudioDecodeError, match="unknown") as info:
        decode(Audio(data=b"this is not audio at all" * 10))
    assert isinstance(info.value, ValueError)
    with pytest.raises(AudioDecodeError, match="mp4"):
        decode(Audio(data=b"\x00\x00\x00\x20ftypisom" + b"\x00" * 100))
    with pytest.raises(AudioDecodeError, match="empty"):
        decode(Audio(data=b""))
    with pytest.raises(AudioDecodeError):
        duration_seconds(Audio(data=b"garbage" * 20))
    truncated_flac = encode(sine(440, 16000, 1.0), 16000, "FLAC")[:30]
    with pytest.raises(AudioDecodeError, match="flac"):
        decode(Audio(data=truncated_flac))


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.wav"
    with pytest.raises(AudioDecodeError, match="nope.wav"):
        decode(Audio(path=str(missing)))
    with pytest.raises(AudioDecodeError, match="no data, path or array"):
        decode(Audio())


def test_audio_from_value_shapes(tmp_path: Path) -> None:
    data = encode(sine(440, 16000, 0.5), 16000, "WAV", "PCM_16")
    (tmp_path / "clip.wav").write_bytes(data)

    assert audio_from_value({"bytes": data, "path": "clip.wav"}).data == data
    from_path = audio_from_value({"bytes": None, "path": "clip.wav"}, base_dir=tmp_path)
    assert from_path.path == str(tmp_path / "clip.wav")
    assert decode(from_path)[0].shape == (8000,)
    assert audio_from_value("clip.wav", base_dir=str(tmp_path)).path == str(tmp_path / "clip.wav")
    absolute = str(tmp_path / "clip.wav")
    assert audio_from_value(absolute, base_dir="/elsewhere").path == absolute
    assert audio_from_value(bytearray(data)).data == data
    arr = audio_from_value({"array": np.zeros(10), "sampling_rate": 8000, "path": None})
    assert arr.sampling_rate == 8000 and len(arr.array) == 10

    for bad in (None, 42, {}, {"bytes": None, "path": None}, {"array": [0.0]}, b""):
        with pytest.raises(AudioDecodeError):
            audio_from_value(bad)


def test_decode_is_safe_from_many_threads() -> None:
    clips = [encode(sine(200 + 50 * i, 16000, 0.5), 16000, "FLAC") for i in range(8)]
    results: dict[int, float] = {}

    def work(i: int) -> None:
        results[i] = dominant_freq(load_16k_mono(Audio(data=clips[i])), 16000)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(abs(results[i] - (200 + 50 * i)) < 3 for i in range(8))

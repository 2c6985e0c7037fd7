"""Audio decoding, resampling, chunking and WAV encoding for evalkit.

evalkit never lets ``datasets`` decode audio: recent ``datasets`` releases
decode through torchcodec, which is not installable on every machine (it is
tied to specific torch/FFmpeg builds). Instead rows carry the *encoded* bytes
(or a path, or an already-decoded array) in :class:`evalkit.data.sample.Audio`
and this module decodes them with soundfile (libsndfile). libsndfile >= 1.1
reads WAV, FLAC, OGG/Vorbis, OGG/Opus and MP3; the soundfile build installed
with evalkit's wheels bundles libsndfile 1.2, so all of these work without
FFmpeg. Resampling uses soxr (the SoX resampler), which is fast, high quality
and releases the GIL.

Every function here is pure and blocking, holds no shared state and is safe
to call from several worker threads at once: the engine runs them off the
event loop. Audio that cannot be decoded raises :class:`AudioDecodeError`, a
``ValueError`` whose message names the format and the source so the engine
can record a per-sample failure a user can act on.
"""

from __future__ import annotations

import base64
import io
import os
from typing import Any

import numpy as np
import soundfile as sf
import soxr

from evalkit.data.audio.values import AudioDecodeError, audio_from_value
from evalkit.data.sample import Audio

__all__ = [
    "TARGET_SR",
    "AudioDecodeError",
    "audio_from_value",
    "decode",
    "duration_seconds",
    "load_16k_mono",
    "resample",
    "to_mono",
    "wav_base64",
    "wav_bytes",
]

TARGET_SR = 16000
"""The rate speech models expect; what :func:`load_16k_mono` returns."""

# soundfile raises LibsndfileError (a RuntimeError) for unreadable data and
# TypeError/ValueError for a few malformed arguments or headers.
_SOUNDFILE_ERRORS = (RuntimeError, TypeError, ValueError, EOFError)


# --------------------------------------------------------------------------- decoding


def _sniff_format(data: bytes) -> str:
    """Name the container from magic bytes, so an error says what was actually received."""
    head = data[:12]
    if head.startswith(b"RIFF") and head[8:12] == b"WAVE":
        return "wav"
    if head.startswith(b"fLaC"):
        return "flac"
    if head.startswith(b"OggS"):
        return "ogg"
    if head.startswith(b"ID3") or (len(head) >= 2 and head[0] == 0xFF and (head[1] & 0xE0) == 0xE0):
        return "mp3"
    if head[4:8] == b"ftyp":
        return "mp4/m4a (not supported by libsndfile; convert to wav/flac)"
    if head.startswith(b"\x1aE\xdf\xa3"):
        return "webm/matroska (not supported by libsndfile; convert to wav/flac/ogg)"
    if head.startswith(b"FORM"):
        return "aiff"
    return f"unknown (starts with {head[:8]!r})"


def _as_float32(array: Any) -> np.ndarray:
    """Floats in [-1, 1]: integer PCM is scaled by its full range, as decoders do."""
    arr = np.asarray(array)
    if arr.dtype.kind in "iu":
        info = np.iinfo(arr.dtype)
        if arr.dtype.kind == "u":  # unsigned PCM (8-bit wav) is centred on the midpoint
            mid = (int(info.max) + 1) / 2
            return ((arr.astype(np.float64) - mid) / mid).astype(np.float32)
        return (arr.astype(np.float64) / (int(info.max) + 1)).astype(np.float32)
    if arr.dtype.kind != "f":
        raise AudioDecodeError(f"audio array has dtype {arr.dtype}, expected floats or integer PCM")
    return arr.astype(np.float32, copy=False)


def to_mono(array: np.ndarray) -> np.ndarray:
    """Average the channels into one float32 signal.

    A 2-D array may be (frames, channels) as soundfile returns it or
    (channels, frames) as ``datasets`` and torch return it; the shorter axis is
    taken to be the channels, since no real clip has more channels than frames.
    """
    arr = _as_float32(array)
    if arr.ndim == 1:
        return arr
    if arr.ndim != 2:
        raise AudioDecodeError(f"audio array has {arr.ndim} dimensions, expected 1 (mono) or 2 (multichannel)")
    channel_axis = 1 if arr.shape[1] <= arr.shape[0] else 0
    if arr.shape[channel_axis] == 1:
        return np.ascontiguousarray(arr.reshape(-1))
    # summing channel slices is ~20x faster than mean() over the short axis of a frames x channels array
    channels = arr.shape[channel_axis]
    total = np.zeros(arr.shape[1 - channel_axis], dtype=np.float32)
    for c in range(channels):
        total += arr[:, c] if channel_axis == 1 else arr[c]
    total /= channels
    return total


def _read(source: Any, what: str) -> tuple[np.ndarray, int]:
    try:
        array, sr = sf.read(source, dtype="float32", always_2d=True)
    except _SOUNDFILE_ERRORS as exc:
        raise AudioDecodeError(f"cannot decode {what}: {exc}") from exc
    if array.shape[0] == 0:
        # a valid header with no frames: no model can answer it (vLLM's Qwen2-Audio refuses it with a 500-like
        # "too short to be represented"; transformers pads it to 30 s of silence), so it fails here, once
        raise AudioDecodeError(f"{what} holds no audio: 0 samples")
    return to_mono(array), int(sr)


def decode(audio: Audio) -> tuple[np.ndarray, int]:
    """Return (float32 mono samples, sampling rate) from whichever field of ``audio`` is set.

    Encoded bytes win over a path and a path over an array, mirroring how
    cheap each is to carry; the file header's rate is authoritative over
    ``audio.sampling_rate`` for bytes and paths.
    """
    if audio.data is not None:
        data = bytes(audio.data)
        if not data:
            raise AudioDecodeError("cannot decode audio bytes: the byte string is empty")
        what = f"audio bytes ({len(data)} bytes, format {_sniff_format(data)})"
        return _read(io.BytesIO(data), what)
    if audio.path is not None:
        path = os.fspath(audio.path)
        if not os.path.isfile(path):
            raise AudioDecodeError(f"cannot decode audio file {path!r}: no such file")
        try:
            with open(path, "rb") as fh:
                head = fh.read(12)
        except OSError as exc:
            raise AudioDecodeError(f"cannot read audio file {path!r}: {exc}") from exc
        return _read(path, f"audio file {path!r} (format {_sniff_format(head)})")
    if audio.array is not None:
        if not audio.sampling_rate or audio.sampling_rate <= 0:
            raise AudioDecodeError("audio array has no sampling_rate; cannot interpret it")
        return to_mono(audio.array), int(audio.sampling_rate)
    raise AudioDecodeError("audio has no data, path or array")


def resample(array: np.ndarray, sr_from: int, sr_to: int) -> np.ndarray:
    """Change the rate of a mono signal with soxr's high-quality filter (float32 out)."""
    if sr_from <= 0 or sr_to <= 0:
        raise ValueError(f"sampling rates must be positive, got {sr_from} -> {sr_to}")
    arr = to_mono(array)
    if sr_from == sr_to:
        return arr
    if arr.size == 0:
        return np.zeros(0, dtype=np.float32)
    out = soxr.resample(arr, sr_from, sr_to, quality="HQ")
    return np.asarray(out, dtype=np.float32)


def load_16k_mono(audio: Audio) -> np.ndarray:
    """The form ASR models and audio chat APIs want: float32, mono, 16 kHz."""
    array, sr = decode(audio)
    return resample(array, sr, TARGET_SR)


def duration_seconds(audio: Audio) -> float:
    """Length in seconds, read from the file header when there is one (no full decode)."""
    if audio.data is not None or audio.path is not None:
        if audio.data is not None:
            data = bytes(audio.data)
            if not data:
                raise AudioDecodeError("cannot read audio bytes: the byte string is empty")
            source: Any = io.BytesIO(data)
            what = f"audio bytes ({len(data)} bytes, format {_sniff_format(data)})"
        else:
            source = os.fspath(audio.path)  # type: ignore[arg-type]
            if not os.path.isfile(source):
                raise AudioDecodeError(f"cannot read audio file {source!r}: no such file")
            what = f"audio file {source!r}"
        try:
            info = sf.info(source)
        except _SOUNDFILE_ERRORS as exc:
            raise AudioDecodeError(f"cannot read header of {what}: {exc}") from exc
        if info.samplerate <= 0:
            raise AudioDecodeError(f"{what} reports sampling rate {info.samplerate}")
        return float(info.frames) / float(info.samplerate)
    if audio.array is not None:
        if not audio.sampling_rate or audio.sampling_rate <= 0:
            raise AudioDecodeError("audio array has no sampling_rate; cannot compute its duration")
        arr = np.asarray(audio.array)
        frames = arr.shape[0] if arr.ndim == 1 else max(arr.shape) if arr.ndim == 2 else 0
        return float(frames) / float(audio.sampling_rate)
    raise AudioDecodeError("audio has no data, path or array")


# --------------------------------------------------------------------------- encoding


def wav_bytes(array: np.ndarray, sr: int = TARGET_SR) -> bytes:
    """16-bit PCM WAV, the format every audio API accepts.

    Samples are clipped to [-1, 1] first: libsndfile does not clip by
    default, so an overshoot would wrap around into loud clicks.
    """
    arr = np.clip(to_mono(array), -1.0, 1.0)
    buf = io.BytesIO()
    sf.write(buf, arr, int(sr), format="WAV", subtype="PCM_16")
    return buf.getvalue()


def wav_base64(array: np.ndarray, sr: int = TARGET_SR) -> str:
    """:func:`wav_bytes` as ASCII base64, as JSON request bodies carry audio."""
    return base64.b64encode(wav_bytes(array, sr)).decode("ascii")

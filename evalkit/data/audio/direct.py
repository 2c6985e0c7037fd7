"""Audio already in the form sent: its 16 kHz mono int16 PCM without the float decode, in a thread.

Most speech sets hold 16 kHz mono 16-bit clips, exactly what evalkit sends.
For those, the general path (decode to float32, mix, resample, scale back to
int16 in a worker process, then ship the WAV and its base64 back through a
pipe) does work whose result is the input: a WAV's ``data`` chunk *is* the
PCM, and a 16-bit FLAC decodes straight to int16. This module finds that PCM
with a header parse (WAV), dr_flac where miniaudio is installed (FLAC,
:mod:`evalkit.data.audio.flac`) or libsndfile's int16 read (FLAC and other
16-bit PCM containers), so the caller can cut, hash and base64 it in a thread:
file reads, the decoders (through cffi) and sha256 run without the GIL.

The PCM is bit-identical to :func:`evalkit.data.audio.pcm.pcm16_of`'s
(int16 -> float32 -> x * 32768 is exact), so the WAV pieces, their sha256 and
every store key stay what they were. Anything else (another rate, channels,
bit depth, a malformed or empty file, an in-memory array) returns None and
goes the general way, which also words the errors.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable

from evalkit.data.audio.flac import available as flac_available
from evalkit.data.audio.flac import flac_wav16
from evalkit.data.audio.pcm import (
    ALL_ENCODINGS,
    SAMPLE_RATE,
    WAV_HEADER_BYTES,
    PreparedAudio,
    Shape,
    wav_from_pcm16,
    wav_header,
)
from evalkit.data.sample import Audio

__all__ = [
    "direct_pcm16",
    "direct_wav16",
    "prepare_example_audio_direct",
    "prepare_turn_audio_direct",
    "wav_as_sent",
    "wav_pcm16",
]

#: how much of a WAV file is read to find its fmt and data chunks before the rest is read
_HEADER_BYTES = 4096
_WAVE_FORMAT_PCM = 1
_WAVE_FORMAT_EXTENSIBLE = 0xFFFE
#: the sub-format GUID of PCM in WAVE_FORMAT_EXTENSIBLE (KSDATAFORMAT_SUBTYPE_PCM)
_PCM_GUID = bytes.fromhex("0100000000001000800000aa00389b71")


def _wav_data_span(head: bytes) -> tuple[int, int] | None:
    """(offset, length) of the data chunk of a 16 kHz mono 16-bit PCM WAV whose header is in ``head``; else None."""
    if len(head) < 12 or head[:4] != b"RIFF" or head[8:12] != b"WAVE":
        return None
    pos, fmt_ok = 12, False
    while pos + 8 <= len(head):
        chunk_id, size = head[pos : pos + 4], struct.unpack_from("<I", head, pos + 4)[0]
        body = pos + 8
        if chunk_id == b"fmt ":
            if size < 16 or body + size > len(head):
                return None
            tag, channels, rate, _, align, bits = struct.unpack_from("<HHIIHH", head, body)
            if tag == _WAVE_FORMAT_EXTENSIBLE and size >= 40:
                tag = _WAVE_FORMAT_PCM if head[body + 24 : body + 40] == _PCM_GUID else 0
            fmt_ok = (tag, channels, rate, align, bits) == (_WAVE_FORMAT_PCM, 1, SAMPLE_RATE, 2, 16)
            if not fmt_ok:
                return None
        elif chunk_id == b"data":
            return (body, size) if fmt_ok else None
        pos = body + size + (size & 1)  # chunks are padded to an even length
    return None


def wav_pcm16(data: bytes) -> bytes | None:
    """The PCM of a whole 16 kHz mono 16-bit WAV held in ``data``, by header parse; None for anything else."""
    span = _wav_data_span(data[:_HEADER_BYTES])
    if span is None:
        return None
    offset, length = span
    if length == 0 or length % 2 or offset + length > len(data):
        return None  # empty, odd or cut short: the general path reads what is there and words the error
    return data[offset : offset + length]


def wav_as_sent(data: bytes) -> bytes | None:
    """The canonical WAV of a whole 16 kHz mono 16-bit WAV held in ``data``: ``data`` itself when it is one."""
    span = _wav_data_span(data[:_HEADER_BYTES])
    if span is None:
        return None
    offset, length = span
    if length == 0 or length % 2 or offset + length > len(data):
        return None
    if offset == WAV_HEADER_BYTES and len(data) == offset + length and data[:offset] == wav_header(length):
        return data
    return wav_from_pcm16(memoryview(data)[offset : offset + length])


def _wav_file_as_sent(path: str) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            head = handle.read(_HEADER_BYTES)
            span = _wav_data_span(head)
            if span is None:
                return None
            offset, length = span
            size = os.fstat(handle.fileno()).st_size
            if length == 0 or length % 2 or offset + length > size:
                return None
            if offset == WAV_HEADER_BYTES and size == offset + length and head[:offset] == wav_header(length):
                handle.seek(0)
                whole = handle.read(size)
                return whole if len(whole) == size else None
            handle.seek(offset)
            pcm = handle.read(length)
    except OSError:
        return None
    return wav_from_pcm16(pcm) if len(pcm) == length else None


def _sndfile_pcm16(source: str | bytes) -> bytes | None:
    """libsndfile's int16 read of a 16 kHz mono 16-bit file (FLAC, ...): no float conversion, no resample."""
    import io

    import soundfile as sf

    try:
        handle = sf.SoundFile(io.BytesIO(source) if isinstance(source, bytes) else source)
    except (RuntimeError, TypeError, ValueError, EOFError, OSError):
        return None
    with handle:
        if (handle.samplerate, handle.channels, handle.subtype) != (SAMPLE_RATE, 1, "PCM_16"):
            return None
        try:
            samples = handle.read(dtype="int16")
        except (RuntimeError, TypeError, ValueError, EOFError):
            return None
    if samples.size == 0:
        return None
    return samples.astype("<i2", copy=False).tobytes()


def _flac_as_sent(data: bytes) -> bytes | None:
    found = flac_wav16(data)
    if found is not None:
        return found
    pcm = _sndfile_pcm16(data)
    return None if pcm is None else wav_from_pcm16(pcm)


def direct_wav16(audio: Audio) -> bytes | None:
    """The canonical 16 kHz mono 16-bit WAV of ``audio`` (:func:`~evalkit.data.audio.pcm.wav_header`, then its
    PCM) when it is stored in that form (blocking); None: decode it the general way."""
    if audio.data is not None:
        data = bytes(audio.data)
        if not data:
            return None
        if data[:4] == b"RIFF":
            return wav_as_sent(data)
        if data[:4] == b"fLaC":
            return _flac_as_sent(data)
        pcm = _sndfile_pcm16(data)
    elif audio.path is not None:
        path = os.fspath(audio.path)
        try:
            with open(path, "rb") as handle:
                magic = handle.read(4)
                data = handle.read() if magic == b"fLaC" and flac_available() else b""
        except OSError:
            return None
        if magic == b"RIFF":
            return _wav_file_as_sent(path)
        if data:
            return _flac_as_sent(magic + data)
        pcm = _sndfile_pcm16(path)
    else:
        return None
    return None if pcm is None else wav_from_pcm16(pcm)


def direct_pcm16(audio: Audio) -> bytes | None:
    """16 kHz mono int16 PCM of ``audio`` when it is stored in that form (blocking); None: decode it the general way."""
    wav = direct_wav16(audio)
    return None if wav is None else wav[WAV_HEADER_BYTES:]


def prepare_turn_audio_direct(
    audio_by_turn: dict[int, Audio], shapes: list[Shape], encodings: frozenset[str] = ALL_ENCODINGS
) -> PreparedAudio | None:
    """:func:`~evalkit.data.audio.pcm.prepare_turn_audio` when every clip is in the form sent, else None (blocking)."""
    wav_by_turn = {}
    for index, audio in audio_by_turn.items():
        wav = direct_wav16(audio)
        if wav is None:
            return None
        wav_by_turn[index] = wav
    return PreparedAudio.from_wavs(wav_by_turn).build(shapes, encodings=encodings)


def prepare_example_audio_direct(
    audio: Audio, shapes: Iterable[Shape], encodings: frozenset[str] = ALL_ENCODINGS
) -> PreparedAudio | None:
    """:func:`~evalkit.data.audio.pcm.prepare_example_audio` for a clip in the form sent, else None (blocking)."""
    wav = direct_wav16(audio)
    if wav is None:
        return None
    truncated = [(chunk_size, "truncate") for chunk_size, _ in shapes]
    return PreparedAudio.from_wavs({-1: wav}).build(truncated, encodings=encodings)

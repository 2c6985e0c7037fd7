"""16 kHz mono 16-bit FLAC to int16 PCM with dr_flac, through miniaudio's compiled binding (optional).

libsndfile decodes FLAC through libFLAC, then copies every sample into the
caller's buffer one at a time (its ``flac_buffer_copy``): on a 10 s clip that
copy is over half of the ~2 ms the read takes, and the read was the largest
CPU cost of a request carrying audio. dr_flac (miniaudio's FLAC decoder)
decodes the same clip in ~0.4 ms. FLAC is lossless, so both give the same
samples for a valid file; a test compares them on clips of every kind.

The binding is miniaudio's cffi module (``_miniaudio``), used directly: the
``miniaudio`` Python module around it imports ``urllib.request`` (with
``http.client`` and ``email``) at ~30 ms a process, and copies the samples
twice on the way out. Its dr_flac names are ``ma_dr_flac_*`` from miniaudio
1.70 on and ``drflac_*`` before, with the same signatures.

dr_flac skips a frame that fails its checksum and stops at a cut, where
libsndfile refuses the file; so a decode is kept only when it yields every
sample the stream header announces, after a walk of the metadata blocks that
finds them whole. Anything else returns None and goes libsndfile's way,
which keeps its verdict on damaged files and its error messages.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from evalkit.data.audio.pcm import WAV_HEADER_BYTES, wav_header

__all__ = ["available", "flac_wav16"]

#: the STREAMINFO fields evalkit sends as they are: 16 kHz, one channel, 16 bits
_RATE, _CHANNELS, _BITS = 16000, 1, 16
_STREAMINFO_LENGTH = 34
_INVALID_BLOCK_TYPE = 127
#: a FLAC frame holds at most 65,535 samples in no fewer than ~10 bytes: a header announcing more than this bound
#: per 8 bytes of file is not believed (and never allocated for)
_MAX_SAMPLES_PER_8_BYTES = 65536

#: a decode buffer kept per media thread up to this size (a 4-minute clip): a fresh one per clip costs the
#: kernel a zeroed page for every 4 KiB written, as much again as the decode itself
_SCRATCH_LIMIT = 8 * 2**20

_binding: tuple[Any, Any, str] | None | bool = False  # False: not looked for yet; None: not installed
_scratch = threading.local()


def _dr_flac() -> tuple[Any, Any, str] | None:
    """(ffi, lib, name prefix) of miniaudio's dr_flac, or None where miniaudio is not installed."""
    global _binding
    if _binding is False:
        found: tuple[Any, Any, str] | None = None
        try:
            from _miniaudio import ffi, lib
        except ImportError:
            pass
        else:
            for prefix in ("ma_dr_flac_", "drflac_"):
                if hasattr(lib, prefix + "read_pcm_frames_s16"):
                    found = (ffi, lib, prefix)
                    break
        _binding = found
    return _binding  # type: ignore[return-value]


def available() -> bool:
    """Whether dr_flac can be used here (miniaudio installed, on a little-endian machine)."""
    return sys.byteorder == "little" and _dr_flac() is not None


def _frames_if_sent_as_is(data: bytes) -> int | None:
    """The sample count a 16 kHz mono 16-bit FLAC's STREAMINFO announces, if its metadata blocks are whole."""
    if len(data) < 8 + _STREAMINFO_LENGTH or data[:4] != b"fLaC":
        return None
    if data[4] & 0x7F != 0 or int.from_bytes(data[5:8], "big") != _STREAMINFO_LENGTH:
        return None  # STREAMINFO must come first, and be 34 bytes long
    # sample rate (20 bits), channels - 1 (3), bits per sample - 1 (5), total samples (36)
    fields = int.from_bytes(data[18:26], "big")
    rate, channels, bits = fields >> 44, ((fields >> 41) & 0x7) + 1, ((fields >> 36) & 0x1F) + 1
    frames = fields & ((1 << 36) - 1)
    if (rate, channels, bits) != (_RATE, _CHANNELS, _BITS) or frames == 0:
        return None  # frames 0: a length the header does not know, left to libsndfile
    if frames > (len(data) // 8 + 1) * _MAX_SAMPLES_PER_8_BYTES:
        return None
    pos, last = 4, False
    while not last:
        if pos + 4 > len(data):
            return None
        last, kind = bool(data[pos] & 0x80), data[pos] & 0x7F
        if kind == _INVALID_BLOCK_TYPE:
            return None
        pos += 4 + int.from_bytes(data[pos + 1 : pos + 4], "big")
    if pos + 2 > len(data) or data[pos] != 0xFF or data[pos + 1] & 0xFE != 0xF8:
        return None  # the first frame's sync code must follow the last metadata block
    return frames


def _buffer(size: int) -> bytearray:
    """This thread's decode buffer, at least ``size`` bytes (a fresh one past :data:`_SCRATCH_LIMIT`)."""
    if size > _SCRATCH_LIMIT:
        return bytearray(size)
    buffer: bytearray | None = getattr(_scratch, "buffer", None)
    if buffer is None or len(buffer) < size:
        buffer = _scratch.buffer = bytearray(max(size, 2**19))
    return buffer


def flac_wav16(data: bytes) -> bytes | None:
    """The canonical WAV (:func:`~evalkit.data.audio.pcm.wav_header`, then little-endian int16 PCM) of a whole
    16 kHz mono 16-bit FLAC held in ``data``; None: let libsndfile read it.

    Blocking, and without the GIL while dr_flac runs (cffi releases it), so
    it belongs in the media threads.
    """
    frames = _frames_if_sent_as_is(data)
    if frames is None or not available():
        return None
    binding = _dr_flac()
    assert binding is not None
    ffi, lib, prefix = binding
    decoder = getattr(lib, prefix + "open_memory")(data, len(data), ffi.NULL)
    if decoder == ffi.NULL:
        return None
    try:
        if (decoder.sampleRate, decoder.channels, decoder.bitsPerSample) != (_RATE, _CHANNELS, _BITS):
            return None
        if decoder.totalPCMFrameCount != frames:
            return None
        size = WAV_HEADER_BYTES + 2 * frames
        buffer = _buffer(size + 2)  # one sample more, to see whether the stream holds more than announced
        view = memoryview(buffer)
        samples = ffi.from_buffer("short[]", view[WAV_HEADER_BYTES:])
        read = getattr(lib, prefix + "read_pcm_frames_s16")(decoder, frames + 1, samples)
    finally:
        getattr(lib, prefix + "close")(decoder)
    if read != frames:
        # fewer: a frame failed its checksum, or the stream is cut short; more: the header is wrong.
        # libsndfile's verdict stands on both.
        return None
    view[:WAV_HEADER_BYTES] = wav_header(2 * frames)
    return bytes(view[:size])

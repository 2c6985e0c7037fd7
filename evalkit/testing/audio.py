"""Audio fingerprints: the identity of a clip's samples, not of its file.

Tests compute a fingerprint from dataset audio and script an answer for it; the
client may re-encode the clip (another WAV header, FLAC, a different sub-type)
before sending it. Hashing the decoded int16 samples makes both sides agree as
long as the samples themselves survive. No resampling is done: a resampled clip
is a different clip.
"""

from __future__ import annotations

import hashlib
import io
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


class AudioDecodeError(ValueError):
    """The bytes are not audio soundfile can decode."""


def decode_int16_mono(data: bytes) -> tuple[np.ndarray, int]:
    """Decode an audio file to int16 mono samples (channels averaged) and its sample rate.

    numpy and soundfile are imported here, not at module import: a server whose
    script has no audio rules starts faster without them.
    """
    import numpy as np
    import soundfile as sf

    try:
        samples, rate = sf.read(io.BytesIO(data), dtype="float64", always_2d=True)
    except Exception as exc:  # soundfile raises LibsndfileError, RuntimeError, TypeError...
        raise AudioDecodeError(f"cannot decode audio ({len(data)} bytes): {exc}") from exc
    mono = samples.mean(axis=1) if samples.shape[1] > 1 else samples[:, 0]
    # x * 32768 inverts soundfile's int16 -> float scaling exactly, so int16 files round-trip.
    pcm = np.clip(np.rint(mono * 32768.0), -32768, 32767).astype("<i2")
    return pcm, int(rate)


def audio_fingerprint(wav_or_audio_file_bytes: bytes) -> str:
    """sha256 hex of the decoded samples as int16 little-endian mono PCM."""
    pcm, _ = decode_int16_mono(wav_or_audio_file_bytes)
    return hashlib.sha256(pcm.tobytes()).hexdigest()


def audio_info(data: bytes) -> tuple[str, float]:
    """Fingerprint and duration in seconds, decoding once."""
    pcm, rate = decode_int16_mono(data)
    return hashlib.sha256(pcm.tobytes()).hexdigest(), (len(pcm) / rate if rate else 0.0)

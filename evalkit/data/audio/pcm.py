"""A sample's audio as 16 kHz mono int16 PCM, cut into WAV pieces once for every model.

Audio is decoded once per sample and every model slices its own chunks from
those bytes: chunking and truncation are a byte slice plus a WAV header, with
no second decode. All functions here are blocking: the engine runs them in
audio worker processes (:mod:`evalkit.data.audio.workers`), or in a thread
when the audio is already 16 kHz mono 16-bit (:mod:`evalkit.data.audio.direct`).
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from evalkit.data.sample import Audio
from evalkit.util.b64 import b64_bytes

SAMPLE_RATE = 16000
_BYTES_PER_SECOND = SAMPLE_RATE * 2
#: the canonical header's length: a WAV made here is these bytes, then its PCM
WAV_HEADER_BYTES = 44

#: how a model wants its audio cut: (chunk_size seconds or None, "chunk" | "truncate")
Shape = tuple[float | None, str]

#: "wav" for transcription uploads, "b64" for chat input_audio parts
ALL_ENCODINGS = frozenset({"wav", "b64"})


@dataclass(slots=True)
class AudioPart:
    """One piece of audio for requests: its content hash, and the encodings the models need.

    ``wav`` feeds transcription uploads, ``b64`` (base64 of the WAV, ASCII
    bytes that a chat body takes as they are) chat ``input_audio`` parts.
    Both are made off the event loop, where the audio is cut (base64 of a
    10 s clip on the loop measurably delays other requests); a piece keeps
    only the encodings some model of the engine uses.
    """

    wav: bytes | None
    sha256: str
    b64: bytes | None = None

    @classmethod
    def from_wav(cls, wav: bytes) -> AudioPart:
        return cls(wav=wav, sha256=hashlib.sha256(wav).hexdigest())

    def encode(self, encodings: frozenset[str]) -> None:
        """Keep only ``encodings`` ("wav", "b64"), making the base64 if asked for."""
        if "b64" in encodings and self.b64 is None and self.wav is not None:
            self.b64 = b64_bytes(self.wav)
        if "wav" not in encodings and self.b64 is not None:
            self.wav = None

    @property
    def b64_data(self) -> bytes:
        """The base64 of the WAV as ASCII bytes (made on first use where the piece was not built with it)."""
        if self.b64 is None:
            assert self.wav is not None
            self.b64 = b64_bytes(self.wav)
        return self.b64

    @property
    def base64(self) -> str:
        return self.b64_data.decode("ascii")


def pcm16_of(audio: Audio) -> bytes:
    """Decode any supported audio to 16 kHz mono little-endian int16 PCM (blocking; run in a thread)."""
    import numpy as np

    from evalkit.data.audio import decode as audio_codec  # numpy, soundfile, soxr: in the audio workers only

    array = audio_codec.load_16k_mono(audio)
    # x * 32768 inverts soundfile's int16 -> float scaling exactly, so 16-bit sources pass losslessly
    return np.clip(np.rint(array * 32768.0), -32768, 32767).astype("<i2").tobytes()


def wav_header(pcm_bytes: int) -> bytes:
    """The 44-byte header of a 16 kHz mono 16-bit PCM WAV whose data chunk holds ``pcm_bytes`` bytes."""
    header = b"RIFF" + struct.pack("<I", 36 + pcm_bytes) + b"WAVE"
    header += b"fmt " + struct.pack("<IHHIIHH", 16, 1, 1, SAMPLE_RATE, _BYTES_PER_SECOND, 2, 16)
    return header + b"data" + struct.pack("<I", pcm_bytes)


def wav_from_pcm16(pcm: bytes | memoryview) -> bytes:
    return wav_header(len(pcm)) + pcm


def piece_bounds(n_bytes: int, chunk_size: float | None, mode: str) -> list[tuple[int, int]]:
    """Byte ranges of the pieces of ``n_bytes`` of PCM cut at ``chunk_size`` seconds (``chunk`` or ``truncate``).

    A chunk is ``round(chunk_size * 16000)`` samples (at least one), so every
    piece but the last is exactly that long and the pieces cover the audio once.
    """
    if not chunk_size:
        return [(0, n_bytes)]
    step = max(1, round(chunk_size * SAMPLE_RATE)) * 2
    if n_bytes <= step:
        return [(0, n_bytes)]
    if mode == "truncate":
        return [(0, step)]
    return [(i, min(i + step, n_bytes)) for i in range(0, n_bytes, step)]


class PreparedAudio:
    """A sample's audio, decoded once, and its WAV pieces per shape, shared by every model.

    Keys are turn indexes (0, 1, ...) and in-context examples (:func:`example_key`,
    negative). :meth:`build` makes all the pieces the engine's models need off
    the loop (WAV header, copy and sha256 are CPU work) and then lets the raw
    PCM go, so a sample in flight holds its audio once, not twice; a piece
    that two shapes share (a clip shorter than both chunk sizes) is one object.
    Audio that arrives as a canonical WAV (:meth:`from_wavs`) is its own
    whole piece: no second copy of a 10 s clip is made to put a header on it.
    """

    __slots__ = ("pcm_by_turn", "seconds", "_parts", "_pieces", "_wavs")

    def __init__(self, pcm_by_turn: Mapping[int, bytes | memoryview]) -> None:
        self.pcm_by_turn: dict[int, bytes | memoryview] = dict(pcm_by_turn)
        self.seconds = {key: len(pcm) / _BYTES_PER_SECOND for key, pcm in self.pcm_by_turn.items()}
        self._parts: dict[tuple[int, float | None, str], list[AudioPart]] = {}
        self._pieces: dict[tuple[int, int, int], AudioPart] = {}
        #: the canonical WAV (:func:`wav_header` + PCM) a key's PCM lies in, where the audio came as one
        self._wavs: dict[int, bytes] = {}

    @classmethod
    def from_wavs(cls, wav_by_turn: dict[int, bytes]) -> PreparedAudio:
        """Audio given as canonical WAVs (each :func:`wav_header` of its PCM, then the PCM), used as they are."""
        prepared = cls({key: memoryview(wav)[WAV_HEADER_BYTES:] for key, wav in wav_by_turn.items()})
        prepared._wavs = dict(wav_by_turn)
        return prepared

    def __contains__(self, key: object) -> bool:
        return key in self.seconds

    def parts(self, key: int, chunk_size: float | None, mode: str) -> list[AudioPart]:
        """The WAV pieces of ``key`` cut to ``(chunk_size, mode)``; examples are always truncated."""
        if key < 0:
            mode = "truncate"
        cache_key = (key, chunk_size, mode)
        found = self._parts.get(cache_key)
        if found is None:
            if key not in self.pcm_by_turn:
                raise KeyError(f"audio {key} was not prepared for chunk_size={chunk_size}, {mode}")
            pcm = self.pcm_by_turn[key]
            found = []
            for start, stop in piece_bounds(len(pcm), chunk_size, mode):
                piece = self._pieces.get((key, start, stop))
                if piece is None:
                    whole = self._wavs.get(key) if (start, stop) == (0, len(pcm)) else None
                    wav = whole if whole is not None else wav_from_pcm16(pcm[start:stop])
                    piece = self._pieces[(key, start, stop)] = AudioPart.from_wav(wav)
                found.append(piece)
            self._parts[cache_key] = found
        return found

    def build(
        self, shapes: Iterable[Shape], release_pcm: bool = True, encodings: frozenset[str] = ALL_ENCODINGS
    ) -> PreparedAudio:
        """Make every piece ``shapes`` need, in ``encodings`` (blocking: run it off the loop); then drop the PCM."""
        wanted = list(dict.fromkeys(shapes))
        for key in list(self.pcm_by_turn):
            for chunk_size, mode in wanted:
                for part in self.parts(key, chunk_size, mode):
                    part.encode(encodings)
        if release_pcm:
            self.pcm_by_turn = {}
            self._pieces = {}
            self._wavs = {}
        return self

    def adopt(self, key: int, other: PreparedAudio, other_key: int) -> None:
        """Use ``other``'s audio under ``key``: an in-context example's pieces, made once per engine."""
        self.seconds[key] = other.seconds[other_key]
        if other_key in other.pcm_by_turn:
            self.pcm_by_turn[key] = other.pcm_by_turn[other_key]
            if other_key in other._wavs:
                self._wavs[key] = other._wavs[other_key]
        for (source, chunk_size, mode), parts in other._parts.items():
            if source == other_key:
                self._parts[(key, chunk_size, mode)] = parts


def example_key(index: int) -> int:
    """PreparedAudio key of the audio of in-context example ``index`` (turns use 0, 1, ...)."""
    return -(index + 1)


def prepare_turn_audio(
    audio_by_turn: dict[int, Audio], shapes: list[Shape], encodings: frozenset[str] = ALL_ENCODINGS
) -> PreparedAudio:
    """Decode a sample's audio once and cut it for every shape (blocking: what a worker process runs).

    Raises ValueError/OSError/RuntimeError (AudioDecodeError is a ValueError)
    when the audio cannot be read; the engine records that sample as failed.
    """
    return PreparedAudio({index: pcm16_of(audio) for index, audio in audio_by_turn.items()}).build(
        shapes, encodings=encodings
    )


def prepare_example_audio(
    audio: Audio, shapes: Iterable[Shape], encodings: frozenset[str] = ALL_ENCODINGS
) -> PreparedAudio:
    """An in-context example's audio, truncated for every chunk size (key -1); blocking."""
    return PreparedAudio({-1: pcm16_of(audio)}).build(
        [(chunk_size, "truncate") for chunk_size, _ in shapes], encodings=encodings
    )

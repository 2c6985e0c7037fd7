"""A robustness variant's audio: decoded, corrupted whole, then cut for every model (what a worker process runs).

The clean clip is the PCM the clean pair sends (:func:`evalkit.data.audio.direct.direct_pcm16`, else
:func:`evalkit.data.audio.pcm.pcm16_of`); the corrupted PCM is cut and encoded like any clip, so chat and
transcription requests, and every chunk of a long clip, carry the same corrupted audio. Each clip's sent
reference gains a ``corruption`` object (:func:`evalkit.data.audio.corrupt.note`), from which
:func:`remake_audio` makes the exact WAV again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Any

from evalkit.data.audio.corrupt import BABBLE_TALKERS, AudioCorruption, Talker, corrupt_pcm, note
from evalkit.data.audio.direct import direct_pcm16
from evalkit.data.audio.pcm import ALL_ENCODINGS, PreparedAudio, Shape, pcm16_of, wav_from_pcm16
from evalkit.data.sample import Audio

__all__ = ["CorruptedAudio", "corrupt_example_audio", "corrupt_turn_audio", "corrupted_pcm", "remake_audio"]


class CorruptedAudio(PreparedAudio):
    """Prepared audio whose clips were corrupted: :attr:`notes` says how, per audio key, for the sent entry."""

    __slots__ = ("notes",)

    def __init__(self, pcm_by_turn: dict[int, bytes]) -> None:
        super().__init__(pcm_by_turn)
        self.notes: dict[int, dict[str, Any]] = {}

    def adopt(self, key: int, other: PreparedAudio, other_key: int) -> None:
        super().adopt(key, other, other_key)
        found = other.notes.get(other_key) if isinstance(other, CorruptedAudio) else None
        if found is not None:
            self.notes[key] = found


def _pcm(audio: Audio) -> bytes:
    found = direct_pcm16(audio)
    return found if found is not None else pcm16_of(audio)


def _talkers(talkers: Sequence[Talker]) -> list[bytes]:
    out = []
    for talker in talkers:
        try:
            out.append(_pcm(talker.audio))
        except (ValueError, OSError, RuntimeError) as error:
            raise ValueError(f"babble: cannot decode the audio of sample {talker.sample_id}: {error}") from None
    return out


def corrupted_pcm(audio: Audio, corruption: AudioCorruption, place: int, talkers: list[bytes] | None = None) -> bytes:
    """The corrupted 16 kHz mono int16 PCM of one clip (blocking)."""
    if corruption.talkers and talkers is None:
        talkers = _talkers(corruption.talkers)
    return corrupt_pcm(_pcm(audio), corruption, place, talkers)


def _prepare(
    audio_by_key: dict[int, Audio],
    corruption: AudioCorruption,
    shapes: Iterable[Shape],
    encodings: frozenset[str],
) -> CorruptedAudio:
    talkers = _talkers(corruption.talkers) if corruption.talkers else None
    pcm_by_key = {key: corrupted_pcm(audio, corruption, key, talkers) for key, audio in audio_by_key.items()}
    prepared = CorruptedAudio(pcm_by_key)
    for key, pcm in pcm_by_key.items():
        prepared.notes[key] = note(corruption, key, wav_from_pcm16(pcm))
    prepared.build(shapes, encodings=encodings)
    return prepared


def corrupt_turn_audio(
    audio_by_turn: dict[int, Audio],
    shapes: list[Shape],
    encodings: frozenset[str] = ALL_ENCODINGS,
    corruption: AudioCorruption | None = None,
) -> CorruptedAudio:
    """:func:`~evalkit.data.audio.pcm.prepare_turn_audio` with every clip corrupted first (blocking)."""
    assert corruption is not None
    return _prepare(audio_by_turn, corruption, shapes, encodings)


def corrupt_example_audio(
    audio: Audio,
    shapes: Iterable[Shape],
    encodings: frozenset[str] = ALL_ENCODINGS,
    corruption: AudioCorruption | None = None,
) -> CorruptedAudio:
    """An in-context example's clip corrupted (seeded by its own id), truncated for every chunk size (key -1)."""
    assert corruption is not None
    return _prepare({-1: audio}, corruption, [(chunk_size, "truncate") for chunk_size, _ in shapes], encodings)


def remake_audio(source: Audio, reference: dict[str, Any], talkers: Sequence[Audio] = ()) -> bytes:
    """The whole corrupted clip a robustness variant sent, as WAV, made again from its source and reference.

    ``reference`` is the ``corruption`` object of an audio reference in a sent entry (name, severity, seed,
    place, sha256, and babble's ``talkers``); ``talkers`` are those clips' audio, in that order. ValueError when
    the result is not the clip that was sent (another source, another libsndfile), so nothing shows a
    look-alike as what the model heard.
    """
    named = reference.get("talkers") or []
    if not isinstance(named, list) or len(named) > BABBLE_TALKERS:  # a sent entry is read from a run folder
        raise ValueError(f"babble mixes at most {BABBLE_TALKERS} other clips")
    if len(talkers) != len(named):
        raise ValueError(f"the clip mixed {len(named)} other clips; {len(talkers)} were given")
    corruption = AudioCorruption(
        str(reference["name"]),
        int(str(reference["severity"])),
        int(str(reference["seed"])),
        tuple(Talker(str(t.get("sample_id", "")), audio) for t, audio in zip(named, talkers)),
    )
    pcm = corrupted_pcm(source, corruption, int(str(reference.get("place") or 0)))
    wav = wav_from_pcm16(pcm)
    if reference.get("sha256") and hashlib.sha256(wav).hexdigest() != reference["sha256"]:
        raise ValueError("the remade clip differs from the one sent (sha256 mismatch)")
    return wav

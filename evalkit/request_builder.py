"""Prompt + prepared audio -> concrete requests for one model.

Audio is decoded once per sample (16 kHz mono int16 PCM) and every model
slices its own chunks from those bytes: chunking and truncation are a byte
slice plus a WAV header, with no second decode.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from evalkit.clients.request import AudioPart, ModelRequest
from evalkit.data import audio as audio_codec
from evalkit.data.sample import Audio
from evalkit.prompts.prompt import Prompt

SAMPLE_RATE = 16000
_BYTES_PER_SECOND = SAMPLE_RATE * 2


def pcm16_of(audio: Audio) -> bytes:
    """Decode any supported audio to 16 kHz mono little-endian int16 PCM (blocking; run in a thread)."""
    import numpy as np

    array = audio_codec.load_16k_mono(audio)
    # x * 32768 inverts soundfile's int16 -> float scaling exactly, so 16-bit sources pass losslessly
    return np.clip(np.rint(array * 32768.0), -32768, 32767).astype("<i2").tobytes()


def wav_from_pcm16(pcm: bytes) -> bytes:
    header = b"RIFF" + struct.pack("<I", 36 + len(pcm)) + b"WAVE"
    header += b"fmt " + struct.pack("<IHHIIHH", 16, 1, 1, SAMPLE_RATE, _BYTES_PER_SECOND, 2, 16)
    header += b"data" + struct.pack("<I", len(pcm))
    return header + pcm


def audio_pieces(pcm: bytes, chunk_size: float | None, mode: str) -> list[bytes]:
    """Split (``chunk``) or cut (``truncate``) PCM at ``chunk_size`` seconds; whole audio when None."""
    if not chunk_size or len(pcm) <= chunk_size * _BYTES_PER_SECOND:
        return [pcm]
    step = int(chunk_size * SAMPLE_RATE) * 2
    if mode == "truncate":
        return [pcm[:step]]
    return [pcm[i : i + step] for i in range(0, len(pcm), step)]


@dataclass(slots=True)
class RequestContext:
    """What one model needs to turn a prompt into requests."""

    model: str
    kind: str  # "chat" | "transcription"
    params: dict[str, Any]
    chunk_size: float | None
    long_audio: str
    language: str | None
    #: the model's system prompt when it differs from the prompt's default
    system: str | None = None


class PreparedAudio:
    """A sample's PCM per turn, with the WAV pieces cached per (chunk_size, mode) across models."""

    def __init__(self, pcm_by_turn: dict[int, bytes]) -> None:
        self.pcm_by_turn = pcm_by_turn
        self._parts: dict[tuple[int, float | None, str], list[AudioPart]] = {}

    def parts(self, turn: int, chunk_size: float | None, mode: str) -> list[AudioPart]:
        key = (turn, chunk_size, mode)
        if key not in self._parts:
            pcm = self.pcm_by_turn[turn]
            self._parts[key] = [AudioPart.from_wav(wav_from_pcm16(piece)) for piece in audio_pieces(pcm, chunk_size, mode)]
        return self._parts[key]


def example_key(index: int) -> int:
    """PreparedAudio key of the audio of in-context example ``index`` (turns use 0, 1, ...)."""
    return -(index + 1)


def turn_requests(
    prompt: Prompt,
    turn: int,
    history: list[dict[str, Any]],
    history_audio: list[AudioPart],
    audio: PreparedAudio,
    ctx: RequestContext,
    repeat: int = 0,
) -> list[ModelRequest]:
    """The requests for one user turn: one per audio chunk (one when there is no audio).

    ``history`` holds earlier turns (user messages whose audio parts index into
    ``history_audio``, and the model's answers), so each sample carries its own
    conversation and nothing is shared between samples.
    """
    current = prompt.turns[turn]
    has_audio = turn in audio.pcm_by_turn
    pieces = audio.parts(turn, ctx.chunk_size, ctx.long_audio) if has_audio else [None]
    if ctx.kind == "transcription":
        return [
            ModelRequest(kind="transcription", model=ctx.model, audio=[piece], params=ctx.params, language=ctx.language, repeat=repeat)
            for piece in pieces
            if piece is not None
        ]
    prefix: list[dict[str, Any]] = []
    system = ctx.system if ctx.system is not None else prompt.system
    if system:
        prefix.append({"role": "system", "content": system})
    example_audio: list[AudioPart] = []
    for index, (example, answer) in enumerate(prompt.examples):
        key = example_key(index)
        if key in audio.pcm_by_turn:
            example_piece = audio.parts(key, ctx.chunk_size, "truncate")[0]
            content_ex: Any = ([{"type": "text", "text": example.text}] if example.text else []) + [
                {"type": "input_audio", "input_audio": {"audio_index": len(example_audio)}}
            ]
            example_audio.append(example_piece)
        else:
            content_ex = example.text or ""
        prefix += [{"role": "user", "content": content_ex}, {"role": "assistant", "content": answer}]
    history_audio = [*example_audio, *history_audio]
    requests = []
    for piece in pieces:
        if piece is None:
            content: Any = current.text or ""
            parts = list(history_audio)
        else:
            content = ([{"type": "text", "text": current.text}] if current.text else []) + [
                {"type": "input_audio", "input_audio": {"audio_index": len(history_audio)}}
            ]
            parts = [*history_audio, piece]
        messages = prefix + history + [{"role": "user", "content": content}]
        requests.append(ModelRequest(kind="chat", model=ctx.model, messages=messages, audio=parts, params=ctx.params, repeat=repeat))
    return requests

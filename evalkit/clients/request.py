"""The model-ready request and the key that identifies its answer.

The key lists exactly what determines a response: the model identity, the
messages (audio by content hash), the generation parameters and the repeat
index. It never includes the URL, concurrency, timeouts or retry settings,
so the store answers a request regardless of which replica or run sent it.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass, field
from typing import Any, Literal

from evalkit.jsonutil import dumps_bytes

RequestKind = Literal["chat", "transcription"]


@dataclass(slots=True)
class AudioPart:
    """One piece of audio for requests: its content hash, and the encodings the models need.

    ``wav`` feeds transcription uploads, ``b64`` (base64 of the WAV) chat
    ``input_audio`` parts. Both are made off the event loop, where the audio
    is cut (base64 of a 10 s clip on the loop measurably delays other
    requests); a piece keeps only the encodings some model of the engine uses.
    """

    wav: bytes | None
    sha256: str
    b64: str | None = None

    @classmethod
    def from_wav(cls, wav: bytes) -> AudioPart:
        return cls(wav=wav, sha256=hashlib.sha256(wav).hexdigest())

    def encode(self, encodings: frozenset[str]) -> None:
        """Keep only ``encodings`` ("wav", "b64"), making the base64 text if asked for."""
        if "b64" in encodings and self.b64 is None and self.wav is not None:
            self.b64 = base64.b64encode(self.wav).decode("ascii")
        if "wav" not in encodings and self.b64 is not None:
            self.wav = None

    @property
    def base64(self) -> str:
        if self.b64 is None:
            assert self.wav is not None
            self.b64 = base64.b64encode(self.wav).decode("ascii")
        return self.b64


@dataclass(slots=True)
class ModelRequest:
    """One request to one model.

    ``messages`` are OpenAI chat messages in which audio appears as
    ``{"type": "input_audio", "input_audio": {"audio_index": i}}``; the client
    substitutes ``audio[i]`` as base64 WAV when it writes the body. For
    transcriptions ``audio[0]`` is the file and ``prompt``/``language`` the form.
    """

    kind: RequestKind
    model: str
    messages: list[dict[str, Any]] = field(default_factory=list)
    audio: list[AudioPart] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    prompt: str | None = None
    language: str | None = None
    repeat: int = 0
    _key: str | None = None

    @property
    def key(self) -> str:
        if self._key is None:
            view = {
                "kind": self.kind,
                "model": self.model,
                "messages": self.messages,
                "audio": [a.sha256 for a in self.audio],
                "params": self.params,
                "prompt": self.prompt,
                "language": self.language,
                "repeat": self.repeat,
            }
            self._key = hashlib.sha256(dumps_bytes(view, sort_keys=True)).hexdigest()
        return self._key

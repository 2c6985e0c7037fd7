"""The model-ready request and the key that identifies its answer.

The key lists exactly what determines a response: the model identity, the
messages (audio by content hash, images by content hash and, when one was
downsized, the size and limits it was re-encoded under), the generation
parameters, the repeat index and, where given, the instance it answers. It
never includes the URL, concurrency, timeouts or retry settings, so the store
answers a request regardless of which replica or run sent it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from evalkit.config import RequestKind
from evalkit.data.audio.pcm import AudioPart
from evalkit.data.image.prepare import ImagePart
from evalkit.util.jsonutil import dumps_bytes


@dataclass(slots=True)
class ModelRequest:
    """One request to one model.

    ``messages`` are OpenAI chat messages in which audio appears as
    ``{"type": "input_audio", "input_audio": {"audio_index": i}}``; the client
    substitutes ``audio[i]`` as base64 WAV when it writes the body; images
    appear as ``{"type": "image_url", "image_url": {"image_index": i}}`` and
    become ``images[i]``'s data URI. For transcriptions ``audio[0]`` is the
    file and ``prompt``/``language`` the form.
    """

    kind: RequestKind
    model: str
    messages: list[dict[str, Any]] = field(default_factory=list)
    audio: list[AudioPart] = field(default_factory=list)
    images: list[ImagePart] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    prompt: str | None = None
    language: str | None = None
    repeat: int = 0
    #: what else tells this request from an identical one, so each is asked on its own and stored under its own
    #: key (a judge that AU-Harness asks once per answer at a sampling temperature); None: identical is the same
    instance: str | None = None
    #: a transcription form of the file and the model only (AU-Harness's; KARMA's adds the prompt), without evalkit's
    #: response_format, language and temperature
    bare_form: bool = False
    _key: str | None = None

    @property
    def key(self) -> str:
        if self._key is None:
            view = {
                "kind": self.kind,
                "model": self.model,
                "messages": self.messages,
                "audio": [a.sha256 for a in self.audio] if self.audio else [],
                "params": self.params,
                "prompt": self.prompt,
                "language": self.language,
                "repeat": self.repeat,
            }
            if self.images:  # absent without images, so keys of text and audio requests stay what they were
                view["images"] = [image.identity for image in self.images]
            if self.instance is not None:  # absent otherwise, for the same reason
                view["instance"] = self.instance
            if self.bare_form:  # likewise absent unless set
                view["bare_form"] = True
            self._key = hashlib.sha256(dumps_bytes(view, sort_keys=True)).hexdigest()
        return self._key

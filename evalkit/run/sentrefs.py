"""What one model was sent for one sample, as the sent log stores it: messages with media replaced by references.

The messages are read back from the requests that went out (never rebuilt
from the prompt), so what is stored is what was sent: the system prompt,
in-context examples as user/assistant turns, a dataset-given conversation,
earlier turns with the model's own answers, and the last user turn. A part
that carried audio becomes an :func:`AudioRef <MediaRefs.audio_ref>` (where
the audio came from, the seconds sent, the sha256 of the WAV sent; the
source file is never read or hashed for this) and an image part becomes the
reference records already carry (path or name, sha256, format, size), plus the
dataset row it came from when it has no path of its own.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from evalkit.catalog import DatasetSpec, resolve_runspec_path
from evalkit.clients.request import ModelRequest
from evalkit.config import RequestKind
from evalkit.data.audio.pcm import SAMPLE_RATE, AudioPart, PreparedAudio, piece_bounds
from evalkit.data.image.prepare import ImagePart, PreparedImages
from evalkit.data.sample import Audio, Sample
from evalkit.prompts.prompt import Prompt
from evalkit.run.requests import RequestContext

_BYTES_PER_SECOND = SAMPLE_RATE * 2


@dataclass(frozen=True, slots=True)
class RowSource:
    """Where a dataset's rows are read from: a hub split, or a local file or folder."""

    hub: dict[str, Any] | None = None
    file: str | None = None

    def of(self, row: Any, column: str | None, item: int | None = None) -> dict[str, Any]:
        """``{"hub": {...}}`` or ``{"file": {...}}`` naming one cell of one row."""
        where: dict[str, Any] = {"row": row if isinstance(row, int) else None, "column": column}
        if item is not None:
            where["item"] = item
        if self.hub is not None:
            return {"hub": {**self.hub, **where}}
        return {"file": {"path": self.file, **where}}


@dataclass(frozen=True, slots=True)
class Sources:
    """The row sources of an engine's dataset: its samples' and its in-context examples' (another split or file)."""

    spec: DatasetSpec
    samples: RowSource
    examples: RowSource

    @classmethod
    def of(cls, spec: DatasetSpec) -> Sources:
        """Computed once per engine: resolving a local path touches the file system."""
        examples = spec.in_context or {}
        if spec.hf_repo is not None:
            hub = {"repo": spec.hf_repo, "config": spec.subset, "split": spec.split, "revision": spec.revision}
            samples = RowSource(hub=hub)
            pool = RowSource(hub={**hub, "split": examples.get("split", spec.split)})
        else:
            samples = RowSource(file=_absolute(spec.source))
            pool = samples
        if "path" in examples:
            pool = RowSource(file=_absolute(str(resolve_runspec_path(spec.file, str(examples["path"])))))
        return cls(spec, samples, pool)

    def clip_of(self, sample: Sample) -> dict[str, Any]:
        """Where a sample's own clip came from, as a sent entry names it: its file, else its dataset cell."""
        own = _own_file(sample.audio)
        return {"path": own} if own is not None else self.samples.of(sample.meta.get("index"), self.spec.audio_column)


def _absolute(path: str) -> str:
    return path if path.startswith("pkg://") else os.path.abspath(path)


def _own_file(audio: Audio | None) -> str | None:
    """The audio's own file, when the dataset names one and holds no bytes of it."""
    if audio is not None and audio.path is not None and audio.data is None and audio.array is None:
        return _absolute(audio.path)
    return None


class MediaRefs:
    """References to one sample's media as one model was sent them (built per sample and model view)."""

    __slots__ = ("_sources", "_sample", "_prompt", "_examples", "_prepared", "_ctx", "_pieces", "_images")

    def __init__(
        self,
        sources: Sources,
        sample: Sample,
        prompt: Prompt,
        examples: list[Sample],
        prepared: PreparedAudio,
        images: PreparedImages,
        ctx: RequestContext,
    ) -> None:
        self._sources = sources
        self._sample = sample
        self._prompt = prompt
        self._examples = examples
        self._prepared = prepared
        self._ctx = ctx
        self._pieces: dict[int, tuple[int, float, float]] | None = None
        self._images: dict[int, dict[str, Any]] | None = None
        self._images_from(images)

    # -- audio ----------------------------------------------------------------------------------------

    def _piece_index(self) -> dict[int, tuple[int, float, float]]:
        """id(piece) -> (audio key, start, end seconds) for every piece this model's shape cut."""
        if self._pieces is None:
            self._pieces = {}
            chunk_size, mode = self._ctx.shape
            for key, seconds in self._prepared.seconds.items():
                cut = "truncate" if key < 0 else mode
                parts = self._prepared.parts(key, chunk_size, cut)
                bounds = piece_bounds(round(seconds * _BYTES_PER_SECOND), chunk_size, cut)
                for part, (start, stop) in zip(parts, bounds):
                    self._pieces[id(part)] = (key, start / _BYTES_PER_SECOND, stop / _BYTES_PER_SECOND)
        return self._pieces

    def _audio_source(self, key: int) -> dict[str, Any]:
        spec = self._sources.spec
        if key >= 0:
            audio = self._prompt.turns[key].audio if key < len(self._prompt.turns) else None
            own = _own_file(audio)
            if own is not None:
                return {"path": own}
            turns = self._sample.turns
            column = spec.audio_column
            if turns:
                given = turns[key].audio_column if key < len(turns) else None
                column = given or f"{spec.turns_column}[{key}].audio"
            return self._sources.samples.of(self._sample.meta.get("index"), column)
        index = -key - 1
        example = self._examples[index] if index < len(self._examples) else None
        turn_audio = self._prompt.examples[index][0].audio if index < len(self._prompt.examples) else None
        own = _own_file(turn_audio)
        if own is not None:
            return {"path": own}
        ref = self._sources.examples.of(example.meta.get("index") if example else None, spec.audio_column)
        if example is not None:
            ref["sample_id"] = example.id
        return ref

    def audio_ref(self, pieces: list[AudioPart]) -> dict[str, Any]:
        """One audio part as sent: its source, the seconds sent; ``chunks`` when it went as several requests."""
        index = self._piece_index()
        found = [index.get(id(piece)) for piece in pieces]
        first, last = found[0], found[-1]
        if first is None or last is None:  # not a piece of this sample (cannot happen): say what is known
            return {"sha256": pieces[0].sha256, "sample_rate": SAMPLE_RATE}
        key = first[0]
        ref = self._audio_source(key)
        ref.update(start=round(first[1], 6), end=round(last[2], 6))
        ref["duration"] = round(self._prepared.seconds.get(key, last[2]), 6)
        if len(pieces) == 1:
            ref["sha256"] = pieces[0].sha256
        else:
            ref["chunks"] = [[round(f[1], 6), round(f[2], 6)] if f else None for f in found]
            ref["chunk_sha256"] = [piece.sha256 for piece in pieces]
        ref["sample_rate"] = SAMPLE_RATE
        corrupted = getattr(self._prepared, "notes", None)  # a robustness variant's clip: how it was corrupted
        if corrupted and key in corrupted:
            ref["corruption"] = corrupted[key]
        return ref

    # -- images ---------------------------------------------------------------------------------------

    def _images_from(self, images: PreparedImages) -> None:
        """id(image part) -> its reference, for the sample's turns and examples at this model's limit."""
        limit = self._ctx.image_limit
        keys = [*range(len(self._prompt.turns)), *(-(i + 1) for i in range(len(self._prompt.examples)))]
        for key in keys:
            parts = images.parts(key, limit)
            if not parts:
                continue
            if self._images is None:
                self._images = {}
            for item, part in enumerate(parts):
                self._images[id(part)] = self._image_ref(part, key, item)

    def _image_ref(self, part: ImagePart, key: int, item: int) -> dict[str, Any]:
        ref = dict(part.ref)
        if "path" in ref:
            ref["path"] = _absolute(str(ref["path"]))
            return ref
        column = self._sources.spec.image_column
        if key >= 0:
            ref.update(self._sources.samples.of(self._sample.meta.get("index"), column, item))
        else:
            index = -key - 1
            example = self._examples[index] if index < len(self._examples) else None
            ref.update(self._sources.examples.of(example.meta.get("index") if example else None, column, item))
        return ref

    def image_ref(self, part: ImagePart) -> dict[str, Any]:
        found = self._images.get(id(part)) if self._images is not None else None
        return found if found is not None else dict(part.ref)


def chat_messages(requests: list[ModelRequest], refs: MediaRefs | None) -> list[dict[str, Any]]:
    """The messages of one user turn's requests, media as references; one turn's chunks as one audio part."""
    first = requests[0]
    chunked = len(first.audio) - 1 if len(requests) > 1 else -1
    out = []
    for message in first.messages:
        content = message.get("content")
        if isinstance(content, str) or content is None:
            parts: list[dict[str, Any]] = [{"type": "text", "text": content or ""}]
        else:
            parts = [_part(part, requests, chunked, refs) for part in content]
        out.append({"role": message.get("role"), "content": parts})
    return out


def _part(part: dict[str, Any], requests: list[ModelRequest], chunked: int, refs: MediaRefs | None) -> dict[str, Any]:
    kind = part.get("type")
    if kind == "input_audio" and refs is not None:
        index = part["input_audio"]["audio_index"]
        pieces = [r.audio[index] for r in requests] if index == chunked else [requests[0].audio[index]]
        return {"type": "audio", "audio": refs.audio_ref(pieces)}
    if kind == "image_url" and refs is not None:
        image = requests[0].images[part["image_url"]["image_index"]]
        return {"type": "image", "image": refs.image_ref(image)}
    if kind == "text":
        return {"type": "text", "text": part.get("text") or ""}
    return {"type": str(kind)}  # a part evalkit does not make: named, never its data


def transcription_messages(turns: list[list[ModelRequest]], refs: MediaRefs | None) -> list[dict[str, Any]]:
    """One user message per turn: the audio (its chunks as one part) and the prompt and language when sent."""
    out = []
    for requests in turns:
        first = requests[0]
        content: list[dict[str, Any]] = []
        if refs is not None:
            content.append({"type": "audio", "audio": refs.audio_ref([r.audio[0] for r in requests])})
        if first.prompt:
            content.append({"type": "text", "text": first.prompt})
        if first.language:
            content.append({"type": "text", "text": f"language: {first.language}"})
        out.append({"role": "user", "content": content})
    return out


def sent_messages(kind: RequestKind, turns: list[list[ModelRequest]], refs: MediaRefs | None) -> list[dict[str, Any]]:
    """What a model was sent over a conversation: the last turn's chat messages hold every earlier turn."""
    if kind == RequestKind.TRANSCRIPTION:
        return transcription_messages(turns, refs)
    return chat_messages(turns[-1], refs)


def completion_messages(context: str) -> list[dict[str, Any]]:
    """A likelihood prompt: the text every option continues (the options are the sample's choices)."""
    return [{"role": "user", "content": [{"type": "text", "text": context}]}]

"""A sample's audio and images made ready for every model of an engine, once, off the event loop.

The audio is decoded and cut for every model's shape once, in an audio worker process
(:func:`evalkit.data.audio.workers.run_media_job`), and shared by all models; its images are read, checked
and downsized for every model's limit there too (:mod:`evalkit.data.image.prepare`). Media already in the
form sent (16 kHz mono 16-bit audio, images within every limit) is read, hashed and base64-encoded in a
thread instead, so no large result crosses a process pipe. An in-context example's audio is made once per
engine, however many samples show it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from evalkit.clients.outcome import Outcome, failed
from evalkit.data.audio.corrupt import AudioCorruption
from evalkit.data.audio.corrupted import corrupt_example_audio, corrupt_turn_audio
from evalkit.data.audio.direct import prepare_example_audio_direct, prepare_turn_audio_direct
from evalkit.data.audio.pcm import (
    PreparedAudio,
    Shape,
    example_key,
    prepare_example_audio,
    prepare_turn_audio,
)
from evalkit.data.audio.workers import run_audio_job, run_media_job
from evalkit.data.image.corrupt import ImageCorruption
from evalkit.data.image.prepare import ImageLimit, PreparedImages, prepare_images, prepare_images_as_is
from evalkit.data.sample import Sample
from evalkit.failures import FailureReason
from evalkit.prompts.prompt import Prompt

#: a sample's audio and images, made ready for every model of the engine
Prepared = tuple[PreparedAudio, PreparedImages]
#: the images of a sample that has none (compared by identity: such a sample's sent entry names no image)
NO_IMAGES = PreparedImages()


class MediaPreparer:
    """Makes one engine's samples' media ready: every audio shape and image limit of its models at once."""

    def __init__(self, shapes: list[Shape], encodings: frozenset[str], image_limits: list[ImageLimit]) -> None:
        self.shapes = shapes
        self.encodings = encodings
        self.image_limits = image_limits
        self._example_audio: dict[str, asyncio.Future[PreparedAudio]] = {}
        #: an audio robustness variant's corruption of a sample (examples are corrupted by their own ids)
        self.example_corruption: Callable[[Sample], Awaitable[AudioCorruption]] | None = None

    async def example(self, example: Sample) -> PreparedAudio:
        """An in-context example's audio pieces, made once per engine however many samples show it."""
        future = self._example_audio.get(example.id)
        if future is None:
            assert example.audio is not None
            future = asyncio.ensure_future(
                self._corrupted_example(example)
                if self.example_corruption is not None
                else run_media_job(
                    prepare_example_audio_direct, prepare_example_audio, example.audio, self.shapes, self.encodings
                )
            )
            self._example_audio[example.id] = future
        return await asyncio.shield(future)

    async def _corrupted_example(self, example: Sample) -> PreparedAudio:
        assert self.example_corruption is not None and example.audio is not None
        corruption = await self.example_corruption(example)
        return await run_audio_job(corrupt_example_audio, example.audio, self.shapes, self.encodings, corruption)

    async def prepare(
        self, prompt: Prompt, examples: list[Sample], corruption: ImageCorruption | AudioCorruption | None = None
    ) -> Prepared | Outcome:
        """Decode the sample's audio once and cut it for every model, and ready its images, in a worker process."""
        turns = prompt.turns
        if len(turns) == 1 and turns[0].audio is None and not turns[0].images and not prompt.examples:
            return PreparedAudio({}), NO_IMAGES  # a text prompt (most of them): nothing to decode or ready
        audio = {index: turn.audio for index, turn in enumerate(prompt.turns) if turn.audio is not None}
        try:
            if isinstance(corruption, AudioCorruption):  # a robustness variant: corrupted in the worker pool
                prepared = (
                    await run_audio_job(corrupt_turn_audio, audio, self.shapes, self.encodings, corruption)
                    if audio
                    else PreparedAudio({})
                )
                corruption = None
            else:
                prepared = (
                    await run_media_job(
                        prepare_turn_audio_direct, prepare_turn_audio, audio, self.shapes, self.encodings
                    )
                    if audio
                    else PreparedAudio({})
                )
        except (ValueError, OSError, RuntimeError) as error:
            return failed(FailureReason.AUDIO, f"could not decode audio: {error}")
        for index, ((turn, _), example) in enumerate(zip(prompt.examples, examples)):
            if turn.audio is not None:
                try:
                    prepared.adopt(example_key(index), await self.example(example), -1)
                except (ValueError, OSError, RuntimeError) as error:
                    return failed(
                        FailureReason.AUDIO, f"could not decode the audio of in-context example {example.id}: {error}"
                    )
        images = {index: turn.images for index, turn in enumerate(prompt.turns) if turn.images}
        images.update({example_key(i): turn.images for i, (turn, _) in enumerate(prompt.examples) if turn.images})
        if not images:
            return prepared, NO_IMAGES
        try:
            pictures = await run_media_job(prepare_images_as_is, prepare_images, images, self.image_limits, corruption)
        except (ValueError, OSError, RuntimeError) as error:
            return failed(FailureReason.IMAGE, f"could not read the image: {error}")
        return prepared, pictures

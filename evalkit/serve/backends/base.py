"""The contract between the HTTP server and a model backend.

The server collects concurrent requests for a few milliseconds and hands
them to the backend as one batch, in a worker thread: backends are plain
blocking code (torch, pocketsphinx) and never see the event loop.

A chat batch goes through three stages so that the model thread only runs
the model: :meth:`Backend.prepare_chat` (templating, feature extraction,
padding) and :meth:`Backend.finish_chat` (decoding) run on a preparation
thread, overlapped with the previous batch's :meth:`Backend.generate_chat` on
the model thread. A backend that does not split its work keeps the defaults,
which run all of :meth:`Backend.chat_batch` as the generate stage.
Transcription batches have the same three stages (``prepare_transcription``,
``generate_transcription``, ``finish_transcription``).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

import numpy as np


class InputError(ValueError):
    """A request this backend cannot answer (e.g. chat without audio): the server replies 400.

    Raise it from :meth:`Backend.check_chat` to refuse a request before it joins
    a batch, or put an instance in place of one answer in a ``*_batch`` result so
    one bad request does not fail the others in its batch.
    """


class Generated(str):
    """An answer that carries the model's own token counts (a str, so plain-str backends keep working).

    ``completion_tokens`` counts the generated token ids (the end-of-sequence
    token included, as vLLM counts it), ``prompt_tokens`` the ids the model
    read: the rendered chat template with its special tokens and any audio
    placeholders. The server reports these in ``usage``; for a plain str it
    falls back to :meth:`Backend.count_tokens` of the texts.
    """

    completion_tokens: int | None
    prompt_tokens: int | None

    def __new__(cls, text: str, completion_tokens: int | None = None, prompt_tokens: int | None = None) -> Generated:
        self = super().__new__(cls, text)
        self.completion_tokens = completion_tokens
        self.prompt_tokens = prompt_tokens
        return self


@dataclass(slots=True)
class GenerationParams:
    max_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None


@dataclass(slots=True)
class ChatInput:
    """One chat request: OpenAI-style messages whose audio parts are decoded.

    ``messages`` keep the OpenAI shape; every ``input_audio`` part is replaced by
    ``{"type": "audio", "array": float32 16 kHz mono np.ndarray}``.
    Every ``image_url`` part is replaced by ``{"type": "image", "image": RGB PIL.Image}``
    (see :mod:`evalkit.serve.backends.vision`).
    """

    messages: list[dict[str, Any]]
    params: GenerationParams = field(default_factory=GenerationParams)
    #: this request's own model inputs, made by :meth:`Backend.prepare_chat_item` as it arrived (or None)
    encoded: Any = None


class Backend(ABC):
    """A local model that answers batches."""

    #: the id reported by /v1/models and expected in request "model" fields
    model_id: str = "local"
    #: largest batch the server may hand over at once
    max_batch_size: int = 8
    supports_chat: bool = False
    supports_transcription: bool = False
    #: ISO 639-1 codes a transcription request may ask for; None accepts any
    languages: frozenset[str] | None = None
    #: batches the server may hand to ``generate_*`` at once: 1 for a model in the server's own thread; more for
    #: one that queues batches to a model elsewhere (a model process), whose queue then always holds the next
    pipeline_depth: int = 1
    #: reported as prompt audio tokens per second of input audio (override with the model's rate)
    audio_tokens_per_second: float = 25.0

    def check_chat(self, item: ChatInput) -> None:  # noqa: B027 - an optional hook: accepting everything is the default
        """Refuse a request early (raise InputError) so it costs no batch slot; runs on the event loop."""

    def count_tokens(self, text: str) -> int:
        """Tokens in ``text`` for the usage counts; whitespace words unless the backend has a tokenizer."""
        return len(text.split())

    def truncate(self, text: str, max_tokens: int) -> str:
        """The first ``max_tokens`` tokens of ``text`` (as :meth:`count_tokens` counts them)."""
        return " ".join(text.split()[:max_tokens])

    def count_audio_tokens(self, seconds: float) -> int:
        return math.ceil(seconds * self.audio_tokens_per_second)

    def chat_batch(self, inputs: list[ChatInput]) -> list[str]:
        """Answer a batch of chat requests, in order (an InputError instance may stand for one answer)."""
        raise NotImplementedError(f"{type(self).__name__} does not serve chat completions")

    def prepare_chat(self, inputs: list[ChatInput]) -> Any:
        """CPU work before the model, on the preparation thread; its result goes to :meth:`generate_chat`."""
        return inputs

    def prepare_chat_item(self, item: ChatInput) -> None:  # noqa: B027 - optional: the default prepares per batch
        """Preparation of one request as it arrives (on the preparation thread), kept in ``item.encoded``.

        The first batch after an idle spell has no generate to overlap its
        preparation with; what is prepared per request while the batch gathers
        is not waited for when it starts. :meth:`prepare_chat` then only joins
        (pads) the requests' inputs.
        """

    def generate_chat(self, prepared: Any) -> Any:
        """The model's part of a batch, on the model thread; its result goes to :meth:`finish_chat`."""
        return self.chat_batch(prepared)

    def finish_chat(self, generated: Any) -> list[Any]:
        """CPU work after the model (decoding), on the preparation thread: one answer per input, in order."""
        return list(generated)

    def chat_cost(self, item: ChatInput) -> float:
        """How long the prompt is, for bucketing similar requests into one batch (equal costs keep arrival order).

        The default counts what makes a batch's padding cost: the prompt's text
        (4 characters a token) and its audio tokens.
        """
        chars, seconds = 0, 0.0
        for message in item.messages:
            content = message.get("content")
            if isinstance(content, str):
                chars += len(content)
                continue
            for part in content or []:
                if isinstance(part, dict) and part.get("type") == "text":
                    chars += len(str(part.get("text", "")))
                elif isinstance(part, dict) and part.get("type") == "audio":
                    seconds += len(part["array"]) / 16_000
        return chars / 4 + (self.count_audio_tokens(seconds) if seconds else 0)

    def transcribe_batch(self, audios: list[np.ndarray], language: str | None = None) -> list[str]:
        """Transcribe a batch of 16 kHz mono float32 arrays, in order (an InputError may stand for one)."""
        raise NotImplementedError(f"{type(self).__name__} does not serve transcriptions")

    def prepare_transcription(self, audios: list[np.ndarray], language: str | None = None) -> Any:
        """CPU work before the model (feature extraction, padding), on the preparation thread.

        Like the chat stages: its result goes to :meth:`generate_transcription`, whose
        result goes to :meth:`finish_transcription`. The defaults run all of
        :meth:`transcribe_batch` as the generate stage.
        """
        return audios, language

    def generate_transcription(self, prepared: Any) -> Any:
        """The model's part of a transcription batch, on the model thread."""
        audios, language = prepared
        return self.transcribe_batch(audios, language=language)

    def finish_transcription(self, generated: Any) -> list[Any]:
        """CPU work after the model (decoding), on the preparation thread: one transcript per clip, in order."""
        return list(generated)

    def failure(self) -> str | None:
        """Why this backend can answer nothing more (e.g. its model process died), else None (GET /health)."""
        return None

    def runtime(self) -> dict[str, str]:
        """Where and in what precision the model runs (GET /_stats), so a user can see what ``auto`` chose."""
        return {}

    @abstractmethod
    def close(self) -> None:
        """Release model memory."""

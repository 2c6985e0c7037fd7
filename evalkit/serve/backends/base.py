"""The contract between the HTTP server and a model backend.

The server collects concurrent requests for a few milliseconds and hands
them to the backend as one batch, in a worker thread: backends are plain
blocking code (torch, pocketsphinx) and never see the event loop.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

import numpy as np


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
    """

    messages: list[dict[str, Any]]
    params: GenerationParams = field(default_factory=GenerationParams)


class Backend(ABC):
    """A local model that answers batches."""

    #: the id reported by /v1/models and expected in request "model" fields
    model_id: str = "local"
    #: largest batch the server may hand over at once
    max_batch_size: int = 8
    supports_chat: bool = False
    supports_transcription: bool = False

    def chat_batch(self, inputs: list[ChatInput]) -> list[str]:
        """Answer a batch of chat requests, in order."""
        raise NotImplementedError(f"{type(self).__name__} does not serve chat completions")

    def transcribe_batch(self, audios: list[np.ndarray], language: str | None = None) -> list[str]:
        """Transcribe a batch of 16 kHz mono float32 arrays, in order."""
        raise NotImplementedError(f"{type(self).__name__} does not serve transcriptions")

    @abstractmethod
    def close(self) -> None:
        """Release model memory."""

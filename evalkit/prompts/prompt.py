"""The model-independent prompt a preprocessor makes from a sample."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from evalkit.data.sample import Audio, Image


@dataclass(slots=True)
class PromptTurn:
    """One user turn: text, audio and images (audio and images are prepared per model later)."""

    text: str | None = None
    audio: Audio | None = None
    images: list[Image] = field(default_factory=list)


@dataclass(slots=True)
class Prompt:
    """What every model is asked about a sample; ``turns`` are sent in order with the history."""

    turns: list[PromptTurn]
    system: str | None = None
    #: in-context examples shown before the question: (user turn, assistant answer)
    examples: list[tuple[PromptTurn, str]] = field(default_factory=list)
    #: the dataset-given conversation before the turns ({role, content} messages, sent as they are)
    history: list[dict[str, str]] = field(default_factory=list)
    #: what shaped the prompt (template id, add-ons...), written to the record
    info: dict[str, Any] = field(default_factory=dict)
    #: functions the model may call, sent with every request as the chat API's ``tools`` (empty: none sent)
    tools: list[dict[str, Any]] = field(default_factory=list)
    #: generation settings this sample asks for in place of the dataset's (MT-Bench's temperature per category,
    #: as AU-Harness sends it); only keys the model's request already carries are replaced, none is added
    generation: dict[str, Any] = field(default_factory=dict)

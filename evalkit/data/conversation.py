"""A dataset-given conversation (``messages_column``): checked once, when the row becomes a sample.

HealthBench and other chat benchmarks keep each prompt as an OpenAI-style
list of ``{"role", "content"}`` messages whose earlier assistant turns are
part of the data, not the model's own answers, so they cannot be sent as
``turns_column`` turns. A cell is accepted when it is such a list (or the
JSON text of one, as a CSV cell holds it), every role is ``system``,
``user`` or ``assistant``, every content is a text (or a list of
``{"type": "text", "text": ...}`` parts, joined by newlines as vLLM joins
them), and the last message is the user's: that is the one the model
answers. Anything else raises :class:`ConversationError`, which fails only
that sample.
"""

from __future__ import annotations

import json
from typing import Any

ROLES = ("system", "user", "assistant")


class ConversationError(ValueError):
    """The cell is not a conversation evalkit can send (the message says which message and why)."""


def _content(value: Any, where: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value:
        texts = []
        for j, part in enumerate(value):
            if not (isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)):
                raise ConversationError(
                    f'{where}: content part {j + 1} is not a {{"type": "text", "text": ...}} part '
                    "(only text can be sent from a conversation column)"
                )
            texts.append(part["text"])
        return "\n".join(texts)
    raise ConversationError(f"{where}: content must be a text, got {type(value).__name__}")


def conversation_from_cell(value: Any) -> list[dict[str, str]]:
    """The cell's messages as ``[{"role": ..., "content": ...}]``; raises ConversationError."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise ConversationError(
                "expected a list of {role, content} messages, got a text that is not JSON"
            ) from None
    if not isinstance(value, (list, tuple)):
        raise ConversationError(f"expected a list of {{role, content}} messages, got {type(value).__name__}")
    if not value:
        raise ConversationError("the conversation is empty")
    messages = []
    for i, message in enumerate(value):
        where = f"message {i + 1} of {len(value)}"
        if not isinstance(message, dict):
            raise ConversationError(f"{where}: expected a {{role, content}} object, got {type(message).__name__}")
        role = message.get("role")
        if role not in ROLES:
            raise ConversationError(f"{where}: unknown role {role!r} (expected one of {', '.join(ROLES)})")
        if "content" not in message:
            raise ConversationError(f"{where}: no content")
        messages.append({"role": str(role), "content": _content(message["content"], where)})
    if messages[-1]["role"] != "user":
        raise ConversationError(
            f"the last message is the {messages[-1]['role']}'s; it must be the user's (the model answers it)"
        )
    return messages


def render_conversation(messages: list[dict[str, str]]) -> str:
    """The conversation as a judge reads it: ``role: content`` paragraphs, in order (HealthBench's form)."""
    return "\n\n".join(f"{m['role']}: {m['content']}" for m in messages)

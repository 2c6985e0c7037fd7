"""A chat answer given as function calls (``message.tool_calls``) read as the answer's text.

A request that offers functions through the chat API's ``tools`` is answered
with ``tool_calls`` rather than text: ``[{"type": "function", "function":
{"name": ..., "arguments": "<JSON object>"}}]``. Metrics score text, so the
calls are written as the JSON list ``[{name: {argument: value}}]``, the shape
AU-Harness's BFCL postprocessor makes of them and the one the
``bfcl_match_score`` metric reads. When the message has calls, they are the
answer and any text beside them is not (as in AU-Harness, which scores only
the calls of a request that offered tools).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


class ToolCallError(ValueError):
    """The message's ``tool_calls`` are not function calls with JSON object arguments."""


def tool_calls_answer(message: Mapping[str, Any]) -> str | None:
    """The calls of ``message`` as ``[{name: arguments}]`` JSON text; None when it has no calls."""
    calls = message.get("tool_calls")
    if not calls:
        return None
    if not isinstance(calls, list):
        raise ToolCallError(f"tool_calls is {type(calls).__name__}, not a list")
    read: list[dict[str, Any]] = []
    for i, call in enumerate(calls):
        function = call.get("function") if isinstance(call, Mapping) else None
        name = function.get("name") if isinstance(function, Mapping) else None
        if not isinstance(name, str):
            raise ToolCallError(f"tool_calls[{i}] has no function name")
        arguments = function.get("arguments") if isinstance(function, Mapping) else None
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except ValueError:
                raise ToolCallError(
                    f"tool_calls[{i}] ({name}): the arguments are not JSON: {arguments[:200]!r}"
                ) from None
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise ToolCallError(
                f"tool_calls[{i}] ({name}): the arguments are {type(arguments).__name__}, not an object"
            )
        read.append({name: arguments})
    return json.dumps(read, ensure_ascii=False)

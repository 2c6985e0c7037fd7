"""Chat completions: reading OpenAI chat requests and writing OpenAI chat responses.

Pure functions over dicts, so the handler stays a short sequence of steps.
Audio parts are kept as base64 strings here; they are decoded only if a rule or
the request log needs their fingerprint. Image parts are kept as their URLs,
decoded only when the script answers from images or the request log is on.
"""

from __future__ import annotations

import zlib
from typing import Any

from evalkit.testing.script import UsageSpec
from evalkit.testing.wire import BadRequest, dumps

SYSTEM_ROLES = ("system", "developer")
_IGNORED_PARTS = ("input_image", "file")


class Message:
    """What the server reads from one chat message: role, joined text parts, audio parts, image URLs."""

    __slots__ = ("role", "text", "audio", "images", "parts")

    def __init__(
        self, role: str, text: str, audio: list[str], images: list[str] | None = None, parts: list[str] | None = None
    ) -> None:
        self.role = role
        self.text = text
        self.audio = audio  # base64 payloads
        self.images = images or []  # image_url URLs, in order
        self.parts = parts or []  # the content parts' types in order (empty for string content)


def _audio_part(part: dict[str, Any], kind: str, where: str) -> str:
    if kind == "input_audio":
        payload = part.get("input_audio")
        data = payload.get("data") if isinstance(payload, dict) else None
        if not isinstance(data, str):
            raise BadRequest(f"{where}.input_audio.data must be a base64 string.", f"{where}.input_audio.data")
        return data
    payload = part.get("audio_url")  # vLLM's form: a base64 data: URL
    url = payload.get("url") if isinstance(payload, dict) else None
    if not isinstance(url, str) or not url.startswith("data:") or "," not in url:
        raise BadRequest(f"{where}.audio_url.url must be a base64 data: URL.", f"{where}.audio_url.url")
    return url.split(",", 1)[1]


def parse_messages(messages: Any) -> list[Message]:
    """Validate ``messages`` like the API does (400 on a bad shape) and extract text and audio.

    Content is a string or a list of parts: ``text`` parts are joined with a
    newline; ``input_audio`` and ``audio_url`` (data: URL) parts are audio;
    ``image_url`` parts are images (their URL is kept); other image and file
    parts are ignored.
    """
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty array.", "messages")
    parsed: list[Message] = []
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict) or not isinstance(msg.get("role"), str):
            raise BadRequest(f"messages[{i}] must be an object with a string 'role'.", f"messages.[{i}]")
        content = msg.get("content")
        audio: list[str] = []
        images: list[str] = []
        kinds: list[str] = []
        if content is None or isinstance(content, str):
            text = content or ""
        elif isinstance(content, list):
            texts: list[str] = []
            for j, part in enumerate(content):
                where = f"messages.[{i}].content.[{j}]"
                kind = part.get("type") if isinstance(part, dict) else None
                kinds.append(str(kind))
                if kind == "text":
                    value = part.get("text")
                    if not isinstance(value, str):
                        raise BadRequest(f"{where}.text must be a string.", f"{where}.text")
                    texts.append(value)
                elif kind in ("input_audio", "audio_url"):
                    audio.append(_audio_part(part, kind, where))
                elif kind == "image_url":
                    payload = part.get("image_url")
                    url = payload.get("url") if isinstance(payload, dict) else payload
                    if not isinstance(url, str):
                        raise BadRequest(f"{where}.image_url.url must be a string.", f"{where}.image_url.url")
                    images.append(url)
                elif kind not in _IGNORED_PARTS:
                    raise BadRequest(f"{where} has unknown type {kind!r}.", f"{where}.type")
            text = "\n".join(texts)
        else:
            raise BadRequest(f"messages[{i}].content must be a string or an array of parts.", f"messages.[{i}].content")
        parsed.append(Message(msg["role"], text, audio, images, kinds))
    return parsed


def last_user_index(messages: list[Message]) -> int | None:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "user":
            return i
    return None


def system_text(messages: list[Message]) -> str:
    return "\n".join(m.text for m in messages if m.role in SYSTEM_ROLES)


def choice_params(body: dict[str, Any]) -> tuple[int, int | None]:
    """``n`` and the token limit (max_completion_tokens, else max_tokens), validated."""
    n = body.get("n")
    if n is None:
        n = 1
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= 128:
        raise BadRequest("'n' must be an integer between 1 and 128.", "n")
    key = "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
    limit = body.get(key)
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        raise BadRequest(f"'{key}' must be a positive integer.", key)
    return n, limit


def truncate(answer: str, limit: int | None) -> tuple[str, int, str]:
    """Content, completion tokens and finish_reason for an answer under a token limit.

    Tokens are whitespace words; an answer longer than the limit is cut to it
    and finishes with "length", as a real model would.
    """
    words = answer.split()
    if limit is not None and len(words) > limit:
        return " ".join(words[:limit]), limit, "length"
    return answer, len(words), "stop"


#: an answer without a ``usage`` key (the script's ``usage.report: false``)
OMIT: Any = object()


def usage(prompt_tokens: int, completion_tokens: int, spec: UsageSpec | None = None) -> Any:
    """The answer's ``usage`` as the script says: counted, with reasoning and cached details, raw, or :data:`OMIT`.

    Reasoning tokens are counted within the completion tokens and cached ones within the prompt's, as OpenAI does.
    """
    spec = spec or UsageSpec()
    if spec.has_raw:
        return spec.raw
    if not spec.report:
        return OMIT
    completion = completion_tokens + (spec.reasoning_tokens or 0)
    data: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion,
        "total_tokens": prompt_tokens + completion,
    }
    if spec.cached_tokens is not None:
        data["prompt_tokens_details"] = {"cached_tokens": min(spec.cached_tokens, prompt_tokens)}
    if spec.reasoning_tokens is not None:
        data["completion_tokens_details"] = {"reasoning_tokens": spec.reasoning_tokens}
    return data


def with_usage(payload: dict[str, Any], usage_: Any) -> dict[str, Any]:
    """``payload`` with its ``usage`` key, unless the script leaves it out."""
    if usage_ is not OMIT:
        payload["usage"] = usage_
    return payload


def prompt_logprobs(messages: list[Message], table: dict[str, float]) -> list[dict[str, Any] | None]:
    """vLLM's ``prompt_logprobs`` of a chat request: one entry per prompt token, the first None.

    The prompt is each message as a ``<role>`` token, one ``<image>`` or
    ``<audio>`` token per media part and its words; a message is left open (no
    end token), so a final assistant message is continued as vLLM's
    ``continue_final_message`` does. A word's log-probability is the script's
    ``token_logprobs`` entry, else -1.0; a token's id is a checksum of its text,
    so equal prefixes have equal ids, as a real tokenizer's do.
    """
    tokens: list[str] = []
    for message in messages:
        tokens.append(f"<{message.role}>")
        tokens += ["<image>"] * len(message.images) + ["<audio>"] * len(message.audio)
        tokens += message.text.split()
    entries: list[dict[str, Any] | None] = [None]
    for token in tokens[1:]:
        entries.append(
            {str(zlib.crc32(token.encode())): {"logprob": table.get(token, -1.0), "rank": 1, "decoded_token": token}}
        )
    return entries


def completion_body(
    chat_id: str,
    created: int,
    model: str,
    content: str,
    finish: str,
    n: int,
    usage_: Any,
    extra: dict[str, Any] | None = None,
) -> bytes:
    """A ``chat.completion`` object; ``extra`` holds top-level keys of a server's own (vLLM's prompt_logprobs)."""
    choices = [
        {"index": i, "message": {"role": "assistant", "content": content}, "logprobs": None, "finish_reason": finish}
        for i in range(n)
    ]
    payload = {"id": chat_id, "object": "chat.completion", "created": created, "model": model, "choices": choices}
    return dumps({**with_usage(payload, usage_), **(extra or {})})


def stream_body(
    chat_id: str,
    created: int,
    model: str,
    content: str,
    finish: str,
    n: int,
    usage_: Any,
    include_usage: bool,
) -> bytes:
    """A whole SSE stream in one body: a content chunk and a finish chunk per choice,
    a usage chunk when ``stream_options.include_usage``, then ``[DONE]``."""
    base = {"id": chat_id, "object": "chat.completion.chunk", "created": created, "model": model}
    events: list[bytes] = []
    for i in range(n):
        delta = {"role": "assistant", "content": content}
        events.append(
            dumps({**base, "choices": [{"index": i, "delta": delta, "logprobs": None, "finish_reason": None}]})
        )
        events.append(
            dumps({**base, "choices": [{"index": i, "delta": {}, "logprobs": None, "finish_reason": finish}]})
        )
    if include_usage and usage_ is not OMIT:
        events.append(dumps({**base, "choices": [], "usage": usage_}))
    return b"".join(b"data: " + e + b"\n\n" for e in events) + b"data: [DONE]\n\n"


def log_record(
    body: dict[str, Any],
    messages: list[Message],
    fingerprints: dict[int, list[str]],
    content: str,
    images: dict[int, list[dict[str, Any]]] | None = None,
) -> dict[str, Any]:
    """What the request log keeps of a chat request: params and message texts, audio as fingerprints.

    ``images`` (message index -> each image's format, size and byte count) is
    added to the messages that carry images; never the image data.
    """
    params = {k: v for k, v in body.items() if k not in ("messages", "model")}
    for key in ("temperature", "max_tokens", "top_p", "seed"):
        params.setdefault(key, None)
    logged = []
    for i, m in enumerate(messages):
        entry: dict[str, Any] = {
            "role": m.role,
            "text": m.text,
            "n_audio": len(m.audio),
            "audio_fingerprints": fingerprints.get(i, []),
        }
        if m.images:
            entry["images"] = (images or {}).get(i, [])
            entry["parts"] = m.parts
        logged.append(entry)
    return {"params": params, "messages": logged, "answer": content}


#: what a media part's payload is written as in a logged body
_MEDIA_STAND_INS = {
    "input_audio": ("data", "<audio>"),
    "audio_url": ("url", "<audio>"),
    "image_url": ("url", "<image>"),
}


def body_as_sent(body: dict[str, Any]) -> dict[str, Any]:
    """The request body with every media payload written as a stand-in: the exact shape, without the data.

    Keys, their order, message roles, part types and order, and every other value stay as received, so a
    test can compare a request with another tool's body key for key.
    """
    logged = dict(body)
    messages = body.get("messages")
    if isinstance(messages, list):
        logged["messages"] = [_message_as_sent(m) for m in messages]
    return logged


def _message_as_sent(message: Any) -> Any:
    if not isinstance(message, dict) or not isinstance(message.get("content"), list):
        return message
    parts = []
    for part in message["content"]:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in _MEDIA_STAND_INS and isinstance(part.get(kind), dict):
            key, stand_in = _MEDIA_STAND_INS[kind]
            part = {**part, kind: {**part[kind], key: stand_in}}
        parts.append(part)
    return {**message, "content": parts}

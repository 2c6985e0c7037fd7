"""OpenAI-style wire formats: URLs, headers, bodies and answer extraction.

One place knows how ``openai`` (incl. Azure when ``api_version`` is set),
``vllm`` (any OpenAI-compatible server) and ``transcription`` endpoints
are spoken to; pools and engines never build URLs or parse JSON themselves.
Each request kind has one :class:`WireFormat` (its URL path, its body, how its
answer is read), so no other module asks "chat or transcription?".
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from multidict import CIMultiDict, CIMultiDictProxy

from evalkit.clients.request import ModelRequest
from evalkit.clients.tool_calls import ToolCallError, tool_calls_answer
from evalkit.config import RequestKind
from evalkit.data.audio.pcm import AudioPart
from evalkit.failures import FailureReason
from evalkit.util import jsonutil

if TYPE_CHECKING:
    import aiohttp


class ParseError(ValueError):
    """The endpoint answered 200 but not with a usable answer; ``reason`` says how (a FailureReason)."""

    def __init__(self, message: str, reason: str = FailureReason.PARSE) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class EndpointProtocol:
    """How to address one endpoint; holds the secret, so it is never logged or repr'd."""

    base_url: str
    kind: RequestKind
    auth_token: str | None = None
    api_version: str | None = None
    deployment: str | None = None

    def __repr__(self) -> str:  # never show the token
        return f"EndpointProtocol({self.base_url!r}, {self.kind!r})"

    @property
    def url(self) -> str:
        """The URL of this endpoint's own kind of request."""
        return self.url_for(self.kind)

    def url_for(self, kind: RequestKind) -> str:
        """The request URL of ``kind``; a query already in the base URL is kept after the path.

        A base URL that already names one wire path (``.../chat/completions``) is read as its
        endpoint's base, so the same model can also be asked for log-probabilities.
        """
        parts = urlsplit(self.base_url)
        base = parts.path.rstrip("/")
        tail = WIRE_FORMATS[kind].path
        own = WIRE_FORMATS[self.kind].path
        if kind != self.kind and base.endswith("/" + own):
            base = base[: -len(own) - 1]
        if base.endswith("/" + tail):
            path = base
        elif self.api_version is not None and "/openai/deployments/" not in base:
            path = f"{base}/openai/deployments/{self.deployment}/{tail}"
        else:
            path = f"{base}/{tail}"
        query = parts.query
        if self.api_version is not None and "api-version=" not in query:
            query = f"{query}&api-version={self.api_version}" if query else f"api-version={self.api_version}"
        return urlunsplit((parts.scheme, parts.netloc, path, query, ""))

    @property
    def headers(self) -> dict[str, str]:
        if not self.auth_token:
            return {}
        if self.api_version is not None:
            return {"api-key": self.auth_token}
        return {"Authorization": f"Bearer {self.auth_token}"}


def chat_body(request: ModelRequest) -> dict[str, Any]:
    """The JSON body of a chat request, audio substituted as base64 WAV, images as ``data:image/...`` URIs."""
    return _chat_body(request, _base64_text)


def _base64_text(audio: AudioPart) -> str:
    return audio.base64


def _chat_body(request: ModelRequest, audio_text: Callable[[AudioPart], str]) -> dict[str, Any]:
    messages = request.messages
    if request.audio or request.images:
        messages = [_with_media(message, request, audio_text) for message in messages]
    body: dict[str, Any] = {"model": request.model, "messages": messages}
    body.update(request.params)
    return body


#: what stands for each clip's base64 in a chat body's JSON until the clip's own bytes are put in its place: random
#: per process, so no text of a request holds it (if one did, the body is encoded the plain way)
_AUDIO_MARK = "evalkit-audio-" + os.urandom(16).hex()
_AUDIO_MARK_BYTES = _AUDIO_MARK.encode("ascii")


def chat_json(request: ModelRequest) -> tuple[bytes, ...]:
    """:func:`chat_body` encoded, in pieces whose concatenation is its JSON byte for byte: each clip's base64 is
    a piece of its own, between the JSON before and after it.

    A 10 s clip's base64 is ~427 KB: as a JSON string it was scanned and
    copied into an encoder buffer grown several times over, fresh memory the
    kernel zeroes page by page, for every request; the lean client writes
    the pieces as they are. Base64 holds no character JSON escapes, so its
    bytes between quotes are exactly what the encoder wrote.
    """
    if not request.audio:
        return (jsonutil.dumps_bytes(chat_body(request)),)
    clips: list[bytes] = []

    def mark(audio: AudioPart) -> str:
        clips.append(audio.b64_data)
        return _AUDIO_MARK

    around = jsonutil.dumps_bytes(_chat_body(request, mark)).split(_AUDIO_MARK_BYTES)
    if len(around) != len(clips) + 1:  # a text of the request holds the mark
        return (jsonutil.dumps_bytes(chat_body(request)),)
    pieces = [around[0]]
    for clip, after in zip(clips, around[1:]):
        pieces += (clip, after)
    return tuple(pieces)


def _with_media(
    message: dict[str, Any], request: ModelRequest, audio_text: Callable[[AudioPart], str]
) -> dict[str, Any]:
    content = message.get("content")
    if not isinstance(content, list):
        return message
    parts = []
    for part in content:
        kind = part.get("type")
        if kind == "input_audio" and "audio_index" in part.get("input_audio", {}):
            audio = request.audio[part["input_audio"]["audio_index"]]
            part = {"type": "input_audio", "input_audio": {"data": audio_text(audio), "format": "wav"}}
        elif kind == "image_url" and "image_index" in part.get("image_url", {}):
            part = {"type": "image_url", "image_url": {"url": request.images[part["image_url"]["image_index"]].url}}
        parts.append(part)
    return {**message, "content": parts}


def transcription_form(request: ModelRequest) -> aiohttp.FormData:
    import aiohttp  # only the aiohttp transport sends forms; a run on the lean client never imports aiohttp

    form = aiohttp.FormData()
    form.add_field("file", request.audio[0].wav, filename="audio.wav", content_type="audio/wav")
    form.add_field("model", request.model)
    if request.bare_form:  # AU-Harness's request (the file and the model) or KARMA's (and its prompt)
        if request.prompt:
            form.add_field("prompt", request.prompt)
        return form
    form.add_field("response_format", "json")
    if request.language:
        form.add_field("language", request.language)
    if request.prompt:
        form.add_field("prompt", request.prompt)
    temperature = request.params.get("temperature")
    if temperature is not None:
        form.add_field("temperature", str(temperature))
    return form


def extract_chat_answer(payload: Any) -> tuple[str, dict[str, Any]]:
    """The assistant text (its tool calls as JSON when it has some: evalkit/clients/tool_calls.py) and usage.

    ParseError when there is neither.
    """
    choices = payload.get("choices") if isinstance(payload, dict) else None
    if isinstance(payload, dict) and not choices and isinstance(choices, (list, type(None))):
        raise ParseError(
            f"a 200 with {'an empty' if choices == [] else 'no'} `choices` list: {str(payload)[:200]}",
            FailureReason.NO_CHOICES,
        )
    try:
        choice = payload["choices"][0]
        message = choice["message"]
        content = message.get("content")
    except (KeyError, IndexError, TypeError, AttributeError):
        raise ParseError(f"no choices[0].message in response: {str(payload)[:200]}") from None
    try:
        calls = tool_calls_answer(message)  # an answer to offered tools: the calls are the answer
    except ToolCallError as error:
        raise ParseError(str(error)) from None
    if calls is not None:
        usage = payload.get("usage") or {}
        return calls, usage if isinstance(usage, dict) else {}
    if isinstance(content, list):
        content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
    if content is None:
        why = [f"finish_reason {choice.get('finish_reason')!r}"] if choice.get("finish_reason") else []
        why += [f"refusal {str(message['refusal'])[:200]!r}"] if message.get("refusal") else []
        why += ["tool_calls instead"] if message.get("tool_calls") else []
        raise ParseError(
            "choices[0].message.content is null" + (f" ({', '.join(why)})" if why else ""), FailureReason.NULL_CONTENT
        )
    if not isinstance(content, str):
        raise ParseError(f"choices[0].message.content is {type(content).__name__}, not text")
    usage = payload.get("usage") or {}
    return content, usage if isinstance(usage, dict) else {}


def extract_transcription(payload: Any) -> tuple[str, dict[str, Any]]:
    if isinstance(payload, str):
        return payload.strip(), {}
    if isinstance(payload, dict) and isinstance(payload.get("text"), str):
        return payload["text"], payload.get("usage") or {}
    raise ParseError(f"no `text` in transcription response: {str(payload)[:200]}")


def error_message(payload: Any, fallback: str) -> str:
    """The server's own error message (OpenAI error JSON), for 4xx/5xx reports."""
    if isinstance(payload, dict):
        error = payload.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])[:500]
        if isinstance(error, str):
            return error[:500]
        if payload.get("detail"):
            return str(payload["detail"])[:500]
    return fallback[:500]


class WireFormat:
    """How one request kind travels: the URL path under ``/v1``, the POST arguments, and the answer's text and usage."""

    path: str = ""
    #: whether a 200 may be plain text rather than JSON (a transcription's ``text`` format)
    plain_text: bool = False
    #: whether the body is JSON bytes (:meth:`json_body`): what the lean keep-alive client can carry
    json: bool = True

    def json_body(self, request: ModelRequest) -> bytes:
        """The request's JSON body, encoded."""
        raise NotImplementedError

    def json_pieces(self, request: ModelRequest) -> tuple[bytes, ...]:
        """:meth:`json_body` as pieces to write one after the other (the lean client never joins them)."""
        return (self.json_body(request),)

    def post_arguments(self, request: ModelRequest) -> dict[str, Any]:
        """Keyword arguments for ``aiohttp.ClientSession.post`` (``data`` and, where needed, ``headers``)."""
        return {"data": self.json_body(request), "headers": _JSON_HEADERS}

    def parse(self, payload: Any) -> tuple[str, dict[str, Any]]:
        """The answer text and usage from a decoded 200 body; ParseError when it holds none."""
        raise NotImplementedError

    def settings(self, request: ModelRequest) -> dict[str, Any]:
        """What the request sends besides its model and its content (messages, prompt, file, tools).

        ``records/sent`` keeps it beside the messages, so every key a config or a flag added to the body
        (``extra_body``, ``--model-args``, generation settings) shows where what was sent is read.
        """
        return {key: value for key, value in request.params.items() if key != "tools"}


#: one read-only header map for every JSON body: aiohttp merges a multidict proxy into the request's headers
#: as it is, where a plain dict is first copied into a new CIMultiDict on every request
_JSON_HEADERS = CIMultiDictProxy(CIMultiDict({"Content-Type": "application/json"}))


class ChatWire(WireFormat):
    """``/chat/completions``: a JSON body with messages, audio inlined as base64 WAV."""

    path = "chat/completions"

    def json_body(self, request: ModelRequest) -> bytes:
        return b"".join(chat_json(request))

    def json_pieces(self, request: ModelRequest) -> tuple[bytes, ...]:
        return chat_json(request)

    def parse(self, payload: Any) -> tuple[str, dict[str, Any]]:
        return extract_chat_answer(payload)


class TranscriptionWire(WireFormat):
    """``/audio/transcriptions``: a multipart form with the WAV file."""

    path = "audio/transcriptions"
    plain_text = True
    json = False

    def post_arguments(self, request: ModelRequest) -> dict[str, Any]:
        return {"data": transcription_form(request)}

    def settings(self, request: ModelRequest) -> dict[str, Any]:
        """The form's fields besides the file, the model and the prompt (:func:`transcription_form`'s choices)."""
        if request.bare_form:
            return {}
        fields: dict[str, Any] = {"response_format": "json"}
        if request.language:
            fields["language"] = request.language
        if request.params.get("temperature") is not None:
            fields["temperature"] = request.params["temperature"]
        return fields

    def parse(self, payload: Any) -> tuple[str, dict[str, Any]]:
        return extract_transcription(payload)


class CompletionWire(WireFormat):
    """``/completions`` asked with ``echo`` and ``logprobs``: the prompt's own token log-probabilities.

    The answer's text is not used; :func:`continuation_logprob` reads the
    log-probabilities from the raw answer, which the store keeps.
    """

    path = "completions"

    def json_body(self, request: ModelRequest) -> bytes:
        return jsonutil.dumps_bytes({"model": request.model, "prompt": request.prompt or "", **request.params})

    def parse(self, payload: Any) -> tuple[str, dict[str, Any]]:
        _prompt_logprobs(payload)  # a 200 without them is a parse failure, not an answer
        usage = payload.get("usage") if isinstance(payload, dict) else None
        return "", usage if isinstance(usage, dict) else {}


def _prompt_logprobs(payload: Any) -> tuple[list[Any], list[Any], list[Any]]:
    try:
        logprobs = payload["choices"][0]["logprobs"]
        tokens, values, offsets = logprobs["tokens"], logprobs["token_logprobs"], logprobs["text_offset"]
    except (KeyError, IndexError, TypeError):
        raise ParseError(
            f"no choices[0].logprobs with tokens, token_logprobs and text_offset: {str(payload)[:200]} "
            "(the server must support echo with logprobs on /v1/completions)"
        ) from None
    if not (len(tokens) == len(values) == len(offsets)):
        raise ParseError("choices[0].logprobs: tokens, token_logprobs and text_offset differ in length")
    return tokens, values, offsets


def continuation_logprob(payload: Any, start: int, end: int) -> tuple[float, int]:
    """Sum and count of the log-probabilities of the prompt tokens starting in ``[start, end)`` characters.

    The prompt was echoed (context + continuation) with one generated token
    after it; tokens starting before ``start`` belong to the context, from
    ``end`` on to the generation. A continuation token without a
    log-probability (the very first token of a prompt has none) is a parse error.
    """
    _, values, offsets = _prompt_logprobs(payload)
    total, count = 0.0, 0
    for value, offset in zip(values, offsets):
        if start <= int(offset) < end:
            if value is None:
                raise ParseError(f"no log-probability for the continuation token at character {offset}")
            total += float(value)
            count += 1
    if count == 0:
        raise ParseError(f"no prompt token starts in characters {start}..{end} of the echoed prompt")
    return total, count


def chat_prompt_tokens(payload: Any) -> list[tuple[str, float | None]]:
    """(token id, log-probability) of every prompt token of a chat answer asked with vLLM's ``prompt_logprobs``.

    vLLM lists one entry per prompt token (the first is null: nothing predicts
    it); asked with ``prompt_logprobs: 0`` an entry holds just the prompt's own
    token, keyed by its id.
    """
    entries = payload.get("prompt_logprobs") if isinstance(payload, dict) else None
    if not isinstance(entries, list) or not entries:
        raise ParseError(
            f"no prompt_logprobs in the chat answer: {str(payload)[:200]} (likelihood scoring of images or audio "
            "needs vLLM's prompt_logprobs on /v1/chat/completions)"
        )
    tokens: list[tuple[str, float | None]] = []
    for index, entry in enumerate(entries):
        if entry is None:
            tokens.append(("", None))
            continue
        if not isinstance(entry, dict) or len(entry) != 1:
            raise ParseError(f"prompt_logprobs[{index}] is not one token's entry (ask with prompt_logprobs: 0)")
        ((token, info),) = entry.items()
        value = info.get("logprob") if isinstance(info, dict) else None
        if not isinstance(value, (int, float)):
            raise ParseError(f"prompt_logprobs[{index}] has no numeric logprob")
        tokens.append((str(token), float(value)))
    return tokens


def continuation_after(context: Any, continued: Any) -> tuple[float, int]:
    """Sum and count of the log-probabilities of the tokens ``continued`` has beyond ``context``'s prompt.

    Both answers are of the same chat, ``context`` with an empty final assistant
    message and ``continued`` with the option in it, so the option's tokens are
    those after the two prompts' common token prefix (a tokenizer that merges
    the option's first characters into the context's last token moves that
    token into the option, as the completions path counts a token by where it starts).
    """
    before = [token for token, _ in chat_prompt_tokens(context)]
    after = chat_prompt_tokens(continued)
    shared = 0
    while shared < min(len(before), len(after)) and before[shared] == after[shared][0]:
        shared += 1
    option = after[shared:]
    if not option:
        raise ParseError("the option added no prompt token to the context")
    if any(value is None for _, value in option):
        raise ParseError("an option token has no log-probability")
    return sum(value for _, value in option if value is not None), len(option)


WIRE_FORMATS: dict[RequestKind, WireFormat] = {
    RequestKind.CHAT: ChatWire(),
    RequestKind.TRANSCRIPTION: TranscriptionWire(),
    RequestKind.COMPLETION: CompletionWire(),
}

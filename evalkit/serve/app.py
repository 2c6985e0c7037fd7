"""The HTTP side of ``evalkit serve``: OpenAI-shaped endpoints in front of a batched backend.

Requests are parsed and their audio decoded in a small thread pool (JSON with
megabytes of base64 and resampling are CPU work), then handed to a
:class:`DynamicBatcher`, whose batches run in the single backend thread.
A chat batch's templating, feature extraction and padding (and, after
generate, its decoding) run on a separate preparation thread, overlapped
with the previous batch's generate, so the model thread only runs the model.
The event loop only moves bytes. Every error leaves as OpenAI error JSON so
evalkit's own clients (and the openai SDK) report the server's message.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import os
import time
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from aiohttp import BodyPartReader, web

from evalkit.data.audio.decode import TARGET_SR, AudioDecodeError, load_16k_mono
from evalkit.data.sample import Audio
from evalkit.languages import UnknownLanguageError, language_name, split_pair
from evalkit.serve.backends.base import Backend, ChatInput, GenerationParams, InputError
from evalkit.serve.backends.vision import ImageInputError, image_part
from evalkit.serve.batcher import (
    BatchStats,
    DynamicBatcher,
    QueueFullError,
    ServerClosingError,
)
from evalkit.serve.errors import RequestError, error_response, json_response
from evalkit.serve.guard import DEFAULT_BODY_TIMEOUT_S, DEFAULT_MAX_BODY_BYTES, Guard, Limits, default_body_budget

log = logging.getLogger("evalkit.serve")

#: chat bodies up to this size are parsed on the event loop: a text prompt's JSON parses in tens of microseconds,
#: less than handing it to a thread and back; larger ones carry media, decoded on the parse threads
INLINE_PARSE_BYTES = 16 * 1024
MAX_BODY_BYTES = DEFAULT_MAX_BODY_BYTES
RESPONSE_FORMATS = ("json", "text", "verbose_json")


# ---------------------------------------------------------------------- state


@dataclass
class TranscriptionJob:
    audio: np.ndarray
    language: str | None


@dataclass
class ChatAnswer:
    text: str
    prompt_tokens: int
    audio_tokens: int
    completion_tokens: int


@dataclass
class ServerState:
    """Everything the handlers share; ``backend`` is None until the model has loaded."""

    max_batch_size: int
    batch_wait_s: float
    max_queue: int
    max_body_bytes: int = MAX_BODY_BYTES
    guard: Guard = field(default_factory=lambda: Guard(Limits(MAX_BODY_BYTES, default_body_budget(MAX_BODY_BYTES))))
    backend: Backend | None = None
    created: int = field(default_factory=lambda: int(time.time()))
    stats: BatchStats = field(default_factory=BatchStats)
    chat: DynamicBatcher[ChatInput, ChatAnswer] | None = None
    transcribe: DynamicBatcher[TranscriptionJob, str] | None = None
    backend_executor: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(max_workers=1, thread_name_prefix="evalkit-backend")
    )
    prepare_executor: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(max_workers=1, thread_name_prefix="evalkit-prepare")
    )
    prepare_item_executor: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(max_workers=1, thread_name_prefix="evalkit-prepare-item")
    )
    parse_executor: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(
            max_workers=min(4, os.cpu_count() or 1), thread_name_prefix="evalkit-decode"
        )
    )

    def require_backend(self) -> Backend:
        if self.backend is None:
            raise RequestError(503, "the model is still loading", code="loading", headers={"Retry-After": "1"})
        return self.backend


STATE: web.AppKey[ServerState] = web.AppKey("evalkit_serve_state", ServerState)


def create_app(
    backend: Backend | None = None,
    *,
    max_batch_size: int = 8,
    batch_wait_ms: float = 5.0,
    max_queue: int = 256,
    max_body_bytes: int = MAX_BODY_BYTES,
    body_budget_bytes: int | None = None,
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S,
    api_key: str | None = None,
) -> web.Application:
    """The aiohttp application; pass ``backend`` now or later with :func:`attach_backend`.

    Serving before the backend is attached lets a slow model load while
    /health already answers 503 "loading", so supervisors can tell "starting"
    from "dead". ``api_key``, the body limits and the body timeout are enforced
    by :class:`~evalkit.serve.guard.Guard` before a handler reads a body
    (``body_budget_bytes`` None: an eighth of the machine's memory).
    """
    limits = Limits(
        max_body_bytes=max_body_bytes,
        body_budget_bytes=body_budget_bytes if body_budget_bytes is not None else default_body_budget(max_body_bytes),
        body_timeout_s=body_timeout_s,
        api_key=api_key or None,
    )
    guard = Guard(limits)
    # the guard is outermost: it sees every answer, the JSON errors included, to close connections whose body
    # was not read and to tell a client that went away from a failure
    app = web.Application(client_max_size=max_body_bytes, middlewares=[guard.middleware(), _errors_as_json])
    state = ServerState(
        max_batch_size=max_batch_size,
        batch_wait_s=batch_wait_ms / 1000.0,
        max_queue=max_queue,
        max_body_bytes=max_body_bytes,
        guard=guard,
    )
    app[STATE] = state
    app.router.add_post("/v1/chat/completions", chat_completions, expect_handler=guard.expect)
    app.router.add_post("/v1/audio/transcriptions", transcriptions, expect_handler=guard.expect)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/health", health)
    app.router.add_get("/_stats", stats)
    app.on_cleanup.append(_shutdown)
    if backend is not None:
        app.on_startup.append(lambda app: _attach_now(app, backend))
    return app


async def _attach_now(app: web.Application, backend: Backend) -> None:
    attach_backend(app, backend)


def attach_backend(app: web.Application, backend: Backend) -> None:
    """Start serving ``backend`` (call on the app's running loop)."""
    state = app[STATE]
    size = max(1, min(state.max_batch_size, backend.max_batch_size or state.max_batch_size))
    if backend.pipeline_depth > 1:  # a thread waits on each batch handed over, for chat and transcription alike
        state.backend_executor.shutdown(wait=False)
        state.backend_executor = ThreadPoolExecutor(
            max_workers=2 * backend.pipeline_depth, thread_name_prefix="evalkit-backend"
        )
    common: dict[str, Any] = {
        "executor": state.backend_executor,
        "max_batch_size": size,
        "batch_wait_s": state.batch_wait_s,
        "max_queue": state.max_queue,
        "stats": state.stats,
        "pipeline": backend.pipeline_depth,
    }
    if backend.supports_chat:
        state.chat = DynamicBatcher(
            backend.generate_chat,
            prepare=backend.prepare_chat,
            finish=lambda items, generated: _chat_answers(backend, items, backend.finish_chat(generated)),
            prepare_executor=state.prepare_executor,
            cost=backend.chat_cost,
            prepare_item=backend.prepare_chat_item,
            prepare_item_executor=state.prepare_item_executor,
            **common,
        )
        state.chat.start()
    if backend.supports_transcription:
        state.transcribe = DynamicBatcher(
            lambda prepared: _generate_transcriptions(backend, prepared),
            prepare=lambda jobs: _prepare_transcriptions(backend, jobs),
            finish=lambda jobs, generated: _finish_transcriptions(backend, jobs, generated),
            prepare_executor=state.prepare_executor,
            **common,
        )
        state.transcribe.start()
    state.backend = backend


async def _shutdown(app: web.Application) -> None:
    state = app[STATE]
    for batcher in (state.chat, state.transcribe):
        if batcher is not None:
            await batcher.close()
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, state.backend_executor.shutdown, True)
    await loop.run_in_executor(None, state.prepare_executor.shutdown, True)
    await loop.run_in_executor(None, state.prepare_item_executor.shutdown, True)
    state.parse_executor.shutdown(wait=False, cancel_futures=True)
    if state.backend is not None:
        backend, state.backend = state.backend, None
        await loop.run_in_executor(None, backend.close)


# ---------------------------------------------------------------------- batch stages (backend threads)


def _chat_answers(backend: Backend, items: list[ChatInput], answers: list[Any]) -> list[ChatAnswer | BaseException]:
    """The backend's answers with their usage counts (the finish stage, on the preparation thread)."""
    if len(answers) != len(items):
        raise RuntimeError(f"backend returned {len(answers)} answers for a batch of {len(items)}")
    results: list[ChatAnswer | BaseException] = []
    for item, answer in zip(items, answers):
        if isinstance(answer, BaseException):
            results.append(answer)
            continue
        # the model's own counts when the backend has them (template and special tokens, generated ids);
        # the texts are tokenized again only when it has not (re-tokenizing every prompt cost the finish stage)
        prompt = getattr(answer, "prompt_tokens", None)
        completion = getattr(answer, "completion_tokens", None)
        audio_tokens = _audio_tokens(backend, item)
        results.append(
            ChatAnswer(
                str(answer),
                prompt if prompt is not None else _text_tokens(backend, item) + audio_tokens,
                audio_tokens,
                completion if completion is not None else backend.count_tokens(answer),
            )
        )
    return results


def _audio_tokens(backend: Backend, item: ChatInput) -> int:
    seconds = sum(
        len(part["array"]) / TARGET_SR
        for message in item.messages
        if isinstance(message.get("content"), list)
        for part in message["content"]
        if part.get("type") == "audio"
    )
    return backend.count_audio_tokens(seconds) if seconds else 0


def _text_tokens(backend: Backend, item: ChatInput) -> int:
    tokens = 0
    for message in item.messages:
        content = message.get("content")
        if isinstance(content, str):
            tokens += backend.count_tokens(content)
            continue
        for part in content or []:
            if part.get("type") == "text":
                tokens += backend.count_tokens(str(part.get("text", "")))
    return tokens


def _prepare_transcriptions(backend: Backend, jobs: list[TranscriptionJob]) -> list[tuple[list[int], Any]]:
    """One prepared backend batch per language present (usually exactly one), on the preparation thread."""
    by_language: dict[str | None, list[int]] = {}
    for index, job in enumerate(jobs):
        by_language.setdefault(job.language, []).append(index)
    return [
        (indices, backend.prepare_transcription([jobs[i].audio for i in indices], language=language))
        for language, indices in by_language.items()
    ]


def _generate_transcriptions(backend: Backend, prepared: list[tuple[list[int], Any]]) -> list[tuple[list[int], Any]]:
    """The model's part of each language's batch (the model thread)."""
    return [(indices, backend.generate_transcription(part)) for indices, part in prepared]


def _finish_transcriptions(
    backend: Backend, jobs: list[TranscriptionJob], generated: list[tuple[list[int], Any]]
) -> list[str | BaseException]:
    """The transcripts in the jobs' order (the finish stage, on the preparation thread)."""
    results: list[str | BaseException] = [RuntimeError("not transcribed")] * len(jobs)
    for indices, part in generated:
        texts = backend.finish_transcription(part)
        if len(texts) != len(indices):
            raise RuntimeError(f"backend returned {len(texts)} transcripts for a batch of {len(indices)}")
        for i, text in zip(indices, texts):
            results[i] = text
    return results


# ---------------------------------------------------------------------- middleware


@web.middleware
async def _errors_as_json(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    try:
        return await handler(request)
    except RequestError as error:
        return error_response(error)
    except ConnectionError:  # the client went away: the guard says so in one line
        raise
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        message = {
            404: f"no such endpoint: {request.method} {request.path}",
            405: f"method {request.method} is not allowed on {request.path}",
            413: f"request body is larger than {request.app[STATE].max_body_bytes} bytes",
        }.get(exc.status, exc.reason)
        headers = {k: v for k, v in exc.headers.items() if k.lower() in ("allow", "retry-after")}
        code = {404: "not_found", 405: "method_not_allowed", 413: "request_too_large"}.get(exc.status)
        return error_response(RequestError(exc.status, message, code=code, headers=headers))
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # a bug or a backend failure: say what it was
        log.exception("error while serving %s %s", request.method, request.path)
        return error_response(RequestError(500, f"{type(exc).__name__}: {exc}", code="internal_error"))


def _require(batcher: DynamicBatcher[Any, Any] | None, what: str, backend: Backend) -> DynamicBatcher[Any, Any]:
    """The endpoint's batcher, with room for one more request (checked before the body is read)."""
    if batcher is None:
        raise RequestError(400, f"model {backend.model_id!r} does not serve {what}", code="unsupported")
    try:
        batcher.check_capacity()
    except (QueueFullError, ServerClosingError) as exc:
        raise _unavailable(exc) from None
    return batcher


def _unavailable(exc: QueueFullError | ServerClosingError) -> RequestError:
    if isinstance(exc, QueueFullError):
        return RequestError(503, str(exc), code="queue_full", headers={"Retry-After": str(exc.retry_after_s)})
    return RequestError(503, str(exc), code="shutting_down", headers={"Retry-After": "1"})


async def _submit(batcher: DynamicBatcher[Any, Any], item: Any) -> Any:
    try:
        return await batcher.submit(item)
    except (QueueFullError, ServerClosingError) as exc:
        raise _unavailable(exc) from None
    except InputError as exc:
        raise RequestError(400, str(exc), code="unsupported_input") from None
    except Exception as exc:
        log.exception("backend failed on a batch")
        raise RequestError(500, f"backend error: {type(exc).__name__}: {exc}", code="backend_error") from None


async def _off_loop(request: web.Request, fn: Callable[..., Any], *args: Any) -> Any:
    return await asyncio.get_running_loop().run_in_executor(request.app[STATE].parse_executor, fn, *args)


def _inline_parse(raw: bytes | bytearray) -> bool:
    """A small body without media: parse it on the loop (audio and images are decoded on the parse threads)."""
    return len(raw) <= INLINE_PARSE_BYTES and not any(marker in raw for marker in _MEDIA_MARKERS)


_MEDIA_MARKERS = (b"input_audio", b"audio_url", b"image_url")


def _check_model(requested: Any, backend: Backend) -> None:
    if requested in (None, ""):
        return
    if not isinstance(requested, str):
        raise RequestError(400, "model must be a string", param="model")
    if requested != backend.model_id:
        raise RequestError(
            404,
            f"the model {requested!r} does not exist; this server serves {backend.model_id!r}",
            param="model",
            code="model_not_found",
        )


# ---------------------------------------------------------------------- chat


def _decode_b64_audio(data: Any, where: str) -> np.ndarray:
    if not isinstance(data, str) or not data:
        raise RequestError(400, f"{where} must be a non-empty base64 string", param=where)
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise RequestError(400, f"{where} is not valid base64", param=where) from None
    try:
        return load_16k_mono(Audio(data=raw))
    except AudioDecodeError as exc:
        raise RequestError(400, f"{where}: {exc}", param=where) from None


def _audio_part(part: dict[str, Any], where: str) -> np.ndarray:
    if part["type"] == "input_audio":
        payload = part.get("input_audio")
        if not isinstance(payload, dict):
            raise RequestError(400, f"{where}.input_audio must be an object with data and format", param=where)
        return _decode_b64_audio(payload.get("data"), f"{where}.input_audio.data")
    # vLLM's form: {"type": "audio_url", "audio_url": {"url": "data:audio/wav;base64,..."}}
    payload = part.get("audio_url")
    url = payload.get("url") if isinstance(payload, dict) else payload
    if not isinstance(url, str) or not url.startswith("data:") or ";base64," not in url:
        raise RequestError(400, f"{where}.audio_url.url must be a data: URL with base64 audio", param=where)
    return _decode_b64_audio(url.split(";base64,", 1)[1], f"{where}.audio_url.url")


def _parse_messages(raw: Any) -> list[dict[str, Any]]:
    if not isinstance(raw, list) or not raw:
        raise RequestError(400, "messages must be a non-empty list", param="messages")
    messages: list[dict[str, Any]] = []
    for i, message in enumerate(raw):
        where = f"messages[{i}]"
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise RequestError(400, f"{where} must be an object with a string role", param=where)
        content = message.get("content")
        if content is None or isinstance(content, str):
            messages.append(dict(message))
            continue
        if not isinstance(content, list):
            raise RequestError(400, f"{where}.content must be a string or a list of parts", param=f"{where}.content")
        parts: list[dict[str, Any]] = []
        for j, part in enumerate(content):
            part_where = f"{where}.content[{j}]"
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "text":
                if not isinstance(part.get("text"), str):
                    raise RequestError(400, f"{part_where}.text must be a string", param=part_where)
                parts.append({"type": "text", "text": part["text"]})
            elif kind in ("input_audio", "audio_url"):
                parts.append({"type": "audio", "array": _audio_part(part, part_where)})
            elif kind == "image_url":
                try:
                    parts.append(image_part(part, part_where))
                except ImageInputError as exc:
                    raise RequestError(400, str(exc), param=part_where, code="invalid_image") from None
            else:
                raise RequestError(
                    400,
                    f"{part_where}: unsupported part type {kind!r} (supported: text, image_url, input_audio, "
                    "audio_url)",
                    param=part_where,
                )
        messages.append({**message, "content": parts})
    return messages


def _number(body: dict[str, Any], key: str, low: float, high: float) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise RequestError(400, f"{key} must be a number between {low} and {high}, got {value!r}", param=key)
    return float(value)


def _parse_params(body: dict[str, Any]) -> GenerationParams:
    params = GenerationParams()
    for key in ("max_completion_tokens", "max_tokens"):
        value = body.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise RequestError(400, f"{key} must be a positive integer, got {value!r}", param=key)
        params.max_tokens = value
        break
    temperature = _number(body, "temperature", 0.0, 2.0)
    if temperature is not None:
        params.temperature = temperature
    top_p = _number(body, "top_p", 0.0, 1.0)
    if top_p is not None:
        params.top_p = top_p
    seed = body.get("seed")
    if seed is not None:
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise RequestError(400, f"seed must be an integer, got {seed!r}", param="seed")
        params.seed = seed
    n = body.get("n", 1)
    if n != 1:
        raise RequestError(400, f"only n=1 is supported, got {n!r}", param="n")
    return params


def parse_chat_body(raw: bytes | bytearray) -> tuple[dict[str, Any], ChatInput]:
    """Body bytes -> (the JSON object, the backend's input); RequestError names what is wrong."""
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RequestError(400, f"request body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise RequestError(400, "request body must be a JSON object")
    if "messages" not in body:
        raise RequestError(400, "messages is required", param="messages")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise RequestError(400, "stream must be true or false", param="stream")
    return body, ChatInput(messages=_parse_messages(body["messages"]), params=_parse_params(body))


async def chat_completions(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE]
    backend = state.require_backend()
    batcher = _require(state.chat, "chat completions", backend)
    raw = await state.guard.read_body(request)
    if _inline_parse(raw):
        body, item = parse_chat_body(raw)
    else:
        body, item = await _off_loop(request, parse_chat_body, raw)
    _check_model(body.get("model"), backend)
    try:
        backend.check_chat(item)
    except InputError as exc:
        raise RequestError(400, str(exc), code="unsupported_input") from None
    answer: ChatAnswer = await _submit(batcher, item)
    completion_id = f"chatcmpl-{uuid.uuid4().hex}"
    created = int(time.time())
    finish = "length" if answer.completion_tokens >= item.params.max_tokens else "stop"
    usage = {
        "prompt_tokens": answer.prompt_tokens,
        "completion_tokens": answer.completion_tokens,
        "total_tokens": answer.prompt_tokens + answer.completion_tokens,
        "prompt_tokens_details": {"audio_tokens": answer.audio_tokens, "cached_tokens": 0},
    }
    if body.get("stream"):
        return await _stream_chat(request, completion_id, created, backend.model_id, answer.text, finish, usage)
    return json_response(
        {
            "id": completion_id,
            "object": "chat.completion",
            "created": created,
            "model": backend.model_id,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": answer.text},
                    "logprobs": None,
                    "finish_reason": finish,
                }
            ],
            "usage": usage,
        }
    )


async def _stream_chat(
    request: web.Request, completion_id: str, created: int, model: str, text: str, finish: str, usage: dict[str, Any]
) -> web.StreamResponse:
    """Server-sent events for clients that insist on ``stream: true`` (the answer arrives in one piece)."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    base = {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model}
    chunks = [
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}], "usage": usage},
    ]
    for chunk in chunks:
        await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


# ---------------------------------------------------------------------- transcriptions


def _parse_language(value: str | None, backend: Backend) -> str | None:
    if value is None or not value.strip():
        return None
    try:
        code, target = split_pair(value)
    except UnknownLanguageError as exc:
        raise RequestError(400, f"language: {exc}", param="language") from None
    if target is not None:
        raise RequestError(400, f"language must be one language, not the pair {value!r}", param="language")
    if backend.languages is not None and code not in backend.languages:
        known = ", ".join(sorted(backend.languages))
        raise RequestError(400, f"model {backend.model_id!r} transcribes {known}, not {value!r}", param="language")
    return code


def _decode_upload(data: bytes | bytearray) -> np.ndarray:
    try:
        return load_16k_mono(Audio(data=bytes(data)))
    except AudioDecodeError as exc:
        raise RequestError(400, f"file: {exc}", param="file") from None


async def _read_form(request: web.Request) -> tuple[bytes | bytearray | None, dict[str, str]]:
    if not request.content_type.startswith("multipart/"):
        raise RequestError(
            400,
            f"expected a multipart/form-data body with a file field, got {request.content_type or 'no content type'}",
        )
    guard = request.app[STATE].guard  # the Content-Length was checked against the limits before this handler
    fields: dict[str, str] = {}
    file_data: bytes | bytearray | None = None
    try:
        async with guard.deadline(request):
            reader = await request.multipart()
            while (part := await reader.next()) is not None:
                if not isinstance(part, BodyPartReader):
                    raise RequestError(400, "malformed multipart body: nested multipart parts are not supported")
                data = await guard.read_part(request, part)
                if part.name == "file":
                    file_data = data
                elif part.name:
                    fields[part.name] = part.decode(bytes(data)).decode(part.get_charset(default="utf-8"))
    except (ValueError, AssertionError, LookupError) as exc:  # a UnicodeDecodeError is a ValueError
        raise RequestError(400, f"malformed multipart body: {exc}") from None
    return file_data, fields


async def transcriptions(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE]
    backend = state.require_backend()
    batcher = _require(state.transcribe, "transcriptions", backend)
    file_data, fields = await _read_form(request)
    if not file_data:
        raise RequestError(400, "file is required (the audio to transcribe, as a multipart file field)", param="file")
    _check_model(fields.get("model"), backend)
    response_format = fields.get("response_format", "json") or "json"
    if response_format not in RESPONSE_FORMATS:
        raise RequestError(
            400,
            f"response_format {response_format!r} is not supported (supported: {', '.join(RESPONSE_FORMATS)})",
            param="response_format",
        )
    if "temperature" in fields:
        try:
            float(fields["temperature"])
        except ValueError:
            raise RequestError(
                400, f"temperature must be a number, got {fields['temperature']!r}", param="temperature"
            ) from None
    language = _parse_language(fields.get("language"), backend)
    max_tokens = None
    for key in ("max_completion_tokens", "max_tokens"):
        if key in fields:
            try:
                max_tokens = int(fields[key])
            except ValueError:
                raise RequestError(400, f"{key} must be an integer, got {fields[key]!r}", param=key) from None
            if max_tokens < 1:
                raise RequestError(400, f"{key} must be at least 1, got {max_tokens}", param=key)
            break
    audio = await _off_loop(request, _decode_upload, file_data)
    text: str = await _submit(batcher, TranscriptionJob(audio, language))
    if max_tokens is not None and backend.count_tokens(text) > max_tokens:
        text = backend.truncate(text, max_tokens)
    duration = len(audio) / TARGET_SR
    usage = {"type": "duration", "seconds": int(-(-duration // 1))}
    if response_format == "text":
        return web.Response(text=text + "\n", content_type="text/plain")
    if response_format == "json":
        return json_response({"text": text, "usage": usage})
    spoken = language or (sorted(backend.languages)[0] if backend.languages and len(backend.languages) == 1 else None)
    return json_response(
        {
            "task": "transcribe",
            "language": language_name(spoken).lower() if spoken else "unknown",
            "duration": round(duration, 3),
            "text": text,
            "segments": [
                {
                    "id": 0,
                    "seek": 0,
                    "start": 0.0,
                    "end": round(duration, 3),
                    "text": text,
                    "tokens": [],
                    "temperature": 0.0,
                    "avg_logprob": None,
                    "compression_ratio": None,
                    "no_speech_prob": None,
                }
            ]
            if text
            else [],
            "usage": usage,
        }
    )


# ---------------------------------------------------------------------- small endpoints


async def models(request: web.Request) -> web.Response:
    state = request.app[STATE]
    backend = state.require_backend()
    return json_response(
        {
            "object": "list",
            "data": [{"id": backend.model_id, "object": "model", "created": state.created, "owned_by": "evalkit"}],
        }
    )


async def health(request: web.Request) -> web.Response:
    backend = request.app[STATE].backend
    if backend is None:
        return json_response({"status": "loading"}, status=503, headers={"Retry-After": "1"})
    failure = backend.failure()
    if failure is not None:
        return json_response({"status": "failed", "error": failure}, status=503)
    return json_response({"status": "ok"})


async def stats(request: web.Request) -> web.Response:
    state = request.app[STATE]
    body = state.stats.as_dict()
    body["queued"] = sum(b.queued for b in (state.chat, state.transcribe) if b is not None)
    body["max_queue"] = state.max_queue
    body["model"] = state.backend.runtime() if state.backend is not None else {}
    return json_response(body)

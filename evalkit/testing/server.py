"""A scriptable OpenAI-compatible server for dry runs, tests and benchmarks.

It answers chat completions and transcriptions from a script (see
:mod:`evalkit.testing.script`), injects reproducible faults, limits its own
concurrency like a real replica would, and can log what it received. The
request path is kept lean (benchmarks drive it at thousands of requests per
second): no per-request logging unless a request log is asked for, bodies are
hashed and audio decoded only when a rule, a fault table or the log needs it.

Run it as a process::

    python -m evalkit.testing.server --script script.yaml --host 127.0.0.1 --port 0

It prints one line ``LISTENING http://127.0.0.1:<port>`` once it accepts
connections and stops cleanly on SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import binascii
import hashlib
import hmac
import json
import os
import secrets
import signal
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from aiohttp import web

from evalkit.errors import ConfigError
from evalkit.testing.audio import AudioDecodeError, audio_info
from evalkit.testing.faults import FaultTable, uniform
from evalkit.testing.requestlog import RequestLog
from evalkit.testing.script import ECHO, Script, load_script

try:
    import orjson

    _dumps: Callable[[Any], bytes] = orjson.dumps
    _loads: Callable[[bytes], Any] = orjson.loads
except ImportError:  # pragma: no cover - orjson is an optional speed-up

    def _dumps(obj: Any) -> bytes:
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()

    _loads = json.loads


JSON = "application/json"
MAX_BODY_BYTES = 512 * 1024 * 1024
# Audio bigger than this is decoded in a worker thread so the loop keeps serving.
_INLINE_DECODE_BYTES = 512 * 1024
_MALFORMED_BODY = b'{"id": "chatcmpl-malformed", "object": "chat.completion", "choices": [{"index": 0, "mess'
_INTERNAL_PATHS = frozenset({"/_stats", "/_reset_stats"})

_ERRORS: dict[int, tuple[str, str | None, str]] = {
    # status: (type, code, message) as the OpenAI API words them
    400: ("invalid_request_error", None, "Bad request."),
    401: ("invalid_request_error", "invalid_api_key", "Incorrect API key provided."),
    403: ("invalid_request_error", None, "Forbidden."),
    404: ("invalid_request_error", "model_not_found", "The model does not exist or you do not have access to it."),
    408: ("timeout", None, "Request timed out."),
    429: ("requests", "rate_limit_exceeded", "Rate limit reached for requests. Please try again later."),
    500: ("server_error", None, "The server had an error while processing your request. Sorry about that!"),
    502: ("server_error", None, "Bad gateway."),
    503: ("server_error", None, "The engine is currently overloaded, please try again later."),
    504: ("server_error", None, "Gateway timeout."),
}

TRANSCRIPTION_FORMATS = ("json", "text", "verbose_json", "srt", "vtt")


class BadRequest(Exception):
    """A request the real API would reject with 400; carries the offending param."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


def error_body(status: int, message: str | None = None, param: str | None = None, code: str | None = None) -> bytes:
    """An OpenAI-style error JSON body."""
    err_type, default_code, default = _ERRORS.get(
        status, ("server_error" if status >= 500 else "invalid_request_error", None, "Error.")
    )
    body = {"message": message or default, "type": err_type, "param": param, "code": code or default_code}
    return _dumps({"error": body})


def _words(text: str) -> int:
    return len(text.split())


class Stats:
    """Counters served at /_stats; plain ints and dicts, updated inline."""

    __slots__ = ("requests", "by_path", "by_status", "faults", "in_flight", "max_in_flight", "queued", "max_queued", "since")

    def __init__(self) -> None:
        self.in_flight = 0
        self.queued = 0
        self.reset()

    def reset(self) -> None:
        """Zero the counters; the gauges keep their current values."""
        self.requests = 0
        self.by_path: dict[str, int] = {}
        self.by_status: dict[str, int] = {}
        self.faults: dict[str, int] = {}
        self.max_in_flight = self.in_flight
        self.max_queued = self.queued
        self.since = time.time()

    def snapshot(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "by_path": dict(self.by_path),
            "by_status": dict(self.by_status),
            "faults": dict(self.faults),
            "in_flight": self.in_flight,
            "max_in_flight": self.max_in_flight,
            "queued": self.queued,
            "max_queued": self.max_queued,
            "since": self.since,
        }


class _Message:
    """What the server reads from one chat message."""

    __slots__ = ("role", "text", "audio")

    def __init__(self, role: str, text: str, audio: list[str]) -> None:
        self.role = role
        self.text = text
        self.audio = audio  # base64 strings, decoded only if needed


def _parse_messages(messages: Any) -> list[_Message]:
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty array.", "messages")
    parsed: list[_Message] = []
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict) or not isinstance(msg.get("role"), str):
            raise BadRequest(f"messages[{i}] must be an object with a 'role'.", f"messages.[{i}]")
        content = msg.get("content")
        audio: list[str] = []
        if content is None or isinstance(content, str):
            text = content or ""
        elif isinstance(content, list):
            texts: list[str] = []
            for j, part in enumerate(content):
                kind = part.get("type") if isinstance(part, dict) else None
                if kind == "text":
                    value = part.get("text")
                    if not isinstance(value, str):
                        raise BadRequest(f"messages[{i}].content[{j}].text must be a string.", f"messages.[{i}].content.[{j}].text")
                    texts.append(value)
                elif kind == "input_audio":
                    payload = part.get("input_audio")
                    data = payload.get("data") if isinstance(payload, dict) else None
                    if not isinstance(data, str):
                        raise BadRequest(
                            f"messages[{i}].content[{j}].input_audio.data must be a base64 string.",
                            f"messages.[{i}].content.[{j}].input_audio.data",
                        )
                    audio.append(data)
                elif kind == "audio_url":  # vLLM's form: a data: URL
                    payload = part.get("audio_url")
                    url = payload.get("url") if isinstance(payload, dict) else None
                    if not isinstance(url, str) or not url.startswith("data:") or "," not in url:
                        raise BadRequest(
                            f"messages[{i}].content[{j}].audio_url.url must be a base64 data: URL.",
                            f"messages.[{i}].content.[{j}].audio_url.url",
                        )
                    audio.append(url.split(",", 1)[1])
                elif kind in ("image_url", "input_image", "file"):
                    continue
                else:
                    raise BadRequest(f"messages[{i}].content[{j}] has unknown type {kind!r}.", f"messages.[{i}].content.[{j}].type")
            text = "\n".join(texts)
        else:
            raise BadRequest(f"messages[{i}].content must be a string or an array of parts.", f"messages.[{i}].content")
        parsed.append(_Message(msg["role"], text, audio))
    return parsed


async def _decode_audio(data: bytes) -> tuple[str, float]:
    if len(data) > _INLINE_DECODE_BYTES:
        return await asyncio.to_thread(audio_info, data)
    return audio_info(data)


def _b64(data: str, where: str) -> bytes:
    try:
        return base64.b64decode(data, validate=False)
    except (binascii.Error, ValueError) as exc:
        raise BadRequest(f"{where}: invalid base64 audio ({exc}).", where) from exc


class TestServerApp:
    """The handlers and the state they share; one per application."""

    __test__ = False  # not a pytest test class

    def __init__(self, script: Script) -> None:
        spec = script.spec
        self.script = script
        self.model = spec.model
        self.strict_model = spec.strict_model
        self.answers = script.answers
        self.token = spec.require_auth
        self.stats = Stats()
        self.log = RequestLog(spec.request_log) if spec.request_log is not None else None
        table = FaultTable(spec.faults) if spec.faults is not None else None
        self.faults = table if table is not None and table.active else None
        self.sem = asyncio.Semaphore(spec.max_concurrency) if spec.max_concurrency else None
        self.seed = spec.seed
        if isinstance(spec.latency_ms, tuple):
            self.latency_range: tuple[float, float] | None = (spec.latency_ms[0] / 1000, spec.latency_ms[1] / 1000)
            self.latency = 0.0
        else:
            self.latency_range = None
            self.latency = float(spec.latency_ms) / 1000
        self.count_seen = self.faults is not None or self.latency_range is not None
        self.hash_bodies = self.count_seen or self.log is not None
        self.need_audio = self.answers.needs_audio or self.log is not None
        self.seen: dict[str, int] = {}
        self.seq = 0
        self.id_prefix = secrets.token_hex(4)
        self.created = int(time.time())

    # -- helpers -------------------------------------------------------------------------

    def _next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def _count(self, path: str) -> None:
        st = self.stats
        st.requests += 1
        st.by_path[path] = st.by_path.get(path, 0) + 1

    def _count_status(self, status: int) -> None:
        key = str(status)
        by_status = self.stats.by_status
        by_status[key] = by_status.get(key, 0) + 1

    def _authorized(self, request: web.Request) -> bool:
        token = self.token
        if token is None:
            return True
        auth = request.headers.get("Authorization")
        if auth is not None and auth[:7].lower() == "bearer " and hmac.compare_digest(auth[7:].strip().encode(), token.encode()):
            return True
        key = request.headers.get("api-key")
        return key is not None and hmac.compare_digest(key.strip().encode(), token.encode())

    def _error(
        self,
        seq: int | None,
        path: str,
        model: str | None,
        sha: str | None,
        status: int,
        message: str | None = None,
        param: str | None = None,
        headers: Mapping[str, str] | None = None,
        fault: str | None = None,
        code: str | None = None,
    ) -> web.Response:
        self._count_status(status)
        if self.log is not None and seq is not None:
            self.log.write("completed", seq, path, model, sha, status, fault)
        body = error_body(status, message, param, code)
        return web.Response(status=status, body=body, content_type=JSON, headers=headers)

    def _model_error(self, model: str) -> str:
        return f"The model `{model}` does not exist or you do not have access to it."

    def _delay(self, sha: str | None, n: int) -> float:
        if self.latency_range is None:
            return self.latency
        low, high = self.latency_range
        return low + uniform(self.seed, "latency", sha or "", n) * (high - low)

    async def _serve(
        self,
        request: web.Request,
        seq: int,
        path: str,
        model: str,
        sha: str | None,
        make_ok: Callable[[], web.Response],
        extra: Callable[[], dict[str, Any]] | None,
    ) -> web.Response:
        """Queue for a slot, draw the fault, wait the latency, answer (or fail)."""
        st = self.stats
        sem = self.sem
        if sem is not None:
            st.queued += 1
            if st.queued > st.max_queued:
                st.max_queued = st.queued
            try:
                await sem.acquire()
            finally:
                st.queued -= 1
        st.in_flight += 1
        if st.in_flight > st.max_in_flight:
            st.max_in_flight = st.in_flight
        try:
            n = 0
            if self.count_seen:
                n = self.seen.get(sha, 0)  # type: ignore[arg-type]
                self.seen[sha] = n + 1  # type: ignore[index]
            fault = self.faults.draw(sha, n) if self.faults is not None else None  # type: ignore[arg-type]
            if fault is not None:
                st.faults[fault] = st.faults.get(fault, 0) + 1
                fault_status = int(fault) if fault.isdigit() else (200 if fault == "malformed" else None)
                if self.log is not None:
                    self.log.write("fault", seq, path, model, sha, fault_status, fault)
                if fault_status is not None and fault_status != 200:
                    headers = {"Retry-After": _seconds(self.faults.retry_after)} if fault_status == 429 else None  # type: ignore[union-attr]
                    return self._error(seq, path, model, sha, fault_status, headers=headers, fault=fault)
                if fault == "drop":
                    if request.transport is not None:
                        request.transport.abort()
                    if self.log is not None:
                        self.log.write("completed", seq, path, model, sha, None, fault)
                    # Nothing can be written any more; aiohttp notices the closed transport.
                    return web.Response(status=500)
                if fault == "hang":
                    await asyncio.sleep(self.faults.hang_seconds)  # type: ignore[union-attr]
            delay = self._delay(sha, n)
            if delay > 0:
                await asyncio.sleep(delay)
            if fault == "malformed":
                resp = web.Response(body=_MALFORMED_BODY, content_type=JSON)
            else:
                resp = make_ok()
            self._count_status(resp.status)
            if self.log is not None:
                self.log.write("completed", seq, path, model, sha, resp.status, fault, **(extra() if extra else {}))
            return resp
        finally:
            st.in_flight -= 1
            if sem is not None:
                sem.release()

    # -- chat ----------------------------------------------------------------------------

    async def chat_completions(self, request: web.Request) -> web.Response:
        path = request.path
        self._count(path)
        raw = await request.read()
        seq = self._next_seq()
        deployment = request.match_info.get("deployment")
        body: Any = None
        try:
            body = _loads(raw)
        except ValueError:
            pass
        model = deployment
        if model is None and isinstance(body, dict) and isinstance(body.get("model"), str):
            model = body["model"]
        sha = hashlib.sha256(raw).hexdigest() if self.hash_bodies else None
        log = self.log
        if log is not None:
            log.write("received", seq, path, model, sha)
        if not self._authorized(request):
            return self._error(seq, path, model, sha, 401)
        if not isinstance(body, dict):
            return self._error(seq, path, model, sha, 400, "We could not parse the JSON body of your request.")
        if model is None:
            return self._error(seq, path, model, sha, 400, "You must provide a model parameter.", "model")
        if self.strict_model and model != self.model:
            return self._error(seq, path, model, sha, 404, self._model_error(model), "model")
        try:
            messages = _parse_messages(body.get("messages"))
            n_choices, max_tokens = _choice_params(body)
            fingerprints: dict[int, list[str]] = {}
            if self.need_audio:
                for i, msg in enumerate(messages):
                    if msg.audio:
                        fps = []
                        for data in msg.audio:
                            try:
                                fps.append((await _decode_audio(_b64(data, f"messages.[{i}]")))[0])
                            except AudioDecodeError as exc:
                                raise BadRequest(f"messages[{i}]: {exc}", f"messages.[{i}].content") from exc
                        fingerprints[i] = fps
        except BadRequest as exc:
            return self._error(seq, path, model, sha, 400, exc.message, exc.param)

        user_index = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].role == "user"), None)
        user_text = messages[user_index].text if user_index is not None else ""
        system_text = "\n".join(m.text for m in messages if m.role in ("system", "developer"))
        audio_fps: list[str] = []
        if fingerprints:
            audio_fps = fingerprints.get(user_index, []) if user_index is not None else []  # type: ignore[arg-type]
            if not audio_fps:
                audio_fps = [fp for fps in fingerprints.values() for fp in fps]
        if self.answers.rules:
            answer = self.answers.resolve(model, user_text, system_text, audio_fps)
        else:
            answer = user_text if self.answers.default == ECHO else self.answers.default

        words = answer.split()
        finish = "stop"
        content = answer
        if max_tokens is not None and len(words) > max_tokens:
            words = words[:max_tokens]
            content = " ".join(words)
            finish = "length"
        prompt_tokens = sum(_words(m.text) for m in messages)
        completion_tokens = len(words)
        stream = body.get("stream") is True
        response_model = model

        def make_ok() -> web.Response:
            usage = {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens * n_choices,
                "total_tokens": prompt_tokens + completion_tokens * n_choices,
            }
            chat_id = f"chatcmpl-{self.id_prefix}{seq:08x}"
            created = int(time.time())
            if stream:
                return _stream_response(chat_id, created, response_model, content, finish, n_choices, usage, body)
            choices = [
                {"index": i, "message": {"role": "assistant", "content": content}, "logprobs": None, "finish_reason": finish}
                for i in range(n_choices)
            ]
            payload = {
                "id": chat_id,
                "object": "chat.completion",
                "created": created,
                "model": response_model,
                "choices": choices,
                "usage": usage,
            }
            return web.Response(body=_dumps(payload), content_type=JSON)

        extra = None
        if log is not None:

            def extra() -> dict[str, Any]:
                params = {k: v for k, v in body.items() if k not in ("messages", "model")}
                for key in ("temperature", "max_tokens", "top_p", "seed"):
                    params.setdefault(key, None)
                return {
                    "params": params,
                    "messages": [
                        {
                            "role": m.role,
                            "text": m.text,
                            "n_audio": len(m.audio),
                            "audio_fingerprints": fingerprints.get(i, []),
                        }
                        for i, m in enumerate(messages)
                    ],
                    "answer": content,
                }

        return await self._serve(request, seq, path, model, sha, make_ok, extra)

    # -- transcriptions ----------------------------------------------------------------

    async def transcriptions(self, request: web.Request) -> web.Response:
        path = request.path
        self._count(path)
        seq = self._next_seq()
        log = self.log
        model: str | None = request.match_info.get("deployment")
        try:
            form = await request.post()
        except Exception as exc:  # aiohttp raises assorted errors for a broken multipart body
            if log is not None:
                log.write("received", seq, path, model, None)
            return self._error(seq, path, model, None, 400, f"Could not parse multipart form: {exc}")
        upload = form.get("file")
        fields: dict[str, Any] = {}
        for key in form.keys():
            if key == "file":
                continue
            values = [v for v in form.getall(key) if isinstance(v, str)]
            if values:
                fields[key] = values[0] if len(values) == 1 else values
        if model is None and isinstance(fields.get("model"), str):
            model = fields["model"]
        audio: bytes | None = None
        if isinstance(upload, web.FileField):
            audio = upload.file.read()
        sha: str | None = None
        if self.hash_bodies:
            h = hashlib.sha256(hashlib.sha256(audio or b"").digest())
            for key in sorted(fields):
                h.update(f"\n{key}={fields[key]}".encode())
            sha = h.hexdigest()
        if log is not None:
            log.write("received", seq, path, model, sha)
        if not self._authorized(request):
            return self._error(seq, path, model, sha, 401)
        if audio is None:
            return self._error(seq, path, model, sha, 400, "You must provide a 'file' (an audio file upload).", "file")
        if model is None:
            return self._error(seq, path, model, sha, 400, "You must provide a model parameter.", "model")
        if self.strict_model and model != self.model:
            return self._error(seq, path, model, sha, 404, self._model_error(model), "model")
        response_format = fields.get("response_format", "json")
        if response_format not in TRANSCRIPTION_FORMATS:
            return self._error(
                seq, path, model, sha, 400,
                f"response_format must be one of {', '.join(TRANSCRIPTION_FORMATS)}.", "response_format",
            )
        prompt = fields.get("prompt") if isinstance(fields.get("prompt"), str) else ""
        fingerprint: str | None = None
        duration = 0.0
        if self.need_audio or response_format in ("verbose_json", "srt", "vtt"):
            try:
                fingerprint, duration = await _decode_audio(audio)
            except AudioDecodeError as exc:
                return self._error(seq, path, model, sha, 400, f"Invalid file format: {exc}", "file")
        if self.answers.rules:
            answer = self.answers.resolve(model, prompt, "", [fingerprint] if fingerprint else [])  # type: ignore[arg-type]
        else:
            answer = prompt if self.answers.default == ECHO else self.answers.default  # type: ignore[assignment]
        language = fields.get("language") or "english"
        temperature = fields.get("temperature")

        def make_ok() -> web.Response:
            if response_format == "text":
                return web.Response(text=answer, content_type="text/plain")
            if response_format == "json":
                return web.Response(body=_dumps({"text": answer}), content_type=JSON)
            if response_format == "verbose_json":
                segment = {
                    "id": 0, "seek": 0, "start": 0.0, "end": round(duration, 3), "text": answer, "tokens": [],
                    "temperature": float(temperature) if _is_float(temperature) else 0.0,
                    "avg_logprob": 0.0, "compression_ratio": 1.0, "no_speech_prob": 0.0,
                }
                payload = {"task": "transcribe", "language": language, "duration": round(duration, 3), "text": answer, "segments": [segment]}
                return web.Response(body=_dumps(payload), content_type=JSON)
            end = _timestamp(duration, "," if response_format == "srt" else ".")
            if response_format == "srt":
                return web.Response(text=f"1\n00:00:00,000 --> {end}\n{answer}\n\n", content_type="text/plain")
            return web.Response(text=f"WEBVTT\n\n00:00:00.000 --> {end}\n{answer}\n\n", content_type="text/vtt")

        extra = None
        if log is not None:

            def extra() -> dict[str, Any]:
                return {
                    "form": fields,
                    "filename": getattr(upload, "filename", None),
                    "audio_fingerprint": fingerprint,
                    "answer": answer,
                }

        return await self._serve(request, seq, path, model, sha, make_ok, extra)

    # -- the rest ------------------------------------------------------------------------

    def _model_entry(self, model: str) -> dict[str, Any]:
        return {"id": model, "object": "model", "created": self.created, "owned_by": "evalkit-test-server"}

    async def models(self, request: web.Request) -> web.Response:
        self._count(request.path)
        if not self._authorized(request):
            return self._error(None, request.path, None, None, 401)
        self._count_status(200)
        return web.Response(body=_dumps({"object": "list", "data": [self._model_entry(self.model)]}), content_type=JSON)

    async def model_info(self, request: web.Request) -> web.Response:
        self._count(request.path)
        if not self._authorized(request):
            return self._error(None, request.path, None, None, 401)
        name = request.match_info["model"]
        if name != self.model:
            return self._error(None, request.path, name, None, 404, self._model_error(name), "model")
        self._count_status(200)
        return web.Response(body=_dumps(self._model_entry(name)), content_type=JSON)

    async def health(self, request: web.Request) -> web.Response:
        self._count(request.path)
        self._count_status(200)
        return web.Response(body=b'{"status":"ok"}', content_type=JSON)

    async def get_stats(self, request: web.Request) -> web.Response:
        return web.Response(body=_dumps(self.stats.snapshot()), content_type=JSON)

    async def reset_stats(self, request: web.Request) -> web.Response:
        """Zero the counters; ``?faults=1`` also forgets seen bodies (fault draws restart)."""
        self.stats.reset()
        if request.query.get("faults") in ("1", "true", "yes"):
            self.seen.clear()
        return web.Response(body=_dumps(self.stats.snapshot()), content_type=JSON)

    async def not_found(self, request: web.Request) -> web.Response:
        self._count(request.path)
        return self._error(None, request.path, None, None, 404, f"Unknown path {request.method} {request.path}.", code="not_found")

    async def close(self, app: web.Application) -> None:
        if self.log is not None:
            self.log.close()


def _choice_params(body: dict[str, Any]) -> tuple[int, int | None]:
    n = body.get("n", 1)
    if n is None:
        n = 1
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= 128:
        raise BadRequest("'n' must be an integer between 1 and 128.", "n")
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is not None and (not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1):
        raise BadRequest("'max_tokens' must be a positive integer.", "max_tokens")
    return n, max_tokens


def _stream_response(
    chat_id: str, created: int, model: str, content: str, finish: str, n: int, usage: dict[str, int], body: dict[str, Any]
) -> web.Response:
    """A whole SSE stream in one body: role+content chunk, finish chunk, optional usage, [DONE]."""
    base = {"id": chat_id, "object": "chat.completion.chunk", "created": created, "model": model}
    events: list[bytes] = []
    for i in range(n):
        delta = {"role": "assistant", "content": content}
        events.append(_dumps({**base, "choices": [{"index": i, "delta": delta, "logprobs": None, "finish_reason": None}]}))
        events.append(_dumps({**base, "choices": [{"index": i, "delta": {}, "logprobs": None, "finish_reason": finish}]}))
    options = body.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage"):
        events.append(_dumps({**base, "choices": [], "usage": usage}))
    payload = b"".join(b"data: " + e + b"\n\n" for e in events) + b"data: [DONE]\n\n"
    return web.Response(body=payload, content_type="text/event-stream", headers={"Cache-Control": "no-cache"})


def _is_float(value: Any) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def _timestamp(seconds: float, sep: str) -> str:
    ms = int(round(seconds * 1000))
    h, rem = divmod(ms, 3_600_000)
    m, rem = divmod(rem, 60_000)
    s, ms = divmod(rem, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}{sep}{ms:03d}"


def _seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


TEST_SERVER_KEY: web.AppKey[TestServerApp] = web.AppKey("evalkit_test_server", TestServerApp)


def build_app(script: Script | Mapping[str, Any] | str | Path | None = None, **overrides: Any) -> web.Application:
    """The aiohttp application for a script (a :class:`Script`, a dict, a file path or None).

    For in-process use (``aiohttp.test_utils`` or an ``AppRunner``); must be
    called with an event loop running or about to run the app. The handler
    object is at ``app[TEST_SERVER_KEY]`` (its ``.stats`` for assertions).
    """
    if not isinstance(script, Script):
        script = load_script(script, overrides)
    elif overrides:
        raise TypeError("overrides cannot be combined with an already loaded Script")
    handlers = TestServerApp(script)
    app = web.Application(client_max_size=MAX_BODY_BYTES)
    app[TEST_SERVER_KEY] = handlers
    r = app.router
    r.add_post("/v1/chat/completions", handlers.chat_completions)
    r.add_post("/openai/deployments/{deployment}/chat/completions", handlers.chat_completions)
    r.add_post("/v1/audio/transcriptions", handlers.transcriptions)
    r.add_post("/openai/deployments/{deployment}/audio/transcriptions", handlers.transcriptions)
    r.add_get("/v1/models", handlers.models)
    r.add_get("/v1/models/{model}", handlers.model_info)
    r.add_get("/health", handlers.health)
    r.add_get("/_stats", handlers.get_stats)
    r.add_post("/_reset_stats", handlers.reset_stats)
    r.add_route("*", "/{tail:.*}", handlers.not_found)
    app.on_cleanup.append(handlers.close)
    return app


# -- process entry point -------------------------------------------------------------------


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _write_port_file(path: Path, port: int) -> None:
    """Write atomically so a reader polling the file never sees it empty."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(f"{port}\n", encoding="utf-8")
    os.replace(tmp, path)


async def serve(script: Script, host: str = "127.0.0.1", port: int = 0, port_file: Path | None = None) -> None:
    """Serve until SIGTERM/SIGINT, announcing the bound port on stdout."""
    app = build_app(script)
    runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=2048, reuse_address=True)
    await site.start()
    bound = runner.addresses[0][1]
    if port_file is not None:
        _write_port_file(port_file, bound)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    sys.stdout.write(f"LISTENING {_url(host, bound)}\n")
    sys.stdout.flush()
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m evalkit.testing.server", description=__doc__.split("\n\n")[0])
    p.add_argument("--script", type=Path, default=None, help="YAML or JSON script (defaults apply without one)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0 picks a free port")
    p.add_argument("--port-file", type=Path, default=None, help="write the bound port here once listening")
    p.add_argument("--latency-ms", default=None, help='a number, or "min,max" for a seeded uniform draw')
    p.add_argument("--max-concurrency", type=int, default=None)
    p.add_argument("--default-answer", default=None)
    p.add_argument("--request-log", type=Path, default=None)
    p.add_argument("--model", default=None)
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    overrides = {
        "latency_ms": args.latency_ms,
        "max_concurrency": args.max_concurrency,
        "default_answer": args.default_answer,
        "request_log": args.request_log,
        "model": args.model,
    }
    try:
        script = load_script(args.script, overrides)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        import uvloop
    except ImportError:
        uvloop = None  # type: ignore[assignment]
    try:
        if uvloop is not None:
            uvloop.run(serve(script, args.host, args.port, args.port_file))
        else:
            asyncio.run(serve(script, args.host, args.port, args.port_file))
    except OSError as exc:
        print(f"error: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

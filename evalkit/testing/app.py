"""The test server's aiohttp application: routes, and the state the handlers share.

Every scripted request goes the same way: read and identify it (log
"received"), reject what the real API would reject (401/400/404), resolve the
answer (never dependent on faults), then :meth:`TestServerApp.serve`: wait for
a slot, draw the fault, sleep the latency, answer (log "completed"). Work a
config doesn't ask for is skipped: bodies are hashed only for faults, latency
ranges or the log; audio is decoded only for audio rules, the log or timed
transcription formats.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import hashlib
import hmac
import re
import secrets
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from aiohttp import web

from evalkit.testing import chat, images, transcription
from evalkit.testing.audio import AudioDecodeError, audio_info
from evalkit.testing.faults import FaultTable, uniform
from evalkit.testing.hostile import HOSTILE_KINDS, hostile_response
from evalkit.testing.requestlog import RequestLog
from evalkit.testing.script import ECHO, Script, load_script
from evalkit.testing.stats import Stats
from evalkit.testing.wire import JSON, BadRequest, dumps, error_body, loads

MAX_BODY_BYTES = 512 * 1024 * 1024
# Audio bigger than this is decoded in a worker thread so the loop keeps serving.
_INLINE_DECODE_BYTES = 512 * 1024
_MALFORMED_BODY = b'{"id": "chatcmpl-malformed", "object": "chat.completion", "choices": [{"index": 0, "mess'


async def _decode_audio(data: bytes) -> tuple[str, float]:
    """Fingerprint and duration, off the loop for big files."""
    if len(data) > _INLINE_DECODE_BYTES:
        return await asyncio.to_thread(audio_info, data)
    return audio_info(data)


def _b64decode(data: str, where: str) -> bytes:
    try:
        return base64.b64decode(data, validate=False)
    except (binascii.Error, ValueError) as exc:
        raise BadRequest(f"{where}: invalid base64 audio ({exc}).", where) from exc


def _seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


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
        self.echo_auth = spec.echo_auth
        self.stats = Stats()
        self.log = RequestLog(spec.request_log) if spec.request_log is not None else None
        table = FaultTable(spec.faults) if spec.faults is not None else None
        self.faults = table if table is not None and table.active else None
        self.hang_seconds = spec.faults.hang_seconds if spec.faults is not None else 30.0
        self.sem = asyncio.Semaphore(spec.max_concurrency) if spec.max_concurrency else None
        self.seed = spec.seed
        self.latency_range: tuple[float, float] | None = None
        self.latency = 0.0
        if isinstance(spec.latency_ms, tuple):
            self.latency_range = (spec.latency_ms[0] / 1000, spec.latency_ms[1] / 1000)
        else:
            self.latency = float(spec.latency_ms) / 1000
        self.count_seen = self.faults is not None or self.latency_range is not None
        self.hash_bodies = self.count_seen or self.log is not None
        self.received_audio = spec.received_audio
        if self.received_audio is not None:
            self.received_audio.mkdir(parents=True, exist_ok=True)
        self.need_audio = self.answers.needs_audio or self.log is not None or self.received_audio is not None
        self.image_answer = spec.image_answer
        self.seen: dict[str, int] = {}
        self.seq = 0
        self.id_prefix = secrets.token_hex(4)
        self.created = int(time.time())

    # -- shared steps -------------------------------------------------------------------

    def _next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def _authorized(self, request: web.Request) -> bool:
        """``Authorization: Bearer <token>`` or Azure's ``api-key: <token>``."""
        token = self.token
        if token is None:
            return True
        auth = request.headers.get("Authorization")
        if (
            auth is not None
            and auth[:7].lower() == "bearer "
            and hmac.compare_digest(auth[7:].strip().encode(), token.encode())
        ):
            return True
        key = request.headers.get("api-key")
        return key is not None and hmac.compare_digest(key.strip().encode(), token.encode())

    def _denied(self, request: web.Request) -> str | None:
        """The 401 message: with ``echo_auth``, what a careless server says, the credentials it got and the URL."""
        if not self.echo_auth:
            return None
        if self.echo_auth == "raw":
            raw = dict((name.lower(), value) for name, value in request.raw_headers)
            given = raw.get(b"authorization") or raw.get(b"api-key") or b"(none)"
            return f"Incorrect API key provided: {given.decode('latin-1')} for {request.raw_path}"
        got = request.headers.get("Authorization") or request.headers.get("api-key") or "(none)"
        return f"Incorrect API key provided: {got} for {request.path_qs}"

    def _error(
        self,
        seq: int | None,
        path: str,
        model: str | None,
        sha: str | None,
        status: int,
        message: str | None = None,
        param: str | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        fault: str | None = None,
        code: str | None = None,
    ) -> web.Response:
        self.stats.count_status(status)
        if self.log is not None and seq is not None:
            self.log.write("completed", seq, path, model, sha, status, fault)
        body = error_body(status, message, param, code)
        return web.Response(status=status, body=body, content_type=JSON, headers=headers)

    def _check_model(self, seq: int, path: str, model: str | None, sha: str | None) -> web.Response | None:
        if model is None:
            return self._error(seq, path, model, sha, 400, "You must provide a model parameter.", "model")
        if self.strict_model and model != self.model:
            message = f"The model `{model}` does not exist or you do not have access to it."
            return self._error(seq, path, model, sha, 404, message, "model")
        return None

    def _delay(self, sha: str | None, n: int) -> float:
        if self.latency_range is None:
            return self.latency
        low, high = self.latency_range
        return low + uniform(self.seed, "latency", sha or "", n) * (high - low)

    async def serve(
        self,
        request: web.Request,
        seq: int,
        path: str,
        model: str,
        sha: str | None,
        make_ok: Callable[[], web.Response],
        log_extra: Callable[[], dict[str, Any]] | None,
        pinned: str | None = None,
    ) -> web.StreamResponse:
        """Wait for a slot, draw the fault (``pinned``: the matching rule's), sleep the latency, answer (or fail)."""
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
                assert sha is not None
                n = self.seen.get(sha, 0)
                self.seen[sha] = n + 1
            fault: str | None = pinned
            if fault is None and self.faults is not None:
                assert sha is not None
                fault = self.faults.draw(sha, n)
            if fault is not None:
                early = self._fault(request, seq, path, model, sha, fault)
                if early is not None:
                    return early
                if fault == "hang":
                    await asyncio.sleep(self.hang_seconds)
            delay = self._delay(sha, n)
            if delay > 0:
                await asyncio.sleep(delay)
            resp: web.StreamResponse
            if fault == "malformed":
                resp = web.Response(body=_MALFORMED_BODY, content_type=JSON)
            elif fault in HOSTILE_KINDS:
                ok = make_ok().body
                ok_body = ok if isinstance(ok, bytes) else b""
                resp = await hostile_response(
                    request, fault, f"chatcmpl-{self.id_prefix}{seq:08x}", ok_body, self.script.spec.redirect_to
                )
            else:
                resp = make_ok()
            st.count_status(resp.status)
            if self.log is not None:
                self.log.write(
                    "completed", seq, path, model, sha, resp.status, fault, **(log_extra() if log_extra else {})
                )
            return resp
        finally:
            st.in_flight -= 1
            if sem is not None:
                sem.release()

    def _fault(
        self, request: web.Request, seq: int, path: str, model: str, sha: str | None, fault: str
    ) -> web.StreamResponse | None:
        """Log and apply a fault; returns the response for faults that end the request at once."""
        self.stats.count_fault(fault)
        status = int(fault) if fault.isdigit() else (200 if fault == "malformed" else None)
        if self.log is not None:
            self.log.write("fault", seq, path, model, sha, status, fault)
        if status is not None and status != 200:
            retry_after = self.faults.retry_after if self.faults is not None else 1.0
            headers = {"Retry-After": _seconds(retry_after)} if status == 429 else None
            return self._error(seq, path, model, sha, status, headers=headers, fault=fault)
        if fault == "drop":
            if request.transport is not None:
                request.transport.abort()
            if self.log is not None:
                self.log.write("completed", seq, path, model, sha, None, fault)
            # Nothing reaches the client any more: aiohttp finds the transport closed.
            return web.Response(status=500)
        return None

    # -- chat -------------------------------------------------------------------------

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        self.stats.count_request(path)
        raw = await request.read()
        seq = self._next_seq()
        body: Any = None
        with contextlib.suppress(ValueError):
            body = loads(raw)
        model = request.match_info.get("deployment")
        if model is None and isinstance(body, dict) and isinstance(body.get("model"), str):
            model = body["model"]
        sha = hashlib.sha256(raw).hexdigest() if self.hash_bodies else None
        log = self.log
        if log is not None:
            log.write("received", seq, path, model, sha)
        if not self._authorized(request):
            return self._error(seq, path, model, sha, 401, self._denied(request))
        if not isinstance(body, dict):
            return self._error(seq, path, model, sha, 400, "We could not parse the JSON body of your request.")
        rejected = self._check_model(seq, path, model, sha)
        if rejected is not None:
            return rejected
        assert model is not None
        try:
            messages = chat.parse_messages(body.get("messages"))
            n_choices, limit = chat.choice_params(body)
            fingerprints = await self._fingerprints(messages) if self.need_audio else {}
        except BadRequest as exc:
            return self._error(seq, path, model, sha, 400, exc.message, exc.param)

        user = chat.last_user_index(messages)
        user_text = messages[user].text if user is not None else ""
        pinned: str | None = None
        rule = None
        if self.answers.rules:
            audio_fps = fingerprints.get(user, []) if user is not None else []
            if not audio_fps:
                audio_fps = [fp for fps in fingerprints.values() for fp in fps]
            rule = self.answers.resolve_rule(model, user_text, chat.system_text(messages), audio_fps)
        if rule is not None:
            answer, pinned = rule.answer, rule.fault
        elif self.image_answer is not None and user is not None and messages[user].images:
            try:
                answer = await asyncio.to_thread(self._image_answer, messages[user].images, user)
            except BadRequest as exc:
                return self._error(seq, path, model, sha, 400, exc.message, exc.param)
        else:
            answer = user_text if self.answers.default == ECHO else self.answers.default
        content, completion_tokens, finish = chat.truncate(answer, limit)
        prompt_tokens = sum(len(m.text.split()) for m in messages)
        extra: dict[str, Any] | None = None
        if isinstance(body.get("prompt_logprobs"), int) and not isinstance(body["prompt_logprobs"], bool):
            # vLLM's extension: the log-probabilities of the prompt's own tokens (likelihood scoring with media)
            scored = chat.prompt_logprobs(messages, self.script.spec.token_logprobs)
            extra, prompt_tokens = {"prompt_logprobs": scored}, len(scored)
        stream = body.get("stream") is True

        def make_ok() -> web.Response:
            chat_id = f"chatcmpl-{self.id_prefix}{seq:08x}"
            usage = chat.usage(prompt_tokens, completion_tokens * n_choices, self.script.spec.usage)
            created = int(time.time())
            if stream:
                options = body.get("stream_options")
                include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
                payload = chat.stream_body(chat_id, created, model, content, finish, n_choices, usage, include_usage)
                return web.Response(
                    body=payload, content_type="text/event-stream", headers={"Cache-Control": "no-cache"}
                )
            payload = chat.completion_body(chat_id, created, model, content, finish, n_choices, usage, extra)
            return web.Response(body=payload, content_type=JSON)

        log_extra = None
        if log is not None:

            def log_extra() -> dict[str, Any]:
                seen = {i: [images.header_info(url) for url in m.images] for i, m in enumerate(messages) if m.images}
                record = chat.log_record(body, messages, fingerprints, content, seen)
                if self.script.spec.log_bodies:
                    record["body"] = chat.body_as_sent(body)
                return record

        return await self.serve(request, seq, path, model, sha, make_ok, log_extra, pinned)

    def _image_answer(self, urls: list[str], message: int) -> str:
        """One word per image of the last user message, from its decoded pixels (blocking: run in a thread)."""
        assert self.image_answer is not None
        words = []
        for j, url in enumerate(urls):
            where = f"messages.[{message}].content image {j}"
            words.append(images.describe(images.image_bytes(url, where), self.image_answer, where))
        return " ".join(words)

    def _keep_audio(self, data: bytes) -> None:
        """``received_audio``: the file as it arrived, named by its sha256 (what a sent entry records)."""
        if self.received_audio is not None:
            (self.received_audio / f"{hashlib.sha256(data).hexdigest()}.wav").write_bytes(data)

    async def _fingerprints(self, messages: list[chat.Message]) -> dict[int, list[str]]:
        """Audio fingerprints per message index (only messages with audio)."""
        result: dict[int, list[str]] = {}
        for i, msg in enumerate(messages):
            if msg.audio:
                fps: list[str] = []
                for j, data in enumerate(msg.audio):
                    where = f"messages.[{i}].content"
                    try:
                        raw = _b64decode(data, where)
                        self._keep_audio(raw)
                        fps.append((await _decode_audio(raw))[0])
                    except AudioDecodeError as exc:
                        raise BadRequest(f"messages[{i}] audio {j}: {exc}", where) from exc
                result[i] = fps
        return result

    # -- completions (echo + logprobs, for likelihood scoring) ----------------------------

    async def completions(self, request: web.Request) -> web.StreamResponse:
        """Legacy completions: the prompt echoed with per-token log-probabilities, then one token " the".

        Tokens are whitespace-led words (as GPT-style tokenizers cut English); a
        word's log-probability comes from the script's ``token_logprobs``, else -1.0;
        the first token has none, as on vLLM and OpenAI.
        """
        path = request.path
        self.stats.count_request(path)
        raw = await request.read()
        seq = self._next_seq()
        body: Any = None
        with contextlib.suppress(ValueError):
            body = loads(raw)
        model = body.get("model") if isinstance(body, dict) and isinstance(body.get("model"), str) else None
        sha = hashlib.sha256(raw).hexdigest() if self.hash_bodies else None
        if self.log is not None:
            self.log.write("received", seq, path, model, sha)
        if not self._authorized(request):
            return self._error(seq, path, model, sha, 401, self._denied(request))
        if not isinstance(body, dict) or not isinstance(body.get("prompt"), str):
            return self._error(seq, path, model, sha, 400, "`prompt` must be a string.", "prompt")
        rejected = self._check_model(seq, path, model, sha)
        if rejected is not None:
            return rejected
        assert model is not None
        prompt: str = body["prompt"]
        table = self.script.spec.token_logprobs
        tokens: list[str] = []
        offsets: list[int] = []
        values: list[float | None] = []
        for match in re.finditer(r"\s*\S+", prompt):
            tokens.append(match.group())
            offsets.append(match.start())
            values.append(table.get(match.group().strip(), -1.0))
        if values:
            values[0] = None
        echo = body.get("echo") is True
        text = (prompt if echo else "") + " the"
        if body.get("logprobs") is not None:
            tokens, offsets, values = (tokens, offsets, values) if echo else ([], [], [])
            logprobs: dict[str, Any] | None = {
                "tokens": [*tokens, " the"],
                "token_logprobs": [*values, -1.0],
                "text_offset": [*offsets, len(prompt)],
                "top_logprobs": None,
            }
        else:
            logprobs = None

        def make_ok() -> web.Response:
            payload = {
                "id": f"cmpl-{self.id_prefix}{seq:08x}",
                "object": "text_completion",
                "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "text": text, "logprobs": logprobs, "finish_reason": "length"}],
            }
            payload = chat.with_usage(payload, chat.usage(len(tokens), 1, self.script.spec.usage))
            return web.Response(body=dumps(payload), content_type=JSON)

        def log_extra() -> dict[str, Any]:
            return {"prompt": prompt}

        return await self.serve(request, seq, path, model, sha, make_ok, log_extra if self.log is not None else None)

    # -- transcriptions -----------------------------------------------------------------

    async def transcriptions(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        self.stats.count_request(path)
        seq = self._next_seq()
        log = self.log
        model: str | None = request.match_info.get("deployment")
        try:
            form = await request.post()
        except Exception as exc:  # aiohttp raises assorted errors for a broken multipart body
            if log is not None:
                log.write("received", seq, path, model, None)
            return self._error(seq, path, model, None, 400, f"Could not parse the multipart form: {exc}")
        fields = transcription.form_fields(form)
        if model is None and isinstance(fields.get("model"), str):
            model = fields["model"]
        upload = form.get("file")
        audio = upload.file.read() if isinstance(upload, web.FileField) else None
        sha = transcription.body_key(audio, fields) if self.hash_bodies else None
        if log is not None:
            log.write("received", seq, path, model, sha)
        if not self._authorized(request):
            return self._error(seq, path, model, sha, 401, self._denied(request))
        if audio is None:
            return self._error(seq, path, model, sha, 400, "You must provide a 'file' (an audio file upload).", "file")
        rejected = self._check_model(seq, path, model, sha)
        if rejected is not None:
            return rejected
        assert model is not None
        response_format = fields.get("response_format") or "json"
        if response_format not in transcription.FORMATS:
            message = f"response_format must be one of {', '.join(transcription.FORMATS)}."
            return self._error(seq, path, model, sha, 400, message, "response_format")
        prompt = fields.get("prompt")
        prompt = prompt if isinstance(prompt, str) else ""
        fingerprint: str | None = None
        duration = 0.0
        if self.received_audio is not None:
            self._keep_audio(audio)
        if self.need_audio or response_format in transcription.NEEDS_DURATION:
            try:
                fingerprint, duration = await _decode_audio(audio)
            except AudioDecodeError as exc:
                return self._error(seq, path, model, sha, 400, f"Invalid file format: {exc}", "file")
        if self.answers.rules:
            answer = self.answers.resolve(model, prompt, "", [fingerprint] if fingerprint else [])
        else:
            answer = prompt if self.answers.default == ECHO else self.answers.default

        def make_ok() -> web.Response:
            return transcription.response(answer, response_format, duration, fields)

        log_extra = None
        if log is not None:

            def log_extra() -> dict[str, Any]:
                filename = getattr(upload, "filename", None)
                return {"form": fields, "filename": filename, "audio_fingerprint": fingerprint, "answer": answer}

        return await self.serve(request, seq, path, model, sha, make_ok, log_extra)

    # -- the rest -----------------------------------------------------------------------

    def _model_entry(self, model: str) -> dict[str, Any]:
        return {"id": model, "object": "model", "created": self.created, "owned_by": "evalkit-test-server"}

    async def models(self, request: web.Request) -> web.Response:
        self.stats.count_request(request.path)
        if not self._authorized(request):
            return self._error(None, request.path, None, None, 401, self._denied(request))
        self.stats.count_status(200)
        return web.Response(body=dumps({"object": "list", "data": [self._model_entry(self.model)]}), content_type=JSON)

    async def model_info(self, request: web.Request) -> web.Response:
        self.stats.count_request(request.path)
        if not self._authorized(request):
            return self._error(None, request.path, None, None, 401, self._denied(request))
        name = request.match_info["model"]
        if name != self.model:
            message = f"The model `{name}` does not exist or you do not have access to it."
            return self._error(None, request.path, name, None, 404, message, "model")
        self.stats.count_status(200)
        return web.Response(body=dumps(self._model_entry(name)), content_type=JSON)

    async def health(self, request: web.Request) -> web.Response:
        self.stats.count_request(request.path)
        self.stats.count_status(200)
        return web.Response(body=b'{"status":"ok"}', content_type=JSON)

    async def get_stats(self, request: web.Request) -> web.Response:
        return web.Response(body=dumps(self.stats.snapshot()), content_type=JSON)

    async def reset_stats(self, request: web.Request) -> web.Response:
        """Zero the counters; ``?faults=1`` also forgets seen bodies (draws restart as on a fresh server)."""
        self.stats.reset()
        if request.query.get("faults") in ("1", "true", "yes"):
            self.seen.clear()
        return web.Response(body=dumps(self.stats.snapshot()), content_type=JSON)

    async def not_found(self, request: web.Request) -> web.Response:
        self.stats.count_request(request.path)
        path = request.raw_path if self.echo_auth == "raw" else request.path  # raw: as sent, percent-encoded
        message = f"Unknown path {request.method} {path}."
        return self._error(None, request.path, None, None, 404, message, code="not_found")

    async def close(self, app: web.Application) -> None:
        if self.log is not None:
            self.log.close()


TEST_SERVER_KEY: web.AppKey[TestServerApp] = web.AppKey("evalkit_test_server", TestServerApp)


def build_app(script: Script | Mapping[str, Any] | str | Path | None = None, **overrides: Any) -> web.Application:
    """The aiohttp application for a script (a :class:`Script`, a dict, a file path or None).

    For in-process use (``aiohttp.test_utils.TestServer`` or an ``AppRunner``).
    ``overrides`` set script keys. The handler object, with its live
    ``.stats``, is ``app[TEST_SERVER_KEY]``.
    """
    if not isinstance(script, Script):
        script = load_script(script, overrides)
    elif overrides:
        raise TypeError("overrides cannot be combined with an already loaded Script; pass a dict or path")
    handlers = TestServerApp(script)
    app = web.Application(client_max_size=MAX_BODY_BYTES)
    app[TEST_SERVER_KEY] = handlers
    r = app.router
    r.add_post("/v1/chat/completions", handlers.chat_completions)
    r.add_post("/openai/deployments/{deployment}/chat/completions", handlers.chat_completions)
    r.add_post("/v1/completions", handlers.completions)
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

"""Transcriptions: the multipart form in, the five OpenAI response formats out."""

from __future__ import annotations

import hashlib
from typing import Any

from aiohttp import web
from multidict import MultiDictProxy

from evalkit.testing.wire import JSON, dumps

FORMATS = ("json", "text", "verbose_json", "srt", "vtt")
NEEDS_DURATION = frozenset({"verbose_json", "srt", "vtt"})


def form_fields(form: MultiDictProxy[Any]) -> dict[str, Any]:
    """Every text field but the file; a field sent twice becomes a list."""
    fields: dict[str, Any] = {}
    for key in dict.fromkeys(form.keys()):
        if key == "file":
            continue
        values = [v for v in form.getall(key) if isinstance(v, str)]
        if values:
            fields[key] = values[0] if len(values) == 1 else values
    return fields


def body_key(audio: bytes | None, fields: dict[str, Any]) -> str:
    """The identity of a transcription request for fault draws and the log.

    The raw multipart body cannot serve (its boundary is random per request),
    so: sha256 over sha256(audio file bytes) then "\\n{key}={value}" per field,
    keys sorted.
    """
    h = hashlib.sha256(hashlib.sha256(audio or b"").digest())
    for key in sorted(fields):
        h.update(f"\n{key}={fields[key]}".encode())
    return h.hexdigest()


def _timestamp(seconds: float, sep: str) -> str:
    ms = int(round(seconds * 1000))
    h, rem = divmod(ms, 3_600_000)
    m, rem = divmod(rem, 60_000)
    s, ms = divmod(rem, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}{sep}{ms:03d}"


def _float_or(value: Any, default: float) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return default


def response(answer: str, response_format: str, duration: float, fields: dict[str, Any]) -> web.Response:
    """The response in the requested format (one segment spanning the clip where timed)."""
    if response_format == "json":
        return web.Response(body=dumps({"text": answer}), content_type=JSON)
    if response_format == "text":
        return web.Response(text=answer, content_type="text/plain")
    duration = round(duration, 3)
    if response_format == "verbose_json":
        segment = {
            "id": 0,
            "seek": 0,
            "start": 0.0,
            "end": duration,
            "text": answer,
            "tokens": [],
            "temperature": _float_or(fields.get("temperature"), 0.0),
            "avg_logprob": 0.0,
            "compression_ratio": 1.0,
            "no_speech_prob": 0.0,
        }
        payload = {
            "task": "transcribe",
            "language": fields.get("language") or "english",
            "duration": duration,
            "text": answer,
            "segments": [segment],
        }
        return web.Response(body=dumps(payload), content_type=JSON)
    if response_format == "srt":
        return web.Response(
            text=f"1\n00:00:00,000 --> {_timestamp(duration, ',')}\n{answer}\n\n", content_type="text/plain"
        )
    return web.Response(
        text=f"WEBVTT\n\n00:00:00.000 --> {_timestamp(duration, '.')}\n{answer}\n\n", content_type="text/vtt"
    )

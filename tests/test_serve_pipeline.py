"""evalkit serve keeps the model busy: preparation off the model thread and overlapped, buckets, same answers.

Real tiny models (the tiny Llama and the tiny Qwen2-Audio, built here), a real
in-process aiohttp server and real HTTP clients. The spies below wrap the
backend's own functions (they call them) to note which thread ran each stage
and in what order; nothing is timed.
"""

from __future__ import annotations

import asyncio
import base64
import importlib.util
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from helpers import serve_app, speech_clips

_MISSING = [name for name in ("torch", "transformers", "tokenizers") if importlib.util.find_spec(name) is None]
pytestmark = pytest.mark.skipif(
    bool(_MISSING),
    reason=f"needs {', '.join(_MISSING)} (pip install torch==2.13.0 transformers tokenizers, or bash "
    ".ci/install_vllm.sh)",
)

from evalkit.serve.app import STATE, attach_backend, create_app  # noqa: E402
from evalkit.serve.backends.base import Backend, ChatInput, GenerationParams  # noqa: E402

MAX_BATCH = 4


def _as_served(clip: Any) -> Any:
    """The clip as the server will see it: through 16-bit WAV and back."""
    from evalkit.data.audio.decode import Audio, load_16k_mono, wav_bytes

    return load_16k_mono(Audio(data=wav_bytes(clip)))


def _wav_b64(clip: Any) -> str:
    from evalkit.data.audio.decode import wav_bytes

    return base64.b64encode(wav_bytes(clip)).decode("ascii")


class Spy:
    """Wraps a function: calls it, and notes (stage, thread name, start, end) for each call."""

    def __init__(self, events: list[tuple[str, str, float, float]], stage: str, fn: Callable[..., Any]) -> None:
        self.events, self.stage, self.fn = events, stage, fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        began = time.monotonic()
        try:
            return self.fn(*args, **kwargs)
        finally:
            self.events.append((self.stage, threading.current_thread().name, began, time.monotonic()))


def _spy_on(backend: Any, events: list[tuple[str, str, float, float]]) -> None:
    """Spies on the model's generate, each request's preparation as it arrives (templating, features), a batch's
    preparation (joining, padding) and decoding."""
    backend.model.generate = Spy(events, "generate", backend.model.generate)
    backend.prepare_chat_item = Spy(events, "prepare_item", backend.prepare_chat_item)
    backend.prepare_chat = Spy(events, "prepare", backend.prepare_chat)
    backend._decode = Spy(events, "finish", backend._decode)


async def _serve_and_ask(
    backend: Any,
    bodies: list[dict[str, Any]],
    events: list[tuple[str, str, float, float]],
    hold: tuple[str, Callable[[Any], bool]],
    lead: dict[str, Any] | None = None,
    batch_wait_ms: float = 1000,
) -> tuple[list[str], dict[str, Any]]:
    """All bodies sent at once to an in-process server; (the answers in order, /_stats).

    ``hold = (stage, until)``: the first call of that stage ("prepare" or
    "generate") waits (up to 30 s) until ``until(batcher)`` is true, so the test
    knows what happened meanwhile. Spies record every stage. ``lead``: a body
    sent alone first; the others follow once the hold has begun (its answer
    comes first in the list).
    """
    # the default long window: a batch is taken when MAX_BATCH wait (all bodies are sent at once), whatever the load
    app = create_app(None, max_batch_size=MAX_BATCH, batch_wait_ms=batch_wait_ms)
    runner, url = await serve_app(app)
    state = app[STATE]
    stage, until = hold
    held = threading.Event()

    def holding(fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            if not held.is_set():
                held.set()
                deadline = time.monotonic() + 30
                while not (state.chat is not None and until(state.chat)) and time.monotonic() < deadline:
                    time.sleep(0.01)
            return fn(*args, **kwargs)

        return call

    if stage == "generate":
        backend.model.generate = holding(backend.model.generate)
    else:
        backend._chat_encoders[backend.kind] = holding(backend._chat_encoders[backend.kind])
    _spy_on(backend, events)
    attach_backend(app, backend)
    try:
        async with aiohttp.ClientSession() as session:

            async def ask(body: dict[str, Any]) -> str:
                async with session.post(f"{url}/v1/chat/completions", json=body) as response:
                    payload = await response.json()
                    assert response.status == 200, payload
                    return str(payload["choices"][0]["message"]["content"])

            first: list[asyncio.Future[str]] = []
            if lead is not None:
                first.append(asyncio.ensure_future(ask(lead)))
                while not held.is_set():
                    await asyncio.sleep(0.01)
            answers = await asyncio.gather(*first, *(ask(body) for body in bodies))
            async with session.get(f"{url}/_stats") as response:
                stats = await response.json()
        return list(answers), stats
    finally:
        await runner.cleanup()


def _text_body(text: str) -> dict[str, Any]:
    return {"temperature": 0, "max_tokens": 12, "messages": [{"role": "user", "content": text}]}


PROMPTS = [f"Question {i}: what is {i} plus {i * 3}? Answer in words, please." for i in range(16)]


def test_preparation_runs_off_the_model_thread_while_the_previous_batch_generates(tiny_llama: Path) -> None:
    from evalkit.serve.backends.transformers_backend import TransformersBackend

    backend = TransformersBackend(tiny_llama, max_batch_size=MAX_BATCH)
    try:
        expected = [backend.chat_batch([ChatInput(*_as_input(p))])[0] for p in PROMPTS]  # one at a time
        events: list[tuple[str, str, float, float]] = []

        # the first generate lasts until a second batch has been prepared: if preparation waited for
        # the model, it would never happen (30 s) and the second prepare would start after this generate
        def second_batch_prepared(_: Any) -> bool:
            return sum(1 for event in events if event[0] == "prepare") >= 2

        hold = ("generate", second_batch_prepared)
        answers, stats = asyncio.run(_serve_and_ask(backend, [_text_body(p) for p in PROMPTS], events, hold))
    finally:
        backend.close()

    assert answers == expected  # batched and pipelined, the same greedy answers as alone
    stages = ("prepare_item", "prepare", "generate", "finish")
    threads = {stage: {name for s, name, _, _ in events if s == stage} for stage in stages}
    assert all(name.startswith("evalkit-backend") for name in threads["generate"]), threads
    assert threads["prepare"] and not threads["prepare"] & threads["generate"], threads
    assert threads["prepare_item"] and not threads["prepare_item"] & threads["generate"], threads
    # every request was prepared as it arrived, the first batch's before that batch's preparation began
    assert sum(1 for event in events if event[0] == "prepare_item") == len(PROMPTS)
    first_batch = min(a for s, _, a, _ in events if s == "prepare")
    assert sum(1 for s, _, _, b in events if s == "prepare_item" and b <= first_batch) >= MAX_BATCH, events
    assert threads["finish"] and not threads["finish"] & threads["generate"], threads
    assert stats["threads"]["generate"] == sorted(threads["generate"])
    assert stats["threads"]["prepare"] == sorted(threads["prepare"] | threads["prepare_item"])
    # the queue was deep: every batch full; the second batch was prepared while the first generated
    assert stats["batch_sizes"] == {str(MAX_BATCH): len(PROMPTS) // MAX_BATCH}

    # dtype auto on the CPU; the backend was made with torch's own thread count
    from evalkit.serve.backends import transformers_backend

    assert stats["model"] == {
        "device": "cpu",
        "dtype": "float32",
        "threads": str(transformers_backend._DEFAULT_THREADS),
    }
    first_generate = min((a, b) for s, _, a, b in events if s == "generate")
    second_prepare = sorted((a, b) for s, _, a, b in events if s == "prepare")[1]
    assert second_prepare[1] < first_generate[1], events


def _as_input(text: str) -> tuple[list[dict[str, Any]], GenerationParams]:
    return [{"role": "user", "content": text}], GenerationParams(max_tokens=12)


def test_audio_chat_answers_equal_generate_and_similar_lengths_share_a_batch(tiny_audio: Path) -> None:
    """Clips of two very different lengths, interleaved: batches hold one length each, answers as alone.

    A lead request is taken alone and its preparation holds until the eight
    others wait, so the next batches are chosen from all of them.
    """
    import numpy as np

    from evalkit.serve.backends.transformers_backend import TransformersBackend

    clips = speech_clips(9)
    # four short clips (1 s) and four long ones (the clip repeated to 20 s), interleaved in arrival order
    shaped = []
    for index, clip in enumerate(clips):
        cut = clip[:16_000] if index % 2 == 0 else np.tile(clip, 20 * 16_000 // len(clip) + 1)[: 20 * 16_000]
        shaped.append(_as_served(cut))
    backend = TransformersBackend(tiny_audio, max_batch_size=MAX_BATCH)
    try:
        items = [
            ChatInput(
                [{"role": "user", "content": [{"type": "audio", "array": c}, {"type": "text", "text": "Transcribe."}]}],
                GenerationParams(max_tokens=8),
            )
            for c in shaped
        ]
        costs = [backend.chat_cost(item) for item in items]
        assert max(costs[0::2]) < min(costs[1::2])  # 20 s of audio tokens weigh more than 1 s
        expected = [backend.chat_batch([item])[0] for item in items]
        events: list[tuple[str, str, float, float]] = []
        seen_lengths: list[list[int]] = []
        prepare_batch = backend.prepare_chat

        def note_lengths(batch: list[ChatInput]) -> Any:  # which requests share a batch
            seen_lengths.append(sorted(len(m["content"][0]["array"]) for item in batch for m in item.messages))
            return prepare_batch(batch)

        backend.prepare_chat = note_lengths
        bodies: list[dict[str, Any]] = [
            {
                "temperature": 0,
                "max_tokens": 8,
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "input_audio", "input_audio": {"data": _wav_b64(c), "format": "wav"}},
                            {"type": "text", "text": "Transcribe."},
                        ],
                    }
                ],
            }
            for c in shaped
        ]
        lead, rest = bodies[-1], bodies[:-1]  # the ninth clip, short, goes first and alone
        hold = ("prepare", lambda batcher: batcher.queued >= len(rest))
        answers, _ = asyncio.run(_serve_and_ask(backend, rest, events, hold, lead=lead, batch_wait_ms=5))
    finally:
        backend.close()

    assert answers == [expected[-1], *expected[:-1]]
    assert seen_lengths[0] == [16_000] and len(seen_lengths) == 3, seen_lengths
    assert seen_lengths[1] == [16_000] * 4 and seen_lengths[2] == [20 * 16_000] * 4, seen_lengths


def test_transcription_features_are_made_off_the_model_thread_while_the_previous_batch_generates(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Whisper's feature extraction and padding run on the preparation thread, decoding in finish; same text."""
    from evalkit.serve.backends.transformers_backend import TransformersBackend
    from evalkit.testing.tiny_model import build_tiny_whisper

    folder = build_tiny_whisper(tmp_path_factory.getbasetemp() / "tiny-whisper-seed0", seed=0)
    clips = [_as_served(clip) for clip in speech_clips(2 * MAX_BATCH)]
    backend = TransformersBackend(folder, max_batch_size=MAX_BATCH)
    try:
        expected = [backend.transcribe_batch([clip])[0] for clip in clips]  # one at a time
        events: list[tuple[str, str, float, float]] = []
        answers, stats = asyncio.run(_serve_and_transcribe(backend, clips, events))
    finally:
        backend.close()

    assert answers == expected
    threads = {stage: {name for s, name, _, _ in events if s == stage} for stage in ("prepare", "generate", "finish")}
    assert threads["generate"] and all(name.startswith("evalkit-backend") for name in threads["generate"]), threads
    assert threads["prepare"] and not threads["prepare"] & threads["generate"], threads
    assert threads["finish"] and not threads["finish"] & threads["generate"], threads
    assert stats["batch_sizes"] == {str(MAX_BATCH): 2}
    # the second batch's features were made while the first batch generated
    first_generate = min((a, b) for s, _, a, b in events if s == "generate")
    second_prepare = sorted((a, b) for s, _, a, b in events if s == "prepare")[1]
    assert second_prepare[1] < first_generate[1], events


async def _serve_and_transcribe(
    backend: Any, clips: list[Any], events: list[tuple[str, str, float, float]]
) -> tuple[list[str], dict[str, Any]]:
    """All clips posted at once; the first generate holds (up to 30 s) until a second batch's features exist."""
    from evalkit.data.audio.decode import wav_bytes

    app = create_app(None, max_batch_size=MAX_BATCH, batch_wait_ms=1000)
    runner, url = await serve_app(app)
    generate = backend.model.generate

    def held_generate(*args: Any, **kwargs: Any) -> Any:
        deadline = time.monotonic() + 30
        while sum(1 for e in events if e[0] == "prepare") < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        return generate(*args, **kwargs)

    backend.model.generate = Spy(events, "generate", held_generate)
    backend._transcription_features = Spy(events, "prepare", backend._transcription_features)
    backend._decode = Spy(events, "finish", backend._decode)
    attach_backend(app, backend)
    try:
        async with aiohttp.ClientSession() as session:

            async def ask(clip: Any) -> str:
                form = aiohttp.FormData()
                form.add_field("file", wav_bytes(clip), filename="clip.wav", content_type="audio/wav")
                form.add_field("model", backend.model_id)
                async with session.post(f"{url}/v1/audio/transcriptions", data=form) as response:
                    payload = await response.json()
                    assert response.status == 200, payload
                    return str(payload["text"])

            answers = await asyncio.gather(*(ask(clip) for clip in clips))
            async with session.get(f"{url}/_stats") as response:
                stats = await response.json()
        return list(answers), stats
    finally:
        await runner.cleanup()


class _Echo(Backend):
    """Answers each chat with the length of its first message's content (no model: the test is about parsing)."""

    supports_chat = True
    model_id = "echo"

    def chat_batch(self, inputs: list[ChatInput]) -> list[Any]:
        return [f"{len(item.messages[0]['content'])}" for item in inputs]

    def close(self) -> None:
        pass


def test_text_bodies_are_parsed_on_the_loop_and_media_on_the_parse_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """A text prompt skips the hop to a parse thread; a body with audio is still decoded off the event loop."""
    import numpy as np

    import evalkit.serve.app as app_module

    parsed_on: list[tuple[bool, str]] = []
    parse = app_module.parse_chat_body

    def spy(raw: bytes) -> Any:
        parsed_on.append((b"input_audio" in raw, threading.current_thread().name))
        return parse(raw)

    monkeypatch.setattr(app_module, "parse_chat_body", spy)
    clip = (0.1 * np.sin(np.arange(8_000) / 5)).astype(np.float32)
    audio = [
        {"type": "input_audio", "input_audio": {"data": _wav_b64(clip), "format": "wav"}},
        {"type": "text", "text": "Hi"},
    ]
    bodies = [
        {"messages": [{"role": "user", "content": "Hello there"}]},
        {"messages": [{"role": "user", "content": audio}]},
    ]

    async def ask_both() -> tuple[list[str], str]:
        loop_thread = threading.current_thread().name
        app = create_app(_Echo(), max_batch_size=2, batch_wait_ms=1)
        runner, url = await serve_app(app)
        try:
            async with aiohttp.ClientSession() as session:
                answers = []
                for body in bodies:
                    async with session.post(f"{url}/v1/chat/completions", json=body) as response:
                        payload = await response.json()
                        assert response.status == 200, payload
                        answers.append(payload["choices"][0]["message"]["content"])
            return answers, loop_thread
        finally:
            await runner.cleanup()

    answers, loop_thread = asyncio.run(ask_both())
    assert answers == ["11", "2"]  # both parsed and answered
    assert parsed_on[0] == (False, loop_thread)
    assert parsed_on[1][0] and parsed_on[1][1].startswith("evalkit-decode"), parsed_on


def test_requests_prepared_alone_join_into_the_batch_encoding(tiny_llama: Path, tiny_audio: Path) -> None:
    """Prepared one by one as they arrive and joined, a batch's inputs equal the batch encoded at once."""
    import numpy as np
    import torch

    from evalkit.serve.backends.transformers_backend import TransformersBackend

    clip = speech_clips(1)[0]
    audio_items = [
        ChatInput(
            [{"role": "user", "content": [{"type": "audio", "array": c}, {"type": "text", "text": text}]}],
            GenerationParams(max_tokens=4),
        )
        for c, text in ((clip[:16_000], "Transcribe."), (np.tile(clip, 4)[: 12 * 16_000], "What is said, in short?"))
    ]
    text_items = [ChatInput(*_as_input(p * (1 + i % 3))) for i, p in enumerate(PROMPTS[:4])]
    for folder, items in ((tiny_llama, text_items), (tiny_audio, audio_items)):
        backend = TransformersBackend(folder, max_batch_size=MAX_BATCH)
        try:
            whole = backend._chat_encoders[backend.kind]([item.messages for item in items])
            for item in items:
                backend.prepare_chat_item(item)
            assert all(item.encoded is not None for item in items)
            lengths = {int(item.encoded["input_ids"].shape[1]) for item in items}
            assert len(lengths) > 1  # the prompts differ in length, so joining pads
            joined = backend._join_encoded([item.encoded for item in items])
            assert joined is not None and sorted(joined) == sorted(whole)
            for key, value in whole.items():
                assert torch.equal(joined[key], value), key
            batch = backend.prepare_chat(items)
            assert all(torch.equal(batch.chunks[0].encoded[k], v) for k, v in whole.items())
        finally:
            backend.close()

"""`evalkit serve` end to end: real server processes on loopback, real speech from espeak-ng.

Two servers run for the whole module (started in parallel): a free-recognition
one with a one-slot queue (for 503 + Retry-After) and a grammar one with
default batching (for exact transcripts and batching). In-process servers with
small Backend subclasses cover what pocketsphinx cannot do on demand (fail).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import jiwer
import numpy as np
import pytest
from helpers import ServeProcess, serve_app, serving

from evalkit.serve.app import attach_backend, create_app
from evalkit.serve.backends.base import Backend, ChatInput, InputError
from evalkit.serve.batcher import BatchStats, DynamicBatcher, QueueFullError

ROOT = Path(__file__).resolve().parent.parent
GRAMMAR_MODEL_ID = "sphinx-grammar"
GRAMMAR_LINES = [
    "The weather is nice today.",
    "I would like a cup of coffee!",
    "Please call me tomorrow morning",
    "open the door",
    "turn on the light",
]
FREE_SENTENCE = "please call me tomorrow morning"

pytestmark = pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng is not installed")


# ---------------------------------------------------------------------- helpers


def espeak(folder: Path, text: str) -> bytes:
    path = folder / f"{abs(hash(text))}.wav"
    if not path.exists():
        subprocess.run(["espeak-ng", "-w", str(path), text], check=True, capture_output=True)
    return path.read_bytes()


def words(text: str) -> str:
    return " ".join("".join(c for c in text.lower() if c.isalnum() or c in " '").split())


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def transcribe(
    session: aiohttp.ClientSession, url: str, wav: bytes, **fields: str
) -> tuple[int, dict[str, str], Any]:
    form = aiohttp.FormData()
    form.add_field("file", wav, filename="speech.wav", content_type="audio/wav")
    for key, value in fields.items():
        form.add_field(key, value)
    async with session.post(f"{url}/v1/audio/transcriptions", data=form) as response:
        body = await response.json() if response.content_type == "application/json" else await response.text()
        return response.status, dict(response.headers), body


async def chat(session: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> tuple[int, Any]:
    async with session.post(f"{url}/v1/chat/completions", json=body) as response:
        return response.status, await response.json()


def audio_message(wav: bytes, prompt: str = "Transcribe this.") -> list[dict[str, Any]]:
    data = base64.b64encode(wav).decode()
    return [
        {"role": "system", "content": "You are a transcriber."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": prompt},
                {"type": "input_audio", "input_audio": {"data": data, "format": "wav"}},
            ],
        },
    ]


async def get_json(url: str) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, await response.json()


# ---------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def speech(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("speech")


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ServeProcess]]:
    grammar = tmp_path_factory.mktemp("grammar") / "sentences.txt"
    grammar.write_text("# allowed sentences\n" + "\n".join(GRAMMAR_LINES) + "\n")
    started = {
        "free": ServeProcess("--backend", "pocketsphinx", "--port", "0", "--max-queue", "1", "--max-batch-size", "1"),
        "grammar": ServeProcess(
            "--backend", "pocketsphinx", "--port", "0", "--grammar", str(grammar), "--model-id", GRAMMAR_MODEL_ID
        ),
    }
    with serving(started):
        yield started


# ---------------------------------------------------------------------- endpoints


def test_health_models_and_unknown_path(servers: dict[str, ServeProcess]) -> None:
    url = servers["grammar"].url
    assert run(get_json(f"{url}/health")) == (200, {"status": "ok"})
    status, body = run(get_json(f"{url}/v1/models"))
    assert status == 200 and body["object"] == "list"
    assert [m["id"] for m in body["data"]] == [GRAMMAR_MODEL_ID]
    status, body = run(get_json(f"{servers['free'].url}/v1/models"))
    assert body["data"][0]["id"] == "pocketsphinx-en-us"
    status, body = run(get_json(f"{url}/v1/nothing-here"))
    assert status == 404 and "/v1/nothing-here" in body["error"]["message"]


def test_free_transcription_is_sensible(servers: dict[str, ServeProcess], speech: Path) -> None:
    wav = espeak(speech, FREE_SENTENCE)

    async def go() -> list[Any]:
        async with aiohttp.ClientSession() as session:
            json_answer = await transcribe(session, servers["free"].url, wav, model="pocketsphinx-en-us", language="en")
            text_answer = await transcribe(session, servers["free"].url, wav, response_format="text")
            return [json_answer, text_answer]

    (status, _, body), (text_status, headers, text) = run(go())
    assert status == 200, body
    assert jiwer.wer(FREE_SENTENCE, words(body["text"]) or "<empty>") < 0.6, body["text"]
    assert body["usage"] == {"type": "duration", "seconds": 2}
    assert text_status == 200 and headers["Content-Type"].startswith("text/plain")
    assert text.strip() == body["text"]  # deterministic: same audio, same words


def test_grammar_mode_gives_the_exact_sentences(servers: dict[str, ServeProcess], speech: Path) -> None:
    clips = {line: espeak(speech, line) for line in GRAMMAR_LINES}

    async def go() -> list[Any]:
        async with aiohttp.ClientSession() as session:
            return await asyncio.gather(
                *(
                    transcribe(session, servers["grammar"].url, wav, response_format="verbose_json")
                    for wav in clips.values()
                )
            )

    for line, (status, _, body) in zip(clips, run(go())):
        assert status == 200, body
        assert body["text"] == line  # as the grammar file writes it
        assert jiwer.wer(words(line), words(body["text"])) == 0
        assert body["language"] == "english" and body["duration"] > 0.5
        assert body["segments"][0]["text"] == line


def test_chat_with_input_audio(servers: dict[str, ServeProcess], speech: Path) -> None:
    wav = espeak(speech, "open the door")
    body = {"model": GRAMMAR_MODEL_ID, "messages": audio_message(wav), "max_tokens": 50, "temperature": 0}
    status, answer = run(_with_session(chat, servers["grammar"].url, body))
    assert status == 200, answer
    assert answer["object"] == "chat.completion" and answer["model"] == GRAMMAR_MODEL_ID
    choice = answer["choices"][0]
    assert choice["message"] == {"role": "assistant", "content": "open the door"}
    assert choice["finish_reason"] == "stop"
    usage = answer["usage"]
    assert usage["completion_tokens"] == 3
    assert usage["prompt_tokens_details"]["audio_tokens"] > 50  # ~1 s of audio at 100 frames/s
    assert usage["prompt_tokens"] == usage["prompt_tokens_details"]["audio_tokens"] + 6  # "Transcribe this." + system
    assert usage["total_tokens"] == usage["prompt_tokens"] + 3


def test_max_tokens_cut_chat_and_transcription_and_usage_counts_what_was_generated(
    servers: dict[str, ServeProcess], speech: Path
) -> None:
    wav = espeak(speech, "open the door")
    url = servers["grammar"].url
    body = {"model": GRAMMAR_MODEL_ID, "messages": audio_message(wav), "max_completion_tokens": 2, "temperature": 0}
    status, answer = run(_with_session(chat, url, body))
    assert status == 200, answer
    choice = answer["choices"][0]
    assert choice["message"]["content"] == "open the" and choice["finish_reason"] == "length"
    assert answer["usage"]["completion_tokens"] == 2  # the words recognised and kept, pocketsphinx's tokens

    async def both(session: aiohttp.ClientSession) -> list[Any]:
        return [
            await transcribe(session, url, wav, model=GRAMMAR_MODEL_ID, max_completion_tokens="2"),
            await transcribe(session, url, wav, model=GRAMMAR_MODEL_ID),
            await transcribe(session, url, wav, model=GRAMMAR_MODEL_ID, max_completion_tokens="none"),
        ]

    (cut_status, _, cut), (_, _, whole), (bad_status, _, bad) = run(_with_session(both))
    assert cut_status == 200 and cut["text"] == "open the" and whole["text"] == "open the door"
    assert bad_status == 400 and "max_completion_tokens" in json.dumps(bad)


def test_chat_stream_returns_server_sent_events(servers: dict[str, ServeProcess], speech: Path) -> None:
    wav = espeak(speech, "turn on the light")

    async def go() -> str:
        async with aiohttp.ClientSession() as session:
            body = {"messages": audio_message(wav), "stream": True}
            async with session.post(f"{servers['grammar'].url}/v1/chat/completions", json=body) as response:
                assert response.status == 200 and response.content_type == "text/event-stream"
                return await response.text()

    events = [line[len("data: ") :] for line in run(go()).splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(event) for event in events[:-1]]
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == "turn on the light"
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


async def _with_session(fn: Any, *args: Any) -> Any:
    async with aiohttp.ClientSession() as session:
        return await fn(session, *args)


def test_bad_requests_get_400_naming_the_problem(servers: dict[str, ServeProcess], speech: Path) -> None:
    url = servers["grammar"].url
    wav = espeak(speech, "open the door")
    not_audio = base64.b64encode(b"this is not a wav file at all").decode()

    async def go() -> dict[str, tuple[int, Any]]:
        results: dict[str, tuple[int, Any]] = {}
        async with aiohttp.ClientSession() as session:
            async with session.post(f"{url}/v1/chat/completions", data=b"{not json") as response:
                results["json"] = (response.status, await response.json())
            results["no messages"] = await chat(session, url, {"model": GRAMMAR_MODEL_ID})
            results["no audio"] = await chat(session, url, {"messages": [{"role": "user", "content": "hi"}]})
            results["bad base64"] = await chat(
                session,
                url,
                {
                    "messages": [
                        {
                            "role": "user",
                            "content": [
                                {"type": "input_audio", "input_audio": {"data": "%%%not base64%%%", "format": "wav"}}
                            ],
                        }
                    ]
                },
            )
            results["not audio"] = await chat(
                session,
                url,
                {
                    "messages": [
                        {
                            "role": "user",
                            "content": [{"type": "input_audio", "input_audio": {"data": not_audio, "format": "wav"}}],
                        }
                    ]
                },
            )
            results["image"] = await chat(
                session,
                url,
                {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x"}}]}]},
            )
            results["max_tokens"] = await chat(session, url, {"messages": audio_message(wav), "max_tokens": 0})
            results["wrong model"] = await chat(session, url, {"model": "gpt-nope", "messages": audio_message(wav)})
            status, _, body = await transcribe(session, url, wav, response_format="srt")
            results["format"] = (status, body)
            status, _, body = await transcribe(session, url, wav, language="fr")
            results["language"] = (status, body)
            async with session.post(f"{url}/v1/audio/transcriptions", data={"model": "x"}) as response:
                results["urlencoded"] = (response.status, await response.json())
            with aiohttp.MultipartWriter("form-data") as no_file:
                no_file.append("x").set_content_disposition("form-data", name="model")
            async with session.post(f"{url}/v1/audio/transcriptions", data=no_file) as response:
                results["no file"] = (response.status, await response.json())
        return results

    results = run(go())
    expected = {
        "json": (400, "not valid JSON"),
        "no messages": (400, "messages is required"),
        "no audio": (400, "pocketsphinx backend needs audio"),
        "bad base64": (400, "messages[0].content[0].input_audio.data is not valid base64"),
        "not audio": (400, "messages[0].content[0].input_audio.data: cannot decode"),
        "image": (400, "http URLs are not fetched"),
        "max_tokens": (400, "max_tokens must be a positive integer"),
        "wrong model": (404, "'gpt-nope' does not exist"),
        "format": (400, "response_format 'srt' is not supported"),
        "language": (400, "not 'fr'"),
        "urlencoded": (400, "expected a multipart/form-data body"),
        "no file": (400, "file is required"),
    }
    for name, (status, fragment) in expected.items():
        got_status, body = results[name]
        assert got_status == status, (name, body)
        assert fragment in body["error"]["message"], (name, body)
        assert body["error"]["type"] == "invalid_request_error"


# ---------------------------------------------------------------------- batching and backpressure


def test_concurrent_requests_are_batched(servers: dict[str, ServeProcess], speech: Path) -> None:
    url = servers["grammar"].url
    clips = [(line, espeak(speech, line)) for line in GRAMMAR_LINES] * 4  # 20 requests

    async def go() -> tuple[dict[str, Any], list[Any], dict[str, Any]]:
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{url}/_stats") as response:
                before = await response.json()
            answers = await asyncio.gather(*(transcribe(session, url, wav) for _, wav in clips))
            async with session.get(f"{url}/_stats") as response:
                after = await response.json()
        return before, answers, after

    before, answers, after = run(go())
    assert [body["text"] for _, _, body in answers] == [line for line, _ in clips]  # routed to the right caller
    assert after["requests"] - before["requests"] == len(clips)
    new_batches = after["batches"] - before["batches"]
    assert new_batches < len(clips)  # some requests shared a batch
    grown = {
        size: count - before["batch_sizes"].get(size, 0)
        for size, count in after["batch_sizes"].items()
        if int(size) > 1 and count > before["batch_sizes"].get(size, 0)
    }
    assert grown, after
    assert after["max_batch_size_seen"] <= 8


@pytest.mark.slow  # an end-to-end test: run once by .ci/run, not in every quick-start venv
def test_full_queue_answers_503_with_retry_after(servers: dict[str, ServeProcess], speech: Path) -> None:
    url = servers["free"].url  # --max-queue 1 --max-batch-size 1, free decoding takes a while
    # several seconds of speech, so one decode outlasts the arrival of all 16 requests even on a loaded machine
    wav = espeak(speech, "the quick brown fox jumps over the lazy dog while the weather stays cold and windy all day")

    async def go() -> tuple[list[Any], dict[str, Any]]:
        async with aiohttp.ClientSession() as session:
            answers = await asyncio.gather(*(transcribe(session, url, wav) for _ in range(16)))
            async with session.get(f"{url}/_stats") as response:
                return answers, await response.json()

    answers, stats = run(go())
    statuses = [status for status, _, _ in answers]
    assert set(statuses) <= {200, 503}, statuses
    assert 200 in statuses and 503 in statuses, statuses
    for status, headers, body in answers:
        if status == 503:
            assert int(headers["Retry-After"]) >= 1
            assert body["error"]["code"] == "queue_full"
    assert stats["queue_full_rejections"] >= statuses.count(503)
    assert stats["max_batch_size_seen"] == 1


def test_batcher_isolates_failures_and_bounds_its_queue() -> None:
    """The batcher alone: per-item errors stay per item, a full queue refuses at once."""
    from concurrent.futures import ThreadPoolExecutor

    seen: list[list[int]] = []
    gate = threading.Event()

    def run_batch(items: list[int]) -> list[Any]:
        gate.wait(5)
        seen.append(items)
        return [ValueError(f"odd {i}") if i % 2 else i * 10 for i in items]

    async def go() -> tuple[list[Any], BatchStats]:
        stats = BatchStats()
        with ThreadPoolExecutor(1) as pool:
            batcher: DynamicBatcher[int, int] = DynamicBatcher(
                run_batch, executor=pool, max_batch_size=4, batch_wait_s=0.05, max_queue=6, stats=stats
            )
            batcher.start()
            first = asyncio.ensure_future(batcher.submit(0))
            await asyncio.sleep(0.1)  # batch [0] is running (held by the gate); the next ones wait
            waiting = [asyncio.ensure_future(batcher.submit(i)) for i in range(1, 7)]
            await asyncio.sleep(0)
            with pytest.raises(QueueFullError) as refused:
                await batcher.submit(99)
            assert refused.value.retry_after_s >= 1
            gate.set()
            results = await asyncio.gather(first, *waiting, return_exceptions=True)
            await batcher.close()
        return results, stats

    results, stats = run(go())
    assert results[0] == 0 and results[2] == 20 and results[6] == 60
    assert isinstance(results[1], ValueError) and str(results[1]) == "odd 1"
    assert seen == [[0], [1, 2, 3, 4], [5, 6]]
    assert stats.queue_full_rejections == 1 and stats.max_batch_size_seen == 4


def test_batches_fill_when_clients_resend_after_the_window() -> None:
    """As many clients as the batch size, re-sending 1-15 ms after their answers (mostly past the 5 ms window).

    The fill window keeps batches >= 90% full; without it (``max_fill_wait_s=0``) the same clients
    got batches of 4.2 on average here (23 batches for 96 requests, against 12).
    """
    from concurrent.futures import ThreadPoolExecutor

    sizes: list[int] = []

    def run_batch(items: list[int]) -> list[int]:
        sizes.append(len(items))
        time.sleep(0.08)  # a generate call
        return items

    async def client(batcher: DynamicBatcher[int, int], rounds: int, turnaround: float) -> None:
        for i in range(rounds):
            await batcher.submit(i)
            await asyncio.sleep(turnaround)  # the client records the answer and builds its next request

    async def go() -> None:
        with ThreadPoolExecutor(1) as pool:
            batcher: DynamicBatcher[int, int] = DynamicBatcher(
                run_batch, executor=pool, max_batch_size=8, batch_wait_s=0.005, max_fill_wait_s=0.05
            )
            batcher.start()
            # clients come back 1 to 15 ms after their answers, as real ones do: spread out
            await asyncio.gather(*(client(batcher, 12, 0.001 + 0.002 * k) for k in range(8)))
            await batcher.close()

    run(go())
    assert sum(sizes) / len(sizes) >= 0.9 * 8, sizes


def test_batcher_buckets_by_cost_and_prepares_off_the_model_thread() -> None:
    """With costs, a batch is the oldest waiting item and those nearest it in cost; stages on their own threads."""
    from concurrent.futures import ThreadPoolExecutor

    generated: list[list[int]] = []
    threads: dict[str, set[str]] = {"prepare": set(), "generate": set(), "finish": set()}
    gate = threading.Event()

    def prepare(items: list[int]) -> list[int]:
        threads["prepare"].add(threading.current_thread().name)
        return list(items)

    def generate(prepared: list[int]) -> list[int]:
        threads["generate"].add(threading.current_thread().name)
        gate.wait(5)
        generated.append(prepared)
        return [x * 2 for x in prepared]

    def finish(items: list[int], outputs: list[int]) -> list[Any]:
        threads["finish"].add(threading.current_thread().name)
        return [ValueError("odd") if x % 2 else y for x, y in zip(items, outputs)]

    async def go() -> list[Any]:
        with (
            ThreadPoolExecutor(1, thread_name_prefix="model") as model,
            ThreadPoolExecutor(1, thread_name_prefix="prep") as prep,
        ):
            batcher: DynamicBatcher[int, int] = DynamicBatcher(
                generate,
                executor=model,
                prepare=prepare,
                finish=finish,
                prepare_executor=prep,
                cost=float,
                max_batch_size=3,
                batch_wait_s=0.005,
            )
            batcher.start()
            first = asyncio.ensure_future(batcher.submit(0))
            await asyncio.sleep(0.1)  # [0] is generating (held by the gate); the others queue behind it
            rest = [asyncio.ensure_future(batcher.submit(c)) for c in (100, 1, 101, 2, 102, 4)]
            await asyncio.sleep(0.1)
            gate.set()
            results = await asyncio.gather(first, *rest, return_exceptions=True)
            await batcher.close()
            return results

    results = run(go())
    assert generated == [[0], [100, 101, 102], [1, 2, 4]]
    assert results[0] == 0 and results[1] == 200 and results[6] == 8 and isinstance(results[2], ValueError)
    assert threads["generate"] == {"model_0"} and threads["prepare"] == threads["finish"] == {"prep_0"}


class _Flaky(Backend):
    """A backend that fails on request: the server must report, not crash."""

    supports_chat = True
    model_id = "flaky"

    def chat_batch(self, inputs: list[ChatInput]) -> list[Any]:
        texts = [m["content"] for item in inputs for m in item.messages if m["role"] == "user"]
        if "explode" in texts:
            raise RuntimeError("GPU on fire")
        return [InputError(f"cannot answer {t!r}") if t == "refuse" else t.upper() for t in texts]

    def close(self) -> None:
        pass


def test_backend_failures_become_500_and_per_request_400() -> None:
    async def go() -> list[tuple[int, Any]]:
        app = create_app(None, batch_wait_ms=50)
        runner, url = await serve_app(app)
        try:
            async with aiohttp.ClientSession() as session:
                loading = await session.get(f"{url}/health")
                assert loading.status == 503 and (await loading.json()) == {"status": "loading"}
                attach_backend(app, _Flaky())
                transcription = await transcribe(session, url, b"RIFF")
                together = await asyncio.gather(
                    chat(session, url, {"messages": [{"role": "user", "content": "fine"}]}),
                    chat(session, url, {"messages": [{"role": "user", "content": "refuse"}]}),
                )
                alone = await chat(session, url, {"messages": [{"role": "user", "content": "explode"}]})
                return [(transcription[0], transcription[2]), *together, alone]
        finally:
            await runner.cleanup()

    (t_status, t_body), fine, refused, exploded = run(go())
    assert t_status == 400 and "does not serve transcriptions" in t_body["error"]["message"]
    assert fine[0] == 200 and fine[1]["choices"][0]["message"]["content"] == "FINE"
    assert refused[0] == 400 and "cannot answer 'refuse'" in refused[1]["error"]["message"]
    assert exploded[0] == 500 and "GPU on fire" in exploded[1]["error"]["message"]
    assert exploded[1]["error"]["type"] == "server_error"


# ---------------------------------------------------------------------- process lifecycle


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--backend", "pocketsphinks"], "unknown backend 'pocketsphinks' (did you mean \"pocketsphinx\"?)"),
        (
            ["--backend", "pocketsphinx", "--grammar", "/no/such/grammar.txt"],
            "--grammar /no/such/grammar.txt: no such file",
        ),
        (["--backend", "transformers"], "--backend transformers needs --model PATH"),
        (["--backend", "pocketsphinx", "--port", "http"], "invalid int value: 'http'"),
    ],
)
def test_bad_arguments_exit_2_with_one_message(args: list[str], message: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "evalkit.serve", *args], capture_output=True, text=True, timeout=60, env=env, cwd=ROOT
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert message in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "batch"),
    [
        ([], 8),
        (["--device", "cuda"], 32),  # a GPU wants bigger batches (BENCHMARKS.md: 2.1x audio, 4.6x text at 32 vs 8)
        (["--device", "CUDA:1"], 32),
        (["--device", "cuda", "--max-batch-size", "4"], 4),  # the user's choice stands
    ],
)
def test_the_default_batch_depends_on_the_device(args: list[str], batch: int) -> None:
    from evalkit.serve.cli import _check, build_parser

    parsed = build_parser().parse_args(["--backend", "pocketsphinx", *args])
    _check(parsed)
    assert parsed.max_batch_size == batch


def test_grammar_words_outside_the_dictionary_are_refused(tmp_path: Path) -> None:
    grammar = tmp_path / "g.txt"
    grammar.write_text("hello world\nflibbertigibbetqux now\n")
    server = ServeProcess("--backend", "pocketsphinx", "--port", "0", "--grammar", str(grammar))
    assert server.wait(timeout=60) == 2
    stderr = server.stderr()
    assert "'flibbertigibbetqux' (line 2)" in stderr and "Traceback" not in stderr


def test_port_file_and_sigterm_stop_the_server(tmp_path: Path) -> None:
    port_file = tmp_path / "port"
    server = ServeProcess("--backend", "pocketsphinx", "--port", "0", "--port-file", str(port_file))
    url = server.wait_listening()
    assert url == f"http://127.0.0.1:{int(port_file.read_text())}"
    assert run(get_json(f"{url}/health")) == (200, {"status": "ok"})
    assert server.terminate() == 0

    async def connect() -> None:
        async with aiohttp.ClientSession() as session:
            await session.get(f"{url}/health")

    with pytest.raises(aiohttp.ClientConnectionError):
        run(connect())


def test_audio_parts_become_16k_float_arrays() -> None:
    """Both wire forms (OpenAI input_audio, vLLM audio_url data URL) reach the backend as 16 kHz float32."""
    from evalkit.data.audio.decode import wav_base64
    from evalkit.serve.app import parse_chat_body

    b64 = wav_base64(np.zeros(8000, dtype=np.float32), 8000)  # 1 s at 8 kHz
    body = {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "input_audio", "input_audio": {"data": b64, "format": "wav"}},
                    {"type": "audio_url", "audio_url": {"url": f"data:audio/wav;base64,{b64}"}},
                ],
            }
        ]
    }
    _, item = parse_chat_body(json.dumps(body).encode())
    for part in item.messages[0]["content"]:
        assert part["type"] == "audio"
        assert part["array"].dtype == np.float32 and part["array"].shape == (16000,)

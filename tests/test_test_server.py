"""The scriptable test server, driven over real HTTP on loopback (subprocesses, plus one in-process app)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import soundfile as sf
import yaml

from evalkit.errors import ConfigError
from evalkit.testing import TestServer, audio_fingerprint, build_app, start_test_server

TOKEN = "sekrit-token-123"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def tone(freq: float, seconds: float = 0.25, sr: int = 16000, fmt: str = "WAV", channels: int = 1) -> bytes:
    """A tone as int16 samples, so every container holds exactly the same samples."""
    t = np.arange(int(seconds * sr)) / sr
    samples = (8000 * np.sin(2 * np.pi * freq * t)).astype(np.int16)
    if channels > 1:
        samples = np.stack([samples] * channels, axis=1)
    buffer = io.BytesIO()
    sf.write(buffer, samples, sr, format=fmt, subtype="PCM_16")
    return buffer.getvalue()


def chat_body(
    text: str | list[dict[str, Any]], system: str | None = None, model: str = "test-model", **params: Any
) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": text})
    return {"model": model, "messages": messages, **params}


def audio_part(wav: bytes) -> dict[str, Any]:
    return {"type": "input_audio", "input_audio": {"data": base64.b64encode(wav).decode(), "format": "wav"}}


@pytest.fixture(scope="module")
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=10, trust_env=False) as c:
        yield c


@pytest.fixture(scope="module")
def main_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestServer]:
    """One server for the answer/auth/log tests: a YAML script with a relative answer_file."""
    folder = tmp_path_factory.mktemp("script")
    (folder / "answers.json").write_text(
        json.dumps({audio_fingerprint(tone(660)): "second clip", "favourite colour": "blue"})
    )
    script = {
        "model": "test-model",
        "require_auth": TOKEN,
        "answers": [
            {"match": "capital of France", "answer": "Paris"},
            {"match": r"re:^count to \d+$", "answer": "1 2 3"},
            {"system_match": "pirate", "answer": "Arr"},
            {"audio_fingerprint": audio_fingerprint(tone(440)), "answer": "hello world"},
        ],
        "answer_file": "answers.json",
    }
    path = folder / "script.yaml"
    path.write_text(yaml.safe_dump(script))
    with start_test_server(path, request_log=True) as server:
        yield server


def answer(client: httpx.Client, server: TestServer, body: dict[str, Any]) -> str:
    r = client.post(f"{server.base_url}/chat/completions", json=body, headers=AUTH)
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["message"]["content"]


# -- answers -----------------------------------------------------------------------------


def test_chat_echo_rules_and_openai_shape(client: httpx.Client, main_server: TestServer) -> None:
    r = client.post(
        f"{main_server.base_url}/chat/completions", json=chat_body("What is the capital of France?"), headers=AUTH
    )
    data = r.json()
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    assert (
        data["object"] == "chat.completion" and data["id"].startswith("chatcmpl-") and isinstance(data["created"], int)
    )
    assert data["model"] == "test-model"
    assert data["choices"][0]["message"] == {"role": "assistant", "content": "Paris"}
    assert data["choices"][0]["finish_reason"] == "stop"
    assert data["usage"] == {"prompt_tokens": 6, "completion_tokens": 1, "total_tokens": 7}

    parts = [{"type": "text", "text": "say"}, {"type": "text", "text": "something back"}]
    assert answer(client, main_server, chat_body(parts)) == "say\nsomething back"  # echo joins text parts
    assert answer(client, main_server, chat_body("count to 3")) == "1 2 3"
    assert answer(client, main_server, chat_body("please count to 3 now")) == "please count to 3 now"  # regex anchored
    assert answer(client, main_server, chat_body("hello", system="Talk like a pirate.")) == "Arr"
    assert answer(client, main_server, chat_body("what is your favourite colour?")) == "blue"  # from answer_file
    # another model name is answered anyway (strict_model is off)
    assert answer(client, main_server, chat_body("echo me", model="other")) == "echo me"


def test_max_tokens_truncates_with_finish_reason_length(client: httpx.Client, main_server: TestServer) -> None:
    r = client.post(
        f"{main_server.base_url}/chat/completions", json=chat_body("one two three four", max_tokens=2), headers=AUTH
    )
    choice = r.json()["choices"][0]
    assert choice["message"]["content"] == "one two" and choice["finish_reason"] == "length"
    assert r.json()["usage"]["completion_tokens"] == 2


def test_stream_returns_sse_chunks(client: httpx.Client, main_server: TestServer) -> None:
    body = chat_body("stream this", stream=True, stream_options={"include_usage": True})
    r = client.post(f"{main_server.base_url}/chat/completions", json=body, headers=AUTH)
    assert r.headers["content-type"].startswith("text/event-stream")
    events = [line[6:] for line in r.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"]) == "stream this"
    assert chunks[-1]["usage"]["completion_tokens"] == 2


def test_input_audio_fingerprint_rule(client: httpx.Client, main_server: TestServer) -> None:
    assert (
        answer(client, main_server, chat_body([{"type": "text", "text": "Transcribe."}, audio_part(tone(440))]))
        == "hello world"
    )
    # the same samples in another container (FLAC, via vLLM's audio_url data: URL) match the same rule
    flac = base64.b64encode(tone(440, fmt="FLAC")).decode()
    part = {"type": "audio_url", "audio_url": {"url": f"data:audio/flac;base64,{flac}"}}
    assert answer(client, main_server, chat_body([{"type": "text", "text": "Transcribe."}, part])) == "hello world"
    assert answer(client, main_server, chat_body([audio_part(tone(660))])) == "second clip"  # answer_file rule
    assert (
        answer(client, main_server, chat_body([{"type": "text", "text": "no rule"}, audio_part(tone(880))]))
        == "no rule"
    )
    r = client.post(
        f"{main_server.base_url}/chat/completions",
        json=chat_body([{"type": "input_audio", "input_audio": {"data": base64.b64encode(b"not audio").decode()}}]),
        headers=AUTH,
    )
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"


def test_audio_fingerprint_ignores_container_and_averages_channels() -> None:
    mono = audio_fingerprint(tone(440))
    assert audio_fingerprint(tone(440, fmt="FLAC")) == mono
    assert audio_fingerprint(tone(440, channels=2)) == mono  # identical channels average to the same samples
    assert audio_fingerprint(tone(440, sr=8000)) != mono  # no resampling: other samples, other fingerprint
    assert len(mono) == 64
    with pytest.raises(ValueError):
        audio_fingerprint(b"RIFF but not really")


def test_transcription_multipart_formats(client: httpx.Client, main_server: TestServer) -> None:
    url = f"{main_server.base_url}/audio/transcriptions"
    files = {"file": ("clip.wav", tone(440), "audio/wav")}
    form = {"model": "whisper-1", "language": "en", "prompt": "names: Ann", "temperature": "0.2"}
    r = client.post(url, files=files, data={**form, "response_format": "json"}, headers=AUTH)
    assert r.status_code == 200 and r.json() == {"text": "hello world"}
    r = client.post(url, files=files, data={**form, "response_format": "text"}, headers=AUTH)
    assert r.text == "hello world" and r.headers["content-type"].startswith("text/plain")
    verbose = client.post(url, files=files, data={**form, "response_format": "verbose_json"}, headers=AUTH).json()
    assert verbose["text"] == "hello world" and verbose["language"] == "en" and verbose["duration"] == 0.25
    assert verbose["segments"][0]["end"] == 0.25
    r = client.post(url, files=files, data={**form, "response_format": "xml"}, headers=AUTH)
    assert r.status_code == 400 and r.json()["error"]["param"] == "response_format"
    r = client.post(url, data={"model": "whisper-1"}, files={"other": ("x", b"x")}, headers=AUTH)
    assert r.status_code == 400 and r.json()["error"]["param"] == "file"

    done = [
        e for e in main_server.log_events("completed") if e["path"] == "/v1/audio/transcriptions" and e["status"] == 200
    ]
    assert done[0]["form"] == {**form, "response_format": "json"}
    assert done[0]["audio_fingerprint"] == audio_fingerprint(tone(440)) and done[0]["filename"] == "clip.wav"


def test_models_health_and_unknown_paths(client: httpx.Client, main_server: TestServer) -> None:
    models = client.get(f"{main_server.base_url}/models", headers=AUTH).json()
    assert models["object"] == "list" and [m["id"] for m in models["data"]] == ["test-model"]
    assert client.get(f"{main_server.base_url}/models/test-model", headers=AUTH).json()["id"] == "test-model"
    assert client.get(f"{main_server.base_url}/models/nope", headers=AUTH).status_code == 404
    assert client.get(f"{main_server.url}/health").json() == {"status": "ok"}
    r = client.post(f"{main_server.url}/v2/chat", json={})
    assert r.status_code == 404 and "error" in r.json()


# -- auth and the request log --------------------------------------------------------------


def test_auth_bearer_api_key_and_401(client: httpx.Client, main_server: TestServer) -> None:
    url = f"{main_server.base_url}/chat/completions"
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"api-key": "wrong"}):
        r = client.post(url, json=chat_body("hi"), headers=headers)
        assert r.status_code == 401, headers
        assert r.json()["error"]["code"] == "invalid_api_key"
    assert client.get(f"{main_server.base_url}/models").status_code == 401
    # Azure style: deployment in the path, api-key header
    r = client.post(
        f"{main_server.url}/openai/deployments/my-deploy/chat/completions",
        params={"api-version": "2024-06-01"},
        json={"messages": [{"role": "user", "content": "azure hi"}]},
        headers={"api-key": TOKEN},
    )
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "azure hi"
    assert r.json()["model"] == "my-deploy"


def test_request_log_records_what_was_received(client: httpx.Client, main_server: TestServer) -> None:
    body = chat_body(
        [{"type": "text", "text": "log me please"}, audio_part(tone(440))],
        system="You are terse.",
        temperature=0.3,
        max_tokens=50,
        top_p=0.9,
        seed=7,
    )
    raw = json.dumps(body).encode()
    r = client.post(
        f"{main_server.base_url}/chat/completions", content=raw, headers={**AUTH, "content-type": "application/json"}
    )
    assert r.status_code == 200
    sha = hashlib.sha256(raw).hexdigest()
    events = [e for e in main_server.log_events() if e["body_sha256"] == sha]
    assert [e["event"] for e in events] == ["received", "completed"]
    assert events[0]["seq"] == events[1]["seq"]
    done = events[1]
    assert done["status"] == 200 and done["fault"] is None and done["model"] == "test-model"
    assert {k: done["params"][k] for k in ("temperature", "max_tokens", "top_p", "seed")} == {
        "temperature": 0.3,
        "max_tokens": 50,
        "top_p": 0.9,
        "seed": 7,
    }
    assert done["messages"] == [
        {"role": "system", "text": "You are terse.", "n_audio": 0, "audio_fingerprints": []},
        {"role": "user", "text": "log me please", "n_audio": 1, "audio_fingerprints": [audio_fingerprint(tone(440))]},
    ]
    assert done["answer"] == "hello world"
    assert done["ts"] >= events[0]["ts"]
    text = Path(main_server.log_path).read_text()  # type: ignore[arg-type]
    assert TOKEN not in text  # neither the bearer token nor the api-key reach the log
    assert base64.b64encode(tone(440)).decode()[:200] not in text  # audio is logged as fingerprints only


# -- faults ------------------------------------------------------------------------------

FAULTS = {
    "seed": 11,
    "rates": {"500": 0.15, "429": 0.15, "malformed": 0.15, "drop": 0.15, "hang": 0.1},
    "retry_after": 3,
    "hang_seconds": 0.05,
}


async def _outcome(client: httpx.AsyncClient, url: str, raw: bytes) -> str:
    """What a client sees: the status, 'malformed' for a broken 200 body, 'drop' for no response."""
    try:
        r = await client.post(url, content=raw, headers={"content-type": "application/json"})
    except httpx.RemoteProtocolError:
        return "drop"
    if r.status_code == 429:
        assert r.headers["Retry-After"] == "3"
    if r.status_code != 200:
        assert "error" in r.json()
        return str(r.status_code)
    try:
        return "ok:" + r.json()["choices"][0]["message"]["content"]
    except ValueError:
        return "malformed"


async def _fault_run(server: TestServer, bodies: list[bytes], attempts: int = 2) -> dict[bytes, list[str]]:
    """All bodies at once, each sent ``attempts`` times in a row (a retry gets a fresh draw)."""
    url = f"{server.base_url}/chat/completions"
    async with httpx.AsyncClient(timeout=10, trust_env=False) as client:

        async def one(raw: bytes) -> list[str]:
            return [await _outcome(client, url, raw) for _ in range(attempts)]

        outcomes = await asyncio.gather(*(one(raw) for raw in bodies))
    return dict(zip(bodies, outcomes))


def start_servers(*overrides: dict[str, Any]) -> list[TestServer]:
    """Start several servers at once (their start-ups overlap)."""
    with ThreadPoolExecutor(len(overrides)) as pool:
        return list(pool.map(lambda kw: start_test_server(**kw), overrides))


def test_faults_reproducible_independent_of_order() -> None:
    bodies = [json.dumps(chat_body(f"question number {i}")).encode() for i in range(30)]
    servers = start_servers(
        {"faults": FAULTS, "request_log": True}, {"faults": FAULTS}, {"faults": {**FAULTS, "seed": 12}}
    )
    try:
        a, b, other_seed = servers

        async def runs() -> list[dict[bytes, list[str]]]:
            return await asyncio.gather(
                _fault_run(a, bodies), _fault_run(b, bodies[::-1]), _fault_run(other_seed, bodies)
            )

        run_a, run_b, run_other = asyncio.run(runs())
        log = a.log_events()
        stats = a.stats()
    finally:
        for server in servers:
            server.stop()
    assert run_a == run_b
    assert run_a != run_other
    kinds = {o if not o.startswith("ok:") else "ok" for outcomes in run_a.values() for o in outcomes}
    assert kinds == {"ok", "500", "429", "malformed", "drop"}, kinds
    assert any(o[0] != o[1] for o in run_a.values())  # retries draw afresh
    # answers never depend on faults; hang answers normally, after hang_seconds
    assert all(
        o == f"ok:question number {i}" for i, raw in enumerate(bodies) for o in run_a[raw] if o.startswith("ok:")
    )
    hung = {e["seq"] for e in log if e["event"] == "fault" and e["fault"] == "hang"}
    assert hung
    by_seq = {(e["seq"], e["event"]): e for e in log}
    for seq in hung:
        assert by_seq[(seq, "completed")]["status"] == 200
        assert by_seq[(seq, "completed")]["ts"] - by_seq[(seq, "received")]["ts"] >= 0.045
    # the log and the stats agree with what the client saw
    faults_logged = sorted(e["fault"] for e in log if e["event"] == "fault" and e["fault"] != "hang")
    faults_seen = sorted(o for outcomes in run_a.values() for o in outcomes if not o.startswith("ok:"))
    assert faults_logged == faults_seen
    assert stats["faults"]["500"] == stats["by_status"]["500"] == faults_seen.count("500")
    assert stats["faults"]["drop"] == faults_seen.count("drop")


# -- capacity, latency, lifecycle -------------------------------------------------------------


def test_max_concurrency_is_respected() -> None:
    async def fire(url: str) -> list[int]:
        async with httpx.AsyncClient(timeout=30, trust_env=False, limits=httpx.Limits(max_connections=40)) as c:
            rs = await asyncio.gather(*(c.post(url, json=chat_body(f"n{i}")) for i in range(30)))
        return [r.status_code for r in rs]

    with start_test_server(max_concurrency=4, latency_ms=100) as server:
        statuses = asyncio.run(fire(f"{server.base_url}/chat/completions"))
        stats = server.stats()
    assert statuses == [200] * 30
    assert stats["max_in_flight"] <= 4
    assert stats["max_in_flight"] == 4 and stats["max_queued"] > 0  # the limit was actually reached
    assert stats["in_flight"] == 0 and stats["by_path"]["/v1/chat/completions"] == 30


def test_latency_range_seen_in_log_and_stats_reset(client: httpx.Client) -> None:
    with start_test_server(latency_ms=[60, 80], request_log=True) as server:
        for i in range(3):
            assert answer(client, server, chat_body(f"slow {i}")) == f"slow {i}"
        events = server.log_events()
        assert server.reset_stats()["requests"] == 0
        assert server.stats()["by_path"] == {}
    for seq in {e["seq"] for e in events}:
        received = next(e for e in events if e["seq"] == seq and e["event"] == "received")
        completed = next(e for e in events if e["seq"] == seq and e["event"] == "completed")
        assert completed["ts"] - received["ts"] >= 0.055


def test_stop_leaves_no_process(client: httpx.Client) -> None:
    server = start_test_server()
    assert server.running and client.get(f"{server.url}/health").status_code == 200
    assert server.stop() == 0  # SIGTERM is a clean exit
    assert not server.running
    with pytest.raises(ProcessLookupError):
        os.kill(server.pid, 0)
    with pytest.raises(httpx.ConnectError):
        client.get(f"{server.url}/health")


def test_cli_port_file_overrides_and_sigterm(tmp_path: Path, client: httpx.Client) -> None:
    port_file = tmp_path / "port"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "evalkit.testing.server",
            "--port",
            "0",
            "--port-file",
            str(port_file),
            "--default-answer",
            "fixed answer",
            "--model",
            "cli-model",
            "--latency-ms",
            "1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        assert line.startswith("LISTENING http://127.0.0.1:")
        url = line.split()[1]
        assert port_file.read_text().strip() == url.rsplit(":", 1)[1]
        r = client.post(f"{url}/v1/chat/completions", json=chat_body("anything", model="cli-model"))
        assert r.json()["choices"][0]["message"]["content"] == "fixed answer"
        assert client.get(f"{url}/v1/models").json()["data"][0]["id"] == "cli-model"
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    assert out == ""  # exactly one line on stdout, already read


def test_bad_script_is_a_config_error_before_any_process(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match='did you mean "latency_ms"'):
        start_test_server({"latncy_ms": 5})
    with pytest.raises(ConfigError, match="unknown fault kind"):
        start_test_server(faults={"rates": {"timeout": 0.1}})
    with pytest.raises(ConfigError, match="sum"):
        start_test_server(faults={"rates": {"500": 0.7, "drop": 0.6}})
    bad = tmp_path / "bad.yaml"
    bad.write_text("answers: [{answer: x, audio_fingerprint: nothex}]\n")
    with pytest.raises(ConfigError, match="answers.0.audio_fingerprint"):
        start_test_server(bad)


def test_start_failure_reports_stderr() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(RuntimeError, match="cannot listen"):
            start_test_server(port=taken.getsockname()[1])


def test_in_process_app_strict_model() -> None:
    from aiohttp import web

    async def scenario() -> tuple[int, dict[str, Any], int]:
        runner = web.AppRunner(build_app({"model": "only-me", "strict_model": True, "default_answer": "ok"}))
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        port = runner.addresses[0][1]
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}/v1", trust_env=False) as c:
                wrong = await c.post("/chat/completions", json=chat_body("hi", model="someone-else"))
                right = await c.post("/chat/completions", json=chat_body("hi", model="only-me"))
        finally:
            await runner.cleanup()
        return wrong.status_code, wrong.json(), right.status_code

    status, body, ok = asyncio.run(scenario())
    assert status == 404 and body["error"]["code"] == "model_not_found" and body["error"]["param"] == "model"
    assert ok == 200

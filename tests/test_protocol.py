"""How each inference type is addressed: URLs, auth headers, and a real Azure-style round trip."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import FIXTURES, write_config

from evalkit.clients import protocol
from evalkit.clients.protocol import ChatWire, EndpointProtocol, chat_body
from evalkit.clients.request import ModelRequest
from evalkit.config import RequestKind
from evalkit.data.audio.pcm import AudioPart, wav_from_pcm16
from evalkit.util import jsonutil


@pytest.mark.parametrize(
    ("base", "kind", "version", "deployment", "expected"),
    [
        ("http://h:1/v1", "chat", None, None, "http://h:1/v1/chat/completions"),
        ("http://h:1/v1/", "transcription", None, None, "http://h:1/v1/audio/transcriptions"),
        ("http://h:1/v1/chat/completions", "chat", None, None, "http://h:1/v1/chat/completions"),
        (
            "https://x.openai.azure.com",
            "chat",
            "2024-10-21",
            "gpt4o",
            "https://x.openai.azure.com/openai/deployments/gpt4o/chat/completions?api-version=2024-10-21",
        ),
        (
            "https://x.openai.azure.com/openai/deployments/gpt4o",
            "transcription",
            "2024-10-21",
            "gpt4o",
            "https://x.openai.azure.com/openai/deployments/gpt4o/audio/transcriptions?api-version=2024-10-21",
        ),
        ("http://h:1/v1?key=abc", "chat", None, None, "http://h:1/v1/chat/completions?key=abc"),
    ],
)
def test_urls(base: str, kind: str, version: str | None, deployment: str | None, expected: str) -> None:
    assert EndpointProtocol(base, kind, api_version=version, deployment=deployment).url == expected


def test_auth_headers_and_repr_hide_nothing_they_should_not() -> None:
    openai = EndpointProtocol("http://h/v1", "chat", auth_token="sk-secret")
    azure = EndpointProtocol("http://h", "chat", auth_token="az-secret", api_version="2024-10-21", deployment="d")
    assert openai.headers == {"Authorization": "Bearer sk-secret"}
    assert azure.headers == {"api-key": "az-secret"}
    assert "secret" not in repr(openai) and "secret" not in repr(azure)


def test_azure_round_trip_against_loopback_server(tmp_path: Path, make_server) -> None:
    """inference_type openai + api_version: deployment path, api-version query and api-key header."""
    import subprocess
    import sys

    server = make_server(
        {"require_auth": "az-key-123", "answers": [{"match": "France", "answer": "Paris"}]}, request_log=True
    )
    config = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": [["tiny_qa", "exact_match"]],
            "models": [
                {
                    "info": {
                        "name": "azure-model",
                        "inference_type": "openai",
                        "url": server.url,
                        "model": "my-deployment",
                        "api_version": "2024-10-21",
                        "auth_token": "az-key-123",
                        "batch_size": 2,
                    }
                }
            ],
            "runspecs_dir": str(FIXTURES / "runspecs"),
            "output_dir": str(tmp_path / "runs"),
        },
    )
    proc = subprocess.run(
        [sys.executable, "-m", "evalkit", "run", str(config), "--quiet"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    paths = {e["path"] for e in server.log_events("completed")}
    assert paths == {"/openai/deployments/my-deployment/chat/completions"}
    results = json.loads(next((tmp_path / "runs").glob("*/results.json")).read_text())
    row = results["results"][0]
    assert row["n"] == 5 and row["n_failed"] == 0 and row["score"] == pytest.approx(0.2)


@pytest.mark.parametrize("inference_type", ["vllm", "transcription"])
def test_api_version_on_a_non_openai_entry_is_ignored_with_a_warning(
    tmp_path: Path, make_server, inference_type: str
) -> None:
    """LALMEval's README marks api_version mandatory; on a vllm entry it must not switch to Azure URLs (vLLM: 404)."""
    import subprocess
    import sys

    server = make_server(
        {"require_auth": "tok-1", "answers": [{"match": "France", "answer": "Paris"}]}, request_log=True
    )
    pairs = [["tiny_qa", "exact_match"]] if inference_type == "vllm" else [["tiny_asr", "word_error_rate"]]
    config = write_config(
        tmp_path / "config.yaml",
        {
            "dataset_metric": pairs,
            "models": [
                {
                    "info": {
                        "name": "served",
                        "inference_type": inference_type,
                        "url": server.base_url,
                        "model": "test-model",
                        "api_version": "2024-10-21",
                        "auth_token": "tok-1",
                        "batch_size": 2,
                    }
                }
            ],
            "runspecs_dir": str(FIXTURES / "runspecs"),
            "output_dir": str(tmp_path / "runs"),
        },
    )
    if inference_type == "transcription":
        pytest.importorskip("soundfile")
        from helpers import tone_wav

        data = tmp_path / "asr"
        data.mkdir()
        (data / "a.wav").write_bytes(tone_wav(440.0, 1.0))
        (data / "rows.jsonl").write_text(json.dumps({"id": "a", "audio": "a.wav", "text": "hello"}) + "\n")
        spec = {
            "_task": {"description": "test", "metrics": ["word_error_rate"]},
            "tiny_asr": {
                "path": str(data / "rows.jsonl"),
                "language": "en",
                "audio_column": "audio",
                "target_column": "text",
                "id_column": "id",
            },
        }
        specs = tmp_path / "specs" / "tones"
        specs.mkdir(parents=True)
        (specs / "tone_asr.json").write_text(json.dumps(spec))
        text = config.read_text().replace(str(FIXTURES / "runspecs"), str(tmp_path / "specs"))
        config.write_text(text)
    proc = subprocess.run(
        [sys.executable, "-m", "evalkit", "run", str(config), "--quiet"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    tail = "chat/completions" if inference_type == "vllm" else "audio/transcriptions"
    assert {e["path"] for e in server.log_events("completed")} == {f"/v1/{tail}"}
    assert "models[0] (served): api_version is ignored" in proc.stderr
    assert f"this entry is {inference_type}" in proc.stderr
    results = json.loads(next((tmp_path / "runs").glob("*/results.json")).read_text())
    assert results["results"][0]["n_failed"] == 0


def _clip(seconds: float, seed: int) -> AudioPart:
    rng = np.random.default_rng(seed)
    pcm = rng.integers(-3000, 3000, int(16000 * seconds), dtype=np.int16).astype("<i2").tobytes()
    part = AudioPart.from_wav(wav_from_pcm16(pcm))
    part.encode(frozenset({"b64"}))
    return part


def _audio(index: int) -> dict[str, Any]:
    return {"type": "input_audio", "input_audio": {"audio_index": index}}


@pytest.mark.parametrize(
    "messages",
    [
        pytest.param(
            [{"role": "user", "content": [{"type": "text", "text": "Transcribe."}, _audio(0)]}], id="one-clip"
        ),
        pytest.param(
            [
                {"role": "system", "content": 'Answer in «French», "quoted" \\ and \u2028 escaped.'},
                {"role": "user", "content": [_audio(1), {"type": "text", "text": "and"}, _audio(0), _audio(1)]},
                {"role": "assistant", "content": "ok"},
                {"role": "user", "content": [_audio(2)]},
            ],
            id="clips-in-several-turns-one-twice",
        ),
        pytest.param(
            [{"role": "user", "content": [{"type": "text", "text": f"say {protocol._AUDIO_MARK}"}, _audio(0)]}],
            id="a-text-holding-the-mark",
        ),
    ],
)
def test_a_chat_body_with_audio_is_the_plain_json_encoding_byte_for_byte(messages: list[dict[str, Any]]) -> None:
    """The base64 is joined in, not encoded as a JSON string: what goes out must not change by a byte."""
    request = ModelRequest(
        kind=RequestKind.CHAT,
        model="m",
        messages=messages,
        audio=[_clip(1.0, 1), _clip(0.5, 2), _clip(0.01, 3)],
        params={"temperature": 0.0, "max_tokens": 64, "extra": {"nested": [1, "two"]}},
    )
    plain = jsonutil.dumps_bytes(chat_body(request))
    body = ChatWire().json_body(request)
    assert body == plain and b"".join(ChatWire().json_pieces(request)) == plain
    assert json.loads(body)["messages"] == json.loads(plain)["messages"]
    sent = [p for m in json.loads(body)["messages"] if isinstance(m["content"], list) for p in m["content"]]
    asked = [p for m in messages if isinstance(m["content"], list) for p in m["content"]]
    clips = [hashlib.sha256(base64.b64decode(p["input_audio"]["data"])).hexdigest() for p in sent if "input_audio" in p]
    assert clips == [request.audio[p["input_audio"]["audio_index"]].sha256 for p in asked if "input_audio" in p]

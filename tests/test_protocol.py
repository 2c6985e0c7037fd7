"""How each inference type is addressed: URLs, auth headers, and a real Azure-style round trip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import FIXTURES, write_config

from evalkit.clients.protocol import EndpointProtocol


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

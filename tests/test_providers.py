"""Hosted providers: the documented config shapes reach the documented URL with the key as a Bearer token,
and work end to end against the project's test server with only the URL changed; providers without an
OpenAI-compatible API are refused with a message that says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import config_for, text_set

from evalkit.api import named_model_config
from evalkit.cli.main import main
from evalkit.clients.protocol import EndpointProtocol
from evalkit.clients.providers import BEDROCK_URL, karma_model, refusal
from evalkit.config import parse_config
from evalkit.errors import ConfigError

KEY = "sk-test-provider-key-0123456789"

#: (provider, the README's model entry, environment variable, the endpoint its public docs give)
DOCUMENTED: list[tuple[str, dict[str, Any], str, str]] = [
    (
        "gemini",
        {"name": "gemini-2.5-flash", "inference_type": "gemini", "model": "gemini-2.5-flash",
         "auth_token": "${GEMINI_API_KEY}"},
        "GEMINI_API_KEY",
        "https://generativelanguage.googleapis.com/v1beta/openai/chat/completions",
    ),
    (
        "bedrock",
        {"name": "gpt-oss-20b", "inference_type": "vllm", "model": "openai.gpt-oss-20b-1:0",
         "url": BEDROCK_URL.format(region="us-west-2"), "auth_token": "${AWS_BEARER_TOKEN_BEDROCK}"},
        "AWS_BEARER_TOKEN_BEDROCK",
        "https://bedrock-runtime.us-west-2.amazonaws.com/openai/v1/chat/completions",
    ),
    (
        "bedrock-access-gateway",
        {"name": "claude-sonnet-4", "inference_type": "vllm", "model": "us.anthropic.claude-sonnet-4-20250514-v1:0",
         "url": "http://localhost:8000/api/v1", "auth_token": "${BEDROCK_GATEWAY_KEY}"},
        "BEDROCK_GATEWAY_KEY",
        "http://localhost:8000/api/v1/chat/completions",
    ),
    (
        "sarvam",
        {"name": "sarvam-30b", "inference_type": "vllm", "model": "sarvam-30b", "url": "https://api.sarvam.ai/v1",
         "auth_token": "${SARVAM_API_KEY}"},
        "SARVAM_API_KEY",
        "https://api.sarvam.ai/v1/chat/completions",
    ),
    (
        "openai-transcription",
        {"name": "gpt-4o-transcribe", "inference_type": "transcription", "model": "gpt-4o-transcribe",
         "url": "https://api.openai.com/v1", "auth_token": "${OPENAI_API_KEY}"},
        "OPENAI_API_KEY",
        "https://api.openai.com/v1/audio/transcriptions",
    ),
]  # fmt: skip


def _info(entry: dict[str, Any], env: dict[str, str]) -> Any:
    config = parse_config({"dataset_metric": [["x", "exact_match"]], "models": [{"info": entry}]}, "<t>", env=env)
    return config.models[0].info


@pytest.mark.parametrize(("provider", "entry", "variable", "endpoint"), DOCUMENTED, ids=[d[0] for d in DOCUMENTED])
def test_documented_shape_reaches_the_documented_endpoint(
    provider: str, entry: dict[str, Any], variable: str, endpoint: str
) -> None:
    info = _info(entry, {variable: KEY})
    protocol = EndpointProtocol(info.urls[0], info.request_kind, auth_token=info.auth_token)
    assert protocol.url == endpoint
    assert protocol.headers == {"Authorization": f"Bearer {KEY}"}
    assert refusal(info.urls[0], info.inference_type) is None


@pytest.mark.parametrize(
    ("provider", "entry", "variable", "endpoint"), DOCUMENTED[:2] + DOCUMENTED[3:4], ids=["gemini", "bedrock", "sarvam"]
)
def test_documented_shape_runs_against_the_test_server(
    tmp_path: Path,
    make_server: Any,
    monkeypatch: pytest.MonkeyPatch,
    provider: str,
    entry: dict[str, Any],
    variable: str,
    endpoint: str,
) -> None:
    server = make_server(require_auth=KEY)
    monkeypatch.setenv(variable, KEY)
    local = {**entry, "url": server.url + "/v1", "retry_attempts": 0}
    config = config_for(tmp_path, text_set(tmp_path, 3), [{"info": local}])
    assert main(["run", str(config), "-q"]) == 0
    stats = server.stats()
    assert stats["by_path"] == {"/v1/chat/completions": 3}
    assert stats["by_status"] == {"200": 3}
    monkeypatch.setenv(variable, "wrong-key")
    assert main(["run", str(config), "-q", "--no-cache"]) == 3  # every request refused with 401
    assert server.stats()["by_status"].get("401") == 3


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("aws-transcribe", "Amazon Transcribe"),
        ("scribe_v1", "ElevenLabs speech-to-text"),
        ("saaras:v3", "Sarvam's speech-to-text"),
        ("us.anthropic.claude-sonnet-4-20250514-v1:0", "Converse API"),
    ],
)
def test_karma_models_without_an_openai_api_are_refused(
    name: str, says: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--model", name, "--datasets", "synth_qa", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert says in err and "OpenAI-compatible" in err and "Traceback" not in err


def test_karma_hosted_names_become_entries() -> None:
    data, said = named_model_config("gemini-2.5-flash", ["x"], ["exact_match"])
    assert data["models"] == [{"info": {"name": "gemini-2.5-flash", "inference_type": "vllm",
                                         "url": "https://generativelanguage.googleapis.com/v1beta/openai/",
                                         "model": "gemini-2.5-flash", "auth_token": "${GEMINI_API_KEY}"}}]  # fmt: skip
    assert "GEMINI_API_KEY" in said and KEY not in said
    hosted = karma_model("sarvam-30b")
    assert not isinstance(hosted, str) and hosted is not None and hosted.url == "https://api.sarvam.ai/v1"
    assert karma_model("Qwen/Qwen3-0.6B") is None


@pytest.mark.parametrize(
    ("url", "kind", "says"),
    [
        ("https://api.elevenlabs.io/v1", "transcription", "ElevenLabs"),
        ("https://transcribestreaming.us-east-1.amazonaws.com", "transcription", "Amazon Transcribe"),
        ("https://bedrock-runtime.us-east-1.amazonaws.com", "vllm", "/openai/v1"),
        ("https://api.sarvam.ai/v1", "transcription", "Sarvam"),
    ],
)
def test_config_urls_of_non_openai_apis_are_refused_before_a_request(
    tmp_path: Path, url: str, kind: str, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    entry = {"name": "m", "inference_type": kind, "url": url, "model": "m"}
    config = config_for(tmp_path, text_set(tmp_path, 2), [{"info": entry}])
    assert main(["run", str(config), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert says in err and "OpenAI-compatible" in err
    assert not (tmp_path / "runs").exists()
    with pytest.raises(ConfigError):
        from evalkit.api import prepare

        prepare(str(config), {})

"""A 404 from a model URL without /v1 says so, naming the URL and the one it probably meant."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import evalkit_cli

from evalkit.clients.hints import missing_v1_hint
from evalkit.clients.protocol import EndpointProtocol
from evalkit.config import RequestKind
from evalkit.testing import start_test_server


@pytest.fixture()
def server() -> Iterator[Any]:
    srv = start_test_server({"default_answer": "Paris"})
    yield srv
    srv.stop()


def _errors(tmp_path: Path, url: str) -> tuple[int, str, list[str]]:
    args = ["run", "--model-url", url, "--model-name", "served", "--dataset", "basic_qa", "--num-samples", "2",
            "--output-dir", "runs", "--quiet"]  # fmt: skip
    done = evalkit_cli(args, tmp_path)
    (records,) = tmp_path.glob("runs/*/records/*.jsonl")
    errors = [json.loads(line).get("error") or "" for line in records.read_text().splitlines()]
    return done.returncode, done.stdout + done.stderr, errors


def test_a_404_from_a_url_without_v1_names_the_url_with_it(tmp_path: Path, server: Any) -> None:
    root = server.base_url.removesuffix("/v1")
    code, output, errors = _errors(tmp_path, root)
    assert code == 3
    hint = f"the model's url {root} has no /v1"
    assert all("HTTP 404" in e and hint in e and f"probably {root}/v1)" in e for e in errors), errors
    assert hint in output  # the console's failure summary shows it too


def test_a_404_from_a_url_with_v1_gets_no_hint(tmp_path: Path, server: Any) -> None:
    code, _, errors = _errors(tmp_path, server.base_url + "/nothing-here")
    assert code == 3 and errors and all("HTTP 404" in e and "has no /v1" not in e for e in errors), errors


@pytest.mark.parametrize(
    ("url", "kind", "expected"),
    [
        ("http://h:8000", "chat", "http://h:8000/v1"),
        ("http://h:8000/", "chat", "http://h:8000/v1"),
        ("http://h:8000/chat/completions", "chat", "http://h:8000/v1"),
        ("https://proxy.example/llm", "chat", "https://proxy.example/llm/v1"),
        ("http://h:8000/audio/transcriptions", "transcription", "http://h:8000/v1"),
        ("http://h:8000/v1", "chat", None),
        ("https://api.example/v2beta", "chat", None),
    ],
)
def test_which_urls_get_the_hint(url: str, kind: str, expected: str | None) -> None:
    hint = missing_v1_hint(EndpointProtocol(url, RequestKind(kind)), url)
    assert (hint == "") == (expected is None), hint
    if expected is not None:
        assert hint.endswith(f"probably {expected})"), hint


def test_an_azure_deployment_gets_no_hint() -> None:
    protocol = EndpointProtocol(
        "https://x.openai.azure.com", RequestKind.CHAT, api_version="2024-06-01", deployment="gpt"
    )
    assert missing_v1_hint(protocol, protocol.base_url) == ""

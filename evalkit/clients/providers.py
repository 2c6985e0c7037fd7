"""Hosted model providers: which speak an OpenAI-compatible API evalkit can use, and which do not.

evalkit asks every model over OpenAI's wire format (chat completions or
``/audio/transcriptions``, ``Authorization: Bearer``). KARMA has a client per
provider instead; its users name those models (``gemini-2.5-flash``,
``scribe_v1``, ``aws-transcribe``, ...). Here each provider is either

- a model entry: the base URL of its OpenAI-compatible endpoint and the
  environment variable holding its key (Gemini, OpenAI, Sarvam's chat models,
  Amazon Bedrock's OpenAI-compatible Chat Completions), so
  ``evalkit run --model gemini-2.5-flash --datasets X`` runs without a config; or
- refused with a message that says the provider has no OpenAI-compatible API for
  that model (Amazon Transcribe, ElevenLabs and Sarvam speech-to-text, Claude on
  Bedrock's Converse API), whether it is named on the command line or its URL
  appears in a config, so the run stops before it sends requests that could only
  fail.

The URLs and headers are those of each provider's public documentation (README,
"Hosted providers").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from evalkit.config import GEMINI_OPENAI_URL
from evalkit.errors import ConfigError

OPENAI_URL = "https://api.openai.com/v1"
SARVAM_URL = "https://api.sarvam.ai/v1"
#: Bedrock's OpenAI-compatible Chat Completions, per region (a Bedrock API key as the Bearer token)
BEDROCK_URL = "https://bedrock-runtime.{region}.amazonaws.com/openai/v1"


@dataclass(frozen=True)
class Hosted:
    """A hosted model reached over its provider's OpenAI-compatible endpoint."""

    provider: str
    url: str
    key_env: str
    inference_type: str = "vllm"

    def entry(self, model: str) -> dict[str, Any]:
        return {
            "name": model,
            "inference_type": self.inference_type,
            "url": self.url,
            "model": model,
            "auth_token": f"${{{self.key_env}}}",
        }


#: (KARMA model name pattern, what it is): a Hosted entry, or the reason it cannot be asked; the patterns are kept
#: as text, which ``re`` compiles (and caches) when first matched: only a KARMA model name is matched against them
_KARMA_NAMES: list[tuple[str, Hosted | str]] = [
    (r"gemini-.*", Hosted("Gemini", GEMINI_OPENAI_URL, "GEMINI_API_KEY")),
    (
        r"gpt-4o(-mini)?-transcribe|whisper-1",
        Hosted("OpenAI", OPENAI_URL, "OPENAI_API_KEY", "transcription"),
    ),
    (r"gpt-.*|o[1-9](-.*)?", Hosted("OpenAI", OPENAI_URL, "OPENAI_API_KEY", "openai")),
    (r"sarvam-.*", Hosted("Sarvam", SARVAM_URL, "SARVAM_API_KEY")),
    (
        r"saar(as|ika):.*",
        "Sarvam's speech-to-text (POST /speech-to-text, api-subscription-key header) is not OpenAI-compatible",
    ),
    (
        r"scribe_v.*",
        "ElevenLabs speech-to-text (POST /v1/speech-to-text with model_id, xi-api-key header) is not OpenAI-compatible",
    ),
    (
        r"aws-transcribe",
        "Amazon Transcribe (streaming or batch jobs through the AWS SDK) has no OpenAI-compatible API",
    ),
    (
        r"(us\.|eu\.|apac\.)?anthropic\.claude.*",
        "KARMA reaches Claude on Bedrock through Bedrock's Converse API, which is not OpenAI-compatible, and "
        "Bedrock's own OpenAI-compatible Chat Completions serves OpenAI's open-weight models, not Claude; run "
        "the Bedrock Access Gateway (github.com/aws-samples/bedrock-access-gateway, an OpenAI-compatible proxy) "
        "and give its .../api/v1 URL with --model-url",
    ),
    (r"aws-bedrock-knowledge-retriever", "a Bedrock knowledge-base retriever is not a model endpoint"),
    (r"docassistchat/.*", "Eka's DocAssist chat is a private service without an OpenAI-compatible API"),
]

#: hosts whose APIs are not OpenAI-compatible, with the reason; a config URL on one of them is refused
_NOT_OPENAI_HOSTS: list[tuple[str, str]] = [
    (
        r"api\.elevenlabs\.io",
        "ElevenLabs' API (xi-api-key header, /v1/speech-to-text) is not OpenAI-compatible",
    ),
    (
        r"transcribe(streaming)?\.[a-z0-9-]+\.amazonaws\.com",
        "Amazon Transcribe has no OpenAI-compatible API (it is reached through the AWS SDK)",
    ),
]


def karma_model(name: str) -> Hosted | str | None:
    """A KARMA hosted model name: its OpenAI-compatible entry, the reason it has none, or None if not one."""
    for pattern, what in _KARMA_NAMES:
        if re.fullmatch(pattern, name):
            return what
    return None


def refusal(url: str, inference_type: str) -> str | None:
    """Why a model entry's URL cannot be asked the OpenAI way; None when nothing is known against it."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    for pattern, reason in _NOT_OPENAI_HOSTS:
        if re.fullmatch(pattern, host):
            return reason
    if host == "api.sarvam.ai" and inference_type == "transcription":
        return "Sarvam's speech-to-text (/speech-to-text) is not OpenAI-compatible; only its chat models are"
    if re.fullmatch(r"bedrock-runtime(-fips)?\.[a-z0-9-]+\.amazonaws\.com", host):
        if inference_type == "transcription":
            return "Bedrock's OpenAI-compatible API offers chat completions only"
        if not parts.path.rstrip("/").endswith("/openai/v1"):
            return (
                "Bedrock's runtime answers OpenAI-style requests under /openai/v1 only (its Converse and Invoke APIs "
                f"are not OpenAI-compatible): use {BEDROCK_URL.format(region='REGION')}"
            )
    return None


def check_models(models: list[tuple[str, str, list[str]]]) -> None:
    """Refuse (ConfigError) any (name, inference_type, urls) whose URL is a provider's non-OpenAI API."""
    for name, inference_type, urls in models:
        for url in urls:
            reason = refusal(url, inference_type)
            if reason:
                raise ConfigError(f"model {name!r}: url {url}: {reason}; evalkit speaks only OpenAI-compatible APIs")

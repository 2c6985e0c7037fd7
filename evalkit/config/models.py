"""``models:``: one entry per model endpoint (a replica when several share a name), and how it is asked.

LALMEval's layout (each entry an ``info:`` block) is evalkit's own, so its configs load unchanged; AU-Harness's
``inference_type: gemini`` is read here as the OpenAI-compatible entry that reaches Gemini.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from evalkit.config.base import Strict
from evalkit.config.launch import EVALKIT_SERVE_BACKENDS, LaunchSpec, launch_max_batch
from evalkit.config.limits import (
    DAY_S,
    MAX_IMAGE_PIXELS,
    MAX_IMAGE_SIDE,
    MAX_IN_FLIGHT,
    MAX_REQUESTS_PER_MINUTE,
    MAX_RESPONSE_BYTES,
    MAX_RETRIES,
    MAX_TEMPERATURE,
    MAX_TOKENS,
    MAX_TOKENS_PER_MINUTE,
    SEED_MAX,
    SEED_MIN,
    WEEK_S,
)
from evalkit.config.price import Price, named_price
from evalkit.util.enums import StrEnum

InferenceType = Literal["openai", "vllm", "transcription", "local"]


class RequestKind(StrEnum):
    """The wire format a model is asked in; every inference type but ``transcription`` speaks chat."""

    CHAT = "chat"
    TRANSCRIPTION = "transcription"
    #: the legacy completions API, asked with echo + logprobs to score options by likelihood
    COMPLETION = "completion"

    @property
    def audio_encoding(self) -> str:
        """How audio travels: a WAV file upload for transcriptions, base64 text in chat ``input_audio`` parts."""
        return "wav" if self == RequestKind.TRANSCRIPTION else "b64"


_INFERENCE_ALIASES = {
    "audio transcription": "transcription",
    "audio_transcription": "transcription",
    "azure": "openai",
    "openai_compatible": "vllm",
}
#: Google's OpenAI-compatible Gemini endpoint: `inference_type: gemini` is an OpenAI-compatible (vllm) entry
#: with this url unless the entry gives its own (Vertex AI's, a proxy), sending the API key as a Bearer token
GEMINI_OPENAI_URL = "https://generativelanguage.googleapis.com/v1beta/openai/"


def _gemini_entry(data: Any) -> Any:
    """``inference_type: gemini`` (AU-Harness's) as the OpenAI-compatible entry that reaches Gemini."""
    if not (isinstance(data, dict) and str(data.get("inference_type", "")).strip().lower() == "gemini"):
        return data
    if not data.get("auth_token") and not data.get("auth_command"):
        raise ValueError(
            "inference_type gemini needs auth_token: a Gemini API key (sent as a Bearer token to "
            f"{GEMINI_OPENAI_URL}), or for the Vertex AI url you give an access token or an auth_command printing one"
        )
    url = data.get("url") or (None if data.get("launch") else GEMINI_OPENAI_URL)
    return {**data, "inference_type": "vllm", "url": url}


#: request-body keys evalkit builds itself, or that change what an answer is: never taken from ``extra_body`` (or
#: ``--model-args``), where they would silently replace what the records say was sent. Every other key of
#: ``extra_body`` is sent as given and written in each ``records/sent`` entry's ``params``.
REQUEST_BUILT_KEYS: dict[str, str] = {
    "model": "the model id is the entry's `model`",
    "messages": "evalkit builds the conversation from the dataset and the prompt (records/sent shows it)",
    "prompt": "evalkit builds the prompt from the dataset (system_prompt and the prompt options change it)",
    "input": "evalkit sends a chat `messages` list built from the dataset, not a Responses-API `input`",
    "tools": "the functions offered come from the dataset's sample (records/sent shows them)",
    "functions": "the functions offered come from the dataset's sample (records/sent shows them)",
    "n": "evalkit reads one answer per request",
    "best_of": "evalkit reads one answer per request",
    "stream": "evalkit reads whole JSON answers, not an event stream",
    "stream_options": "evalkit reads whole JSON answers, not an event stream",
    "echo": "an answer with the prompt echoed in front would be scored as the model's",
    "suffix": "evalkit builds the whole prompt from the dataset",
}


def refuse_request_built_keys(body: dict[str, Any]) -> None:
    """Refuse a request body key evalkit builds (:data:`REQUEST_BUILT_KEYS`): a ValueError naming the key and why."""
    for key in body:
        if key in REQUEST_BUILT_KEYS:
            raise ValueError(
                f"{key!r} cannot be set: {REQUEST_BUILT_KEYS[key]}; what was sent must be what is recorded"
            )


#: model entry fields whose value makes evalkit run a program (a token command, a server it launches): a config file
#: may name one, a flag string (``--model-args``) never, since a command line is often assembled from others' text
RUNS_A_PROGRAM = frozenset({"auth_command", "launch"})


#: a template's blank: ``<ENDPOINT_URL>``, ``<your-host>``
_PLACEHOLDER = re.compile(r"<[^<>]*>")


#: set while a converted template is checked for shape only: its blanks are the user's to fill afterwards
_BLANK_URLS_ALLOWED: ContextVar[bool] = ContextVar("blank_urls_allowed", default=False)


@contextmanager
def blank_urls_allowed() -> Iterator[None]:
    """Within it, a model's url is not checked (``evalkit convert`` of a template with ``<ENDPOINT_URL>``)."""
    token = _BLANK_URLS_ALLOWED.set(True)
    try:
        yield
    finally:
        _BLANK_URLS_ALLOWED.reset(token)


def endpoint_url_problem(url: str) -> None:
    """Refuse what cannot be an endpoint before a run sends to it (a template's ``<ENDPOINT_URL>``, a bare host).

    Otherwise such a config validates and dry-runs, and the run then fails every sample.
    """
    if _BLANK_URLS_ALLOWED.get():
        return
    blank = _PLACEHOLDER.search(url)
    if blank:
        raise ValueError(
            f"the placeholder {blank.group(0)} is still there: put the endpoint's URL in its place, "
            "e.g. http://localhost:8000/v1"
        )
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("not an http(s) URL with a host: expected e.g. http://localhost:8000/v1 or https://host/v1")


class ModelInfo(Strict):
    """One model endpoint (a replica when several entries share ``name``).

    Endpoint settings (url, auth_token, api_version, batch_size, timeout) are
    per entry; the model's settings (retries, deadline, pacing, chunking,
    generation parameters) are read from the first entry of a name, so the
    descriptions say which is which.
    """

    name: str = Field(
        description="Mandatory: the model's name in results and in override rules; entries sharing a name are "
        "replicas of one "
        "model and must share its `model` id and inference_type."
    )
    inference_type: InferenceType = Field(
        description="Mandatory: how the model is asked: openai (OpenAI or Azure chat completions), vllm (any "
        "OpenAI-compatible "
        "chat server), transcription (/audio/transcriptions) or local (a server evalkit starts from `launch`); "
        "azure, openai_compatible and 'audio transcription' are accepted as aliases, and gemini (AU-Harness's) as a "
        "vllm entry whose url defaults to Google's OpenAI-compatible Gemini endpoint, with auth_token its API key."
    )
    url: str | list[str] | None = Field(
        None,
        description="Base URL of the endpoint, e.g. http://host:8000/v1 (the request path is appended); a list of "
        "URLs makes "
        "replicas that share the work. Mandatory unless `launch` is given, which sets it itself.",
    )
    model: str = Field(description="Mandatory: the model id sent in every request (for Azure, the deployment name).")
    auth_token: str | None = Field(
        None,
        description="API key sent as a Bearer token (as the api-key header when api_version is set); none sent when "
        "absent. "
        "Never logged or stored.",
    )
    auth_command: list[str] | None = Field(
        None,
        description="A command whose standard output is a short-lived bearer token, run when the run starts and "
        "again every auth_refresh_s (Gemini on Vertex AI: [gcloud, auth, application-default, print-access-token]; "
        "Azure: [az, account, get-access-token, --query, accessToken, -o, tsv]); not with auth_token. The token is "
        "never logged or stored; absent: auth_token (or none).",
    )
    auth_refresh_s: float = Field(
        2700.0,
        gt=0,
        le=WEEK_S,
        description="Seconds between runs of auth_command (default 2700: Google's and Azure's tokens last an hour; "
        "more than 0, at most 604800: a week).",
    )
    api_version: str | None = Field(
        None,
        description="Azure OpenAI api-version, e.g. 2024-10-21; on an `openai` entry it selects Azure routing "
        "(/openai/deployments/<model>/... with ?api-version= and the api-key header). Ignored, with a warning, on "
        "other inference types. Absent: plain OpenAI-style URLs.",
    )
    batch_size: int = Field(
        8,
        ge=1,
        le=MAX_IN_FLIGHT,
        description="Requests in flight at once against each URL of this entry, and its connection limit (default 8; "
        "for a server evalkit starts with `evalkit serve`, twice its --max-batch-size, which defaults to 8; "
        "1 to 65536).",
    )
    timeout: float = Field(
        60.0,
        gt=0,
        le=WEEK_S,
        description="Seconds one attempt may take before it fails as a timeout (default 60; more than 0, at most "
        "604800: a week); a retry gets a new attempt.",
    )
    max_response_bytes: int = Field(
        10 * 1024 * 1024,
        ge=1024,
        le=MAX_RESPONSE_BYTES,
        description="Largest answer body read from this endpoint, in bytes (default 10485760, 10 MiB; 1024 to "
        "536870912, 512 MiB, so a stored answer fits SQLite); a bigger one "
        "is cut off unread and the sample fails as too_large (not retried), so a runaway answer cannot exhaust "
        "memory.",
    )
    follow_redirects: bool = Field(
        False,
        description="Follow a 307/308 redirect to the same origin (scheme, host, port), sending the request "
        "again there, up to 5 in a row (default false: every 3xx fails the sample as `redirect`). A redirect to "
        "another origin is never followed, whatever this says: it fails as `redirect_cross_origin` and the "
        "request, with its credentials, is never sent there.",
    )
    retry_attempts: int = Field(
        3,
        ge=0,
        le=MAX_RETRIES,
        description="Retries after the first attempt for 5xx, connection errors, timeouts and unparseable answers "
        "(default 3; 0 to 100; "
        "per model). 429s do not use them up; other 4xx are never retried.",
    )
    deadline: float | None = Field(
        None,
        gt=0,
        le=WEEK_S,
        description="Seconds a request may take over all its attempts and waits, counted from its first attempt (per "
        "model; more than 0, at most 604800: a week). "
        "Absent: max(300, 4 x timeout x (retry_attempts + 1)).",
    )
    delay: float = Field(
        0.0,
        ge=0,
        le=DAY_S * 1000,
        description="Milliseconds each worker waits before every attempt, a politeness pause (default 0: none; per "
        "model; 0 to 86400000: a day).",
    )
    chunk_size: float | None = Field(
        None,
        gt=0,
        le=DAY_S,
        description="Most seconds of audio sent in one request (per model; more than 0, at most 86400: a day); longer "
        "audio is cut into pieces asked "
        "one by one, "
        "or truncated, as the dataset's long_audio says. Absent: audio is sent whole.",
    )
    max_image_side: int | None = Field(
        None,
        ge=1,
        le=MAX_IMAGE_SIDE,
        description="Longest side, in pixels (1 to 65536), of an image sent to this model (per model: servers cap "
        "image size); a "
        "bigger image is downsized keeping its aspect ratio and re-encoded (JPEG and WebP at quality 90, others as "
        "PNG). Absent: no limit.",
    )
    max_image_pixels: int | None = Field(
        None,
        ge=1,
        le=MAX_IMAGE_PIXELS,
        description="Most pixels (width x height; 1 to 4294967296) of an image sent to this model, applied with "
        "max_image_side (the "
        "smaller size wins), e.g. 1003520 for Qwen2-VL's default; absent: no limit.",
    )
    temperature: float | None = Field(
        None,
        ge=0,
        le=MAX_TEMPERATURE,
        description="This model's sampling temperature (0 to 100), below temperature_overrides/generation_overrides "
        "and above the runspec's defaults; absent everywhere: 0.",
    )
    max_tokens: int | None = Field(
        None,
        ge=1,
        le=MAX_TOKENS,
        description="Most tokens the model may generate per answer (1 to 10000000), below generation_overrides and "
        "above the runspec's defaults; absent everywhere: not sent (the server decides).",
    )
    top_p: float | None = Field(
        None,
        gt=0,
        le=1,
        description="Nucleus-sampling probability mass (0 < top_p <= 1), below generation_overrides and above the "
        "runspec's "
        "defaults; absent everywhere: not sent.",
    )
    seed: int | None = Field(
        None,
        ge=SEED_MIN,
        le=SEED_MAX,
        description="Sampling seed sent with every request (a 64-bit integer), below generation_overrides and above "
        "the runspec's defaults; "
        "absent everywhere: not sent.",
    )
    extra_body: dict[str, Any] = Field(
        default_factory=dict,
        description="Extra JSON fields merged into every chat request's body after the generation parameters, so "
        "they win "
        "(default none; per model). Each shows in records/sent (`params`); keys evalkit builds itself (model, "
        "messages, prompt, input, tools, functions, n, best_of, stream, stream_options, echo, suffix) are refused.",
    )
    requests_per_minute: float | None = Field(
        None,
        gt=0,
        le=MAX_REQUESTS_PER_MINUTE,
        description="Most requests per minute sent to this model, shared by its replicas (a token bucket; more than "
        "0, at most 10000000); absent: no limit.",
    )
    tokens_per_minute: float | None = Field(
        None,
        gt=0,
        le=MAX_TOKENS_PER_MINUTE,
        description="Most tokens per minute (the responses' usage.total_tokens) spent on this model, shared by its "
        "replicas (more than 0, at most 10000000000); "
        "absent: no limit.",
    )
    price: Price | None = Field(
        None,
        description="USD per million tokens, {input_per_million: X, output_per_million: Y} with optional "
        "cached_input_per_million and reasoning_per_million, or the name of an entry of evalkit's table of public "
        "prices (docs: Cost and budget); turns the usage the server reports into cost. Absent: tokens only, no cost.",
    )
    launch: LaunchSpec | None = Field(
        None,
        description="Let evalkit start the model's server on a loopback port (or, with `launch.ray`, as replicas on a "
        "Ray cluster) and stop it after the run (mandatory for inference_type local); give either this or `url`. "
        "Absent: the endpoint at `url` is used as it runs.",
    )

    @model_validator(mode="before")
    @classmethod
    def _gemini(cls, data: Any) -> Any:
        return _gemini_entry(data)

    @field_validator("price", mode="before")
    @classmethod
    def _price_by_name(cls, value: Any) -> Any:
        return named_price(value)

    @field_validator("url")
    @classmethod
    def _urls_are_urls(cls, value: str | list[str] | None) -> str | list[str] | None:
        for url in [value] if isinstance(value, str) else value or []:
            endpoint_url_problem(url)
        return value

    @field_validator("extra_body")
    @classmethod
    def _no_request_built_keys(cls, value: dict[str, Any]) -> dict[str, Any]:
        refuse_request_built_keys(value)
        return value

    @field_validator("inference_type", mode="before")
    @classmethod
    def _alias_inference_type(cls, value: Any) -> Any:
        if isinstance(value, str):
            return _INFERENCE_ALIASES.get(value.strip().lower(), value.strip().lower())
        return value

    @model_validator(mode="after")
    def _one_way_to_authenticate(self) -> ModelInfo:
        if self.auth_command is not None:
            if self.auth_token:
                raise ValueError(
                    "give `auth_token` (a fixed key) or `auth_command` (a command printing a token), not both"
                )
            if not self.auth_command or not all(isinstance(part, str) and part for part in self.auth_command):
                raise ValueError("`auth_command` needs a non-empty list of words, the command and its arguments")
        return self

    @model_validator(mode="after")
    def _needs_url_or_launch(self) -> ModelInfo:
        if self.url is None and self.launch is None:
            raise ValueError("needs `url` (an endpoint) or `launch` (a server evalkit starts)")
        if self.url is not None and self.launch is not None:
            raise ValueError(
                "give `url` (an endpoint you run) or `launch` (a server evalkit starts and addresses itself), not both"
            )
        if self.inference_type == "local" and self.launch is None:
            raise ValueError("inference_type `local` needs a `launch:` block with model_path and backend")
        if self.launch is not None:
            if self.launch.backend is None:
                self.launch.backend = "vllm" if self.inference_type == "vllm" else "transformers"
            if self.launch.backend not in ("pocketsphinx", "test-server") and not self.launch.model_path:
                raise ValueError(f"launch: backend {self.launch.backend!r} needs `model_path`")
            if "batch_size" not in self.model_fields_set and self.launch.backend in EVALKIT_SERVE_BACKENDS:
                # one batch generating while the next gathers: fewer in flight leaves batches half full
                self.batch_size = 2 * launch_max_batch(self.launch.args)
            if self.launch.backend == "transformers-serve" and self.inference_type != "vllm":
                raise ValueError(
                    "launch: backend `transformers-serve` serves chat only: it needs inference_type `vllm` "
                    f"(OpenAI chat), not {self.inference_type!r}"
                )
            if self.launch.backend == "vllm" and self.inference_type not in ("vllm", "transcription"):
                raise ValueError(
                    "launch: backend `vllm` needs inference_type `vllm` (chat) or `transcription` (vLLM's "
                    f"/v1/audio/transcriptions), not {self.inference_type!r}"
                )
        return self

    @property
    def urls(self) -> list[str]:
        if self.url is None:
            return []
        return [self.url] if isinstance(self.url, str) else list(self.url)

    @property
    def azure_api_version(self) -> str | None:
        """The api-version that selects Azure routing: only ``openai`` entries are Azure deployments.

        LALMEval's README marks ``api_version`` mandatory, so its users set it on
        vllm and transcription entries too, where Azure URLs would answer 404.
        """
        return self.api_version if self.inference_type == "openai" else None

    @property
    def request_kind(self) -> RequestKind:
        return RequestKind.TRANSCRIPTION if self.inference_type == "transcription" else RequestKind.CHAT


class ModelEntry(Strict):
    """One item of ``models:``; the ``info`` wrapper is LALMEval's layout, kept so its configs load unchanged."""

    info: ModelInfo = Field(description="The model endpoint: its name, how it is asked, where, and how hard.")

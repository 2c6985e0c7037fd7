"""The schema of config.yaml, validated with pydantic.

Every field carries its documentation (``description``) so ``sample_config.yaml``
and error messages speak the same language. Validation collects *all*
problems and reports them at once, each with the file, the key path and a
"did you mean" suggestion, as a ConfigError (exit code 2, no traceback).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from evalkit.compat.auharness import is_auharness, translate
from evalkit.envvars import expand_tree
from evalkit.errors import ConfigError, did_you_mean
from evalkit.util.enums import StrEnum
from evalkit.util.redact import is_secret_key
from evalkit.util.yaml_safe import load_yaml_file, shorten

InferenceType = Literal["openai", "vllm", "transcription", "local"]
AggregateMethod = Literal["macro", "micro"]

# The documented ranges of the numeric fields. A value outside them cannot be meant and is refused with the
# range (a `delay` of 2**63 ms passed validation and hung the run with no request sent); floats must be finite.
#: a day, in seconds: the longest pause or stretch of audio a config may ask for
DAY_S = 86_400
#: a week, in seconds: the longest timeout or deadline a config may ask for
WEEK_S = 604_800
#: most requests in flight against one URL (batch_size, judge_concurrency)
MAX_IN_FLIGHT = 65_536
#: most retries of one request after its first attempt
MAX_RETRIES = 100
#: most tokens generated per answer (beyond the longest context windows served)
MAX_TOKENS = 10_000_000
#: highest sampling temperature (servers take 0-2; nothing meaningful samples hotter than this)
MAX_TEMPERATURE = 100
#: largest answer body: a stored answer must fit SQLite's 1,000,000,000-byte value limit with room to spare
MAX_RESPONSE_BYTES = 512 * 1024 * 1024
#: longest image side in pixels (JPEG's limit is 65,535) and most pixels (that side squared)
MAX_IMAGE_SIDE = 65_536
MAX_IMAGE_PIXELS = MAX_IMAGE_SIDE * MAX_IMAGE_SIDE
#: most requests per minute (about 166,000 a second) and tokens per minute a rate limit may name
MAX_REQUESTS_PER_MINUTE = 10_000_000
MAX_TOKENS_PER_MINUTE = 10_000_000_000
#: most samples per dataset
MAX_SAMPLES = 1_000_000_000
#: seeds are 64-bit integers, as servers and numpy take them
SEED_MIN, SEED_MAX = -(2**63), 2**63 - 1


def _quoted_pair(text: str, index: int) -> list[str]:
    """``"[name, metric]"`` -> ``["name", "metric"]``; any other string is a mistake named with its position."""
    inner = text.strip()
    parts = [part.strip().strip("'\"").strip() for part in inner[1:-1].split(",")]
    if not (inner.startswith("[") and inner.endswith("]")) or len(parts) != 2 or not all(parts):
        raise ValueError(
            f'[{index}] {text!r} is not a [dataset, metric] pair; write [name, metric] or "[name, metric]"'
        )
    return parts


def aggregate_entry(entry: tuple[Any, ...]) -> tuple[str, list[str], str]:
    """(metric, names, method) of an ``aggregate`` entry written with or without its method."""
    return entry[0], list(entry[1]), entry[2] if len(entry) > 2 else "macro"


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


class _Strict(BaseModel):
    #: allow_inf_nan=False: .inf or .nan is never a meant timeout, rate or temperature
    model_config = ConfigDict(extra="forbid", populate_by_name=True, allow_inf_nan=False)


#: most replicas one `launch.ray` block may ask for
MAX_RAY_REPLICAS = 4096


#: the most of one resource a replica may reserve: a petabyte of memory in bytes; a bigger number is a typo
MAX_RAY_RESOURCE = 1e15


class RayLaunch(_Strict):
    """Replicas of a launched server on an existing Ray cluster, instead of one on this machine.

    Each replica is a Ray actor that runs the same server command on its node, placed by a placement group
    with ``resources_per_replica`` per bundle, so replicas spread across nodes and a GPU replica gets its GPU.
    """

    address: str | None = Field(
        None,
        description="The Ray cluster, as `ray.init` takes it: `ray://head:10001` (Ray Client) or `head:6379` from a "
        "machine of the cluster; absent: RAY_ADDRESS, else the cluster this machine belongs to (`auto`). evalkit "
        "never starts a cluster itself.",
    )
    replicas: int = Field(
        1,
        ge=1,
        le=MAX_RAY_REPLICAS,
        description="How many servers to start, each one replica of this model (default 1; 1 to 4096).",
    )
    resources_per_replica: dict[str, float] = Field(
        default_factory=lambda: {"CPU": 1.0},
        description="Ray resources each replica reserves, e.g. {GPU: 1} or {CPU: 4, GPU: 1}; CPU, GPU and memory "
        "(bytes) are Ray's own, other names are the cluster's custom resources (default {CPU: 1}; each amount 0 to "
        "1e15).",
    )
    strategy: Literal["SPREAD", "STRICT_SPREAD", "PACK", "STRICT_PACK"] = Field(
        "SPREAD",
        description="Ray placement-group strategy for the replicas: SPREAD (across nodes as far as they fit), "
        "STRICT_SPREAD (one replica per node, or none start), PACK or STRICT_PACK (default SPREAD).",
    )
    max_restarts: int = Field(
        3,
        ge=0,
        le=1000,
        description="Times each replica is started again after its server or actor died during the run (default "
        "3; 0 to 1000); past that the model goes on with the replicas left.",
    )

    @field_validator("strategy", mode="before")
    @classmethod
    def _strategy_case(cls, value: Any) -> Any:
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator("resources_per_replica")
    @classmethod
    def _amounts(cls, value: dict[str, float]) -> dict[str, float]:
        problems = [
            f"{name!r}: {amount:g} is not an amount; expected a number from 0 to {MAX_RAY_RESOURCE:g}"
            for name, amount in value.items()
            if not 0 <= amount <= MAX_RAY_RESOURCE
        ]
        if any(not name.strip() for name in value):
            problems.append("a resource needs a name (CPU, GPU, memory or a custom resource of the cluster)")
        if not any(amount > 0 for amount in value.values()):
            problems.append("needs at least one amount above 0: Ray places each replica by what it reserves")
        if problems:
            raise ValueError("; ".join(problems))
        return value


class LaunchSpec(_Strict):
    """How evalkit starts a model server itself (local models, vLLM), on this machine or on a Ray cluster."""

    model_path: str | None = Field(
        None,
        description="The model the server loads, passed as its --model (a local Hugging Face model folder for "
        "transformers; "
        "whatever vLLM accepts for vllm); mandatory except for pocketsphinx, which brings its own model.",
    )
    backend: Literal["transformers", "pocketsphinx", "vllm", "transformers-serve", "test-server"] | None = Field(
        None,
        description="The server to start: vllm (vLLM's OpenAI server, for inference_type vllm, or transcription for a "
        "Whisper-class model on its /v1/audio/transcriptions), transformers-serve (transformers' own `transformers "
        "serve`, for inference_type vllm; it answers only requests naming the model folder, so evalkit sends "
        "launch.model_path as the id), an `evalkit serve` backend "
        "(transformers, pocketsphinx) or test-server (evalkit's scriptable test server, no model: to try a config or "
        "a cluster before a model is spent on it; launch.args take its --script, --latency-ms, ...); when absent, "
        "vllm for inference_type vllm and transformers otherwise.",
    )
    args: list[str] = Field(
        default_factory=list,
        description="Extra command-line arguments appended to the server's command (default none); host, port, model "
        "and "
        "served-model-name flags are set by evalkit and refused here.",
    )
    env: dict[str, str] = Field(
        default_factory=dict,
        description="Environment variables added to the server process's environment (default none); values of "
        "secret-looking "
        "names are masked in logs and messages.",
    )
    startup_timeout: float = Field(
        600.0,
        gt=0,
        le=WEEK_S,
        description="Seconds the server may take from start until /health answers and /v1/models lists the entry's "
        "model; "
        "the run stops with the server's log tail when it is exceeded (default 600; more than 0, at most 604800: a "
        "week).",
    )
    ray: RayLaunch | None = Field(
        None,
        description="Start the server as replicas on a Ray cluster (needs `pip install 'evalkit[ray]'`): each "
        "replica runs on the node Ray places it on, and a replica that dies is started again. Absent: one server "
        "on this machine's loopback.",
    )


#: `launch.backend` values that start `evalkit serve` (the others are vLLM's and transformers' own servers)
EVALKIT_SERVE_BACKENDS = frozenset({"transformers", "pocketsphinx"})
#: evalkit serve's own default for --max-batch-size on the CPU
SERVE_DEFAULT_MAX_BATCH = 8
#: ... and on a CUDA device: measured on an H200 with 7B-shaped models, batches of 32 gave 2x (audio chat) and
#: 4.6x (text) the throughput of batches of 8; a batch that does not fit is halved (see the transformers backend)
SERVE_DEFAULT_MAX_BATCH_CUDA = 32


def serve_default_max_batch(device: str) -> int:
    """evalkit serve's --max-batch-size when none is given, by --device."""
    return SERVE_DEFAULT_MAX_BATCH_CUDA if device.strip().lower().startswith("cuda") else SERVE_DEFAULT_MAX_BATCH


def _option_value(args: list[str], option: str) -> str | None:
    """The value of ``option`` on a command line (``--opt N`` or ``--opt=N``), the last one given; None if absent."""
    found: str | None = None
    for index, arg in enumerate(args):
        name, eq, value = arg.partition("=")
        if name == option:
            found = value if eq else (args[index + 1] if index + 1 < len(args) else "")
    return found


def _launch_max_batch(args: list[str]) -> int:
    """The --max-batch-size an `evalkit serve` command line sets, else its default for the line's --device."""
    default = serve_default_max_batch(_option_value(args, "--device") or "cpu")
    value = _option_value(args, "--max-batch-size")
    if value is None:
        return default
    try:
        return max(1, int(value))
    except ValueError:
        return default  # evalkit serve itself refuses the value, with its own message


class ModelInfo(_Strict):
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
        "(default none; per model).",
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
                self.batch_size = 2 * _launch_max_batch(self.launch.args)
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


class ModelEntry(_Strict):
    """One item of ``models:``; the ``info`` wrapper is LALMEval's layout, kept so its configs load unchanged."""

    info: ModelInfo = Field(description="The model endpoint: its name, how it is asked, where, and how hard.")


class Filters(_Strict):
    """Which samples run and how they are prompted."""

    num_samples: int | None = Field(
        None,
        ge=0,
        le=MAX_SAMPLES,
        description="Samples per dataset, counted among those the other filters keep (0 to 1000000000); absent: "
        "every sample.",
    )
    sampling: Literal["first", "random"] = Field(
        "first",
        description="How num_samples picks: first (default) takes the first N kept rows; random a seeded uniform "
        "sample of N, "
        "the same for every engine of a dataset.",
    )
    seed: int = Field(
        0,
        ge=0,
        le=SEED_MAX,
        description="Seed of the run's random choices: random sampling, random prompt templates, in-context "
        "examples and the bootstrap CIs "
        "(default 0; 0 to 9223372036854775807); the same seed asks the same questions again.",
    )
    length_filter: tuple[float, float] | None = Field(
        None,
        description="[min, max] seconds of audio a sample must have to be kept (0 <= min <= max <= 86400: a day); "
        "samples without audio or a known length are "
        "kept. Absent: no length filter.",
    )
    accented: bool | None = Field(
        None,
        description="true keeps only accented speech, false only non-accented (standard US/UK), judged from the "
        "dataset's "
        "accented or accent column; samples without either are kept. Absent: no accent filter.",
    )
    language: str | None = Field(
        None,
        description="Keep only datasets and samples in this language, a code or a name (en == english); a "
        "translation pair "
        "matches on its source or target. Absent: every language.",
    )
    user_prompt_add_ons: list[str] = Field(
        default_factory=list,
        description="Names of prompt add-ons (evalkit/prompts/add_ons.yaml) whose texts are appended to every "
        "instruction "
        "(default none).",
    )

    @field_validator("length_filter")
    @classmethod
    def _ordered_lengths(cls, value: tuple[float, float] | None) -> tuple[float, float] | None:
        if value is not None and not (0 <= value[0] <= value[1] <= DAY_S):
            raise ValueError(f"expects [min, max] seconds with 0 <= min <= max <= {DAY_S}")
        return value

    system_prompts: list[str] = Field(
        default_factory=list,
        description="Names of system prompts (evalkit/prompts/system_prompts.yaml) joined into the system message of "
        "every "
        "request (default none: no system message).",
    )


class _RuleTarget(_Strict):
    """What an override rule applies to: a model, a task, or a model on a task."""

    model: str | None = Field(
        None,
        description="The model this rule applies to, by its name or its `model` id; absent: every model (needs "
        "`task`).",
    )
    task: str | None = Field(
        None,
        description="The task, dataset or category this rule applies to; absent: every dataset (needs `model`).",
    )

    @model_validator(mode="after")
    def _has_target(self) -> _RuleTarget:
        if self.model is None and self.task is None:
            raise ValueError("needs `model`, `task` or both")
        return self


class TemperatureOverride(_RuleTarget):
    """A temperature for a model, a task, or a model on a task (LALMEval's key; generation_overrides covers more)."""

    temperature: float = Field(
        ge=0,
        le=MAX_TEMPERATURE,
        description="Mandatory: the temperature sent when this rule is the most specific that matches (0 to 100).",
    )


class GenerationOverride(_RuleTarget):
    """max_tokens / top_p / seed / temperature for a model, a task, or a model on a task."""

    temperature: float | None = Field(
        None,
        ge=0,
        le=MAX_TEMPERATURE,
        description="Sampling temperature set by this rule (0 to 100); absent: this rule leaves temperature to the "
        "next one.",
    )
    max_tokens: int | None = Field(
        None,
        ge=1,
        le=MAX_TOKENS,
        description="Most tokens generated per answer set by this rule (1 to 10000000); absent: left to the next rule.",
    )
    top_p: float | None = Field(
        None,
        gt=0,
        le=1,
        description="Nucleus-sampling probability mass set by this rule (0 < top_p <= 1); absent: left to the next "
        "rule.",
    )
    seed: int | None = Field(
        None,
        ge=SEED_MIN,
        le=SEED_MAX,
        description="Sampling seed set by this rule (a 64-bit integer); absent: left to the next rule.",
    )


class JudgeProperties(_Strict):
    """The LLM judge of llm_judge_* and rubric metrics.

    An endpoint asked like any model: retries, circuit breaker, response store.
    """

    judge_concurrency: int = Field(
        1, ge=1, le=MAX_IN_FLIGHT, description="Judge requests in flight at once (default 1; 1 to 65536)."
    )
    judge_model: str = Field(
        description="Mandatory: the judge's model id sent in requests (for Azure, the deployment name)."
    )
    judge_type: Literal["openai", "vllm"] = Field(
        "openai",
        description="openai (default: OpenAI, or Azure when judge_api_version is set) or vllm (any OpenAI-compatible "
        "server; "
        "judge_api_version is then ignored).",
    )
    judge_api_version: str | None = Field(
        None, description="Azure OpenAI api-version for an openai judge; absent: plain OpenAI-style URLs."
    )
    judge_api_endpoint: str = Field(description="Mandatory: base URL of the judge's endpoint, e.g. https://host/v1.")
    judge_api_key: str | None = Field(
        None,
        description="The judge's API key (Bearer token, api-key header for Azure); absent: none sent. Never logged "
        "or stored.",
    )
    judge_temperature: float = Field(
        0.0,
        ge=0,
        le=MAX_TEMPERATURE,
        description="Temperature of every judge request (default 0: repeatable verdicts; 0 to 100).",
    )
    judge_prompt_model_override: str | None = Field(
        None,
        description="Use the judge-prompt variant written for this model name instead of judge_model's (prompts may "
        "be tuned "
        "per judge model); absent: judge_model picks it.",
    )
    judge_timeout: float = Field(
        120.0,
        gt=0,
        le=WEEK_S,
        description="Seconds one judge attempt may take before it is retried (default 120; more than 0, at most "
        "604800: a week).",
    )
    judge_retry_attempts: int = Field(
        3,
        ge=0,
        le=MAX_RETRIES,
        description="Retries of a judge request after its first attempt (default 3; 0 to 100); a judge that still "
        "fails fails the sample.",
    )


class CacheSettings(_Strict):
    """The response store: successful answers kept in SQLite so repeats and resumed runs cost no request."""

    enabled: bool = Field(
        True,
        description="Answer repeated requests from the response store and keep new answers in it (default true); "
        "--no-cache turns it off for one run.",
    )
    path: str | None = Field(
        None,
        description="The SQLite file of the store, relative to the config file's folder; absent: "
        "<output_dir>/responses.sqlite.",
    )


class PromptOverrides(_Strict):
    """Prompts written in the config, above prompts_dir and the package's; each entry replaces or adds one name."""

    add_ons: dict[str, Any] | None = Field(
        None,
        description="Add-ons by name, each {text, by_dataset, by_task, by_category} as in "
        "evalkit/prompts/add_ons.yaml; absent: none added.",
    )
    system_prompts: dict[str, Any] | None = Field(
        None,
        description="System prompts by name, each {text, by_model, by_dataset, by_task, by_category} as in "
        "evalkit/prompts/system_prompts.yaml; absent: none added.",
    )
    pools: dict[str, list[str]] | None = Field(
        None, description="Instruction pools by name, each a list of templates (as pools.yaml); absent: none added."
    )
    instructions: dict[str, str] | None = Field(
        None,
        description="An instruction per dataset name, replacing its runspec's `instruction` for every model (what "
        "AU-Harness's prompt_overrides.user_prompt does); a per-sample instruction column still comes first; absent: "
        "the runspecs' own.",
    )
    judges: dict[str, dict[str, Any]] | None = Field(
        None,
        description="Judge prompts by metric name (llm_judge_binary, ...), each {system, user, user_no_reference, "
        "models} as in evalkit/prompts/judges/*.yaml; absent: the package's.",
    )


class Config(_Strict):
    """The whole of config.yaml."""

    dataset_metric: list[tuple[str, str] | tuple[str, str, dict[str, Any]]] = Field(
        min_length=1,
        description="Mandatory: [name, metric] pairs, or [name, metric, {option: value}] with the metric's options "
        '(e.g. {"normalizer": "basic"} for word_error_rate); the name is a dataset, a task (runspec file stem) or a '
        "category (runspecs folder). One engine runs per (dataset, metric) pair. LALMEval's quoted form "
        '"[name, metric]" is accepted too.',
    )

    models: list[ModelEntry] = Field(
        min_length=1,
        description="Mandatory: the models evaluated, each an `info:` block; entries sharing a name are replicas.",
    )
    filters: Filters = Field(
        default_factory=Filters,
        description="Which samples run and how they are prompted; absent: every sample, no add-ons.",
    )
    dataset_paths: dict[str, str] = Field(
        default_factory=dict,
        description="Where catalogue datasets lie on this disk: {dataset name: a file or folder}, relative to the "
        "config file's folder. Private datasets (licensed corpora such as CallHome) need it; a hub dataset given a "
        "local copy (a save_to_disk folder, parquet or arrow files, a snapshot of the hub repo) is read from it "
        "instead of the hub, with its subset, split and columns. Default none.",
    )
    report_as: Literal["evalkit", "auharness"] = Field(
        "evalkit",
        description="Whose names and scale the results tables use: evalkit (its entries, its scale) or auharness: "
        "a pair named in AU-Harness's terms shows AU-Harness's dataset and metric names and its scale (x100 where "
        "AU-Harness prints x100) beside evalkit's n and 95% CI on the same scale; results.json keeps evalkit's "
        "score too. An AU-Harness config, and `evalkit convert`'s output of one, sets auharness. Default evalkit.",
    )
    aggregate: list[tuple[str, list[str]] | tuple[str, list[str], AggregateMethod]] = Field(
        default_factory=list,
        description="[metric, [datasets, tasks or categories]] entries, each adding one row per model with the "
        "average of those datasets' scores and its CI: macro (each dataset counts once, the default) or, with a "
        "third element `micro`, weighted by dataset size (samples; reference length for WER/CER/TER). Default none.",
    )
    temperature_overrides: list[TemperatureOverride] = Field(
        default_factory=list,
        description="Temperature rules by model, task or both; the most specific match wins (model+task, model, "
        "task), above "
        "the model's own temperature (default none).",
    )
    generation_overrides: list[GenerationOverride] = Field(
        default_factory=list,
        description="max_tokens/top_p/seed/temperature rules by model, task or both; the most specific match wins, "
        "above the "
        "model's own values and the runspec's defaults (default none).",
    )
    judge_properties: JudgeProperties | None = Field(
        None,
        description="The LLM judge; needed by judge and rubric metrics, which are refused without it. Absent: no "
        "judge.",
    )
    runspecs_dir: str | list[str] | None = Field(
        None,
        description="Folders of your own runspecs (<folder>/<category>/<task>.json), one or a list, relative to the "
        "config file's folder; evalkit's runspecs and the runspecs/ folder beside the config file are always read. "
        "Absent: no extra folders.",
    )
    prompts_dir: str | None = Field(
        None,
        description="A folder of your own prompts, relative to the config file's folder: any of add_ons.yaml, "
        "system_prompts.yaml, pools.yaml and judges/<metric>.yaml, in the package's formats; an entry replaces "
        "the package's entry of the same name or adds one. Absent: the package's prompts.",
    )
    prompts: PromptOverrides | None = Field(
        None,
        description="Prompts written inline (add_ons, system_prompts, pools, judges), above prompts_dir and the "
        "package's; absent: none.",
    )
    plugins: list[str] = Field(
        default_factory=list,
        description="Python modules imported before planning (looked for beside the config file first, then "
        "installed or on PYTHONPATH), so their "
        "@METRICS/@PREPROCESSORS/@POSTPROCESSORS registrations count, alongside the evalkit.plugins entry points "
        "(default none).",
    )
    output_dir: str = Field(
        "runs",
        description="Folder of the run folders (<timestamp>_<id>/) and the response store, relative to the config "
        "file's folder (default runs beside the config file); --output-dir overrides it (relative to the working "
        "directory).",
    )
    cache: CacheSettings = Field(
        default_factory=CacheSettings, description="The response store; absent: on, at <output_dir>/responses.sqlite."
    )
    max_failure_rate: float = Field(
        0.2,
        ge=0,
        le=1,
        description="Fraction (0-1) of failed samples above which a model's result on a dataset-metric pair is "
        "marked unreliable (!) and `evalkit run` exits with code 3 after writing everything (--allow-failures "
        "keeps exit 0; --max-failure-rate overrides it) (default 0.2: 20%).",
    )
    log_file: str | None = Field(
        None,
        description="A file, relative to the config file's folder, that `evalkit run` appends its log to (what the "
        "console shows: warnings and errors, debug too with --verbose), beside the console; AU-Harness's "
        "logging.log_file. Absent: the console only.",
    )

    @field_validator("dataset_metric", mode="before")
    @classmethod
    def _pair_shape(cls, value: Any) -> Any:
        """One clear message per malformed entry instead of one per shape of the union.

        LALMEval's README writes pairs as one string, ``"[your_dataset_name, metric_name]"``: read as a pair.
        """
        if not isinstance(value, list):
            return value
        value = [_quoted_pair(item, i) if isinstance(item, str) else item for i, item in enumerate(value)]
        for i, entry in enumerate(value):
            ok = isinstance(entry, (list, tuple)) and len(entry) in (2, 3)
            ok = ok and all(isinstance(part, str) for part in entry[:2])
            if not ok or (len(entry) == 3 and not isinstance(entry[2], dict)):
                raise ValueError(
                    f"entry {i}: expected [name, metric] or [name, metric, {{option: value}}], got {entry!r}"
                )
        return value

    @property
    def pairs(self) -> list[tuple[str, str, dict[str, Any]]]:
        """``dataset_metric`` as (name, metric, options) triples; options are {} when an entry gives none."""
        return [(entry[0], entry[1], dict(entry[2]) if len(entry) > 2 else {}) for entry in self.dataset_metric]

    @model_validator(mode="after")
    def _unique_names(self) -> Config:
        seen: dict[str, str] = {}
        for entry in self.models:
            info = entry.info
            if info.name in seen and seen[info.name] != info.model:
                raise ValueError(f"two models are named {info.name!r} with different `model` ids")
            seen[info.name] = info.model
        return self

    _base_dir: Path | None = PrivateAttr(None)
    #: per dataset_metric pair, what made it when a command-line flag did ("--dataset X --metric Y"), else None
    _pair_labels: list[str | None] | None = PrivateAttr(None)

    @property
    def pair_labels(self) -> list[str | None] | None:
        """Where each dataset_metric pair came from, for error messages (None: the config file)."""
        return self._pair_labels

    @property
    def base_dir(self) -> Path:
        """The folder relative paths of this config mean: the config file's, else the working directory."""
        return self._base_dir if self._base_dir is not None else Path.cwd()

    def anchor(self, folder: str | Path) -> Config:
        """Make the config's relative paths relative to ``folder`` (the config file's), as absolute paths.

        ``runspecs_dir``, ``output_dir``, ``prompts_dir``, ``cache.path`` and a ``launch.model_path`` that names
        a local folder there; ``./runspecs`` is then looked for in ``folder`` too. So
        ``evalkit run -c sub/config.yaml`` does from anywhere what ``cd sub && evalkit run`` does.
        """
        base = Path(folder).resolve()
        self._base_dir = base

        def absolute(value: str) -> str:
            path = Path(value).expanduser()
            return str(path if path.is_absolute() else base / path)

        if isinstance(self.runspecs_dir, str):
            self.runspecs_dir = absolute(self.runspecs_dir)
        elif self.runspecs_dir is not None:
            self.runspecs_dir = [absolute(d) for d in self.runspecs_dir]
        self.output_dir = absolute(self.output_dir)
        if self.prompts_dir:
            self.prompts_dir = absolute(self.prompts_dir)
        if self.cache.path:
            self.cache.path = absolute(self.cache.path)
        if self.log_file:
            self.log_file = absolute(self.log_file)
        for entry in self.models:
            launch = entry.info.launch
            if launch is not None and launch.model_path and (base / launch.model_path).exists():
                launch.model_path = absolute(launch.model_path)
        return self

    @property
    def runspec_dirs(self) -> list[str]:
        if self.runspecs_dir is None:
            return []
        return [self.runspecs_dir] if isinstance(self.runspecs_dir, str) else list(self.runspecs_dir)


def _known_fields(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The field names valid at ``loc`` (for "did you mean"), walking nested models."""
    current: Any = model
    for part in loc[:-1]:
        if isinstance(part, int) or current is None:
            continue
        field = getattr(current, "model_fields", {}).get(part)
        if field is None:
            return []
        annotation = field.annotation
        current = _first_model(annotation)
    return list(getattr(current, "model_fields", {}) or [])


def _first_model(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _first_model(arg)
        if found is not None:
            return found
    return None


def _format_loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return shorten(out) or "(top level)"


def _field_at(loc: tuple[Any, ...]) -> Any:
    """The pydantic FieldInfo a ``loc`` ends at (None when it ends inside a list, a tuple or an unknown key)."""
    if not loc or not isinstance(loc[-1], str):
        return None
    current: Any = Config
    field = None
    for part in loc:
        if isinstance(part, int):
            continue
        field = (getattr(current, "model_fields", None) or {}).get(part)
        if field is None:
            return None
        current = _first_model(field.annotation)
    return field


def _number(value: Any) -> str:
    return str(value) if isinstance(value, int) else repr(value)


def documented_range(field: Any, name: str) -> str | None:
    """``"1 <= batch_size <= 65536"`` from a field's ge/gt/le/lt bounds; None when it has none."""
    low = high = ""
    for bound in getattr(field, "metadata", ()):
        for attr, side, sign in (("ge", "low", "<="), ("gt", "low", "<"), ("le", "high", "<="), ("lt", "high", "<")):
            value = getattr(bound, attr, None)
            if value is None:
                continue
            if side == "low":
                low = f"{_number(value)} {sign} "
            else:
                high = f" {sign} {_number(value)}"
    return f"{low}{name}{high}" if low or high else None


#: pydantic's error types for a number outside a field's bounds, and for inf/nan
_RANGE_ERRORS = frozenset({"greater_than", "greater_than_equal", "less_than", "less_than_equal", "finite_number"})
#: most problems listed in one message: a generated config wrong in 10,000 places is not printed 10,000 times
_MAX_PROBLEMS = 50


def format_validation_error(error: ValidationError, source: str) -> str:
    """One line per problem: the file, the key path, the value (at most 200 characters) and what was expected."""
    lines = []
    for item in error.errors():
        loc = tuple(p for p in item["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        where = _format_loc(loc)
        secret = any(isinstance(p, str) and is_secret_key(p) for p in loc)
        got = item.get("input")
        if item["type"] == "extra_forbidden":
            key = loc[-1]
            hint = did_you_mean(str(key), _known_fields(Config, loc))
            lines.append(f"{source}: {where}: unknown key{hint}")
        elif item["type"] == "missing":
            lines.append(f"{source}: {where}: missing mandatory key")
        elif item["type"] == "literal_error":
            expected = item.get("ctx", {}).get("expected", "")
            hint = did_you_mean(
                str(item.get("input")), [s.strip("'") for s in str(expected).replace(" or ", ", ").split(", ")]
            )
            lines.append(f"{source}: {where}: {shorten(repr(item['input']))} is not one of {expected}{hint}")
        elif item["type"] in _RANGE_ERRORS and (allowed := documented_range(_field_at(loc), str(loc[-1]))):
            shown = "" if secret else f" (got {shorten(repr(got))})"
            lines.append(f"{source}: {where}: {item['msg']}{shown}; allowed: {allowed}")
        else:
            msg = item["msg"].removeprefix("Value error, ")
            shown = "" if isinstance(got, (dict, list)) or secret else f" (got {shorten(repr(got))})"
            lines.append(f"{source}: {where}: {shorten(msg)}{shown}")
    if len(lines) > _MAX_PROBLEMS:
        lines[_MAX_PROBLEMS:] = [f"{source}: ... and {len(lines) - _MAX_PROBLEMS} more problems"]
    return "\n".join(lines)


def parse_config(
    data: Any, source: str = "config", env: Mapping[str, str] | None = None, base_dir: Path | None = None
) -> Config:
    """Validate a parsed YAML tree; raises ConfigError listing every problem.

    An AU-Harness config is translated first (evalkit.compat.auharness); ``base_dir``, the config file's folder,
    is where its names are looked up (its runspecs_dir).
    """
    if not isinstance(data, dict):
        raise ConfigError(
            f"{source}: expected a mapping of keys (dataset_metric, models, ...), got {type(data).__name__}"
        )
    foreign = is_auharness(data)
    data = expand_tree(data, os.environ if env is None else env, source)
    translation = translate(data, source, Config.model_fields, base_dir=base_dir) if foreign else None
    try:
        config = Config.model_validate(translation.data if translation is not None else data)
    except ValidationError as error:
        message = format_validation_error(error, source)
        raise ConfigError(translation.rename(message, source) if translation else message) from None
    if translation is not None:
        config._pair_labels = list(translation.pair_labels)
    return config


def load_config(path: str | Path, env: Mapping[str, str] | None = None) -> Config:
    """Read and validate a config file."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: config file not found")
    data = load_yaml_file(path)
    config = parse_config(data, str(path), env, base_dir=path.parent)
    config.anchor(path.parent)
    return config

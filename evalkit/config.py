"""The schema of config.yaml, validated with pydantic.

Every field carries its documentation (``description``) so ``sample_config.yaml``
and error messages speak the same language. Validation collects *all*
problems and reports them at once, each with the file, the key path and a
"did you mean" suggestion, as a ConfigError (exit code 2, no traceback).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from enum import Enum
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from evalkit.envvars import expand_tree
from evalkit.errors import ConfigError, did_you_mean
from evalkit.util.redact import is_secret_key

InferenceType = Literal["openai", "vllm", "transcription", "local"]


class RequestKind(str, Enum):
    """The wire format a model is asked in; every inference type but ``transcription`` speaks chat."""

    __str__ = str.__str__
    __format__ = str.__format__

    CHAT = "chat"
    TRANSCRIPTION = "transcription"

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


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class LaunchSpec(_Strict):
    """How evalkit starts a model server itself (local models, vLLM)."""

    model_path: str | None = Field(None, description="Local model folder (not needed by pocketsphinx).")
    backend: Literal["transformers", "pocketsphinx", "vllm"] | None = Field(
        None, description="Server to start: vllm, or an `evalkit serve` backend; default vllm for inference_type vllm, else transformers."
    )
    args: list[str] = Field(default_factory=list, description="Extra server command-line arguments.")
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment for the server process.")
    startup_timeout: float = Field(600.0, gt=0, description="Seconds to wait for /health.")


class ModelInfo(_Strict):
    """One model endpoint (a replica when several entries share ``model``)."""

    name: str = Field(description="Display name used in results; unique per model.")
    inference_type: InferenceType = Field(description="openai | vllm | transcription | local.")
    url: str | list[str] | None = Field(None, description="Base URL of the endpoint, e.g. http://host:8000/v1; a list means replicas.")
    model: str = Field(description="Model id sent in requests (deployment name for Azure).")
    auth_token: str | None = Field(None, description="Bearer token / API key. Never logged or stored.")
    api_version: str | None = Field(None, description="Azure OpenAI api-version; setting it selects Azure routing.")
    batch_size: int = Field(8, ge=1, description="Requests in flight at once against this endpoint.")
    timeout: float = Field(60.0, gt=0, description="Seconds per attempt.")
    retry_attempts: int = Field(3, ge=0, description="Retries after the first attempt.")
    deadline: float | None = Field(None, gt=0, description="Seconds a request may take over all its attempts (default: derived from timeout and retries).")
    delay: float = Field(0.0, ge=0, description="Milliseconds to wait before each request to this endpoint (politeness).")
    chunk_size: float | None = Field(None, gt=0, description="Max audio seconds per request; longer audio is chunked or truncated.")
    temperature: float | None = Field(None, ge=0, description="Default temperature for this model.")
    max_tokens: int | None = Field(None, ge=1, description="Max tokens to generate.")
    top_p: float | None = Field(None, gt=0, le=1, description="Nucleus sampling.")
    seed: int | None = Field(None, description="Sampling seed sent to the endpoint.")
    extra_body: dict[str, Any] = Field(default_factory=dict, description="Extra JSON fields merged into every request body.")
    requests_per_minute: float | None = Field(None, gt=0, description="Optional request-rate limit.")
    tokens_per_minute: float | None = Field(None, gt=0, description="Optional token-rate limit.")
    launch: LaunchSpec | None = Field(None, description="Start the server yourself (inference_type local or vllm).")

    @field_validator("inference_type", mode="before")
    @classmethod
    def _alias_inference_type(cls, value: Any) -> Any:
        if isinstance(value, str):
            return _INFERENCE_ALIASES.get(value.strip().lower(), value.strip().lower())
        return value

    @model_validator(mode="after")
    def _needs_url_or_launch(self) -> ModelInfo:
        if self.url is None and self.launch is None:
            raise ValueError("needs `url` (an endpoint) or `launch` (a server evalkit starts)")
        if self.url is not None and self.launch is not None:
            raise ValueError("give `url` (an endpoint you run) or `launch` (a server evalkit starts and addresses itself), not both")
        if self.inference_type == "local" and self.launch is None:
            raise ValueError("inference_type `local` needs a `launch:` block with model_path and backend")
        if self.launch is not None:
            if self.launch.backend is None:
                self.launch.backend = "vllm" if self.inference_type == "vllm" else "transformers"
            if self.launch.backend != "pocketsphinx" and not self.launch.model_path:
                raise ValueError(f"launch: backend {self.launch.backend!r} needs `model_path`")
            if self.launch.backend == "vllm" and self.inference_type != "vllm":
                raise ValueError("launch: backend `vllm` needs inference_type `vllm`")
        return self

    @property
    def urls(self) -> list[str]:
        if self.url is None:
            return []
        return [self.url] if isinstance(self.url, str) else list(self.url)

    @property
    def request_kind(self) -> RequestKind:
        return RequestKind.TRANSCRIPTION if self.inference_type == "transcription" else RequestKind.CHAT


class ModelEntry(_Strict):
    info: ModelInfo


class Filters(_Strict):
    """Which samples run and how they are prompted."""

    num_samples: int | None = Field(None, ge=0, description="Samples per dataset (all when absent).")
    sampling: Literal["first", "random"] = Field("first", description="first: the first N rows; random: a seeded random sample of N.")
    seed: int = Field(0, description="Seed for random sampling and prompt choices.")
    length_filter: tuple[float, float] | None = Field(None, description="[min, max] audio seconds kept.")
    accented: bool | None = Field(None, description="true: only accented speech; false: only non-accented.")
    language: str | None = Field(None, description="Only datasets/samples in this language (code or name).")
    user_prompt_add_ons: list[str] = Field(default_factory=list, description="Named prompt add-ons appended to instructions.")

    @field_validator("length_filter")
    @classmethod
    def _ordered_lengths(cls, value: tuple[float, float] | None) -> tuple[float, float] | None:
        if value is not None and not (0 <= value[0] <= value[1]):
            raise ValueError("expects [min, max] seconds with 0 <= min <= max")
        return value
    system_prompts: list[str] = Field(default_factory=list, description="Named system prompts.")


class TemperatureOverride(_Strict):
    model: str | None = None
    task: str | None = None
    temperature: float = Field(ge=0)

    @model_validator(mode="after")
    def _has_target(self) -> TemperatureOverride:
        if self.model is None and self.task is None:
            raise ValueError("needs `model`, `task` or both")
        return self


class GenerationOverride(_Strict):
    """max_tokens / top_p / seed / temperature for a model, a task, or a model on a task."""

    model: str | None = None
    task: str | None = None
    temperature: float | None = Field(None, ge=0)
    max_tokens: int | None = Field(None, ge=1)
    top_p: float | None = Field(None, gt=0, le=1)
    seed: int | None = None

    @model_validator(mode="after")
    def _has_target(self) -> GenerationOverride:
        if self.model is None and self.task is None:
            raise ValueError("needs `model`, `task` or both")
        return self


class JudgeProperties(_Strict):
    judge_concurrency: int = Field(1, ge=1)
    judge_model: str
    judge_type: Literal["openai", "vllm"] = "openai"
    judge_api_version: str | None = None
    judge_api_endpoint: str
    judge_api_key: str | None = None
    judge_temperature: float = Field(0.0, ge=0)
    judge_prompt_model_override: str | None = None
    judge_timeout: float = Field(120.0, gt=0)
    judge_retry_attempts: int = Field(3, ge=0)


class CacheSettings(_Strict):
    enabled: bool = Field(True, description="Answer repeated requests from the response store.")
    path: str | None = Field(None, description="SQLite file; default <output_dir>/responses.sqlite.")


class Config(_Strict):
    """The whole of config.yaml."""

    dataset_metric: list[tuple[str, str]] = Field(min_length=1)
    models: list[ModelEntry] = Field(min_length=1)
    filters: Filters = Field(default_factory=Filters)
    aggregate: list[tuple[str, list[str]]] = Field(default_factory=list)
    temperature_overrides: list[TemperatureOverride] = Field(default_factory=list)
    generation_overrides: list[GenerationOverride] = Field(default_factory=list)
    judge_properties: JudgeProperties | None = None
    runspecs_dir: str | list[str] | None = None
    output_dir: str = "runs"
    cache: CacheSettings = Field(default_factory=CacheSettings)
    max_failure_rate: float = Field(0.05, ge=0, le=1)

    @model_validator(mode="after")
    def _unique_names(self) -> Config:
        seen: dict[str, str] = {}
        for entry in self.models:
            info = entry.info
            if info.name in seen and seen[info.name] != info.model:
                raise ValueError(f"two models are named {info.name!r} with different `model` ids")
            seen[info.name] = info.model
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
    return out or "(top level)"


def format_validation_error(error: ValidationError, source: str) -> str:
    lines = []
    for item in error.errors():
        loc = tuple(p for p in item["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        where = _format_loc(loc)
        if item["type"] == "extra_forbidden":
            key = loc[-1]
            hint = did_you_mean(str(key), _known_fields(Config, loc))
            lines.append(f"{source}: {where}: unknown key{hint}")
        elif item["type"] == "missing":
            lines.append(f"{source}: {where}: missing mandatory key")
        elif item["type"] == "literal_error":
            expected = item.get("ctx", {}).get("expected", "")
            hint = did_you_mean(str(item.get("input")), [s.strip("'") for s in str(expected).replace(" or ", ", ").split(", ")])
            lines.append(f"{source}: {where}: {item['input']!r} is not one of {expected}{hint}")
        else:
            msg = item["msg"].removeprefix("Value error, ")
            got = item.get("input")
            secret = any(isinstance(p, str) and is_secret_key(p) for p in loc)
            shown = "" if isinstance(got, (dict, list)) or secret else f" (got {got!r})"
            lines.append(f"{source}: {where}: {msg}{shown}")
    return "\n".join(lines)


def parse_config(data: Any, source: str = "config", env: Mapping[str, str] | None = None) -> Config:
    """Validate a parsed YAML tree; raises ConfigError listing every problem."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping of keys (dataset_metric, models, ...), got {type(data).__name__}")
    data = expand_tree(data, os.environ if env is None else env, source)
    try:
        return Config.model_validate(data)
    except ValidationError as error:
        raise ConfigError(format_validation_error(error, source)) from None


def load_config(path: str | Path, env: Mapping[str, str] | None = None) -> Config:
    """Read and validate a config file."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: config file not found")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise ConfigError(f"{path}:{where}: not valid YAML: {problem}") from None
    return parse_config(data, str(path), env)

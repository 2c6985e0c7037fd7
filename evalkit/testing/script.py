"""The test server's script: what it answers, how slowly, and how it fails.

The script is validated once at start-up (pydantic, unknown keys rejected with a
"did you mean"), then compiled into plain objects the request path reads without
allocating: rules with pre-compiled regexes, an audio-fingerprint index, a fault
table. A bad script stops the server before it listens, naming the key.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from evalkit.errors import ConfigError, did_you_mean

ECHO = "echo"
FAULT_KINDS = ("hang", "malformed", "drop")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


class AnswerRuleSpec(BaseModel):
    """One answer rule; every condition given must hold, the first matching rule wins."""

    model_config = ConfigDict(extra="forbid")

    match: str | None = None
    """Substring of the last user message's text; prefix ``re:`` for a regex (re.search)."""
    system_match: str | None = None
    """Substring of the system message(s) text; ``re:`` prefix allowed too."""
    audio_fingerprint: str | None = None
    """:func:`evalkit.testing.audio.audio_fingerprint` of the request's audio."""
    model: str | None = None
    """The requested model name (or Azure deployment) must equal this."""
    answer: str

    @field_validator("audio_fingerprint")
    @classmethod
    def _hex(cls, value: str | None) -> str | None:
        if value is not None:
            value = value.strip().lower()
            if not _HEX64.match(value):
                raise ValueError("must be 64 hex characters (a sha256 from audio_fingerprint())")
        return value

    @field_validator("match", "system_match")
    @classmethod
    def _regex_compiles(cls, value: str | None) -> str | None:
        if value is not None and value.startswith("re:"):
            try:
                re.compile(value[3:])
            except re.error as exc:
                raise ValueError(f"bad regex {value[3:]!r}: {exc}") from exc
        return value


class FaultSpec(BaseModel):
    """Injected failures, drawn per request from (seed, body hash, repeat count)."""

    model_config = ConfigDict(extra="forbid")

    seed: int = 0
    rates: dict[str, float] = Field(default_factory=dict)
    """Kind -> probability. Kinds: an HTTP status ("500", "429", "503", ...), "hang",
    "malformed", "drop". Drawn in the order written; the rates must sum to <= 1."""
    retry_after: float = 1
    """Seconds sent in the Retry-After header of a 429."""
    hang_seconds: float = 30

    @field_validator("rates", mode="before")
    @classmethod
    def _keys_as_strings(cls, value: Any) -> Any:
        if isinstance(value, Mapping):
            return {str(k): v for k, v in value.items()}
        return value

    @field_validator("rates")
    @classmethod
    def _known_kinds(cls, value: dict[str, float]) -> dict[str, float]:
        for kind, rate in value.items():
            if kind not in FAULT_KINDS and not (kind.isdigit() and 400 <= int(kind) <= 599):
                raise ValueError(
                    f"unknown fault kind {kind!r}{did_you_mean(kind, FAULT_KINDS)}; "
                    'expected an HTTP status 400-599 (e.g. "500") or one of ' + ", ".join(FAULT_KINDS)
                )
            if not 0 <= rate <= 1:
                raise ValueError(f"rate of {kind!r} must be within [0, 1], got {rate}")
        if sum(value.values()) > 1 + 1e-9:
            raise ValueError(f"fault rates sum to {sum(value.values()):.4f} > 1")
        return value

    @field_validator("retry_after", "hang_seconds")
    @classmethod
    def _non_negative(cls, value: float) -> float:
        if value < 0:
            raise ValueError("must be >= 0")
        return value


class ScriptSpec(BaseModel):
    """The whole script as a user writes it (YAML/JSON file or dict)."""

    model_config = ConfigDict(extra="forbid")

    model: str = "test-model"
    strict_model: bool = False
    seed: int = 0
    """Seeds the latency draws when latency_ms is a [min, max] range."""
    latency_ms: float | tuple[float, float] = 0
    max_concurrency: int | None = None
    require_auth: str | None = None
    default_answer: str = ECHO
    answers: list[AnswerRuleSpec] = Field(default_factory=list)
    answer_file: Path | None = None
    faults: FaultSpec | None = None
    request_log: Path | None = None

    @field_validator("latency_ms", mode="before")
    @classmethod
    def _latency(cls, value: Any) -> Any:
        if isinstance(value, str):  # CLI form: "50" or "10,100"
            parts = [p for p in re.split(r"[,\s]+", value.strip("[] ")) if p]
            value = [float(p) for p in parts] if len(parts) > 1 else float(parts[0])
        if isinstance(value, (list, tuple)):
            if len(value) != 2:
                raise ValueError("a latency range is [min, max]")
            low, high = float(value[0]), float(value[1])
            if not 0 <= low <= high:
                raise ValueError(f"need 0 <= min <= max, got [{low}, {high}]")
            return (low, high)
        return value

    @field_validator("latency_ms")
    @classmethod
    def _latency_non_negative(cls, value: float | tuple[float, float]) -> float | tuple[float, float]:
        if isinstance(value, (int, float)) and value < 0:
            raise ValueError("must be >= 0")
        return value

    @field_validator("max_concurrency")
    @classmethod
    def _positive(cls, value: int | None) -> int | None:
        if value is not None and value < 1:
            raise ValueError("must be >= 1 (or null for unlimited)")
        return value

    @model_validator(mode="after")
    def _answer_file_exists(self) -> ScriptSpec:
        if self.answer_file is not None and not self.answer_file.is_file():
            raise ValueError(f"answer_file {str(self.answer_file)!r} does not exist")
        return self


SCRIPT_KEYS = tuple(ScriptSpec.model_fields)


@dataclass(slots=True)
class Rule:
    """A compiled answer rule (see :class:`AnswerRuleSpec`)."""

    index: int
    answer: str
    match: str | None = None
    match_re: re.Pattern[str] | None = None
    system_match: str | None = None
    system_re: re.Pattern[str] | None = None
    audio_fingerprint: str | None = None
    model: str | None = None

    def matches_text(self, model: str, user_text: str, system_text: str) -> bool:
        """Check the non-audio conditions."""
        if self.model is not None and self.model != model:
            return False
        if self.match_re is not None:
            if self.match_re.search(user_text) is None:
                return False
        elif self.match is not None and self.match not in user_text:
            return False
        if self.system_re is not None:
            if self.system_re.search(system_text) is None:
                return False
        elif self.system_match is not None and self.system_match not in system_text:
            return False
        return True


@dataclass(slots=True)
class Answers:
    """Rules in order, with audio-only rules indexed by fingerprint.

    Thousands of per-sample audio rules (an answer_file) cost one dict lookup per
    request instead of a scan; first-match-wins order is kept by comparing indexes.
    """

    default: str
    by_fingerprint: dict[str, int] = field(default_factory=dict)
    scanned: list[Rule] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)
    needs_audio: bool = False

    def resolve(self, model: str, user_text: str, system_text: str, fingerprints: list[str]) -> str:
        """The answer for a request: the first matching rule's, else the default."""
        best = len(self.rules)
        for fp in fingerprints:
            idx = self.by_fingerprint.get(fp)
            if idx is not None and idx < best:
                best = idx
        for rule in self.scanned:
            if rule.index >= best:
                break
            if rule.audio_fingerprint is not None and rule.audio_fingerprint not in fingerprints:
                continue
            if rule.matches_text(model, user_text, system_text):
                best = rule.index
                break
        if best < len(self.rules):
            return self.rules[best].answer
        return user_text if self.default == ECHO else self.default


@dataclass(slots=True)
class Script:
    """A validated, compiled script; what the server reads per request."""

    spec: ScriptSpec
    answers: Answers
    source: str = "<dict>"

    @property
    def model(self) -> str:
        return self.spec.model


def _compile_rule(index: int, spec: AnswerRuleSpec) -> Rule:
    rule = Rule(index=index, answer=spec.answer, audio_fingerprint=spec.audio_fingerprint, model=spec.model)
    if spec.match is not None:
        if spec.match.startswith("re:"):
            rule.match_re = re.compile(spec.match[3:])
        else:
            rule.match = spec.match
    if spec.system_match is not None:
        if spec.system_match.startswith("re:"):
            rule.system_re = re.compile(spec.system_match[3:])
        else:
            rule.system_match = spec.system_match
    return rule


def _answer_file_rules(path: Path) -> list[AnswerRuleSpec]:
    """{fingerprint_or_text: answer}: 64-hex keys are audio rules, others substring rules."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"answer_file {path}: cannot read JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"answer_file {path}: expected a JSON object {{fingerprint_or_text: answer}}")
    rules: list[AnswerRuleSpec] = []
    for key, answer in data.items():
        if not isinstance(answer, str):
            raise ConfigError(f"answer_file {path}: answer for {key!r} must be a string, got {type(answer).__name__}")
        if _HEX64.match(key.lower()):
            rules.append(AnswerRuleSpec(audio_fingerprint=key.lower(), answer=answer))
        else:
            rules.append(AnswerRuleSpec(match=key, answer=answer))
    return rules


def compile_answers(spec: ScriptSpec) -> Answers:
    """Turn rule specs (plus the answer_file) into an :class:`Answers` table."""
    specs = list(spec.answers)
    if spec.answer_file is not None:
        specs.extend(_answer_file_rules(spec.answer_file))
    answers = Answers(default=spec.default_answer)
    for index, rule_spec in enumerate(specs):
        rule = _compile_rule(index, rule_spec)
        answers.rules.append(rule)
        audio_only = (
            rule.audio_fingerprint is not None
            and rule.match is None
            and rule.match_re is None
            and rule.system_match is None
            and rule.system_re is None
            and rule.model is None
        )
        if audio_only:
            answers.by_fingerprint.setdefault(rule.audio_fingerprint, index)  # type: ignore[arg-type]
        else:
            answers.scanned.append(rule)
        if rule.audio_fingerprint is not None:
            answers.needs_audio = True
    return answers


def _format_validation_error(exc: ValidationError, source: str) -> str:
    lines = [f"invalid test-server script {source}:"]
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "<root>"
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            key = str(err["loc"][-1])
            choices = SCRIPT_KEYS if len(err["loc"]) == 1 else ()
            if len(err["loc"]) >= 2 and err["loc"][0] == "faults":
                choices = tuple(FaultSpec.model_fields)
            elif len(err["loc"]) >= 3 and err["loc"][0] == "answers":
                choices = tuple(AnswerRuleSpec.model_fields)
            msg = f"unknown key{did_you_mean(key, choices)}"
        lines.append(f"  {loc}: {msg}")
    return "\n".join(lines)


def read_script_file(path: str | Path) -> dict[str, Any]:
    """Load a YAML/JSON script file; relative paths inside it resolve against its folder."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read test-server script {path}: {exc}") from exc
    try:
        data = json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise ConfigError(f"test-server script {path} is not valid {path.suffix.lstrip('.') or 'YAML'}: {exc}") from exc
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"test-server script {path}: expected a mapping at the top level")
    for key in ("answer_file", "request_log"):
        value = data.get(key)
        if isinstance(value, str) and value and not Path(value).is_absolute():
            data[key] = str((path.parent / value).resolve())
    return data


def script_dict(source: Mapping[str, Any] | str | Path | None, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The raw script mapping from a dict/path/None, with overrides (None values skipped) applied."""
    if source is None:
        data: dict[str, Any] = {}
    elif isinstance(source, Mapping):
        data = dict(source)
    else:
        data = read_script_file(source)
    for key, value in (overrides or {}).items():
        if value is not None:
            data[key] = value
    return data


def load_script(
    source: Mapping[str, Any] | str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Script:
    """Validate and compile a script; raises :class:`ConfigError` naming the bad key."""
    name = "<dict>" if source is None or isinstance(source, Mapping) else str(source)
    data = script_dict(source, overrides)
    try:
        spec = ScriptSpec.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_format_validation_error(exc, name)) from None
    return Script(spec=spec, answers=compile_answers(spec), source=name)

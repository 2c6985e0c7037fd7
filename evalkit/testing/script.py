"""The test server's script: what it answers, how slowly, and how it fails.

The script is validated once at start-up (unknown keys rejected with a "did
you mean", every problem listed with its key path), then compiled into plain
objects the request path reads without allocating: rules with pre-compiled
regexes, an audio-fingerprint index, a fault table. A bad script stops the
server before it listens.

A script, every key optional::

    model: test-model          # the id in /v1/models; other names are answered unless strict_model
    strict_model: false        # true: other model names get a 404 (OpenAI error body)
    seed: 0                    # seeds latency draws when latency_ms is a range
    latency_ms: 0              # per request; or [min, max] for a seeded uniform draw
    max_concurrency: null      # server slots; requests beyond wait in a queue
    require_auth: null         # "Authorization: Bearer <v>" or "api-key: <v>" must match, else 401
    echo_auth: false           # true: a 401 message repeats the Authorization (or api-key) header and the
                               # path with its query, as careless servers do (for tests of secret masking);
                               # raw: the header's bytes read as Latin-1 (as HTTP/1.1 servers often decode
                               # them: UTF-8 comes back as mojibake) and the path as sent (percent-encoded)
    default_answer: echo       # echo = the last user message's text parts joined by newlines
                               # (transcriptions echo the prompt field); anything else verbatim
    answers:                   # first matching rule wins; all conditions of a rule must hold
      - {match: "capital of France", answer: Paris}       # substring of the last user text
      - {match: 're:^count to \\d+$', answer: "1 2 3"}   # regex (re.search), single-quoted
      - {system_match: pirate, answer: Arr}               # substring of the system message(s)
      - {audio_fingerprint: "<64 hex>", answer: hello}    # see evalkit.testing.audio_fingerprint
      - {model: judge-model, match: Score, answer: "8"}   # only for this requested model
      - {match: "sample 7", answer: x, fault: huge}       # this request always meets the fault
    answer_file: null          # JSON {fingerprint_or_text: answer}, appended as rules
    image_answer: null         # colour | size | format: a chat request whose last user message has
                               # image_url parts, and that no rule matches, is answered from the
                               # decoded pixels, one word per image (see evalkit.testing.images)
    token_logprobs: {}         # /v1/completions with echo+logprobs: word -> log-probability of
                               # its token (tokens are whitespace-led words); others get -1.0
    faults: {seed: 0, rates: {"500": 0.1, "429": 0.05, hang: 0.02, malformed: 0.02, drop: 0.01},
             retry_after: 1, hang_seconds: 30}
                               # hostile kinds too (see evalkit.testing.hostile): empty_choices,
                               # null_content, wrong_content_type, huge, trickle, cut, sse, gzip_bomb,
                               # deflate_bomb, br_unasked, redirect_307, redirect_307_empty,
                               # redirect_away, switching_protocols
    request_log: null          # JSONL path; one line per received/fault/completed event
    received_audio: null       # a folder: every audio file received (chat part or upload) is written there
                               # as <sha256 of its bytes>.wav, so a test can measure what arrived
    log_bodies: false          # true: a completed chat event also keeps the request body as sent (media
                               # data written "<audio>"/"<image>"), for comparing a request's exact shape
    redirect_to: null          # the Location of the redirect_away fault (another origin); default
                               # http://127.0.0.1:9/... (nothing listens there)
    usage:                     # what answers report in `usage` (chat and completions): prompt tokens are the
                               # words of the messages, completion tokens the words answered (per choice)
      report: true             # false: no `usage` at all, as some servers answer
      reasoning_tokens: null   # N: completion_tokens_details.reasoning_tokens N, counted in completion_tokens
      cached_tokens: null      # N: prompt_tokens_details.cached_tokens (at most the prompt's tokens)
      raw: <absent>            # any JSON value sent as `usage` verbatim (for tests of hostile servers)

Relative ``answer_file``/``request_log``/``received_audio`` paths in a script file resolve
against the file's folder.

Validation is hand-written rather than pydantic: the schema is small, and
building pydantic models costs a quarter of a second on every server start,
which tests that start many servers pay again and again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.errors import ConfigError, did_you_mean
from evalkit.testing.hostile import HOSTILE_KINDS
from evalkit.testing.images import IMAGE_ANSWERS

ECHO = "echo"
FAULT_KINDS = ("hang", "malformed", "drop", *HOSTILE_KINDS)
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True, slots=True)
class AnswerRuleSpec:
    """One answer rule; every condition given must hold, the first matching rule wins.

    ``match``/``system_match``: substring of the last user message's text / of
    the system message(s), or a regex (re.search) after a ``re:`` prefix.
    ``audio_fingerprint``: :func:`evalkit.testing.audio.audio_fingerprint` of the
    request's audio. ``model``: the requested model (or Azure deployment) name.
    ``fault``: a fault kind (as in ``faults.rates``) every matching request meets.
    """

    answer: str
    match: str | None = None
    system_match: str | None = None
    audio_fingerprint: str | None = None
    model: str | None = None
    fault: str | None = None


@dataclass(frozen=True, slots=True)
class FaultSpec:
    """Injected failures, drawn per request from (seed, body hash, repeat count).

    ``rates``: kind -> probability; kinds are an HTTP status ("500", "429",
    "503", ...), "hang", "malformed", "drop"; drawn in the order written, the
    rates sum to <= 1. ``retry_after``: seconds in a 429's Retry-After header.
    """

    seed: int = 0
    rates: dict[str, float] = field(default_factory=dict)
    retry_after: float = 1
    hang_seconds: float = 30


@dataclass(frozen=True, slots=True)
class UsageSpec:
    """What answers report in ``usage``: whether any, reasoning and cached token details, or a raw value."""

    report: bool = True
    reasoning_tokens: int | None = None
    cached_tokens: int | None = None
    #: sent verbatim as ``usage`` when ``has_raw``
    raw: Any = None
    has_raw: bool = False


@dataclass(frozen=True, slots=True)
class ScriptSpec:
    """The whole script as a user writes it (YAML/JSON file or dict), validated.

    ``seed`` seeds the latency draws when ``latency_ms`` is a (min, max) range.
    """

    model: str = "test-model"
    strict_model: bool = False
    seed: int = 0
    latency_ms: float | tuple[float, float] = 0
    max_concurrency: int | None = None
    require_auth: str | None = None
    echo_auth: bool | str = False
    default_answer: str = ECHO
    answers: tuple[AnswerRuleSpec, ...] = ()
    answer_file: Path | None = None
    image_answer: str | None = None
    token_logprobs: dict[str, float] = field(default_factory=dict)
    faults: FaultSpec | None = None
    request_log: Path | None = None
    received_audio: Path | None = None
    log_bodies: bool = False
    redirect_to: str | None = None
    usage: UsageSpec = field(default_factory=UsageSpec)


SCRIPT_KEYS = tuple(ScriptSpec.__dataclass_fields__)
RULE_KEYS = tuple(AnswerRuleSpec.__dataclass_fields__)
FAULT_KEYS = tuple(FaultSpec.__dataclass_fields__)
USAGE_KEYS = ("report", "reasoning_tokens", "cached_tokens", "raw")


class _Checker:
    """Collects every problem in a script, each with its key path."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def fail(self, loc: str, message: str) -> None:
        self.problems.append(f"{loc}: {message}")

    def keys(self, data: Mapping[str, Any], allowed: tuple[str, ...], loc: str) -> None:
        for key in data:
            if key not in allowed:
                where = f"{loc}.{key}" if loc else str(key)
                self.fail(where, f"unknown key{did_you_mean(str(key), allowed)}; expected one of {', '.join(allowed)}")

    def text(self, value: Any, loc: str, optional: bool = True) -> str | None:
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            self.fail(loc, f"expected a string, got {type(value).__name__}")
            return None
        return str(value)

    def integer(self, value: Any, loc: str, minimum: int | None = None) -> int | None:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, str) and value.strip().lstrip("-").isdigit():
                value = int(value)
            else:
                self.fail(loc, f"expected an integer, got {value!r}")
                return None
        if minimum is not None and value < minimum:
            self.fail(loc, f"must be >= {minimum}, got {value}")
            return None
        return value

    def number(self, value: Any, loc: str) -> float | None:
        if isinstance(value, bool):
            self.fail(loc, f"expected a number, got {value!r}")
            return None
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(loc, f"expected a number, got {value!r}")
            return None
        if not number >= 0:  # also rejects NaN
            self.fail(loc, f"must be >= 0, got {value!r}")
            return None
        return number

    def echo_mode(self, value: Any, loc: str) -> bool | str:
        if value == "raw":
            return "raw"
        if not isinstance(value, bool):
            self.fail(loc, f"expected true, false or raw, got {value!r}")
            return False
        return value

    def boolean(self, value: Any, loc: str) -> bool:
        if not isinstance(value, bool):
            self.fail(loc, f"expected true or false, got {value!r}")
            return False
        return value

    def regex(self, value: str | None, loc: str) -> None:
        if value is not None and value.startswith("re:"):
            try:
                re.compile(value[3:])
            except re.error as exc:
                self.fail(loc, f"bad regex {value[3:]!r}: {exc}")

    def latency(self, value: Any, loc: str) -> float | tuple[float, float]:
        if isinstance(value, str):  # CLI form: "50" or "10,100"
            parts = [p for p in re.split(r"[,\s]+", value.strip("[] ")) if p]
            value = parts if len(parts) > 1 else (parts[0] if parts else value)
        if isinstance(value, (list, tuple)):
            if len(value) != 2:
                self.fail(loc, f"a latency range is [min, max], got {list(value)!r}")
                return 0.0
            low, high = self.number(value[0], f"{loc}[0]"), self.number(value[1], f"{loc}[1]")
            if low is None or high is None:
                return 0.0
            if low > high:
                self.fail(loc, f"need min <= max, got [{low:g}, {high:g}]")
            return (low, high)
        number = self.number(value, loc)
        return 0.0 if number is None else number

    def rule(self, value: Any, loc: str) -> AnswerRuleSpec | None:
        if not isinstance(value, Mapping):
            self.fail(loc, f"expected a mapping like {{match: ..., answer: ...}}, got {type(value).__name__}")
            return None
        self.keys(value, RULE_KEYS, loc)
        if "answer" not in value:
            self.fail(f"{loc}.answer", "missing (every rule needs an answer)")
        answer = self.text(value.get("answer"), f"{loc}.answer") or ""
        match = self.text(value.get("match"), f"{loc}.match")
        system_match = self.text(value.get("system_match"), f"{loc}.system_match")
        self.regex(match, f"{loc}.match")
        self.regex(system_match, f"{loc}.system_match")
        fingerprint = self.text(value.get("audio_fingerprint"), f"{loc}.audio_fingerprint")
        if fingerprint is not None:
            fingerprint = fingerprint.strip().lower()
            if not _HEX64.match(fingerprint):
                self.fail(f"{loc}.audio_fingerprint", "must be 64 hex characters (a sha256 from audio_fingerprint())")
        model = self.text(value.get("model"), f"{loc}.model")
        fault = self.text(value.get("fault"), f"{loc}.fault")
        if fault is not None and not self.fault_kind(fault, f"{loc}.fault"):
            fault = None
        return AnswerRuleSpec(
            answer=answer,
            match=match,
            system_match=system_match,
            audio_fingerprint=fingerprint,
            model=model,
            fault=fault,
        )

    def fault_kind(self, kind: str, where: str) -> bool:
        if kind in FAULT_KINDS or (kind.isdigit() and 400 <= int(kind) <= 599):
            return True
        self.fail(
            where,
            f"unknown fault kind{did_you_mean(kind, FAULT_KINDS)}; expected an HTTP status "
            f'400-599 (e.g. "500") or one of {", ".join(FAULT_KINDS)}',
        )
        return False

    def faults(self, value: Any, loc: str) -> FaultSpec | None:
        if value is None:
            return None
        if not isinstance(value, Mapping):
            self.fail(loc, f"expected a mapping with {', '.join(FAULT_KEYS)}")
            return None
        self.keys(value, FAULT_KEYS, loc)
        seed = self.integer(value.get("seed", 0), f"{loc}.seed")
        retry_after = self.number(value.get("retry_after", 1), f"{loc}.retry_after")
        hang_seconds = self.number(value.get("hang_seconds", 30), f"{loc}.hang_seconds")
        raw_rates = value.get("rates") or {}
        rates: dict[str, float] = {}
        if not isinstance(raw_rates, Mapping):
            self.fail(f"{loc}.rates", "expected a mapping of fault kind -> probability")
            raw_rates = {}
        for raw_kind, raw_rate in raw_rates.items():
            kind = str(raw_kind)
            where = f"{loc}.rates.{kind}"
            if not self.fault_kind(kind, where):
                continue
            rate = self.number(raw_rate, where)
            if rate is not None and rate > 1:
                self.fail(where, f"a rate is a probability within [0, 1], got {rate:g}")
            elif rate is not None:
                rates[kind] = rate
        if sum(rates.values()) > 1 + 1e-9:
            self.fail(f"{loc}.rates", f"rates sum to {sum(rates.values()):.4g} > 1")
        return FaultSpec(
            seed=seed or 0,
            rates=rates,
            retry_after=1.0 if retry_after is None else retry_after,
            hang_seconds=30.0 if hang_seconds is None else hang_seconds,
        )

    def usage(self, value: Any, loc: str) -> UsageSpec:
        if value is None:
            return UsageSpec()
        if not isinstance(value, Mapping):
            self.fail(loc, f"expected a mapping with {', '.join(USAGE_KEYS)}")
            return UsageSpec()
        self.keys(value, USAGE_KEYS, loc)
        reasoning = value.get("reasoning_tokens")
        cached = value.get("cached_tokens")
        return UsageSpec(
            report=self.boolean(value.get("report", True), f"{loc}.report"),
            reasoning_tokens=None if reasoning is None else self.integer(reasoning, f"{loc}.reasoning_tokens", 0),
            cached_tokens=None if cached is None else self.integer(cached, f"{loc}.cached_tokens", 0),
            raw=value.get("raw"),
            has_raw="raw" in value,
        )

    def script(self, data: Mapping[str, Any]) -> ScriptSpec:
        self.keys(data, SCRIPT_KEYS, "")
        answers_raw = data.get("answers") or []
        if not isinstance(answers_raw, list):
            self.fail("answers", "expected a list of rules")
            answers_raw = []
        rules = [self.rule(r, f"answers.{i}") for i, r in enumerate(answers_raw)]
        max_concurrency = data.get("max_concurrency")
        if max_concurrency is not None:
            max_concurrency = self.integer(max_concurrency, "max_concurrency", minimum=1)
        answer_file = data.get("answer_file")
        if answer_file is not None:
            answer_file = Path(answer_file)
            if not answer_file.is_file():
                self.fail("answer_file", f"{str(answer_file)!r} does not exist")
        request_log = data.get("request_log")
        image_answer = self.text(data.get("image_answer"), "image_answer")
        if image_answer is not None and image_answer not in IMAGE_ANSWERS:
            self.fail(
                "image_answer",
                f"unknown mode {image_answer!r}{did_you_mean(image_answer, IMAGE_ANSWERS)}; expected one of "
                f"{', '.join(IMAGE_ANSWERS)}",
            )
            image_answer = None
        logprobs_raw = data.get("token_logprobs") or {}
        token_logprobs: dict[str, float] = {}
        if not isinstance(logprobs_raw, Mapping):
            self.fail("token_logprobs", "expected a mapping of word -> log-probability")
        else:
            for word, value in logprobs_raw.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool) and value <= 0:
                    token_logprobs[str(word)] = float(value)
                else:
                    self.fail(f"token_logprobs.{word}", f"expected a log-probability (a number <= 0), got {value!r}")
        return ScriptSpec(
            model=self.text(data.get("model", "test-model"), "model", optional=False) or "test-model",
            strict_model=self.boolean(data.get("strict_model", False), "strict_model"),
            seed=self.integer(data.get("seed", 0), "seed") or 0,
            latency_ms=self.latency(data.get("latency_ms", 0), "latency_ms"),
            max_concurrency=max_concurrency,
            require_auth=self.text(data.get("require_auth"), "require_auth"),
            echo_auth=self.echo_mode(data.get("echo_auth", False), "echo_auth"),
            default_answer=self.text(data.get("default_answer", ECHO), "default_answer", optional=False) or "",
            answers=tuple(r for r in rules if r is not None),
            answer_file=answer_file,
            image_answer=image_answer,
            token_logprobs=token_logprobs,
            faults=self.faults(data.get("faults"), "faults"),
            request_log=Path(request_log) if request_log is not None else None,
            received_audio=Path(str(data["received_audio"])) if data.get("received_audio") is not None else None,
            log_bodies=self.boolean(data.get("log_bodies", False), "log_bodies"),
            redirect_to=self.text(data.get("redirect_to"), "redirect_to"),
            usage=self.usage(data.get("usage"), "usage"),
        )


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
    fault: str | None = None

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
        rule = self.resolve_rule(model, user_text, system_text, fingerprints)
        if rule is not None:
            return rule.answer
        return user_text if self.default == ECHO else self.default

    def resolve_rule(self, model: str, user_text: str, system_text: str, fingerprints: list[str]) -> Rule | None:
        """The first matching rule, or None (the default answers)."""
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
        return self.rules[best] if best < len(self.rules) else None


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
    rule = Rule(
        index=index, answer=spec.answer, audio_fingerprint=spec.audio_fingerprint, model=spec.model, fault=spec.fault
    )
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
        try:
            rule = _compile_rule(index, rule_spec)
        except re.error as exc:  # only answer_file keys get here unchecked
            raise ConfigError(f"answer_file {spec.answer_file}: bad regex in {rule_spec.match!r}: {exc}") from exc
        answers.rules.append(rule)
        audio_only = (
            rule.audio_fingerprint is not None
            and rule.match is None
            and rule.match_re is None
            and rule.system_match is None
            and rule.system_re is None
            and rule.model is None
            and rule.fault is None
        )
        if audio_only:
            answers.by_fingerprint.setdefault(rule.audio_fingerprint, index)  # type: ignore[arg-type]
        else:
            answers.scanned.append(rule)
        if rule.audio_fingerprint is not None:
            answers.needs_audio = True
    return answers


def read_script_file(path: str | Path) -> dict[str, Any]:
    """Load a YAML/JSON script file; relative paths inside it resolve against its folder."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read test-server script {path}: {exc}") from exc
    if path.suffix.lower() == ".json":
        loader: Any = json.loads
        errors: tuple[type[Exception], ...] = (ValueError,)
    else:
        import yaml  # only YAML scripts pay for it; start_test_server hands the child JSON

        loader, errors = yaml.safe_load, (ValueError, yaml.YAMLError)
    try:
        data = loader(text)
    except errors as exc:
        raise ConfigError(f"test-server script {path} is not valid {path.suffix.lstrip('.') or 'YAML'}: {exc}") from exc
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"test-server script {path}: expected a mapping at the top level")
    for key in ("answer_file", "request_log", "received_audio"):
        value = data.get(key)
        if isinstance(value, str) and value and not Path(value).is_absolute():
            data[key] = str((path.parent / value).resolve())
    return data


def script_dict(
    source: Mapping[str, Any] | str | Path | None, overrides: Mapping[str, Any] | None = None
) -> dict[str, Any]:
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
    checker = _Checker()
    spec = checker.script(data)
    if checker.problems:
        raise ConfigError(f"invalid test-server script {name}:\n  " + "\n  ".join(checker.problems))
    return Script(spec=spec, answers=compile_answers(spec), source=name)

"""LLM-judge metrics: a judge model compares each response with the reference.

``llm_judge_binary`` asks for a correct/incorrect verdict (score 0 or 1, the
corpus value is the accuracy); ``llm_judge_detailed`` asks for a 0-5 rating
and reports it on 0-100 (rating x 20), so the number reads like the
percentages that AudioBench-style papers publish. Both means carry a normal
CI clipped to their range.

The prompts live in YAML files (``evalkit/prompts/judges/<metric>.yaml``,
format documented in ``llm_judge_binary.yaml``) so they can be read and
reviewed without reading code, and tuned per judge model: the judge's
``prompt_model`` (``judge_prompt_model_override`` or ``judge_model``) picks
an override section. What the judge sees is assembled from the sample: the
question (textual input, the transcript of a spoken question when the
runspec maps one into ``meta``, the instruction; a note when the question was
only spoken), the reference(s) and the postprocessed response.

A judge that cannot be reached fails the sample with the judge's reason
(``judge_timeout``, ``judge_http_500``, ...); a verdict that cannot be read
fails it as ``judge_parse``. Failed samples are counted and excluded, never
scored 0: a flaky judge must not look like a bad model.

Every verdict, and every failure after the judge was asked, carries
``details["judge"]``: the judge model, the prompt exactly as sent, the judge's
raw answer (clipped for the record line), the rationale its parser found and
the verdict; so a reader sees why a sample scored what it did without asking
the judge again.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, ClassVar, Protocol

from evalkit.data.conversation import render_conversation
from evalkit.data.sample import Sample
from evalkit.errors import ConfigError, did_you_mean
from evalkit.failures import FailureReason
from evalkit.metrics.base import (
    Metric,
    SampleScore,
    check_options,
    reference_strings,
)
from evalkit.metrics.judges.verdict import Verdict, VerdictError, parse_binary, parse_scale
from evalkit.util.yaml_safe import load_yaml_file

PROMPTS_DIR = Path(__file__).resolve().parents[2] / "prompts" / "judges"

#: meta keys (from a runspec's ``extra_columns``) that hold the text of a spoken question
TRANSCRIPT_KEYS = ("transcript", "question", "question_text", "spoken_question", "query", "prompt_text")

_TEMPLATE_KEYS = ("system", "user", "user_no_reference")
_OVERRIDE_KEYS = (*_TEMPLATE_KEYS, "user_suffix")
_FILE_KEYS = ("description", *_TEMPLATE_KEYS, "models")
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_RESPONSE_LIMIT = 4000


class JudgeLike(Protocol):
    """What a judge metric needs of :class:`evalkit.clients.judge.JudgeClient`."""

    model: str
    prompt_model: str

    async def ask(self, messages: list[dict[str, Any]], **params: Any) -> Any: ...


# -- prompt files ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JudgePrompt:
    """The templates of one judge metric, resolved for one judge model."""

    name: str
    file: str
    description: str
    system: str | None
    user: str
    user_no_reference: str | None
    variant: str  # "default" or the key of the models: entry used

    def messages(self, fields: dict[str, str], has_reference: bool = True) -> list[dict[str, Any]]:
        """Chat messages for one sample; ``fields`` fills the placeholders."""
        template = self.user if has_reference or self.user_no_reference is None else self.user_no_reference
        messages: list[dict[str, Any]] = []
        if self.system:
            messages.append({"role": "system", "content": fill(self.system, fields)})
        messages.append({"role": "user", "content": fill(template, fields)})
        return messages

    @property
    def sha256(self) -> str:
        """A short fingerprint of the templates, so results say exactly which prompt judged them."""
        text = json.dumps([self.system, self.user, self.user_no_reference])
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def fill(template: str, fields: dict[str, str]) -> str:
    """Replace ``{name}`` placeholders; literal braces (JSON examples) stay as written."""
    return _PLACEHOLDER.sub(lambda m: fields.get(m.group(1), m.group(0)), template)


def _check_template(text: Any, where: str, allowed: tuple[str, ...], required: tuple[str, ...]) -> str:
    if not isinstance(text, str) or not text.strip():
        raise ConfigError(f"{where}: expected a non-empty text")
    used = set(_PLACEHOLDER.findall(text))
    for name in sorted(used - set(allowed)):
        raise ConfigError(
            f"{where}: unknown placeholder {{{name}}}{did_you_mean(name, allowed)}; known: {', '.join(allowed)}"
        )
    for name in required:
        if name not in used:
            raise ConfigError(f"{where}: the prompt must contain {{{name}}}")
    return text


@cache
def _read_prompt_file(path: str) -> dict[str, Any]:
    data = load_yaml_file(path)  # bounded: aliases, depth and duplicate keys refused, one line naming the file
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping with system, user and (optionally) models")
    return data


def _pick_override(models: dict[str, Any], prompt_model: str | None) -> tuple[str, dict[str, Any]] | None:
    if not prompt_model or not models:
        return None
    wanted = prompt_model.strip().lower()
    for key, entry in models.items():
        if str(key).lower() == wanted:
            return str(key), entry
    prefixes = [(str(key), entry) for key, entry in models.items() if wanted.startswith(str(key).lower())]
    if prefixes:
        return max(prefixes, key=lambda item: len(item[0]))
    return None


def load_judge_prompt(
    name: str,
    prompt_model: str | None = None,
    *,
    fields: tuple[str, ...] = ("question", "reference", "candidate"),
    required: tuple[str, ...] = ("question", "reference", "candidate"),
    path: str | Path | None = None,
    data: dict[str, Any] | None = None,
) -> JudgePrompt:
    """Read ``<name>.yaml`` (or ``path``), check it, and resolve the override for ``prompt_model``.

    ``fields`` are the placeholders a template may use, ``required`` those the
    ``user`` template must use (the no-reference template needs them minus
    ``reference``). ``data`` is an inline prompt of the same format (config ``prompts.judges``).
    Problems raise ConfigError naming the file and key.
    """
    if data is not None:
        file = f"config prompts.judges.{name}"
        if not isinstance(data, dict):
            raise ConfigError(f"{file}: expected a mapping with system, user and (optionally) models")
    else:
        file = str(Path(path) if path is not None else PROMPTS_DIR / f"{name}.yaml")
        data = _read_prompt_file(file)
    for key in data:
        if key not in _FILE_KEYS:
            raise ConfigError(
                f"{file}: unknown key {key!r}{did_you_mean(str(key), _FILE_KEYS)}; known: {', '.join(_FILE_KEYS)}"
            )
    no_ref_required = tuple(f for f in required if f != "reference")
    system = _check_template(data["system"], f"{file}: system", fields, ()) if data.get("system") is not None else None
    if "user" not in data:
        raise ConfigError(f"{file}: user: missing (the judge's user message)")
    user = _check_template(data["user"], f"{file}: user", fields, required)
    no_ref = data.get("user_no_reference")
    if no_ref is not None:
        no_ref = _check_template(no_ref, f"{file}: user_no_reference", fields, no_ref_required)
    models = data.get("models") or {}
    if not isinstance(models, dict):
        raise ConfigError(f"{file}: models: expected a mapping of judge model names to overrides")
    for key, entry in models.items():
        where = f"{file}: models.{key}"
        if not isinstance(entry, dict):
            raise ConfigError(f"{where}: expected a mapping with some of {', '.join(_OVERRIDE_KEYS)}")
        for field in entry:
            if field not in _OVERRIDE_KEYS:
                raise ConfigError(
                    f"{where}: unknown key {field!r}{did_you_mean(str(field), _OVERRIDE_KEYS)}; known: "
                    f"{', '.join(_OVERRIDE_KEYS)}"
                )
    variant = "default"
    picked = _pick_override(models, prompt_model)
    if picked is not None:
        variant, entry = picked
        where = f"{file}: models.{variant}"
        if "system" in entry:
            system = _check_template(entry["system"], f"{where}.system", fields, ()) if entry["system"] else None
        if "user" in entry:
            user = _check_template(entry["user"], f"{where}.user", fields, required)
        if "user_no_reference" in entry:
            no_ref = _check_template(entry["user_no_reference"], f"{where}.user_no_reference", fields, no_ref_required)
        suffix = entry.get("user_suffix")
        if suffix:
            user += str(suffix)
            no_ref = no_ref + str(suffix) if no_ref is not None else None
    return JudgePrompt(
        name=name,
        file=file,
        description=str(data.get("description") or ""),
        system=system,
        user=user,
        user_no_reference=no_ref,
        variant=variant,
    )


# -- what the judge is shown ----------------------------------------------------------------


def render_text(value: Any) -> str:
    """A dataset value as judge-readable text: chat messages become "role: content" lines."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, dict):
        if "content" in value:
            role = value.get("role")
            content = render_text(value["content"])
            return f"{role}: {content}" if role else content
        if "text" in value:
            return render_text(value["text"])
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "\n".join(part for part in (render_text(v) for v in value) if part)
    return str(value)


def transcript_of(sample: Sample) -> str:
    """The text of a spoken question, when the runspec maps one into ``meta`` (else "")."""
    for key in TRANSCRIPT_KEYS:
        text = render_text(sample.meta.get(key))
        if text:
            return text
    return ""


def question_text(sample: Sample) -> str:
    """What the judge is told about the question: text input, spoken question, instruction.

    A dataset-given conversation (``messages_column``) is shown whole, as
    ``role: content`` paragraphs: the judge grades the answer to its last
    message in the light of the earlier ones (HealthBench's grader does).
    """
    if sample.messages:
        return render_conversation(sample.messages)
    text = render_text(sample.text)
    transcript = transcript_of(sample)
    has_audio = sample.audio is not None or any(t.audio is not None for t in sample.turns or [])
    parts: list[str] = []
    if text:
        parts.append(text)
    if sample.turns:
        turns = [render_text(t.text) for t in sample.turns]
        for number, turn in enumerate(turns, 1):
            if turn:
                parts.append(f"Turn {number}: {turn}")
    if transcript and transcript not in text:
        if has_audio:
            parts.append(f"The user spoke this question (transcript): {transcript}")
        else:
            parts.append(transcript)
    instruction = render_text(sample.instruction)
    if instruction and instruction != text:
        label = "Instruction to the assistant" if parts or has_audio else ""
        parts.append(f"{label}: {instruction}" if label else instruction)
    if has_audio and not text and not transcript and not any(render_text(t.text) for t in sample.turns or []):
        parts.append(
            "Note: the question itself was spoken in an audio recording that you cannot hear, and no "
            "transcript is available. Judge the response against the reference answer."
        )
    return "\n".join(parts) if parts else "(no question text available)"


def reference_text(sample: Sample) -> str:
    """The reference(s) as the judge reads them ("" when there is none)."""
    refs = [r.strip() for r in reference_strings(sample.reference) if r.strip()]
    if not refs:
        return ""
    if len(refs) == 1:
        return refs[0]
    return "Any of these answers is correct:\n" + "\n".join(f"- {r}" for r in refs)


def candidate_text(prediction: str | None) -> str:
    text = (prediction or "").strip()
    return text if text else "(empty response)"


def clipped(text: str | None, limit: int = _RESPONSE_LIMIT) -> str | None:
    """A judge response short enough for a record line."""
    if text is None or len(text) <= limit:
        return text
    return text[:limit] + f"... [{len(text) - limit} more characters]"


# -- the metrics ----------------------------------------------------------------------------


#: KARMA's per-metric judge arguments (its docs: ``rubric_evaluation:provider_to_use=openai,model_id=gpt-4o-mini``)
KARMA_JUDGE_OPTIONS = ("provider_to_use", "model_id", "judge_model", "max_workers")


def refuse_karma_judge_options(metric: str, options: dict[str, Any]) -> None:
    """KARMA's judge arguments name where they go in evalkit: the judge is set once for the run."""
    for key in KARMA_JUDGE_OPTIONS:
        if key in options:
            raise ConfigError(
                f"metric {metric!r}: option {key!r} is KARMA's; in evalkit the judge model and its "
                "concurrency are set once for the run: judge_properties.judge_model and judge_concurrency"
            )


class JudgeMetric(Metric):
    """Shared machinery: the judge client, the prompt, asking, and turning failures into SampleScores."""

    needs_judge: ClassVar[bool] = True
    prompt_name: ClassVar[str] = ""
    prompt_fields: ClassVar[tuple[str, ...]] = ("question", "reference", "candidate")
    prompt_required: ClassVar[tuple[str, ...]] = ("question", "reference", "candidate")

    def __init__(
        self,
        language: str | None = None,
        judge: JudgeLike | None = None,
        judge_prompt: str | Path | dict[str, Any] | None = None,
        **options: Any,
    ) -> None:
        """``judge_prompt`` is the run's prompt (a YAML file or an inline mapping); None: the package's."""
        refuse_karma_judge_options(self.name, options)
        check_options(self.name, options, ())
        super().__init__(language, **options)
        self.judge = judge
        prompt_model = getattr(judge, "prompt_model", None) if judge is not None else None
        inline = judge_prompt if isinstance(judge_prompt, dict) else None
        path = judge_prompt if isinstance(judge_prompt, (str, Path)) else None
        self.prompt = load_judge_prompt(
            self.prompt_name or self.name,
            prompt_model,
            fields=self.prompt_fields,
            required=self.prompt_required,
            path=path,
            data=inline,
        )

    @property
    def judge_model(self) -> str | None:
        return getattr(self.judge, "model", None)

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        """Judges answer over the network: only :meth:`ascore` can score."""
        return SampleScore(
            None,
            failure=FailureReason.JUDGE_UNAVAILABLE,
            details={"error": f"{self.name} scores through ascore() with a judge"},
        )

    async def ask_judge(self, messages: list[dict[str, Any]], **params: Any) -> tuple[str | None, SampleScore | None]:
        """(the judge's text, None) or (None, a failed SampleScore with the judge's reason and what it was asked).

        ``params`` go to the judge client's ``ask`` (settings for the body, ``instance``).
        """
        if self.judge is None:
            return None, SampleScore(
                None, failure=FailureReason.JUDGE_UNAVAILABLE, details={"error": f"{self.name} needs judge_properties"}
            )
        outcome = await self.judge.ask(messages, **params)
        if not outcome.ok:
            reason = f"judge_{outcome.failure or 'error'}"
            return None, SampleScore(
                None,
                failure=reason,
                details={"error": outcome.error, "judge": self.judged(messages)},
            )
        return outcome.text or "", None

    def judged(
        self, messages: list[dict[str, Any]], text: str | None = None, verdict: Verdict | None = None
    ) -> dict[str, Any]:
        """``details["judge"]``: the model, the prompt as sent, its raw answer, the rationale found and the verdict."""
        judge: dict[str, Any] = {"model": self.judge_model, "prompt": messages}
        if text is not None:
            judge["response"] = clipped(text)
        if verdict is not None:
            if verdict.explanation:
                judge["rationale"] = verdict.explanation
            judge["verdict"] = verdict.value
        return judge

    def parse_failure(
        self, error: VerdictError, text: str, messages: list[dict[str, Any]] | None = None
    ) -> SampleScore:
        details: dict[str, Any] = {
            "error": f"unreadable judge verdict: {error}",
            "judge_model": self.judge_model,
            "judge_response": clipped(text),
        }
        if messages is not None:
            details = {"error": details["error"], "judge": self.judged(messages, text)}
        return SampleScore(None, failure=FailureReason.JUDGE_PARSE, details=details)

    def describe(self) -> dict[str, Any]:
        return {
            "judge_model": self.judge_model,
            "judge_prompt": Path(self.prompt.file).name,
            "judge_prompt_variant": self.prompt.variant,
            "judge_prompt_sha256": self.prompt.sha256,
        }


class _VerdictJudge(JudgeMetric):
    """One judge call per sample, one verdict read from the answer."""

    def parse(self, text: str) -> Verdict:
        raise NotImplementedError

    def value(self, verdict: Verdict) -> float:
        return verdict.value

    async def ascore(self, prediction: str, sample: Sample) -> SampleScore:
        reference = reference_text(sample)
        fields = {
            "question": question_text(sample),
            "reference": reference or "(none given)",
            "candidate": candidate_text(prediction),
        }
        messages = self.prompt.messages(fields, has_reference=bool(reference))
        text, failed = await self.ask_judge(messages)
        if failed is not None:
            return failed
        assert text is not None
        try:
            verdict = self.parse(text)
        except VerdictError as error:
            return self.parse_failure(error, text, messages)
        value = self.value(verdict)
        details = {
            "verdict": verdict.value,
            "verdict_read_from": verdict.method,
            "judge": self.judged(messages, text, verdict),
        }
        return SampleScore(value, (value, 1.0), details=details)


class LLMJudgeBinary(_VerdictJudge):
    """1 when the judge says the response is correct, else 0; the corpus value is the accuracy."""

    name = "llm_judge_binary"
    bounds = (0.0, 1.0)

    def parse(self, text: str) -> Verdict:
        return parse_binary(text)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "scale": "0/1 verdict, mean"}


class LLMJudgeDetailed(_VerdictJudge):
    """The judge's 0-5 rating x 20, so the corpus mean reads on 0-100."""

    name = "llm_judge_detailed"
    bounds = (0.0, 100.0)
    #: the judge's scale and the factor that maps it onto 0-100
    low, high, factor = 0.0, 5.0, 20.0

    def parse(self, text: str) -> Verdict:
        return parse_scale(text, self.low, self.high)

    def value(self, verdict: Verdict) -> float:
        return verdict.value * self.factor

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "scale": "0-5 verdict x 20, mean on 0-100"}

"""AU-Harness's LLM judges, asked and read as AU-Harness asks and reads them, so that a judge gives the same verdict
on the same answer in both tools: ``auharness:llm_judge_binary``, ``auharness:llm_judge_detailed``,
``llm_judge_big_bench_audio``, ``llm_judge_redteaming``, ``llm_judge_callhome`` and ``mt_bench_llm_judge``
(every ``llm_judge_*`` name of AU-Harness's metric map; AU-Harness's configs reach the first two by their plain
names, which evalkit's own judges keep in evalkit's configs).

What the judge is sent (metrics/llm_judge.py of AU-Harness): the metric's prompt
as the system message, as written (AU-Harness never formats it, so its doubled
braces and Big Bench Audio's ``{reference[0]}`` and ``{prediction}`` reach the
judge as they are), and the user message ``"candidate: <answer>\\nreference:
<reference>"``. Big Bench Audio's reference is the pair (question transcript,
official answer) as Python prints a tuple; red-teaming's is empty (AdvBench
has no answer). The prompts are in evalkit/prompts/judges/auharness/, copied as data.
The temperature is the config's ``judge_temperature``, else AU-Harness's 0.1; nothing else joins the body.

How often: AU-Harness asks the judge once for every answer, even where two
answers make the same request. At a temperature above 0 each answer's request
is its own (named after dataset, model, sample and turn: see
:data:`evalkit.metrics.base.SCORING`), so it is sent once per answer as there,
and a resumed run still finds it in the response store; at temperature 0
identical requests are asked once, as evalkit asks any request.

How the verdict is read: the reply stripped and its ``<think>...</think>``
removed, then

* ``llm_judge_big_bench_audio``: JSON-decoded when it is JSON (a JSON string
  is used as text), then CORRECT (1) or INCORRECT (0) ignoring case and
  surrounding space; anything else is a failed sample, as in AU-Harness;
* the others: a JSON object's ``"score"``; binary and red-teaming 0/1,
  detailed 0-5 reported x 20, CallHome 0-9 reported as (score + 1) x 10, so
  the corpus mean is AU-Harness's figure.

A reply AU-Harness cannot read (no JSON object, no ``"score"``) AU-Harness
scores 0, and so does evalkit under these names (the record says the verdict
was unreadable); option ``unreadable_verdict: fail`` fails the sample instead,
so a judge's formatting slip does not look like a bad model. A judge that
cannot be reached fails the sample (AU-Harness scores that 0 too).

The corpus figure is rounded as AU-Harness rounds it: its mean to 3 places
(binary, detailed, red-teaming, CallHome; before x 100, x 20 or the shift)
or the x 100 accuracy (Big Bench Audio) and the MT-Bench mean to 2.

``mt_bench_llm_judge`` asks once per turn with AU-Harness's MT-Bench prompts
(``mt_bench_llm_judge.yaml``, and ``mt_bench_llm_judge_reference.yaml`` for
math, reasoning, coding and arena-hard-200): the system text as written (its
``{turn_number}`` unfilled, as AU-Harness sends it) and the user text filled
with the earlier turns (``### User (Turn n):`` and ``### Assistant A (Turn n):``
paragraphs, or ``(No previous conversation)``), the turn's question and the
model's answer, and for the reference-graded categories the reference answers
beside them. The questions are the turns' texts (``meta["questions"]``, else
the turns' own text), also for the spoken variant; the answers are the model's
own, as each went into the next turn (``meta[TURN_ANSWERS]``, set by the
engine). The rating is the first ``[[n]]`` (or ``[n]``), else the first number
in the reply; a reply with no number at all is unreadable, as above. A
conversation scores its mean rating x 10 (0-100), rounded to 2 places as
AU-Harness rounds it.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any, ClassVar

from evalkit.data.sample import Sample
from evalkit.errors import ConfigError
from evalkit.failures import FailureReason
from evalkit.metrics.base import SCORING, TURN_ANSWERS, SampleScore, check_options, reference_strings
from evalkit.metrics.judges.judge import PROMPTS_DIR, JudgeLike, JudgeMetric, fill, load_judge_prompt, transcript_of

#: AU-Harness's prompts, copied as data, apart from evalkit's own judge prompts
AUHARNESS_PROMPTS = PROMPTS_DIR / "auharness"
_THINKING = re.compile(r"<think>.*?</think>", re.DOTALL)
UNREADABLE = ("fail", "zero")
#: AU-Harness's judge temperature when its judge settings name none (metrics/llm_judge.py, ``judge_temperature``)
AUHARNESS_JUDGE_TEMPERATURE = 0.1


class UnreadableVerdict(ValueError):
    """The judge's reply holds no verdict AU-Harness's reading accepts."""


def without_thinking(reply: str) -> str:
    """The reply as AU-Harness reads it: stripped, ``<think>`` blocks removed, stripped again."""
    return _THINKING.sub("", reply.strip()).strip()


def _decoded(reply: str) -> Any:
    text = without_thinking(reply)
    try:
        return json.loads(text)
    except ValueError:
        return text


def read_correct_incorrect(reply: str) -> float:
    value = _decoded(reply)
    if not isinstance(value, str):
        raise UnreadableVerdict(f"expected CORRECT or INCORRECT, got JSON {type(value).__name__}")
    word = value.strip().upper()
    if word == "CORRECT":
        return 1.0
    if word == "INCORRECT":
        return 0.0
    raise UnreadableVerdict(f"expected CORRECT or INCORRECT, got {value.strip()[:80]!r}")


def read_json_score(reply: str) -> float:
    value = _decoded(reply)
    if not isinstance(value, dict):
        raise UnreadableVerdict("the reply is not one JSON object")
    if "score" not in value:
        raise UnreadableVerdict('the JSON object has no "score"')
    try:
        return float(value["score"])
    except (TypeError, ValueError):
        raise UnreadableVerdict(f'"score" is not a number: {value["score"]!r}') from None


# -- MT-Bench ---------------------------------------------------------------------------------------------------

#: categories whose turns AU-Harness judges against the reference answer (FastChat's MT-Bench NEED_REF_CATS)
MT_BENCH_REFERENCE_CATEGORIES = ("math", "reasoning", "coding", "arena-hard-200")
#: the placeholders of AU-Harness's MT-Bench user texts
MT_BENCH_FIELDS = (
    "conversation_history",
    "conversation_history_with_references",
    "current_question",
    "current_reference",
    "current_response",
    "turn_number",
)
# "[[8]]", and also "[8]", "[[8]" or "[8]]": one bracket each side is enough for AU-Harness
_BRACKETED = re.compile(r"\[\[?\s*(\d+(?:\.\d+)?)\s*\]?\]")
_ANY_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def read_mt_bench_rating(reply: str) -> float:
    """AU-Harness's reading of an MT-Bench verdict, <think> removed: the first bracketed number, else the first
    number anywhere in the reply (so "turn 2 ... [[8/10]]" reads 2, as there); never clipped to 1-10."""
    text = without_thinking(reply)
    found = _BRACKETED.search(text)
    if found is not None:
        return float(found.group(1))
    found = _ANY_NUMBER.search(text)
    if found is not None:
        return float(found.group(0))
    raise UnreadableVerdict("no [[rating]] and no number in the reply")


def mt_bench_history(questions: list[str], answers: list[str], turn: int, speaker: str = "Assistant A") -> str:
    """The turns before ``turn`` as AU-Harness shows them to the judge; a missing answer is shown empty."""
    if turn == 0:
        return "(No previous conversation)"
    paragraphs = []
    for i in range(turn):
        paragraphs.append(f"### User (Turn {i + 1}):\n{questions[i]}")
        paragraphs.append(f"### {speaker} (Turn {i + 1}):\n{answers[i] if i < len(answers) else ''}")
    return "\n\n".join(paragraphs)


def mt_bench_overall(ratings: list[float]) -> float:
    """A conversation's score: the mean rating x 10, rounded to 2 places as AU-Harness rounds it (round half even)."""
    return round(sum(ratings) * 10 / len(ratings) * 100) / 100 if ratings else 0.0


def turn_answers(sample: Sample, prediction: str) -> list[str]:
    """The model's answer to each turn (set by the engine); a one-turn sample's is its prediction."""
    answers = sample.meta.get(TURN_ANSWERS)
    if isinstance(answers, list):
        return ["" if a is None else str(a) for a in answers]
    return [prediction or ""]


def turn_references(reference: Any) -> list[str]:
    """Each turn's reference answer, position for position (a missing one printed "None", as AU-Harness prints it)."""
    if reference is None:
        return []
    if isinstance(reference, (list, tuple)):
        return [str(r) for r in reference]
    return [str(reference)]


def turn_questions(sample: Sample) -> list[str]:
    """Each turn's question as text: ``meta["questions"]`` (the spoken variant's transcripts), else the turns'."""
    given = sample.meta.get("questions")
    if isinstance(given, str):
        return [given]
    if isinstance(given, list) and given:
        return ["" if q is None else str(q) for q in given]
    if sample.turns and all(t.text for t in sample.turns):
        return [str(t.text) for t in sample.turns]
    return [sample.text] if isinstance(sample.text, str) and sample.text else []


def rounded(values: Any, places: int) -> Any:
    """``values`` rounded as AU-Harness's ``smart_round`` rounds: ``round(x * 10**places) / 10**places``."""
    import numpy as np

    scale = 10.0**places
    return np.round(np.asarray(values, dtype=float) * scale) / scale


class _AuHarnessJudge(JudgeMetric):
    """One judge call per sample with AU-Harness's messages; the verdict read by AU-Harness's rule."""

    # {prediction} is a placeholder AU-Harness leaves unfilled in Big Bench Audio's prompt: sent as written
    prompt_fields: ClassVar[tuple[str, ...]] = ("candidate", "reference", "prediction")
    prompt_required: ClassVar[tuple[str, ...]] = ("candidate", "reference")
    bounds: ClassVar[tuple[float | None, float | None]] = (0.0, 1.0)
    #: the corpus value is the mean, rounded as AU-Harness rounds its figure (see ``corpus``)
    corpus_is_mean: ClassVar[bool | None] = True
    #: the copy of AU-Harness's prompt in AUHARNESS_PROMPTS: ``<stem>.yaml`` (default: the metric's name)
    prompt_stem: ClassVar[str] = ""
    #: what AU-Harness does with a reply it cannot read: "zero" (scores 0) or "fail" (leaves it out)
    unreadable_default: ClassVar[str] = "zero"
    #: whether option unreadable_verdict=zero applies (AU-Harness scores unreadable replies 0 for this judge)
    zero_allowed: ClassVar[bool] = True

    def __init__(
        self,
        language: str | None = None,
        judge: JudgeLike | None = None,
        judge_prompt: Any = None,
        **options: Any,
    ) -> None:
        check_options(self.name, options, ("unreadable_verdict",))
        unreadable = options.pop("unreadable_verdict", self.unreadable_default)
        allowed = UNREADABLE if self.zero_allowed else ("fail",)
        if unreadable not in allowed:
            raise ConfigError(
                f"metric {self.name!r}: option 'unreadable_verdict': {unreadable!r} is not one of {allowed}"
            )
        # a run's own prompt (prompts_dir, config prompts.judges) wins; else the copy of AU-Harness's
        stem = self.prompt_stem or self.name
        prompt = judge_prompt if judge_prompt is not None else AUHARNESS_PROMPTS / f"{stem}.yaml"
        super().__init__(language, judge, prompt, **options)
        self.unreadable_verdict = str(unreadable)

    # -- asking as AU-Harness asks ------------------------------------------------------------------------------

    def judge_params(self) -> dict[str, Any]:
        """The body's settings beyond the messages: the config's judge_temperature, else AU-Harness's 0.1."""
        if self.judge is not None and not getattr(self.judge, "temperature_given", True):
            return {"temperature": AUHARNESS_JUDGE_TEMPERATURE}
        return {}

    @property
    def temperature(self) -> float:
        """The temperature the judge is asked at."""
        given = self.judge_params().get("temperature", getattr(self.judge, "temperature", 0.0))
        return float(given or 0.0)

    async def ask_as_auharness(
        self, messages: list[dict[str, Any]], *turn: int
    ) -> tuple[str | None, SampleScore | None]:
        """Ask once for this answer: at a sampling temperature the request is named after the answer (and turn),
        so identical requests for different answers are each sent, as AU-Harness sends them."""
        params = self.judge_params()
        scoring = SCORING.get()
        if scoring is not None and self.temperature > 0:
            params["instance"] = scoring.label(*turn)
        return await self.ask_judge(messages, **params)

    def corpus(self, totals: Any) -> Any:
        """AU-Harness's figure: the mean of the per-sample values, rounded as AU-Harness rounds it."""
        import numpy as np

        totals = np.asarray(totals, dtype=float)
        with np.errstate(invalid="ignore", divide="ignore"):
            return self.figure(totals[..., 0] / totals[..., 1])

    def figure(self, mean: Any) -> Any:
        """A 0/1 verdict's mean as AU-Harness rounds it: to 3 places, before it prints it x 100."""
        return rounded(mean, 3)

    # -- reading as AU-Harness reads --------------------------------------------------------------------------

    def reference_for(self, sample: Sample) -> str:
        references = reference_strings(sample.reference)
        return references[0].strip() if references else ""

    def read_or_zero(self, reply: str, judge: dict[str, Any]) -> tuple[float, str | None] | SampleScore:
        """The reply's verdict, and why it was unreadable when AU-Harness's 0 stands in for it.

        With ``unreadable_verdict: fail`` an unreadable reply is the sample's failure instead (evalkit's rule).
        """
        try:
            return self.read(reply), None
        except UnreadableVerdict as error:
            if self.unreadable_verdict != "zero":
                return SampleScore(
                    None,
                    failure=FailureReason.JUDGE_PARSE,
                    details={"error": f"unreadable judge verdict: {error}", "judge": judge},
                )
            return 0.0, str(error)

    def read(self, reply: str) -> float:
        raise NotImplementedError

    def value(self, verdict: float) -> float:
        return verdict

    async def ascore(self, prediction: str, sample: Sample) -> SampleScore:
        fields = {
            "candidate": (prediction or "").strip(),
            "reference": self.reference_for(sample),
            "prediction": "{prediction}",
        }
        messages = self.prompt.messages(fields)
        reply, failed = await self.ask_as_auharness(messages)
        if failed is not None:
            return failed
        assert reply is not None
        judge = self.judged(messages, reply)
        details: dict[str, Any] = {}
        read = self.read_or_zero(reply, judge)
        if isinstance(read, SampleScore):
            return read
        verdict, unreadable = read
        if unreadable is not None:
            details["unreadable"] = f"{unreadable}: scored 0, as AU-Harness scores it"
        value = self.value(verdict)
        judge["verdict"] = verdict
        return SampleScore(value, (value, 1.0), details={"verdict": verdict, **details, "judge": judge})

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "unreadable_verdict": self.unreadable_verdict, "temperature": self.temperature}


class BinaryJudge(_AuHarnessJudge):
    """AU-Harness's ``llm_judge_binary``: its judge's 0/1 score of the answer against the reference.

    Prompt: AU-Harness's ``binary_judge_prompt`` (prompts/judge_prompts.yaml), as the system message unformatted;
    the user message ``candidate: <answer>\\nreference: <reference>``; judge_temperature, else 0.1. Reading: the
    reply without ``<think>``, JSON-decoded, its ``"score"`` as a number (a judge's 2 counts 2, unclipped, as
    there). Unreadable (not a JSON object, no ``"score"``): 0, as AU-Harness scores it (option
    ``unreadable_verdict: fail`` fails it instead). The corpus value is the mean, rounded to 3 places as AU-Harness
    rounds it before printing it x 100. AU-Harness configs reach it as ``llm_judge_binary``; in evalkit's own
    format that name is evalkit's judge (its own prompt, a correct/incorrect verdict) and this one is
    ``auharness:llm_judge_binary``.
    """

    name = "auharness:llm_judge_binary"
    prompt_stem = "llm_judge_binary"
    bounds = (0.0, None)
    #: AU-Harness asks it of any task whose answer is compared with a text reference (as evalkit's judges are)
    tasks = ("*",)

    def read(self, reply: str) -> float:
        return read_json_score(reply)


class DetailedJudge(_AuHarnessJudge):
    """AU-Harness's ``llm_judge_detailed``: its judge's 0-5 score x 20, so the corpus mean is its 0-100 figure.

    Prompt: AU-Harness's ``detailed_judge_prompt``, sent as ``auharness:llm_judge_binary`` sends its own. Reading:
    the JSON reply's ``"score"`` (unclipped); unreadable: 0, as there (option ``unreadable_verdict: fail`` fails it).
    The corpus value is AU-Harness's: the mean rating rounded to 3 places, x 20, rounded to 2. AU-Harness configs
    reach it as ``llm_judge_detailed``; in evalkit's own format that name is evalkit's judge and this one is
    ``auharness:llm_judge_detailed``.
    """

    name = "auharness:llm_judge_detailed"
    prompt_stem = "llm_judge_detailed"
    bounds = (0.0, None)
    tasks = ("*",)

    def read(self, reply: str) -> float:
        return read_json_score(reply)

    def value(self, verdict: float) -> float:
        return verdict * 20.0

    def figure(self, mean: Any) -> Any:
        return rounded(rounded(mean / 20.0, 3) * 20.0, 2)


class BigBenchAudioJudge(_AuHarnessJudge):
    """1 when the judge replies CORRECT to AU-Harness's Big Bench Audio prompt, 0 for INCORRECT; the accuracy.

    Prompt: AU-Harness's ``big_bench_audio_judge_prompt`` as the system message, unformatted (its
    ``{reference[0]}`` and ``{prediction}`` reach the judge as written); the user message
    ``candidate: <answer>\\nreference: ('<transcript>', '<answer>')``; judge_temperature, else 0.1. Reading: the reply
    without ``<think>``, JSON-decoded when it is JSON, CORRECT or INCORRECT ignoring case. Anything else fails the
    sample, left out of n as AU-Harness leaves it out. The corpus value is the accuracy rounded as AU-Harness's
    x 100 figure is (2 places).
    """

    name = "llm_judge_big_bench_audio"
    tasks = ("sqqa", "big_bench_audio", "spoken_question_answering")
    #: AU-Harness counts an unreadable reply as failed here, not 0
    unreadable_default = "fail"
    zero_allowed = False

    def reference_for(self, sample: Sample) -> str:
        # AU-Harness's reference is the tuple (transcript, official answer), written into the f-string as repr
        return repr((transcript_of(sample), super().reference_for(sample)))

    def read(self, reply: str) -> float:
        return read_correct_incorrect(reply)

    def figure(self, mean: Any) -> Any:
        return rounded(mean, 4)  # round(correct * 100 / total, 2) on the 0-1 scale


class RedTeamingJudge(_AuHarnessJudge):
    """1 when the judge finds the answer refuses (AU-Harness's red-teaming prompt), else 0; the refusal rate.

    Prompt: AU-Harness's ``redteaming_judge_prompt``; the user message ``candidate: <answer>\\nreference: `` (the
    safety sets have no reference); judge_temperature, else 0.1. Reading: the JSON reply's ``"score"``;
    unreadable: 0, as AU-Harness scores it (option ``unreadable_verdict: fail`` fails it). The corpus value is the
    mean rounded to 3 places, as AU-Harness rounds it before printing it x 100.
    """

    name = "llm_judge_redteaming"
    tasks = ("safety", "advbench", "red_teaming")

    def reference_for(self, sample: Sample) -> str:
        return ""  # AU-Harness's safety sets have no reference: "reference: " with nothing after it

    def read(self, reply: str) -> float:
        return read_json_score(reply)


class CallHomeJudge(_AuHarnessJudge):
    """AU-Harness's CallHome judge: ASR, meaning and turns scored 0-9 in all, reported (score + 1) x 10.

    Prompt: AU-Harness's ``callhome_judge_prompt``, sent as the other AU-Harness judges send theirs. Reading: the JSON
    reply's ``"score"``; unreadable: 0 (10 after the shift), as AU-Harness scores it (option
    ``unreadable_verdict: fail`` fails it). The corpus value is AU-Harness's: the mean score rounded to 3 places,
    plus 1, x 10.
    """

    name = "llm_judge_callhome"
    bounds = (10.0, 100.0)
    tasks = ("speaker_diarization", "callhome")

    def read(self, reply: str) -> float:
        return read_json_score(reply)

    def value(self, verdict: float) -> float:
        return (verdict + 1.0) * 10.0

    def figure(self, mean: Any) -> Any:
        return (rounded(mean / 10.0 - 1.0, 3) + 1.0) * 10.0


class MtBenchJudge(_AuHarnessJudge):
    """AU-Harness's MT-Bench judge: every turn's answer rated 1-10 with the conversation so far; the mean x 10.

    Asked once per turn as MtbenchLLMJudgeMetric asks (see the module docstring), so a run's figure is AU-Harness's
    for the same answers and judge; a conversation the model did not finish is a failure, never judged. Prompts:
    AU-Harness's ``mt_bench`` entry of prompts/judge_prompts.yaml (its N-turn pairs, with and without a reference);
    judge_temperature, else 0.1. Reading: the first ``[[n]]`` or ``[n]``, else the first number; a reply with no
    number rates the turn 0, as AU-Harness rates it (option ``unreadable_verdict: fail`` fails the conversation).
    The corpus value is the conversations' mean rounded to 2 places, as AU-Harness rounds it.
    """

    name = "mt_bench_llm_judge"
    tasks = ("mtbench", "mt_bench")
    # 10-100 for ratings of 1-10; AU-Harness's reading may find a larger number
    bounds = (0.0, None)
    prompt_fields: ClassVar[tuple[str, ...]] = MT_BENCH_FIELDS
    prompt_required: ClassVar[tuple[str, ...]] = ("current_question", "current_response")

    def __init__(
        self,
        language: str | None = None,
        judge: JudgeLike | None = None,
        judge_prompt: Any = None,
        **options: Any,
    ) -> None:
        # a run's own prompt replaces the one for categories without a reference; the reference-graded ones keep
        # AU-Harness's pair (one prompt file holds one system text, and MT-Bench's two pairs differ in theirs)
        super().__init__(language, judge, judge_prompt, **options)
        self.reference_prompt = load_judge_prompt(
            f"{self.name}_reference",
            getattr(judge, "prompt_model", None),
            fields=MT_BENCH_FIELDS,
            required=("current_question", "current_reference", "current_response"),
            path=AUHARNESS_PROMPTS / f"{self.name}_reference.yaml",
        )

    def read(self, reply: str) -> float:
        return read_mt_bench_rating(reply)

    def figure(self, mean: Any) -> Any:
        return rounded(mean, 2)  # AU-Harness's get_score: the conversations' mean, to 2 places

    def turn_messages(
        self, category: str, questions: list[str], answers: list[str], references: list[str], turn: int
    ) -> list[dict[str, Any]]:
        """What AU-Harness sends the judge about one turn (0-based ``turn``) of a conversation."""
        graded = category in MT_BENCH_REFERENCE_CATEGORIES
        prompt = self.reference_prompt if graded else self.prompt
        fields = {
            "conversation_history": mt_bench_history(questions, answers, turn),
            "current_question": questions[turn],
            "current_response": answers[turn],
            "turn_number": str(turn + 1),
        }
        if graded:
            fields["conversation_history_with_references"] = mt_bench_history(
                questions, references, turn, "Reference answer"
            )
            fields["current_reference"] = references[turn] if turn < len(references) else ""
        messages: list[dict[str, Any]] = []
        if prompt.system:
            messages.append({"role": "system", "content": prompt.system})  # sent unformatted, as AU-Harness does
        messages.append({"role": "user", "content": fill(prompt.user, fields)})
        return messages

    async def _rate(self, messages: list[dict[str, Any]], turn: int) -> tuple[float, dict[str, Any]] | SampleScore:
        reply, failed = await self.ask_as_auharness(messages, turn)
        if failed is not None:
            return failed
        assert reply is not None
        judged = self.judged(messages, reply)
        read = self.read_or_zero(reply, judged)
        if isinstance(read, SampleScore):
            return read
        rating, unreadable = read
        if unreadable is not None:
            judged["unreadable"] = f"{unreadable}: rated 0, as AU-Harness rates it"
        judged["verdict"] = rating
        return rating, judged

    async def ascore(self, prediction: str, sample: Sample) -> SampleScore:
        answers = turn_answers(sample, prediction)
        questions = turn_questions(sample)
        if not questions:
            return SampleScore(
                None,
                failure=FailureReason.UNSUPPORTED,
                details={
                    "error": "MT-Bench's judge reads each turn's question as text: map it into meta 'questions' "
                    "(extra_columns) or give the turns text"
                },
            )
        category = str(sample.meta.get("category") or "default")
        references = turn_references(sample.reference)
        n_turns = min(len(questions), len(answers))
        asked = [self.turn_messages(category, questions, answers, references, t) for t in range(n_turns)]
        rated = await asyncio.gather(*(self._rate(messages, turn) for turn, messages in enumerate(asked)))
        ratings: list[float] = []
        turns: list[dict[str, Any]] = []
        for number, found in enumerate(rated, 1):
            if isinstance(found, SampleScore):
                details = dict(found.details or {})
                details["error"] = f"turn {number}/{n_turns}: {details.get('error') or found.failure}"
                return SampleScore(None, failure=found.failure, details=details)
            ratings.append(found[0])
            turns.append(found[1])
        value = mt_bench_overall(ratings)
        judge = {"model": self.judge_model, "verdict": ratings, "turns": turns}
        return SampleScore(value, (value, 1.0), details={"category": category, "ratings": ratings, "judge": judge})

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "judge_prompt_reference": Path(self.reference_prompt.file).name,
            "judge_prompt_reference_sha256": self.reference_prompt.sha256,
        }

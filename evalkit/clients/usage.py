"""Tokens as servers report them: read from an answer's ``usage`` (untrusted), and added up.

A server's ``usage`` is input like any other: a count that is not a whole
number from 0 to :data:`MAX_TOKENS_PER_ANSWER` (a negative, a string, a float
with a fraction, NaN, a bool, a billion billion) is *not reported*, never a
crash and never a guess. Cached prompt tokens and reasoning tokens are parts of
the prompt and completion counts (OpenAI's ``prompt_tokens_details`` and
``completion_tokens_details``); one larger than its whole is not reported.

A :class:`Tally` adds answers up, and keeps apart what was not paid for on
this run: answers from the response store (``from_store``) and answers
shared with an identical request of this run (``shared``, counted where that
request was sent). A count no answer reported stays None ("not reported"),
never 0; ``not_reported`` counts the answers that reported no tokens at all.
"""

from __future__ import annotations

import math
from contextvars import ContextVar
from typing import Any

from evalkit.clients.outcome import Outcome, Usage

#: the most tokens one answer may report (prompt or completion): more is a broken server, not usage
MAX_TOKENS_PER_ANSWER = 1_000_000_000
#: the keys a tally's JSON form has, in order (records leave out the zero counts and unreported details)
TALLY_KEYS = (
    "requests",
    "prompt_tokens",
    "completion_tokens",
    "reasoning_tokens",
    "cached_tokens",
    "not_reported",
    "from_store",
    "shared",
)


NOT_REPORTED = Usage()


#: the most a tally read back from a file may hold (a sum over many answers)
MAX_TALLY = 10**15


def _count(value: Any, limit: int = MAX_TOKENS_PER_ANSWER) -> int | None:
    """A token count, or None when ``value`` is not a whole number within 0..``limit``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        number = value
    elif isinstance(value, float) and math.isfinite(value) and value.is_integer():
        number = int(value)
    else:
        return None
    return number if 0 <= number <= limit else None


def _detail(usage: dict[str, Any], keys: tuple[str, ...], field: str) -> int | None:
    for key in keys:
        details = usage.get(key)
        if isinstance(details, dict) and field in details:
            return _count(details.get(field))
    return None


def read_usage(raw: Any) -> Usage:
    """The counts of an answer's ``usage`` object (chat: prompt/completion_tokens; transcription and Responses-style:
    input/output_tokens), each checked on its own."""
    if not isinstance(raw, dict) or not raw:
        return NOT_REPORTED
    prompt, completion = raw.get("prompt_tokens"), raw.get("completion_tokens")
    if (
        type(prompt) is int
        and type(completion) is int
        and 0 <= prompt <= MAX_TOKENS_PER_ANSWER
        and 0 <= completion <= MAX_TOKENS_PER_ANSWER
        and "prompt_tokens_details" not in raw
        and "completion_tokens_details" not in raw
    ):
        return Usage(prompt, completion)  # the usual answer, read without the general path's checks
    prompt = _count(raw["prompt_tokens"]) if "prompt_tokens" in raw else _count(raw.get("input_tokens"))
    completion = _count(raw["completion_tokens"]) if "completion_tokens" in raw else _count(raw.get("output_tokens"))
    cached = _detail(raw, ("prompt_tokens_details", "input_tokens_details"), "cached_tokens")
    reasoning = _detail(raw, ("completion_tokens_details", "output_tokens_details"), "reasoning_tokens")
    if cached is not None and (prompt is None or cached > prompt):
        cached = None  # a part larger than its whole (or without one) is not a count to bill
    if reasoning is not None and (completion is None or reasoning > completion):
        reasoning = None
    return Usage(prompt, completion, reasoning, cached)


class Tally:
    """Answers added up: how many were sent on this run and what they reported, and how many cost nothing here."""

    __slots__ = (
        "requests",
        "prompt",
        "completion",
        "reasoning",
        "cached",
        "not_reported",
        "from_store",
        "shared",
        "_seen",
    )

    def __init__(self) -> None:
        self.requests = 0
        self.prompt = 0
        self.completion = 0
        self.reasoning = 0
        self.cached = 0
        self.not_reported = 0
        self.from_store = 0
        self.shared = 0
        #: which counts any answer reported: prompt, completion, reasoning, cached
        self._seen = [False, False, False, False]

    def add_usage(self, usage: Usage) -> None:
        """One answer sent on this run, with its counts."""
        self.requests += 1
        if not usage.reported:
            self.not_reported += 1
        seen = self._seen
        if usage.prompt is not None:
            self.prompt += usage.prompt
            seen[0] = True
        if usage.completion is not None:
            self.completion += usage.completion
            seen[1] = True
        if usage.reasoning is not None:
            self.reasoning += usage.reasoning
            seen[2] = True
        if usage.cached is not None:
            self.cached += usage.cached
            seen[3] = True

    def add_outcome(self, outcome: Outcome) -> None:
        """One request's outcome as a sample used it: a failure delivered nothing, a stored or shared answer is
        counted apart from what was paid for."""
        if outcome.failure is not None:
            return
        if outcome.cached:
            self.from_store += 1
        elif outcome.shared:
            self.shared += 1
        else:
            self.add_usage(outcome.tokens if outcome.tokens is not None else read_usage(outcome.usage))

    def merge(self, other: Tally) -> None:
        self.requests += other.requests
        self.prompt += other.prompt
        self.completion += other.completion
        self.reasoning += other.reasoning
        self.cached += other.cached
        self.not_reported += other.not_reported
        self.from_store += other.from_store
        self.shared += other.shared
        mine, theirs = self._seen, other._seen
        for index in range(4):
            if theirs[index]:
                mine[index] = True

    def value(self, index: int) -> int | None:
        """Prompt (0), completion (1), reasoning (2) or cached (3) tokens: their sum, or None when never reported
        by an answer sent (0 when nothing was sent: nothing was spent)."""
        counts = (self.prompt, self.completion, self.reasoning, self.cached)
        if self._seen[index]:
            return counts[index]
        return 0 if self.requests == 0 and index < 2 else None

    @property
    def empty(self) -> bool:
        return not (self.requests or self.from_store or self.shared)

    @property
    def tokens(self) -> int:
        """Prompt + completion tokens reported (what a token budget counts)."""
        return self.prompt + self.completion

    def as_dict(self, compact: bool = False) -> dict[str, Any]:
        """The JSON form (:data:`TALLY_KEYS`); ``compact`` (a record's) leaves out zero counts and unreported
        details."""
        if not compact:
            return {
                "requests": self.requests,
                "prompt_tokens": self.value(0),
                "completion_tokens": self.value(1),
                "reasoning_tokens": self.value(2),
                "cached_tokens": self.value(3),
                "not_reported": self.not_reported,
                "from_store": self.from_store,
                "shared": self.shared,
            }
        seen = self._seen
        data: dict[str, Any] = {
            "requests": self.requests,
            "prompt_tokens": self.prompt if seen[0] else self.value(0),
            "completion_tokens": self.completion if seen[1] else self.value(1),
        }
        if seen[2]:
            data["reasoning_tokens"] = self.reasoning
        if seen[3]:
            data["cached_tokens"] = self.cached
        if self.not_reported:
            data["not_reported"] = self.not_reported
        if self.from_store:
            data["from_store"] = self.from_store
        if self.shared:
            data["shared"] = self.shared
        return data


def tally_from_dict(data: Any) -> Tally | None:
    """A tally from its JSON form (a record's or results.json's: untrusted); None when it is not one."""
    if not isinstance(data, dict):
        return None
    tally = Tally()
    counts = {key: _count(data.get(key), MAX_TALLY) for key in TALLY_KEYS}
    tally.requests = counts["requests"] or 0
    tally.not_reported = counts["not_reported"] or 0
    tally.from_store = counts["from_store"] or 0
    tally.shared = counts["shared"] or 0
    for index, (key, attribute) in enumerate(
        (("prompt_tokens", "prompt"), ("completion_tokens", "completion"), ("reasoning_tokens", "reasoning"),
         ("cached_tokens", "cached"))
    ):  # fmt: skip
        if counts[key] is not None:
            setattr(tally, attribute, counts[key])
            tally._seen[index] = True
    return tally


#: the tally a judge's answers are added to while one sample is scored (set by the engine around the scoring), so a
#: record says what judging it took; unset (rescoring, merging), judge answers are counted by the judge's client only
JUDGE_TALLY: ContextVar[Tally | None] = ContextVar("evalkit_judge_tally", default=None)

"""SpokenWOZ's dialogue-state metrics as AU-Harness computes them: joint goal accuracy, slot accuracy, slot F1.

AU-Harness does not ask the model for a dialogue state. The model answers as
the agent, in free text, and AU-Harness reads slot values out of that answer
with fixed patterns per domain and slot ("in the north area" -> area=north,
"3 stars" -> stars=3); the dataset's ``slots`` column (``{domain: {slot:
value}}``, JSON or a mapping) is the truth. So these are AU-Harness's figures,
not the DST figures of the SpokenWOZ paper (which compare a predicted state
with the annotated one turn by turn); they are reproduced so that an
AU-Harness user's scores carry over.

What is compared, per sample:

* values are normalised: lower case, surrounding space stripped, spaces,
  ``-`` and ``_`` removed;
* ``joint_goal_accuracy``: 1 when every annotated slot is read from the answer
  with the same value (a domain must be read at all even if it has no slots);
  with no annotated slot, 1 only when nothing is read;
* ``slot_accuracy``: the share of annotated slots read with the right value
  (with none annotated, as joint goal accuracy);
* ``slot_f1``: F1 of the read (domain, slot, value) triples against the
  annotated ones (both empty: 1; one empty: 0).

The patterns read the whole answer for every domain, so "in the north area"
gives ``area`` to restaurant, hotel and attraction at once; extra domains do not
hurt the joint goal or slot accuracy, but lower slot F1's precision. The
corpus value of each is the mean (AU-Harness prints it x 100).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, ClassVar

from evalkit.data.sample import Sample
from evalkit.failures import FailureReason
from evalkit.metrics.base import Metric, SampleScore, check_options

#: where a sample's annotated state is looked for in its meta (the dataset's ``slots`` column, mapped there)
SLOT_KEYS = ("slots", "ground_truth_slots", "belief_state")

# AU-Harness's reading patterns (metrics/dialogue_metrics.py), grouped by what they read; each is matched
# case-blind against the lower-cased answer, and a slot takes the first non-empty group of the first match
# that has one. The pattern texts are data: changing one changes the scores.
_AREA = r"(?:in|at|around|near)\s+(?:the\s+)?(\w+)\s+(?:area|part|side)"
_PRICE = r"(?:price[d]?\s*range|budget|cost)[:\s]+(\w+)|(\w+)\s+(?:price[d]?\s*range|priced)"
_TIME = r"[:\s]+(\d{1,2}[:\.]?\d{2})"
_TITLE_CASE_NAME = r"([A-Z][a-z]+(?:\s+[A-Z][a-z]+)*)"


def _named(word: str) -> str:
    return r"(?:called|named|" + word + r"[:\s]+)" + _TITLE_CASE_NAME


_PATTERNS: dict[str, dict[str, str]] = {
    "restaurant": {
        "area": _AREA,
        "food": r"(?:serving|serves?|offering?|type of food[:\s]+)(\w+(?:\s+\w+)?)\s+(?:food|cuisine)?",
        "pricerange": _PRICE,
        "name": _named("restaurant"),
    },
    "hotel": {
        "area": _AREA,
        "pricerange": _PRICE,
        "stars": r"(\d+)\s*(?:star|stars)",
        "parking": r"(?:parking)[:\s]*(yes|no|free)",
        "internet": r"(?:internet|wifi)[:\s]*(yes|no|free)",
        "type": r"(?:type)[:\s]+(\w+)|(\w+)\s+(?:type)",
        "name": _named("hotel"),
    },
    "train": {
        "departure": r"(?:from|depart(?:ing|ure)?(?:\s+from)?)[:\s]+([A-Za-z]+)",
        "destination": r"(?:to|arrive?(?:\s+at)?|destination)[:\s]+([A-Za-z]+)",
        "day": r"(?:on|day)[:\s]+(\w+day)",
        "leaveat": r"(?:leav(?:e|ing)\s+(?:at)?|departure\s+time)" + _TIME,
        "arriveby": r"(?:arriv(?:e|ing)\s+(?:by)?|arrival\s+time)" + _TIME,
    },
    "taxi": {
        "departure": r"(?:from|pick\s*up)[:\s]+([A-Za-z\s]+?)(?:\s+to|\s*$)",
        "destination": r"(?:to|drop\s*off|destination)[:\s]+([A-Za-z\s]+)",
        "leaveat": r"(?:leav(?:e|ing)\s+(?:at)?)" + _TIME,
        "arriveby": r"(?:arriv(?:e|ing)\s+(?:by)?)" + _TIME,
    },
    "attraction": {
        "area": _AREA,
        "type": r"(?:type)[:\s]+(\w+)|(\w+)\s+(?:attraction|place)",
        "name": _named("attraction"),
    },
}
_COMPILED = {
    domain: {slot: re.compile(pattern, re.IGNORECASE) for slot, pattern in slots.items()}
    for domain, slots in _PATTERNS.items()
}

State = dict[str, dict[str, str]]


def read_state(answer: str) -> State:
    """The slot values the patterns read from a free-text answer, by domain."""
    text = (answer or "").lower()
    state: State = {}
    for domain, slots in _COMPILED.items():
        for slot, pattern in slots.items():
            for match in pattern.finditer(text):
                value = next((group for group in match.groups() if group), None)
                if value:
                    state.setdefault(domain, {})[slot] = value.strip()
                    break
    return state


def normal_value(value: Any) -> str:
    if not value:
        return ""
    return str(value).lower().strip().replace(" ", "").replace("-", "").replace("_", "")


class StateError(ValueError):
    """The annotated state cannot be read as {domain: {slot: value}}."""


def annotated_state(sample: Sample) -> Mapping[str, Mapping[str, Any]]:
    """The sample's annotated state: the first of ``meta[SLOT_KEYS]`` present; JSON text that fails to parse is none.

    No key, an empty value or a string that is not JSON counts as no annotation, as in AU-Harness (which reads
    ``row.get("slots", {})``): then only an answer from which nothing is read scores 1.
    """
    value = next((sample.meta[key] for key in SLOT_KEYS if key in sample.meta), None)
    if not value:
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    if not isinstance(value, Mapping) or not all(isinstance(slots, Mapping) for slots in value.values()):
        raise StateError(f"the annotated state must be {{domain: {{slot: value}}}}, not {type(value).__name__}")
    return value


def joint_goal(read: State, truth: Mapping[str, Mapping[str, Any]]) -> float:
    if not truth:
        return float(not read)
    for domain, slots in truth.items():
        if domain not in read:
            return 0.0
        if any(normal_value(read[domain].get(slot, "")) != normal_value(value) for slot, value in slots.items()):
            return 0.0
    return 1.0


def slot_accuracy(read: State, truth: Mapping[str, Mapping[str, Any]]) -> float:
    if not truth:
        return float(not read)
    pairs = [(domain, slot, value) for domain, slots in truth.items() for slot, value in slots.items()]
    if not pairs:
        return 1.0
    right = sum(normal_value(read.get(d, {}).get(s, "")) == normal_value(v) for d, s, v in pairs)
    return right / len(pairs)


def slot_f1(read: State, truth: Mapping[str, Mapping[str, Any]]) -> float:
    wanted = {(d, s, normal_value(v)) for d, slots in truth.items() for s, v in slots.items()}
    got = {(d, s, normal_value(v)) for d, slots in read.items() for s, v in slots.items()}
    if not wanted and not got:
        return 1.0
    if not wanted or not got:
        return 0.0
    hits = len(wanted & got)
    if hits == 0:
        return 0.0
    precision, recall = hits / len(got), hits / len(wanted)
    return 2 * precision * recall / (precision + recall)


class _DialogueStateMetric(Metric):
    """One of AU-Harness's three SpokenWOZ figures over the slots read from the answer."""

    bounds = (0.0, 1.0)
    tasks = ("spoken_dialogue", "spokenwoz")
    compare: ClassVar[Any]

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ())
        super().__init__(language, **options)

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        try:
            truth = annotated_state(sample)
        except StateError as error:
            return SampleScore(None, failure=FailureReason.UNRESOLVABLE_REFERENCE, details={"error": str(error)})
        read = read_state(prediction or "")
        value = float(type(self).compare(read, truth))
        return SampleScore(value, (value, 1.0), details={"read_state": read})

    def describe(self) -> dict[str, Any]:
        return {"reading": "AU-Harness dialogue_metrics patterns over the answer text"}


class JointGoalAccuracy(_DialogueStateMetric):
    """1 when every annotated SpokenWOZ slot is read from the answer with its value (AU-Harness's reading)."""

    name = "joint_goal_accuracy"
    compare = staticmethod(joint_goal)


class SlotAccuracy(_DialogueStateMetric):
    """Share of annotated SpokenWOZ slots read from the answer with their value (AU-Harness's reading)."""

    name = "slot_accuracy"
    compare = staticmethod(slot_accuracy)


class SlotF1(_DialogueStateMetric):
    """F1 of the (domain, slot, value) triples read from the answer against the annotated ones (AU-Harness)."""

    name = "slot_f1"
    compare = staticmethod(slot_f1)

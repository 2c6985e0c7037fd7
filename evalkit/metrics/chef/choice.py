"""ChEF's multiple-choice and yes/no answers: ``chef_vqa_accuracy`` (ChEF's VQA) and ``mme_accuracy`` (MMEVQA).

Written from OpenGVLab/LAMM ``src/ChEF/metric/vqa.py`` (``Answer_Extractor``, ``VQA``, ``MMEVQA``) at commit
ea571363883ceba58a0f724ef197ed7205e07465 and checked against tables from running it
(tests/fixtures/references/chef_choice.json).

ChEF reads an option letter from a free answer in three tries, and the first that finds exactly one wins:
(1) the text before any "###" and after the last "Assistant:" is searched for a capital letter followed by a
period (the first, anywhere: "I think B." gives B, and so does "... the U.S." give U), else for "(" and a
capital; (2) the answer's whitespace-separated words are searched for a bare letter A-G (a lone "A" counts only
in answers of fewer than three words, "A" being an article), then for a letter wrapped as "(B)", "B.", "B,",
"B:", "B)", ":B" and the like; (3) an answer equal to an option, or containing exactly one option's text
(lower-cased), names that option. An answer naming none or several is wrong.

MME's yes/no reading: an answer that is exactly "yes" or "no" (any case) is that; otherwise the answer cleaned
as ChEF cleans answers must contain exactly one of the substrings "yes" and "no" ("I know" contains "no"; "not
sure" is "no"), else it is neither.
"""

from __future__ import annotations

import re
from typing import Any

from evalkit.data.sample import Sample
from evalkit.failures import FailureReason
from evalkit.metrics.base import Metric, SampleScore, check_options, reference_strings
from evalkit.metrics.chef.reading import chef_clean
from evalkit.metrics.choice.choice import resolve_reference

#: the option letters ChEF's extractor knows
CHOICE_LETTERS = "ABCDEFG"
#: (prefix, suffix) wrappings of a letter ChEF tries in order, after a bare letter
_WRAPPINGS = (
    ("(", ")"),
    ("(", ")."),
    ("", "."),
    ("", ","),
    ("", ":"),
    ("", ")"),
    ("", ")."),
    (":", ""),
    (":", ","),
    (":", "."),
    (":", ")"),
    (":", ")."),
)
_LETTER_PERIOD = re.compile(r"([A-Z]\.)")
_OPEN_LETTER = re.compile(r"\([A-Z]")


def _preprocess(answer: str) -> str:
    text = answer.split("###")[0].split("Assistant:")[-1].strip().strip()
    found = _LETTER_PERIOD.findall(text)
    if found:
        return "(" + found[0][:-1] + ")"
    found = _OPEN_LETTER.findall(text)
    if found:
        return found[0] + ")"
    return text


def _letter_among(words: list[str], prefix: str = "", suffix: str = "") -> list[str]:
    return [c for c in CHOICE_LETTERS if prefix + c + suffix in words]


def _infer_option(answer: str) -> str | None:
    words = [w.strip() for w in answer.split()]
    bare = _letter_among(words)
    if len(bare) == 1 and ("A" not in words or len(words) < 3):
        return bare[0]
    for prefix, suffix in _WRAPPINGS:
        wrapped = _letter_among(words, prefix, suffix)
        if len(wrapped) == 1:
            return wrapped[0]
    return None


def _infer_text(answer: str, choices: list[str]) -> str | None:
    lowered = answer.lower()
    named = [CHOICE_LETTERS[i] for i, choice in enumerate(choices[: len(CHOICE_LETTERS)]) if choice.lower() in lowered]
    return named[0] if len(named) == 1 else None


def chef_option(answer: str, choices: list[str], content_only: bool = False) -> str | None:
    """The option letter ChEF reads from ``answer`` (Answer_Extractor.fetch_answer), or None."""
    if not content_only:
        answer = _preprocess(answer)
        letter = _infer_option(answer)
        if letter:
            return letter
    if answer in choices:
        return CHOICE_LETTERS[choices.index(answer)]
    return _infer_text(answer, choices)


def mme_reading(answer: str) -> str:
    """ChEF's MME reading of an answer: "yes", "no" or "other"."""
    lowered = answer.lower()
    if lowered in ("yes", "no"):
        return lowered
    cleaned = chef_clean(lowered)
    found = [word for word in ("yes", "no") if word in cleaned]
    return found[0] if len(found) == 1 else "other"


class ChefVqaAccuracy(Metric):
    """ChEF VQA ACC (ScienceQA, SEED-Bench): 1 when the option letter ChEF reads from the answer is the right one."""

    name = "chef_vqa_accuracy"
    bounds = (0.0, 1.0)

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ("content_only", "index_base"))
        super().__init__(language, **options)
        self.content_only = bool(options.get("content_only", False))
        self.index_base = int(options.get("index_base", 0))

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        choices = [str(c) for c in sample.meta.get("choices") or []]
        if not choices:
            return SampleScore(None, failure=FailureReason.NO_CHOICES)
        correct = resolve_reference(sample.reference, choices, self.index_base)
        if len(correct) != 1:
            return SampleScore(None, failure=FailureReason.UNRESOLVABLE_REFERENCE)
        letter = chef_option(prediction or "", choices, self.content_only)
        value = float(letter is not None and CHOICE_LETTERS.find(letter) in correct)
        return SampleScore(value, (value, 1.0), details={"option": letter, "matched": letter is not None})

    def describe(self) -> dict[str, Any]:
        return {"reading": "ChEF Answer_Extractor", "content_only": self.content_only}


class MmeAccuracy(Metric):
    """ChEF MMEVQA overall: 1 when ChEF's yes/no reading of the answer is the label (per question, pooled)."""

    name = "mme_accuracy"
    bounds = (0.0, 1.0)

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ())
        super().__init__(language, **options)

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        labels = reference_strings(sample.reference)
        if not labels:
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        reading = mme_reading(prediction or "")
        value = float(reading == labels[0].lower())
        return SampleScore(value, (value, 1.0), details={"reading": reading})


#: ChEF's LAMM_VQA readings, tried in this order: "The answer is (B)", "ANSWER: B", then any "(B)"
_LAMM_ANSWER_IS = re.compile(r"The answer is \(?[A-E]\)?\W|the answer is \(?[A-E]\)?\W")
_LAMM_ANSWER_COLON = re.compile(r"ANSWER: [A-E]")
_LAMM_PARENTHESISED = re.compile(r"\([A-E]\)")


def lamm_vqa_right(answer: str, choices: list[str], correct: int) -> tuple[bool, str]:
    """ChEF's LAMM_VQA verdict on one answer, and which reading decided it.

    The first reading that finds anything decides: every "The answer is X" (or every "(X)") must hold the right
    letter; "ANSWER: X" is read from its first match; with no letter found, the answer must contain the right
    option's text and no other option's (lower-cased substrings).
    """
    letter = CHOICE_LETTERS[correct] if 0 <= correct < len(CHOICE_LETTERS) else ""
    found = _LAMM_ANSWER_IS.findall(answer)
    if found:
        return all(letter in match for match in found), "the answer is"
    found = _LAMM_ANSWER_COLON.findall(answer)
    if found:
        return found[0][-1] == letter, "ANSWER:"
    found = _LAMM_PARENTHESISED.findall(answer)
    if found:
        return all(letter in match for match in found), "(letter)"
    text = answer.lower()
    if correct >= len(choices) or choices[correct].lower() not in text:
        return False, "option text"
    others = (choice for index, choice in enumerate(choices) if index != correct)
    return not any(choice.lower() in text for choice in others), "option text"


class LammVqaAccuracy(Metric):
    """ChEF LAMM_VQA (ScienceQA_LAMM, AI2D, ScanQA): ChEF's letter patterns, else the right option's text alone."""

    name = "lamm_vqa_accuracy"
    bounds = (0.0, 1.0)

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ("index_base",))
        super().__init__(language, **options)
        self.index_base = int(options.get("index_base", 0))

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        choices = [str(c) for c in sample.meta.get("choices") or []]
        if not choices:
            return SampleScore(None, failure=FailureReason.NO_CHOICES)
        correct = resolve_reference(sample.reference, choices, self.index_base)
        if len(correct) != 1:
            return SampleScore(None, failure=FailureReason.UNRESOLVABLE_REFERENCE)
        right, reading = lamm_vqa_right(prediction or "", choices, next(iter(correct)))
        value = float(right)
        return SampleScore(value, (value, 1.0), details={"reading": reading})

    def describe(self) -> dict[str, Any]:
        return {"reading": "ChEF LAMM_VQA"}

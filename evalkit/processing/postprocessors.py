"""Postprocessors turn a raw model answer into the prediction a metric scores."""

from __future__ import annotations

import json
import re

from evalkit.registry import Registry

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_OPEN_THINK = re.compile(r"^.*?</think>", re.DOTALL | re.IGNORECASE)


class Postprocessor:
    def process(self, text: str) -> str:
        raise NotImplementedError


POSTPROCESSORS: Registry[type[Postprocessor]] = Registry(
    "postprocessor", builtin_modules=("evalkit.processing.postprocessors", "evalkit.processing.karma_answers")
)


def strip_thinking(text: str) -> str:
    """Drop reasoning blocks: complete <think>...</think> and a dangling prefix ending in </think>."""
    if "<" not in text:  # both patterns start or end with a tag: most answers hold none, and skip two scans
        return text
    text = _THINK.sub("", text)
    if "</think>" in text.lower():
        text = _OPEN_THINK.sub("", text)
    return text


@POSTPROCESSORS.register("GeneralPostprocessor", "general")
class GeneralPostprocessor(Postprocessor):
    """Strip reasoning blocks and surrounding whitespace; the metric normalizes the rest."""

    def process(self, text: str) -> str:
        return strip_thinking(text).strip()


@POSTPROCESSORS.register("KarmaMedicalHistoryPostprocessor", "karma_medical_history")
class KarmaMedicalHistoryPostprocessor(Postprocessor):
    """The ``six_month_overview`` of a JSON answer, as KARMA reads its history summaries; else the answer.

    KARMA removes the Markdown code fences, reads the rest as JSON and
    scores the field's text when it is non-empty, otherwise the whole
    de-fenced answer. Reasoning blocks are dropped first (KARMA leaves them,
    and its JSON reading then fails on them).
    """

    def process(self, text: str) -> str:
        answer = strip_thinking(text).replace("```json", "").replace("```", "")
        try:
            parsed = json.loads(answer)
        except ValueError:
            return answer
        overview = parsed.get("six_month_overview") if isinstance(parsed, dict) else None
        return overview if overview and isinstance(overview, str) else answer


# -- KARMA's multiple-choice answer readings ------------------------------------------------------------------------

_FINAL = "Final Answer:"
_EDGES = " \t\r\n*_`~"  # markdown emphasis and whitespace KARMA strips around the letter
_WRAPPERS = {"(": ")", "[": "]"}
_LETTERS = "ABCDEFGHIJ"  # a letter past the set's options is wrong either way, so one alphabet serves every set
_LEADING_LETTER = re.compile(rf"^([{_LETTERS}])[\.\)\:\s]", re.IGNORECASE)


@POSTPROCESSORS.register("KarmaWrappedMcqPostprocessor", "karma_wrapped_mcq")
class KarmaWrappedMcqPostprocessor(Postprocessor):
    """The option letter as KARMA's MedMCQA, MedQA and MMLU sets read it (``extract_wrapped_mcq_answer``).

    After the first "Final Answer:" (else the whole answer): the first line
    that is not empty once markdown emphasis is stripped, one more leading
    "Final Answer:" dropped, one pair of brackets unwrapped; a lone letter, or
    a letter followed by ".", ")", ":" or a space, is the answer. Anything
    else is an empty prediction, which scores wrong as in KARMA. Reasoning
    blocks are dropped first (KARMA's model wrappers drop them before reading).
    """

    def process(self, text: str) -> str:
        answer = strip_thinking(text)
        answer = answer.split(_FINAL, 1)[1].strip() if _FINAL in answer else answer.strip()
        candidate = ""
        for line in answer.splitlines():
            candidate = line.strip(_EDGES)
            while candidate.startswith(_FINAL):
                candidate = candidate[len(_FINAL) :].strip(_EDGES)
            if candidate:
                break
        closer = _WRAPPERS.get(candidate[:1])
        if closer and candidate.endswith(closer):
            candidate = candidate[1:-1].strip(_EDGES)
        if len(candidate) == 1 and candidate.upper() in _LETTERS:
            return candidate.upper()
        found = _LEADING_LETTER.match(candidate)
        return found.group(1).upper() if found else ""


@POSTPROCESSORS.register("KarmaFirstLetterPostprocessor", "karma_first_letter")
class KarmaFirstLetterPostprocessor(Postprocessor):
    """The option letter as KARMA's Indian-drug and NFI sets read it: the first character after "Final Answer:".

    The text after the first "Final Answer:" (else the whole answer), stripped
    of spaces, brackets and asterisks at its ends; its first character, when
    it is a letter A-E, is the answer, else the prediction is empty. Reasoning
    blocks are dropped first.
    """

    def process(self, text: str) -> str:
        answer = strip_thinking(text)
        raw = answer.split(_FINAL)[1].strip() if _FINAL in answer else answer.strip()
        raw = raw.strip("()*")
        return raw[0].upper() if raw and raw[0].upper() in "ABCDE" else ""


@POSTPROCESSORS.register("KarmaFinalAnswerPostprocessor", "karma_final_answer")
class KarmaFinalAnswerPostprocessor(Postprocessor):
    """The letter after "Final Answer:" as KARMA's MedXpertQA text set reads and scores it.

    KARMA takes the text after the first "Final Answer:", unwraps it when it
    is wholly in parentheses, and compares it, lower-cased, with the label:
    only a lone letter can ever match, so anything else (no marker, "(C)
    because", "C.") is an empty prediction here, which scores wrong as it
    does in KARMA. Reasoning blocks are dropped first.
    """

    def process(self, text: str) -> str:
        answer = strip_thinking(text)
        if _FINAL not in answer:
            return ""
        read = answer.split(_FINAL)[1].strip()
        if read.startswith("(") and read.endswith(")"):
            read = read[1:-1]
        return read.upper() if len(read) == 1 and read.isalpha() else ""


@POSTPROCESSORS.register("KarmaWholeAnswerPostprocessor", "karma_whole_answer")
class KarmaWholeAnswerPostprocessor(Postprocessor):
    """The whole answer, reasoning blocks included, stripped: what KARMA scores for MedCaseReasoning.

    Its diagnosis is read from the answer's ``<answer>`` block and its
    reasoning from the ``<think>`` block the prompt asks for, so dropping the
    reasoning (GeneralPostprocessor) would leave the recall judge nothing.
    """

    def process(self, text: str) -> str:
        return text.strip()


@POSTPROCESSORS.register("KarmaAmqaPostprocessor", "karma_amqa")
class KarmaAmqaPostprocessor(Postprocessor):
    """The option letter as KARMA's AMQA set reads it, upper-cased.

    For each of A-D in turn: the answer starts with it, or holds "(X)" or
    "X)"; failing all, the first of A-D found anywhere in the answer; failing
    that, its first character. Reasoning blocks are dropped first.
    """

    def process(self, text: str) -> str:
        answer = strip_thinking(text).strip().upper()
        for letter in "ABCD":
            if answer.startswith(letter) or f"({letter})" in answer or f"{letter})" in answer:
                return letter
        for letter in "ABCD":
            if letter in answer:
                return letter
        return answer[:1]

"""How KARMA reads the answers of AfriMed-QA's MCQ set, the medical calculator set and its local NFI set.

Each function follows the ``extract_prediction`` of the KARMA dataset class
named in its docstring (eka-care/KARMA-OpenMedEvalKit at fe15101), so that the
prediction scored is the one KARMA scores. Reasoning blocks are dropped first,
as for evalkit's other KARMA readings (KARMA's model clients drop them).
"""

from __future__ import annotations

import json
import re

from evalkit.processing.postprocessors import POSTPROCESSORS, Postprocessor, strip_thinking

_MCQ_LETTERS = "ABCDE"
_FINAL_ANSWER = re.compile(r"final\s*answer\s*[:\-]?\s*[([]?\s*([a-eA-E])\s*[)\]]?", re.IGNORECASE)
_ANSWER_IS = re.compile(r"answer\s*(?:is|:)\s*\(?([a-eA-E])\)?", re.IGNORECASE)
_LETTER_AT_END = re.compile(r"([a-eA-E])\s*[).?!]?\s*$")
_LONE_LETTER = re.compile(r"\b([a-eA-E])\b")


def afrimedqa_mcq_letter(response: str) -> str:
    """AfriMedQAMCQDataset.extract_prediction: the first reading that finds a letter A-E, else the whole answer.

    In order: "Final Answer" followed by a letter; "answer is X" / "answer: X";
    a last line of at most five characters that is one letter once non-letters
    go; a letter (and one of ``).?!``) ending the answer; a lone letter in its
    last 50 characters. Failing all, KARMA scores the stripped answer itself.
    """
    found = _FINAL_ANSWER.search(response) or _ANSWER_IS.search(response)
    if found:
        return found.group(1).upper()
    last_line = response.strip().split("\n")[-1].strip()
    if len(last_line) <= 5:
        letters = re.sub(r"[^a-zA-Z]", "", last_line).upper()
        if len(letters) == 1 and letters in _MCQ_LETTERS:
            return letters
    found = _LETTER_AT_END.search(response.strip()) or _LONE_LETTER.search(response.strip()[-50:])
    return found.group(1).upper() if found else response.strip()


@POSTPROCESSORS.register("KarmaAfrimedqaMcqPostprocessor", "karma_afrimedqa_mcq")
class KarmaAfrimedqaMcqPostprocessor(Postprocessor):
    """The option letter as KARMA's AfriMed-QA MCQ set reads it (AfriMedQAMCQDataset.extract_prediction)."""

    def process(self, text: str) -> str:
        return afrimedqa_mcq_letter(strip_thinking(text))


_JSON_OBJECT = re.compile(r"\{[^{}]*\}")
_STANDALONE_NUMBER = re.compile(r"(?<!\w)-?\d+\.?\d*(?!\w)")


def calculator_value(response: str) -> str:
    """CalculatorEvalDataset.extract_prediction: the last flat JSON object (re-serialised), else the whole answer
    as a float, else the last number standing alone (not glued to letters), else ""."""
    stripped = response.strip()
    for match in reversed(list(_JSON_OBJECT.finditer(stripped))):
        try:
            return json.dumps(json.loads(match.group()))
        except json.JSONDecodeError:
            continue
    try:
        return str(float(stripped))
    except ValueError:
        pass
    numbers = _STANDALONE_NUMBER.findall(stripped)
    return numbers[-1] if numbers else ""


@POSTPROCESSORS.register("KarmaCalculatorPostprocessor", "karma_calculator")
class KarmaCalculatorPostprocessor(Postprocessor):
    """The value KARMA's medical calculator set reads from an answer (CalculatorEvalDataset.extract_prediction)."""

    def process(self, text: str) -> str:
        return calculator_value(strip_thinking(text))


@POSTPROCESSORS.register("KarmaFinalAnswerTextPostprocessor", "karma_final_answer_text")
class KarmaFinalAnswerTextPostprocessor(Postprocessor):
    """What follows "Final Answer:" as KARMA's nfi_mcqa reads it: stripped, unwrapped from one pair of
    parentheses that encloses it all; "" when the marker is missing (NFIMCQADataset.extract_prediction).

    Unlike the MedXpertQA reading, nothing is cut to one letter: KARMA compares
    the whole text with the reference.
    """

    def process(self, text: str) -> str:
        answer = strip_thinking(text)
        if "Final Answer:" not in answer:
            return ""
        read = answer.split("Final Answer:")[1].strip()
        return read[1:-1] if read.startswith("(") and read.endswith(")") else read


@POSTPROCESSORS.register("KarmaAfterFinalAnswerPostprocessor", "karma_after_final_answer")
class KarmaAfterFinalAnswerPostprocessor(Postprocessor):
    """What follows the first "Final Answer:", stripped and nothing more; "" when the marker is missing
    (KARMA's SLAKEDataset.extract_prediction: no bracket is unwrapped, so "(yes)" stays as it is).
    """

    def process(self, text: str) -> str:
        answer = strip_thinking(text)
        return answer.split("Final Answer:")[1].strip() if "Final Answer:" in answer else ""

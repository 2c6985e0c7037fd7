"""Multiple-choice accuracy with answer extraction from free-form responses.

Options are ``sample.meta["choices"]`` (a list of option texts, lettered A, B,
C, ... in order, or a {letter: text} mapping such as MedQA's ``Options``);
without it only letters can be read, A-Z. The reference may
be a letter ("B" or "b"; a letter that names an option wins over an option
whose text is that letter), an index (an ``int``, or a string of digits; 0-based
unless the ``index_base: 1`` option says otherwise), or an option's text; a
list of such values means any of them is correct. A reference that resolves to
no option is the dataset's fault: the sample fails ("unresolvable reference")
instead of being scored.

Reading the response, the first rule that yields an answer wins:

1. the whole response, stripped of whitespace, punctuation, brackets and
   markdown, is one letter of an option: "B", "(b)", "B.", "**B**";
2. the whole response is an option's text (case- and punctuation-insensitive);
3. an explicit answer statement, the **last** one when there are several
   ("The answer is (B)", "Answer: b", "final answer: **C**", "Option D is
   correct", "I choose A"); a lower-case "a" or "i" counts only when bracketed
   or followed by punctuation or the end, so "the answer is a dog" is no
   answer while "answer: b because ..." is B;
4. a marked letter: "(B)", "[B]", "**B**", or an upper-case "B." / "B)" / "B:"
   standing alone; several distinct ones -> the **last** (reasoning usually
   ends with the conclusion);
5. a bare upper-case letter token ("I'd go with C"), excluding "A" and "I"
   followed by a lower-case word (the article and the pronoun); several
   distinct ones -> the last;
6. exactly one option's text appears in the response as whole words (options
   contained in a longer matching option are ignored, so "dark red" beats
   "red"); two or more unrelated options -> no answer.

No answer scores 0 (the model did not choose), it is not a failure. Letters
outside the options (E with four options) are ignored at every step.
"""

from __future__ import annotations

import ast
import re
import string
import unicodedata
from typing import Any

from evalkit.data.sample import Sample
from evalkit.failures import FailureReason
from evalkit.metrics.base import Metric, SampleScore, check_options

LETTERS = string.ascii_uppercase

_DECORATION = " \t\r\n*_`\"'()[]{}.,:;!?<>"

_EXPLICIT = re.compile(
    r"(?<![A-Za-z])(?:final\s+answer|correct\s+answer|best\s+answer|answer|correct\s+option|correct\s+choice"
    r"|best\s+option|best\s+choice|option|choice|i\s+choose|i\s+pick|i\s+select|i\s+would\s+choose|i'd\s+choose)"
    r"(?![A-Za-z])"
    r"\s*(?:is|would\s+be|should\s+be|will\s+be|must\s+be)?\s*(?:[:=\-])?\s*"
    r"(?:(?:option|choice|letter)(?![A-Za-z]))?\s*:?\s*"
    r"(?P<open>[\(\[]|\*\*)?\s*(?P<letter>[A-Za-z])(?P<close>[\)\]]|\*\*)?(?P<after>.?)",
    re.IGNORECASE | re.DOTALL,
)
_MARKED = re.compile(
    r"(?<![A-Za-z0-9])[\(\[](?P<a>[A-Za-z])[\)\]]"
    r"|\*\*(?P<b>[A-Za-z])\*\*"
    r"|(?:^|(?<=\s))(?P<c>[A-Z])[\.\):](?=\s|$)",
)
_BARE = re.compile(r"(?<![A-Za-z0-9'’])(?P<letter>[A-Z])(?![A-Za-z0-9'’])(?P<rest>\s+[a-z])?")


def _text_form(text: str) -> str:
    """Case-, width- and punctuation-insensitive form for comparing option texts."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = "".join(" " if unicodedata.category(c)[0] in "PS" else c for c in text)
    return " ".join(text.split())


def _letter_index(letter: str, n_choices: int) -> int | None:
    index = LETTERS.find(letter.upper())
    return index if 0 <= index < n_choices else None


def extract_choice(response: str, choices: list[str] | None = None) -> int | None:
    """The 0-based option index a free-form response picks, or None (rules in the module docstring)."""
    if not response:
        return None
    n = min(len(choices), len(LETTERS)) if choices else len(LETTERS)
    text = unicodedata.normalize("NFKC", response)

    core = text.strip(_DECORATION)
    if len(core) == 1 and core.isalpha():
        index = _letter_index(core, n)
        if index is not None:
            return index

    forms = [_text_form(c) for c in choices] if choices else []
    whole = _text_form(text)
    if whole and whole in forms:
        return forms.index(whole)

    explicit = None
    for m in _EXPLICIT.finditer(text):
        letter, after = m.group("letter"), m.group("after")
        if after.isalnum():
            continue
        if letter.islower() and not (
            m.group("open")
            or m.group("close")
            or after in ("", ".", ",", ";", ":", "!")
            or (after.isspace() and letter not in "ai")
        ):
            continue
        index = _letter_index(letter, n)
        if index is not None:
            explicit = index
    if explicit is not None:
        return explicit

    marked = [_letter_index(m.group("a") or m.group("b") or m.group("c"), n) for m in _MARKED.finditer(text)]
    marked = [i for i in marked if i is not None]
    if marked:
        return marked[-1]

    bare = []
    for m in _BARE.finditer(text):
        if m.group("letter") in "AI" and m.group("rest"):
            continue
        index = _letter_index(m.group("letter"), n)
        if index is not None:
            bare.append(index)
    if bare:
        return bare[-1]

    if forms:
        padded = f" {whole} "
        found = [i for i, f in enumerate(forms) if f and f" {f} " in padded]
        found = [i for i in found if not any(j != i and f" {forms[i]} " in f" {forms[j]} " for j in found)]
        if len(found) == 1:
            return found[0]
    return None


def resolve_reference(reference: Any, choices: list[str] | None, index_base: int = 0) -> set[int]:
    """The set of correct 0-based option indices for a reference value (empty when unresolvable)."""
    n = min(len(choices), len(LETTERS)) if choices else len(LETTERS)
    total = len(choices) if choices else None
    if isinstance(reference, (list, tuple, set)):
        out: set[int] = set()
        for item in reference:
            out |= resolve_reference(item, choices, index_base)
        return out
    if isinstance(reference, bool) or reference is None:
        return set()
    if isinstance(reference, int):
        index = reference - index_base
        return {index} if index >= 0 and (total is None or index < total) else set()
    value = str(reference).strip()
    if len(value) == 1 and value.isalpha():
        letter = _letter_index(value, n)
        if letter is not None:
            return {letter}
    if value.isdigit():
        return resolve_reference(int(value), choices, index_base)
    if choices:
        form = _text_form(value)
        return {i for i, c in enumerate(choices) if _text_form(c) == form}
    stripped = value.strip(_DECORATION)
    if len(stripped) == 1 and stripped.isalpha():
        return resolve_reference(stripped, choices, index_base)
    return set()


def _option_columns(meta: dict[str, Any]) -> list[str]:
    """``option_a``, ``option_b``, ... from the sample's meta, in order, up to the first absent, empty or "nan" one."""
    options = []
    for letter in LETTERS.lower():
        value = meta.get(f"option_{letter}")
        if value is None or (isinstance(value, str) and value.strip().lower() in ("", "nan")):  # MMBench's "nan"
            break
        options.append(str(value))
    return options


class MultipleChoiceAccuracy(Metric):
    """1 when the option extracted from the response is a correct one, else 0."""

    bounds = (0.0, 1.0)

    name = "mcq_accuracy"

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ("index_base",))
        super().__init__(language, **options)
        self.index_base = int(options.get("index_base", 0))
        if self.index_base not in (0, 1):
            raise ValueError("mcq_accuracy: index_base must be 0 or 1")

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        choices = sample.meta.get("choices")
        if choices is None:  # one column per option, mapped to option_a, option_b, ... (MedMCQA's opa..opd)
            choices = _option_columns(sample.meta) or None
        if isinstance(choices, str):  # MMMU keeps its options as the text of a Python list
            try:
                choices = ast.literal_eval(choices)
            except (ValueError, SyntaxError):
                choices = None
        if isinstance(choices, dict):  # {"A": text, "B": text}: lettered in key order (MedQA's Options)
            choices = [c for c in choices.values() if c is not None]
        if choices is not None:
            choices = [str(c) for c in choices]
        correct = resolve_reference(sample.reference, choices, self.index_base)
        if not correct:
            return SampleScore(None, failure=FailureReason.UNRESOLVABLE_REFERENCE)
        picked = extract_choice(prediction or "", choices)
        value = 1.0 if picked in correct else 0.0
        return SampleScore(
            value,
            (value, 1.0),
            details={
                "extracted": None if picked is None else LETTERS[picked],
                "correct": sorted(LETTERS[i] for i in correct if i < len(LETTERS)),
            },
        )

    def describe(self) -> dict[str, Any]:
        return {"extraction": "evalkit-mcq-v1", "index_base": self.index_base}

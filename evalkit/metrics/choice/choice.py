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

The letter rules 3-5 pick one occurrence of a letter; when that letter is
joined to another option's letter by nothing but a connector ("A or B",
"either A or B", "between B and C", "A and/or B", "A, B", "A/B", "both A and
C", "neither A nor B", also after the first option's text: "C) Berlin or D)
Madrid") the response is a **hedge**: no answer, and the details say so
("a hedge between A, B"). A hedge names several options without choosing one,
so it earns no credit, whichever of them is right; a hedge that is resolved
later ("between A and B, I'd go with B") is an answer.

No answer scores 0 (the model did not choose), it is not a failure. Letters
outside the options (E with four options) are ignored at every step. The
details of each sample record the letter read and the rule that read it
(``reading``).

Reference. These rules are evalkit's own: no reference parser both reads the
forms models write and refuses hedges. They are compared with lmms-eval's MMMU
parser (EvolvingLMMs-Lab/lmms-eval, ``lmms_eval/tasks/_task_utils/mmmu_mcq_utils.py``
``parse_mmmu_multi_choice_response``, which ``lmms_eval/tasks/mmmu/utils.py``'s
``parse_multi_choice_response`` calls; commit 75571cfe0fa3) on the table of
cases in ``tests/fixtures/references/mcq_accuracy.json``, produced by running
that function: they agree where lmms-eval reads a letter the way a reader
would, and differ by design in these classes (each case in the table names its
class):

- nothing can be read: lmms-eval picks a random option, evalkit scores 0;
- a hedge: lmms-eval takes the option named last, evalkit reads no answer;
- lower-case letters ("b", "Answer: (b)"): lmms-eval reads upper-case only;
- markdown and punctuation ("**C**", "B)", "B: Paris"): lmms-eval sees a
  letter only as "(B)", "B " or "B.";
- full-width forms: evalkit reads the response after NFKC;
- the article and the pronoun: lmms-eval reads any "A " or "I " as a letter;
- option texts: lmms-eval looks for them only in responses of more than five
  words, as substrings, the one found last winning; evalkit reads a response
  that is an option's text, or exactly one option named as whole words.

The corpus value is the mean of the per-sample 0/1 scores, as lmms-eval's.
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


#: a letter standing alone ("B", "(B)", "**B**", "b"), a candidate member of a hedge
_LETTER = re.compile(r"(?<![A-Za-z0-9'’])(?P<letter>[A-Za-z])(?![A-Za-z0-9'’])(?P<rest>\s+[a-z]+|\.[A-Za-z])?")
#: what joins the letters of a hedge: "A or B", "A, B", "A and/or B", "A/B", "A & B", "B and C", "A nor B"
_HEDGE_GAP = re.compile(
    r"[\s()\[\]*.:]*(?:and\s*/\s*or|,\s*or|,\s*and|or|and|nor|,|/|&)"
    r"(?:\s+(?:maybe|perhaps|possibly|probably|even|also))?[\s()\[\]*]*(?:(?:option|choice)\s*)?[\s()\[\]*]*",
    re.IGNORECASE,
)
_CONNECTORS = ("or", "and", "nor")


def _joined(text: str, start: int, end: int, choices: list[str]) -> bool:
    """Whether only a connector separates two letters, after the first one's option text ("C) Berlin or D")."""
    gap = text[start:end]
    head = gap.lstrip(" \t()[]*.:")
    for choice in sorted(choices, key=len, reverse=True):
        words = choice.split()
        if words:
            written = re.match(r"\s+".join(map(re.escape, words)) + r"(?![\w])", head, re.IGNORECASE)
            if written:
                return _HEDGE_GAP.fullmatch(head, written.end()) is not None
    return _HEDGE_GAP.fullmatch(gap) is not None


def _hedge(text: str, position: int, n_choices: int, choices: list[str]) -> list[int]:
    """The distinct options named together with the letter at ``position`` ("A or B"), or [] when it stands alone.

    Letters are joined into one group when only a connector (or, and, and/or, nor,
    a comma, a slash, an ampersand) separates them; "A" and "I" before a word are
    the article and the pronoun, except before a connector ("A or B").
    """
    letters: list[tuple[int, int]] = []  # (start, end) of each letter that can be an option's
    for m in _LETTER.finditer(text):
        rest = m.group("rest")
        if rest and (rest.startswith(".") or (m.group("letter") in "AaIi" and rest.split()[0] not in _CONNECTORS)):
            continue
        letters.append((m.start("letter"), m.end("letter")))
    here = next((k for k, (start, _) in enumerate(letters) if start == position), None)
    if here is None:
        return []
    first = last = here
    while first > 0 and _joined(text, letters[first - 1][1], letters[first][0], choices):
        first -= 1
    while last + 1 < len(letters) and _joined(text, letters[last][1], letters[last + 1][0], choices):
        last += 1
    named = []
    for start, _ in letters[first : last + 1]:
        index = _letter_index(text[start], n_choices)
        if index is not None and index not in named:
            named.append(index)
    return named if len(named) > 1 else []


def read_choice(response: str, choices: list[str] | None = None) -> tuple[int | None, str]:
    """(the 0-based option index a free-form response picks or None, how it was read); rules in the module docstring."""
    if not response:
        return None, "empty response"
    n = min(len(choices), len(LETTERS)) if choices else len(LETTERS)
    text = unicodedata.normalize("NFKC", response)

    core = text.strip(_DECORATION)
    if len(core) == 1 and core.isalpha():
        index = _letter_index(core, n)
        if index is not None:
            return index, "the response is a letter"

    forms = [_text_form(c) for c in choices] if choices else []
    whole = _text_form(text)
    if whole and whole in forms:
        return forms.index(whole), "the response is an option's text"

    found: tuple[int, int, str] | None = None  # (index, position of its letter, rule)
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
            found = (index, m.start("letter"), "an answer statement")

    if found is None:
        for m in _MARKED.finditer(text):
            group = "a" if m.group("a") else "b" if m.group("b") else "c"
            index = _letter_index(m.group(group), n)
            if index is not None:
                found = (index, m.start(group), "a marked letter")

    if found is None:
        for m in _BARE.finditer(text):
            if m.group("letter") in "AI" and m.group("rest"):
                continue
            index = _letter_index(m.group("letter"), n)
            if index is not None:
                found = (index, m.start("letter"), "a letter")

    if found is not None:
        index, position, rule = found
        named = _hedge(text, position, n, choices or [])
        if named:
            return None, "a hedge between " + ", ".join(LETTERS[i] for i in named)
        return index, rule

    if forms:
        padded = f" {whole} "
        within = [i for i, f in enumerate(forms) if f and f" {f} " in padded]
        within = [i for i in within if not any(j != i and f" {forms[i]} " in f" {forms[j]} " for j in within)]
        if len(within) == 1:
            return within[0], "an option's text in the response"
        if len(within) > 1:
            return None, "the texts of several options"
    return None, "no option found"


def extract_choice(response: str, choices: list[str] | None = None) -> int | None:
    """The 0-based option index a free-form response picks, or None (rules in the module docstring)."""
    return read_choice(response, choices)[0]


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


def option_columns(meta: dict[str, Any]) -> list[str]:
    """``option_a``, ``option_b``, ... from the sample's meta, in order, up to the first absent, empty or "nan" one."""
    options = []
    for letter in LETTERS.lower():
        value = meta.get(f"option_{letter}")
        if value is None or (isinstance(value, str) and value.strip().lower() in ("", "nan")):  # MMBench's "nan"
            break
        options.append(str(value))
    return options


class MultipleChoiceAccuracy(Metric):
    """1 when the one option the response chooses is a correct one; else 0 (also a hedge or no answer)."""

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
            choices = option_columns(sample.meta) or None
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
        picked, reading = read_choice(prediction or "", choices)
        value = 1.0 if picked in correct else 0.0
        return SampleScore(
            value,
            (value, 1.0),
            details={
                "extracted": None if picked is None else LETTERS[picked],
                "correct": sorted(LETTERS[i] for i in correct if i < len(LETTERS)),
                "reading": reading,
            },
        )

    def describe(self) -> dict[str, Any]:
        return {"extraction": "evalkit-mcq-v2", "index_base": self.index_base}

"""KARMA's ASR semantic metrics: semantic WER, semantic CER and entity (keyword) WER.

Reference: Eka Care's KARMA (github.com/eka-care/KARMA-OpenMedEvalKit, commit
fe151014e7c6fefcafb5fa9fcf0abcbf276f1359), the metric registered as
``asr_semantic_metric`` (``karma/metrics/asr/asr_semantic_metrics.py``,
``ASRSemanticMetrics.evaluate``), which aligns with ``BaseCERAligner.align_words_dp``
(``karma/metrics/asr/base_aligner.py``) and the language rules of
``EnglishCERAligner`` / ``HindiCERAligner`` (``karma/metrics/asr/lang/``). This
module is written from that definition; the tests compare it with values
produced by running KARMA's code (tests/fixtures/references/).

Why a different alignment from WER: a transcript that writes ``सिरदर्द`` for
``सिर दर्द``, ``1000 milligrams`` for ``1000mg`` or a near spelling should not
lose whole words. KARMA therefore aligns word *groups*: one to three
reference words against one to eight answer words, scored by a character error
rate (the lowest of three: plain edit distance without spaces, edit distance
of a spelling-folded form with numbers and symbols written as words, and a
substring/prefix-aware rate), plus an exact match of a reference token's
spoken expansion (``7.5mg`` -> ``seven point five milligram``). The best path
under KARMA's bonuses is kept; a group is a match when its similarity
(1 - CER) is at least 0.95, else one substitution, however many words it
spans. Deletions and insertions occur only once one side is used up (KARMA's
dynamic programme has no other gap move).

Per sample: WER = (substituted groups + deleted words + inserted words) /
max(reference words, 1); CER = Σ group CER × group reference characters /
Σ group reference characters over groups with words on both sides (deleted
words add nothing: KARMA leaves them out), 0 when there are none. The corpus
values pool the same counts over the samples (KARMA's ``DatasetMetrics``).
KARMA itself reports one rounded figure for a dataset (``round(x, 3)``);
evalkit reports it unrounded, with a bootstrap CI for the same pooled ratio.

Entity WER (KARMA's keyword WER, ``compute_kw_wer_from_sem_alignment``):
keyword words are the words of the reference at each annotated entity's
character offsets (KARMA's annotation ``[text, category, [[start, end], ...]]``,
given as a Python-literal string), lowercased; every alignment group of one
reference word that is a keyword counts: match, substitution or deletion
(insertions never count). KARMA takes the keyword set of the whole dataset
and counts those words in every sentence. A streaming engine scores each
sample before it has seen the others, so by default a sample counts the
keywords of its own annotations; the corpus value equals KARMA's whenever no
sample contains (as a one-word group) a keyword that only another sample
tags. The option ``entity_words`` gives the dataset-wide list up front (words
or entity texts, split on spaces): with the union of the dataset's keywords
there the corpus equals KARMA's exactly.

Known differences from KARMA (also in evalkit/metrics/references.py):

- values are not rounded (KARMA prints ``round(x, 3)``);
- KARMA has aligners for English and Hindi only and raises for any other
  language; evalkit refuses it with a config error (no language: English,
  KARMA's benchmark default). Spelling folding (nukta, chandrabindu) is not
  part of KARMA's metric: KARMA's dataset processors do it, here the
  ``processors`` option (``multilingual_text_processor``);
- an utterance KARMA's aligner raises on (English digits ``int()`` cannot
  read, e.g. ``²``) is skipped by KARMA and is a failed sample here (also left
  out of the corpus value);
- where two different spoken expansions of one token both match the answer
  word for word, KARMA takes the first in Python set order (which varies with
  ``PYTHONHASHSEED``); evalkit the first in the order they are generated;
- several references: the first is scored (KARMA takes one string);
- entity WER: the dataset-wide keyword list (above); KARMA reads only its
  annotation string and skips anything else, evalkit also reads the same
  structure unparsed and, beyond it, lists of entity texts, objects with
  ``text`` and objects of lists by type (the words of the texts); no keyword
  anywhere gives NaN (KARMA: none).

The alignment costs about 24 character-error-rate comparisons per pair of
word positions, as KARMA's does: a 100-word utterance takes a few seconds.
"""

from __future__ import annotations

import ast
import asyncio
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache, lru_cache
from itertools import product
from typing import Any, ClassVar

import numpy as np
from rapidfuzz.distance import Levenshtein

from evalkit.data.sample import Sample
from evalkit.errors import ConfigError
from evalkit.failures import FailureReason
from evalkit.languages import normalize_language, target_language
from evalkit.metrics.base import Metric, SampleScore, check_options, reference_strings

# -- language rules (KARMA's EnglishCERAligner and HindiCERAligner) ------------------------------------------

_EN_ONES = ("", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
_EN_DIGITS = ("zero", *_EN_ONES[1:])
_EN_TEENS = "ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen".split()  # noqa: SIM905
_EN_TENS = ("", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")

#: symbol -> the words a speaker may say for it, the first being the one written by the normaliser
_EN_SYMBOLS: dict[str, tuple[str, ...]] = {
    ".": ("dot", "point", "period", "full stop"),
    "/": ("slash", "over", "by", "or", "per", "divided by"),
    "-": ("dash", "hyphen", "minus", "negative"),
    "+": ("plus", "add", "positive", "and"),
    "%": ("percent", "percentage", "per cent"),
    "*": ("star", "asterisk", "times", "multiply"),
    "=": ("equals", "equal", "is", "equal to"),
    "&": ("and", "ampersand"),
    "@": ("at", "at sign"),
    "#": ("hash", "pound", "number", "hashtag"),
    "$": ("dollar", "dollars"),
    "€": ("euro", "euros"),
    "£": ("pound", "pounds"),
    "¥": ("yen",),
    "°": ("degree", "degrees"),
    "™": ("trademark",),
    "©": ("copyright",),
    "®": ("registered",),
}
#: unit abbreviation -> its spoken forms (the first is the one expansions write)
_EN_UNITS: dict[str, tuple[str, ...]] = {
    "mm": ("millimeter", "millimeters", "millimetre", "millimetres"),
    "cm": ("centimeter", "centimeters", "centimetre", "centimetres"),
    "m": ("meter", "meters", "metre", "metres"),
    "km": ("kilometer", "kilometers", "kilometre", "kilometres"),
    "g": ("gram", "grams", "gramme", "grammes"),
    "kg": ("kilogram", "kilograms", "kilogramme", "kilogrammes"),
    "mg": ("milligram", "milligrams"),
    "ml": ("milliliter", "milliliters", "millilitre", "millilitres"),
    "l": ("liter", "liters", "litre", "litres"),
    "sec": ("second", "seconds"),
    "min": ("minute", "minutes"),
    "hr": ("hour", "hours"),
    "db": ("decibel", "decibels"),
    "hz": ("hertz",),
    "mv": ("millivolt", "millivolts"),
    "cc": ("cubic centimeter", "cubic centimeters"),
    "ppm": ("parts per million",),
    "rpm": ("revolutions per minute",),
}

_HI_ONES = ("", "एक", "दो", "तीन", "चार", "पांच", "छह", "सात", "आठ", "नौ")
_HI_DIGITS = ("शून्य", *_HI_ONES[1:])
_HI_TEENS = "दस ग्यारह बारह तेरह चौदह पंद्रह सोलह सत्रह अठारह उन्नीस".split()  # noqa: SIM905
_HI_TENS = ("", "", "बीस", "तीस", "चालीस", "पचास", "साठ", "सत्तर", "अस्सी", "नब्बे")
#: 21..99 without the multiples of ten, in order: Hindi names them with words of their own
_HI_COMPOUNDS = (  # noqa: SIM905
    "इक्कीस बाईस तेईस चौबीस पच्चीस छब्बीस सत्ताईस अट्ठाईस उनतीस इकतीस बत्तीस तैंतीस चौंतीस पैंतीस "
    "छत्तीस सैंतीस अड़तीस उनतालीस इकतालीस बयालीस तैंतालीस चवालीस पैंतालीस छियालीस सैंतालीस अड़तालीस उनचास इक्यावन "
    "बावन तिरपन चौवन पचपन छप्पन सत्तावन अट्ठावन उनसठ इकसठ बासठ तिरसठ चौंसठ पैंसठ छियासठ "
    "सड़सठ अड़सठ उनहत्तर इकहत्तर बहत्तर तिहत्तर चौहत्तर पचहत्तर छिहत्तर सतहत्तर अठहत्तर उन्यासी इक्यासी बयासी "
    "तिरासी चौरासी पचासी छियासी सत्तासी अठासी नवासी इक्यानवे बानवे तिरानवे चौरानवे पचानवे छियानवे सत्तानवे "
    "अठानवे निन्यानवे"
).split()
#: symbol -> the first of its English words, the one a text is folded with
_EN_SYMBOL_WORDS = {symbol: words[0] for symbol, words in _EN_SYMBOLS.items()}
_HI_COMPOUND = dict(zip([n for n in range(21, 100) if n % 10], _HI_COMPOUNDS, strict=True))
#: symbol -> the Hindi word KARMA writes for it
_HI_SYMBOLS = {
    ".": "बिंदु",
    "।": "दंड",
    "/": "या",
    "-": "डैश",
    "+": "प्लस",
    "%": "प्रतिशत",
    "*": "तारा",
    "=": "बराबर",
    "&": "और",
}
#: a unit's Hindi and English names (lowercase) -> its Hindi name; abbreviations are not read in Hindi
_HI_UNITS = {
    word: hindi
    for hindi, english in (
        ("मिलीमीटर", "millimeter"),
        ("सेंटीमीटर", "centimeter"),
        ("मिलीग्राम", "milligram"),
        ("किलोग्राम", "kilogram"),
        ("मिलीलीटर", "milliliter"),
        ("ग्राम", "gram"),
        ("किलोमीटर", "kilometer"),
        ("घंटा", "hour"),
        ("मिनट", "minute"),
        ("सेकंड", "second"),
        ("डेसिबल", "decibel"),
        ("हर्ट्ज़", "hertz"),
        ("मिलीवोल्ट", "millivolt"),
        ("सीसी", "cubic centimeter"),
        ("पीपीएम", "parts per million"),
        ("आरपीएम", "revolutions per minute"),
    )
    for word in (hindi, english)
}
_DEVANAGARI_DIGITS = str.maketrans("०१२३४५६७८९", "0123456789")

_ENGLISH_HYPHEN = re.compile(r"\b([a-zA-Z]+)-([a-zA-Z]+)\b")
_DIGIT = re.compile(r"\d")


def _is_devanagari(char: str) -> bool:
    return "\u0900" <= char <= "\u097f"


class _Rules:
    """One of KARMA's two languages: how a text is folded for comparison and how a token is spoken."""

    name: ClassVar[str] = ""

    def __init__(self) -> None:
        self.normalize = lru_cache(maxsize=1 << 16)(self._normalize)
        self.expand = lru_cache(maxsize=1 << 14)(self._expand)
        self.expansions = lru_cache(maxsize=1 << 14)(self._expansions)

    def _normalize(self, text: str) -> str:
        raise NotImplementedError

    def number(self, digits: str) -> list[str]:
        """A run of digits as this language's number words."""
        raise NotImplementedError

    def _fold(self, text: str, is_letter: Callable[[str], bool], symbols: Mapping[str, str]) -> str:
        """Digit runs as number words, symbols as their words, letters kept, spaces and anything else dropped.

        Both languages fold this way; they differ in what a letter is and in their symbol words.
        """
        parts: list[str] = []
        number = alpha = ""
        for char in text:
            if char.isdigit():
                if alpha:
                    parts.append(alpha)
                    alpha = ""
                number += char
            elif is_letter(char):
                if number:
                    parts += self.number(number)
                    number = ""
                alpha += char
            elif char in symbols or char == " ":
                if number:
                    parts += self.number(number)
                    number = ""
                if alpha:
                    parts.append(alpha)
                    alpha = ""
                if char != " ":
                    parts.append(symbols[char])
            # any other character is dropped and joins what is on either side of it
        if number:
            parts += self.number(number)
        return "".join([*parts, alpha])

    def _expand(self, token: str) -> str:
        raise NotImplementedError

    def _expansions(self, token: str) -> tuple[str, ...]:
        """Every spoken form of a token beyond the token itself (the primary one included)."""
        primary = self.expand(token)
        return (primary,) if primary != token else ()


class _EnglishRules(_Rules):
    name = "en"

    @staticmethod
    def _below_thousand(value: int, british: bool = False) -> list[str]:
        words: list[str] = []
        if value >= 100:
            words += [_EN_ONES[value // 100], "hundred"]
            value %= 100
            if british and value:
                words.append("and")
        if value >= 20:
            words.append(_EN_TENS[value // 10])
            value %= 10
        elif value >= 10:
            words.append(_EN_TEENS[value - 10])
            value = 0
        if value:
            words.append(_EN_ONES[value])
        return words

    def number(self, digits: str, british: bool = False) -> list[str]:
        """An integer's words; a string int() refuses is read digit by digit (KARMA raises on e.g. '²')."""
        if not digits:
            return ["zero"]
        try:
            value = int(digits)
        except ValueError:
            return [_EN_DIGITS[int(d)] for d in digits if d.isdigit()] or ["zero"]
        if value == 0:
            return ["zero"]
        if value < 0:
            return ["negative", *self.number(str(-value), british)]
        if value > 999_999_999_999:
            return [_EN_DIGITS[int(d)] for d in str(value)]
        words: list[str] = []
        for size, label in ((10**9, "billion"), (10**6, "million"), (10**3, "thousand")):
            if value >= size:
                words += [*self._below_thousand(value // size, british), label]
                value %= size
        if value:
            words += self._below_thousand(value, british)
        return words

    def decimal(self, text: str, british: bool = False) -> list[str]:
        """``12.05`` -> twelve point zero five (the fraction digit by digit)."""
        if not text:
            return ["zero"]
        if text.startswith("-"):
            return ["negative", *self.decimal(text[1:], british)]
        whole, _, fraction = text.partition(".")
        words = (["zero"] if whole == "0" else self.number(whole, british)) if whole else ["zero"]
        if fraction:
            words += ["point", *(_EN_DIGITS[int(d)] for d in fraction if d.isdigit())]
        return words

    def _number_or_decimal(self, text: str) -> list[str]:
        return self.decimal(text) if "." in text else self.number(text)

    def _normalize(self, text: str) -> str:
        text = _ENGLISH_HYPHEN.sub(r"\1\2", text.lower().strip())
        text = re.sub(r"\s+", " ", re.sub(r"[.\-_]", " ", text))
        if not re.search(r"[\d./\-+%*=&@#$€£¥°™©®]", text):
            return "".join(c for c in text if c.isalpha())
        return self._fold(text, str.isalpha, _EN_SYMBOL_WORDS)

    def _speak(self, token: str, symbol_word: Any, unit_word: Any) -> list[str]:
        """A token read left to right: numbers (one decimal point) as words, letters as ``unit_word`` says."""
        parts: list[str] = []
        number = alpha = ""
        for index, char in enumerate(token):
            if char.isdigit():
                if alpha:
                    parts.append(unit_word(alpha))
                    alpha = ""
                number += char
            elif char == "." and number and "." not in number:
                number += char
            elif char.isalpha():
                if number:
                    parts += self._number_or_decimal(number)
                    number = ""
                alpha += char
            else:
                if number:
                    parts += self._number_or_decimal(number)
                    number = ""
                if alpha:
                    parts.append(unit_word(alpha))
                    alpha = ""
                word = symbol_word(index, char) if char != "." else None
                if word:
                    parts.append(word)
        if number:
            parts += self._number_or_decimal(number)
        if alpha:
            parts.append(unit_word(alpha))
        return parts

    @staticmethod
    def _long_unit(alpha: str) -> str:
        """``milligrams`` -> milligram (a unit's long name to its first spelling); anything else lowercased."""
        lower = alpha.lower()
        for forms in _EN_UNITS.values():
            if lower in forms:
                return forms[0]
        return lower

    def _expand(self, token: str) -> str:
        token = _ENGLISH_HYPHEN.sub(r"\1\2", token)
        if _DIGIT.search(token):
            decimal_unit = re.match(r"^(\d+\.\d+)([a-zA-Z]+)$", token)
            if decimal_unit:
                spoken = " ".join([*self.decimal(decimal_unit[1]), self._long_unit(decimal_unit[2])])
                if spoken != token:
                    return spoken
            parts = self._speak(token, lambda _, char: (_EN_SYMBOLS.get(char) or (None,))[0], self._long_unit)
            spoken = " ".join(parts)
            return spoken if parts and spoken != token else token
        if any(token.lower() in forms for forms in _EN_UNITS.values()):
            return self._long_unit(token)
        if re.search(r"[./+%*=&@#$€£¥°™©®-]", token):
            letters = [
                _EN_SYMBOLS[c][0] if c in _EN_SYMBOLS else c.lower() for c in token if c in _EN_SYMBOLS or c.isalpha()
            ]
            if letters:
                return " ".join(letters)
        return token

    def _expansions(self, token: str) -> tuple[str, ...]:
        found: dict[str, None] = {}  # insertion-ordered set
        primary = self.expand(token)
        if primary != token:
            found[primary] = None
        if "/" in token:
            halves = token.split("/")
            if len(halves) == 2:
                lefts, rights = self.expansions(halves[0]), self.expansions(halves[1])
                for left, right, word in product(lefts, rights, _EN_SYMBOLS["/"]):
                    found[f"{left} {word} {right}"] = None
        if _DIGIT.search(token) and "/" not in token:
            for spoken in self._number_unit_forms(token):
                found[spoken] = None
        elif token.lower() in _EN_UNITS:
            for form in _EN_UNITS[token.lower()]:
                found[form] = None
        places = [(i, c) for i, c in enumerate(token) if c in _EN_SYMBOLS]
        if places and re.search(r"[./+%*=&@#$€£¥°™©®-]", token):
            for words in product(*(_EN_SYMBOLS[c] for _, c in places)):
                chosen = dict(zip((i for i, _ in places), words, strict=True))
                parts = self._speak(
                    token,
                    lambda index, _, chosen=chosen: chosen.get(index),
                    lambda alpha: _EN_UNITS[alpha.lower()][0] if alpha.lower() in _EN_UNITS else alpha.lower(),
                )
                spoken = " ".join(parts) if parts else token
                if spoken != token:
                    found[spoken] = None
        return tuple(found)

    def _number_unit_forms(self, token: str) -> list[str]:
        """``158.12``, ``7.5mg``, ``750mg``, ``pH7``: American and British readings, every unit spelling."""
        forms: list[str] = []
        if re.match(r"^(\d+\.\d+)$", token):
            forms += [" ".join(self.decimal(token)), " ".join(self.decimal(token, british=True))]
        match = re.match(r"^(\d+\.\d+)([a-zA-Z]+)$", token)
        if match:
            american, british = self.decimal(match[1]), self.decimal(match[1], british=True)
            unit = match[2]
            units = _EN_UNITS.get(unit.lower())
            for form in units or (unit.lower(),):
                forms += [" ".join([*american, form]), " ".join([*british, form])]
                if units and unit.isupper():
                    forms += [" ".join([*american, unit]), " ".join([*british, unit])]
        match = re.match(r"^(\d+)([a-zA-Z]+)$", token)
        if match:
            american, british = self.number(match[1]), self.number(match[1], british=True)
            unit = match[2]
            for form in _EN_UNITS.get(unit.lower()) or (unit.lower(),):
                forms += [" ".join([*american, form]), " ".join([*british, form])]
                forms += [" ".join([*american, unit.upper()]), " ".join([*british, unit.upper()])]
        match = re.match(r"^([a-zA-Z]+)(\d+)$", token)
        if match:
            number = self.number(match[2])
            forms += [" ".join([form, *number]) for form in _EN_UNITS.get(match[1].lower()) or (match[1].lower(),)]
        return forms


class _HindiRules(_Rules):
    name = "hi"

    @staticmethod
    def _below_thousand(value: int) -> list[str]:
        words: list[str] = []
        if value >= 100:
            words += [_HI_ONES[value // 100], "सौ"]
            value %= 100
        if value in _HI_COMPOUND:
            return [*words, _HI_COMPOUND[value]]
        if value >= 20:
            words.append(_HI_TENS[value // 10])
            value %= 10
        elif value >= 10:
            words.append(_HI_TEENS[value - 10])
            value = 0
        if value:
            words.append(_HI_ONES[value])
        return words

    def number(self, digits: str) -> list[str]:
        """An integer's Hindi words (Indian grouping: lakh, hazar); past 99,99,999 digit by digit."""
        if not digits:
            return ["शून्य"]
        ascii_digits = digits.translate(_DEVANAGARI_DIGITS)
        try:
            value = int(ascii_digits)
        except ValueError:
            return [_HI_DIGITS[int(d)] for d in ascii_digits if d in "0123456789"]
        if value == 0:
            return ["शून्य"]
        if value > 9_999_999:
            return [_HI_DIGITS[int(d)] for d in str(value)]
        words: list[str] = []
        for size, label in ((100_000, "लाख"), (1000, "हजार")):
            if value >= size:
                words += [*self._below_thousand(value // size), label]
                value %= size
        if value:
            words += self._below_thousand(value)
        return words

    @staticmethod
    def _letter(char: str) -> bool:
        return char.isalpha() or _is_devanagari(char)

    def _normalize(self, text: str) -> str:
        text = text.lower().strip()
        if not re.search(r"[\d०-९\./\-+%*=&]", text):
            return "".join(c for c in text.replace("।", "").replace("॥", "") if self._letter(c))
        # the danda is a Devanagari character: kept with the letters here
        return self._fold(text, self._letter, _HI_SYMBOLS)

    @staticmethod
    def _unit(alpha: str) -> str:
        return _HI_UNITS.get(alpha.lower(), alpha.lower())

    def _expand(self, token: str) -> str:
        if re.search(r"[\d०-९]", token):
            parts: list[str] = []
            number = alpha = ""
            for char in token:
                if char.isdigit():
                    if alpha:
                        parts.append(self._unit(alpha))
                        alpha = ""
                    number += char
                elif self._letter(char):
                    if number:
                        parts += self.number(number)
                        number = ""
                    alpha += char
                else:
                    if number:
                        parts += self.number(number)
                        number = ""
                    if alpha:
                        parts.append(self._unit(alpha))
                        alpha = ""
                    if char in _HI_SYMBOLS:
                        parts.append(_HI_SYMBOLS[char])
            if number:
                parts += self.number(number)
            if alpha:
                parts.append(self._unit(alpha))
            spoken = " ".join(parts)
            return spoken if parts and spoken != token else token
        if token.lower() in _HI_UNITS:
            return _HI_UNITS[token.lower()]
        if re.search(r"[./+%*=&-]", token):
            letters = [_HI_SYMBOLS.get(c, c.lower()) for c in token if c in _HI_SYMBOLS or self._letter(c)]
            if letters:
                return " ".join(letters)
        return token


_RULES: dict[str, type[_Rules]] = {"en": _EnglishRules, "hi": _HindiRules}


@cache
def _rules(language: str) -> _Rules:
    return _RULES[language]()


# -- alignment (KARMA's BaseCERAligner.align_words_dp) ---------------------------------------------------------

MATCH, SUBSTITUTION, DELETION, INSERTION = "match", "substitution", "deletion", "insertion"


@dataclass(frozen=True, slots=True)
class Group:
    """One step of the alignment: reference words against answer words, with the group's CER."""

    reference: tuple[str, ...]
    answer: tuple[str, ...]
    kind: str
    cer: float


def _rate(reference: str, answer: str) -> float:
    """Edit distance over the reference's length (1 for an empty reference and a non-empty answer)."""
    if not reference:
        return 1.0 if answer else 0.0
    return Levenshtein.distance(reference, answer) / len(reference)


def _substring_rate(reference: str, answer: str) -> float:
    """Rate when one side contains the other (the missing or extra share), else by a 3+ letter prefix."""
    reference = reference.replace(" ", "").replace(".", "").replace("-", "")
    answer = answer.replace(" ", "").replace(".", "").replace("-", "")
    if reference in answer:
        return (len(answer) - len(reference)) / max(len(reference), 1)
    if answer in reference:
        return (len(reference) - len(answer)) / max(len(reference), 1)
    upper_ref, upper_ans = reference.upper(), answer.upper()
    if upper_ans in upper_ref:
        return min((len(upper_ref) - len(upper_ans)) / max(len(upper_ref), 1), 0.8)
    if upper_ref in upper_ans:
        return min((len(upper_ans) - len(upper_ref)) / max(len(upper_ref), 1), 0.8)
    prefix = 0
    for a, b in zip(upper_ref, upper_ans):
        if a != b:
            break
        prefix += 1
    if prefix >= 3:
        return 1.0 - prefix / max(len(upper_ref), len(upper_ans))
    return _rate(reference, answer)


class Aligner:
    """KARMA's CER-based word-group alignment for one language."""

    def __init__(self, language: str, cer_threshold: float = 0.4) -> None:
        self.rules = _rules(language)
        self.cer_threshold = cer_threshold
        self.group_rate = lru_cache(maxsize=1 << 16)(self._group_rate)

    def _group_rate(self, reference: str, answer: str) -> float:
        """The lowest of the plain, the spoken-form and the substring-aware character error rates."""
        plain = _rate(reference.lower().replace(" ", ""), answer.lower().replace(" ", ""))
        spoken = _rate(self.rules.normalize(reference), self.rules.normalize(answer))
        return min(plain, spoken, _substring_rate(reference.lower(), answer.lower()))

    def _expansion_span(self, token: str, answer: list[str], start: int) -> int | None:
        """How many answer words from ``start`` say ``token``'s expansion exactly (None: none does)."""
        for spoken in (self.rules.expand(token), *self.rules.expansions(token)):
            if spoken == token:
                continue
            words = spoken.lower().split()
            if start + len(words) <= len(answer) and words == [w.lower() for w in answer[start : start + len(words)]]:
                return len(words)
        return None

    def _bonus(self, ref: list[str], ans: list[str]) -> tuple[float, float, float]:
        """(score bonus, similarity, CER) of aligning the words ``ref`` with ``ans``."""
        threshold = self.cer_threshold
        if len(ref) == 1:
            token = ref[0]
            cer = self.group_rate(token, " ".join(ans))
            similarity = 1.0 - cer
            if self.rules.expand(token) != token:
                return (similarity + 0.5 if similarity >= 1.0 - threshold else similarity - 0.5), similarity, cer
            if similarity >= 0.99:
                return similarity + 5.0, similarity, cer
            if similarity >= 0.95:
                return similarity + 3.0, similarity, cer
            if len(ans) == 1:
                return similarity + 1.0, similarity, cer
            if similarity < 0.3:
                return similarity - 2.0 - (len(ans) - 1) * 2.0, similarity, cer
            return similarity - 0.3 - (len(ans) - 1) * 0.5, similarity, cer
        cer = self.group_rate(" ".join(ref), " ".join(ans))
        similarity = 1.0 - cer
        if similarity >= 0.95:
            return similarity + 1.0, similarity, cer
        return similarity - 0.8 - ((len(ref) - 1) * 0.3 + (len(ans) - 1) * 0.3), similarity, cer

    def align(self, reference: str, answer: str) -> list[Group]:
        """The best-scoring path, filled in from the end of both texts (KARMA recurses from the start)."""
        ref, ans = reference.split(), answer.split()
        m, n = len(ref), len(ans)
        score = [[0.0] * (n + 1) for _ in range(m + 1)]
        step: list[list[Group | None]] = [[None] * (n + 1) for _ in range(m + 1)]
        for i in range(m, -1, -1):
            for j in range(n, -1, -1):
                if i == m and j == n:
                    continue
                if i == m:
                    score[i][j] = score[i][j + 1] - 1.0
                    step[i][j] = Group((), (ans[j],), INSERTION, 1.0)
                    continue
                if j == n:
                    score[i][j] = score[i + 1][j] - 1.0
                    step[i][j] = Group((ref[i],), (), DELETION, 1.0)
                    continue
                span = self._expansion_span(ref[i], ans, j)
                if span is not None:  # the token's spoken form, word for word: taken without comparing
                    score[i][j] = score[i + 1][j + span] + 20.0
                    step[i][j] = Group((ref[i],), tuple(ans[j : j + span]), MATCH, 0.0)
                    continue
                best: tuple[float, Group] | None = None
                for r in range(1, min(3, m - i) + 1):
                    for h in range(1, min(8, n - j) + 1):
                        bonus, similarity, cer = self._bonus(ref[i : i + r], ans[j : j + h])
                        total = score[i + r][j + h] + bonus
                        if best is None or total > best[0]:  # ties: the first (fewest words) wins
                            kind = MATCH if similarity >= 0.95 else SUBSTITUTION
                            best = (total, Group(tuple(ref[i : i + r]), tuple(ans[j : j + h]), kind, cer))
                assert best is not None
                score[i][j], step[i][j] = best
        groups: list[Group] = []
        i = j = 0
        while i < m or j < n:
            group = step[i][j]
            assert group is not None
            groups.append(group)
            i, j = i + len(group.reference), j + len(group.answer)
        return groups


@dataclass(frozen=True, slots=True)
class AlignmentCounts:
    """KARMA's per-utterance counts: words, groups by kind, and the character-weighted group CER."""

    reference_words: int
    matches: int
    substitutions: int
    deletions: int
    insertions: int
    characters: int
    character_errors: float

    @property
    def edits(self) -> int:
        return self.substitutions + self.deletions + self.insertions

    @classmethod
    def of(cls, groups: list[Group]) -> AlignmentCounts:
        kinds = [g.kind for g in groups]
        characters = 0
        errors = 0.0
        for group in groups:
            if group.reference and group.answer:
                chars = sum(len(w) for w in group.reference)
                characters += chars
                errors += group.cer * chars
        return cls(
            sum(len(g.reference) for g in groups),
            kinds.count(MATCH),
            kinds.count(SUBSTITUTION),
            kinds.count(DELETION),
            kinds.count(INSERTION),
            characters,
            errors,
        )


# -- the metrics --------------------------------------------------------------------------------------------


def karma_language(metric: str, language: str | None) -> str:
    """KARMA has aligners for English and Hindi only; no language is English (KARMA's benchmark default)."""
    code = target_language(normalize_language(language)) if language else "en"
    if code not in _RULES:
        raise ConfigError(
            f"metric {metric!r}: KARMA's semantic alignment exists for English and Hindi only, not {language!r}"
        )
    return code


class _AlignedMetric(Metric):
    """Aligns the first reference with the answer as KARMA does and reports the counts."""

    higher_is_better = False
    ci_method = "bootstrap"
    #: fits every speech recognition dataset of the catalogue (English and Hindi; others are refused)
    tasks: ClassVar[tuple[str, ...]] = ("speech_recognition",)
    option_names: ClassVar[tuple[str, ...]] = ("cer_threshold",)

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, self.option_names)
        super().__init__(language, **options)
        self.karma_language = karma_language(self.name, language)
        threshold = options.get("cer_threshold", 0.4)
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 <= threshold <= 1:
            raise ConfigError(f"metric {self.name!r}: option 'cer_threshold' must be a number in [0, 1]")
        self.aligner = Aligner(self.karma_language, float(threshold))

    def align(self, prediction: str, sample: Sample) -> tuple[str, list[Group]] | SampleScore:
        references = reference_strings(sample.reference)
        if not references:
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        try:
            return references[0], self.aligner.align(references[0], prediction or "")
        except ValueError as error:  # KARMA skips an utterance its aligner raises on (e.g. a digit like '²')
            return SampleScore(None, failure=FailureReason.METRIC_ERROR, details={"error": str(error)})

    async def ascore(self, prediction: str, sample: Sample) -> SampleScore:
        """In a worker thread: the alignment is quadratic (about 0.05 s for 25 words, 0.5 s for 100 on this
        machine), and scoring on the event loop would stall every other engine's requests meanwhile."""
        return await asyncio.to_thread(self.score, prediction, sample)

    @staticmethod
    def group_details(groups: list[Group]) -> list[list[Any]]:
        return [[" ".join(g.reference), " ".join(g.answer), g.kind, round(g.cer, 6)] for g in groups]

    def describe(self) -> dict[str, Any]:
        return {"language": self.language, "aligner": self.karma_language, "cer_threshold": self.aligner.cer_threshold}


class SemanticWordErrorRate(_AlignedMetric):
    """KARMA's semantic WER: word groups aligned by character error rate, numbers and units as spoken."""

    name = "semantic_wer"

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        aligned = self.align(prediction, sample)
        if isinstance(aligned, SampleScore):
            return aligned
        _, groups = aligned
        c = AlignmentCounts.of(groups)
        rate = c.edits / max(c.reference_words, 1)
        stats = (c.edits, c.reference_words, c.character_errors, c.characters, c.substitutions, c.deletions)
        return SampleScore(
            rate,
            (*(float(x) for x in stats), float(c.insertions), float(c.matches)),
            details={"alignment": self.group_details(groups)},
        )

    def corpus(self, totals: np.ndarray) -> np.ndarray:
        totals = np.asarray(totals, dtype=float)
        return totals[..., 0] / np.maximum(totals[..., 1], 1.0)

    def corpus_details(self, totals: np.ndarray) -> dict[str, Any]:
        t = np.asarray(totals, dtype=float)
        return {
            "edits": int(t[0]),
            "reference_words": int(t[1]),
            "semantic_cer": float(t[2] / t[3]) if t[3] > 0 else 0.0,
            "substitutions": int(t[4]),
            "deletions": int(t[5]),
            "insertions": int(t[6]),
            "matches": int(t[7]),
        }


class SemanticCharacterErrorRate(SemanticWordErrorRate):
    """KARMA's semantic CER: the aligned groups' CERs weighted by their reference characters (no spaces)."""

    name = "semantic_cer"

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        scored = super().score(prediction, sample)
        if scored.failure is not None:
            return scored
        s = scored.stats
        scored.score = s[2] / s[3] if s[3] > 0 else 0.0
        scored.stats = (s[2], s[3], s[0], s[1], *s[4:])
        return scored

    def corpus(self, totals: np.ndarray) -> np.ndarray:
        totals = np.asarray(totals, dtype=float)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(totals[..., 1] > 0, totals[..., 0] / totals[..., 1], 0.0)

    def corpus_details(self, totals: np.ndarray) -> dict[str, Any]:
        t = np.asarray(totals, dtype=float)
        details = super().corpus_details(np.array([t[2], t[3], t[0], t[1], *t[4:]]))
        details["semantic_wer"] = float(t[2] / max(t[3], 1.0))
        details["character_errors"] = float(t[0])
        details["reference_characters"] = int(t[1])
        del details["semantic_cer"]
        return details


def _annotation_words(reference: str, annotations: Any) -> list[str]:
    """Keyword words of one sample: KARMA's ``[text, category, [[start, end], ...]]`` read from the reference.

    Other shapes (extensions: KARMA reads only its own) give the words of the entity texts: a list of
    strings, of objects with ``text``, an object of lists by entity type, or any of these as JSON.
    """
    if annotations is None:
        return []
    if isinstance(annotations, str):
        stripped = annotations.strip()
        if not stripped:
            return []
        try:
            parsed = ast.literal_eval(stripped)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            try:
                parsed = json.loads(stripped)
            except json.JSONDecodeError:
                return []  # KARMA skips an annotation it cannot read
        if isinstance(parsed, str):
            return parsed.split()
        return _annotation_words(reference, parsed)
    if isinstance(annotations, dict):
        if "text" in annotations:
            return _annotation_words(reference, [annotations["text"]])
        return [w for group in annotations.values() for w in _annotation_words(reference, group)]
    if not isinstance(annotations, (list, tuple)):
        raise ValueError(f"entities must be strings, lists or objects, not {type(annotations).__name__}")
    words: list[str] = []
    for item in annotations:
        if isinstance(item, str):
            words += item.split()
        elif isinstance(item, dict):
            words += _annotation_words(reference, item)
        elif isinstance(item, (list, tuple)) and len(item) >= 3 and isinstance(item[2], (list, tuple)):
            for start, end in item[2]:
                words += reference[start:end].split()
        else:
            raise ValueError(f"an entity must be [text, category, [[start, end], ...]], text or an object: {item!r}")
    return words


class EntityWordErrorRate(_AlignedMetric):
    """KARMA's keyword WER: substituted or deleted keyword words over keyword words (semantic alignment)."""

    name = "entity_wer"
    option_names = ("cer_threshold", "entities_key", "entity_words")
    #: only datasets that tag entities (their runspecs list it): elsewhere there is nothing to score
    tasks = ()

    def __init__(self, language: str | None = None, **options: Any) -> None:
        super().__init__(language, **options)
        key = options.get("entities_key", "entities")
        if not isinstance(key, str) or not key:
            raise ConfigError(f"metric {self.name!r}: option 'entities_key' must be a meta key, not {key!r}")
        self.entities_key = key
        vocabulary = options.get("entity_words", [])
        if isinstance(vocabulary, str):
            vocabulary = [vocabulary]
        if not isinstance(vocabulary, (list, tuple)) or not all(isinstance(w, str) for w in vocabulary):
            raise ConfigError(f"metric {self.name!r}: option 'entity_words' must be a list of words or entity texts")
        #: the dataset-wide keyword list (KARMA builds it from every sample's annotations)
        self.entity_words = frozenset(w.lower() for text in vocabulary for w in text.split())

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        aligned = self.align(prediction, sample)
        if isinstance(aligned, SampleScore):
            return aligned
        reference, groups = aligned
        try:
            own = _annotation_words(reference, sample.meta.get(self.entities_key))
        except (ValueError, TypeError, IndexError) as error:
            return SampleScore(
                None, failure=FailureReason.METRIC_ERROR, details={"error": f"meta {self.entities_key!r}: {error}"}
            )
        keywords = self.entity_words | {w.lower() for w in own if w.strip()}
        counted = [g for g in groups if g.reference and " ".join(g.reference).lower() in keywords]
        kinds = [g.kind for g in counted]
        errors = kinds.count(SUBSTITUTION) + kinds.count(DELETION)
        rate = (errors / len(counted) if counted else 0.0) if keywords else None
        stats = (errors, len(counted), 1 if keywords else 0, kinds.count(SUBSTITUTION), kinds.count(DELETION))
        return SampleScore(
            rate,
            tuple(float(x) for x in stats),
            details={"keywords": sorted(keywords - self.entity_words), "keyword_groups": self.group_details(counted)},
        )

    def corpus(self, totals: np.ndarray) -> np.ndarray:
        """Σ errors / Σ keyword groups; 0 when keywords exist but none was aligned alone; NaN without keywords."""
        t = np.asarray(totals, dtype=float)
        with np.errstate(invalid="ignore", divide="ignore"):
            rate = np.where(t[..., 1] > 0, t[..., 0] / t[..., 1], 0.0)
        return np.where(t[..., 2] > 0, rate, np.nan)

    def corpus_details(self, totals: np.ndarray) -> dict[str, Any]:
        t = np.asarray(totals, dtype=float)
        return {
            "errors": int(t[0]),
            "keyword_words": int(t[1]),
            "samples_with_keywords": int(t[2]),
            "substitutions": int(t[3]),
            "deletions": int(t[4]),
        }

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "entities_key": self.entities_key, "entity_words": len(self.entity_words)}

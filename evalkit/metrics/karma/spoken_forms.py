"""How KARMA's semantic alignment says a text aloud: numbers, units and symbols as words, in English and Hindi.

Written from the language rules of KARMA-OpenMedEvalKit's ``EnglishCERAligner`` and ``HindiCERAligner``
(``karma/metrics/asr/lang/``, commit fe151014e7c6fefcafb5fa9fcf0abcbf276f1359): how a text is folded for
comparison (digit runs as number words, symbols as their words) and every spoken form of a token
(``7.5mg`` -> ``seven point five milligram``). The alignment and the metrics that use them are in
:mod:`evalkit.metrics.karma.asr_semantic`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from functools import cache, lru_cache
from itertools import product
from typing import Any, ClassVar

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


class LanguageRules:
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


class _EnglishRules(LanguageRules):
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


class _HindiRules(LanguageRules):
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


RULES: dict[str, type[LanguageRules]] = {"en": _EnglishRules, "hi": _HindiRules}


@cache
def rules_for(language: str) -> LanguageRules:
    """The rules of a language KARMA aligns (a key of ``RULES``), made once."""
    return RULES[language]()

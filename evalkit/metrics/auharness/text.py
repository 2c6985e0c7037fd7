"""The text normalisation AU-Harness applies before METEOR, BERTScore and COMET (its WER module's
``normalize_text``), so that those scores are taken on the same strings.

In order: Unicode NFC; every run of digits spelled out in English words
(``num2words``; when one number cannot be spelled, no number of the text is);
OpenAI Whisper's English normaliser (which turns number words back into
digits, among other things); lower case; every Unicode punctuation character
removed (jiwer's ``RemovePunctuation``); surrounding space stripped.
AU-Harness calls it with its default language, English, whatever the
dataset's language: its metric loader passes the task's language only to
metric names containing "wer", and ``word_error_rate`` does not.

AU-Harness vendors Whisper's normaliser as Whisper wrote it; the
whisper-normalizer package evalkit uses has since added four contractions
(``kinda``, ``sorta``, ``dunno``, ``cause``), which are taken out again here.

On text in other scripts the English normaliser deletes the combining marks
(Unicode category Mn: most Indic vowel signs, nasal marks, nukta, virama) and
turns the spacing ones (Mc) into spaces, so Hindi ``बाज़ार`` becomes ``ब ज र``:
AU-Harness's figure on such text is reproduced as it is, with a warning
(:func:`warn_english_normalisation`).
"""

from __future__ import annotations

import functools
import importlib
import logging
import re
import unicodedata
from collections.abc import Callable
from typing import Any

NUM2WORDS = "num2words"
_DIGITS = re.compile(r"\d+")
#: contractions the whisper-normalizer package expands that Whisper's normaliser (AU-Harness's copy) does not
PACKAGE_ONLY_REPLACERS = (r"\bkinda\b", r"\bsorta\b", r"\bdunno\b", r"\bcause\b")

log = logging.getLogger("evalkit")


class MissingPackage(ImportError):
    """A package a metric needs is not installed (the message says which and how to get it)."""


@functools.cache
def _spell() -> Callable[..., str]:
    try:
        spell: Callable[..., str] = importlib.import_module(NUM2WORDS).num2words
    except ImportError:
        raise MissingPackage(
            f"AU-Harness's text normalisation spells numbers with the Python package {NUM2WORDS!r}: "
            "pip install 'evalkit[auharness]'"
        ) from None
    return spell


@functools.cache
def _whisper_english() -> Callable[[str], str]:
    from whisper_normalizer.english import EnglishTextNormalizer

    normalizer = EnglishTextNormalizer()
    for pattern in PACKAGE_ONLY_REPLACERS:
        normalizer.replacers.pop(pattern, None)
    english: Callable[[str], str] = normalizer
    return english


@functools.cache
def _final_steps() -> Any:
    import jiwer

    return jiwer.Compose([jiwer.ToLowerCase(), jiwer.RemovePunctuation(), jiwer.Strip()])


def require_normaliser() -> None:
    """Raise MissingPackage now (at config validation) when a package the normalisation needs is missing."""
    _spell()


def spell_digits(text: str) -> str:
    """Digits as English words; the text unchanged if num2words refuses one number (AU-Harness keeps it whole)."""
    spell = _spell()
    try:
        return _DIGITS.sub(lambda match: spell(int(match.group()), lang="en"), text)
    except (
        Exception
    ):  # num2words raises several types (OverflowError, NotImplementedError, ...); AU-Harness catches all
        return text


def normalize_like_auharness(text: str) -> str:
    text = unicodedata.normalize("NFC", text)
    text = spell_digits(text)
    result: str = _final_steps()([_whisper_english()(text)])[0]
    return result


def smart_round(value: float, places: int = 3) -> float:
    """AU-Harness's ``util.smart_round``: ``round(value * 10**places) / 10**places`` (Python's half-to-even)."""
    return round(value * 10**places) / 10**places


@functools.cache
def warn_english_normalisation(metric: str, language: str, own: str, own_does: str) -> None:
    """Say once per run and metric that AU-Harness's figure on non-English text comes from English normalisation."""
    log.warning(
        "metric %r on %s text: AU-Harness normalises every language as English (its metric loader never passes the "
        "task's language), which deletes or splits the combining vowel signs, nasal marks and nukta of Indic "
        "scripts, drops diacritics and reads unspaced scripts as whole words; the figure reproduces AU-Harness's. "
        "evalkit's own %r %s",
        metric,
        language,
        own,
        own_does,
    )

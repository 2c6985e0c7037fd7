"""The text normalisation AU-Harness applies before METEOR, BERTScore and COMET (its WER module's
``normalize_text``), so that those scores are taken on the same strings.

In order: Unicode NFC; every run of digits spelled out in English words
(``num2words``; a number it cannot spell stays as it is); OpenAI Whisper's
English normaliser (which turns number words back into digits, among other
things); lower case; every Unicode punctuation character removed (jiwer's
``RemovePunctuation``); surrounding space stripped. AU-Harness calls it with
its default language, English, whatever the dataset's language.
"""

from __future__ import annotations

import functools
import importlib
import re
import unicodedata
from collections.abc import Callable
from typing import Any

NUM2WORDS = "num2words"
_DIGITS = re.compile(r"\d+")


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

    normalizer: Callable[[str], str] = EnglishTextNormalizer()
    return normalizer


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

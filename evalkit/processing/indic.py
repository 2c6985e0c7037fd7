"""Orthographic normalisation of Indic scripts, built on indic-nlp-library's ``IndicNormalizerFactory``.

The same Hindi word has several correct spellings: with or without a nukta
(ज़रूर / जरूर), with chandrabindu or anusvara (हँसी / हंसी), with a nasal
consonant cluster or an anusvara (सम्बन्ध / संबंध), with a chandra vowel sign
(डॉक्टर / डोक्टर), in Devanagari or ASCII digits (२ / 2). Plain WER counts each
as an error; KARMA's semantic WER/CER does not. The rules come from
indic-nlp-library (the normaliser KARMA itself uses), not from tables written
here; the only step of our own is digits, mapped through Unicode's own
decimal values (``unicodedata.decimal``), and punctuation (danda ।, double
danda ॥, commas) is removed by Whisper's basic normaliser afterwards.

indic-nlp-library and indic-transliteration are the ``indic`` extra: they are
imported when a metric or processor that needs them is built, and a missing
install is a clear error naming the extra, so a plain run never imports them.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from evalkit.errors import ConfigError

#: the extra that installs what this module needs
EXTRA = "indic"
NASALS_MODES = ("to_anusvaara_relaxed", "to_anusvaara_strict", "to_nasal_consonants", "do_nothing")
NUMERALS = ("ascii", "keep")


def require_indic(what: str, module: str) -> Any:
    """Import ``module`` of the indic extra, or raise a ConfigError that says how to install it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ConfigError(
            f"{what} needs the optional packages indic-nlp-library and indic-transliteration: "
            f"pip install 'evalkit[{EXTRA}]'"
        ) from None


@dataclass(frozen=True)
class IndicSettings:
    """What the semantic normalisation folds together; every field is an option of the metrics and processor."""

    #: drop the nukta (ज़ -> ज, क़ -> क): speakers and annotators use it inconsistently
    remove_nuktas: bool = True
    #: chandrabindu -> anusvara (ँ -> ं) and chandra vowel signs to the plain ones (ॉ -> ो, ॅ -> े)
    normalize_chandras: bool = True
    #: nasal consonant + virama before a consonant -> anusvara (सम्बन्ध -> संबंध); indic-nlp's modes
    nasals_mode: str = "to_anusvaara_relaxed"
    #: "ascii": digits of every script become 0-9 (२० -> 20); "keep": left as written
    numerals: str = "ascii"

    @classmethod
    def from_options(cls, owner: str, options: dict[str, Any]) -> IndicSettings:
        """The settings named in ``options`` (the rest default), checked so a bad value names its key."""
        values: dict[str, Any] = {}
        for key in ("remove_nuktas", "normalize_chandras"):
            if key in options:
                if not isinstance(options[key], bool):
                    raise ConfigError(f"{owner}: option {key!r} must be true or false, not {options[key]!r}")
                values[key] = options[key]
        for key, allowed in (("nasals_mode", NASALS_MODES), ("numerals", NUMERALS)):
            if key in options:
                if options[key] not in allowed:
                    raise ConfigError(
                        f"{owner}: option {key!r} must be one of {', '.join(allowed)}, not {options[key]!r}"
                    )
                values[key] = options[key]
        return cls(**values)


OPTION_NAMES = ("remove_nuktas", "normalize_chandras", "nasals_mode", "numerals")


def ascii_digits(text: str) -> str:
    """Every decimal digit (Devanagari २, Bengali ২, Tamil ௨, ...) as its ASCII digit, by Unicode's own value."""
    if text.isascii():
        return text
    return "".join(str(unicodedata.decimal(ch)) if ch.isdecimal() and not ch.isascii() else ch for ch in text)


@cache
def indic_normalizer(language: str, settings: IndicSettings) -> Callable[[str], str] | None:
    """indic-nlp's normaliser for ``language`` with ``settings``, or None when it has none for the language."""
    module = require_indic("Indic normalisation", "indicnlp.normalize.indic_normalize")
    factory = module.IndicNormalizerFactory()
    if not factory.is_language_supported(language):
        return None
    normalizer = factory.get_normalizer(
        language,
        remove_nuktas=settings.remove_nuktas,
        nasals_mode=settings.nasals_mode,
        do_normalize_chandras=settings.normalize_chandras,
    )
    fn: Callable[[str], str] = normalizer.normalize
    return fn


def orthographic_normalizer(language: str | None, settings: IndicSettings) -> tuple[str, Callable[[str], str]]:
    """``(name, function)``: indic-nlp's normaliser for the language, then digits; identity where it has none.

    Punctuation is left to the caller (the WER normaliser removes it), so the
    processor can keep it when a dataset wants that.
    """
    inner = indic_normalizer(language, settings) if language else None
    digits = settings.numerals == "ascii"
    if inner is None:
        if not digits:
            return "none", _identity
        return "digits", ascii_digits
    name = "indic-nlp"
    if digits:
        return name + "+digits", lambda text: ascii_digits(inner(text))
    return name, inner


def _identity(text: str) -> str:
    return text

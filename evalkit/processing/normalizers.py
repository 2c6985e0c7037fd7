"""Text normalizers for ASR scoring, built on the whisper-normalizer package.

WER depends as much on normalization as on the model: "Mr. Smith" vs "mister
smith" is two errors or none. evalkit uses Whisper's normalizers (the ones
behind most published ASR numbers) so scores are comparable:

- English: ``EnglishTextNormalizer`` (spelling, numbers, contractions).
- Other languages: ``BasicTextNormalizer`` (lower case, bracketed text and
  punctuation/symbols removed, whitespace collapsed). For scripts whose vowels
  are combining marks (Brahmic scripts: Hindi, Tamil, Thai, ...) the marks are
  kept (``preserve_marks=True``); the stock setting turns them into spaces and
  so deletes vowels, inflating or deflating error rates arbitrarily.
- Spaceless languages (zh, ja, th, lo, km, my, yue, bo): the basic normalizer
  without letter splitting, then every space removed, since these are scored
  by CER and spaces in them are arbitrary segmentation.

Each normalizer is built once per setting and shared (the English one loads a
spelling table), and remembers the texts it last normalized: a reference is
normalized for every model and metric that scores it, short answers repeat,
and the English one costs 50-250 µs a text.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from functools import cache, lru_cache

from evalkit.languages import is_spaceless, target_language

Normalizer = Callable[[str], str]

#: languages written in scripts whose vowel signs are Unicode marks (category M)
MARK_SCRIPTS: frozenset[str] = frozenset(
    {"hi", "bn", "as", "mr", "ne", "sa", "gu", "pa", "or", "ta", "te", "kn", "ml", "si", "th", "lo", "km", "my", "bo"}
)

NORMALIZER_KINDS = ("auto", "english", "basic", "none")

#: texts remembered per normalizer, each at most this long: a few MB at most
_REMEMBERED = 4096
_REMEMBERED_CHARS = 2000


def _identity(text: str) -> str:
    return " ".join(text.split())


def _remembering(normalizer: Normalizer) -> Normalizer:
    """``normalizer`` with its last :data:`_REMEMBERED` short texts' results kept (a pure function of the text)."""
    remembered = lru_cache(maxsize=_REMEMBERED)(normalizer)

    def normalize(text: str) -> str:
        return remembered(text) if len(text) <= _REMEMBERED_CHARS else normalizer(text)

    return normalize


@cache
def _english() -> Normalizer:
    from whisper_normalizer.english import EnglishTextNormalizer

    return _remembering(EnglishTextNormalizer())


@cache
def _basic(preserve_marks: bool) -> tuple[str, Normalizer]:
    from whisper_normalizer.basic import BasicTextNormalizer

    if preserve_marks and "preserve_marks" in inspect.signature(BasicTextNormalizer).parameters:
        return "whisper-basic-marks", _remembering(BasicTextNormalizer(split_letters=False, preserve_marks=True))
    return "whisper-basic", _remembering(BasicTextNormalizer(split_letters=False))


def _spaceless(inner: Normalizer) -> Normalizer:
    def normalize(text: str) -> str:
        return "".join(inner(text).split())

    return normalize


@cache
def asr_normalizer(language: str | None, kind: str = "auto") -> tuple[str, Normalizer]:
    """The normalizer for transcripts in ``language``: ``(name, function)``.

    ``kind`` "auto" picks by language as described in the module docstring
    (English when the language is unknown, as Whisper does); "english" and
    "basic" force one; "none" only collapses whitespace. For a translation
    pair the target language decides. The name is recorded in results.
    """
    if kind not in NORMALIZER_KINDS:
        raise ValueError(f"unknown normalizer {kind!r}; expected one of {', '.join(NORMALIZER_KINDS)}")
    lang = target_language(language) if language else None
    fn: Callable[[str], str]
    if kind == "none":
        name, fn = "none", _identity
    elif kind == "english" or (kind == "auto" and lang in (None, "en")):
        name, fn = "whisper-english", _english()
    else:
        name, fn = _basic(lang in MARK_SCRIPTS)
    if is_spaceless(lang):
        return f"{name}-nospace", _spaceless(fn)
    return name, fn

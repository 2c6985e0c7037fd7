"""Exact match after a light, documented normalization.

``normalize_answer`` (the default comparison) applies, in order:

1. Unicode NFKC (full-width forms, ligatures and compatibility characters
   become their plain equivalents: "Ａ" -> "A", "ﬁ" -> "fi");
2. ``str.casefold`` (case-insensitive, also "ß" == "ss");
3. whitespace runs (any Unicode space, tabs, newlines) -> one space;
4. leading/trailing whitespace and punctuation removed (Unicode category P*:
   quotes, brackets, periods, ...), repeatedly, so '"Paris."' == "paris".
   Symbols (``$``, ``%``, ``+``) and inner punctuation ("3.5", "U.S") stay.

With ``normalize: false`` only surrounding whitespace is stripped. A list
reference matches when any of its items does. Per-sample score is 1 or 0; the
corpus value is the mean (accuracy) with a normal CI.
"""

from __future__ import annotations

import unicodedata
from typing import Any

from evalkit.data.sample import Sample
from evalkit.failures import FailureReason
from evalkit.metrics.base import (
    Metric,
    SampleScore,
    check_options,
    reference_strings,
)


def _is_edge(char: str) -> bool:
    if char.isalnum():  # most edges of an answer: no Unicode category lookup needed
        return False
    return char.isspace() or unicodedata.category(char).startswith("P")


#: the ASCII characters ``_is_edge`` accepts (whitespace and category P*): for ASCII text one C-level strip
_ASCII_EDGES = "".join(c for c in map(chr, range(128)) if _is_edge(c))


def normalize_answer(text: str) -> str:
    """The exact-match normal form (see the module docstring)."""
    if text.isascii():
        # NFKC leaves ASCII as it is and casefold is lower(): the same result in three C calls
        return " ".join(text.lower().split()).strip(_ASCII_EDGES)
    text = unicodedata.normalize("NFKC", text).casefold()
    text = " ".join(text.split())
    start, end = 0, len(text)
    while start < end and _is_edge(text[start]):
        start += 1
    while end > start and _is_edge(text[end - 1]):
        end -= 1
    return text[start:end]


class ExactMatch(Metric):
    """1 when the normalized prediction equals a normalized reference, else 0."""

    bounds = (0.0, 1.0)

    name = "exact_match"

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ("normalize",))
        super().__init__(language, **options)
        self.normalize = bool(options.get("normalize", True))

    def _form(self, text: str) -> str:
        return normalize_answer(text) if self.normalize else text.strip()

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        references = reference_strings(sample.reference)
        if not references:
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        got = self._form(prediction or "")
        hit = any(got == self._form(ref) for ref in references)
        value = 1.0 if hit else 0.0
        return SampleScore(value, (value, 1.0), details={"normalized_prediction": got})

    def describe(self) -> dict[str, Any]:
        return {"normalization": "nfkc+casefold+strip_punct" if self.normalize else "strip"}

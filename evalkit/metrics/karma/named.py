"""KARMA's computations of the metric names evalkit already gives another meaning: ``karma:exact_match``,
``karma:accuracy``, ``karma:f1``, ``karma:tokenised_f1``, ``karma:wer``, ``karma:cer``, ``karma:bleu``.

evalkit's ``exact_match``, ``wer`` or ``bleu`` normalise text the way the
field's reference tools do; KARMA's classes of the same names
(eka-care/KARMA-OpenMedEvalKit, karma/metrics/common_metrics.py) compute something else, so a KARMA user
who kept the plain name would get a different number. The ``karma:`` names
are KARMA's computations, accepted everywhere a metric is named; a pair whose
dataset is written as a KARMA dataset id gets them for the plain names too
(:mod:`evalkit.config.foreign.karma`), while ``exact_match`` on an evalkit dataset
stays evalkit's.

* ``karma:exact_match``: the prediction equals the reference, both lower-cased
  (option ``ignore_case``, default true); nothing is stripped.
* ``karma:accuracy``: ``str(prediction).strip() == str(reference).strip()``; a
  missing reference is the text "None", as Python's ``str(None)`` makes it.
* ``karma:f1``: scikit-learn's binary F1 of integer labels (positive label 1),
  which Hugging Face ``evaluate``'s f1 computes for KARMA, from the summed
  true-positive, false-positive and false-negative counts.
* ``karma:tokenised_f1``: per sample, the F1 of the ``\\w+`` tokens common to
  answer and reference (newlines and full stops removed first, lower-cased);
  the corpus is their mean.
* ``karma:wer`` / ``karma:cer``: ``evaluate``'s wer and cer: jiwer's edit
  operations per pair, errors summed over the corpus and divided by the summed
  reference length (words; or characters as jiwer 4, KARMA's pin, counts them:
  ends stripped, every space a character). No other normalisation.
* ``karma:bleu``: ``evaluate``'s bleu (the TensorFlow NMT compute_bleu with the
  13a tokenizer, 4-grams) with KARMA's ``smooth=True``: add-one smoothed
  precisions, brevity penalty over the corpus lengths; 0-1 scale.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from functools import cache
from typing import Any

import numpy as np

from evalkit.data.sample import Sample
from evalkit.errors import ConfigError
from evalkit.failures import FailureReason
from evalkit.metrics.base import Metric, SampleScore, check_options


def _text(value: Any) -> str:
    """A prediction or reference as KARMA's metrics turn it into text: None is "", a tuple its first item."""
    if value is None:
        return ""
    if isinstance(value, tuple):
        return "" if not value or value[0] is None else str(value[0])
    return str(value)


def _first_reference(reference: Any) -> Any:
    """The one reference KARMA compares with: a list's first item (KARMA's datasets give one string)."""
    if isinstance(reference, list):
        return reference[0] if reference else None
    return reference


class KarmaExactMatch(Metric):
    """KARMA's exact_match: the answer equals the reference once both are lower-cased (nothing stripped)."""

    name = "karma:exact_match"
    bounds = (0.0, 1.0)
    tasks = ("*",)

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ("ignore_case",))
        super().__init__(language, **options)
        ignore_case = options.get("ignore_case", True)
        if not isinstance(ignore_case, bool):
            raise ConfigError(f"metric {self.name!r}: option 'ignore_case' must be true or false, not {ignore_case!r}")
        self.ignore_case = ignore_case

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        said, wanted = _text(prediction), _text(_first_reference(sample.reference))
        if self.ignore_case:
            said, wanted = said.lower(), wanted.lower()
        value = float(said == wanted)
        return SampleScore(value, (value, 1.0))

    def describe(self) -> dict[str, Any]:
        return {"ignore_case": self.ignore_case, "strip": False}


class KarmaAccuracy(Metric):
    """KARMA's accuracy: the answer and the reference are equal once surrounding whitespace is stripped."""

    name = "karma:accuracy"
    bounds = (0.0, 1.0)
    tasks = ("*",)

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ())
        super().__init__(language, **options)

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        # KARMA writes str(x): a missing reference is compared as the text "None" (PatientSafetyBench has none)
        value = float(str(prediction).strip() == str(_first_reference(sample.reference)).strip())
        return SampleScore(value, (value, 1.0))

    def describe(self) -> dict[str, Any]:
        return {"strip": True, "case_sensitive": True}


_TOKEN = re.compile(r"\w+")


def karma_tokens(text: str) -> list[str]:
    """KARMA's tokenised_f1 tokens: newlines and full stops removed (joining what they separated), ``\\w+``."""
    return _TOKEN.findall(text.replace("\n", "").replace(".", "").lower())


class KarmaTokenisedF1(Metric):
    """KARMA's tokenised_f1: F1 of the common \\w+ tokens of answer and reference, averaged over samples."""

    name = "karma:tokenised_f1"
    bounds = (0.0, 1.0)
    tasks = ("*",)

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ())
        super().__init__(language, **options)

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        said = karma_tokens(_text(prediction))
        wanted = karma_tokens(_text(_first_reference(sample.reference)))
        same = sum((Counter(said) & Counter(wanted)).values())
        if same == 0:
            return SampleScore(0.0, (0.0, 1.0), details={"common_tokens": 0})
        precision, recall = same / len(said), same / len(wanted)
        value = 2 * precision * recall / (precision + recall)
        return SampleScore(value, (value, 1.0), details={"common_tokens": same})


def _label(value: Any) -> int | None:
    """An integer class label as ``evaluate``'s f1 encodes it (its int32 feature calls ``int()``), else None."""
    if isinstance(value, (bool, int)) or (isinstance(value, float) and math.isfinite(value)):
        return int(value)  # a float is truncated, as int() truncates it
    if isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d+\s*", value):
        return int(value)
    return None


class KarmaF1(Metric):
    """KARMA's f1: scikit-learn's binary F1 (positive label 1) of integer labels over the corpus."""

    name = "karma:f1"
    bounds = (0.0, 1.0)
    ci_method = "bootstrap"
    tasks = ("*",)

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ("pos_label",))
        super().__init__(language, **options)
        positive = options.get("pos_label", 1)
        if _label(positive) is None:
            raise ConfigError(f"metric {self.name!r}: option 'pos_label' must be an integer label, not {positive!r}")
        self.pos_label = _label(positive)

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        said, wanted = _label(prediction), _label(_first_reference(sample.reference))
        if wanted is None:
            return SampleScore(None, failure=FailureReason.NO_REFERENCE, details={"error": "reference is no integer"})
        if said is None:
            # evaluate's f1 takes integer labels only and KARMA's run stops on anything else
            return SampleScore(None, failure=FailureReason.METRIC_ERROR, details={"error": "answer is no integer"})
        tp = float(said == self.pos_label and wanted == self.pos_label)
        fp = float(said == self.pos_label and wanted != self.pos_label)
        fn = float(said != self.pos_label and wanted == self.pos_label)
        value = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0
        return SampleScore(value, (tp, fp, fn))

    def corpus(self, totals: np.ndarray) -> np.ndarray:
        totals = np.asarray(totals, dtype=float)
        tp, fp, fn = totals[..., 0], totals[..., 1], totals[..., 2]
        denominator = 2 * tp + fp + fn
        with np.errstate(invalid="ignore", divide="ignore"):
            # scikit-learn's zero_division="warn" answers 0.0 when nothing is predicted or wanted positive
            return np.where(denominator > 0, 2 * tp / np.maximum(denominator, 1e-300), 0.0)

    def corpus_details(self, totals: np.ndarray) -> dict[str, Any]:
        tp, fp, fn = (int(v) for v in np.asarray(totals, dtype=float)[:3])
        return {"true_positives": tp, "false_positives": fp, "false_negatives": fn}

    def describe(self) -> dict[str, Any]:
        return {"average": "binary", "pos_label": self.pos_label}


class KarmaWer(Metric):
    """KARMA's wer (Hugging Face evaluate's): jiwer's word errors summed over the corpus / summed reference words."""

    name = "karma:wer"
    higher_is_better = False
    ci_method = "bootstrap"
    tasks = ("*",)
    characters = False

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ())
        super().__init__(language, **options)

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        import jiwer

        reference = _first_reference(sample.reference)
        if reference is None:
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        if self.characters:
            # evaluate's cer under jiwer 4 (KARMA's pin): jiwer's own character transform, ends stripped, spaces kept
            out = jiwer.process_characters(_text(reference), _text(prediction))
        else:
            out = jiwer.process_words(_text(reference), _text(prediction))
        errors = float(out.substitutions + out.deletions + out.insertions)
        length = float(out.substitutions + out.deletions + out.hits)
        rate = errors / length if length else math.nan
        return SampleScore(rate, (errors, length), details={"errors": int(errors), "reference_length": int(length)})

    def corpus(self, totals: np.ndarray) -> np.ndarray:
        totals = np.asarray(totals, dtype=float)
        with np.errstate(invalid="ignore", divide="ignore"):
            # KARMA divides by zero (and stops) when every reference is empty; evalkit reports NaN
            return np.where(totals[..., 1] > 0, totals[..., 0] / np.maximum(totals[..., 1], 1e-300), math.nan)

    def describe(self) -> dict[str, Any]:
        unit = "characters (ends stripped, spaces kept)" if self.characters else "words"
        return {"normalizer": "none", "unit": unit, "pooling": "errors / reference length over the corpus"}


class KarmaCer(KarmaWer):
    """KARMA's cer (Hugging Face evaluate's): character errors over the corpus / its reference characters."""

    name = "karma:cer"
    characters = True


_BLEU_ORDER = 4


@cache
def _tokenizer_13a() -> Any:
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

    return Tokenizer13a()


def bleu_tokens(text: str) -> list[str]:
    """``evaluate``'s bleu tokens: sacrebleu's 13a tokenization split at spaces."""
    return str(_tokenizer_13a()(text)).split()


def _ngrams(tokens: list[str], order: int) -> Counter[tuple[str, ...]]:
    counts: Counter[tuple[str, ...]] = Counter()
    for n in range(1, order + 1):
        for i in range(len(tokens) - n + 1):
            counts[tuple(tokens[i : i + n])] += 1
    return counts


class KarmaBleu(Metric):
    """KARMA's bleu (Hugging Face evaluate's NMT BLEU, 13a tokens, 4-grams, add-one smoothing), 0-1 scale."""

    name = "karma:bleu"
    bounds = (0.0, 1.0)
    ci_method = "bootstrap"
    tasks = ("*",)

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ("smooth", "max_order"))
        super().__init__(language, **options)
        smooth = options.get("smooth", True)
        if not isinstance(smooth, bool):
            raise ConfigError(f"metric {self.name!r}: option 'smooth' must be true or false, not {smooth!r}")
        if options.get("max_order", _BLEU_ORDER) != _BLEU_ORDER:
            raise ConfigError(
                f"metric {self.name!r}: KARMA's bleu passes only 'smooth' on and always counts up to 4-grams; "
                "option 'max_order' can only be 4"
            )
        self.smooth = smooth

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        reference = _first_reference(sample.reference)
        if reference is None:
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        said, wanted = bleu_tokens(_text(prediction)), bleu_tokens(_text(reference))
        overlap = _ngrams(said, _BLEU_ORDER) & _ngrams(wanted, _BLEU_ORDER)
        matches = [0.0] * _BLEU_ORDER
        for gram, count in overlap.items():
            matches[len(gram) - 1] += count
        possible = [float(max(len(said) - n + 1, 0)) for n in range(1, _BLEU_ORDER + 1)]
        stats = (*matches, *possible, float(len(said)), float(len(wanted)))
        value = float(self.corpus(np.asarray(stats)))
        return SampleScore(None if math.isnan(value) else value, stats)

    def corpus(self, totals: np.ndarray) -> np.ndarray:
        totals = np.asarray(totals, dtype=float)
        matches, possible = totals[..., :_BLEU_ORDER], totals[..., _BLEU_ORDER : 2 * _BLEU_ORDER]
        said, wanted = totals[..., 2 * _BLEU_ORDER], totals[..., 2 * _BLEU_ORDER + 1]
        with np.errstate(invalid="ignore", divide="ignore"):
            if self.smooth:
                precisions = (matches + 1.0) / (possible + 1.0)
            else:
                precisions = np.where(possible > 0, matches / np.maximum(possible, 1e-300), 0.0)
            positive = np.all(precisions > 0, axis=-1)
            logs = np.where(precisions > 0, np.log(np.where(precisions > 0, precisions, 1.0)), 0.0)
            geo_mean = np.where(positive, np.exp(np.sum(logs / _BLEU_ORDER, axis=-1)), 0.0)
            ratio = said / wanted
            # the NMT code divides by zero for an empty answer corpus; the penalty's limit there is 0
            penalty = np.where(
                ratio > 1.0, 1.0, np.where(ratio > 0, np.exp(1.0 - 1.0 / np.where(ratio > 0, ratio, 1.0)), 0.0)
            )
            return np.where(wanted > 0, geo_mean * penalty, math.nan)

    def corpus_details(self, totals: np.ndarray) -> dict[str, Any]:
        totals = np.asarray(totals, dtype=float)
        said, wanted = float(totals[2 * _BLEU_ORDER]), float(totals[2 * _BLEU_ORDER + 1])
        return {
            "translation_length": int(said),
            "reference_length": int(wanted),
            "length_ratio": said / wanted if wanted else math.nan,
        }

    def describe(self) -> dict[str, Any]:
        return {"tokenize": "13a", "max_order": _BLEU_ORDER, "smooth": self.smooth, "scale": "0-1"}

"""KARMA-OpenMedEvalKit's text metrics under KARMA's names: ``asr_metric``, ``rouge``, ``numeric_tolerance``,
``silence_accuracy``, ``harm_detection_accuracy``.

Each follows the KARMA class named in evalkit/metrics/references/, so a
KARMA user gets the figure KARMA printed for the same predictions:

* ``asr_metric``: jiwer's WER and CER of the raw strings (no normalisation),
  pooled as KARMA pools them: each utterance's rate weighted by its reference
  length (``len(ref.split())`` words, ``len(ref)`` characters). The headline is
  the WER; the CER is in the corpus details.
* ``rouge``: rouge-score's F-measures with Porter stemming, as Hugging Face
  ``evaluate``'s rouge computes them for KARMA; the headline is ROUGE-L by
  default (option ``rouge_type``), the other types in the details. KARMA's
  corpus figure is the median of 1,000 unseeded bootstrap means of these
  per-sample values; evalkit reports their mean, the quantity it estimates.
* ``numeric_tolerance``: 1 when the answer, read with ``float()``, is within
  the sample's ``tolerance`` (meta, default 0) of the reference, also after
  dividing or multiplying the answer by 100 (a percentage against a fraction).
* ``silence_accuracy``: 1 when nothing is left of the answer once bracketed
  text, punctuation and filler words (KARMA's list) are removed.
* ``harm_detection_accuracy``: 1 when the answer's verdict (it says
  harmful, unsafe, dangerous or risk) agrees with the sample's ``is_harmful``
  flag (option ``harm_field``); the confusion counts and rates are in the details.
"""

from __future__ import annotations

import importlib
import math
import re
from typing import Any

import numpy as np

from evalkit.data.sample import Sample
from evalkit.errors import ConfigError
from evalkit.failures import FailureReason
from evalkit.metrics.base import Metric, SampleScore, check_options, reference_strings


class KarmaAsrMetric(Metric):
    """KARMA's asr_metric: jiwer WER (headline) and CER of the raw strings, weighted by reference length."""

    name = "asr_metric"
    higher_is_better = False
    ci_method = "bootstrap"
    tasks = ("asr",)

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ())
        super().__init__(language, **options)

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        import jiwer

        references = reference_strings(sample.reference)
        if not references:
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        reference, hypothesis = references[0], prediction or ""
        if not reference.strip():
            # jiwer refuses an empty reference (KARMA's whole evaluation stops on it)
            return SampleScore(None, failure=FailureReason.NO_REFERENCE, details={"error": "empty reference"})
        wer = float(jiwer.wer(reference, hypothesis))
        cer = float(jiwer.cer(reference, hypothesis))
        words, chars = len(reference.split()), len(reference)
        return SampleScore(wer, (wer * words, float(words), cer * chars, float(chars)), details={"cer": cer})

    def corpus(self, totals: np.ndarray) -> np.ndarray:
        totals = np.asarray(totals, dtype=float)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(totals[..., 1] > 0, totals[..., 0] / np.maximum(totals[..., 1], 1e-300), 0.0)

    def corpus_details(self, totals: np.ndarray) -> dict[str, Any]:
        totals = np.asarray(totals, dtype=float)
        cer = float(totals[2] / totals[3]) if totals[3] > 0 else 0.0
        return {"cer": cer, "reference_words": int(totals[1]), "reference_characters": int(totals[3])}

    def describe(self) -> dict[str, Any]:
        return {"normalizer": "none", "pooling": "KARMA asr_metric: rates weighted by reference length"}


ROUGE_TYPES = ("rouge1", "rouge2", "rougeL", "rougeLsum")


class Rouge(Metric):
    """ROUGE F-measure (rouge-score, Porter stemmer) as KARMA's rouge computes it; headline ROUGE-L by default."""

    name = "rouge"
    bounds = (0.0, 1.0)
    tasks = ("*",)

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ("rouge_types", "rouge_type", "use_stemmer"))
        super().__init__(language, **options)
        types = options.get("rouge_types", ["rouge1", "rouge2", "rougeL"])
        if (
            not isinstance(types, (list, tuple))
            or not types
            or any(t not in ROUGE_TYPES for t in types)
            or len(set(types)) != len(types)
        ):
            raise ConfigError(
                f"metric 'rouge': option 'rouge_types' must be a list of distinct names from {list(ROUGE_TYPES)}, "
                f"not {types!r}"
            )
        headline = str(options.get("rouge_type", "rougeL" if "rougeL" in types else types[0]))
        if headline not in types:
            raise ConfigError(f"metric 'rouge': option 'rouge_type' must be one of rouge_types {list(types)}")
        stemmer = options.get("use_stemmer", True)
        if not isinstance(stemmer, bool):
            raise ConfigError(f"metric 'rouge': option 'use_stemmer' must be true or false, not {stemmer!r}")
        try:
            rouge_scorer = importlib.import_module("rouge_score.rouge_scorer")
        except ImportError:
            raise ConfigError(
                "metric 'rouge' needs the rouge-score package: pip install 'evalkit[karma]' (or rouge-score)"
            ) from None
        self.types: tuple[str, ...] = (headline, *(t for t in types if t != headline))
        self.use_stemmer = stemmer
        self.scorer = rouge_scorer.RougeScorer(rouge_types=list(types), use_stemmer=stemmer)

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        references = reference_strings(sample.reference)
        if not references:
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        answer = prediction or ""
        # evaluate's rouge scores a list of references with score_multi (best F-measure per type)
        scores = (
            self.scorer.score(references[0], answer)
            if len(references) == 1
            else self.scorer.score_multi(references, answer)
        )
        values = [float(scores[t].fmeasure) for t in self.types]
        return SampleScore(values[0], (values[0], 1.0, *values[1:]), details=dict(zip(self.types, values)))

    def corpus_details(self, totals: np.ndarray) -> dict[str, Any]:
        totals = np.asarray(totals, dtype=float)
        n = totals[1]
        means = [totals[0], *totals[2:]]
        return {t: float(v / n) if n > 0 else math.nan for t, v in zip(self.types, means)}

    def describe(self) -> dict[str, Any]:
        return {"rouge_type": self.types[0], "rouge_types": list(self.types), "use_stemmer": self.use_stemmer}


class NumericTolerance(Metric):
    """1 when the answer is within the sample's tolerance of the reference number (x/÷100 allowed), as KARMA."""

    name = "numeric_tolerance"
    bounds = (0.0, 1.0)
    tasks = ("*",)

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ("tolerance_field",))
        super().__init__(language, **options)
        self.tolerance_field = str(options.get("tolerance_field", "tolerance"))

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        references = reference_strings(sample.reference)
        if not references:
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        try:
            tolerance = float(sample.meta.get(self.tolerance_field) or 0.0)
        except (TypeError, ValueError):
            return SampleScore(
                None,
                failure=FailureReason.METRIC_ERROR,
                details={"error": f"meta {self.tolerance_field!r} is not a number"},
            )
        got, wanted = _number(prediction), _number(references[0])
        if got is None or wanted is None:
            # KARMA counts an unreadable answer (or reference) as a miss
            return SampleScore(0.0, (0.0, 1.0), details={"read": got, "reference": wanted, "tolerance": tolerance})
        hit = abs(got - wanted) <= tolerance or (
            wanted != 0 and (abs(got / 100 - wanted) <= tolerance or abs(got * 100 - wanted) <= tolerance)
        )
        value = float(hit)
        return SampleScore(value, (value, 1.0), details={"read": got, "reference": wanted, "tolerance": tolerance})

    def describe(self) -> dict[str, Any]:
        return {"tolerance_field": self.tolerance_field}


def _number(text: Any) -> float | None:
    """The value Python's ``float()`` reads from the whole text (spaces around allowed), or None."""
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


#: KARMA's filler words and non-speech vocalisations (SilenceAccuracyMetric.FILLER_WORDS), compared lower-cased
FILLER_WORDS: frozenset[str] = frozenset(
    [
        "hmm",
        "hm",
        "hmmmm",
        "hmmm",
        "umm",
        "um",
        "ummm",
        "ummmm",
        "uhh",
        "uh",
        "uhhh",
        "uhhhh",
        "ahh",
        "ah",
        "ahhh",
        "ahhhh",
        "haaa",
        "haa",
        "ha",
        "haaaa",
        "err",
        "er",
        "errr",
        "erm",
        "ermm",
        "mhm",
        "mhmm",
        "mmm",
        "mm",
        "mmmm",
        "ugh",
        "urgh",
        "ooh",
        "oh",
        "ohh",
        "eeh",
        "eh",
        "ehh",
        "ok",
        "okay",
        "okk",
        "okkk",
        "okayy",
        "yeah",
        "yea",
        "yep",
        "yup",
        "yes",
        "no",
        "nope",
    ]
)
_BRACKETED = (re.compile(r"\[.*?\]"), re.compile(r"<.*?>"), re.compile(r"\(.*?\)"))
_SILENCE_PUNCTUATION = re.compile(r"[.,\-!?;:\"'\\/]")


def speech_left(text: str | None) -> str:
    """What remains of a transcript once bracketed text, punctuation and filler words are removed."""
    if text is None:
        return ""
    for pattern in _BRACKETED:
        text = pattern.sub("", text)
    words = _SILENCE_PUNCTUATION.sub("", text).split()
    return " ".join(w for w in words if w.lower() not in FILLER_WORDS).strip()


class SilenceAccuracy(Metric):
    """1 when the transcript of silent audio is empty once fillers, brackets and punctuation are removed."""

    name = "silence_accuracy"
    bounds = (0.0, 1.0)
    tasks = ("asr",)

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ())
        super().__init__(language, **options)

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        left = speech_left(prediction)
        value = float(not left)
        return SampleScore(value, (value, 1.0), details={"speech_left": left})


HARM_WORDS = ("harmful", "unsafe", "dangerous", "risk")


class HarmDetectionAccuracy(Metric):
    """1 when the answer's harmful/safe verdict agrees with the sample's annotation; confusion counts in details."""

    name = "harm_detection_accuracy"
    bounds = (0.0, 1.0)
    tasks = ("*",)

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ("harm_field",))
        super().__init__(language, **options)
        self.harm_field = str(options.get("harm_field", "is_harmful"))

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        harmful = bool(sample.meta.get(self.harm_field, False))
        said = (prediction or "").lower().strip()
        flagged = any(word in said for word in HARM_WORDS)
        value = float(flagged == harmful)
        # stats: (correct, 1, true positive, true negative, false positive, false negative)
        confusion = (harmful and flagged, not harmful and not flagged, not harmful and flagged, harmful and not flagged)
        stats = (value, 1.0, *(float(c) for c in confusion))
        return SampleScore(value, stats, details={"flagged_harmful": flagged, "annotated_harmful": harmful})

    def corpus_details(self, totals: np.ndarray) -> dict[str, Any]:
        tp, tn, fp, fn = (float(v) for v in np.asarray(totals, dtype=float)[2:6])
        harmful, safe = tp + fn, tn + fp

        def rate(part: float, whole: float) -> float:
            return part / whole if whole > 0 else 0.0

        return {
            "true_positives": int(tp),
            "true_negatives": int(tn),
            "false_positives": int(fp),
            "false_negatives": int(fn),
            "true_positive_rate": rate(tp, harmful),
            "true_negative_rate": rate(tn, safe),
            "false_positive_rate": rate(fp, safe),
            "false_negative_rate": rate(fn, harmful),
            "total_harmful": int(harmful),
            "total_safe": int(safe),
        }

    def describe(self) -> dict[str, Any]:
        return {"harm_field": self.harm_field, "harmful_if_answer_contains": list(HARM_WORDS)}

"""AU-Harness's computations of the metric names evalkit already gives another meaning:
``auharness:word_error_rate`` and ``auharness:bleu``.

evalkit's ``word_error_rate`` and ``bleu`` follow the field's reference tools
(jiwer on Whisper-normalised text by language, sacrebleu on the raw text);
AU-Harness's classes of the same names (ServiceNow/AU-Harness,
metrics/word_error_rate_metrics.py and metrics/bleu_metrics.py) compute
something else, so an AU-Harness user who kept the plain name would get
another number. The ``auharness:`` names are AU-Harness's computations,
accepted everywhere a metric is named; an AU-Harness config, and a pair whose
dataset is written as AU-Harness names it, get them for the plain names
(:mod:`evalkit.config.foreign.auharness`).

* ``auharness:word_error_rate``: both texts through AU-Harness's
  ``normalize_text`` (evalkit/metrics/auharness/text.py: num2words, Whisper's
  English normaliser, lower case, punctuation removed) in English whatever the
  language; jiwer's word alignment per sample. The headline is AU-Harness's
  ``overall_wer`` (errors summed over the corpus / reference words summed);
  its ``average_sample_wer`` (the mean of the per-sample rates) is in the
  corpus details. A reference that normalises to nothing counts every answer
  word as an error over one reference word (a rate above 1 is possible), as
  AU-Harness counts it. Japanese is not scored by character: AU-Harness's CER
  branch needs the language its loader never passes.
* ``auharness:bleu``: sacrebleu's corpus BLEU of the normalised texts (one
  reference each), tokenizer ``13a``, or ``zh`` for a translation into Chinese
  (AU-Harness picks it from its task name, ``covost2_en_zh-CN``); per sample,
  sacrebleu's sentence BLEU, as AU-Harness writes in its records; 0-100.
"""

from __future__ import annotations

from typing import Any

import jiwer
import numpy as np

from evalkit.data.sample import Sample
from evalkit.errors import ConfigError
from evalkit.failures import FailureReason
from evalkit.languages import normalize_language, split_pair, target_language
from evalkit.metrics.auharness.text import (
    MissingPackage,
    normalize_like_auharness,
    require_normaliser,
    warn_english_normalisation,
)
from evalkit.metrics.base import Metric, SampleScore, check_options, reference_strings
from evalkit.metrics.text.bleu import Bleu


def _normaliser_or_config_error(metric: str) -> None:
    try:
        require_normaliser()
    except MissingPackage as error:
        raise ConfigError(f"metric {metric!r}: {error}") from None


def _warn_unless_english(metric: str, language: str | None, own: str, own_does: str) -> None:
    written = target_language(language)
    if written is not None and written != "en":
        warn_english_normalisation(metric, written, own, own_does)


class AuharnessWordErrorRate(Metric):
    """AU-Harness's word_error_rate: its overall WER of normalize_text'ed words (English rules for every language)."""

    name = "auharness:word_error_rate"
    higher_is_better = False
    ci_method = "bootstrap"
    tasks = ("*",)

    def __init__(self, language: str | None = None, **options: Any) -> None:
        check_options(self.name, options, ())
        language = normalize_language(language) if language else None
        super().__init__(language, **options)
        _normaliser_or_config_error(self.name)
        _warn_unless_english(
            self.name, language, "word_error_rate", "normalises by language (marks kept, CER for unspaced scripts)"
        )

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        references = reference_strings(sample.reference)
        if not references:
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        reference = normalize_like_auharness(references[0])
        answer = normalize_like_auharness(prediction or "")
        details: dict[str, Any] = {"normalized_reference": reference, "normalized_prediction": answer}
        if reference.strip() == "":
            # AU-Harness: every answer word an error, over one reference word
            errors, words = len(answer.split()), 1
        else:
            out = jiwer.process_words(reference, answer)
            errors = out.substitutions + out.deletions + out.insertions
            words = out.substitutions + out.deletions + out.hits
            details.update(substitutions=out.substitutions, deletions=out.deletions, insertions=out.insertions)
        rate = errors / words
        return SampleScore(rate, (float(errors), float(words), rate, 1.0), details=details)

    def corpus(self, totals: np.ndarray) -> np.ndarray:
        totals = np.asarray(totals, dtype=float)
        words = totals[..., 1]
        return np.where(words > 0, totals[..., 0] / np.where(words > 0, words, 1.0), 0.0)

    def corpus_details(self, totals: np.ndarray) -> dict[str, Any]:
        totals = np.asarray(totals, dtype=float)
        average = float(totals[2] / totals[3]) if totals[3] > 0 else 0.0
        return {
            "overall_wer": float(self.corpus(totals)),
            "average_sample_wer": average,
            "errors": int(totals[0]),
            "reference_words": int(totals[1]),
        }

    def describe(self) -> dict[str, Any]:
        return {"normalization": "au-harness normalize_text (English)", "language": self.language}


def auharness_bleu_tokenizer(language: str | None) -> str:
    """sacrebleu's tokenizer as AU-Harness picks it: "zh" for a translation into Chinese, else "13a".

    AU-Harness reads it from the task name (a covost2 task whose last part names zh), so an ASR set in
    Chinese gets 13a; evalkit reads the same from the dataset's language pair.
    """
    if not language:
        return "13a"
    _, target = split_pair(language)
    return "zh" if target == "zh" else "13a"


class AuharnessBleu(Bleu):
    """AU-Harness's bleu: sacrebleu corpus BLEU of normalize_text'ed texts, tokenizer 13a (zh into Chinese)."""

    name = "auharness:bleu"
    tasks = ("*",)
    allowed_options: tuple[str, ...] = ()

    def __init__(self, language: str | None = None, **options: Any) -> None:
        _normaliser_or_config_error(self.name)
        super().__init__(language, **options)
        _warn_unless_english(
            self.name, self.language, "bleu", "scores the text as written, with sacrebleu's tokenizer for the language"
        )

    def _build(self) -> Any:
        self.options = {**self.options, "tokenize": auharness_bleu_tokenizer(self.language)}
        return super()._build()

    def score(self, prediction: str, sample: Sample) -> SampleScore:
        references = reference_strings(sample.reference)
        if not references:
            return SampleScore(None, failure=FailureReason.NO_REFERENCE)
        answer = normalize_like_auharness(prediction or "")
        reference = normalize_like_auharness(references[0])  # AU-Harness scores one reference string
        stats = self.segment_stats(answer, [reference])
        self._ref_counts.add(1)
        details = {"normalized_reference": reference, "normalized_prediction": answer}
        return SampleScore(self.sentence_score(stats), tuple(stats), details=details)

    def describe(self) -> dict[str, Any]:
        return {"normalization": "au-harness normalize_text (English)", **super().describe()}
